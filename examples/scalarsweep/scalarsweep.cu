// scalarsweep: one kernel launched 2000 times with different scalar
// arguments (a float coefficient and an int offset), each launch depending on
// the last. Checks the result against the host; the total wall time of the
// launches goes to stderr so stdout stays identical between builds. This is
// the many-launch application of the recording-overhead benchmark.
#include <chrono>
#include <cmath>
#include <vector>

#include "../common/check.h"

__global__ void relax(float *y, const float *x, float a, int offset, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = 0.5f * y[i] + a * x[(i + offset) % n];
}

int main(int argc, char **argv) {
  const int n = 1 << 16, launches = argc > 1 ? std::atoi(argv[1]) : 2000;
  std::vector<float> x(n), y(n, 0.0f), out(n);
  for (int i = 0; i < n; ++i)
    x[i] = float(i % 256) / 256.0f;
  float *d_x, *d_y;
  CHECK(cudaMalloc(&d_x, n * sizeof(float)));
  CHECK(cudaMalloc(&d_y, n * sizeof(float)));
  CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_y, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaDeviceSynchronize());
  auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < launches; ++k) {
    relax<<<(n + 255) / 256, 256>>>(d_y, d_x, 0.001f * float(k % 100), k % 7,
                                    n);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaDeviceSynchronize());
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  CHECK(cudaMemcpy(out.data(), d_y, n * sizeof(float), cudaMemcpyDeviceToHost));

  for (int k = 0; k < launches; ++k) {
    float a = 0.001f * float(k % 100);
    int offset = k % 7;
    for (int i = 0; i < n; ++i)
      y[i] = 0.5f * y[i] + a * x[(i + offset) % n];
  }
  double sum = 0, worst = 0;
  for (int i = 0; i < n; ++i) {
    worst = std::fmax(worst, rel_diff(out[i], y[i]));
    sum += out[i];
  }
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_y));
  bool ok = worst < 1e-5;
  std::printf("scalarsweep n=%d launches=%d checksum=%.4f %s\n", n, launches,
              sum, ok ? "OK" : "MISMATCH");
  std::fprintf(stderr, "scalarsweep wall time: %.3f ms for %d launches\n", ms,
               launches);
  return ok ? 0 : 1;
}
