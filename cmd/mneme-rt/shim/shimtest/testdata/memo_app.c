/*
 * Launches that exercise the shim's launch memo: one kernel with repeated
 * and new scalar arguments past the point where its recorder is full, one
 * kernel the recorder never wants to see, and one with an argument too large
 * for the shim's stack buffer, launched with two values and two sizes of
 * dynamic shared memory.
 */
#include <stddef.h>
#include <string.h>

#include "cuda_api.h"

static char fatbin[16];
static const char kernel_a[] = "kernel_a";
static const char kernel_b[] = "kernel_b";
static const char kernel_big[] = "kernel_big";

__attribute__((constructor)) static void register_module(void) {
  void **h = __cudaRegisterFatBinary(fatbin);
  __cudaRegisterFunction(h, kernel_a, "_Z6kernelPfi", "_Z6kernelPfi", -1, 0, 0,
                         0, 0, 0);
  __cudaRegisterFunction(h, kernel_b, "_Z5otherv", "_Z5otherv", -1, 0, 0, 0, 0,
                         0);
  __cudaRegisterFunction(h, kernel_big, "_Z3big5Large", "_Z3big5Large", -1, 0,
                         0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

int main(void) {
  dim3 g = {1, 1, 1}, b = {32, 1, 1};
  const int values[] = {0, 0, 1, 0, 1, 2, 5, 5, 6, 0, 2};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    int v = values[i];
    void *args[] = {&v};
    cudaLaunchKernel(kernel_a, g, b, args, 0, 0);
  }
  int zero = 0;
  void *args[] = {&zero};
  g.x = 2; /* same argument, other geometry: another launch key */
  cudaLaunchKernel(kernel_a, g, b, args, 0, 0);
  g.x = 1;
  for (int i = 0; i < 5; i++)
    cudaLaunchKernel(kernel_b, g, b, args, 0, 0);
  struct {
    int first;
    char rest[2044];
  } large;
  memset(&large, 7, sizeof large);
  large.first = 9;
  void *big_args[] = {&large};
  /* Value 9 thrice, 10 once, then 9 with 64 KiB of dynamic shared memory. */
  const int firsts[] = {9, 9, 10, 9, 9, 9};
  const size_t shareds[] = {0, 0, 0, 0, 65536, 65536};
  for (int i = 0; i < 6; i++) {
    large.first = firsts[i];
    cudaLaunchKernel(kernel_big, g, b, big_args, shareds[i], 0);
  }
  cudaDeviceReset();
  return 0;
}
