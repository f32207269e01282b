/*
 * The C half of libmneme_inject.so, the library the CUDA driver loads into
 * an application through CUDA_INJECTION64_PATH while `mneme record` records
 * an application not built with mneme's wrapper. It subscribes to CUPTI's
 * callbacks on the driver API and hands module loads, allocations and
 * launches to the Go half (main.go, package record/inject).
 *
 * No CUDA toolkit exists at build time: the CUPTI and driver types used here
 * are declared with the layouts of CUDA 12/13's cupti_callbacks.h and
 * generated_cuda_meta.h (checked on CUDA 13.0: sizes and offsets in
 * docs/design.md).
 */
#ifndef MNEME_INJECT_H
#define MNEME_INJECT_H

#include <stddef.h>
#include <stdint.h>

/* One launch as the Go half sees it. args[i] points at the bytes of
 * parameter i (sizes[i] bytes), valid during the call. */
struct mi_launch {
  uintptr_t context; /* the CUcontext current for the launch */
  uintptr_t stream;  /* its CUstream (the per-thread one named as such) */
  const char *name;
  int image;
  unsigned grid[3], block[3], shared;
  int nparams;
  const void **args;
  const size_t *sizes;
};

/* The driver entry points the Go half calls (through the cuda package for
 * copies; these for what the cuda package lacks). */
int mi_driver_version(int *v);

/* The device address and size of variable `name` of the module or library
 * loaded from image `image` (cuLibraryGetGlobal / cuModuleGetGlobal_v2 in
 * the current context). Returns the driver's result; -1 when the image's
 * handle is unknown or the driver lacks the entry point. */
int mi_global(int image, const char *name, unsigned long long *addr,
              size_t *size);

/* One launch of a kernel being deployed: what the application launches,
 * and, when miDeployLaunch answers 1, what runs instead (fn 0: the
 * application's function). */
struct mi_deploy {
  const char *name;
  int image;
  uintptr_t fn;
  unsigned grid[3], block[3], shared;
};

/* The most threads per block function fn takes (a CUfunction, or the
 * CUkernel handle the runtime launches): cuFuncGetAttribute, else
 * cuKernelGetAttribute on the current device. Returns the driver's result. */
int mi_max_threads(uintptr_t fn, int *out);

/* The launch throttle: the application's launches keep at most
 * every * MI_THROTTLE_EVENTS queued on the GPU, waiting on events (CUevent
 * handles in its context) while the recorder drains a shadow copy. Returns
 * 0 when refused (a wrong count, or the driver lacks an entry point). */
#define MI_THROTTLE_EVENTS 32
int mi_throttle_on(const uintptr_t *events, int n, unsigned every);

/* Whether a stream (struct mi_launch's) is being captured into a graph:
 * its launches do not run now. 0 when the driver cannot tell. */
int mi_stream_capturing(uintptr_t stream);
void mi_throttle_off(void);

#endif
