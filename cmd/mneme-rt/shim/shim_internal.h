/*
 * The mneme shim: linked into every application built with the compiler
 * wrapper (whole-archive, with the linker's --wrap option for each symbol of
 * appabi.WrappedSymbols). It defines __wrap_X for each intercepted CUDA
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
 *
 * This header holds what the shim's files share; it is private to them (the
 * interface with the runtime library is mneme_shim.h). The files: the mode
 * (shim_mode.c), the registration tables (shim_registry.c), the host API
 * handed to the library (shim_host_api.c), the launch memo (shim_memo.c),
 * loading the library (shim_loader.c), launches (shim_launch.c), the launch
 * throttle (shim_throttle.c) and allocations (shim_alloc.c).
 *
 * Every symbol the files share is named mneme_* (the shim is linked into
 * applications, whose symbols it must not clash with) and hidden: hidden
 * symbols are reached PC-relative and called directly, as the static ones of
 * a single file are, not through the GOT or the PLT. What a launch runs is
 * defined static inline here, so that the split into files adds no call
 * across files to the launch path.
 */
#ifndef MNEME_SHIM_INTERNAL_H
#define MNEME_SHIM_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mneme_shim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the real CUDA runtime (bound by --wrap) and a few unwrapped calls ----
 */

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
                                         dim3 block, void **args, size_t shared,
                                         cudaStream_t stream);
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
cudaError_t __real_cudaDeviceReset(void);
cudaError_t __real_cudaSetDevice(int device);
cudaError_t __real_cudaFreeAsync(void *ptr, cudaStream_t stream);
cudaError_t __real_cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream);

cudaError_t cudaGetSymbolAddress(void **dev_ptr, const void *symbol);
cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol);
cudaError_t cudaGetFuncBySymbol(cudaFunction_t *func, const void *symbol);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
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
extern const char __start_mneme_jit[] __attribute__((weak));
extern const char __stop_mneme_jit[] __attribute__((weak));

/* mneme_jit_section_size is the size of the annotate("jit") list linked
 * into the program, 0 when there is none. */
static inline size_t mneme_jit_section_size(void) {
  if (__start_mneme_jit == NULL || __stop_mneme_jit == NULL ||
      &__stop_mneme_jit[0] <= &__start_mneme_jit[0])
    return 0;
  return (size_t)(&__stop_mneme_jit[0] - &__start_mneme_jit[0]);
}

/* Only the shim's own symbols are hidden: a hidden reference to a CUDA
 * symbol above could not bind to libcudart.so. */
#pragma GCC visibility push(hidden)

/* ---- mode (shim_mode.c) ---- */

/* Non-zero while recording. Read once, before main, so the hot path is one
 * load and one predictable branch. */
extern int mneme_recording;
/* Non-zero when tuned kernels are deployed (MNEME_TUNED_KERNELS or
 * PROTEUS_TUNED_KERNELS set, or annotate("jit") kernels linked in; MNEME_JIT
 * not off; not recording, unless MNEME_RECORD_TUNED=1: then the launches
 * the recorder forwards run tuned code). */
extern int mneme_deploying;
/* Non-zero when not recording and MNEME_LAUNCH_STATS names a file: every
 * launch is counted in the launch statistics, which the library writes
 * there at exit. */
extern int mneme_counting;
/* mneme_recording || mneme_deploying || mneme_counting: the one flag a
 * launch tests. */
extern int mneme_launch_hook;

/* mneme_now_ns is CLOCK_MONOTONIC in nanoseconds: the clock of the
 * statistics' gate timeouts and of the early window of counted runs. */
static inline uint64_t mneme_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* mneme_trace appends a timed event to the MNEME_TRACE file, if any;
 * mneme_tracef formats it first. */
void mneme_trace(const char *event);
void mneme_tracef(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/* ---- registration tables (shim_registry.c) ---- */

extern pthread_mutex_t mneme_table_lock;

struct fatbin_entry {
  void **handle;
  const void *wrapper; /* what __cudaRegisterFatBinary was given */
};
struct launch_memo;
struct variant_table;
struct kernel_entry {
  struct mneme_kernel_reg reg;
  void **handle;
  char *demangled; /* owned; filled lazily */
  int forward_always;
  int deploy;   /* DEPLOY_ASK, _FORWARD, _FAST or _KEYED */
  void *jit_fn; /* CUfunction of the tuned code (DEPLOY_FAST) */
  /* DEPLOY_FAST: the dynamic shared memory jit_fn accepts; a launch asking
   * for more (beyond the default) asks the library, which opens it up. */
  unsigned jit_shared_max;
  int deploy_launched; /* a launch of it was seen deploying (traced once) */
  struct variant_table *variants; /* owned; DEPLOY_KEYED: code by launch key */
  unsigned jit_block[3];          /* tuned block, zero: the launch's own */
  unsigned jit_recorded[3];       /* the block tuning started from */
  struct launch_memo *memo;       /* owned; NULL until the library enables it */
  uint64_t forwarded; /* launches forwarded without asking, undrained */
  struct mneme_kernel_stats *stats; /* owned; NULL until first counted */
};
struct var_entry {
  struct mneme_var_reg reg;
  void **handle;
};

extern struct fatbin_entry *mneme_fatbins;
extern int mneme_n_fatbins;
extern struct kernel_entry *mneme_kernels;
extern int mneme_n_kernels;
extern struct var_entry *mneme_vars;
extern int mneme_n_vars;

/* mneme_kernel_slots maps a host stub to its kernel index + 1 (open
 * addressing, at most half full), so finding a launched kernel does not scan
 * the table in applications with hundreds of kernels. Guarded by
 * mneme_table_lock. */
extern int *mneme_kernel_slots;
extern size_t mneme_kernel_slots_cap;

/* mneme_module_of is the index of the fat binary registered as handle, or
 * -1. Called with mneme_table_lock held. */
int mneme_module_of(void **handle);

static inline size_t pointer_hash(const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 17);
}

/* kernel_index_locked finds a launched kernel (launch path: inline). Called
 * with mneme_table_lock held. */
static inline int kernel_index_locked(const void *host_fun) {
  if (mneme_kernel_slots_cap >= (size_t)mneme_n_kernels * 2 &&
      mneme_kernel_slots != NULL) {
    size_t i = pointer_hash(host_fun) & (mneme_kernel_slots_cap - 1);
    while (mneme_kernel_slots[i] != 0) {
      if (mneme_kernels[mneme_kernel_slots[i] - 1].reg.host_fun == host_fun)
        return mneme_kernel_slots[i] - 1;
      i = (i + 1) & (mneme_kernel_slots_cap - 1);
    }
    return -1;
  }
  for (int i = 0; i < mneme_n_kernels; i++)
    if (mneme_kernels[i].reg.host_fun == host_fun)
      return i;
  return -1;
}

/* ---- the launch memo (shim_memo.c; see struct mneme_launch_memo) ---- */

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
 * returns at once. Guarded by mneme_table_lock like the counters. */
extern uint64_t mneme_memo_pending;

/* The memo's lookup runs on every launch while recording: inline. */
static inline uint64_t key_hash(const unsigned char *p, size_t n) {
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
static inline int launch_key(const struct launch_memo *m, dim3 grid, dim3 block,
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

static inline struct memo_slot *memo_find(struct launch_memo *m, uint64_t h,
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

/* mneme_memo_insert remembers key as repeat; without memory it remembers
 * nothing and the launch's repeats keep asking the library. */
void mneme_memo_insert(struct launch_memo *m, uint64_t h,
                       const unsigned char *key, int repeat);
int mneme_api_memo_enable(int idx, int nparams, const size_t *sizes);
/* The host API's deploy_preloaded (shim_launch.c). */
int mneme_api_deploy_preloaded(int idx, const struct mneme_deploy_answer *a,
                               dim3 grid, dim3 block, size_t shared,
                               void **args);
int mneme_api_memo_drain(struct mneme_launch_count *out, int cap);

/* ---- launch statistics (shim_stats.c; see MNEME_STATS_* in mneme_shim.h)
 */

/* mneme_stats_new is a kernel's empty statistics with nparams parameters
 * of the given sizes (nparams -1: not known), or NULL without memory. */
struct mneme_kernel_stats *mneme_stats_new(int nparams, const size_t *sizes);

/* shape_is tells whether sh is the shape of grid, block and shared:
 * field by field, which compiles to a few compares where memcmp is a call. */
static inline int shape_is(const struct mneme_stats_shape *sh, dim3 grid,
                           dim3 block, uint64_t shared) {
  return sh->grid[0] == grid.x && sh->grid[1] == grid.y &&
         sh->grid[2] == grid.z && sh->block[0] == block.x &&
         sh->block[1] == block.y && sh->block[2] == block.z &&
         sh->shared == shared;
}

/* stats_shape finds (or adds) a launch shape in s: its index, or -1 when
 * the table is full. The previous launch's shape is checked first. */
static inline int stats_shape(struct mneme_kernel_stats *s, dim3 grid,
                              dim3 block, uint64_t shared) {
  if (s->nshapes > 0 &&
      shape_is(&s->shapes[s->last_shape], grid, block, shared))
    return s->last_shape;
  for (int i = 0; i < s->nshapes; i++)
    if (shape_is(&s->shapes[i], grid, block, shared))
      return s->last_shape = i;
  if (s->nshapes == MNEME_STATS_MAX_SHAPES)
    return -1;
  struct mneme_stats_shape *sh = &s->shapes[s->nshapes];
  sh->grid[0] = grid.x, sh->grid[1] = grid.y, sh->grid[2] = grid.z;
  sh->block[0] = block.x, sh->block[1] = block.y, sh->block[2] = block.z;
  sh->shared = shared;
  return s->last_shape = s->nshapes++;
}

/* arg_value reads an argument of size bytes (at most 8) as the low bytes
 * of a 64-bit value; fixed-size copies, so no call to memcpy. */
static inline uint64_t arg_value(const void *p, unsigned size) {
  uint8_t b1;
  uint16_t b2;
  uint32_t b4;
  uint64_t v = 0;
  switch (size) {
  case 1:
    memcpy(&b1, p, 1);
    return b1;
  case 2:
    memcpy(&b2, p, 2);
    return b2;
  case 4:
    memcpy(&b4, p, 4);
    return b4;
  case 8:
    memcpy(&v, p, 8);
    return v;
  }
  memcpy(&v, p, size & 7);
  return v;
}

/* stats_args counts the launch's argument values. */
static inline void stats_args(struct mneme_kernel_stats *s, void **args) {
  int n = s->nparams < MNEME_STATS_MAX_ARGS ? s->nparams : MNEME_STATS_MAX_ARGS;
  if (n > 0 && args == NULL) {
    s->nparams = -2;
    return;
  }
  for (int i = 0; i < n; i++) {
    struct mneme_stats_arg *a = &s->args[i];
    if (!a->tracked || a->more)
      continue;
    if (args[i] == NULL) {
      s->nparams = -2;
      return;
    }
    uint64_t v = arg_value(args[i], a->size);
    if (a->nvalues > 0 && a->values[a->last] == v) {
      a->counts[a->last]++;
      continue;
    }
    int j = 0;
    while (j < a->nvalues && a->values[j] != v)
      j++;
    if (j == a->nvalues) {
      if (j == MNEME_STATS_MAX_VALUES) {
        a->more = 1;
        continue;
      }
      a->values[j] = v;
      a->nvalues++;
    }
    a->counts[j]++;
    a->last = j;
  }
}

/* What stats_count says of a launch's timing: not timed, timed into the
 * shape's sample, or timed as the shape's first launch (kept apart: it may
 * pay for loading the kernel's code, and it is all a one-shot kernel
 * has). */
enum { STATS_UNTIMED = 0, STATS_TIMED = 1, STATS_TIMED_FIRST = 2 };

/* stats_count counts one launch of kernel k: its shape's index (-1: not
 * in the table) and, in *timed, whether and how the launch is timed
 * (STATS_*). Called with mneme_table_lock held. */
static inline int stats_count(struct kernel_entry *k, dim3 grid, dim3 block,
                              size_t shared, void **args, int *timed) {
  struct mneme_kernel_stats *s = k->stats;
  *timed = 0;
  if (s == NULL && (s = k->stats = mneme_stats_new(-1, NULL)) == NULL)
    return -1;
  s->launches++;
  int si = stats_shape(s, grid, block, shared);
  if (si >= 0) {
    uint64_t n = ++s->shapes[si].launches;
    *timed =
        n == 1 ? STATS_TIMED_FIRST
        : n <= 1 + MNEME_STATS_TIMED_FIRST || n % MNEME_STATS_TIMED_EVERY == 0
            ? STATS_TIMED
            : STATS_UNTIMED;
  } else {
    s->other_launches++;
  }
  if (s->nparams > 0)
    stats_args(s, args);
  return si;
}

/* Non-zero while the library has launch timing on. */
extern int mneme_stats_timing;
/* mneme_stats_begin takes a free pair of events and enqueues the gate and
 * the first event on the launch's stream (timed: STATS_TIMED or
 * STATS_TIMED_FIRST, where the time goes); it returns a token for
 * mneme_stats_end, or -1 (none free, the stream is being captured, or the
 * driver refused). mneme_stats_end records the second event after the
 * launch (ok) or gives the pair back, and opens the gate either way: every
 * token must reach it. Out of line: they run only for the sampled
 * launches. */
int64_t mneme_stats_begin(int idx, int shape, int timed, cudaStream_t stream,
                          int ptsz) __attribute__((cold, noinline));
void mneme_stats_end(int64_t token, int ok, cudaStream_t stream, int ptsz)
    __attribute__((cold, noinline));
/* mneme_stream_capturing reports whether the launch's stream is being
 * captured into a graph (its launches do not run now), asked through the
 * library's driver entry points in relaxed capture mode; 0 when timing is
 * off (no entry points) or the driver cannot tell. */
int mneme_stream_capturing(cudaStream_t stream, int ptsz)
    __attribute__((cold, noinline));
int mneme_api_stats_enable(int idx, int nparams, const size_t *sizes);
int mneme_api_stats_timer(const struct mneme_stats_timer *t);
int mneme_api_stats_collect(void);
int mneme_api_stats_read(int idx, struct mneme_kernel_stats *out);
void mneme_api_stats_add_time(int idx, dim3 grid, dim3 block, size_t shared,
                              uint64_t ns);

/* ---- the launch throttle (shim_throttle.c) ---- */

/* Non-zero while the library has the throttle on. */
extern int mneme_throttling;
/* mneme_throttle_launch counts a launch the shim forwarded on stream and
 * bounds the launches queued ahead of the GPU; out of line, since it runs
 * only while a drain is under way. */
void mneme_throttle_launch(cudaStream_t stream, int ptsz)
    __attribute__((cold, noinline));
int mneme_api_throttle(const struct mneme_launch_throttle *t);

/* ---- host API handed to the library (shim_host_api.c) ---- */

extern struct mneme_host_api mneme_host_api_table;

/* api_launch is the real launch, for the library and for every launch the
 * shim forwards while recording: inline. */
static inline cudaError_t api_launch(const void *func, dim3 grid, dim3 block,
                                     void **args, size_t shared,
                                     cudaStream_t stream, int ptsz) {
  if (ptsz)
    return __real_cudaLaunchKernel_ptsz(func, grid, block, args, shared,
                                        stream);
  return __real_cudaLaunchKernel(func, grid, block, args, shared, stream);
}

/* ---- the Go library, loaded on first use while recording (shim_loader.c) */

/* The library's entry points, valid once mneme_rt_ready is 1. */
/* A kernel's deployment state: not asked yet, its own code, one tuned code
 * for every launch, or tuned code per launch key (specialized variants). */
enum { DEPLOY_ASK = 0, DEPLOY_FORWARD = 1, DEPLOY_FAST = 2, DEPLOY_KEYED = 3 };

struct mneme_rt_entries {
  mneme_rt_malloc_fn malloc_;
  mneme_rt_free_fn free_;
  mneme_rt_launch_fn launch;
  mneme_rt_deploy_launch_fn deploy_launch;
  mneme_rt_managed_fn managed;
  mneme_rt_finish_fn finish;
  mneme_rt_drain_fn drain; /* NULL in libraries that predate it */
};
extern struct mneme_rt_entries mneme_rt;
extern int mneme_rt_ready; /* 1: loaded, -1: failed (recording disabled) */

/* mneme_load_runtime_once loads and initializes the library, once. */
int mneme_load_runtime_once(int init_cuda);

/* load_runtime reports whether the library is ready, loading it on first
 * use. init_cuda makes the CUDA runtime create its context first
 * (cudaFree(NULL)), so the library's driver-API calls see the same primary
 * context as the application; it is false only on the exit path, where no
 * CUDA call should be made. Every recorded launch asks: inline. */
static inline int load_runtime(int init_cuda) {
  if (__builtin_expect(mneme_rt_ready != 0, 1))
    return mneme_rt_ready > 0;
  return mneme_load_runtime_once(init_cuda);
}

/* Non-zero while a background thread loads the library for deployment
 * (mneme_deploy_start): a launch meanwhile runs the application's own code
 * instead of waiting, so loading never holds the application up. */
extern int mneme_rt_loading;

/* library_loading: the library is being loaded beside the application and
 * is not ready yet. */
static inline int library_loading(void) {
  return mneme_rt_ready == 0 &&
         __atomic_load_n(&mneme_rt_loading, __ATOMIC_ACQUIRE);
}

/* mneme_deploy_start_background starts loading the library for deployment
 * in a thread of its own, once: the runtime then loads the tuned kernels'
 * cached code before their first launch. Called at the application's first
 * allocation, when its CUDA context exists. */
void mneme_deploy_start_background(void) __attribute__((cold, noinline));

/* deploy_early_start is the allocation path's hook: one predictable
 * branch unless deploying or counting with the library not yet started.
 * Counting (deploy measure's runs, untuned ones too) starts it early as
 * well, so that no run pays for loading it inside the application's own
 * timer, which measure compares. */
static inline void deploy_early_start(void) {
  if (__builtin_expect(
          (mneme_deploying || mneme_counting) && mneme_rt_ready == 0, 0))
    mneme_deploy_start_background();
}

/* mneme_warn_managed warns once that managed memory is not replayed. */
void mneme_warn_managed(void);

/* mneme_find_runtime_lib is the runtime library to deploy with when
 * MNEME_RT_LIB is unset: built (the build prefix's) when it exists, else
 * PREFIX/lib/libmneme_rt.so of the first `mneme` on path_env (PATH), links
 * resolved. It writes the path into buf (n bytes) and returns buf, or NULL
 * when there is none (shim_rtpath.c). */
const char *mneme_find_runtime_lib(const char *built, const char *path_env,
                                   char *buf, size_t n);

#pragma GCC visibility pop
#endif
