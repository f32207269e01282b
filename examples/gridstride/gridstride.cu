// gridstride: y = a*x + y over 1 Mi floats with a grid-stride loop, so any
// grid (however few blocks) covers every element: the kind of kernel whose
// grid a search may shrink (Mneme's miniFE example searches fractions of
// the grid). Prints a checksum and exits non-zero if any element differs
// from the host's result.
#include <vector>

#include "../common/check.h"

__global__ void saxpy_strided(float a, const float *x, float *y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

int main() {
  const int n = 1 << 20;
  const float a = 1.5f;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = float(i % 1000) * 0.5f;
    y[i] = float((i * 7) % 1000) * 0.25f;
  }
  float *dx, *dy;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const int block = 256;
  saxpy_strided<<<(n + block - 1) / block, block>>>(a, dx, dy, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    if (out[i] != a * x[i] + y[i])
      ++bad;
    sum += out[i];
  }
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  std::printf("gridstride n=%d checksum=%.1f errors=%d\n", n, sum, bad);
  return bad == 0 ? 0 : 1;
}
