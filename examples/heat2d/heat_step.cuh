// heat_step: one explicit step of the 2-D heat equation, one thread per cell
// of an nx x ny plate stored row by row. The launch must cover the cells
// exactly: the index is never checked against nx * ny, only compared for
// equality to find the edges, which keep their values. Kept in its own file
// so that the launch-safety analysis's test (llvm/testdata/heat2d.cu)
// compiles this very kernel without the CUDA headers.
#pragma once

__global__ void heat_step(const float *u, float *un, int nx, int ny, float r) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int x = idx % nx, y = idx / nx;
  if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
    un[idx] = u[idx];
    return;
  }
  un[idx] = u[idx] + r * (u[idx - 1] + u[idx + 1] + u[idx - nx] + u[idx + nx] -
                          4 * u[idx]);
}
