// withcublas: a dense layer of a small network, the way applications use
// CUDA beside a library. Each of 40 steps multiplies the activations by a
// weight matrix with cuBLAS (SGEMM, 2048x2048x2048) and then applies our own
// kernel, bias_gelu, to the result: the exact GELU (erff) of x*scale + bias
// per column, on 4 Mi floats. Only bias_gelu is the application's kernel:
// cuBLAS launches its own, which the mneme shim does not see. stdout holds a
// checksum of the last step and OK when sampled outputs match the host; the
// wall time of the steps goes to stderr (the application's own timer), so
// stdout stays identical between builds.
#include <cmath>
#include <cstdio>
#include <vector>

#include <cublas_v2.h>

#include "../common/check.h"

#define CHECK_BLAS(call)                                                       \
  do {                                                                         \
    cublasStatus_t st_ = (call);                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                        \
      std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__,          \
                   __LINE__, #call, int(st_));                                 \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

__global__ void bias_gelu(float *y, const float *bias, int rows, int cols,
                          float scale) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) {
    float x = y[i] * scale + bias[i % cols];
    y[i] = 0.5f * x * (1.0f + erff(x * 0.70710678f));
  }
}

static float gelu_host(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678f));
}

int main() {
  const int n = 2048, steps = 40;
  const float scale = 1.0f / 64.0f;
  std::vector<float> a(size_t(n) * n), w(size_t(n) * n), bias(n);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = float(int(i % 97) - 48) / 97.0f;
    w[i] = float(int((i * 7) % 89) - 44) / 89.0f;
  }
  for (int c = 0; c < n; ++c)
    bias[c] = float(c % 13) * 0.05f - 0.3f;
  float *d_a, *d_w, *d_y, *d_bias;
  size_t bytes = size_t(n) * n * sizeof(float);
  CHECK(cudaMalloc(&d_a, bytes));
  CHECK(cudaMalloc(&d_w, bytes));
  CHECK(cudaMalloc(&d_y, bytes));
  CHECK(cudaMalloc(&d_bias, n * sizeof(float)));
  CHECK(cudaMemcpy(d_a, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_w, w.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_bias, bias.data(), n * sizeof(float),
                   cudaMemcpyHostToDevice));
  cublasHandle_t blas;
  CHECK_BLAS(cublasCreate(&blas));
  // Plain FP32 SGEMM: the result must not depend on TF32 being allowed.
  CHECK_BLAS(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));
  const float one = 1.0f, zero = 0.0f;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int s = 0; s < steps; ++s) {
    // y = w * a (column-major), then y = gelu(y * scale + bias).
    CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, d_w,
                           n, d_a, n, &zero, d_y, n));
    bias_gelu<<<(n * n + 255) / 256, 256>>>(d_y, d_bias, n, n, scale);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  std::vector<float> y(size_t(n) * n);
  CHECK(cudaMemcpy(y.data(), d_y, bytes, cudaMemcpyDeviceToHost));
  // Check 64 sampled outputs against the host's GEMM and GELU in double.
  double worst = 0, sum = 0;
  for (int k = 0; k < 64; ++k) {
    int r = (k * 977) % n, c = (k * 421) % n; // element (r, c), column-major
    double acc = 0;
    for (int j = 0; j < n; ++j)
      acc += double(w[size_t(j) * n + r]) * double(a[size_t(c) * n + j]);
    float want = gelu_host(float(acc) * scale + bias[r]);
    worst = std::fmax(worst, rel_diff(y[size_t(c) * n + r], want));
  }
  for (size_t i = 0; i < y.size(); i += 4099)
    sum += y[i];
  bool ok = worst < 1e-3;
  std::printf("withcublas n=%d steps=%d checksum=%.3f %s\n", n, steps, sum,
              ok ? "OK" : "MISMATCH");
  std::fprintf(stderr, "withcublas wall time: %.3f ms for %d steps\n", ms,
               steps);
  CHECK_BLAS(cublasDestroy(blas));
  CHECK(cudaFree(d_a));
  CHECK(cudaFree(d_w));
  CHECK(cudaFree(d_y));
  CHECK(cudaFree(d_bias));
  return ok ? 0 : 1;
}
