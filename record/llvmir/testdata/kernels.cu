// Device code for the tests, compiled without CUDA headers (-nocudainc).
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))

__device__ float twice(float v) { return v * 2.0f; }

__global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i < n)
    y[i] = twice(a) * x[i] + y[i];
}

struct Pair {
  int a;
  double b;
};
__global__ void other(int *p, Pair q, bool flag) { *p = flag ? q.a : (int)q.b; }
