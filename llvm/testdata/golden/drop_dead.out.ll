target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@external_unused = addrspace(1) global i32 2, align 4

define internal i32 @internal_used(i32 %x) {
  ret i32 %x
}

define i32 @external_unused_fn(i32 %x) {
  ret i32 %x
}

define ptx_kernel void @kern(ptr addrspace(1) %p) {
  %v = call i32 @internal_used(i32 1)
  store i32 %v, ptr addrspace(1) %p, align 4
  ret void
}
