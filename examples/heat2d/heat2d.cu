// heat2d: explicit steps of the 2-D heat equation on a 1024 x 1024 plate
// with fixed edges, in the style of many published teaching codes: one
// thread per cell on a 1-D launch of 256-thread blocks whose grid covers the
// cells exactly, so the kernel never checks its index against the cell
// count. The edges are found by equality tests on the cell's coordinates.
// Any block that does not divide the 1 Mi cells makes the last block read
// and write past both arrays. Checks the result against the host and prints
// a checksum, then times the kernel (common/timer.h).
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "../common/check.h"
#include "../common/timer.h"
#include "heat_step.cuh"

int main() {
  const int nx = 1024, ny = 1024, steps = 20, threads = 256;
  const float r = 0.2f;
  const size_t n = size_t(nx) * ny, bytes = n * sizeof(float);
  std::vector<float> a(n);
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x)
      a[size_t(y) * nx + x] =
          (y == 0) ? 100.0f : float((x * 7 + y * 3) % 50) / 10.0f;
  std::vector<float> b = a;
  float *d_u, *d_un;
  CHECK(cudaMalloc(&d_u, bytes));
  CHECK(cudaMalloc(&d_un, bytes));
  CHECK(cudaMemcpy(d_u, a.data(), bytes, cudaMemcpyHostToDevice));
  const int blocks = int(n / threads); // exact: 1 Mi cells, 256 per block
  for (int s = 0; s < steps; ++s) {
    heat_step<<<blocks, threads>>>(d_u, d_un, nx, ny, r);
    CHECK(cudaGetLastError());
    std::swap(d_u, d_un);
  }
  std::vector<float> gpu(n);
  CHECK(cudaMemcpy(gpu.data(), d_u, bytes, cudaMemcpyDeviceToHost));

  for (int s = 0; s < steps; ++s) {
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) {
        size_t i = size_t(y) * nx + x;
        if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
          b[i] = a[i];
          continue;
        }
        b[i] =
            a[i] + r * (a[i - 1] + a[i + 1] + a[i - nx] + a[i + nx] - 4 * a[i]);
      }
    std::swap(a, b);
  }
  double sum = 0, worst = 0;
  for (size_t i = 0; i < n; ++i) {
    sum += gpu[i];
    worst = std::fmax(worst, rel_diff(gpu[i], a[i]));
  }
  bool ok = worst < 1e-5;
  std::printf("heat2d %dx%d steps=%d checksum=%.3f %s\n", nx, ny, steps, sum,
              ok ? "OK" : "MISMATCH");
  time_kernel("heat_step", 3, 50,
              [&] { heat_step<<<blocks, threads>>>(d_u, d_un, nx, ny, r); });
  CHECK(cudaFree(d_u));
  CHECK(cudaFree(d_un));
  return ok ? 0 : 1;
}
