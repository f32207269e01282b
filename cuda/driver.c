// Run-time binding of libcuda.so.1: dlopen once, dlsym each entry point by the
// versioned name cuda.h maps it to, and thin wrappers that make sure the
// calling thread has a context before calls that need one.
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *lib;

#define FN(ret, name, args) static ret(*p_##name) args
FN(CUresult, cuInit, (unsigned int));
FN(CUresult, cuDriverGetVersion, (int *));
FN(CUresult, cuGetErrorName, (CUresult, const char **));
FN(CUresult, cuGetErrorString, (CUresult, const char **));
FN(CUresult, cuDeviceGetCount, (int *));
FN(CUresult, cuDeviceGet, (CUdevice *, int));
FN(CUresult, cuDeviceGetName, (char *, int, CUdevice));
FN(CUresult, cuDeviceTotalMem, (size_t *, CUdevice));
FN(CUresult, cuDeviceGetAttribute, (int *, int, CUdevice));
FN(CUresult, cuDeviceGetUuid, (unsigned char *, CUdevice));
FN(CUresult, cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice));
FN(CUresult, cuDevicePrimaryCtxRelease, (CUdevice));
FN(CUresult, cuCtxGetCurrent, (CUcontext *));
FN(CUresult, cuCtxSetCurrent, (CUcontext));
FN(CUresult, cuCtxGetDevice, (CUdevice *));
FN(CUresult, cuCtxSynchronize, (void));
FN(CUresult, cuLinkCreate, (unsigned int, int *, void **, CUlinkState *));
FN(CUresult, cuLinkAddData,
   (CUlinkState, int, void *, size_t, const char *, unsigned int, int *,
    void **));
FN(CUresult, cuLinkComplete, (CUlinkState, void **, size_t *));
FN(CUresult, cuLinkDestroy, (CUlinkState));
FN(CUresult, cuModuleLoadDataEx,
   (CUmodule *, const void *, unsigned int, int *, void **));
FN(CUresult, cuModuleGetFunction, (CUfunction *, CUmodule, const char *));
FN(CUresult, cuModuleGetGlobal,
   (CUdeviceptr *, size_t *, CUmodule, const char *));
FN(CUresult, cuModuleUnload, (CUmodule));
FN(CUresult, cuFuncGetAttribute, (int *, int, CUfunction));
FN(CUresult, cuFuncSetAttribute, (CUfunction, int, int));
FN(CUresult, cuFuncGetParamInfo, (CUfunction, size_t, size_t *, size_t *));
FN(CUresult, cuFuncLoad, (CUfunction));
FN(CUresult, cuFuncIsLoaded, (int *, CUfunction));
FN(CUresult, cuLaunchKernel,
   (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
    unsigned, CUstream, void **, void **));
FN(CUresult, cuStreamCreate, (CUstream *, unsigned int));
FN(CUresult, cuStreamSynchronize, (CUstream));
FN(CUresult, cuStreamDestroy, (CUstream));
FN(CUresult, cuEventCreate, (CUevent *, unsigned int));
FN(CUresult, cuEventRecord, (CUevent, CUstream));
FN(CUresult, cuEventSynchronize, (CUevent));
FN(CUresult, cuStreamIsCapturing, (CUstream, int *));
FN(CUresult, cuThreadExchangeStreamCaptureMode, (int *));
FN(CUresult, cuEventElapsedTime, (float *, CUevent, CUevent));
FN(CUresult, cuEventDestroy, (CUevent));
FN(CUresult, cuMemAlloc, (CUdeviceptr *, size_t));
FN(CUresult, cuMemFree, (CUdeviceptr));
FN(CUresult, cuMemcpyHtoD, (CUdeviceptr, const void *, size_t));
FN(CUresult, cuMemcpyDtoH, (void *, CUdeviceptr, size_t));
FN(CUresult, cuMemcpyDtoD, (CUdeviceptr, CUdeviceptr, size_t));
FN(CUresult, cuMemcpyDtoDAsync, (CUdeviceptr, CUdeviceptr, size_t, CUstream));
FN(CUresult, cuMemcpyDtoHAsync, (void *, CUdeviceptr, size_t, CUstream));
FN(CUresult, cuMemcpyHtoDAsync, (CUdeviceptr, const void *, size_t, CUstream));
FN(CUresult, cuMemAllocHost, (void **, size_t));
FN(CUresult, cuMemFreeHost, (void *));
FN(CUresult, cuMemHostRegister, (void *, size_t, unsigned int));
FN(CUresult, cuMemHostUnregister, (void *));
FN(CUresult, cuMemsetD8, (CUdeviceptr, unsigned char, size_t));
FN(CUresult, cuMemsetD32Async, (CUdeviceptr, unsigned int, size_t, CUstream));
FN(CUresult, cuMemGetInfo, (size_t *, size_t *));
FN(CUresult, cuPointerGetAttribute, (void *, int, CUdeviceptr));
FN(CUresult, cuMemGetAllocationGranularity,
   (size_t *, const mn_mem_allocation_prop *, int));
FN(CUresult, cuMemAddressReserve,
   (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long));
FN(CUresult, cuMemAddressFree, (CUdeviceptr, size_t));
FN(CUresult, cuMemCreate,
   (CUmemGenericAllocationHandle *, size_t, const mn_mem_allocation_prop *,
    unsigned long long));
FN(CUresult, cuMemRelease, (CUmemGenericAllocationHandle));
FN(CUresult, cuMemMap,
   (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
    unsigned long long));
FN(CUresult, cuMemUnmap, (CUdeviceptr, size_t));
FN(CUresult, cuMemSetAccess,
   (CUdeviceptr, size_t, const mn_mem_access_desc *, size_t));
#undef FN

// resolve tries each name in turn: the versioned one cuda.h maps to first,
// then older spellings for drivers that predate it.
static void *resolve(const char *a, const char *b) {
  void *p = dlsym(lib, a);
  if (!p && b)
    p = dlsym(lib, b);
  return p;
}

#define R(name, a, b) p_##name = (__typeof__(p_##name))resolve(a, b)

int mn_load_driver(char *err, size_t errlen) {
  lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(err, errlen, "%s", e ? e : "dlopen failed");
    return 0;
  }
  R(cuInit, "cuInit", NULL);
  R(cuDriverGetVersion, "cuDriverGetVersion", NULL);
  R(cuGetErrorName, "cuGetErrorName", NULL);
  R(cuGetErrorString, "cuGetErrorString", NULL);
  R(cuDeviceGetCount, "cuDeviceGetCount", NULL);
  R(cuDeviceGet, "cuDeviceGet", NULL);
  R(cuDeviceGetName, "cuDeviceGetName", NULL);
  R(cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL);
  R(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL);
  R(cuDeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
  R(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL);
  R(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2",
    "cuDevicePrimaryCtxRelease");
  R(cuCtxGetCurrent, "cuCtxGetCurrent", NULL);
  R(cuCtxSetCurrent, "cuCtxSetCurrent", NULL);
  R(cuCtxGetDevice, "cuCtxGetDevice", NULL);
  R(cuCtxSynchronize, "cuCtxSynchronize", NULL);
  R(cuLinkCreate, "cuLinkCreate_v2", "cuLinkCreate");
  R(cuLinkAddData, "cuLinkAddData_v2", "cuLinkAddData");
  R(cuLinkComplete, "cuLinkComplete", NULL);
  R(cuLinkDestroy, "cuLinkDestroy", NULL);
  R(cuModuleLoadDataEx, "cuModuleLoadDataEx", NULL);
  R(cuModuleGetFunction, "cuModuleGetFunction", NULL);
  R(cuModuleGetGlobal, "cuModuleGetGlobal_v2", NULL);
  R(cuModuleUnload, "cuModuleUnload", NULL);
  R(cuFuncGetAttribute, "cuFuncGetAttribute", NULL);
  R(cuFuncSetAttribute, "cuFuncSetAttribute", NULL);
  R(cuFuncGetParamInfo, "cuFuncGetParamInfo", NULL);
  R(cuFuncLoad, "cuFuncLoad", NULL);
  R(cuFuncIsLoaded, "cuFuncIsLoaded", NULL);
  R(cuLaunchKernel, "cuLaunchKernel", NULL);
  R(cuStreamCreate, "cuStreamCreate", NULL);
  R(cuStreamSynchronize, "cuStreamSynchronize", NULL);
  R(cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy");
  R(cuEventCreate, "cuEventCreate", NULL);
  R(cuEventRecord, "cuEventRecord", NULL);
  R(cuEventSynchronize, "cuEventSynchronize", NULL);
  R(cuStreamIsCapturing, "cuStreamIsCapturing", NULL);
  R(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode",
    NULL);
  R(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  R(cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy");
  R(cuMemAlloc, "cuMemAlloc_v2", NULL);
  R(cuMemFree, "cuMemFree_v2", NULL);
  R(cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL);
  R(cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL);
  R(cuMemcpyDtoD, "cuMemcpyDtoD_v2", NULL);
  R(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", NULL);
  R(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", NULL);
  R(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", NULL);
  R(cuMemAllocHost, "cuMemAllocHost_v2", NULL);
  R(cuMemFreeHost, "cuMemFreeHost", NULL);
  R(cuMemHostRegister, "cuMemHostRegister_v2", "cuMemHostRegister");
  R(cuMemHostUnregister, "cuMemHostUnregister", NULL);
  R(cuMemsetD8, "cuMemsetD8_v2", NULL);
  R(cuMemsetD32Async, "cuMemsetD32Async", NULL);
  R(cuMemGetInfo, "cuMemGetInfo_v2", NULL);
  R(cuPointerGetAttribute, "cuPointerGetAttribute", NULL);
  R(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", NULL);
  R(cuMemAddressReserve, "cuMemAddressReserve", NULL);
  R(cuMemAddressFree, "cuMemAddressFree", NULL);
  R(cuMemCreate, "cuMemCreate", NULL);
  R(cuMemRelease, "cuMemRelease", NULL);
  R(cuMemMap, "cuMemMap", NULL);
  R(cuMemUnmap, "cuMemUnmap", NULL);
  R(cuMemSetAccess, "cuMemSetAccess", NULL);
  if (!p_cuInit || !p_cuGetErrorName || !p_cuGetErrorString ||
      !p_cuCtxGetCurrent) {
    snprintf(err, errlen,
             "libcuda.so.1 lacks cuInit, cuGetErrorName or cuCtxGetCurrent");
    return 0;
  }
  return 1;
}

#define CALL(name, ...)                                                        \
  do {                                                                         \
    if (!p_##name)                                                             \
      return MN_SYMBOL_MISSING;                                                \
    return p_##name(__VA_ARGS__);                                              \
  } while (0)

// The context bound by the Go side: a Go goroutine may run on any OS thread,
// so calls that need a context give this one to a thread that has none.
static CUcontext bound_ctx;

static void ensure_ctx(void) {
  CUcontext cur = NULL;
  CUcontext want = __atomic_load_n(&bound_ctx, __ATOMIC_ACQUIRE);
  if (!want)
    return;
  if (p_cuCtxGetCurrent(&cur) == 0 && cur == NULL)
    p_cuCtxSetCurrent(want);
}

#define CTXCALL(name, ...)                                                     \
  do {                                                                         \
    if (!p_##name)                                                             \
      return MN_SYMBOL_MISSING;                                                \
    ensure_ctx();                                                              \
    return p_##name(__VA_ARGS__);                                              \
  } while (0)

void mn_bind_context(uintptr_t ctx) {
  __atomic_store_n(&bound_ctx, (CUcontext)ctx, __ATOMIC_RELEASE);
}

void mn_unbind_context(uintptr_t ctx) {
  CUcontext expected = (CUcontext)ctx;
  __atomic_compare_exchange_n(&bound_ctx, &expected, NULL, 0, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
}

CUresult mn_cuInit(void) { CALL(cuInit, 0); }
CUresult mn_cuDriverGetVersion(int *v) { CALL(cuDriverGetVersion, v); }

void mn_error_strings(CUresult r, const char **name, const char **msg) {
  *name = NULL;
  *msg = NULL;
  if (p_cuGetErrorName)
    p_cuGetErrorName(r, name);
  if (p_cuGetErrorString)
    p_cuGetErrorString(r, msg);
}

CUresult mn_cuDeviceGetCount(int *n) { CALL(cuDeviceGetCount, n); }
CUresult mn_cuDeviceGet(CUdevice *d, int ordinal) {
  CALL(cuDeviceGet, d, ordinal);
}
CUresult mn_cuDeviceGetName(char *buf, int len, CUdevice d) {
  CALL(cuDeviceGetName, buf, len, d);
}
CUresult mn_cuDeviceTotalMem(size_t *bytes, CUdevice d) {
  CALL(cuDeviceTotalMem, bytes, d);
}
CUresult mn_cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
  CALL(cuDeviceGetAttribute, v, attr, d);
}
CUresult mn_cuDeviceGetUuid(unsigned char uuid[16], CUdevice d) {
  CALL(cuDeviceGetUuid, uuid, d);
}

CUresult mn_cuDevicePrimaryCtxRetain(uintptr_t *ctx, CUdevice d) {
  CUcontext c = NULL;
  if (!p_cuDevicePrimaryCtxRetain)
    return MN_SYMBOL_MISSING;
  CUresult r = p_cuDevicePrimaryCtxRetain(&c, d);
  *ctx = (uintptr_t)c;
  return r;
}
CUresult mn_cuDevicePrimaryCtxRelease(CUdevice d) {
  CALL(cuDevicePrimaryCtxRelease, d);
}
CUresult mn_cuCtxGetCurrent(uintptr_t *ctx) {
  CUcontext c = NULL;
  CUresult r = p_cuCtxGetCurrent(&c);
  *ctx = (uintptr_t)c;
  return r;
}
CUresult mn_cuCtxSetCurrent(uintptr_t ctx) {
  CALL(cuCtxSetCurrent, (CUcontext)ctx);
}
CUresult mn_cuCtxGetDevice(CUdevice *d) { CALL(cuCtxGetDevice, d); }
CUresult mn_cuCtxSynchronize(void) { CTXCALL(cuCtxSynchronize); }

CUresult mn_link_ptx(const char *ptx, size_t len, const char *name,
                     mn_link_args *a) {
  int opts[16]; // 8 at most: keep room, an overflow here corrupts the stack
  void *vals[16];
  unsigned n = 0;
  CUlinkState st = NULL;
  CUresult r;
  void *cubin = NULL;
  size_t size = 0;

  a->failed_call = "cuLinkCreate_v2";
  if (!p_cuLinkCreate || !p_cuLinkAddData || !p_cuLinkComplete ||
      !p_cuLinkDestroy)
    return MN_SYMBOL_MISSING;
  ensure_ctx();
  opts[n] = MN_JIT_INFO_LOG_BUFFER;
  vals[n++] = a->info_log;
  opts[n] = MN_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
  vals[n++] = (void *)(uintptr_t)a->log_size;
  opts[n] = MN_JIT_ERROR_LOG_BUFFER;
  vals[n++] = a->error_log;
  opts[n] = MN_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
  vals[n++] = (void *)(uintptr_t)a->log_size;
  opts[n] = MN_JIT_LOG_VERBOSE;
  vals[n++] = (void *)(uintptr_t)1;
  if (a->opt_level >= 0) {
    opts[n] = MN_JIT_OPTIMIZATION_LEVEL;
    vals[n++] = (void *)(uintptr_t)a->opt_level;
  }
  if (a->max_registers > 0) {
    opts[n] = MN_JIT_MAX_REGISTERS;
    vals[n++] = (void *)(uintptr_t)a->max_registers;
  }
  if (a->target > 0) {
    opts[n] = MN_JIT_TARGET;
    vals[n++] = (void *)(uintptr_t)a->target;
  }
  r = p_cuLinkCreate(n, opts, vals, &st);
  if (r != 0)
    return r;
  a->failed_call = "cuLinkAddData_v2";
  {
    // Verbosity again for this input's ptxas run, so its own report (with
    // spill figures) is written where the driver supports that.
    int in_opts[1] = {MN_JIT_LOG_VERBOSE};
    void *in_vals[1] = {(void *)(uintptr_t)1};
    r = p_cuLinkAddData(st, 1 /* CU_JIT_INPUT_PTX */, (void *)ptx, len, name, 1,
                        in_opts, in_vals);
  }
  if (r == 0) {
    a->failed_call = "cuLinkComplete";
    r = p_cuLinkComplete(st, &cubin, &size);
  }
  if (r == 0) {
    // The cubin belongs to the link state; copy it before destroying that.
    a->cubin = malloc(size ? size : 1);
    if (!a->cubin) {
      r = 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    } else {
      memcpy(a->cubin, cubin, size);
      a->cubin_size = size;
      a->failed_call = NULL;
    }
  }
  p_cuLinkDestroy(st);
  return r;
}

CUresult mn_module_load(uintptr_t *mod, const void *image, char *errlog,
                        unsigned int loglen) {
  int opts[2] = {MN_JIT_ERROR_LOG_BUFFER, MN_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {errlog, (void *)(uintptr_t)loglen};
  CUmodule m = NULL;
  if (!p_cuModuleLoadDataEx)
    return MN_SYMBOL_MISSING;
  ensure_ctx();
  CUresult r = p_cuModuleLoadDataEx(&m, image, 2, opts, vals);
  *mod = (uintptr_t)m;
  return r;
}

CUresult mn_cuModuleGetFunction(uintptr_t *fn, uintptr_t mod,
                                const char *name) {
  CUfunction f = NULL;
  if (!p_cuModuleGetFunction)
    return MN_SYMBOL_MISSING;
  CUresult r = p_cuModuleGetFunction(&f, (CUmodule)mod, name);
  *fn = (uintptr_t)f;
  return r;
}
CUresult mn_cuModuleGetGlobal(CUdeviceptr *addr, size_t *size, uintptr_t mod,
                              const char *name) {
  CALL(cuModuleGetGlobal, addr, size, (CUmodule)mod, name);
}
CUresult mn_cuModuleUnload(uintptr_t mod) {
  CTXCALL(cuModuleUnload, (CUmodule)mod);
}
CUresult mn_cuFuncGetAttribute(int *v, int attr, uintptr_t fn) {
  CALL(cuFuncGetAttribute, v, attr, (CUfunction)fn);
}
CUresult mn_cuFuncSetAttribute(uintptr_t fn, int attr, int value) {
  CALL(cuFuncSetAttribute, (CUfunction)fn, attr, value);
}
CUresult mn_cuFuncLoad(uintptr_t fn) { CTXCALL(cuFuncLoad, (CUfunction)fn); }
CUresult mn_cuFuncIsLoaded(int *state, uintptr_t fn) {
  CALL(cuFuncIsLoaded, state, (CUfunction)fn);
}
CUresult mn_cuFuncGetParamInfo(uintptr_t fn, size_t index, size_t *offset,
                               size_t *size) {
  CALL(cuFuncGetParamInfo, (CUfunction)fn, index, offset, size);
}

CUresult mn_launch_params(uintptr_t fn, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, uintptr_t stream, void **params) {
  if (!p_cuLaunchKernel)
    return MN_SYMBOL_MISSING;
  ensure_ctx();
  return p_cuLaunchKernel((CUfunction)fn, gx, gy, gz, bx, by, bz, shared,
                          (CUstream)stream, params, NULL);
}

uintptr_t mn_launch_entry(void) { return (uintptr_t)p_cuLaunchKernel; }

CUresult mn_launch(uintptr_t fn, unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, unsigned by, unsigned bz, unsigned shared,
                   uintptr_t stream, char *argbuf, const uint32_t *offsets,
                   int nargs) {
  void *small[64];
  void **params = small;
  CUresult r;
  if (!p_cuLaunchKernel)
    return MN_SYMBOL_MISSING;
  if (nargs > 64) {
    params = malloc(sizeof(void *) * (size_t)nargs);
    if (!params)
      return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  }
  for (int i = 0; i < nargs; i++)
    params[i] = argbuf + offsets[i];
  ensure_ctx();
  r = p_cuLaunchKernel((CUfunction)fn, gx, gy, gz, bx, by, bz, shared,
                       (CUstream)stream, nargs ? params : NULL, NULL);
  if (params != small)
    free(params);
  return r;
}

CUresult mn_cuStreamCreate(uintptr_t *s) {
  CUstream st = NULL;
  if (!p_cuStreamCreate)
    return MN_SYMBOL_MISSING;
  ensure_ctx();
  CUresult r = p_cuStreamCreate(&st, 0);
  *s = (uintptr_t)st;
  return r;
}

CUresult mn_cuStreamCreateNonBlocking(uintptr_t *s) {
  CUstream st = NULL;
  if (!p_cuStreamCreate)
    return MN_SYMBOL_MISSING;
  ensure_ctx();
  CUresult r = p_cuStreamCreate(&st, 1 /* CU_STREAM_NON_BLOCKING */);
  *s = (uintptr_t)st;
  return r;
}
CUresult mn_cuStreamSynchronize(uintptr_t s) {
  CTXCALL(cuStreamSynchronize, (CUstream)s);
}
CUresult mn_cuStreamDestroy(uintptr_t s) {
  CTXCALL(cuStreamDestroy, (CUstream)s);
}
CUresult mn_cuEventCreate(uintptr_t *e, unsigned flags) {
  CUevent ev = NULL;
  if (!p_cuEventCreate)
    return MN_SYMBOL_MISSING;
  ensure_ctx();
  CUresult r = p_cuEventCreate(&ev, flags);
  *e = (uintptr_t)ev;
  return r;
}

int mn_event_entries(uintptr_t out[4]) {
  out[0] = (uintptr_t)p_cuEventRecord;
  out[1] = (uintptr_t)p_cuEventSynchronize;
  out[2] = (uintptr_t)p_cuStreamIsCapturing;
  out[3] = (uintptr_t)p_cuThreadExchangeStreamCaptureMode;
  return out[0] && out[1] && out[2] && out[3];
}
CUresult mn_cuEventRecord(uintptr_t e, uintptr_t s) {
  CTXCALL(cuEventRecord, (CUevent)e, (CUstream)s);
}
CUresult mn_cuEventSynchronize(uintptr_t e) {
  CTXCALL(cuEventSynchronize, (CUevent)e);
}
CUresult mn_cuEventElapsedTime(float *ms, uintptr_t start, uintptr_t end) {
  CTXCALL(cuEventElapsedTime, ms, (CUevent)start, (CUevent)end);
}
CUresult mn_cuEventDestroy(uintptr_t e) { CTXCALL(cuEventDestroy, (CUevent)e); }

CUresult mn_cuMemAlloc(CUdeviceptr *p, size_t n) { CTXCALL(cuMemAlloc, p, n); }
CUresult mn_cuMemFree(CUdeviceptr p) { CTXCALL(cuMemFree, p); }
CUresult mn_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
  CTXCALL(cuMemcpyHtoD, dst, src, n);
}
CUresult mn_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
  CTXCALL(cuMemcpyDtoH, dst, src, n);
}
CUresult mn_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  CTXCALL(cuMemcpyDtoD, dst, src, n);
}
CUresult mn_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                              uintptr_t s) {
  CTXCALL(cuMemcpyDtoDAsync, dst, src, n, (CUstream)s);
}

CUresult mn_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n,
                              uintptr_t s) {
  CTXCALL(cuMemcpyDtoHAsync, dst, src, n, (CUstream)s);
}

CUresult mn_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n,
                              uintptr_t s) {
  CTXCALL(cuMemcpyHtoDAsync, dst, src, n, (CUstream)s);
}

CUresult mn_cuMemAllocHost(void **p, size_t n) {
  CTXCALL(cuMemAllocHost, p, n);
}

CUresult mn_cuMemFreeHost(void *p) { CTXCALL(cuMemFreeHost, p); }
CUresult mn_cuMemHostRegister(void *p, size_t n) {
  CTXCALL(cuMemHostRegister, p, n, 0);
}
CUresult mn_cuMemHostUnregister(void *p) { CTXCALL(cuMemHostUnregister, p); }
CUresult mn_cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n) {
  CTXCALL(cuMemsetD8, dst, v, n);
}
CUresult mn_cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n,
                             uintptr_t s) {
  CTXCALL(cuMemsetD32Async, dst, v, n, (CUstream)s);
}
CUresult mn_cuMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  CTXCALL(cuMemGetInfo, free_bytes, total_bytes);
}
CUresult mn_cuPointerIsManaged(unsigned int *managed, CUdeviceptr p) {
  // CU_POINTER_ATTRIBUTE_IS_MANAGED = 8; the driver writes a 4-byte boolean.
  *managed = 0;
  CTXCALL(cuPointerGetAttribute, managed, 8, p);
}

static void device_prop(mn_mem_allocation_prop *prop, CUdevice d) {
  memset(prop, 0, sizeof(*prop));
  prop->type = 1;         // CU_MEM_ALLOCATION_TYPE_PINNED
  prop->locationType = 1; // CU_MEM_LOCATION_TYPE_DEVICE
  prop->locationId = d;
}

CUresult mn_cuMemGetAllocationGranularity(size_t *g, CUdevice d) {
  mn_mem_allocation_prop prop;
  device_prop(&prop, d);
  // CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0
  CTXCALL(cuMemGetAllocationGranularity, g, &prop, 0);
}
CUresult mn_cuMemAddressReserve(CUdeviceptr *p, size_t size, CUdeviceptr addr) {
  CTXCALL(cuMemAddressReserve, p, size, 0, addr, 0);
}
CUresult mn_cuMemAddressFree(CUdeviceptr p, size_t size) {
  CTXCALL(cuMemAddressFree, p, size);
}
CUresult mn_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                        CUdevice d) {
  mn_mem_allocation_prop prop;
  device_prop(&prop, d);
  CTXCALL(cuMemCreate, h, size, &prop, 0);
}
CUresult mn_cuMemRelease(CUmemGenericAllocationHandle h) {
  CTXCALL(cuMemRelease, h);
}
CUresult mn_cuMemMap(CUdeviceptr p, size_t size,
                     CUmemGenericAllocationHandle h) {
  CTXCALL(cuMemMap, p, size, 0, h, 0);
}
CUresult mn_cuMemUnmap(CUdeviceptr p, size_t size) {
  CTXCALL(cuMemUnmap, p, size);
}
CUresult mn_cuMemSetAccess(CUdeviceptr p, size_t size, CUdevice d) {
  mn_mem_access_desc desc = {1 /* DEVICE */, d, 3 /* PROT_READWRITE */};
  CTXCALL(cuMemSetAccess, p, size, &desc, 1);
}
