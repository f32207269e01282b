target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@counter = addrspace(1) externally_initialized global i32 0, align 4
@scratch = internal addrspace(1) externally_initialized global i32 0, align 4
@pinned = addrspace(1) global i32 7, align 4
@llvm.used = appending global [1 x ptr] [ptr addrspacecast (ptr addrspace(1) @pinned to ptr)], section "llvm.metadata"
@llvm.compiler.used = appending global [1 x ptr] [ptr addrspacecast (ptr addrspace(1) @counter to ptr)], section "llvm.metadata"

define internal i32 @helper(i32 %x) {
  %y = call i32 @extern_fn(i32 %x)
  %z = call i32 @local(i32 %y)
  %w = call i32 @inlined(i32 %z)
  ret i32 %w
}

define internal i32 @local(i32 %x) {
  ret i32 %x
}

define available_externally i32 @inlined(i32 %x) {
  ret i32 %x
}

define ptx_kernel void @kern(ptr addrspace(1) %p) {
  %v = load i32, ptr addrspace(1) @counter, align 4
  %s = load i32, ptr addrspace(1) @scratch, align 4
  %a = add i32 %v, %s
  %h = call i32 @helper(i32 %a)
  store i32 %h, ptr addrspace(1) %p, align 4
  ret void
}

declare i32 @extern_fn(i32)
