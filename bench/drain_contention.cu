// Can a recorder move device memory to the host from a thread of its own
// while the application runs? The application's thread launches more
// kernels than the GPU's queue holds (as examples/tracer does), so it waits
// inside cudaLaunchKernel for room for most of its run. Meanwhile a second
// thread drains 4 GiB of device memory through pinned buffers, one copy,
// one event and one wait per buffer, as record/devicecopy's ring does; with
// 8 MiB and with 64 MiB buffers. Each line says how long the drain took,
// next to the same drain on an idle GPU and to when the application's
// thread enqueued its last launch. Then again with that thread throttled
// as the shim throttles an application while the recorder drains (an
// event recorded every 4 launches, waited for 32 events later: at most
// 128 launches queued), and how long the application's work took.
// bench/gpu-record-scale.sh runs it.
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>
#include <thread>
#include <vector>

#include "../examples/common/check.h"

// A bandwidth-bound reduction like tracer's diagnose: ~2 ms on 4 GiB.
__global__ void reduce(const float *c, size_t n, double *partial) {
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

static double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int main() {
  const size_t bytes = size_t(4) << 30, n = bytes / sizeof(float);
  const int launches = 1500; // more than the GPU's queue holds
  float *field, *source;
  double *partial;
  CHECK(cudaMalloc(&field, bytes));
  CHECK(cudaMalloc(&source, bytes));
  CHECK(cudaMalloc(&partial, 1024 * sizeof(double)));
  CHECK(cudaMemset(field, 1, bytes));
  CHECK(cudaMemset(source, 2, bytes));
  cudaStream_t copies;
  CHECK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
  cudaEvent_t done;
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  for (size_t slot : {size_t(8) << 20, size_t(64) << 20}) {
    std::vector<char *> ring(8);
    for (auto &b : ring)
      CHECK(cudaHostAlloc((void **)&b, slot, 0));
    for (int mode = 0; mode < 3; ++mode) {
      const bool busy = mode > 0, throttled = mode == 2;
      double start = now(), enqueued = 0, finished = 0;
      std::thread app([&] {
        const int every = 4, marks = 32;
        std::vector<cudaEvent_t> ev(marks);
        for (auto &e : ev)
          CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        for (int i = 0; busy && i < launches; ++i) {
          reduce<<<1024, 256>>>(field, n, partial);
          if (throttled && i % every == 0) {
            int mark = i / every;
            if (mark >= marks)
              CHECK(cudaEventSynchronize(ev[mark % marks]));
            CHECK(cudaEventRecord(ev[mark % marks], 0));
          }
        }
        enqueued = now() - start;
        CHECK(cudaDeviceSynchronize());
        finished = now() - start;
        for (auto e : ev)
          CHECK(cudaEventDestroy(e));
      });
      if (busy) // let the application's thread fill the queue
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      double t = now();
      for (size_t i = 0; i < bytes / slot; ++i) {
        CHECK(cudaMemcpyAsync(ring[i % ring.size()], (char *)source + i * slot,
                              slot, cudaMemcpyDeviceToHost, copies));
        CHECK(cudaEventRecord(done, copies));
        CHECK(cudaEventSynchronize(done));
      }
      double drained = now() - t;
      app.join();
      if (throttled)
        std::printf("drain of 4 GiB in %zu MiB copies beside a throttled "
                    "launching thread: %.3f s (%.1f GB/s); its %d launches "
                    "done in %.3f s\n",
                    slot >> 20, drained, bytes / drained / 1e9, launches,
                    finished);
      else if (busy)
        std::printf("drain of 4 GiB in %zu MiB copies beside a thread waiting "
                    "to launch: %.3f s (%.1f GB/s); that thread enqueued its "
                    "last launch at %.3f s, its %d launches done in %.3f s\n",
                    slot >> 20, drained, bytes / drained / 1e9,
                    enqueued - (t - start), launches, finished);
      else
        std::printf("drain of 4 GiB in %zu MiB copies on an idle GPU: %.3f s "
                    "(%.1f GB/s)\n",
                    slot >> 20, drained, bytes / drained / 1e9);
    }
    for (auto b : ring)
      CHECK(cudaFreeHost(b));
  }
  return 0;
}
