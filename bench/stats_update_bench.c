/*
 * Cost of the launch statistics' update alone: calls the shim's inline
 * stats_count (shim_internal.h) N times, as the launch path does under its
 * table lock, for a kernel of four parameters (a pointer that holds, a step
 * counter that changes every launch, a size and a grid that alternate
 * between two values, so every update misses the previous launch's shape
 * and size and scans the tables), and prints nanoseconds per update. The
 * lock is the launch path's own, taken whether or not statistics are kept;
 * the figure leaves it out. Linked with the shim's archive.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../cmd/mneme-rt/shim/shim_internal.h"

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000000;
  size_t sizes[4] = {8, 4, 4, 4};
  struct kernel_entry k;
  memset(&k, 0, sizeof k);
  k.stats = mneme_stats_new(4, sizes);
  if (k.stats == NULL)
    return 1;
  float *field = (float *)0x7f0000001000;
  float a = 0.5f;
  int step = 0, size = 0;
  void *args[] = {&field, &step, &size, &a};
  dim3 b = {128, 1, 1};
  long timed = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; i++) {
    dim3 g = {i & 1 ? 14 : 7, 1, 1};
    step = (int)i;
    size = (int)(g.x * b.x);
    int t;
    stats_count(&k, g, b, 0, args, &t);
    timed += t;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns =
      ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)n;
  printf("%.3f ns/update (%ld updates, %ld to time, %llu counted)\n", ns, n,
         timed, (unsigned long long)k.stats->launches);
  return k.stats->launches == (uint64_t)n ? 0 : 1;
}
