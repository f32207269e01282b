#include "inject.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"

/* CUPTI (cupti_callbacks.h). */
typedef int CUptiResult;
typedef void *CUpti_SubscriberHandle;
typedef int CUpti_CallbackDomain;
typedef uint32_t CUpti_CallbackId;
typedef void (*CUpti_CallbackFunc)(void *userdata, CUpti_CallbackDomain domain,
                                   CUpti_CallbackId cbid, const void *data);
enum { MI_DOMAIN_DRIVER = 1, MI_DOMAIN_RESOURCE = 3 };
enum { MI_SITE_ENTER = 0, MI_SITE_EXIT = 1 };
enum { MI_RES_CONTEXT_DESTROY_STARTING = 2 };

typedef struct {
  int callbackSite;
  const char *functionName;
  const void *functionParams;
  void *functionReturnValue;
  const char *symbolName;
  void *context;
  uint32_t contextUid;
  uint64_t *correlationData;
  uint32_t correlationId;
} mi_callback_data;

/* Driver types and parameter structures (generated_cuda_meta.h). */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUfunction;
typedef void *CUkernel;
typedef void *CUlibrary;
typedef void *CUmodule;
typedef void *CUstream;

typedef struct {
  CUdeviceptr *dptr;
  size_t bytesize;
} p_alloc; /* cuMemAlloc_v2 */
typedef struct {
  CUdeviceptr *dptr;
  size_t bytesize;
  CUstream stream;
} p_alloc_async; /* cuMemAllocAsync */
typedef struct {
  CUdeviceptr *dptr;
  size_t bytesize;
  void *pool;
  CUstream stream;
} p_alloc_pool_async; /* cuMemAllocFromPoolAsync */
typedef struct {
  CUdeviceptr *dptr;
  size_t *pitch;
  size_t width, height;
  unsigned elem;
} p_alloc_pitch;
typedef struct {
  CUdeviceptr dptr;
} p_free; /* cuMemFree_v2, cuMemFreeAsync (+stream) */
typedef struct {
  CUfunction f;
  unsigned gx, gy, gz, bx, by, bz, shared;
  CUstream stream;
  void **params;
  void **extra;
} p_launch;
typedef struct {
  unsigned gx, gy, gz, bx, by, bz, shared;
  CUstream stream;
  void *attrs;
  unsigned nattrs;
} mi_launch_config;
typedef struct {
  const mi_launch_config *config;
  CUfunction f;
  void **params;
  void **extra;
} p_launch_ex;
typedef struct {
  void **handle; /* CUlibrary* or CUmodule* */
  const void *code;
} p_load; /* cuLibraryLoadData, cuModuleLoadData(Ex), cuModuleLoadFatBinary */
typedef struct {
  void **handle;
  const char *fname;
} p_load_file; /* cuModuleLoad, cuLibraryLoadFromFile */
typedef struct {
  void **out; /* CUkernel* or CUfunction* */
  void *from; /* CUlibrary or CUmodule */
  const char *name;
} p_get; /* cuLibraryGetKernel, cuModuleGetFunction */
typedef struct {
  CUfunction *out;
  CUkernel kernel;
} p_kernel_function; /* cuKernelGetFunction */

_Static_assert(sizeof(p_launch) == 64 && offsetof(p_launch, params) == 48,
               "cuLaunchKernel_params");
_Static_assert(sizeof(p_launch_ex) == 32, "cuLaunchKernelEx_params");
_Static_assert(offsetof(p_alloc_async, stream) == 16 &&
                   offsetof(p_alloc_pool_async, stream) == 24,
               "cuMemAllocAsync_params, cuMemAllocFromPoolAsync_params");
_Static_assert(offsetof(mi_launch_config, stream) == 32 &&
                   offsetof(mi_launch_config, nattrs) == 48,
               "CUlaunchConfig");
_Static_assert(offsetof(mi_callback_data, functionParams) == 16 &&
                   offsetof(mi_callback_data, symbolName) == 32,
               "CUpti_CallbackData");

/* What each callback id means to us, found by name at start-up
 * (cuptiGetCallbackName), so no CUDA version's numbering is built in. */
enum what {
  W_NONE,
  W_ALLOC,
  W_ALLOC_ASYNC,
  W_ALLOC_POOL_ASYNC,
  W_ALLOC_PITCH,
  W_ALLOC_MANAGED,
  W_FREE,
  W_LAUNCH,
  W_LAUNCH_EX,
  W_LOAD_DATA,
  W_LOAD_FILE,
  W_GET_KERNEL,
  W_KERNEL_FUNCTION,
  W_CTX_RESET,
  W_CTX_RELEASE,
};
static const struct {
  const char *name;
  enum what what;
} wanted[] = {
    {"cuMemAlloc_v2", W_ALLOC},
    {"cuMemAllocAsync", W_ALLOC_ASYNC},
    {"cuMemAllocAsync_ptsz", W_ALLOC_ASYNC},
    {"cuMemAllocFromPoolAsync", W_ALLOC_POOL_ASYNC},
    {"cuMemAllocFromPoolAsync_ptsz", W_ALLOC_POOL_ASYNC},
    {"cuMemAllocPitch_v2", W_ALLOC_PITCH},
    {"cuMemAllocManaged", W_ALLOC_MANAGED},
    {"cuMemFree_v2", W_FREE},
    {"cuMemFreeAsync", W_FREE},
    {"cuMemFreeAsync_ptsz", W_FREE},
    {"cuLaunchKernel", W_LAUNCH},
    {"cuLaunchKernel_ptsz", W_LAUNCH},
    {"cuLaunchCooperativeKernel", W_LAUNCH},
    {"cuLaunchCooperativeKernel_ptsz", W_LAUNCH},
    {"cuLaunchKernelEx", W_LAUNCH_EX},
    {"cuLaunchKernelEx_ptsz", W_LAUNCH_EX},
    {"cuLibraryLoadData", W_LOAD_DATA},
    {"cuModuleLoadData", W_LOAD_DATA},
    {"cuModuleLoadDataEx", W_LOAD_DATA},
    {"cuModuleLoadFatBinary", W_LOAD_DATA},
    {"cuModuleLoad", W_LOAD_FILE},
    {"cuLibraryLoadFromFile", W_LOAD_FILE},
    {"cuLibraryGetKernel", W_GET_KERNEL},
    {"cuModuleGetFunction", W_GET_KERNEL},
    {"cuKernelGetFunction", W_KERNEL_FUNCTION},
    {"cuDevicePrimaryCtxReset_v2", W_CTX_RESET},
    {"cuCtxDestroy_v2", W_CTX_RESET},
    {"cuDevicePrimaryCtxRelease_v2", W_CTX_RELEASE},
};
#define MAX_CBID 4096
static unsigned char what_of[MAX_CBID];
/* Set for the _ptsz entry points, whose NULL stream is the per-thread one. */
static unsigned char ptsz_of[MAX_CBID];

static CUptiResult (*p_cuptiSubscribe)(CUpti_SubscriberHandle *,
                                       CUpti_CallbackFunc, void *);
static CUptiResult (*p_cuptiEnableCallback)(uint32_t, CUpti_SubscriberHandle,
                                            CUpti_CallbackDomain,
                                            CUpti_CallbackId);
static CUptiResult (*p_cuptiGetCallbackName)(CUpti_CallbackDomain, uint32_t,
                                             const char **);
static CUptiResult (*p_cuptiEnableDomain)(uint32_t, CUpti_SubscriberHandle,
                                          CUpti_CallbackDomain);

static CUresult (*p_cuFuncGetParamInfo)(CUfunction, size_t, size_t *, size_t *);
static CUresult (*p_cuFuncGetAttribute)(int *, int, CUfunction);
static CUresult (*p_cuKernelGetAttribute)(int *, int, CUkernel, int);
static CUresult (*p_cuCtxGetDevice)(int *);
static CUresult (*p_cuKernelGetParamInfo)(CUkernel, size_t, size_t *, size_t *);
static CUresult (*p_cuDriverGetVersion)(int *);

/* Set while this thread is inside a callback: the driver calls the Go half
 * makes from there (synchronize, copies) come back as callbacks too. */
static __thread int inside;

/* Handle -> image id tables: libraries and modules to the image they were
 * loaded from, kernels and functions to their library's or module's image.
 * Small open-addressing tables under one lock; handles are never reused
 * while the application holds them, and a stale entry only names an image. */
#define TABLE_BITS 16 /* CUDA libraries (cuBLAS) load thousands of kernels */
#define TABLE_SIZE (1u << TABLE_BITS)
struct table {
  void *key[TABLE_SIZE];
  int val[TABLE_SIZE];
};
static struct table loaded, functions;
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned slot(void *k) {
  return (unsigned)(((uintptr_t)k >> 4) * 0x9E3779B1u) >> (32 - TABLE_BITS);
}

static void table_put(struct table *t, void *k, int v) {
  pthread_mutex_lock(&table_mu);
  unsigned i = slot(k);
  for (unsigned n = 0; n < TABLE_SIZE; n++, i = (i + 1) & (TABLE_SIZE - 1)) {
    if (t->key[i] == k || t->key[i] == NULL) {
      t->key[i] = k;
      t->val[i] = v;
      break;
    }
  }
  pthread_mutex_unlock(&table_mu);
}

static int table_get(struct table *t, void *k) {
  int v = -1;
  pthread_mutex_lock(&table_mu);
  unsigned i = slot(k);
  for (unsigned n = 0; n < TABLE_SIZE && t->key[i] != NULL;
       n++, i = (i + 1) & (TABLE_SIZE - 1)) {
    if (t->key[i] == k) {
      v = t->val[i];
      break;
    }
  }
  pthread_mutex_unlock(&table_mu);
  return v;
}

/* Functions the Go half never wants to see (not selected by --kernels):
 * their launches are only counted. */
static struct table ignored;
static atomic_ulong ignored_launches;

/* The image a load call is loading, between its enter and exit callbacks. */
static __thread int loading_image = -1;

/* Image id -> the library or module loaded from it, for its variables. */
struct image_handle {
  void *handle;
  int library; /* a CUlibrary (cuLibraryLoad*), else a CUmodule */
};
static struct image_handle *handles;
static int nhandles;

static void note_handle(int image, void *handle, int library) {
  pthread_mutex_lock(&table_mu);
  if (image >= nhandles) {
    int n = image + 64;
    struct image_handle *h = realloc(handles, n * sizeof *h);
    if (h != NULL) {
      memset(h + nhandles, 0, (n - nhandles) * sizeof *h);
      handles = h, nhandles = n;
    }
  }
  if (image < nhandles)
    handles[image] = (struct image_handle){handle, library};
  pthread_mutex_unlock(&table_mu);
}

static CUresult (*p_cuLibraryGetGlobal)(CUdeviceptr *, size_t *, CUlibrary,
                                        const char *);
static CUresult (*p_cuModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule,
                                       const char *);

int mi_global(int image, const char *name, unsigned long long *addr,
              size_t *size) {
  struct image_handle h = {0};
  pthread_mutex_lock(&table_mu);
  if (image >= 0 && image < nhandles)
    h = handles[image];
  pthread_mutex_unlock(&table_mu);
  if (h.handle == NULL)
    return -1;
  CUdeviceptr p = 0;
  CUresult r;
  if (h.library)
    r = p_cuLibraryGetGlobal ? p_cuLibraryGetGlobal(&p, size, h.handle, name)
                             : -1;
  else
    r = p_cuModuleGetGlobal ? p_cuModuleGetGlobal(&p, size, h.handle, name)
                            : -1;
  *addr = p;
  return r;
}

/* The bytes of a module image the application passes to the driver: a fat
 * binary (or the runtime's wrapper around one), a cubin (ELF) or PTX text.
 * Returns its size, 0 when unrecognisable. */
static const void *image_bytes(const void *code, size_t *size) {
  const unsigned char *p = code;
  uint32_t magic;
  if (p == NULL)
    return NULL;
  memcpy(&magic, p, 4);
  if (magic == 0x466243B1u) { /* __fatBinC_Wrapper_t: magic, version, data */
    const void *fat;
    memcpy(&fat, p + 8, sizeof fat);
    return image_bytes(fat, size);
  }
  if (magic ==
      0xBA55ED50u) { /* fat binary: header size u16 at 6, payload u64 at 8 */
    uint16_t hs;
    uint64_t fat;
    memcpy(&hs, p + 6, 2);
    memcpy(&fat, p + 8, 8);
    if (fat > (1ull << 30))
      return NULL;
    *size = hs + fat;
    return p;
  }
  if (magic == 0x464C457Fu &&
      p[4] == 2) { /* ELF64: the section headers end it */
    uint64_t shoff, phoff;
    uint16_t shentsize, shnum, phentsize, phnum;
    memcpy(&phoff, p + 0x20, 8);
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&phentsize, p + 0x36, 2);
    memcpy(&phnum, p + 0x38, 2);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    uint64_t end = shoff + (uint64_t)shentsize * shnum;
    uint64_t pend = phoff + (uint64_t)phentsize * phnum;
    if (pend > end)
      end = pend;
    if (end > (1ull << 30))
      return NULL;
    *size = end;
    return p;
  }
  /* PTX text, NUL-terminated. */
  size_t n = strnlen((const char *)p, 1u << 30);
  *size = n + 1;
  return p;
}

static void on_load(const mi_callback_data *cd, enum what w) {
  if (cd->callbackSite == MI_SITE_ENTER) {
    loading_image = -1;
    size_t size = 0;
    const void *bytes = NULL;
    if (w == W_LOAD_DATA) {
      bytes = image_bytes(((const p_load *)cd->functionParams)->code, &size);
    }
    if (w == W_LOAD_FILE) {
      loading_image =
          miImageFile((char *)((const p_load_file *)cd->functionParams)->fname);
      return;
    }
    if (bytes != NULL && size > 0)
      loading_image = miImage((void *)bytes, size);
    return;
  }
  CUresult r = *(CUresult *)cd->functionReturnValue;
  void **handle = ((const p_load *)cd->functionParams)->handle;
  if (r == 0 && handle != NULL && loading_image >= 0) {
    table_put(&loaded, *handle, loading_image);
    note_handle(loading_image, *handle,
                strncmp(cd->functionName, "cuLibrary", 9) == 0);
  }
  loading_image = -1;
}

static void on_get(const mi_callback_data *cd, enum what w) {
  if (cd->callbackSite != MI_SITE_EXIT ||
      *(CUresult *)cd->functionReturnValue != 0)
    return;
  if (w == W_GET_KERNEL) {
    const p_get *p = cd->functionParams;
    if (p->out != NULL)
      table_put(&functions, *p->out, table_get(&loaded, p->from));
  } else {
    const p_kernel_function *p = cd->functionParams;
    if (p->out != NULL)
      table_put(&functions, *p->out, table_get(&functions, p->kernel));
  }
}

/* The parameter layout of a launched function: cudart launches CUkernel
 * handles (cuLibraryGetKernel) where cuFuncGetParamInfo answers
 * CUDA_ERROR_INVALID_HANDLE (measured), so cuKernelGetParamInfo is tried
 * too. Returns the number of parameters, -1 if unknown. */
#define MAX_PARAMS 256
static int param_layout(CUfunction f, size_t *off, size_t *size) {
  int n = 0;
  if (p_cuFuncGetParamInfo != NULL) {
    while (n < MAX_PARAMS && p_cuFuncGetParamInfo(f, n, &off[n], &size[n]) == 0)
      n++;
    if (n > 0)
      return n;
  }
  if (p_cuKernelGetParamInfo != NULL) {
    while (n < MAX_PARAMS &&
           p_cuKernelGetParamInfo((CUkernel)f, n, &off[n], &size[n]) == 0)
      n++;
    if (n > 0)
      return n;
  }
  return p_cuFuncGetParamInfo == NULL && p_cuKernelGetParamInfo == NULL ? -1
                                                                        : 0;
}

/* Launch extra options (CU_LAUNCH_PARAM_*): the parameter buffer. */
static const unsigned char *extra_buffer(void **extra) {
  for (int i = 0; extra != NULL && extra[i] != (void *)0x00 && i < 64; i += 2) {
    if (extra[i] == (void *)0x01)
      return extra[i + 1];
  }
  return NULL;
}

static __thread int launch_token;

/* Set when the library deploys tuned kernels instead of recording. */
static int deploying;

/* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
enum { MI_ATTR_MAX_THREADS = 0 };

int mi_max_threads(uintptr_t fn, int *out) {
  int r = p_cuFuncGetAttribute
              ? p_cuFuncGetAttribute(out, MI_ATTR_MAX_THREADS, (CUfunction)fn)
              : -1;
  if (r == 0 || p_cuKernelGetAttribute == NULL || p_cuCtxGetDevice == NULL)
    return r;
  int dev = 0;
  if (p_cuCtxGetDevice(&dev) != 0)
    return r;
  return p_cuKernelGetAttribute(out, MI_ATTR_MAX_THREADS, (CUkernel)fn, dev);
}

/* A launch while deploying: the Go half decides what runs, and the
 * launch's parameters are changed in place before the driver performs it.
 * Only cuLaunchKernel (and _ptsz), which the CUDA runtime uses, is changed;
 * functions without a tuned entry are remembered and never asked again. */
static __thread int deploy_changed; /* this thread's launch was changed */

static void on_deploy_launch(const mi_callback_data *cd, enum what w) {
  if (w != W_LAUNCH)
    return;
  if (cd->callbackSite == MI_SITE_EXIT) {
    CUresult r = *(CUresult *)cd->functionReturnValue;
    if (deploy_changed && r != 0 && cd->symbolName != NULL)
      miDeployFailed((char *)cd->symbolName, r);
    deploy_changed = 0;
    return;
  }
  deploy_changed = 0;
  p_launch *p = (p_launch *)cd->functionParams;
  if (p->f == NULL || table_get(&ignored, p->f) == 1 || cd->symbolName == NULL)
    return;
  struct mi_deploy d = {
      .name = cd->symbolName,
      .image = table_get(&functions, p->f),
      .fn = (uintptr_t)p->f,
      .grid = {p->gx, p->gy, p->gz},
      .block = {p->bx, p->by, p->bz},
      .shared = p->shared,
  };
  int r = miDeployLaunch(&d);
  if (r < 0) {
    table_put(&ignored, p->f, 1);
    return;
  }
  if (r == 1) {
    deploy_changed = 1;
    if (d.fn != 0)
      p->f = (CUfunction)d.fn;
    p->gx = d.grid[0], p->gy = d.grid[1], p->gz = d.grid[2];
    p->bx = d.block[0], p->by = d.block[1], p->bz = d.block[2];
  }
}

/* The launch throttle (devicecopy.Throttle, mi_throttle_on): while the
 * recorder drains a shadow copy out of device memory from a thread of its
 * own, the application's launches keep at most every * MI_THROTTLE_EVENTS
 * launches queued on the GPU, as the shim's throttle keeps those of a
 * wrapped application (cmd/mneme-rt/shim/shim_throttle.c, which says why):
 * after every `every`-th launch one of the events is recorded on the
 * launch's stream, first waiting for that event's previous record. One
 * lock orders the marks of all threads, so no wait depends on a launch made
 * after it. A failure leaves the application unthrottled, never failing. */
static pthread_mutex_t throttle_lock = PTHREAD_MUTEX_INITIALIZER;
static int throttling;
static void *throttle_events[MI_THROTTLE_EVENTS];
static unsigned throttle_every;
static unsigned long long throttled_launches;
static CUresult (*p_cuEventRecord)(void *, CUstream);
static CUresult (*p_cuEventSynchronize)(void *);
static CUresult (*p_cuStreamIsCapturing)(CUstream, int *);
static CUresult (*p_cuThreadExchangeStreamCaptureMode)(int *);

/* CUstreamCaptureStatus and CUstreamCaptureMode values (cuda.h), and the
 * driver's per-thread default stream (CU_STREAM_PER_THREAD). */
enum { MI_CAPTURE_NONE = 0, MI_CAPTURE_RELAXED = 2 };
#define MI_PER_THREAD_STREAM ((CUstream)0x2)

int mi_throttle_on(const uintptr_t *events, int n, unsigned every) {
  if (n != MI_THROTTLE_EVENTS || every == 0 || p_cuEventRecord == NULL ||
      p_cuEventSynchronize == NULL || p_cuStreamIsCapturing == NULL ||
      p_cuThreadExchangeStreamCaptureMode == NULL)
    return 0;
  pthread_mutex_lock(&throttle_lock);
  for (int i = 0; i < n; i++)
    throttle_events[i] = (void *)events[i];
  throttle_every = every;
  throttled_launches = 0;
  __atomic_store_n(&throttling, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&throttle_lock);
  return 1;
}

void mi_throttle_off(void) {
  pthread_mutex_lock(&throttle_lock);
  __atomic_store_n(&throttling, 0, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&throttle_lock);
}

/* driver_stream is the stream a call of an entry point names: the
 * per-thread default stream for a _ptsz entry point's NULL. */
static CUstream driver_stream(CUstream stream, int ptsz) {
  return stream == NULL && ptsz ? MI_PER_THREAD_STREAM : stream;
}

/* launch_stream is the driver stream of a launch call's parameters. */
static CUstream launch_stream(const mi_callback_data *cd, enum what w,
                              int ptsz) {
  return driver_stream(
      w == W_LAUNCH ? ((const p_launch *)cd->functionParams)->stream
                    : ((const p_launch_ex *)cd->functionParams)->config->stream,
      ptsz);
}

/* A stream being captured into a graph: its launches do not run now, and
 * recording one would synchronize inside the capture, which invalidates
 * it; an allocation on it is a graph memory node's. The Go half asks only
 * for the launches it is about to record. */
int mi_stream_capturing(uintptr_t stream) {
  if (p_cuStreamIsCapturing == NULL ||
      p_cuThreadExchangeStreamCaptureMode == NULL)
    return 0;
  CUstream s = (CUstream)stream;
  int mode = MI_CAPTURE_RELAXED, status = MI_CAPTURE_NONE, capturing = 0;
  if (p_cuThreadExchangeStreamCaptureMode(&mode) == 0) {
    capturing =
        p_cuStreamIsCapturing(s, &status) == 0 && status != MI_CAPTURE_NONE;
    p_cuThreadExchangeStreamCaptureMode(&mode);
  }
  return capturing;
}

/* throttle_launch counts a launch the driver accepted on stream s. */
static void throttle_launch(CUstream s) {
  pthread_mutex_lock(&throttle_lock);
  if (!throttling) {
    pthread_mutex_unlock(&throttle_lock);
    return;
  }
  unsigned long long n = throttled_launches++;
  if (n % throttle_every != 0) {
    pthread_mutex_unlock(&throttle_lock);
    return;
  }
  int mode = MI_CAPTURE_RELAXED, status = MI_CAPTURE_NONE;
  if (p_cuThreadExchangeStreamCaptureMode(&mode) == 0) {
    if (p_cuStreamIsCapturing(s, &status) == 0 && status == MI_CAPTURE_NONE) {
      unsigned long long mark = n / throttle_every;
      void *ev = throttle_events[mark % MI_THROTTLE_EVENTS];
      if (mark < MI_THROTTLE_EVENTS || p_cuEventSynchronize(ev) == 0)
        p_cuEventRecord(ev, s);
    }
    p_cuThreadExchangeStreamCaptureMode(&mode);
  }
  pthread_mutex_unlock(&throttle_lock);
}

static void on_launch(const mi_callback_data *cd, enum what w, int ptsz) {
  if (cd->callbackSite == MI_SITE_EXIT) {
    CUresult r = *(CUresult *)cd->functionReturnValue;
    if (launch_token != 0) {
      int tok = launch_token;
      launch_token = 0;
      miLaunchEnd(tok, r);
    }
    if (r == 0 && __atomic_load_n(&throttling, __ATOMIC_RELAXED))
      throttle_launch(launch_stream(cd, w, ptsz));
    return;
  }
  launch_token = 0;
  static atomic_int timing;
  if (atomic_load(&timing) == 0 && atomic_exchange(&timing, 1) == 0)
    miTimingStart(); /* every kernel's GPU time, for the statistics */
  CUfunction f;
  void **params, **extra;
  unsigned dims[7];
  if (w == W_LAUNCH) {
    const p_launch *p = cd->functionParams;
    f = p->f, params = p->params, extra = p->extra;
    memcpy(dims, &p->gx, sizeof dims);
  } else {
    const p_launch_ex *p = cd->functionParams;
    f = p->f, params = p->params, extra = p->extra;
    memcpy(dims, &p->config->gx, sizeof dims);
  }
  if (table_get(&ignored, f) == 1) {
    atomic_fetch_add(&ignored_launches, 1);
    return;
  }
  const char *name = cd->symbolName;
  if (name == NULL)
    return;
  if (!miWants((char *)name)) {
    table_put(&ignored, f, 1);
    atomic_fetch_add(&ignored_launches, 1);
    return;
  }
  /* On the stack: a Go c-shared library is marked STATIC_TLS, and the few
   * bytes of static TLS glibc keeps for libraries loaded later are all it
   * may use (6 KiB of thread-local arrays made dlopen fail with "cannot
   * allocate memory in static TLS block"). */
  size_t off[MAX_PARAMS], size[MAX_PARAMS];
  const void *args[MAX_PARAMS];
  int n = param_layout(f, off, size);
  const unsigned char *buf = extra_buffer(extra);
  for (int i = 0; i < n; i++)
    args[i] = params != NULL ? params[i] : buf != NULL ? buf + off[i] : NULL;
  if (n < 0 || (n > 0 && params == NULL && buf == NULL)) {
    miUnreadable((char *)name);
    return;
  }
  struct mi_launch l = {
      .context = (uintptr_t)cd->context,
      .stream = (uintptr_t)launch_stream(cd, w, ptsz),
      .name = name,
      .image = table_get(&functions, f),
      .grid = {dims[0], dims[1], dims[2]},
      .block = {dims[3], dims[4], dims[5]},
      .shared = dims[6],
      .nparams = n,
      .args = args,
      .sizes = size,
  };
  launch_token = miLaunchBegin(&l);
}

/* An allocation made on a stream being captured into a graph is a graph
 * memory node's: its address is backed only while the graph runs, and a
 * snapshot reading it then would fault the application. Not tracked. */
static void on_alloc(const mi_callback_data *cd, enum what w, int ptsz) {
  if (cd->callbackSite == MI_SITE_ENTER) {
    if (w == W_FREE)
      miFree(((const p_free *)cd->functionParams)->dptr);
    return;
  }
  if (*(CUresult *)cd->functionReturnValue != 0)
    return;
  switch (w) {
  case W_ALLOC: {
    const p_alloc *p = cd->functionParams;
    miAlloc((uintptr_t)cd->context, *p->dptr, p->bytesize);
    break;
  }
  case W_ALLOC_ASYNC: {
    const p_alloc_async *p = cd->functionParams;
    if (!mi_stream_capturing((uintptr_t)driver_stream(p->stream, ptsz)))
      miAlloc((uintptr_t)cd->context, *p->dptr, p->bytesize);
    break;
  }
  case W_ALLOC_POOL_ASYNC: {
    const p_alloc_pool_async *p = cd->functionParams;
    if (!mi_stream_capturing((uintptr_t)driver_stream(p->stream, ptsz)))
      miAlloc((uintptr_t)cd->context, *p->dptr, p->bytesize);
    break;
  }
  case W_ALLOC_PITCH: {
    const p_alloc_pitch *p = cd->functionParams;
    miAlloc((uintptr_t)cd->context, *p->dptr, *p->pitch * p->height);
    break;
  }
  case W_ALLOC_MANAGED: {
    /* cuMemAllocManaged's parameters start as cuMemAlloc_v2's. */
    const p_alloc *p = cd->functionParams;
    miManaged(*p->dptr, p->bytesize);
    break;
  }
  default:
    break;
  }
}

static void callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                     const void *data) {
  (void)ud;
  if (inside || domain != MI_DOMAIN_DRIVER || id >= MAX_CBID)
    return;
  enum what w = what_of[id];
  const mi_callback_data *cd = data;
  inside = 1;
  switch (w) {
  case W_ALLOC:
  case W_ALLOC_ASYNC:
  case W_ALLOC_POOL_ASYNC:
  case W_ALLOC_PITCH:
  case W_ALLOC_MANAGED:
  case W_FREE:
    on_alloc(cd, w, ptsz_of[id]);
    break;
  case W_LAUNCH:
  case W_LAUNCH_EX:
    if (deploying)
      on_deploy_launch(cd, w);
    else
      on_launch(cd, w, ptsz_of[id]);
    break;
  case W_LOAD_DATA:
  case W_LOAD_FILE:
    on_load(cd, w);
    break;
  case W_GET_KERNEL:
  case W_KERNEL_FUNCTION:
    on_get(cd, w);
    break;
  case W_CTX_RESET:
    if (cd->callbackSite == MI_SITE_ENTER)
      miContextEnds();
    break;
  case W_CTX_RELEASE:
    if (cd->callbackSite == MI_SITE_ENTER && !deploying)
      miContextReleasing();
    break;
  default:
    break;
  }
  inside = 0;
}

static void at_exit(void) {
  inside = 1;
  miFinish(atomic_load(&ignored_launches));
}

static void *open_cupti(char *err, size_t errlen) {
  const char *env = getenv("MNEME_CUPTI_LIB");
  const char *names[] = {env,
                         "libcupti.so",
                         "libcupti.so.13",
                         "libcupti.so.12",
                         "/usr/local/cuda/lib64/libcupti.so",
                         "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (names[i] == NULL || names[i][0] == 0)
      continue;
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL)
      return h;
    if (i == 0) {
      snprintf(err, errlen, "MNEME_CUPTI_LIB=%s: %s", env, dlerror());
      return NULL;
    }
  }
  snprintf(err, errlen,
           "CUPTI (libcupti.so) was not found: it ships with the CUDA toolkit "
           "(/usr/local/cuda/lib64); set MNEME_CUPTI_LIB to its path");
  return NULL;
}

/* Called by the driver inside cuInit. Nothing here may call the driver.
 * It always answers success: the application must run as it would without
 * the library, recorded or not (why it is not recorded is in the status
 * file, for `mneme record` to report). */
int InitializeInjection(void) {
  static int done;
  if (done++)
    return 1;
  char err[512];
  int mode = miStart();
  if (mode != 0 && mode != 2)
    return 1;
  deploying = mode == 2;
  void *cupti = open_cupti(err, sizeof err);
  if (cupti == NULL) {
    miFatal(err);
    return 1;
  }
  p_cuptiSubscribe = dlsym(cupti, "cuptiSubscribe");
  p_cuptiEnableCallback = dlsym(cupti, "cuptiEnableCallback");
  p_cuptiGetCallbackName = dlsym(cupti, "cuptiGetCallbackName");
  p_cuptiEnableDomain = dlsym(cupti, "cuptiEnableDomain");
  if (!p_cuptiSubscribe || !p_cuptiEnableCallback || !p_cuptiGetCallbackName) {
    miFatal("CUPTI lacks cuptiSubscribe, cuptiEnableCallback or "
            "cuptiGetCallbackName (CUDA 11.4 or later is needed)");
    return 1;
  }
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (cuda != NULL) {
    p_cuFuncGetParamInfo = dlsym(cuda, "cuFuncGetParamInfo");
    p_cuKernelGetParamInfo = dlsym(cuda, "cuKernelGetParamInfo");
    p_cuDriverGetVersion = dlsym(cuda, "cuDriverGetVersion");
    p_cuLibraryGetGlobal = dlsym(cuda, "cuLibraryGetGlobal");
    p_cuModuleGetGlobal = dlsym(cuda, "cuModuleGetGlobal_v2");
    p_cuFuncGetAttribute = dlsym(cuda, "cuFuncGetAttribute");
    p_cuKernelGetAttribute = dlsym(cuda, "cuKernelGetAttribute");
    p_cuCtxGetDevice = dlsym(cuda, "cuCtxGetDevice");
    p_cuEventRecord = dlsym(cuda, "cuEventRecord");
    p_cuEventSynchronize = dlsym(cuda, "cuEventSynchronize");
    p_cuStreamIsCapturing = dlsym(cuda, "cuStreamIsCapturing");
    p_cuThreadExchangeStreamCaptureMode =
        dlsym(cuda, "cuThreadExchangeStreamCaptureMode");
  }
  CUpti_SubscriberHandle sub;
  CUptiResult r = p_cuptiSubscribe(&sub, callback, NULL);
  if (r != 0) {
    snprintf(err, sizeof err,
             "cuptiSubscribe failed (CUPTI error %d): another tool (a "
             "profiler) may hold CUPTI's "
             "callbacks",
             r);
    miFatal(err);
    return 1;
  }
  int enabled = 0;
  for (uint32_t id = 1; id < MAX_CBID; id++) {
    const char *name = NULL;
    if (p_cuptiGetCallbackName(MI_DOMAIN_DRIVER, id, &name) != 0 ||
        name == NULL)
      continue;
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
      if (strcmp(name, wanted[i].name) == 0) {
        what_of[id] = (unsigned char)wanted[i].what;
        size_t len = strlen(name);
        ptsz_of[id] = len > 5 && strcmp(name + len - 5, "_ptsz") == 0;
        if (p_cuptiEnableCallback(1, sub, MI_DOMAIN_DRIVER, id) == 0)
          enabled++;
      }
    }
  }
  if (enabled == 0) {
    miFatal("CUPTI enabled none of the driver callbacks mneme needs");
    return 1;
  }
  atexit(at_exit);
  return 1;
}

int mi_driver_version(int *v) {
  return p_cuDriverGetVersion ? p_cuDriverGetVersion(v) : -1;
}
