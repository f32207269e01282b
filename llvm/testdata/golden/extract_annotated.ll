; Kernels marked in legacy !nvvm.annotations, which LLVM upgrades as it reads
; the module (ptx_kernel, "nvvm.maxntid"): extracting @left keeps the device
; function both kernels call and drops @right.
; golden: extract kernel=left

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define i32 @twice(i32 %x) {
  %y = shl i32 %x, 1
  ret i32 %y
}

define void @left(ptr addrspace(1) %p) {
  %v = call i32 @twice(i32 3)
  store i32 %v, ptr addrspace(1) %p, align 4
  ret void
}

define void @right(ptr addrspace(1) %p) {
  %v = call i32 @twice(i32 5)
  store i32 %v, ptr addrspace(1) %p, align 4
  ret void
}

!nvvm.annotations = !{!0, !1, !2}
!0 = !{ptr @left, !"kernel", i32 1}
!1 = !{ptr @right, !"kernel", i32 1}
!2 = !{ptr @left, !"maxntidx", i32 256}
