// stencil2d: Jacobi sweeps of a 5-point stencil over a 4096 x 4096 grid on a
// 2D launch grid, boundaries held fixed. Checks every point of the result
// against the host and prints a checksum.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "../common/check.h"
#include "../common/timer.h"

__global__ void stencil5(const float *in, float *out, int nx, int ny) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x <= 0 || y <= 0 || x >= nx - 1 || y >= ny - 1)
    return;
  int i = y * nx + x;
  out[i] = 0.25f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
}

int main() {
  const int nx = 4096, ny = 4096, sweeps = 10;
  const size_t n = size_t(nx) * ny, bytes = n * sizeof(float);
  std::vector<float> a(n), b;
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x)
      a[size_t(y) * nx + x] = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                                  ? 1.0f
                                  : float((x * 13 + y * 7) % 100) / 100.0f;
  b = a;
  float *d_in, *d_out;
  CHECK(cudaMalloc(&d_in, bytes));
  CHECK(cudaMalloc(&d_out, bytes));
  CHECK(cudaMemcpy(d_in, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_out, a.data(), bytes, cudaMemcpyHostToDevice));
  dim3 block(32, 8),
      grid((nx + block.x - 1) / block.x, (ny + block.y - 1) / block.y);
  for (int s = 0; s < sweeps; ++s) {
    stencil5<<<grid, block>>>(d_in, d_out, nx, ny);
    CHECK(cudaGetLastError());
    std::swap(d_in, d_out);
  }
  std::vector<float> gpu(n);
  CHECK(cudaMemcpy(gpu.data(), d_in, bytes, cudaMemcpyDeviceToHost));

  // STENCIL_TIMING=1: time 20 more launches with events (stderr), the
  // in-application reference for replay's fidelity check.
  if (std::getenv("STENCIL_TIMING")) {
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    std::vector<float> ms(20);
    // Behind the gate of common/timer.h: the events bracket the kernel, not
    // the host's launch latency.
    for (float &t : ms)
      t = gated_ms(start, stop,
                   [&] { stencil5<<<grid, block>>>(d_in, d_out, nx, ny); });
    std::sort(ms.begin(), ms.end());
    std::fprintf(stderr,
                 "stencil5 in-application median of 20 (events): %.2f us\n",
                 500.0f * (ms[9] + ms[10]));
  }

  for (int s = 0; s < sweeps; ++s) {
    for (int y = 1; y < ny - 1; ++y)
      for (int x = 1; x < nx - 1; ++x) {
        size_t i = size_t(y) * nx + x;
        b[i] = 0.25f * (a[i - 1] + a[i + 1] + a[i - nx] + a[i + nx]);
      }
    std::swap(a, b);
  }
  double sum = 0, worst = 0;
  for (size_t i = 0; i < n; ++i) {
    sum += gpu[i];
    worst = std::fmax(worst, rel_diff(gpu[i], a[i]));
  }
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_out));
  bool ok = worst < 1e-5;
  std::printf("stencil2d %dx%d sweeps=%d checksum=%.3f %s\n", nx, ny, sweeps,
              sum, ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
