// The slice of the CUDA driver API (cuda.h) and CUPTI activity API that the
// cuda package uses, declared here because no CUDA toolkit exists at build
// time. Values and layouts follow CUDA 12/13's cuda.h and cupti_activity.h.
// Every driver entry point is resolved with dlsym at run time; the mn_*
// wrappers return MN_SYMBOL_MISSING when the loaded driver lacks one.
#ifndef MNEME_CUDA_DRIVER_H
#define MNEME_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUlinkState;

// Returned by a wrapper whose driver symbol could not be resolved.
#define MN_SYMBOL_MISSING 0x7fff0001

// CUjit_option values.
enum {
  MN_JIT_MAX_REGISTERS = 0,
  MN_JIT_INFO_LOG_BUFFER = 3,
  MN_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  MN_JIT_ERROR_LOG_BUFFER = 5,
  MN_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  MN_JIT_OPTIMIZATION_LEVEL = 7,
  MN_JIT_TARGET = 9,
  MN_JIT_LOG_VERBOSE = 12,
};

// CUmemAllocationProp (32 bytes on LP64).
typedef struct {
  int type;                 // CUmemAllocationType: 1 = PINNED
  int requestedHandleTypes; // CUmemAllocationHandleType: 0 = none
  int locationType;         // CUmemLocation.type: 1 = DEVICE
  int locationId;           // CUmemLocation.id: device ordinal
  void *win32HandleMetaData;
  unsigned char compressionType;
  unsigned char gpuDirectRDMACapable;
  unsigned short usage;
  unsigned char reserved[4];
} mn_mem_allocation_prop;

// CUmemAccessDesc.
typedef struct {
  int locationType;
  int locationId;
  int flags; // CUmemAccess_flags: 3 = PROT_READWRITE
} mn_mem_access_desc;

// Loading and errors.
int mn_load_driver(char *err, size_t errlen);
CUresult mn_cuInit(void);
CUresult mn_cuDriverGetVersion(int *v);
void mn_error_strings(CUresult r, const char **name, const char **msg);

// Devices.
CUresult mn_cuDeviceGetCount(int *n);
CUresult mn_cuDeviceGet(CUdevice *d, int ordinal);
CUresult mn_cuDeviceGetName(char *buf, int len, CUdevice d);
CUresult mn_cuDeviceTotalMem(size_t *bytes, CUdevice d);
CUresult mn_cuDeviceGetAttribute(int *v, int attr, CUdevice d);
CUresult mn_cuDeviceGetUuid(unsigned char uuid[16], CUdevice d);

// Contexts. The bound context is the one handed to threads that have none.
CUresult mn_cuDevicePrimaryCtxRetain(uintptr_t *ctx, CUdevice d);
CUresult mn_cuDevicePrimaryCtxRelease(CUdevice d);
CUresult mn_cuCtxGetCurrent(uintptr_t *ctx);
CUresult mn_cuCtxSetCurrent(uintptr_t ctx);
CUresult mn_cuCtxGetDevice(CUdevice *d);
CUresult mn_cuCtxSynchronize(void);
void mn_bind_context(uintptr_t ctx);
void mn_unbind_context(uintptr_t ctx); // only if ctx is the bound one

// JIT linking: everything between cuLinkCreate and cuLinkDestroy.
typedef struct {
  int opt_level;     // -1: driver default
  int max_registers; // 0: none
  int target;        // 0: from the current context
  char *info_log;
  char *error_log;
  unsigned int log_size;
  void *cubin; // malloc'd copy, caller frees
  size_t cubin_size;
  const char *failed_call;
} mn_link_args;
CUresult mn_link_ptx(const char *ptx, size_t len, const char *name,
                     mn_link_args *a);

// Modules and functions.
CUresult mn_module_load(uintptr_t *mod, const void *image, char *errlog,
                        unsigned int loglen);
CUresult mn_cuModuleGetFunction(uintptr_t *fn, uintptr_t mod, const char *name);
CUresult mn_cuModuleGetGlobal(CUdeviceptr *addr, size_t *size, uintptr_t mod,
                              const char *name);
CUresult mn_cuModuleUnload(uintptr_t mod);
CUresult mn_cuFuncGetAttribute(int *v, int attr, uintptr_t fn);
CUresult mn_cuFuncSetAttribute(uintptr_t fn, int attr, int value);
// cuFuncLoad and cuFuncIsLoaded (driver 12.4+): under lazy loading (the
// default since CUDA 12.2) a function is put on the GPU at its first launch
// unless loaded before; the state is 1 when loaded.
CUresult mn_cuFuncLoad(uintptr_t fn);
CUresult mn_cuFuncIsLoaded(int *state, uintptr_t fn);
CUresult mn_cuFuncGetParamInfo(uintptr_t fn, size_t index, size_t *offset,
                               size_t *size);
CUresult mn_launch(uintptr_t fn, unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, unsigned by, unsigned bz, unsigned shared,
                   uintptr_t stream, char *argbuf, const uint32_t *offsets,
                   int nargs);
// mn_launch_params launches with the application's own parameter array.
CUresult mn_launch_params(uintptr_t fn, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, uintptr_t stream, void **params);
// mn_launch_entry is the driver's cuLaunchKernel (NULL before mn_init).
uintptr_t mn_launch_entry(void);

// Streams and events.
CUresult mn_cuStreamCreate(uintptr_t *s);
CUresult mn_cuStreamCreateNonBlocking(uintptr_t *s);
CUresult mn_cuStreamSynchronize(uintptr_t s);
CUresult mn_cuStreamDestroy(uintptr_t s);
CUresult mn_cuEventCreate(uintptr_t *e, unsigned flags);
// mn_event_entries fills out with the driver's cuEventRecord,
// cuEventSynchronize, cuStreamIsCapturing and
// cuThreadExchangeStreamCaptureMode; 0 when one is missing.
int mn_event_entries(uintptr_t out[4]);
CUresult mn_cuEventRecord(uintptr_t e, uintptr_t s);
CUresult mn_cuEventSynchronize(uintptr_t e);
CUresult mn_cuEventElapsedTime(float *ms, uintptr_t start, uintptr_t end);
CUresult mn_cuEventDestroy(uintptr_t e);

// Memory.
CUresult mn_cuMemAlloc(CUdeviceptr *p, size_t n);
CUresult mn_cuMemFree(CUdeviceptr p);
CUresult mn_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n);
CUresult mn_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n);
CUresult mn_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult mn_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n,
                              uintptr_t s);
CUresult mn_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n,
                              uintptr_t s);
CUresult mn_cuMemAllocHost(void **p, size_t n);
CUresult mn_cuMemFreeHost(void *p);
CUresult mn_cuMemHostRegister(void *p, size_t n);
CUresult mn_cuMemHostUnregister(void *p);
CUresult mn_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                              uintptr_t s);
CUresult mn_cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n);
CUresult mn_cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n,
                             uintptr_t s);
CUresult mn_cuMemGetInfo(size_t *free_bytes, size_t *total_bytes);
CUresult mn_cuPointerIsManaged(unsigned int *managed, CUdeviceptr p);

// Virtual memory management.
CUresult mn_cuMemGetAllocationGranularity(size_t *g, CUdevice d);
CUresult mn_cuMemAddressReserve(CUdeviceptr *p, size_t size, CUdeviceptr addr);
CUresult mn_cuMemAddressFree(CUdeviceptr p, size_t size);
CUresult mn_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                        CUdevice d);
CUresult mn_cuMemRelease(CUmemGenericAllocationHandle h);
CUresult mn_cuMemMap(CUdeviceptr p, size_t size,
                     CUmemGenericAllocationHandle h);
CUresult mn_cuMemUnmap(CUdeviceptr p, size_t size);
CUresult mn_cuMemSetAccess(CUdeviceptr p, size_t size, CUdevice d);

// CUPTI kernel activity records.
typedef struct {
  uint64_t start, end;
  uint32_t correlation_id;
  int32_t grid[3], block[3];
  int32_t dynamic_shared;
  char *name; // malloc'd, freed by mn_cupti_free_records
} mn_kernel_record;
int mn_cupti_load(char *err, size_t errlen);
int mn_cupti_enable(void);
int mn_cupti_disable(void);
int mn_cupti_flush(void);
size_t mn_cupti_take(mn_kernel_record **out, uint64_t *dropped);
void mn_cupti_free_records(mn_kernel_record *recs, size_t n);
const char *mn_cupti_result_string(int r);

#endif
