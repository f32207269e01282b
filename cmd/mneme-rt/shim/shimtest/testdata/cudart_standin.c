/*
 * A stand-in for the CUDA runtime library, for testing the shim's forwarding
 * on machines without CUDA: each entry point the shim binds with --wrap (or
 * calls directly) answers deterministically from its arguments, so a program
 * prints the same lines whether or not the shim sits in between, and any
 * argument the shim altered would show. The GPU tests use the real runtime.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The declarations the test programs use: the definitions below must match. */
#include "cuda_api.h"

static uintptr_t next_ptr = 0x10000;
static void *fake(size_t size) {
  void *p = (void *)next_ptr;
  next_ptr += (size + 255) / 256 * 256 + 256;
  return p;
}

static int fatbin_token;
void **__cudaRegisterFatBinary(void *fat) {
  (void)fat;
  return (void **)&fatbin_token;
}
void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
void __cudaUnregisterFatBinary(void **h) { (void)h; }
void __cudaRegisterFunction(void **h, const char *hf, char *df, const char *dn,
                            int tl, void *t, void *b, dim3 *bd, dim3 *gd,
                            int *ws) {
  (void)h;
  (void)hf;
  (void)df;
  (void)dn;
  (void)tl;
  (void)t;
  (void)b;
  (void)bd;
  (void)gd;
  (void)ws;
}
void __cudaRegisterVar(void **h, char *hv, char *da, const char *dn, int ext,
                       size_t size, int c, int g) {
  (void)h;
  (void)hv;
  (void)da;
  (void)dn;
  (void)ext;
  (void)size;
  (void)c;
  (void)g;
}
void __cudaRegisterManagedVar(void **h, void **hv, char *da, const char *dn,
                              int ext, size_t size, int c, int g) {
  (void)h;
  (void)hv;
  (void)da;
  (void)dn;
  (void)ext;
  (void)size;
  (void)c;
  (void)g;
}

/* Set by the benchmark: launches then do nothing, so the wrapper's own cost
 * is what is measured. */
int standin_quiet;

static int launch(const char *which, const void *f, dim3 g, dim3 b, void **args,
                  size_t sh, void *s) {
  if (standin_quiet)
    return 0;
  int a0 = args ? *(int *)args[0] : -1;
  printf("%s f=%s grid=%u,%u,%u block=%u,%u,%u arg0=%d shared=%zu stream=%p\n",
         which, (const char *)f, g.x, g.y, g.z, b.x, b.y, b.z, a0, sh, s);
  return (int)(g.x % 7); /* an error code the caller must see unchanged */
}
int cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sh,
                     void *s) {
  return launch("launch", f, g, b, a, sh, s);
}
int cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sh,
                          void *s) {
  return launch("launch_ptsz", f, g, b, a, sh, s);
}

int cudaMalloc(void **p, size_t n) {
  *p = fake(n);
  return n > (1u << 30) ? 2 : 0;
}
int cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h) {
  *pitch = (w + 255) / 256 * 256;
  *p = fake(*pitch * h);
  return 0;
}
int cudaMalloc3D(cudaPitchedPtr *p, cudaExtent e) {
  p->pitch = (e.width + 255) / 256 * 256;
  p->ptr = fake(p->pitch * e.height * e.depth);
  p->xsize = e.width;
  p->ysize = e.height;
  return 0;
}
int cudaMallocAsync(void **p, size_t n, void *s) {
  (void)s;
  *p = fake(n);
  return 0;
}
int cudaMallocAsync_ptsz(void **p, size_t n, void *s) {
  (void)s;
  *p = fake(n + 1);
  return 0;
}
int cudaMallocManaged(void **p, size_t n, unsigned flags) {
  *p = fake(n + flags);
  return 0;
}
int cudaFree(void *p) { return p == (void *)1 ? 1 : 0; }
int cudaDeviceReset(void) { return 0; }
int cudaFreeAsync(void *p, void *s) {
  (void)s;
  return p == (void *)1 ? 1 : 0;
}
int cudaFreeAsync_ptsz(void *p, void *s) {
  (void)s;
  return p == (void *)1 ? 3 : 0;
}

/* Calls the shim makes only while recording. Without a driver the runtime
 * library stops before using them; they report "no device" (100). */
int cudaGetSymbolAddress(void **p, const void *s) {
  (void)p;
  (void)s;
  return 100;
}
int cudaGetSymbolSize(size_t *n, const void *s) {
  (void)n;
  (void)s;
  return 100;
}
int cudaGetFuncBySymbol(void **f, const void *s) {
  (void)f;
  (void)s;
  return 100;
}
int cudaDeviceSynchronize(void) { return 100; }
int cudaStreamSynchronize(void *s) {
  (void)s;
  return 100;
}
int cudaMemcpy(void *d, const void *s, size_t n, int k) {
  (void)d;
  (void)s;
  (void)n;
  (void)k;
  return 100;
}
int cudaGetDevice(int *d) {
  *d = 0;
  return 100;
}
int cudaSetDevice(int d) {
  (void)d;
  return 0;
}
int cudaDriverGetVersion(int *v) {
  *v = 0;
  return 0;
}
int cudaRuntimeGetVersion(int *v) {
  *v = 13000;
  return 0;
}
const char *cudaGetErrorString(int e) {
  return e == 100 ? "no CUDA-capable device is detected" : "stand-in error";
}
