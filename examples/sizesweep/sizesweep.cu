// sizesweep: the two launch patterns that one recorded launch does not stand
// for. `triad` is a bandwidth sweep: launched 20 times at each of six problem
// sizes (16 Ki to 16 Mi floats) in one run, so its launch shapes differ and
// the largest size holds most of its GPU time. `adam` is an optimizer step
// launched 300 times over 1 Mi parameters with a step counter that changes
// at every launch (its bias correction), its other arguments fixed. Checks
// 4096 sampled elements of each against the host; the wall time and each
// size's triad time (events around its 20 launches) go to stderr so stdout
// stays identical between builds.
#include <chrono>
#include <cmath>
#include <vector>

#include "../common/check.h"

// Adam's epsilon; a build with another (-DADAM_EPS=...) changes adam's code
// alone, as an edit of one kernel does (scripts/gpu-optimize.sh).
#ifndef ADAM_EPS
#define ADAM_EPS 1e-8f
#endif

__global__ void triad(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = 0.5f * y[i] + a * x[i];
}

__global__ void adam(float *w, float *m, float *v, const float *g, float lr,
                     int step, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float gi = g[i];
  float mi = 0.9f * m[i] + 0.1f * gi;
  float vi = 0.999f * v[i] + 0.001f * gi * gi;
  m[i] = mi;
  v[i] = vi;
  float mhat = mi / (1.0f - powf(0.9f, (float)step));
  float vhat = vi / (1.0f - powf(0.999f, (float)step));
  w[i] -= lr * mhat / (sqrtf(vhat) + ADAM_EPS);
}

int main() {
  const int max_n = 1 << 24,
            sizes[] = {1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24};
  const int repeats = 20, steps = 300, params = 1 << 20, samples = 4096;
  const float a = 0.25f, lr = 0.001f;
  std::vector<float> x(max_n), g(params);
  for (int i = 0; i < max_n; ++i)
    x[i] = float(i % 1000) / 1000.0f;
  for (int i = 0; i < params; ++i)
    g[i] = std::sin(0.001f * float(i));
  float *d_x, *d_y, *d_w, *d_m, *d_v, *d_g;
  CHECK(cudaMalloc(&d_x, max_n * sizeof(float)));
  CHECK(cudaMalloc(&d_y, max_n * sizeof(float)));
  CHECK(cudaMalloc(&d_w, params * sizeof(float)));
  CHECK(cudaMalloc(&d_m, params * sizeof(float)));
  CHECK(cudaMalloc(&d_v, params * sizeof(float)));
  CHECK(cudaMalloc(&d_g, params * sizeof(float)));
  CHECK(
      cudaMemcpy(d_x, x.data(), max_n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_y, 0, max_n * sizeof(float)));
  CHECK(cudaMemset(d_w, 0, params * sizeof(float)));
  CHECK(cudaMemset(d_m, 0, params * sizeof(float)));
  CHECK(cudaMemset(d_v, 0, params * sizeof(float)));
  CHECK(cudaMemcpy(d_g, g.data(), params * sizeof(float),
                   cudaMemcpyHostToDevice));
  const int nsizes = sizeof sizes / sizeof sizes[0];
  cudaEvent_t marks[nsizes + 1];
  for (cudaEvent_t &e : marks)
    CHECK(cudaEventCreate(&e));
  CHECK(cudaDeviceSynchronize());
  auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < nsizes; ++s) {
    int n = sizes[s];
    CHECK(cudaEventRecord(marks[s]));
    for (int r = 0; r < repeats; ++r) {
      triad<<<(n + 255) / 256, 256>>>(d_y, d_x, a, n);
      CHECK(cudaGetLastError());
    }
  }
  CHECK(cudaEventRecord(marks[nsizes]));
  for (int step = 1; step <= steps; ++step) {
    adam<<<(params + 255) / 256, 256>>>(d_w, d_m, d_v, d_g, lr, step, params);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaDeviceSynchronize());
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  std::vector<float> y(max_n), w(params);
  CHECK(
      cudaMemcpy(y.data(), d_y, max_n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(w.data(), d_w, params * sizeof(float),
                   cudaMemcpyDeviceToHost));

  // Sampled elements, spread over every size's range.
  double worst = 0, sum = 0;
  for (int s = 0; s < samples; ++s) {
    int i = (int)((unsigned long long)s * 2654435761u % max_n);
    if (s < 64)
      i = s * 251; // some inside the smallest size too
    float want = 0;
    for (int n : sizes)
      for (int r = 0; r < repeats && i < n; ++r)
        want = 0.5f * want + a * x[i];
    worst = std::fmax(worst, rel_diff(y[i], want));
    sum += y[i];
    int p = i % params;
    float mw = 0, mm = 0, mv = 0;
    for (int step = 1; step <= steps; ++step) {
      mm = 0.9f * mm + 0.1f * g[p];
      mv = 0.999f * mv + 0.001f * g[p] * g[p];
      float mhat = mm / (1.0f - std::pow(0.9f, (float)step));
      float vhat = mv / (1.0f - std::pow(0.999f, (float)step));
      mw -= lr * mhat / (std::sqrt(vhat) + ADAM_EPS);
    }
    worst = std::fmax(worst, rel_diff(w[p], mw));
    sum += w[p];
  }
  for (float *p : {d_x, d_y, d_w, d_m, d_v, d_g})
    CHECK(cudaFree(p));
  bool ok = worst < 1e-3;
  std::printf("sizesweep sizes=6 launches=%d steps=%d checksum=%.3f %s\n",
              6 * repeats, steps, sum, ok ? "OK" : "MISMATCH");
  std::fprintf(stderr, "sizesweep wall time: %.3f ms\n", ms);
  for (int s = 0; s < nsizes; ++s) {
    float size_ms = 0;
    CHECK(cudaEventElapsedTime(&size_ms, marks[s], marks[s + 1]));
    std::fprintf(stderr, "triad n=%d: %.3f us per launch over %d launches\n",
                 sizes[s], 1000.0f * size_ms / repeats, repeats);
  }
  for (cudaEvent_t e : marks)
    CHECK(cudaEventDestroy(e));
  return ok ? 0 : 1;
}
