// Exercises the recording paths the examples do not: pitched, 3D and
// stream-ordered allocations and frees, managed memory, and an application
// that crashes after some launches. Usage: recordcheck MODE
//   alloc    cudaMallocPitch/cudaMalloc3D/cudaMallocAsync/cudaFreeAsync + a
//   kernel over them managed  two managed allocations and a launch (one warning
//   expected while recording) crash    three distinct launches, then abort()
//   (the recording must keep them)
//   graph    a launch captured into a CUDA graph (global capture mode), the
//   graph run three times, then a launch outside it: the capture must survive
//   recording, and only the launch outside it is recorded
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,          \
                   cudaGetErrorString(e_));                                    \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void fill2d(char *p, size_t pitch, int w, int h, char v) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h)
    p[y * pitch + x] = (char)(v + x + y);
}

__global__ void scale(float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * y[i] + 1.0f;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "alloc";
  if (!std::strcmp(mode, "alloc")) {
    char *p;
    size_t pitch;
    const int w = 300, h = 8;
    CHECK(cudaMallocPitch((void **)&p, &pitch, w, h));
    fill2d<<<dim3((w + 127) / 128, h), 128>>>(p, pitch, w, h, 1);
    CHECK(cudaGetLastError());
    char host[h][w];
    CHECK(cudaMemcpy2D(host, w, p, pitch, w, h, cudaMemcpyDeviceToHost));
    long sum = 0;
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++)
        sum += host[y][x];
    cudaPitchedPtr pp;
    CHECK(cudaMalloc3D(&pp, make_cudaExtent(100, 4, 3)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    float *a;
    CHECK(cudaMallocAsync((void **)&a, 1024 * sizeof(float), s));
    CHECK(cudaMemsetAsync(a, 0, 1024 * sizeof(float), s));
    scale<<<4, 256, 0, s>>>(a, 2.0f, 1024);
    float ha[1024];
    CHECK(cudaMemcpyAsync(ha, a, sizeof ha, cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(pp.ptr));
    CHECK(cudaFree(p));
    std::printf("alloc: pitch %s 300, 3d pitch %s 100, sum2d %ld, a[5] %.1f\n",
                pitch >= 300 ? ">=" : "<", pp.pitch >= 100 ? ">=" : "<", sum,
                ha[5]);
    return 0;
  }
  if (!std::strcmp(mode, "managed")) {
    float *m1, *m2, *d;
    CHECK(cudaMallocManaged(&m1, 64 * sizeof(float)));
    CHECK(cudaMallocManaged(&m2, 64 * sizeof(float)));
    CHECK(cudaMalloc(&d, 64 * sizeof(float)));
    CHECK(cudaMemset(d, 0, 64 * sizeof(float)));
    scale<<<1, 64>>>(d, 3.0f, 64);
    CHECK(cudaDeviceSynchronize());
    std::printf("managed: ok\n");
    return 0;
  }
  if (!std::strcmp(mode, "crash")) {
    float *d;
    CHECK(cudaMalloc(&d, 256 * sizeof(float)));
    CHECK(cudaMemset(d, 0, 256 * sizeof(float)));
    for (int k = 1; k <= 3; k++)
      scale<<<1, 256>>>(d, (float)k, 256);
    CHECK(cudaDeviceSynchronize());
    std::printf("crash: aborting after 3 launches\n");
    std::fflush(stdout);
    std::abort();
  }
  if (!std::strcmp(mode, "graph")) {
    const int n = 256;
    float *d;
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    CHECK(cudaMemset(d, 0, n * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    scale<<<1, n, 0, s>>>(d, 2.0f, n);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    for (int k = 0; k < 3; k++)
      CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    scale<<<1, n, 0, s>>>(d, 0.5f, n);
    float h[n];
    CHECK(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d));
    // 0 -> 1 -> 3 -> 7 by the graph, then 0.5 * 7 + 1.
    std::printf("graph: d[0] %.2f, d[%d] %.2f\n", h[0], n - 1, h[n - 1]);
    return 0;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
