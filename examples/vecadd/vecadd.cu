// vecadd: c = a + b over 1 Mi floats. Prints a checksum and exits non-zero
// if any element differs from the host's sum. With VECADD_TIMING set it also
// times the kernel (common/timer.h), as the quick start does before and
// after deploying its tuned configuration.
#include <cstdlib>
#include <vector>

#include "../common/check.h"
#include "../common/timer.h"

__global__ void vecadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = a[i] + b[i];
}

int main() {
  const int n = 1 << 20;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = float(i % 1000) * 0.5f;
    b[i] = float((i * 7) % 1000) * 0.25f;
  }
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, n * sizeof(float)));
  CHECK(cudaMalloc(&db, n * sizeof(float)));
  CHECK(cudaMalloc(&dc, n * sizeof(float)));
  CHECK(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const int block = 256;
  vecadd<<<(n + block - 1) / block, block>>>(da, db, dc, n);
  CHECK(cudaGetLastError());
  if (std::getenv("VECADD_TIMING"))
    time_kernel("vecadd", 5, 200, [&] {
      vecadd<<<(n + block - 1) / block, block>>>(da, db, dc, n);
    });
  CHECK(cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    if (c[i] != a[i] + b[i])
      ++bad;
    sum += c[i];
  }
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));
  std::printf("vecadd n=%d checksum=%.1f errors=%d\n", n, sum, bad);
  return bad == 0 ? 0 : 1;
}
