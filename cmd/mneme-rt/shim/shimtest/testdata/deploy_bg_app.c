/*
 * A program whose first allocation starts the runtime library loading in
 * the background while deploying: it launches a tuned kernel while the
 * stand-in library's start is held (MNEME_TEST_GATE), lets it go, waits
 * until it is ready and launches twice more, then once with more dynamic
 * shared memory than the default. With MNEME_TEST_WAIT_FIRST set it makes
 * no launch while the library loads: its first launch comes after. With
 * MNEME_TEST_SET_DEVICE set it chooses its device first, which starts the
 * library, and lets it go and waits for it before allocating anything.
 * With MNEME_TEST_GATE_AFTER_MS set, a thread of its own lets the library
 * go after that many milliseconds, so a launch made while it loads may
 * wait for it (as counted launches do) without holding it up. With
 * MNEME_TEST_BURST set, two more launches follow the first at once.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "cuda_api.h"

static char fatbin[16];
static const char kernel_a[] = "kernel_a";

__attribute__((constructor)) static void register_module(void) {
  void **h = __cudaRegisterFatBinary(fatbin);
  __cudaRegisterFunction(h, kernel_a, "_Z6kernelPfi", "_Z6kernelPfi", -1, 0, 0,
                         0, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static const char *gate_path;

static void *open_gate_later(void *arg) {
  sleep_ms((long)(intptr_t)arg);
  FILE *f = fopen(gate_path, "w");
  if (f != NULL)
    fclose(f);
  return NULL;
}

int main(void) {
  const char *gate = getenv("MNEME_TEST_GATE");
  char ready[4096];
  snprintf(ready, sizeof ready, "%s.ready", gate ? gate : "");
  struct stat st;
  const char *later = getenv("MNEME_TEST_GATE_AFTER_MS");
  if (later != NULL && gate != NULL) {
    pthread_t t;
    gate_path = gate;
    pthread_create(&t, NULL, open_gate_later, (void *)(intptr_t)atol(later));
    pthread_detach(t);
  }
  if (getenv("MNEME_TEST_SET_DEVICE") != NULL) {
    cudaSetDevice(0);
    FILE *g = gate ? fopen(gate, "w") : NULL;
    if (g != NULL)
      fclose(g);
    for (int i = 0; gate != NULL && i < 2000 && stat(ready, &st) != 0; i++)
      sleep_ms(5);
    sleep_ms(200);
  }
  void *p;
  cudaMalloc(&p, 64);
  dim3 g = {1, 1, 1}, b = {32, 1, 1};
  int v = 3;
  void *args[] = {&v};
  if (getenv("MNEME_TEST_WAIT_FIRST") == NULL)
    cudaLaunchKernel(kernel_a, g, b, args, 0, 0); /* while the library loads */
  if (getenv("MNEME_TEST_BURST") != NULL) {
    /* Right behind it: uncounted, these too would come while it loads. */
    cudaLaunchKernel(kernel_a, g, b, args, 0, 0);
    cudaLaunchKernel(kernel_a, g, b, args, 0, 0);
  }
  FILE *f = gate ? fopen(gate, "w") : NULL;
  if (f != NULL)
    fclose(f);
  for (int i = 0; gate != NULL && i < 2000 && stat(ready, &st) != 0; i++)
    sleep_ms(5);
  sleep_ms(200); /* the shim marks the library ready after its init returns */
  cudaLaunchKernel(kernel_a, g, b, args, 0, 0);
  cudaLaunchKernel(kernel_a, g, b, args, 0, 0);
  cudaLaunchKernel(kernel_a, g, b, args, 65536, 0);
  return 0;
}
