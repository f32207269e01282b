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
//
// Each timed launch is enqueued with its events behind a gate (a host
// function that holds the stream until the host has enqueued the stop
// event), so the interval holds the kernel and not the host's launch
// latency: recorded on an idle stream, the start event fires at once and
// the kernel follows only when the launch call has reached the GPU, some
// microseconds later (4-5% of an 85 us kernel on an H100). The gate gives
// up after 20 ms, so a launch that waits for the GPU itself cannot hang it.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "check.h"

// hold_stream is the gate's host function: it returns once *open is set.
inline void CUDART_CB hold_stream(void *open) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (!static_cast<std::atomic<bool> *>(open)->load() &&
         std::chrono::steady_clock::now() < until) {
  }
}

// gated_ms times one launch() between start and stop behind the gate and
// returns its milliseconds.
template <class Launch>
float gated_ms(cudaEvent_t start, cudaEvent_t stop, Launch &&launch) {
  std::atomic<bool> open{false};
  CHECK(cudaLaunchHostFunc(0, hold_stream, &open));
  CHECK(cudaEventRecord(start));
  launch();
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(stop));
  open = true;
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

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
  for (float &t : ms)
    t = gated_ms(start, stop, launch);
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
