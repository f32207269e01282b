// Cost of one real kernel launch, with or without the shim in between: an
// empty kernel launched N times back to back (asynchronously, so the host
// side of the launch is what is timed), reported in microseconds per launch.
// Build it plainly and with the mneme compilers and compare; run the
// wrapped binary without MNEME_RECORD to measure the forwarding cost.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void empty(int x) {
  if (x == -1)
    __trap();
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  int rounds = 5;
  empty<<<1, 32>>>(0);
  cudaDeviceSynchronize();
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; i++)
      empty<<<1, 32>>>((int)i);
    auto t1 = std::chrono::steady_clock::now();
    cudaDeviceSynchronize();
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
    if (us < best)
      best = us;
  }
  cudaError_t e = cudaGetLastError();
  std::printf("%.4f us/launch (best of %d rounds of %ld launches) %s\n", best,
              rounds, n, cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
