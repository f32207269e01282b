; A device function that another kernel also calls is not changed in place:
; the specialized kernel calls a clone (@width.dims) with the block size
; folded, and the other kernel keeps calling the original.
; golden: specialize-dims kernel=first block=256,1,1 grid=8,1,1

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define i32 @width() {
  %n = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  ret i32 %n
}

define ptx_kernel void @first(ptr addrspace(1) %p) {
  %w = call i32 @width()
  store i32 %w, ptr addrspace(1) %p, align 4
  ret void
}

define ptx_kernel void @second(ptr addrspace(1) %p) {
  %w = call i32 @width()
  %g = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %s = add i32 %w, %g
  store i32 %s, ptr addrspace(1) %p, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
