/*
 * The binary interface between the C shim linked into applications
 * (shim_*.c; their private declarations are in shim_internal.h) and the Go
 * runtime library it loads while recording (cmd/mneme-rt). Both sides include
 * this header, so the layout of the structures and the entry-point signatures
 * are defined once. The library is loaded while recording (`mneme record`)
 * and, to run tuned kernels, when MNEME_TUNED_KERNELS or
 * PROTEUS_TUNED_KERNELS names a file or kernels are annotated for run-time
 * specialization (deployment).
 *
 * No CUDA header exists at build time, so the few runtime-API types the shim
 * needs are declared here with their documented layouts.
 */
#ifndef MNEME_SHIM_H
#define MNEME_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "deploy_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void *cudaFunction_t;
typedef struct {
  unsigned x, y, z;
} dim3;
typedef struct {
  void *ptr;
  size_t pitch;
  size_t xsize;
  size_t ysize;
} cudaPitchedPtr;
typedef struct {
  size_t width, height, depth;
} cudaExtent;

enum {
  mneme_cudaSuccess = 0,
  mneme_cudaErrorMemoryAllocation = 2,
  mneme_cudaMemcpyDeviceToHost = 2,
};

/* Bumped whenever a structure or signature below changes; the library
 * refuses a shim of another version instead of misreading it. */
#define MNEME_RT_ABI_VERSION 11

/* One __cudaRegisterFunction call. */
struct mneme_kernel_reg {
  const void *host_fun;    /* the host stub the application launches */
  const char *device_name; /* mangled device name */
  const char *demangled;   /* demangled name, or device_name if unknown */
  int module;              /* index of the fat binary it came from */
};

/* One __cudaRegisterVar or __cudaRegisterManagedVar call. */
struct mneme_var_reg {
  const void *host_var;
  const char *device_name;
  size_t size;
  int module;
  int constant; /* __constant__ */
  int managed;  /* __managed__ */
};

/* What the library lets the shim remember about a launch it was shown, so
 * that its repeats are decided in C: a call into the Go library costs
 * microseconds, and applications launch the same kernel thousands of times. */
struct mneme_launch_memo {
  /* Non-zero: this launch is recorded instance `repeat`; later launches of
   * the kernel with the same key are forwarded and counted under it. */
  int repeat;
  /* Non-zero: the kernel takes no new instances; launches whose key is not
   * remembered are forwarded and counted without asking. */
  int capped;
  /* Non-zero: the kernel takes no new instance of this launch's shape
   * (grid, block, dynamic shared memory), whatever its arguments: later
   * launches with the shape are forwarded and counted without asking, as
   * capped ones are. */
  int shape_covered;
};

/* Launches the shim forwarded without asking, for memo_drain: of kernel
 * kernel_index as repeats of instance `repeat`, or (repeat 0) of a kernel
 * answered MNEME_LAUNCH_FORWARD_ALWAYS or capped. */
struct mneme_launch_count {
  int kernel_index;
  int repeat;
  uint64_t launches;
};

/* How many events a launch throttle cycles through. */
#define MNEME_THROTTLE_EVENTS 32

/* A launch throttle bounds how many launches the application's threads keep
 * queued on the GPU: after every `every`-th launch the shim records one of
 * the events on the launch's stream, first waiting for that event's
 * previous record, so at most every * MNEME_THROTTLE_EVENTS launches are
 * ahead of the GPU. The library turns it on while it drains a snapshot out
 * of device memory from a thread of its own: an application whose queue is
 * full waits inside the driver's launch, and while it does every driver
 * call of another thread waits for a kernel to finish (4 GiB drained at
 * 4.7 GB/s instead of 52 on an H100); throttled, the application waits in
 * the event instead, which holds nothing the drain needs, and its kernels
 * still run back to back. The entries are the driver's (the library's
 * handles), so the application's runtime error state is never touched. */
struct mneme_launch_throttle {
  int (*event_record)(void *event, void *stream); /* cuEventRecord */
  int (*event_synchronize)(void *event);          /* cuEventSynchronize */
  /* cuStreamIsCapturing: a stream being captured into a graph is left
   * alone (its launches are not queued on the GPU). */
  int (*stream_is_capturing)(void *stream, int *status);
  /* cuThreadExchangeStreamCaptureMode: the throttle's calls are made in
   * relaxed mode, so another thread's graph capture neither refuses them
   * nor is invalidated by them. */
  int (*exchange_capture_mode)(int *mode);
  void *events[MNEME_THROTTLE_EVENTS]; /* CUevent, in the app's context */
  unsigned every;
};

/* ---- launch statistics ----
 * While recording, the shim counts every launch of every kernel in C (no
 * call into the library): per kernel its launch shapes with their counts,
 * per parameter of at most MNEME_STATS_MAX_ARG_BYTES the distinct values it
 * took (up to MNEME_STATS_MAX_VALUES), and the GPU time of a sample of
 * launches, bracketed by two of the library's events on the launch's
 * stream behind a gate (see struct mneme_stats_timer): a shape's launches 2
 * to 1 + MNEME_STATS_TIMED_FIRST, then every MNEME_STATS_TIMED_EVERY-th,
 * while one of MNEME_STATS_TIMER_SLOTS pairs of events is free. The first
 * launch is timed apart (first_ns) and without a gate, its launch call
 * included: it may pay for loading the kernel's code, and it is all a
 * kernel launched once has. */
#define MNEME_STATS_MAX_SHAPES 32
#define MNEME_STATS_MAX_VALUES 16
#define MNEME_STATS_MAX_ARG_BYTES 8
#define MNEME_STATS_MAX_ARGS 64
#define MNEME_STATS_TIMED_FIRST 8
#define MNEME_STATS_TIMED_EVERY 256
#define MNEME_STATS_TIMER_SLOTS 64

/* One launch shape of a kernel and its launches. */
struct mneme_stats_shape {
  unsigned grid[3], block[3];
  uint64_t shared;
  uint64_t launches;
  uint64_t timed;    /* launches timed, the first launch aside */
  uint64_t timed_ns; /* their summed GPU time */
  uint64_t first_ns; /* the first launch's time, its launch call included;
                        0: not timed */
  int covered;       /* the library said it takes no new instance of it */
};

/* One parameter's values over a kernel's launches. */
struct mneme_stats_arg {
  unsigned size;
  int tracked; /* 0: too large, or past MNEME_STATS_MAX_ARGS */
  int more;    /* more values came than the table holds: no longer watched */
  int nvalues;
  int last; /* the value the previous launch passed: checked first */
  uint64_t values[MNEME_STATS_MAX_VALUES]; /* little-endian bytes, 0-padded */
  uint64_t counts[MNEME_STATS_MAX_VALUES];
};

/* A kernel's statistics as stats_read copies them. */
struct mneme_kernel_stats {
  uint64_t launches;
  uint64_t other_launches; /* of shapes beyond the table */
  /* Launches made while the library loaded beside the application for
   * deployment: counted runs wait for it, uncounted ones run the
   * application's own code for these. */
  uint64_t early_launches;
  int nshapes;
  int last_shape;
  struct mneme_stats_shape shapes[MNEME_STATS_MAX_SHAPES];
  /* -1: the parameters were never learnt. -2: learnt after launches were
   * counted, so the values do not cover every launch and are not given. */
  int nparams;
  struct mneme_stats_arg args[MNEME_STATS_MAX_ARGS];
};

/* How long a sampled launch's gate holds its stream at most when the
 * library gives no timeout (gate_timeout_ns 0). */
#define MNEME_STATS_GATE_TIMEOUT_NS 20000000ull

/* The library's events and driver entries for timing launches (the
 * driver's, like the throttle's, so the application's runtime error state
 * is never touched): events[2 i] and events[2 i + 1] bracket a launch.
 *
 * A sampled launch is enqueued behind a gate: a host function
 * (launch_host_func, the driver's cuLaunchHostFunc) enqueued before the
 * first event holds the stream until the shim has enqueued the launch and
 * the second event, so the pair brackets the kernel and not the host's
 * launch latency (on an idle stream the first event would fire at once and
 * the kernel follow microseconds later). The gate gives up after
 * gate_timeout_ns (a launch that waits for the GPU itself cannot hang it),
 * and a sample whose gate gave up is dropped. */
struct mneme_stats_timer {
  int (*event_record)(void *event, void *stream); /* cuEventRecord */
  int (*event_elapsed)(float *ms, void *start,
                       void *end); /* cuEventElapsedTime */
  int (*stream_is_capturing)(void *stream,
                             int *status); /* cuStreamIsCapturing */
  int (*exchange_capture_mode)(
      int *mode); /* cuThreadExchangeStreamCaptureMode */
  int (*launch_host_func)(void *stream, void (*fn)(void *),
                          void *data); /* cuLaunchHostFunc */
  uint64_t gate_timeout_ns;            /* 0: MNEME_STATS_GATE_TIMEOUT_NS */
  void *events[2 * MNEME_STATS_TIMER_SLOTS];
};

struct mneme_deploy_answer; /* below */

/* What the shim offers the library: the embedded IR, the registration tables
 * and the real CUDA runtime calls (the library must never call a wrapped
 * symbol, or it would intercept itself). */
struct mneme_host_api {
  int abi_version;
  /* MNEME_MODE_RECORD or MNEME_MODE_DEPLOY. A recording also deploys the
   * tuned kernels, for the launches it does not record, when
   * MNEME_RECORD_TUNED=1 (both sides read it). */
  int mode;
  /* The path the library was loaded from, to find the mneme prefix. */
  const char *rt_lib_path;
  /* 0 when the library is loaded only at exit, before the application made
   * any CUDA call: it must then make none either. */
  int cuda_initialized;
  /* Seconds spent in dlopen of the library (its dependencies and the Go
   * runtime's start included), for the recording overhead report. */
  double load_seconds;
  /* Non-zero when the library is started on a thread of its own, beside
   * the application (deployment, from its first allocation): launches that
   * come before init returns run the application's own code without
   * waiting, so init may load the tuned kernels' cached code itself. */
  int background;
  const char *ir_start; /* __start_mneme_ir, or NULL when absent */
  size_t ir_size;
  /* The annotate("jit") kernels (section mneme_jit), or NULL when none. */
  const char *jit_start;
  size_t jit_size;

  int (*fatbin_count)(void);
  int (*kernel_count)(void);
  int (*kernel_at)(int i, struct mneme_kernel_reg *out);
  int (*var_count)(void);
  int (*var_at)(int i, struct mneme_var_reg *out);
  /* Index into the kernel table of a host stub, or -1. */
  int (*kernel_index)(const void *host_fun);

  cudaError_t (*launch)(const void *func, dim3 grid, dim3 block, void **args,
                        size_t shared, cudaStream_t stream, int ptsz);
  cudaError_t (*symbol_address)(const void *host_var, void **addr,
                                size_t *size);
  cudaError_t (*func_handle)(const void *host_fun, void **cu_function);
  cudaError_t (*device_synchronize)(void);
  cudaError_t (*stream_synchronize)(cudaStream_t stream);
  cudaError_t (*memcpy_dtoh)(void *dst, const void *src, size_t n);
  cudaError_t (*get_device)(int *ordinal);
  cudaError_t (*driver_version)(int *version);
  cudaError_t (*runtime_version)(int *version);
  const char *(*error_string)(cudaError_t err);

  /* The launch memo (see struct mneme_launch_memo). memo_enable tells the
   * shim a selected kernel's parameter sizes (cuFuncGetParamInfo), which
   * make up a launch's key with its geometry and shared memory; it returns
   * 0 if the shim could not keep them. memo_drain moves up to cap counts of
   * launches the shim forwarded without asking into out, resets them and
   * returns how many it moved (0: none left). */
  int (*memo_enable)(int kernel_index, int nparams, const size_t *sizes);
  int (*memo_drain)(struct mneme_launch_count *out, int cap);

  /* The device code a fat binary registered (module = its index): the
   * fatbin image the CUDA runtime loads, so replay can run the application's
   * own code. Returns 0 when it cannot be located. */
  int (*fatbin_image)(int module, const void **data, size_t *size);

  /* Turns the launch throttle on with t's events, or off (t NULL); when
   * it returns, no application thread uses the previous events any more.
   * Returns 0 when t is unusable (no entries, every 0). */
  int (*throttle)(const struct mneme_launch_throttle *t);

  /* Launch statistics (see MNEME_STATS_*). stats_enable tells the shim a
   * kernel's parameter sizes, before its first launch is counted (the
   * library learns them on that launch, which it is shown); 0 if it could
   * not keep them. stats_timer turns timing on with t's events, or off (t
   * NULL: samples in flight are dropped); 0 when t is unusable.
   * stats_collect adds the time of every sampled launch that has finished
   * and returns how many are still in flight. stats_read copies kernel
   * kernel_index's statistics into out (0: none yet). stats_add_time adds
   * a launch the library timed itself (one it recorded) to its shape. */
  int (*stats_enable)(int kernel_index, int nparams, const size_t *sizes);
  int (*stats_timer)(const struct mneme_stats_timer *t);
  int (*stats_collect)(void);
  int (*stats_read)(int kernel_index, struct mneme_kernel_stats *out);
  void (*stats_add_time)(int kernel_index, dim3 grid, dim3 block, size_t shared,
                         uint64_t ns);

  /* deploy_preloaded: the library loaded kernel kernel_index's tuned code
   * before its first launch: a's function and cu_launch, for every launch
   * (not keyed) or for the launches with the key of this grid, block,
   * dynamic shared memory and, when a folds arguments, the values args
   * holds at the folded positions (args as a launch passes them; entries
   * not folded are never read); block, recorded_block and shared_max as a
   * launch's answer has them. The shim then runs those launches itself
   * from the first on, never calling the library for them. Returns 0,
   * changing nothing, when it did not take the answer: one that folds
   * arguments without args, or runs the application's code, or a kernel
   * whose launches were decided already (for every launch, or otherwise
   * than keyed). An answer whose handled is MNEME_LAUNCH_FORWARD_ALWAYS
   * marks a kernel no tuned file lists: every launch of it runs the
   * application's code without asking the library. */
  int (*deploy_preloaded)(int kernel_index, const struct mneme_deploy_answer *a,
                          dim3 grid, dim3 block, size_t shared, void **args);
};

enum {
  MNEME_MODE_RECORD = 0,
  MNEME_MODE_DEPLOY = 1,
};

/* What mneme_rt_deploy_launch answers about a launch of a kernel in
 * deployment. handled is an MNEME_LAUNCH_* value. A non-NULL function is
 * the kernel's tuned code for every launch (keyed 0: no argument or
 * dimension is specialized) or for every launch with this launch's key
 * (keyed 1): the shim then launches it itself with cu_launch (the driver's
 * cuLaunchKernel) without calling the library again. The block rule below
 * is kept per key, since each launch-shape class has its own. A launch
 * whose block is recorded_block (or any launch when that is zero) runs with
 * the tuned block (zero: the launch's own) and a grid derived so the
 * launch's threads stay covered (mneme_deploy_geometry in deploy_policy.h,
 * as deploy.Plan.Geometry does); one the derived grid would not fit keeps
 * its own geometry. */
struct mneme_deploy_answer {
  int handled;
  void *function;
  void *cu_launch;
  unsigned block[3];
  unsigned recorded_block[3];
  /* Non-zero: function is the code of this launch's variant only (arguments
   * or dimensions are specialized). The shim remembers it under the
   * launch's key: its block, its grid when dims_folded, and the bytes of the
   * nfolded arguments listed in folded (folded_size bytes each); a later
   * launch with the same key runs it without asking, any other asks. */
  int keyed;
  int dims_folded;
  int nfolded;
  int folded[MNEME_DEPLOY_MAX_FOLDED];
  unsigned folded_size[MNEME_DEPLOY_MAX_FOLDED];
  /* Dynamic shared memory the function accepts: a launch asking for more
   * than this (and more than the default 48 KiB) asks the library. */
  unsigned shared_max;
  /* Non-zero (with keyed): the dynamic shared memory is part of the key
   * too, after the grid (a kernel with launch-shape classes, whose key
   * always holds the grid: dims_folded is then set). */
  int shared_keyed;
  /* Non-zero (with keyed and function NULL): the launches with this key
   * run the application's own code (a shape no class covers, a folded
   * value never measured); the shim remembers that and does not ask again
   * for them. block and recorded_block then do not apply. */
  int own_code;
};

/* Allocation kinds passed to mneme_rt_malloc, for the status counters. */
enum {
  MNEME_ALLOC_PLAIN = 0,
  MNEME_ALLOC_PITCH = 1,
  MNEME_ALLOC_3D = 2,
  MNEME_ALLOC_ASYNC = 3,
};

/* Returned by mneme_rt_malloc/mneme_rt_free when the library does not serve
 * the call and the shim must forward it to CUDA. */
#define MNEME_RT_FORWARD (-1)

/* *handled values of mneme_rt_launch. */
enum {
  MNEME_LAUNCH_FORWARD = 0,       /* the shim performs the launch */
  MNEME_LAUNCH_DONE = 1,          /* the library launched it */
  MNEME_LAUNCH_FORWARD_ALWAYS = 2 /* never ask again for this kernel */
};

/* The library's entry points, resolved with dlsym. */
typedef int (*mneme_rt_init_fn)(const struct mneme_host_api *api);
typedef cudaError_t (*mneme_rt_malloc_fn)(void **ptr, size_t size, int kind);
typedef cudaError_t (*mneme_rt_free_fn)(void *ptr, cudaStream_t stream,
                                        int async);
typedef cudaError_t (*mneme_rt_launch_fn)(const void *func, int kernel_index,
                                          unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz,
                                          void **args, size_t shared,
                                          cudaStream_t stream, int ptsz,
                                          int *handled,
                                          struct mneme_launch_memo *memo);
typedef cudaError_t (*mneme_rt_deploy_launch_fn)(
    const void *func, int kernel_index, unsigned gx, unsigned gy, unsigned gz,
    unsigned bx, unsigned by, unsigned bz, void **args, size_t shared,
    cudaStream_t stream, int ptsz, struct mneme_deploy_answer *answer);
typedef void (*mneme_rt_managed_fn)(void *ptr, size_t size);
typedef void (*mneme_rt_finish_fn)(void);
/* mneme_rt_drain: the application is about to reset the device; snapshots
 * still being written from device memory are finished first. */
typedef void (*mneme_rt_drain_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
