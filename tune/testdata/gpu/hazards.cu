// hazards: an application whose one kernel faults, traps or hangs depending
// on its block size, so tuning it exercises every failure path of the
// executor. Launched with 256 threads per block it is well behaved.
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

__global__ void hazard(float *y, const float *x, int n) {
  if (blockDim.x == 64)
    for (;;)
      asm volatile(""); // hangs
  if (blockDim.x == 1024)
    __trap(); // traps
  if (blockDim.x == 32 && threadIdx.x == 0)
    *(volatile float *)0x10 = 1.0f; // illegal address
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = 2.0f * x[i] + 1.0f;
}

int main() {
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i)
    x[i] = float(i % 100);
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  hazard<<<n / 256, 256>>>(dy, dx, n);
  cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  bool ok = cudaGetLastError() == cudaSuccess;
  for (int i = 0; i < n && ok; ++i)
    ok = y[i] == 2.0f * x[i] + 1.0f;
  std::printf("hazards %s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
