// Kernels whose written element types KernelWrites must find. Built as
// kernels.cu is (see helpers_test.go).
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))

__device__ float device_sum;
__device__ int device_count;

__device__ unsigned tid() {
  return __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
         __nvvm_read_ptx_sreg_tid_x();
}

__global__ void store_float(float *out, const float *in) {
  out[tid()] = in[tid()] * 2.0f;
}

__global__ void store_double(double *out, const double *in) {
  out[tid()] = in[tid()] + 1.0;
}

__global__ void atomic_float(float *sum, const float *in) {
  __nvvm_atom_add_gen_f(sum, in[tid()]);
  __nvvm_atom_add_gen_f(&device_sum, in[tid()]);
}

__global__ void store_int(int *out, int v) {
  out[tid()] = v;
  device_count = v;
}

struct Rec {
  float x;
  int y;
};

__global__ void store_struct(char *base, Rec r) {
  *(Rec *)(base + 16 * tid()) = r;
}

__global__ void store_loaded(float **rows, int *flags) {
  rows[tid()][0] = 1.0f;
  flags[tid()] = 0;
}

__global__ void store_selected(float *a, float *b, bool first) {
  float *p = first ? a : b;
  p[tid()] = 3.0f;
}

__device__ void put(double *p, double v) { p[tid()] = v; }

__global__ void store_in_callee(double *out) { put(out, 2.0); }

struct Views {
  float *out;
  int n;
};

__global__ void store_field(Views v) { v.out[tid()] = 1.0f; }

typedef float float4v __attribute__((ext_vector_type(4)));

__global__ void store_vector(float4v *out) {
  out[tid()] = (float4v){1, 2, 3, 4};
}

__global__ void compare_swap(int *lock, char *bytes) {
  __nvvm_atom_cas_gen_i(lock, 0, 1);
  __builtin_memset(bytes + 64 * tid(), 0, 64);
}
