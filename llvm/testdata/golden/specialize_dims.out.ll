target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define internal i32 @global_x() {
  %t = call range(i32 0, 128) i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %b = call range(i32 0, 64) i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %bn = mul i32 %b, 128
  %i = add i32 %bn, %t
  ret i32 %i
}

define ptx_kernel void @stencil(ptr addrspace(1) %p) {
  %i = call i32 @global_x()
  %ty = call range(i32 0, 2) i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %row = mul i32 %ty, 64
  %col = add i32 %row, %i
  %w = mul i32 2, 32
  %k = add i32 %col, %w
  %q = getelementptr inbounds i32, ptr addrspace(1) %p, i32 %k
  store i32 %k, ptr addrspace(1) %q, align 4
  ret void
}

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 0, 1024) i32 @llvm.nvvm.read.ptx.sreg.tid.x() #0

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 0, 1024) i32 @llvm.nvvm.read.ptx.sreg.tid.y() #0

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 0, 2147483647) i32 @llvm.nvvm.read.ptx.sreg.ctaid.x() #0

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 1, 1025) i32 @llvm.nvvm.read.ptx.sreg.ntid.x() #0

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 1, 1025) i32 @llvm.nvvm.read.ptx.sreg.ntid.y() #0

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 1, -2147483648) i32 @llvm.nvvm.read.ptx.sreg.nctaid.x() #0

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare noundef range(i32 1, 65536) i32 @llvm.nvvm.read.ptx.sreg.nctaid.y() #0

attributes #0 = { nocallback nofree nosync nounwind speculatable willreturn memory(none) }
