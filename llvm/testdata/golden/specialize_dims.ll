; Block and grid sizes become constants in the kernel and in the device
; function it calls; thread and block indices get the range [0, size).
; golden: specialize-dims kernel=stencil block=128,2,1 grid=64,32,1

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define internal i32 @global_x() {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %n = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %bn = mul i32 %b, %n
  %i = add i32 %bn, %t
  ret i32 %i
}

define ptx_kernel void @stencil(ptr addrspace(1) %p) {
  %i = call i32 @global_x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %gx = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %gy = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.y()
  %row = mul i32 %ty, %gx
  %col = add i32 %row, %i
  %w = mul i32 %ny, %gy
  %k = add i32 %col, %w
  %q = getelementptr inbounds i32, ptr addrspace(1) %p, i32 %k
  store i32 %k, ptr addrspace(1) %q, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.y()
