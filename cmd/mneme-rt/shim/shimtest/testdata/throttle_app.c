/*
 * Launches that exercise the shim's launch throttle: 200 on a stream, 8 on
 * the per-thread default stream, 8 on a stream being captured into a graph
 * (0x99 to the stand-in driver), then a kernel whose first launch makes the
 * stand-in library turn the throttle off, and 8 more.
 */
#include <stddef.h>

#include "cuda_api.h"

static char fatbin[16];
static const char kernel_b[] = "kernel_b";
static const char kernel_off[] = "kernel_off";

__attribute__((constructor)) static void register_module(void) {
  void **h = __cudaRegisterFatBinary(fatbin);
  __cudaRegisterFunction(h, kernel_b, "_Z5otherv", "_Z5otherv", -1, 0, 0, 0, 0,
                         0);
  __cudaRegisterFunction(h, kernel_off, "_Z3offv", "_Z3offv", -1, 0, 0, 0, 0,
                         0);
  __cudaRegisterFatBinaryEnd(h);
}

int main(void) {
  dim3 g = {7, 1, 1},
       b = {32, 1, 1}; /* grid 7: the stand-in's launch succeeds */
  int zero = 0;
  void *args[] = {&zero};
  for (int i = 0; i < 200; i++)
    cudaLaunchKernel(kernel_b, g, b, args, 0, (void *)0x10);
  for (int i = 0; i < 8; i++)
    cudaLaunchKernel_ptsz(kernel_b, g, b, args, 0, 0);
  for (int i = 0; i < 8; i++)
    cudaLaunchKernel(kernel_b, g, b, args, 0, (void *)0x99);
  cudaLaunchKernel(kernel_off, g, b, args, 0, 0);
  for (int i = 0; i < 8; i++)
    cudaLaunchKernel(kernel_b, g, b, args, 0, (void *)0x10);
  return 0;
}
