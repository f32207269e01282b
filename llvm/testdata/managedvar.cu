// Kernels reading a variable clang would make __managed__. clang-22 ignores
// __managed__ in CUDA mode (the variable stays a __device__ one), so the
// test marks `counter` managed in !nvvm.annotations, as NVVM IR does.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))

__device__ int counter;
__device__ float table[4] = {1, 2, 3, 4};

// Reaches counter only through a helper.
__device__ int bump() { return counter++; }
__global__ void uses_managed(float *x) { x[bump()] = 1; }

// Reaches table, never counter.
__global__ void uses_plain(float *x, int i) { x[i] = table[i]; }

// Reaches no global variable.
__global__ void uses_none(float *x) { x[0] = 2; }
