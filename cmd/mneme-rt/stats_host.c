/* Calls from Go into the shim's launch statistics: cgo cannot call the
 * host API's function pointers directly. */
#include "stats_host.h"

#include <dlfcn.h>
#include <string.h>

static const struct mneme_host_api *api;

void rts_set_api(const struct mneme_host_api *a) { api = a; }

int rts_enable(int kernel_index, int nparams, const size_t *sizes) {
  return api->stats_enable(kernel_index, nparams, sizes);
}

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
  return api->stats_timer(&t);
}

void rts_timer_off(void) { api->stats_timer(NULL); }
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
