// tracer: a passive tracer field of 1 Gi floats (4 GiB in one cudaMalloc)
// with a localized source: each step a "storm" kernel relaxes a window of 1%
// of the field (41 MiB) towards a forcing, the window moving along the field
// from step to step, and a "diagnose" kernel reduces the whole field (reads
// 4 GiB) to per-block partial sums that the host adds up. It holds gigabytes
// on the device, runs for seconds, and each launch of storm changes 1% of
// its allocation: the shape of a production run whose recording should copy
// what changed, not what it holds. Sampled points are recomputed on the
// host; the total is checked against the host's sum of the same partials.
#include <cmath>
#include <cstdlib>
#include <vector>

#include "../common/check.h"
#include "../common/timer.h"

__host__ __device__ inline float initial(size_t i) {
  // A smooth concentration with structure at two scales, never repeating
  // exactly (its chunks are all distinct, as a real field's are).
  float x = float(i) * 1e-6f;
  return 0.5f + 0.25f * sinf(x) * cosf(float(i % 7919u) * 7.9e-4f);
}

__host__ __device__ inline float forcing(size_t i, int step) {
  return float((i + size_t(step) * 7u) & 255u) * (1.0f / 256.0f);
}

__global__ void init(float *c, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    c[i] = initial(i);
}

// Relax the window [lo, lo + len) towards the step's forcing.
__global__ void storm(float *c, size_t lo, size_t len, int step, float rate) {
  size_t k = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (k < len) {
    size_t i = lo + k;
    c[i] = c[i] + rate * (forcing(i, step) - c[i]);
  }
}

// Partial sums of the field, one per block (fixed order: deterministic).
__global__ void diagnose(const float *c, size_t n, double *partial) {
  __shared__ double s[256];
  double acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    acc += c[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w)
      s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partial[blockIdx.x] = s[0];
}

int main(int argc, char **argv) {
  const size_t n = size_t(1) << 30, window = n / 100;
  const int steps = argc > 1 ? std::atoi(argv[1]) : 600, blocks = 1024;
  const float rate = 0.25f;
  size_t free_b = 0, total_b = 0;
  CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < n * sizeof(float) + (size_t(512) << 20)) {
    std::printf("tracer SKIP: needs 4.5 GiB of device memory, %.2f GiB free\n",
                double(free_b) / (1 << 30));
    return 0;
  }
  float *c;
  double *partial;
  CHECK(cudaMalloc(&c, n * sizeof(float)));
  CHECK(cudaMalloc(&partial, blocks * sizeof(double)));
  init<<<4096, 256>>>(c, n);
  CHECK(cudaGetLastError());
  auto lo_of = [&](int step) {
    return (size_t(step) * 37 % 97) * (n - window) / 96;
  };
  std::vector<double> host(blocks);
  double total = 0;
  for (int step = 0; step < steps; ++step) {
    storm<<<unsigned((window + 255) / 256), 256>>>(c, lo_of(step), window, step,
                                                   rate);
    CHECK(cudaGetLastError());
    diagnose<<<blocks, 256>>>(c, n, partial);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaMemcpy(host.data(), partial, blocks * sizeof(double),
                   cudaMemcpyDeviceToHost));
  for (double v : host)
    total += v;

  // Samples: the host replays every step at a few points.
  const int samples = 64;
  int bad = 0;
  for (int k = 0; k < samples; ++k) {
    size_t i = (size_t(k) * 2654435761u * 4099u) % n;
    if (k < 8)
      i = lo_of(k) + size_t(k) * 131; // inside early windows
    float want = initial(i);
    for (int step = 0; step < steps; ++step) {
      size_t lo = lo_of(step);
      if (i >= lo && i < lo + window)
        want = want + rate * (forcing(i, step) - want);
    }
    float got;
    CHECK(cudaMemcpy(&got, c + i, sizeof(float), cudaMemcpyDeviceToHost));
    // The device contracts the update into an FMA; the host may not.
    if (!(rel_diff(got, want) < 1e-5) && bad++ < 5)
      std::fprintf(stderr, "c[%zu]: gpu %.9g host %.9g\n", i, got, want);
  }
  // The storm kernel alone, timed: its window is the recorded instance's.
  time_kernel("storm", 2, 20, [&] {
    storm<<<unsigned((window + 255) / 256), 256>>>(c, lo_of(0), window, 0,
                                                   rate);
  });
  CHECK(cudaFree(c));
  CHECK(cudaFree(partial));
  std::printf("tracer n=%zu steps=%d window=%zu total=%.6e %s\n", n, steps,
              window, total, bad == 0 ? "OK" : "MISMATCH");
  return bad == 0 ? 0 : 1;
}
