// Declarations of host.c for the Go side.
#ifndef MNEME_LIBRT_HOST_H
#define MNEME_LIBRT_HOST_H
#include "mneme_shim.h"

void rth_set_api(const struct mneme_host_api *a);
const char *rth_ir_start(void);
size_t rth_ir_size(void);
int rth_fatbin_count(void);
int rth_kernel_count(void);
int rth_kernel_at(int i, struct mneme_kernel_reg *out);
int rth_var_count(void);
int rth_var_at(int i, struct mneme_var_reg *out);
int rth_kernel_index(const void *host_fun);
cudaError_t rth_launch(const void *func, unsigned gx, unsigned gy, unsigned gz,
                       unsigned bx, unsigned by, unsigned bz, void **args,
                       size_t shared, cudaStream_t stream, int ptsz);
cudaError_t rth_symbol_address(const void *host_var, uintptr_t *addr,
                               size_t *size);
cudaError_t rth_func_handle(const void *host_fun, uintptr_t *cu_function);
cudaError_t rth_device_synchronize(void);
cudaError_t rth_memcpy_dtoh(void *dst, uintptr_t src, size_t n);
cudaError_t rth_get_device(int *ordinal);
cudaError_t rth_driver_version(int *v);
cudaError_t rth_runtime_version(int *v);
const char *rth_error_string(cudaError_t e);
int rth_memo_enable(int kernel_index, int nparams, const size_t *sizes);
int rth_memo_drain(struct mneme_launch_count *out, int cap);
int rth_fatbin_image(int module, const void **data, size_t *size);
/* rth_set_fast_path fills a deployment answer's driver handles, which Go
 * holds as integers. */
void rth_set_fast_path(struct mneme_deploy_answer *a, uintptr_t function,
                       uintptr_t cu_launch);
/* rth_throttle_on turns the shim's launch throttle on with the driver's
 * entries (cuEventRecord, cuEventSynchronize, cuStreamIsCapturing,
 * cuThreadExchangeStreamCaptureMode) and MNEME_THROTTLE_EVENTS events;
 * 0 when the shim refuses them. */
int rth_throttle_on(const uintptr_t entries[4], const uintptr_t *events, int n,
                    unsigned every);
void rth_throttle_off(void);
/* rth_deploy_preloaded hands the shim a kernel's preloaded tuned code (the
 * host API's deploy_preloaded) for the launches a says, keyed by grid,
 * block, shared and the folded arguments' values in args (NULL when a
 * folds none) when a is keyed; 0 when it declined. */
int rth_deploy_preloaded(int kernel_index, const struct mneme_deploy_answer *a,
                         const unsigned grid[3], const unsigned block[3],
                         size_t shared, void **args);
#endif
