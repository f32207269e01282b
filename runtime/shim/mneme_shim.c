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
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* MNEME_TRACE: the file where a recording's steps are timed (see
 * record.EnvTrace); NULL when not tracing. */
static const char *trace_path;

static void shim_trace(const char *event) {
  if (trace_path == NULL)
    return;
  int fd = open(trace_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  char line[160];
  int n = snprintf(line, sizeof line, "%lld %d shim %s\n",
                   (long long)t.tv_sec * 1000000000LL + t.tv_nsec,
                   (int)getpid(), event);
  if (n > 0 && write(fd, line, (size_t)n) < 0)
    n = 0; /* tracing must not disturb the application */
  close(fd);
}

__attribute__((constructor(101))) static void mneme_read_environment(void) {
  const char *r = getenv("MNEME_RECORD");
  mneme_recording = r != NULL && r[0] != '\0' && strcmp(r, "0") != 0;
  const char *t = getenv("MNEME_TRACE");
  trace_path = t != NULL && t[0] != '\0' ? t : NULL;
  shim_trace("start");
}

/* ---- registration tables ---- */

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

struct fatbin_entry {
  void **handle;
};
struct launch_memo;
struct kernel_entry {
  struct mneme_kernel_reg reg;
  void **handle;
  char *demangled; /* owned; filled lazily */
  int forward_always;
  struct launch_memo *memo; /* owned; NULL until the library enables it */
  uint64_t forwarded;       /* launches forwarded without asking, undrained */
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

/* kernel_slots maps a host stub to its kernel index + 1 (open addressing,
 * at most half full), so finding a launched kernel does not scan the table
 * in applications with hundreds of kernels. Guarded by table_lock. */
static int *kernel_slots;
static size_t kernel_slots_cap;

static size_t pointer_hash(const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 17);
}

static void kernel_slots_put(int *slots, size_t cap, int idx) {
  size_t i = pointer_hash(kernels[idx].reg.host_fun) & (cap - 1);
  while (slots[i] != 0) {
    if (kernels[slots[i] - 1].reg.host_fun == kernels[idx].reg.host_fun)
      return; /* registered twice: the first registration stays */
    i = (i + 1) & (cap - 1);
  }
  slots[i] = idx + 1;
}

/* kernel_slots_add indexes kernels[idx]; without memory for the index the
 * lookup falls back to a scan. */
static void kernel_slots_add(int idx) {
  if ((size_t)n_kernels * 2 > kernel_slots_cap) {
    size_t cap = kernel_slots_cap ? kernel_slots_cap * 2 : 256;
    while ((size_t)n_kernels * 2 > cap)
      cap *= 2;
    int *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
      return;
    free(kernel_slots);
    kernel_slots = slots;
    kernel_slots_cap = cap;
    for (int i = 0; i < n_kernels; i++)
      kernel_slots_put(kernel_slots, kernel_slots_cap, i);
    return;
  }
  kernel_slots_put(kernel_slots, kernel_slots_cap, idx);
}

static int kernel_index_locked(const void *host_fun) {
  if (kernel_slots_cap >= (size_t)n_kernels * 2 && kernel_slots != NULL) {
    size_t i = pointer_hash(host_fun) & (kernel_slots_cap - 1);
    while (kernel_slots[i] != 0) {
      if (kernels[kernel_slots[i] - 1].reg.host_fun == host_fun)
        return kernel_slots[i] - 1;
      i = (i + 1) & (kernel_slots_cap - 1);
    }
    return -1;
  }
  for (int i = 0; i < n_kernels; i++)
    if (kernels[i].reg.host_fun == host_fun)
      return i;
  return -1;
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
    kernel_slots_add(n_kernels - 1);
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
  int found = kernel_index_locked(host_fun);
  pthread_mutex_unlock(&table_lock);
  return found;
}

/* ---- the launch memo (see struct mneme_launch_memo) ---- */

/* A launch's key: its geometry, shared memory and argument bytes, the same
 * bytes the library's dynamic hash covers. */
struct memo_slot {
  uint64_t hash;
  unsigned char *key; /* owned; NULL: empty slot */
  int repeat;
  uint64_t launches; /* forwarded as this repeat, undrained */
};

struct launch_memo {
  int nparams;
  size_t *sizes;
  size_t key_len;
  int capped;
  struct memo_slot *slots; /* open addressing, at most half full */
  size_t cap, used;
};

#define MEMO_KEY_HEADER 32 /* grid, block (6 x 4 bytes), shared (8) */

/* Launches counted in C and not yet drained, so a drain with nothing to do
 * returns at once. Guarded by table_lock like the counters. */
static uint64_t memo_pending;

static uint64_t key_hash(const unsigned char *p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  memcpy(&w, p, n);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 29);
}

/* launch_key writes the launch's key into buf (m->key_len bytes); it fails
 * (0) when the arguments cannot be read. */
static int launch_key(const struct launch_memo *m, dim3 grid, dim3 block,
                      size_t shared, void **args, unsigned char *buf) {
  if (m->nparams > 0 && args == NULL)
    return 0;
  uint32_t dims[6] = {grid.x, grid.y, grid.z, block.x, block.y, block.z};
  uint64_t sh = shared;
  memcpy(buf, dims, sizeof dims);
  memcpy(buf + sizeof dims, &sh, sizeof sh);
  size_t off = MEMO_KEY_HEADER;
  for (int i = 0; i < m->nparams; i++) {
    if (m->sizes[i] > 0 && args[i] == NULL)
      return 0;
    memcpy(buf + off, args[i], m->sizes[i]);
    off += m->sizes[i];
  }
  return 1;
}

static struct memo_slot *memo_find(struct launch_memo *m, uint64_t h,
                                   const unsigned char *key) {
  if (m->cap == 0)
    return NULL;
  for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    struct memo_slot *s = &m->slots[i];
    if (s->key == NULL)
      return NULL;
    if (s->hash == h && memcmp(s->key, key, m->key_len) == 0)
      return s;
  }
}

/* memo_insert remembers key as repeat; without memory it remembers nothing
 * and the launch's repeats keep asking the library. */
static void memo_insert(struct launch_memo *m, uint64_t h,
                        const unsigned char *key, int repeat) {
  if (memo_find(m, h, key) != NULL)
    return;
  if ((m->used + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 16;
    struct memo_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
      return;
    for (size_t i = 0; i < m->cap; i++) {
      struct memo_slot *s = &m->slots[i];
      if (s->key == NULL)
        continue;
      size_t j = s->hash & (cap - 1);
      while (slots[j].key != NULL)
        j = (j + 1) & (cap - 1);
      slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
  }
  unsigned char *copy = malloc(m->key_len);
  if (copy == NULL)
    return;
  memcpy(copy, key, m->key_len);
  size_t j = h & (m->cap - 1);
  while (m->slots[j].key != NULL)
    j = (j + 1) & (m->cap - 1);
  m->slots[j] = (struct memo_slot){.hash = h, .key = copy, .repeat = repeat};
  m->used++;
}

static int api_memo_enable(int idx, int nparams, const size_t *sizes) {
  if (nparams < 0)
    return 0;
  struct launch_memo *m = calloc(1, sizeof *m);
  size_t *copy = calloc((size_t)nparams + 1, sizeof *copy);
  if (m == NULL || copy == NULL) {
    free(m);
    free(copy);
    return 0;
  }
  m->nparams = nparams;
  m->sizes = copy;
  m->key_len = MEMO_KEY_HEADER;
  for (int i = 0; i < nparams; i++) {
    copy[i] = sizes[i];
    m->key_len += sizes[i];
  }
  pthread_mutex_lock(&table_lock);
  int ok = idx >= 0 && idx < n_kernels;
  if (ok && kernels[idx].memo == NULL) {
    kernels[idx].memo = m;
    m = NULL;
  }
  pthread_mutex_unlock(&table_lock);
  if (m != NULL) {
    free(m->sizes);
    free(m);
  }
  return ok;
}

static int api_memo_drain(struct mneme_launch_count *out, int cap) {
  int n = 0;
  pthread_mutex_lock(&table_lock);
  for (int i = 0; memo_pending > 0 && i < n_kernels && n < cap; i++) {
    struct kernel_entry *k = &kernels[i];
    if (k->forwarded > 0) {
      out[n++] = (struct mneme_launch_count){i, 0, k->forwarded};
      memo_pending -= k->forwarded;
      k->forwarded = 0;
    }
    struct launch_memo *m = k->memo;
    for (size_t j = 0; m != NULL && j < m->cap && n < cap; j++) {
      struct memo_slot *s = &m->slots[j];
      if (s->key != NULL && s->launches > 0) {
        out[n++] = (struct mneme_launch_count){i, s->repeat, s->launches};
        memo_pending -= s->launches;
        s->launches = 0;
      }
    }
  }
  pthread_mutex_unlock(&table_lock);
  return n;
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
    .memo_enable = api_memo_enable,
    .memo_drain = api_memo_drain,
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
    shim_trace("load runtime library");
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
        shim_trace("loaded; creating the CUDA context");
        if (init_cuda)
          __real_cudaFree(NULL);
        shim_trace("context ready");
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
  if (!mneme_recording) {
    shim_trace("exit");
    return;
  }
  /* Load even if the application never launched anything, so the status
   * file still says how many kernels were registered. */
  shim_trace("exit");
  if (load_runtime(0))
    rt.finish();
  shim_trace("exit: runtime finished");
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

/* A key fits this buffer on the stack unless the kernel takes more than
 * ~1 KiB of arguments. */
#define MEMO_STACK_KEY 1024

/* memo_forward decides a launch in C when it can: a kernel the library
 * never wants to see, a remembered repeat, or a capped kernel. It returns
 * the kernel's index (or -1) in *idx and whether to forward at once. The
 * launch's key goes to *key, replaced by a heap buffer for large keys,
 * which the caller frees. Called with table_lock held. */
static int memo_forward(const void *func, dim3 grid, dim3 block, void **args,
                        size_t shared, int *idx, unsigned char **key) {
  *idx = kernel_index_locked(func);
  if (*idx < 0)
    return 0;
  struct kernel_entry *k = &kernels[*idx];
  if (k->forward_always) {
    k->forwarded++;
    memo_pending++;
    return 1;
  }
  struct launch_memo *m = k->memo;
  if (m == NULL)
    return 0;
  if (m->key_len > MEMO_STACK_KEY && (*key = malloc(m->key_len)) == NULL)
    return 0;
  if (!launch_key(m, grid, block, shared, args, *key))
    return 0;
  struct memo_slot *s = memo_find(m, key_hash(*key, m->key_len), *key);
  if (s != NULL) {
    s->launches++;
    memo_pending++;
    return 1;
  }
  if (m->capped) {
    k->forwarded++;
    memo_pending++;
    return 1;
  }
  return 0;
}

/* memo_learn applies what the library said about a launch it was shown.
 * Called with table_lock held. */
static void memo_learn(int idx, int handled,
                       const struct mneme_launch_memo *memo, dim3 grid,
                       dim3 block, void **args, size_t shared,
                       unsigned char **key) {
  if (idx < 0 || idx >= n_kernels)
    return;
  struct kernel_entry *k = &kernels[idx];
  if (handled == MNEME_LAUNCH_FORWARD_ALWAYS)
    k->forward_always = 1;
  struct launch_memo *m = k->memo;
  if (m == NULL)
    return;
  if (memo->capped)
    m->capped = 1;
  if (memo->repeat <= 0)
    return;
  /* The memo may have been enabled during this very call: key it now. */
  if (m->key_len > MEMO_STACK_KEY && (*key = malloc(m->key_len)) == NULL)
    return;
  if (launch_key(m, grid, block, shared, args, *key))
    memo_insert(m, key_hash(*key, m->key_len), *key, memo->repeat);
}

static cudaError_t record_launch(const void *func, dim3 grid, dim3 block,
                                 void **args, size_t shared,
                                 cudaStream_t stream, int ptsz) {
  if (!load_runtime(1))
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  unsigned char stack_key[MEMO_STACK_KEY], *key = stack_key;
  int idx;
  pthread_mutex_lock(&table_lock);
  int forward = memo_forward(func, grid, block, args, shared, &idx, &key);
  pthread_mutex_unlock(&table_lock);
  if (key != stack_key) {
    free(key);
    key = stack_key;
  }
  if (forward)
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  int handled = MNEME_LAUNCH_FORWARD;
  struct mneme_launch_memo memo = {0, 0};
  cudaError_t e = rt.launch(func, idx, grid.x, grid.y, grid.z, block.x,
                            block.y, block.z, args, shared, stream, ptsz,
                            &handled, &memo);
  if (idx >= 0 && (handled == MNEME_LAUNCH_FORWARD_ALWAYS || memo.repeat > 0 ||
                   memo.capped)) {
    pthread_mutex_lock(&table_lock);
    memo_learn(idx, handled, &memo, grid, block, args, shared, &key);
    pthread_mutex_unlock(&table_lock);
    if (key != stack_key)
      free(key);
  }
  if (handled == MNEME_LAUNCH_DONE)
    return e;
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
