; Bounds from __launch_bounds__(1024, 2) are replaced: the new maximum takes
; the old one's place and min 0 removes the minimum blocks per SM.
; golden: launch-bounds kernel=saxpy max=128 min=0

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @saxpy(ptr addrspace(1) %p) #0 {
  store i32 1, ptr addrspace(1) %p, align 4
  ret void
}

attributes #0 = { convergent nounwind "nvvm.maxntid"="1024" "nvvm.minctasm"="2" "target-cpu"="sm_90" }
