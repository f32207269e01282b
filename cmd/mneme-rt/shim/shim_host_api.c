/* The host API handed to the library (struct mneme_host_api): the
 * registration tables, under their lock, and the real CUDA calls. */
#include "shim_internal.h"

static int api_fatbin_count(void) {
  pthread_mutex_lock(&mneme_table_lock);
  int n = mneme_n_fatbins;
  pthread_mutex_unlock(&mneme_table_lock);
  return n;
}

/* The wrapper the compiler emits around a fat binary, and the fat binary's
 * own header: its image is the header followed by fat_size bytes. */
#define FATBIN_WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xBA55ED50u
struct fatbin_wrapper {
  uint32_t magic;
  uint32_t version;
  const void *data;
  const void *filename_or_fatbins;
};
struct fatbin_header {
  uint32_t magic;
  uint16_t version;
  uint16_t header_size;
  uint64_t fat_size;
};

static int api_fatbin_image(int module, const void **data, size_t *size) {
  pthread_mutex_lock(&mneme_table_lock);
  const struct fatbin_wrapper *w = module >= 0 && module < mneme_n_fatbins
                                       ? mneme_fatbins[module].wrapper
                                       : NULL;
  pthread_mutex_unlock(&mneme_table_lock);
  if (w == NULL || w->magic != FATBIN_WRAPPER_MAGIC || w->data == NULL)
    return 0;
  const struct fatbin_header *fh = w->data;
  if (fh->magic != FATBIN_MAGIC || fh->header_size < sizeof *fh ||
      fh->fat_size > ((uint64_t)1 << 34))
    return 0;
  *data = fh;
  *size = (size_t)fh->header_size + (size_t)fh->fat_size;
  return 1;
}

static int api_kernel_count(void) {
  pthread_mutex_lock(&mneme_table_lock);
  int n = mneme_n_kernels;
  pthread_mutex_unlock(&mneme_table_lock);
  return n;
}

static int api_kernel_at(int i, struct mneme_kernel_reg *out) {
  pthread_mutex_lock(&mneme_table_lock);
  if (i < 0 || i >= mneme_n_kernels) {
    pthread_mutex_unlock(&mneme_table_lock);
    return 0;
  }
  struct kernel_entry *k = &mneme_kernels[i];
  if (k->demangled == NULL && __cxa_demangle != NULL) {
    int status = -1;
    k->demangled = __cxa_demangle(k->reg.device_name, NULL, NULL, &status);
    if (status != 0)
      k->demangled = NULL;
  }
  /* The fat binary may have been registered after the function in odd
   * link orders; resolve the module again if it was unknown. */
  if (k->reg.module < 0)
    k->reg.module = mneme_module_of(k->handle);
  *out = k->reg;
  out->demangled = k->demangled ? k->demangled : k->reg.device_name;
  pthread_mutex_unlock(&mneme_table_lock);
  return 1;
}

static int api_var_count(void) {
  pthread_mutex_lock(&mneme_table_lock);
  int n = mneme_n_vars;
  pthread_mutex_unlock(&mneme_table_lock);
  return n;
}

static int api_var_at(int i, struct mneme_var_reg *out) {
  pthread_mutex_lock(&mneme_table_lock);
  if (i < 0 || i >= mneme_n_vars) {
    pthread_mutex_unlock(&mneme_table_lock);
    return 0;
  }
  if (mneme_vars[i].reg.module < 0)
    mneme_vars[i].reg.module = mneme_module_of(mneme_vars[i].handle);
  *out = mneme_vars[i].reg;
  pthread_mutex_unlock(&mneme_table_lock);
  return 1;
}

static int api_kernel_index(const void *host_fun) {
  pthread_mutex_lock(&mneme_table_lock);
  int found = kernel_index_locked(host_fun);
  pthread_mutex_unlock(&mneme_table_lock);
  return found;
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

struct mneme_host_api mneme_host_api_table = {
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
    .memo_enable = mneme_api_memo_enable,
    .memo_drain = mneme_api_memo_drain,
    .fatbin_image = api_fatbin_image,
    .throttle = mneme_api_throttle,
    .stats_enable = mneme_api_stats_enable,
    .stats_timer = mneme_api_stats_timer,
    .stats_collect = mneme_api_stats_collect,
    .stats_read = mneme_api_stats_read,
    .stats_add_time = mneme_api_stats_add_time,
    .deploy_preloaded = mneme_api_deploy_preloaded,
};
