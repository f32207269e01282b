// A translation unit that does not define saxpy.
#define __global__ __attribute__((global))
__global__ void unrelated(int *p) { *p = 7; }
