// Float arithmetic whose result bits depend on multiply-add contraction.
#define __global__ __attribute__((global))

__global__ void axpb(float *y, const float *x, float a, float b, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i < n) {
    float t = a * x[i] + b;
    y[i] = t * x[i] - a * b;
  }
}
