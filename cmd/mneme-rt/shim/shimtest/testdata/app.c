/*
 * Exercises every intercepted call the way compiled CUDA code does:
 * registrations from a constructor, then launches, allocations and frees,
 * printing what it gets back.
 */
#include <stddef.h>
#include <stdio.h>

#include "cuda_api.h"

static char fatbin[16];
static void **handle;
/* Host stubs: compiled code passes the stub's address; here each "stub" is a
 * string, so the stand-in can print which one arrived. */
static const char kernel_a[] = "kernel_a";
static const char kernel_b[] = "kernel_b";
static int device_global;

__attribute__((constructor)) static void register_module(void) {
  handle = __cudaRegisterFatBinary(fatbin);
  __cudaRegisterFunction(handle, kernel_a, "_Z6kernelPfi", "_Z6kernelPfi", -1,
                         0, 0, 0, 0, 0);
  __cudaRegisterFunction(handle, kernel_b, "_Z5otherv", "_Z5otherv", -1, 0, 0,
                         0, 0, 0);
  __cudaRegisterVar(handle, (char *)&device_global, "counter", "counter", 0,
                    sizeof device_global, 0, 0);
  __cudaRegisterFatBinaryEnd(handle);
}

int main(void) {
  int n = 42, r;
  void *args[] = {&n};
  dim3 g = {9, 2, 1}, b = {128, 1, 1};
  printf("ret %d\n", cudaLaunchKernel(kernel_a, g, b, args, 64, (void *)0x5));
  g.x = 3;
  printf("ret %d\n", cudaLaunchKernel_ptsz(kernel_b, g, b, args, 0, (void *)0));
  void *p = 0;
  size_t pitch = 0;
  r = cudaMalloc(&p, 1000);
  printf("malloc %d %p\n", r, p);
  r = cudaMalloc(&p, (size_t)2 << 30);
  printf("malloc big %d\n", r);
  r = cudaMallocPitch(&p, &pitch, 100, 4);
  printf("pitch %d %p %zu\n", r, p, pitch);
  cudaPitchedPtr pp;
  cudaExtent e = {100, 3, 2};
  r = cudaMalloc3D(&pp, e);
  printf("3d %d %p %zu %zu %zu\n", r, pp.ptr, pp.pitch, pp.xsize, pp.ysize);
  r = cudaMallocAsync(&p, 10, 0);
  printf("async %d %p\n", r, p);
  r = cudaMallocAsync_ptsz(&p, 10, 0);
  printf("async_ptsz %d %p\n", r, p);
  printf("free %d %d %d %d\n", cudaFree(p), cudaFree((void *)1),
         cudaFreeAsync((void *)1, 0), cudaFreeAsync_ptsz((void *)1, 0));
  r = cudaMallocManaged(&p, 10, 1);
  printf("managed %d %p\n", r, p);
  return 0;
}
