/*
 * The mneme shim: linked into every application built with the compiler
 * wrapper (whole-archive, with the linker's --wrap option for each symbol of
 * runtime.WrappedSymbols). It defines __wrap_X for each intercepted CUDA
 * runtime call X and calls __real_X, which the linker binds to CUDA.
 *
 * When the application is not being recorded, every wrapper costs one
 * predictable branch before it forwards, so the application behaves exactly
 * as if it had been linked without us. Registration calls are always
 * remembered in small tables, since they happen once per kernel and the
 * recorder needs them even if recording starts later in the process.
 *
 * When MNEME_RECORD is set, the shim loads the Go runtime library named by
 * MNEME_RT_LIB on first use and hands it every launch, allocation and free.
 */
#define _GNU_SOURCE
#include "mneme_shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the real CUDA runtime (bound by --wrap) and a few unwrapped calls ---- */

void **__real___cudaRegisterFatBinary(void *fat_cubin);
void __real___cudaRegisterFatBinaryEnd(void **handle);
void __real___cudaUnregisterFatBinary(void **handle);
void __real___cudaRegisterFunction(void **handle, const char *host_fun,
                                   char *device_fun, const char *device_name,
                                   int thread_limit, void *tid, void *bid,
                                   dim3 *bdim, dim3 *gdim, int *wsize);
void __real___cudaRegisterVar(void **handle, char *host_var,
                              char *device_address, const char *device_name,
                              int ext, size_t size, int constant, int global);
void __real___cudaRegisterManagedVar(void **handle, void **host_var_ptr_addr,
                                     char *device_address,
                                     const char *device_name, int ext,
                                     size_t size, int constant, int global);
cudaError_t __real_cudaLaunchKernel(const void *func, dim3 grid, dim3 block,
                                    void **args, size_t shared,
                                    cudaStream_t stream);
cudaError_t __real_cudaLaunchKernel_ptsz(const void *func, dim3 grid,
                                         dim3 block, void **args,
                                         size_t shared, cudaStream_t stream);
cudaError_t __real_cudaMalloc(void **ptr, size_t size);
cudaError_t __real_cudaMallocPitch(void **ptr, size_t *pitch, size_t width,
                                   size_t height);
cudaError_t __real_cudaMalloc3D(cudaPitchedPtr *ptr, cudaExtent extent);
cudaError_t __real_cudaMallocAsync(void **ptr, size_t size,
                                   cudaStream_t stream);
cudaError_t __real_cudaMallocAsync_ptsz(void **ptr, size_t size,
                                        cudaStream_t stream);
cudaError_t __real_cudaMallocManaged(void **ptr, size_t size,
                                     unsigned int flags);
cudaError_t __real_cudaFree(void *ptr);
cudaError_t __real_cudaFreeAsync(void *ptr, cudaStream_t stream);
cudaError_t __real_cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream);

cudaError_t cudaGetSymbolAddress(void **dev_ptr, const void *symbol);
cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol);
cudaError_t cudaGetFuncBySymbol(cudaFunction_t *func, const void *symbol);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
const char *cudaGetErrorString(cudaError_t err);

/* Present when the application links libstdc++ (every CUDA C++ program);
 * without it names stay mangled. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
                            int *status) __attribute__((weak));

/* The linker defines these when some object has a mneme_ir section. */
extern const char __start_mneme_ir[] __attribute__((weak));
extern const char __stop_mneme_ir[] __attribute__((weak));

/* ---- mode ---- */

/* Non-zero while recording. Read once, before main, so the hot path is one
 * load and one predictable branch. */
static int mneme_recording;

__attribute__((constructor(101))) static void mneme_read_environment(void) {
  const char *r = getenv("MNEME_RECORD");
  mneme_recording = r != NULL && r[0] != '\0' && strcmp(r, "0") != 0;
}

/* ---- registration tables ---- */

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

struct fatbin_entry {
  void **handle;
};
struct kernel_entry {
  struct mneme_kernel_reg reg;
  void **handle;
  char *demangled; /* owned; filled lazily */
  int forward_always;
};
struct var_entry {
  struct mneme_var_reg reg;
  void **handle;
};

static struct fatbin_entry *fatbins;
static int n_fatbins, cap_fatbins;
static struct kernel_entry *kernels;
static int n_kernels, cap_kernels;
static struct var_entry *vars;
static int n_vars, cap_vars;

/* grow makes room for one more element; it reports failure instead of
 * aborting, since losing a table entry must not break the application. */
static int grow(void **arr, int *cap, int n, size_t elem) {
  if (n < *cap)
    return 1;
  int ncap = *cap ? *cap * 2 : 64;
  void *p = realloc(*arr, (size_t)ncap * elem);
  if (p == NULL)
    return 0;
  *arr = p;
  *cap = ncap;
  return 1;
}

static int module_of(void **handle) {
  for (int i = n_fatbins - 1; i >= 0; i--)
    if (fatbins[i].handle == handle)
      return i;
  return -1;
}

void **__wrap___cudaRegisterFatBinary(void *fat_cubin) {
  void **h = __real___cudaRegisterFatBinary(fat_cubin);
  pthread_mutex_lock(&table_lock);
  if (grow((void **)&fatbins, &cap_fatbins, n_fatbins, sizeof *fatbins))
    fatbins[n_fatbins++].handle = h;
  pthread_mutex_unlock(&table_lock);
  return h;
}

void __wrap___cudaRegisterFatBinaryEnd(void **handle) {
  __real___cudaRegisterFatBinaryEnd(handle);
}

void __wrap___cudaUnregisterFatBinary(void **handle) {
  __real___cudaUnregisterFatBinary(handle);
}

void __wrap___cudaRegisterFunction(void **handle, const char *host_fun,
                                   char *device_fun, const char *device_name,
                                   int thread_limit, void *tid, void *bid,
                                   dim3 *bdim, dim3 *gdim, int *wsize) {
  __real___cudaRegisterFunction(handle, host_fun, device_fun, device_name,
                                thread_limit, tid, bid, bdim, gdim, wsize);
  pthread_mutex_lock(&table_lock);
  if (grow((void **)&kernels, &cap_kernels, n_kernels, sizeof *kernels)) {
    struct kernel_entry *k = &kernels[n_kernels++];
    memset(k, 0, sizeof *k);
    k->reg.host_fun = host_fun;
    k->reg.device_name = device_name;
    k->reg.module = module_of(handle);
    k->handle = handle;
  }
  pthread_mutex_unlock(&table_lock);
}

static void remember_var(void **handle, const void *host_var,
                         const char *device_name, size_t size, int constant,
                         int managed) {
  pthread_mutex_lock(&table_lock);
  if (grow((void **)&vars, &cap_vars, n_vars, sizeof *vars)) {
    struct var_entry *v = &vars[n_vars++];
    v->reg.host_var = host_var;
    v->reg.device_name = device_name;
    v->reg.size = size;
    v->reg.module = module_of(handle);
    v->reg.constant = constant;
    v->reg.managed = managed;
    v->handle = handle;
  }
  pthread_mutex_unlock(&table_lock);
}

void __wrap___cudaRegisterVar(void **handle, char *host_var,
                              char *device_address, const char *device_name,
                              int ext, size_t size, int constant, int global) {
  __real___cudaRegisterVar(handle, host_var, device_address, device_name, ext,
                           size, constant, global);
  remember_var(handle, host_var, device_name, size, constant, 0);
}

static void warn_managed(void);

void __wrap___cudaRegisterManagedVar(void **handle, void **host_var_ptr_addr,
                                     char *device_address,
                                     const char *device_name, int ext,
                                     size_t size, int constant, int global) {
  __real___cudaRegisterManagedVar(handle, host_var_ptr_addr, device_address,
                                  device_name, ext, size, constant, global);
  remember_var(handle, host_var_ptr_addr, device_name, size, constant, 1);
  if (__builtin_expect(mneme_recording, 0))
    warn_managed();
}

/* ---- host API handed to the library ---- */

static int api_fatbin_count(void) {
  pthread_mutex_lock(&table_lock);
  int n = n_fatbins;
  pthread_mutex_unlock(&table_lock);
  return n;
}

static int api_kernel_count(void) {
  pthread_mutex_lock(&table_lock);
  int n = n_kernels;
  pthread_mutex_unlock(&table_lock);
  return n;
}

static int api_kernel_at(int i, struct mneme_kernel_reg *out) {
  pthread_mutex_lock(&table_lock);
  if (i < 0 || i >= n_kernels) {
    pthread_mutex_unlock(&table_lock);
    return 0;
  }
  struct kernel_entry *k = &kernels[i];
  if (k->demangled == NULL && __cxa_demangle != NULL) {
    int status = -1;
    k->demangled = __cxa_demangle(k->reg.device_name, NULL, NULL, &status);
    if (status != 0)
      k->demangled = NULL;
  }
  /* The fat binary may have been registered after the function in odd
   * link orders; resolve the module again if it was unknown. */
  if (k->reg.module < 0)
    k->reg.module = module_of(k->handle);
  *out = k->reg;
  out->demangled = k->demangled ? k->demangled : k->reg.device_name;
  pthread_mutex_unlock(&table_lock);
  return 1;
}

static int api_var_count(void) {
  pthread_mutex_lock(&table_lock);
  int n = n_vars;
  pthread_mutex_unlock(&table_lock);
  return n;
}

static int api_var_at(int i, struct mneme_var_reg *out) {
  pthread_mutex_lock(&table_lock);
  if (i < 0 || i >= n_vars) {
    pthread_mutex_unlock(&table_lock);
    return 0;
  }
  if (vars[i].reg.module < 0)
    vars[i].reg.module = module_of(vars[i].handle);
  *out = vars[i].reg;
  pthread_mutex_unlock(&table_lock);
  return 1;
}

static int api_kernel_index(const void *host_fun) {
  pthread_mutex_lock(&table_lock);
  int found = -1;
  for (int i = 0; i < n_kernels; i++)
    if (kernels[i].reg.host_fun == host_fun) {
      found = i;
      break;
    }
  pthread_mutex_unlock(&table_lock);
  return found;
}

static cudaError_t api_launch(const void *func, dim3 grid, dim3 block,
                              void **args, size_t shared, cudaStream_t stream,
                              int ptsz) {
  if (ptsz)
    return __real_cudaLaunchKernel_ptsz(func, grid, block, args, shared,
                                        stream);
  return __real_cudaLaunchKernel(func, grid, block, args, shared, stream);
}

static cudaError_t api_symbol_address(const void *host_var, void **addr,
                                      size_t *size) {
  cudaError_t e = cudaGetSymbolAddress(addr, host_var);
  if (e != mneme_cudaSuccess)
    return e;
  return cudaGetSymbolSize(size, host_var);
}

static cudaError_t api_func_handle(const void *host_fun, void **cu_function) {
  return cudaGetFuncBySymbol((cudaFunction_t *)cu_function, host_fun);
}

/* A plain copy: measured on an H200, pinned double-buffered staging was no
 * faster (the cost is in first-touching the destination pages) and its
 * cudaMallocHost added ~35 ms to every recording. */
static cudaError_t api_memcpy_dtoh(void *dst, const void *src, size_t n) {
  return cudaMemcpy(dst, src, n, mneme_cudaMemcpyDeviceToHost);
}

static struct mneme_host_api host_api = {
    .abi_version = MNEME_RT_ABI_VERSION,
    .fatbin_count = api_fatbin_count,
    .kernel_count = api_kernel_count,
    .kernel_at = api_kernel_at,
    .var_count = api_var_count,
    .var_at = api_var_at,
    .kernel_index = api_kernel_index,
    .launch = api_launch,
    .symbol_address = api_symbol_address,
    .func_handle = api_func_handle,
    .device_synchronize = cudaDeviceSynchronize,
    .stream_synchronize = cudaStreamSynchronize,
    .memcpy_dtoh = api_memcpy_dtoh,
    .get_device = cudaGetDevice,
    .driver_version = cudaDriverGetVersion,
    .runtime_version = cudaRuntimeGetVersion,
    .error_string = cudaGetErrorString,
};

/* ---- the Go library, loaded on first use while recording ---- */

static struct {
  mneme_rt_malloc_fn malloc_;
  mneme_rt_free_fn free_;
  mneme_rt_launch_fn launch;
  mneme_rt_managed_fn managed;
  mneme_rt_finish_fn finish;
} rt;
static int rt_ready; /* 1: loaded, -1: failed (recording disabled) */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_failed(const char *what, const char *detail) {
  fprintf(stderr,
          "mneme: recording disabled: %s%s%s (MNEME_RT_LIB=%s)\n", what,
          detail ? ": " : "", detail ? detail : "",
          getenv("MNEME_RT_LIB") ? getenv("MNEME_RT_LIB") : "(unset)");
  rt_ready = -1;
}

static void *timed_dlopen(const char *path) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  host_api.load_seconds =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  return lib;
}

/* load_runtime dlopens the library and initializes it. init_cuda makes the
 * CUDA runtime create its context first (cudaFree(NULL)), so the library's
 * driver-API calls see the same primary context as the application; it is
 * false only on the exit path, where no CUDA call should be made. */
static int load_runtime(int init_cuda) {
  if (__builtin_expect(rt_ready != 0, 1))
    return rt_ready > 0;
  pthread_mutex_lock(&load_lock);
  if (rt_ready == 0) {
    const char *path = getenv("MNEME_RT_LIB");
    void *lib = NULL;
    if (path == NULL || path[0] == '\0') {
      load_failed("MNEME_RT_LIB is not set", NULL);
    } else if ((lib = timed_dlopen(path)) == NULL) {
      load_failed("cannot load the runtime library", dlerror());
    } else {
      mneme_rt_init_fn init = (mneme_rt_init_fn)dlsym(lib, "mneme_rt_init");
      rt.malloc_ = (mneme_rt_malloc_fn)dlsym(lib, "mneme_rt_malloc");
      rt.free_ = (mneme_rt_free_fn)dlsym(lib, "mneme_rt_free");
      rt.launch = (mneme_rt_launch_fn)dlsym(lib, "mneme_rt_launch");
      rt.managed = (mneme_rt_managed_fn)dlsym(lib, "mneme_rt_managed");
      rt.finish = (mneme_rt_finish_fn)dlsym(lib, "mneme_rt_finish");
      if (!init || !rt.malloc_ || !rt.free_ || !rt.launch || !rt.managed ||
          !rt.finish) {
        load_failed("the runtime library lacks an mneme_rt_* entry point",
                    path);
      } else {
        if (__start_mneme_ir != NULL && __stop_mneme_ir != NULL &&
            &__stop_mneme_ir[0] > &__start_mneme_ir[0]) {
          host_api.ir_start = __start_mneme_ir;
          host_api.ir_size = (size_t)(__stop_mneme_ir - __start_mneme_ir);
        }
        if (init_cuda)
          __real_cudaFree(NULL);
        host_api.cuda_initialized = init_cuda;
        if (init(&host_api) != 0)
          load_failed("the runtime library failed to start", NULL);
        else
          rt_ready = 1;
      }
    }
  }
  pthread_mutex_unlock(&load_lock);
  return rt_ready > 0;
}

__attribute__((destructor)) static void mneme_finish(void) {
  if (!mneme_recording)
    return;
  /* Load even if the application never launched anything, so the status
   * file still says how many kernels were registered. */
  if (load_runtime(0))
    rt.finish();
}

static pthread_once_t managed_once = PTHREAD_ONCE_INIT;
static void print_managed_warning(void) {
  fprintf(stderr, "mneme: warning: the application uses managed memory "
                  "(cudaMallocManaged or __managed__); kernels that touch "
                  "managed memory are recorded but cannot be replayed "
                  "faithfully\n");
}
static void warn_managed(void) {
  pthread_once(&managed_once, print_managed_warning);
}

/* ---- launches ---- */

/* kernel_flag reads (set < 0) or sets a kernel's forward_always flag under
 * the table lock, since the table may be reallocated by a late
 * registration on another thread. */
static int kernel_flag(int idx, int set) {
  pthread_mutex_lock(&table_lock);
  int v = 0;
  if (idx < n_kernels) {
    if (set >= 0)
      kernels[idx].forward_always = set;
    v = kernels[idx].forward_always;
  }
  pthread_mutex_unlock(&table_lock);
  return v;
}

static cudaError_t record_launch(const void *func, dim3 grid, dim3 block,
                                 void **args, size_t shared,
                                 cudaStream_t stream, int ptsz) {
  if (!load_runtime(1))
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  int idx = api_kernel_index(func);
  if (idx >= 0 && kernel_flag(idx, -1))
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  int handled = MNEME_LAUNCH_FORWARD;
  cudaError_t e = rt.launch(func, idx, grid.x, grid.y, grid.z, block.x,
                            block.y, block.z, args, shared, stream, ptsz,
                            &handled);
  if (handled == MNEME_LAUNCH_DONE)
    return e;
  if (handled == MNEME_LAUNCH_FORWARD_ALWAYS && idx >= 0)
    kernel_flag(idx, 1);
  return api_launch(func, grid, block, args, shared, stream, ptsz);
}

cudaError_t __wrap_cudaLaunchKernel(const void *func, dim3 grid, dim3 block,
                                    void **args, size_t shared,
                                    cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaLaunchKernel(func, grid, block, args, shared, stream);
  return record_launch(func, grid, block, args, shared, stream, 0);
}

cudaError_t __wrap_cudaLaunchKernel_ptsz(const void *func, dim3 grid,
                                         dim3 block, void **args,
                                         size_t shared, cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaLaunchKernel_ptsz(func, grid, block, args, shared,
                                        stream);
  return record_launch(func, grid, block, args, shared, stream, 1);
}

/* ---- allocations ---- */

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
  return rt.malloc_(ptr, size, kind);
}

cudaError_t __wrap_cudaMalloc(void **ptr, size_t size) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaMalloc(ptr, size);
  cudaError_t e = arena_malloc(ptr, size, MNEME_ALLOC_PLAIN);
  return e == MNEME_RT_FORWARD ? __real_cudaMalloc(ptr, size) : e;
}

cudaError_t __wrap_cudaMallocPitch(void **ptr, size_t *pitch, size_t width,
                                   size_t height) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaMallocPitch(ptr, pitch, width, height);
  size_t p = pitch_of(width);
  cudaError_t e = arena_malloc(ptr, p * height, MNEME_ALLOC_PITCH);
  if (e == MNEME_RT_FORWARD)
    return __real_cudaMallocPitch(ptr, pitch, width, height);
  if (e == mneme_cudaSuccess && pitch != NULL)
    *pitch = p;
  return e;
}

cudaError_t __wrap_cudaMalloc3D(cudaPitchedPtr *ptr, cudaExtent extent) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaMalloc3D(ptr, extent);
  size_t p = pitch_of(extent.width);
  void *dev = NULL;
  cudaError_t e = arena_malloc(&dev, p * extent.height * extent.depth,
                               MNEME_ALLOC_3D);
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
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaMallocAsync(ptr, size, stream);
  cudaError_t e = arena_malloc(ptr, size, MNEME_ALLOC_ASYNC);
  return e == MNEME_RT_FORWARD ? __real_cudaMallocAsync(ptr, size, stream)
                               : e;
}

cudaError_t __wrap_cudaMallocAsync_ptsz(void **ptr, size_t size,
                                        cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaMallocAsync_ptsz(ptr, size, stream);
  cudaError_t e = arena_malloc(ptr, size, MNEME_ALLOC_ASYNC);
  return e == MNEME_RT_FORWARD
             ? __real_cudaMallocAsync_ptsz(ptr, size, stream)
             : e;
}

cudaError_t __wrap_cudaMallocManaged(void **ptr, size_t size,
                                     unsigned int flags) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaMallocManaged(ptr, size, flags);
  warn_managed();
  if (load_runtime(1))
    rt.managed(size);
  return __real_cudaMallocManaged(ptr, size, flags);
}

cudaError_t __wrap_cudaFree(void *ptr) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaFree(ptr);
  if (ptr == NULL || !load_runtime(1))
    return __real_cudaFree(ptr);
  cudaError_t e = rt.free_(ptr, NULL, 0);
  return e == MNEME_RT_FORWARD ? __real_cudaFree(ptr) : e;
}

cudaError_t __wrap_cudaFreeAsync(void *ptr, cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaFreeAsync(ptr, stream);
  if (ptr == NULL || !load_runtime(1))
    return __real_cudaFreeAsync(ptr, stream);
  cudaError_t e = rt.free_(ptr, stream, 1);
  return e == MNEME_RT_FORWARD ? __real_cudaFreeAsync(ptr, stream) : e;
}

cudaError_t __wrap_cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaFreeAsync_ptsz(ptr, stream);
  if (ptr == NULL || !load_runtime(1))
    return __real_cudaFreeAsync_ptsz(ptr, stream);
  cudaError_t e = rt.free_(ptr, stream, 1);
  return e == MNEME_RT_FORWARD ? __real_cudaFreeAsync_ptsz(ptr, stream) : e;
}
