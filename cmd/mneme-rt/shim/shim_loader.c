/* The Go library, loaded on first use while recording or deploying tuned
 * kernels, and finished when the application exits. */
#include "shim_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

struct mneme_rt_entries mneme_rt;
int mneme_rt_ready;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_failed(const char *what, const char *detail) {
  fprintf(stderr, "mneme: %s: %s%s%s (MNEME_RT_LIB=%s)\n",
          !mneme_recording ? "tuned kernels disabled, the application's own "
                             "code runs"
                           : "recording disabled",
          what, detail ? ": " : "", detail ? detail : "",
          getenv("MNEME_RT_LIB") ? getenv("MNEME_RT_LIB") : "(unset)");
  mneme_rt_ready = -1;
}

static void *timed_dlopen(const char *path) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  mneme_host_api_table.load_seconds =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  return lib;
}

static int finished;

/* finish ends the recording once: the exit handler or the destructor,
 * whichever runs first. */
static void finish(void) {
  if (__atomic_exchange_n(&finished, 1, __ATOMIC_ACQ_REL))
    return;
  mneme_rt.finish();
}

static void finish_at_exit(void) {
  mneme_trace("exit handler");
  finish();
  mneme_trace("exit handler: runtime finished");
}

/* start_runtime resolves the library's entry points and initializes it. */
static void start_runtime(void *lib, const char *path, int init_cuda) {
  mneme_rt_init_fn init = (mneme_rt_init_fn)dlsym(lib, "mneme_rt_init");
  mneme_rt.malloc_ = (mneme_rt_malloc_fn)dlsym(lib, "mneme_rt_malloc");
  mneme_rt.free_ = (mneme_rt_free_fn)dlsym(lib, "mneme_rt_free");
  mneme_rt.launch = (mneme_rt_launch_fn)dlsym(lib, "mneme_rt_launch");
  mneme_rt.deploy_launch =
      (mneme_rt_deploy_launch_fn)dlsym(lib, "mneme_rt_deploy_launch");
  mneme_rt.managed = (mneme_rt_managed_fn)dlsym(lib, "mneme_rt_managed");
  mneme_rt.finish = (mneme_rt_finish_fn)dlsym(lib, "mneme_rt_finish");
  mneme_rt.drain = (mneme_rt_drain_fn)dlsym(lib, "mneme_rt_drain");
  if (!init || !mneme_rt.malloc_ || !mneme_rt.free_ || !mneme_rt.launch ||
      !mneme_rt.deploy_launch || !mneme_rt.managed || !mneme_rt.finish) {
    load_failed("the runtime library lacks an mneme_rt_* entry point", path);
    return;
  }
  if (__start_mneme_ir != NULL && __stop_mneme_ir != NULL &&
      &__stop_mneme_ir[0] > &__start_mneme_ir[0]) {
    mneme_host_api_table.ir_start = __start_mneme_ir;
    mneme_host_api_table.ir_size = (size_t)(__stop_mneme_ir - __start_mneme_ir);
  }
  if (mneme_jit_section_size() > 0) {
    mneme_host_api_table.jit_start = __start_mneme_jit;
    mneme_host_api_table.jit_size = mneme_jit_section_size();
  }
  mneme_trace("loaded; creating the CUDA context");
  if (init_cuda)
    __real_cudaFree(NULL);
  mneme_trace("context ready");
  mneme_host_api_table.cuda_initialized = init_cuda;
  mneme_host_api_table.mode =
      mneme_recording ? MNEME_MODE_RECORD : MNEME_MODE_DEPLOY;
  mneme_host_api_table.rt_lib_path = path;
  if (init(&mneme_host_api_table) != 0) {
    load_failed("the runtime library failed to start", NULL);
    return;
  }
  mneme_rt_ready = 1;
  /* Snapshots may still be in the background writer when the application
   * exits, and draining them needs CUDA. The CUDA runtime tears itself down
   * at exit from a handler registered when it initialized; a handler
   * registered after that (here, after the context exists) runs before
   * it, where the library's destructor would run after. */
  if (init_cuda && (mneme_recording || mneme_counting))
    atexit(finish_at_exit);
}

/* load_once loads and starts the library unless done; background: from
 * the thread started beside the application (the library then learns it
 * may take its time). */
static int load_once(int init_cuda, int background) {
  pthread_mutex_lock(&load_lock);
  if (mneme_rt_ready == 0) {
    mneme_host_api_table.background = background;
    mneme_trace("load runtime library");
    const char *path = getenv("MNEME_RT_LIB");
    void *lib = NULL;
    /* Deployment runs the application directly, without `mneme record` to
     * set MNEME_RT_LIB: the library of the prefix the shim was built in, or
     * of the `mneme` on PATH when that prefix has moved. */
    static char found[4096];
    if ((path == NULL || path[0] == '\0') &&
        (mneme_deploying || mneme_counting)) {
#ifdef MNEME_DEFAULT_RT_LIB
      const char *built = MNEME_DEFAULT_RT_LIB;
#else
      const char *built = NULL;
#endif
      path = mneme_find_runtime_lib(built, getenv("PATH"), found, sizeof found);
    }
    if (path == NULL || path[0] == '\0')
      load_failed((mneme_deploying || mneme_counting)
                      ? "no runtime library: MNEME_RT_LIB is not set, the "
                        "build prefix's is gone and no `mneme` on PATH has one"
                      : "MNEME_RT_LIB is not set",
                  NULL);
    else if ((lib = timed_dlopen(path)) == NULL)
      load_failed("cannot load the runtime library", dlerror());
    else
      start_runtime(lib, path, init_cuda);
  }
  pthread_mutex_unlock(&load_lock);
  return mneme_rt_ready > 0;
}

int mneme_load_runtime_once(int init_cuda) { return load_once(init_cuda, 0); }

int mneme_rt_loading;
static int background_started;
static int background_device;

static void *load_in_background(void *arg) {
  (void)arg;
  /* The CUDA runtime's current device is per thread: this thread works on
   * the application's. */
  cudaSetDevice(background_device);
  mneme_trace("deploy: loading the runtime library in the background");
  load_once(1, 1);
  __atomic_store_n(&mneme_rt_loading, 0, __ATOMIC_RELEASE);
  mneme_trace("deploy: runtime library ready");
  return NULL;
}

void mneme_deploy_start_background(void) {
  if (__atomic_exchange_n(&background_started, 1, __ATOMIC_ACQ_REL))
    return;
  if (cudaGetDevice(&background_device) != mneme_cudaSuccess)
    background_device = 0;
  pthread_attr_t attr;
  pthread_t t;
  __atomic_store_n(&mneme_rt_loading, 1, __ATOMIC_RELEASE);
  if (pthread_attr_init(&attr) != 0) {
    __atomic_store_n(&mneme_rt_loading, 0, __ATOMIC_RELEASE);
    return;
  }
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, load_in_background, NULL) != 0)
    __atomic_store_n(&mneme_rt_loading, 0, __ATOMIC_RELEASE);
  pthread_attr_destroy(&attr);
}

__attribute__((destructor)) static void mneme_finish(void) {
  if (mneme_counting && mneme_rt_ready > 0) {
    /* The statistics of a run that launched something. */
    finish();
    return;
  }
  if (!mneme_recording) {
    mneme_trace("exit");
    return;
  }
  /* Load even if the application never launched anything, so the status
   * file still says how many kernels were registered. */
  mneme_trace("exit");
  if (load_runtime(0))
    finish();
  mneme_trace("exit: runtime finished");
}

static pthread_once_t managed_once = PTHREAD_ONCE_INIT;
static void print_managed_warning(void) {
  fprintf(stderr, "mneme: warning: the application uses managed memory "
                  "(cudaMallocManaged or __managed__); kernels that touch "
                  "managed memory are recorded but cannot be replayed "
                  "faithfully\n");
}
void mneme_warn_managed(void) {
  pthread_once(&managed_once, print_managed_warning);
}
