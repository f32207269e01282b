target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define i32 @twice(i32 %x) {
  %y = shl i32 %x, 1
  ret i32 %y
}

define ptx_kernel void @left(ptr addrspace(1) %p) #0 {
  %v = call i32 @twice(i32 3)
  store i32 %v, ptr addrspace(1) %p, align 4
  ret void
}

attributes #0 = { "nvvm.maxntid"="256" }

!nvvm.annotations = !{}
