/* Calls from Go into the shim's launch statistics (cgo cannot call the
 * host API's function pointers directly), and the gate of the recorder's
 * own timed launches. */
#include "stats_host.h"

#include <dlfcn.h>
#include <string.h>
#include <time.h>

static const struct mneme_host_api *api;
static struct mneme_stats_timer gate_driver;

void rts_set_api(const struct mneme_host_api *a) { api = a; }

int rts_enable(int kernel_index, int nparams, const size_t *sizes) {
  return api->stats_enable(kernel_index, nparams, sizes);
}

/* The gate of the recorder's own timed launches, as the shim gates its
 * samples (struct mneme_stats_timer): one launch at a time (timeLaunch
 * holds its lock), tickets only grow. */
static uint64_t gate_ticket, gate_opened, gate_expired;
static uint64_t gate_timeout = MNEME_STATS_GATE_TIMEOUT_NS;

int rts_timer_on(const uintptr_t entries[5], const uintptr_t *events, int n,
                 uint64_t gate_timeout_ns) {
  struct mneme_stats_timer t;
  memset(&t, 0, sizeof t);
  if (n != 2 * MNEME_STATS_TIMER_SLOTS)
    return 0;
  t.event_record = (int (*)(void *, void *))entries[0];
  t.event_elapsed = (int (*)(float *, void *, void *))entries[1];
  t.stream_is_capturing = (int (*)(void *, int *))entries[2];
  t.exchange_capture_mode = (int (*)(int *))entries[3];
  t.launch_host_func = (int (*)(void *, void (*)(void *), void *))entries[4];
  t.gate_timeout_ns = gate_timeout_ns;
  for (int i = 0; i < n; i++)
    t.events[i] = (void *)events[i];
  if (!api->stats_timer(&t))
    return 0;
  gate_driver = t;
  __atomic_store_n(&gate_timeout,
                   gate_timeout_ns ? gate_timeout_ns
                                   : MNEME_STATS_GATE_TIMEOUT_NS,
                   __ATOMIC_RELAXED);
  return 1;
}

static uint64_t gate_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* gate_hold runs on the driver's thread: no CUDA call. */
static void gate_hold(void *data) {
  uint64_t ticket = (uint64_t)(uintptr_t)data;
  uint64_t until =
      gate_now() + __atomic_load_n(&gate_timeout, __ATOMIC_RELAXED);
  while (__atomic_load_n(&gate_opened, __ATOMIC_ACQUIRE) < ticket) {
    if (gate_now() >= until) {
      __atomic_store_n(&gate_expired, ticket, __ATOMIC_RELEASE);
      return;
    }
  }
}

uint64_t rts_gate_hold(uintptr_t stream) {
  if (gate_driver.launch_host_func == NULL)
    return 0;
  void *s = (void *)stream;
  int mode = 2 /* relaxed */, status = 0;
  uint64_t ticket = 0;
  if (gate_driver.exchange_capture_mode(&mode) != 0)
    return 0;
  if (gate_driver.stream_is_capturing(s, &status) == 0 && status == 0 &&
      gate_driver.launch_host_func(s, gate_hold,
                                   (void *)(uintptr_t)(gate_ticket + 1)) == 0)
    ticket = ++gate_ticket;
  gate_driver.exchange_capture_mode(&mode);
  return ticket;
}

void rts_gate_open(uint64_t ticket) {
  if (ticket != 0)
    __atomic_store_n(&gate_opened, ticket, __ATOMIC_RELEASE);
}

int rts_gate_expired(uint64_t ticket) {
  return ticket != 0 &&
         __atomic_load_n(&gate_expired, __ATOMIC_ACQUIRE) == ticket;
}

void rts_timer_off(void) {
  api->stats_timer(NULL);
  memset(&gate_driver, 0, sizeof gate_driver);
}
int rts_collect(void) { return api->stats_collect(); }
int rts_read(int kernel_index, struct mneme_kernel_stats *out) {
  return api->stats_read(kernel_index, out);
}

void rts_add_time(int kernel_index, unsigned gx, unsigned gy, unsigned gz,
                  unsigned bx, unsigned by, unsigned bz, size_t shared,
                  uint64_t ns) {
  dim3 grid = {gx, gy, gz}, block = {bx, by, bz};
  api->stats_add_time(kernel_index, grid, block, shared, ns);
}

/* driver_entry is the driver's entry name (or, where it has none, the
 * older fallback), or 0. */
static uintptr_t driver_entry(const char *name, const char *fallback) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == NULL)
    return 0;
  void *f = dlsym(lib, name);
  if (f == NULL && fallback != NULL)
    f = dlsym(lib, fallback);
  dlclose(lib);
  return (uintptr_t)f;
}

uintptr_t rts_event_elapsed_entry(void) {
  return driver_entry("cuEventElapsedTime_v2", "cuEventElapsedTime");
}

uintptr_t rts_launch_host_func_entry(void) {
  return driver_entry("cuLaunchHostFunc", NULL);
}
