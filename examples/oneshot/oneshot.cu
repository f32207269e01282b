// A kernel launched once: a 16-term polynomial over 4 Mi floats, the kind
// of set-up or finishing step many programs run a single time. Its one
// launch is all the application sees of it, so a tuned version must not
// make that launch slower (issue: a tuned kernel's first launch loading its
// module). Prints a checksum and the count of elements that disagree with
// a host reference on stdout, and on stderr the host time of the first
// launch through its completion:
//   first launch of oneshot: <X> us
// (bench/gpu-first-launch.sh reads it).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "../common/check.h"

__global__ void oneshot(const float *x, float *y, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float v = x[i], acc = 0.0f;
  for (int k = 0; k < 16; ++k)
    acc = fmaf(acc, v, a * float(k) + b);
  y[i] = acc;
}

int main() {
  const int n = 1 << 22;
  const float a = 0.25f, b = 0.5f;
  float *dx, *dy;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i)
    x[i] = 0.9f * float(i % 1000) / 1000.0f;
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaDeviceSynchronize());
  const int block = 256, grid = (n + block - 1) / block;
  auto t0 = std::chrono::steady_clock::now();
  oneshot<<<grid, block>>>(dx, dy, n, a, b);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  auto t1 = std::chrono::steady_clock::now();
  std::fprintf(stderr, "first launch of oneshot: %.1f us\n",
               std::chrono::duration<double, std::micro>(t1 - t0).count());
  CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    sum += y[i];
    if (i % 991 != 0)
      continue;
    double acc = 0;
    for (int k = 0; k < 16; ++k)
      acc = acc * x[i] + (double(a) * k + b);
    if (std::fabs(acc - y[i]) > 1e-4 * std::fmax(1.0, std::fabs(acc)))
      ++bad;
  }
  std::printf("oneshot n=%d checksum=%.2f errors=%d\n", n, sum, bad);
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  return bad == 0 ? 0 : 1;
}
