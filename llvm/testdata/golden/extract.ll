; Extracting @reduce keeps it, the device function it calls, the global that
; function reads, the global its initializer points to and the declaration it
; calls; the other kernel, its helper and its global go, and llvm.used and
; llvm.compiler.used keep only surviving members. Module flags stay.
; golden: extract kernel=reduce

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@table = internal addrspace(1) global [4 x i32] [i32 1, i32 2, i32 3, i32 4], align 4
@tableptr = addrspace(1) externally_initialized global ptr addrspace(1) @table, align 8
@other_state = addrspace(1) externally_initialized global i32 0, align 4
@llvm.used = appending global [2 x ptr] [ptr addrspacecast (ptr addrspace(1) @tableptr to ptr), ptr addrspacecast (ptr addrspace(1) @other_state to ptr)], section "llvm.metadata"
@llvm.compiler.used = appending global [1 x ptr] [ptr addrspacecast (ptr addrspace(1) @other_state to ptr)], section "llvm.metadata"

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

define i32 @bump() {
  %v = load i32, ptr addrspace(1) @other_state, align 4
  %w = add i32 %v, 1
  store i32 %w, ptr addrspace(1) @other_state, align 4
  ret i32 %w
}

define ptx_kernel void @unrelated(ptr addrspace(1) %out) {
  %v = call i32 @bump()
  store i32 %v, ptr addrspace(1) %out, align 4
  ret void
}

declare i32 @__nv_abs(i32)
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

!llvm.module.flags = !{!0}
!0 = !{i32 4, !"nvvm-reflect-ftz", i32 0}
