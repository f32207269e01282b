target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@live_global = internal addrspace(1) externally_initialized global i32 3, align 4

define internal i32 @used(i32 %x) {
  %g = load i32, ptr addrspace(1) @live_global, align 4
  %y = add i32 %x, %g
  ret i32 %y
}

define ptx_kernel void @kern(ptr addrspace(1) %p) {
  %v = call i32 @used(i32 1)
  store i32 %v, ptr addrspace(1) %p, align 4
  ret void
}
