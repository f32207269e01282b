target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define i32 @width() {
  %n = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  ret i32 %n
}

define ptx_kernel void @first(ptr addrspace(1) %p) {
  %w = call i32 @width.dims()
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

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 1, 1025) i32 @llvm.nvvm.read.ptx.sreg.ntid.x() #0

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 1, -2147483648) i32 @llvm.nvvm.read.ptx.sreg.nctaid.x() #0

define internal i32 @width.dims() {
  ret i32 256
}

attributes #0 = { nocallback nofree nosync nounwind speculatable willreturn memory(none) }
