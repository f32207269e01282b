/* Allocations: while recording, served from the library's arena when it
 * takes them, so that a recording can find what a kernel touches; while
 * deploying tuned kernels, the first one (or the application's choice of
 * device before it, cudaSetDevice) starts loading the library in the
 * background (mneme_deploy_start_background). */
#include "shim_internal.h"

/* CUDA pads pitched rows to 512 bytes on current GPUs; the arena does the
 * same so a recorded application sees the layout it would see without us. */
#define MNEME_PITCH_ALIGN 512u

static size_t pitch_of(size_t width) {
  return (width + MNEME_PITCH_ALIGN - 1) / MNEME_PITCH_ALIGN *
         MNEME_PITCH_ALIGN;
}

/* arena_malloc asks the library; MNEME_RT_FORWARD means "not ours". */
static cudaError_t arena_malloc(void **ptr, size_t size, int kind) {
  if (!load_runtime(1))
    return MNEME_RT_FORWARD;
  return mneme_rt.malloc_(ptr, size, kind);
}

/* Choosing a device is the application's first step on the GPU: deploying,
 * loading the library from here overlaps the application's own start
 * (creating the device's context takes far longer than loading), so the
 * tuned code is ready before the first launch of a short program. */
cudaError_t __wrap_cudaSetDevice(int device) {
  cudaError_t e = __real_cudaSetDevice(device);
  if (e == mneme_cudaSuccess)
    deploy_early_start();
  return e;
}

cudaError_t __wrap_cudaMalloc(void **ptr, size_t size) {
  if (__builtin_expect(!mneme_recording, 1)) {
    cudaError_t e = __real_cudaMalloc(ptr, size);
    deploy_early_start();
    return e;
  }
  cudaError_t e = arena_malloc(ptr, size, MNEME_ALLOC_PLAIN);
  return e == MNEME_RT_FORWARD ? __real_cudaMalloc(ptr, size) : e;
}

cudaError_t __wrap_cudaMallocPitch(void **ptr, size_t *pitch, size_t width,
                                   size_t height) {
  if (__builtin_expect(!mneme_recording, 1)) {
    cudaError_t e = __real_cudaMallocPitch(ptr, pitch, width, height);
    deploy_early_start();
    return e;
  }
  size_t p = pitch_of(width);
  cudaError_t e = arena_malloc(ptr, p * height, MNEME_ALLOC_PITCH);
  if (e == MNEME_RT_FORWARD)
    return __real_cudaMallocPitch(ptr, pitch, width, height);
  if (e == mneme_cudaSuccess && pitch != NULL)
    *pitch = p;
  return e;
}

cudaError_t __wrap_cudaMalloc3D(cudaPitchedPtr *ptr, cudaExtent extent) {
  if (__builtin_expect(!mneme_recording, 1)) {
    cudaError_t e = __real_cudaMalloc3D(ptr, extent);
    deploy_early_start();
    return e;
  }
  size_t p = pitch_of(extent.width);
  void *dev = NULL;
  cudaError_t e =
      arena_malloc(&dev, p * extent.height * extent.depth, MNEME_ALLOC_3D);
  if (e == MNEME_RT_FORWARD)
    return __real_cudaMalloc3D(ptr, extent);
  if (e == mneme_cudaSuccess) {
    ptr->ptr = dev;
    ptr->pitch = p;
    ptr->xsize = extent.width;
    ptr->ysize = extent.height;
  }
  return e;
}

cudaError_t __wrap_cudaMallocAsync(void **ptr, size_t size,
                                   cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1)) {
    cudaError_t e = __real_cudaMallocAsync(ptr, size, stream);
    deploy_early_start();
    return e;
  }
  cudaError_t e = arena_malloc(ptr, size, MNEME_ALLOC_ASYNC);
  return e == MNEME_RT_FORWARD ? __real_cudaMallocAsync(ptr, size, stream) : e;
}

cudaError_t __wrap_cudaMallocAsync_ptsz(void **ptr, size_t size,
                                        cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1)) {
    cudaError_t e = __real_cudaMallocAsync_ptsz(ptr, size, stream);
    deploy_early_start();
    return e;
  }
  cudaError_t e = arena_malloc(ptr, size, MNEME_ALLOC_ASYNC);
  return e == MNEME_RT_FORWARD ? __real_cudaMallocAsync_ptsz(ptr, size, stream)
                               : e;
}

cudaError_t __wrap_cudaMallocManaged(void **ptr, size_t size,
                                     unsigned int flags) {
  if (__builtin_expect(!mneme_recording, 1)) {
    cudaError_t e = __real_cudaMallocManaged(ptr, size, flags);
    deploy_early_start();
    return e;
  }
  mneme_warn_managed();
  /* Listed once it exists, with its address: replay refuses the launches
     whose arguments point into it. */
  cudaError_t e = __real_cudaMallocManaged(ptr, size, flags);
  if (e == mneme_cudaSuccess && load_runtime(1))
    mneme_rt.managed(*ptr, size);
  return e;
}

cudaError_t __wrap_cudaFree(void *ptr) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaFree(ptr);
  if (ptr == NULL || !load_runtime(1))
    return __real_cudaFree(ptr);
  cudaError_t e = mneme_rt.free_(ptr, NULL, 0);
  return e == MNEME_RT_FORWARD ? __real_cudaFree(ptr) : e;
}

cudaError_t __wrap_cudaFreeAsync(void *ptr, cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaFreeAsync(ptr, stream);
  if (ptr == NULL || !load_runtime(1))
    return __real_cudaFreeAsync(ptr, stream);
  cudaError_t e = mneme_rt.free_(ptr, stream, 1);
  return e == MNEME_RT_FORWARD ? __real_cudaFreeAsync(ptr, stream) : e;
}

cudaError_t __wrap_cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaFreeAsync_ptsz(ptr, stream);
  if (ptr == NULL || !load_runtime(1))
    return __real_cudaFreeAsync_ptsz(ptr, stream);
  cudaError_t e = mneme_rt.free_(ptr, stream, 1);
  return e == MNEME_RT_FORWARD ? __real_cudaFreeAsync_ptsz(ptr, stream) : e;
}

/* A device reset frees every allocation, the recorder's shadow copies and
 * staging buffers among them: snapshots still being written are finished
 * before the reset reaches CUDA. */
cudaError_t __wrap_cudaDeviceReset(void) {
  if ((mneme_recording || mneme_counting) && mneme_rt_ready > 0 &&
      mneme_rt.drain)
    mneme_rt.drain();
  return __real_cudaDeviceReset();
}
