/* The registration tables: every fat binary, kernel and device variable the
 * application registers, remembered whether or not it is being recorded. */
#include "shim_internal.h"

pthread_mutex_t mneme_table_lock = PTHREAD_MUTEX_INITIALIZER;

struct fatbin_entry *mneme_fatbins;
int mneme_n_fatbins;
static int cap_fatbins;
struct kernel_entry *mneme_kernels;
int mneme_n_kernels;
static int cap_kernels;
struct var_entry *mneme_vars;
int mneme_n_vars;
static int cap_vars;

int *mneme_kernel_slots;
size_t mneme_kernel_slots_cap;

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

static void kernel_slots_put(int *slots, size_t cap, int idx) {
  size_t i = pointer_hash(mneme_kernels[idx].reg.host_fun) & (cap - 1);
  while (slots[i] != 0) {
    if (mneme_kernels[slots[i] - 1].reg.host_fun ==
        mneme_kernels[idx].reg.host_fun)
      return; /* registered twice: the first registration stays */
    i = (i + 1) & (cap - 1);
  }
  slots[i] = idx + 1;
}

/* kernel_slots_add indexes mneme_kernels[idx]; without memory for the index
 * the lookup falls back to a scan. */
static void kernel_slots_add(int idx) {
  if ((size_t)mneme_n_kernels * 2 > mneme_kernel_slots_cap) {
    size_t cap = mneme_kernel_slots_cap ? mneme_kernel_slots_cap * 2 : 256;
    while ((size_t)mneme_n_kernels * 2 > cap)
      cap *= 2;
    int *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
      return;
    free(mneme_kernel_slots);
    mneme_kernel_slots = slots;
    mneme_kernel_slots_cap = cap;
    for (int i = 0; i < mneme_n_kernels; i++)
      kernel_slots_put(mneme_kernel_slots, mneme_kernel_slots_cap, i);
    return;
  }
  kernel_slots_put(mneme_kernel_slots, mneme_kernel_slots_cap, idx);
}

int mneme_module_of(void **handle) {
  for (int i = mneme_n_fatbins - 1; i >= 0; i--)
    if (mneme_fatbins[i].handle == handle)
      return i;
  return -1;
}

void **__wrap___cudaRegisterFatBinary(void *fat_cubin) {
  void **h = __real___cudaRegisterFatBinary(fat_cubin);
  pthread_mutex_lock(&mneme_table_lock);
  if (grow((void **)&mneme_fatbins, &cap_fatbins, mneme_n_fatbins,
           sizeof *mneme_fatbins)) {
    mneme_fatbins[mneme_n_fatbins].handle = h;
    mneme_fatbins[mneme_n_fatbins++].wrapper = fat_cubin;
  }
  pthread_mutex_unlock(&mneme_table_lock);
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
  pthread_mutex_lock(&mneme_table_lock);
  if (grow((void **)&mneme_kernels, &cap_kernels, mneme_n_kernels,
           sizeof *mneme_kernels)) {
    struct kernel_entry *k = &mneme_kernels[mneme_n_kernels++];
    memset(k, 0, sizeof *k);
    k->reg.host_fun = host_fun;
    k->reg.device_name = device_name;
    k->reg.module = mneme_module_of(handle);
    k->handle = handle;
    kernel_slots_add(mneme_n_kernels - 1);
  }
  pthread_mutex_unlock(&mneme_table_lock);
}

static void remember_var(void **handle, const void *host_var,
                         const char *device_name, size_t size, int constant,
                         int managed) {
  pthread_mutex_lock(&mneme_table_lock);
  if (grow((void **)&mneme_vars, &cap_vars, mneme_n_vars, sizeof *mneme_vars)) {
    struct var_entry *v = &mneme_vars[mneme_n_vars++];
    v->reg.host_var = host_var;
    v->reg.device_name = device_name;
    v->reg.size = size;
    v->reg.module = mneme_module_of(handle);
    v->reg.constant = constant;
    v->reg.managed = managed;
    v->handle = handle;
  }
  pthread_mutex_unlock(&mneme_table_lock);
}

void __wrap___cudaRegisterVar(void **handle, char *host_var,
                              char *device_address, const char *device_name,
                              int ext, size_t size, int constant, int global) {
  __real___cudaRegisterVar(handle, host_var, device_address, device_name, ext,
                           size, constant, global);
  remember_var(handle, host_var, device_name, size, constant, 0);
}

void __wrap___cudaRegisterManagedVar(void **handle, void **host_var_ptr_addr,
                                     char *device_address,
                                     const char *device_name, int ext,
                                     size_t size, int constant, int global) {
  __real___cudaRegisterManagedVar(handle, host_var_ptr_addr, device_address,
                                  device_name, ext, size, constant, global);
  remember_var(handle, host_var_ptr_addr, device_name, size, constant, 1);
  if (__builtin_expect(mneme_recording, 0))
    mneme_warn_managed();
}
