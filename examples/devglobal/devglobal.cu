// devglobal: a kernel that reads one __device__ global (the scale factor the
// host sets with cudaMemcpyToSymbol) and writes another (a counter it
// increments atomically). Checks both results against the host.
#include <vector>

#include "../common/check.h"

__device__ float scale_factor;
__device__ unsigned int above_threshold;

__global__ void scale_and_count(const float *in, float *out, int n,
                                float threshold) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float v = in[i] * scale_factor;
  out[i] = v;
  if (v > threshold)
    atomicAdd(&above_threshold, 1u);
}

int main() {
  const int n = 1 << 20;
  const float scale = 3.0f, threshold = 1000.0f;
  std::vector<float> in(n), out(n);
  for (int i = 0; i < n; ++i)
    in[i] = float(i % 1024) * 0.5f;
  float *d_in, *d_out;
  CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CHECK(cudaMemcpy(d_in, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  unsigned int zero = 0;
  CHECK(cudaMemcpyToSymbol(scale_factor, &scale, sizeof(scale)));
  CHECK(cudaMemcpyToSymbol(above_threshold, &zero, sizeof(zero)));
  scale_and_count<<<(n + 255) / 256, 256>>>(d_in, d_out, n, threshold);
  CHECK(cudaGetLastError());
  unsigned int count = 0;
  CHECK(cudaMemcpyFromSymbol(&count, above_threshold, sizeof(count)));
  CHECK(
      cudaMemcpy(out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));

  unsigned int want = 0;
  int bad = 0;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    float v = in[i] * scale;
    if (v > threshold)
      ++want;
    if (out[i] != v)
      ++bad;
    sum += out[i];
  }
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_out));
  bool ok = bad == 0 && count == want;
  std::printf("devglobal n=%d count=%u checksum=%.1f %s\n", n, count, sum,
              ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
