// saxpy_inplace: y = a*x + y, updating y in place (so a replay must restore y
// before every run). Checks y against the host and prints a checksum.
#include <cmath>
#include <vector>

#include "../common/check.h"

__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i];
}

int main() {
  const int n = 1 << 20;
  const float a = 2.5f;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = float(i % 100) * 0.01f;
    y[i] = float(i % 37) - 18.0f;
  }
  float *d_x, *d_y;
  CHECK(cudaMalloc(&d_x, n * sizeof(float)));
  CHECK(cudaMalloc(&d_y, n * sizeof(float)));
  CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_y, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  saxpy<<<(n + 255) / 256, 256>>>(n, a, d_x, d_y);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out.data(), d_y, n * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0, worst = 0;
  for (int i = 0; i < n; ++i) {
    worst = std::fmax(worst, rel_diff(out[i], double(a) * x[i] + y[i]));
    sum += out[i];
  }
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_y));
  bool ok = worst < 1e-6;
  std::printf("saxpy_inplace n=%d a=%.2f checksum=%.3f %s\n", n, a, sum,
              ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
