// Test kernels for the jit package, compiled without CUDA headers
// (-nocudainc), hence the attribute spellings and NVVM builtins.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))

__device__ float scale(float v, float a) { return a * v; }

// y[i] = sum over `rounds` of a*x[i]: the loop bound is an argument, so
// specializing it turns the trip count into a literal.
__global__ void repeat_axpy(int n, int rounds, float a, const float *x,
                            float *y) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i >= n)
    return;
  float acc = y[i];
  for (int r = 0; r < rounds; r++)
    acc += scale(x[i], a);
  y[i] = acc;
}

extern "C" __global__ void vecadd(const float *a, const float *b, float *c,
                                  int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i < n)
    c[i] = a[i] + b[i];
}

// A device global the host reads and writes by name.
__device__ float g_total;
extern "C" __global__ void accumulate(const float *x, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i < n)
    __nvvm_atom_add_gen_f(&g_total, x[i]);
}
