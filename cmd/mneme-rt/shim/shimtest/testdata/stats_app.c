/*
 * Launches that exercise the shim's launch statistics: a step kernel whose
 * second argument counts launches, at two problem sizes interleaved (300
 * launches each), then 10 at a third size on a stream being captured into a
 * graph (0x99 to the stand-in driver); and 5 launches of a kernel the
 * recorder does not select, then 6 of it that fail. Grids that are
 * multiples of 7 launch; the stand-in runtime fails the others.
 */
#include <stddef.h>

#include "cuda_api.h"

static char fatbin[16];
static const char kernel_step[] = "kernel_step";
static const char kernel_other[] = "kernel_other";

__attribute__((constructor)) static void register_module(void) {
  void **h = __cudaRegisterFatBinary(fatbin);
  __cudaRegisterFunction(h, kernel_step, "_Z4stepPfii", "_Z4stepPfii", -1, 0, 0,
                         0, 0, 0);
  __cudaRegisterFunction(h, kernel_other, "_Z5otherv", "_Z5otherv", -1, 0, 0, 0,
                         0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

int main(void) {
  float *field = (float *)0x7f0000001000;
  dim3 b = {128, 1, 1};
  for (int i = 0; i < 600; i++) {
    dim3 g = {i % 2 ? 14 : 7, 1, 1};
    int step = i, n = (int)(g.x * b.x);
    void *args[] = {&field, &step, &n};
    cudaLaunchKernel(kernel_step, g, b, args, 0, (void *)0x10);
  }
  for (int i = 0; i < 10; i++) {
    dim3 g = {21, 1, 1};
    int step = 0, n = (int)(g.x * b.x);
    void *args[] = {&field, &step, &n};
    cudaLaunchKernel(kernel_step, g, b, args, 256, (void *)0x99);
  }
  int zero = 0;
  void *args[] = {&zero};
  dim3 one = {7, 1, 1};
  for (int i = 0; i < 5; i++)
    cudaLaunchKernel(kernel_other, one, b, args, 0, 0);
  dim3 failing = {8, 1, 1};
  for (int i = 0; i < 6; i++)
    cudaLaunchKernel(kernel_other, failing, b, args, 0, (void *)0x10);
  return 0;
}
