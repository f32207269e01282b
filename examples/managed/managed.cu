// managed: one kernel on managed memory (cudaMallocManaged), one on device
// memory (cudaMalloc). Managed memory lies outside the recording arena and in
// no snapshot, so `mneme replay` refuses the launch of scale, whose argument
// points into it, naming the argument and the allocation; fill, on cudaMalloc
// memory, replays and verifies.
#include <vector>

#include "../common/check.h"

__global__ void scale(float *x, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] *= a;
}

__global__ void fill(float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = float(i % 97) * 0.5f;
}

int main() {
  const int n = 1 << 20;
  const int block = 256, grid = (n + block - 1) / block;
  float *x = nullptr, *y = nullptr;
  CHECK(cudaMallocManaged(&x, n * sizeof(float)));
  for (int i = 0; i < n; ++i)
    x[i] = float(i % 13);
  scale<<<grid, block>>>(x, n, 3.0f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMalloc(&y, n * sizeof(float)));
  fill<<<grid, block>>>(y, n);
  CHECK(cudaGetLastError());
  std::vector<float> host(n);
  CHECK(cudaMemcpy(host.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));

  int bad = 0;
  for (int i = 0; i < n; ++i) {
    if (x[i] != float(i % 13) * 3.0f || host[i] != float(i % 97) * 0.5f)
      ++bad;
  }
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  if (bad) {
    std::printf("managed: %d wrong values\n", bad);
    return 1;
  }
  std::printf("managed: scale and fill ok over %d floats\n", n);
  return 0;
}
