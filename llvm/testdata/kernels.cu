// Test kernels for the llvm package. Built device-only without CUDA headers:
//   clang++-22 -x cuda --cuda-device-only -nocudainc -nocudalib
//     --cuda-gpu-arch=sm_90 -Xclang -target-feature -Xclang +ptx80 -O3
//     -Xclang -disable-llvm-passes -emit-llvm -c kernels.cu -o kernels.bc
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))

struct Pair {
  int a;
  float b;
};

__device__ float scale_factor = 2.0f;
__device__ int unrelated_counter = 0;

// Called by loop_kernel only; reads a __device__ global.
__device__ float scaled(float x) { return x * scale_factor; }

// A loop whose trip count is a kernel argument.
__global__ void loop_kernel(float *out, const float *in, int n, float alpha) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  float acc = 0.0f;
  for (int j = 0; j < n; j++)
    acc += scaled(in[i + j]) * alpha;
  out[i] = acc;
}

// Uses nothing loop_kernel uses.
__global__ void unrelated_kernel(int *p) {
  p[0] = unrelated_counter;
  unrelated_counter++;
}

// Scalar arguments of every width, a struct by value and launch bounds.
__global__ __launch_bounds__(256, 2) void mixed_kernel(Pair pair, double d,
                                                       short s, char c, bool b,
                                                       long long l, float *o) {
  o[0] = pair.a + pair.b + d + s + c + b + l;
}

// Two kernels sharing a helper that reads the block size.
__device__ unsigned linear_index() {
  return __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
         __nvvm_read_ptx_sreg_tid_x();
}
__global__ void dims_a(unsigned *out) {
  out[linear_index()] = __nvvm_read_ptx_sreg_nctaid_x();
}
__global__ void dims_b(unsigned *out) { out[linear_index()] = 7; }
