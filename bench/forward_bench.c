/*
 * Cost of one launch through the shim when not recording: times N calls of
 * cudaLaunchKernel and prints nanoseconds per call. Built once linked
 * directly against the runtime and once with the shim and --wrap; the
 * difference is what the shim adds. With the stand-in runtime
 * (testdata/cudart_standin.c) the launch itself costs nothing, so the
 * figure is the wrapper alone; on a GPU machine link the real libcudart and
 * use launch_bench.cu instead.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  unsigned x, y, z;
} dim3;
int cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sh,
                     void *s);
extern int standin_quiet;

static void stub(void) {}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 50000000;
  standin_quiet = 1;
  int x = 1;
  void *args[] = {&x};
  dim3 g = {1, 1, 1}, b = {32, 1, 1};
  int sum = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; i++)
    sum += cudaLaunchKernel((const void *)stub, g, b, args, 0, 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns =
      ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)n;
  printf("%.3f ns/launch (%ld launches, sum %d)\n", ns, n, sum);
  return 0;
}
