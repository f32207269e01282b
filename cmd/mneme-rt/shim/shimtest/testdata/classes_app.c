/*
 * Launches of one kernel tuned per launch shape (rt_standin.c plays the
 * library): a size sweep over three grids, one of which no class covers,
 * a folded argument with a measured value and one that was never measured,
 * and a covered grid and block with other dynamic shared memory. Each
 * shape and value is launched three times, so the shim must run the
 * repeats without asking the library.
 */
#include <stddef.h>

#include "cuda_api.h"

static char fatbin[16];
static const char kernel_t[] = "kernel_t";

__attribute__((constructor)) static void register_module(void) {
  void **h = __cudaRegisterFatBinary(fatbin);
  __cudaRegisterFunction(h, kernel_t, "_Z5triadPfi", "_Z5triadPfi", -1, 0, 0, 0,
                         0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

int main(void) {
  dim3 b = {256, 1, 1};
  const struct {
    unsigned grid;
    int value;
    size_t shared;
  } launches[] = {
      {4, 1, 0},    /* class A: tuned block 128 */
      {16, 1, 0},   /* class B: its own block */
      {64, 1, 0},   /* no class */
      {4, 3, 0},    /* class A, a value never measured */
      {16, 1, 128}, /* class B's grid and block, other shared memory */
      {16, 2, 0},   /* class B, the other measured value */
  };
  for (size_t i = 0; i < sizeof launches / sizeof launches[0]; i++)
    for (int rep = 0; rep < 3; rep++) {
      int v = launches[i].value;
      void *args[] = {&v};
      dim3 g = {launches[i].grid, 1, 1};
      cudaLaunchKernel(kernel_t, g, b, args, launches[i].shared, 0);
    }
  cudaDeviceReset();
  return 0;
}
