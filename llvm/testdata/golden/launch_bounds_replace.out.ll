target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

; Function Attrs: convergent nounwind
define ptx_kernel void @saxpy(ptr addrspace(1) %p) #0 {
  store i32 1, ptr addrspace(1) %p, align 4
  ret void
}

attributes #0 = { convergent nounwind "nvvm.maxntid"="128" "target-cpu"="sm_90" }
