// The heat stencil of examples/heat2d, compiled without the CUDA headers:
// clang's own header gives blockIdx, blockDim and threadIdx.
#include <__clang_cuda_builtin_vars.h>
#define __global__ __attribute__((global))
#include "../../examples/heat2d/heat_step.cuh"

// The same stencil with the bound the example leaves out, and a clamped
// variant: both keep threads past the plate away from memory.
__global__ void heat_step_guarded(const float *u, float *un, int nx, int ny,
                                  float r) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= nx * ny)
    return;
  int x = idx % nx, y = idx / nx;
  if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
    un[idx] = u[idx];
    return;
  }
  un[idx] = u[idx] + r * (u[idx - 1] + u[idx + 1] + u[idx - nx] + u[idx + nx] -
                          4 * u[idx]);
}

__global__ void copy_clamped(float *out, const float *in, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int i = idx < n - 1 ? idx : n - 1;
  out[i] = in[i];
}

// A lower-bound test alone (x > 0) bounds nothing from above.
__global__ void shift_left(float *out, const float *in) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  out[idx] = idx > 0 ? in[idx - 1] : 0.0f;
}

// A bound on the column alone: x = idx % nx never leaves its row, but the
// row y = idx / nx still runs past the plate.
__global__ void heat_step_columns(const float *u, float *un, int nx, float r) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int x = idx % nx;
  if (x > 0 && x < nx - 1)
    un[idx] = u[idx] + r * (u[idx - 1] + u[idx + 1] - 2 * u[idx]);
}

// The interior test bounds the row too.
__global__ void heat_step_interior(const float *u, float *un, int nx, int ny,
                                   float r) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int x = idx % nx, y = idx / nx;
  if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1)
    un[idx] = u[idx] + r * (u[idx - 1] + u[idx + 1] + u[idx - nx] +
                            u[idx + nx] - 4 * u[idx]);
}

// An index wrapped into the data needs no guard.
__global__ void ring(float *out, const float *in, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  out[idx % n] = in[(idx + 1) % n];
}
