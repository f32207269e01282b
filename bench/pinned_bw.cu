// The reference for the recording benchmarks (record_scale.py): the
// device-to-host bandwidth into pinned host memory on this machine, one
// 1 GiB cudaMemcpyAsync at a time, best of five after a warm-up. Prints
// exactly one line: "pinned device-to-host: X GB/s".
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));         \
      return 2;                                                                \
    }                                                                          \
  } while (0)

int main() {
  const size_t n = size_t(1) << 30;
  void *dev, *host;
  CHECK(cudaMalloc(&dev, n));
  CHECK(cudaMallocHost(&host, n));
  CHECK(cudaMemset(dev, 1, n));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  float best = 1e30f;
  for (int i = 0; i < 6; ++i) {
    CHECK(cudaEventRecord(a));
    CHECK(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost));
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i > 0 && ms < best)
      best = ms;
  }
  std::printf("pinned device-to-host: %.1f GB/s\n", n / (best * 1e-3) / 1e9);
  return 0;
}
