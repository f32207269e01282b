// A vector add, the size of kernel the compile benchmark measures.
#define __global__ __attribute__((global))

__global__ void vecadd(const float *a, const float *b, float *c, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i < n)
    c[i] = a[i] + b[i];
}
