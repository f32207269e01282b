/*
 * The CUDA runtime calls the test programs make, declared as compiled CUDA
 * code sees them (no CUDA header exists at build time): what the shim
 * intercepts, and cudaDeviceReset.
 */
#ifndef SHIMTEST_CUDA_API_H
#define SHIMTEST_CUDA_API_H

#include <stddef.h>

typedef struct {
  unsigned x, y, z;
} dim3;
typedef struct {
  void *ptr;
  size_t pitch, xsize, ysize;
} cudaPitchedPtr;
typedef struct {
  size_t width, height, depth;
} cudaExtent;

void **__cudaRegisterFatBinary(void *fat);
void __cudaRegisterFatBinaryEnd(void **h);
void __cudaUnregisterFatBinary(void **h);
void __cudaRegisterFunction(void **h, const char *hf, char *df, const char *dn,
                            int tl, void *t, void *b, dim3 *bd, dim3 *gd,
                            int *ws);
void __cudaRegisterVar(void **h, char *hv, char *da, const char *dn, int ext,
                       size_t size, int c, int g);
int cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sh,
                     void *s);
int cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t sh,
                          void *s);
int cudaMalloc(void **p, size_t n);
int cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h);
int cudaMalloc3D(cudaPitchedPtr *p, cudaExtent e);
int cudaMallocAsync(void **p, size_t n, void *s);
int cudaMallocAsync_ptsz(void **p, size_t n, void *s);
int cudaMallocManaged(void **p, size_t n, unsigned flags);
int cudaFree(void *p);
int cudaFreeAsync(void *p, void *s);
int cudaFreeAsync_ptsz(void *p, void *s);
int cudaDeviceReset(void);

#endif
