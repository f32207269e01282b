; Internalizing all but the kernel and then pruning removes the functions and
; globals nothing uses (@unused, @orphan, @dead_global), keeps what the kernel
; reaches; the unused declaration goes too.
; golden: internalize keep=kern
; golden: drop-dead

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@live_global = addrspace(1) externally_initialized global i32 3, align 4
@dead_global = addrspace(1) externally_initialized global i32 4, align 4

define i32 @used(i32 %x) {
  %g = load i32, ptr addrspace(1) @live_global, align 4
  %y = add i32 %x, %g
  ret i32 %y
}

define i32 @unused(i32 %x) {
  %y = call i32 @orphan(i32 %x)
  ret i32 %y
}

define i32 @orphan(i32 %x) {
  ret i32 %x
}

define ptx_kernel void @kern(ptr addrspace(1) %p) {
  %v = call i32 @used(i32 1)
  store i32 %v, ptr addrspace(1) %p, align 4
  ret void
}

declare i32 @never_called(i32)
