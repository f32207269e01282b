// Run-time specialization: a kernel whose loop bound and modulus are
// arguments. Compiled ahead of time both are unknown, so the loop stays a
// loop and `%` is a full integer division; folded in as constants at run time
// (Proteus's annotate("jit", 4, 5), or a tuned configuration that specializes
// arguments) the loop unrolls and the division becomes a multiply. The
// kernel also reads a __constant__ table the host fills, as real codes do.
// Prints a checksum, the count of elements that disagree with a host
// reference, and the kernel's own timer line (common/timer.h).
#include <cmath>
#include <cstdio>
#include <vector>

#include "../common/check.h"
#include "../common/timer.h"

__constant__ float c_scale[4];

__global__ __attribute__((annotate("jit", 4, 5))) void
polymod(float *y, const float *x, int n, int iters, int modulus) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float xi = x[i], acc = 0.0f;
  for (int k = 0; k < iters; ++k)
    acc = fmaf(acc, xi, (float)((i + k) % modulus) * c_scale[k & 3]);
  y[i] = acc;
}

int main(int argc, char **argv) {
  const int n = 1 << 22, iters = argc > 1 ? std::atoi(argv[1]) : 96,
            modulus = argc > 2 ? std::atoi(argv[2]) : 7;
  const float scale[4] = {0.5f, 0.25f, 0.125f, 1.0f};
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i)
    x[i] = 0.5f * float(i % 1000) / 1000.0f;
  float *dx, *dy;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpyToSymbol(c_scale, scale, sizeof scale));
  const int block = 256, grid = (n + block - 1) / block;
  time_kernel("polymod", 3, 50,
              [&] { polymod<<<grid, block>>>(dy, dx, n, iters, modulus); });
  CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    sum += y[i];
    if (i % 997 != 0)
      continue;
    double acc = 0;
    for (int k = 0; k < iters; ++k)
      acc = acc * x[i] + double((i + k) % modulus) * scale[k & 3];
    if (std::fabs(acc - y[i]) > 1e-4 * std::fmax(1.0, std::fabs(acc)))
      ++bad;
  }
  std::printf("jitspec n=%d iters=%d modulus=%d checksum=%.3f errors=%d\n", n,
              iters, modulus, sum, bad);
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  return bad == 0 ? 0 : 1;
}
