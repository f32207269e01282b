target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@table = internal addrspace(1) global [4 x i32] [i32 1, i32 2, i32 3, i32 4], align 4
@tableptr = addrspace(1) externally_initialized global ptr addrspace(1) @table, align 8
@llvm.used = appending global [1 x ptr] [ptr addrspacecast (ptr addrspace(1) @tableptr to ptr)], section "llvm.metadata"

define internal i32 @lookup(i32 %i) {
  %tp = load ptr addrspace(1), ptr addrspace(1) @tableptr, align 8
  %p = getelementptr inbounds i32, ptr addrspace(1) %tp, i32 %i
  %v = load i32, ptr addrspace(1) %p, align 4
  %w = call i32 @__nv_abs(i32 %v)
  ret i32 %w
}

define ptx_kernel void @reduce(ptr addrspace(1) %out) {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %v = call i32 @lookup(i32 %t)
  %r = atomicrmw add ptr addrspace(1) %out, i32 %v monotonic, align 4
  ret void
}

declare i32 @__nv_abs(i32)

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 0, 1024) i32 @llvm.nvvm.read.ptx.sreg.tid.x() #0

attributes #0 = { nocallback nofree nosync nounwind speculatable willreturn memory(none) }

!llvm.module.flags = !{!0}

!0 = !{i32 4, !"nvvm-reflect-ftz", i32 0}
