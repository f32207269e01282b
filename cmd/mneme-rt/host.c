// Calls from Go into the shim's host API: cgo cannot call C function
// pointers directly, so each entry of struct mneme_host_api gets a plain
// function here.
#include "host.h"

#include <string.h>

static const struct mneme_host_api *api;

void rth_set_api(const struct mneme_host_api *a) { api = a; }
const char *rth_ir_start(void) { return api->ir_start; }
size_t rth_ir_size(void) { return api->ir_size; }
int rth_fatbin_count(void) { return api->fatbin_count(); }
int rth_kernel_count(void) { return api->kernel_count(); }
int rth_kernel_at(int i, struct mneme_kernel_reg *out) {
  return api->kernel_at(i, out);
}
int rth_var_count(void) { return api->var_count(); }
int rth_var_at(int i, struct mneme_var_reg *out) { return api->var_at(i, out); }
int rth_kernel_index(const void *host_fun) {
  return api->kernel_index(host_fun);
}

cudaError_t rth_launch(const void *func, unsigned gx, unsigned gy, unsigned gz,
                       unsigned bx, unsigned by, unsigned bz, void **args,
                       size_t shared, cudaStream_t stream, int ptsz) {
  dim3 grid = {gx, gy, gz}, block = {bx, by, bz};
  return api->launch(func, grid, block, args, shared, stream, ptsz);
}

cudaError_t rth_symbol_address(const void *host_var, uintptr_t *addr,
                               size_t *size) {
  void *p = 0;
  cudaError_t e = api->symbol_address(host_var, &p, size);
  *addr = (uintptr_t)p;
  return e;
}

cudaError_t rth_func_handle(const void *host_fun, uintptr_t *cu_function) {
  void *f = 0;
  cudaError_t e = api->func_handle(host_fun, &f);
  *cu_function = (uintptr_t)f;
  return e;
}

cudaError_t rth_device_synchronize(void) { return api->device_synchronize(); }
cudaError_t rth_memcpy_dtoh(void *dst, uintptr_t src, size_t n) {
  return api->memcpy_dtoh(dst, (const void *)src, n);
}
cudaError_t rth_get_device(int *ordinal) { return api->get_device(ordinal); }
cudaError_t rth_driver_version(int *v) { return api->driver_version(v); }
cudaError_t rth_runtime_version(int *v) { return api->runtime_version(v); }
const char *rth_error_string(cudaError_t e) { return api->error_string(e); }
int rth_memo_enable(int kernel_index, int nparams, const size_t *sizes) {
  return api->memo_enable(kernel_index, nparams, sizes);
}
int rth_memo_drain(struct mneme_launch_count *out, int cap) {
  return api->memo_drain(out, cap);
}
int rth_fatbin_image(int module, const void **data, size_t *size) {
  return api->fatbin_image(module, data, size);
}

void rth_set_fast_path(struct mneme_deploy_answer *a, uintptr_t function,
                       uintptr_t cu_launch) {
  a->function = (void *)function;
  a->cu_launch = (void *)cu_launch;
}

int rth_throttle_on(const uintptr_t entries[4], const uintptr_t *events, int n,
                    unsigned every) {
  struct mneme_launch_throttle t;
  memset(&t, 0, sizeof t);
  if (n != MNEME_THROTTLE_EVENTS)
    return 0;
  t.event_record = (int (*)(void *, void *))entries[0];
  t.event_synchronize = (int (*)(void *))entries[1];
  t.stream_is_capturing = (int (*)(void *, int *))entries[2];
  t.exchange_capture_mode = (int (*)(int *))entries[3];
  for (int i = 0; i < n; i++)
    t.events[i] = (void *)events[i];
  t.every = every;
  return api->throttle(&t);
}

void rth_throttle_off(void) { api->throttle(NULL); }

int rth_deploy_preloaded(int kernel_index, const struct mneme_deploy_answer *a,
                         const unsigned grid[3], const unsigned block[3],
                         size_t shared, void **args) {
  if (api->deploy_preloaded == NULL)
    return 0;
  dim3 g = {grid[0], grid[1], grid[2]}, b = {block[0], block[1], block[2]};
  return api->deploy_preloaded(kernel_index, a, g, b, shared, args);
}
