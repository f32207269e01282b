// managedvar: a kernel reading and writing a __managed__ variable (count
// adds the elements above a threshold into `tally`), and one on cudaMalloc
// memory alone (fill). A __managed__ variable lives in managed memory, which
// no snapshot holds, and the kernels of an nvcc build are recorded without
// IR, so `mneme replay` refuses every instance of the recording (exit 2),
// naming the variable and saying why. nvcc only: clang-22 does not implement
// __managed__ in CUDA (it ignores the attribute).
#include <vector>

#include "../common/check.h"

__managed__ unsigned tally;

__global__ void count(const float *x, int n, float threshold) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] > threshold)
    atomicAdd(&tally, 1u);
}

__global__ void fill(float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = float(i % 97) * 0.5f;
}

int main() {
  const int n = 1 << 20;
  const int block = 256, grid = (n + block - 1) / block;
  float *y = nullptr;
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  fill<<<grid, block>>>(y, n);
  CHECK(cudaGetLastError());
  tally = 0;
  CHECK(cudaDeviceSynchronize());
  count<<<grid, block>>>(y, n, 24.0f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  unsigned want = 0;
  for (int i = 0; i < n; ++i)
    want += float(i % 97) * 0.5f > 24.0f;
  CHECK(cudaFree(y));
  if (tally != want) {
    std::printf("managedvar: tally %u, want %u\n", tally, want);
    return 1;
  }
  std::printf("managedvar: tally %u ok over %d floats\n", tally, n);
  return 0;
}
