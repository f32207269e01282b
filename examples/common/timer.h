// Kernel timer shared by the examples. time_kernel() launches a kernel a few
// times to warm up (module load, caches, clocks), then times each of N more
// launches on its own with a pair of CUDA events and prints the median on
// stdout as exactly one line:
//
//   kernel <name>: median <X> us over <N> launches
//
// <name> is the kernel's C++ name, <X> microseconds with two decimals, <N> the
// number of timed launches. The median, not the mean, so one slow launch (a
// clock ramp, a context switch) does not move it. The line varies from run to
// run; run-all.sh leaves it out when it compares the outputs of two builds.
#pragma once
#include <algorithm>
#include <cstdio>
#include <vector>

#include "check.h"

// launch() enqueues exactly one launch of the kernel on the default stream.
template <class Launch>
double time_kernel(const char *name, int warmup, int launches,
                   Launch &&launch) {
  for (int i = 0; i < warmup; ++i) {
    launch();
    CHECK(cudaGetLastError());
  }
  CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<float> ms(launches > 0 ? launches : 1);
  for (float &t : ms) {
    CHECK(cudaEventRecord(start));
    launch();
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaEventElapsedTime(&t, start, stop));
  }
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  double us =
      1000.0 * (n % 2 ? ms[n / 2] : 0.5 * (double(ms[n / 2 - 1]) + ms[n / 2]));
  std::printf("kernel %s: median %.2f us over %zu launches\n", name, us, n);
  std::fflush(stdout);
  return us;
}
