; The scalar n is folded in as a constant; the pointers x and y stay arguments.
; golden: specialize-arg kernel=scale index=2 value=i32:1024

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @scale(ptr addrspace(1) %x, ptr addrspace(1) %y, i32 %n, float %a) {
entry:
  %i = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done

body:
  %px = getelementptr inbounds float, ptr addrspace(1) %x, i32 %i
  %v = load float, ptr addrspace(1) %px, align 4
  %s = fmul float %v, %a
  %py = getelementptr inbounds float, ptr addrspace(1) %y, i32 %i
  store float %s, ptr addrspace(1) %py, align 4
  br label %done

done:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
