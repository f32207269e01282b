// The CUDA toolkit's JIT linker library (libnvJitLink), loaded with dlopen:
// its ptxas is the one the application's compiler ran, while the driver's
// JIT (cuLink*) may generate different machine code from the same PTX.
#include "nvjitlink.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef void *njl_handle;
static int (*p_create)(njl_handle *, unsigned, const char **);
static int (*p_add)(njl_handle, int, const void *, size_t, const char *);
static int (*p_complete)(njl_handle);
static int (*p_cubin_size)(njl_handle, size_t *);
static int (*p_cubin)(njl_handle, void *);
static int (*p_info_size)(njl_handle, size_t *);
static int (*p_info)(njl_handle, char *);
static int (*p_error_size)(njl_handle, size_t *);
static int (*p_error)(njl_handle, char *);
static int (*p_destroy)(njl_handle *);
static int (*p_version)(unsigned *, unsigned *);

int mn_njl_open(const char *path) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL)
    return 0;
#define SYM(p, name)                                                           \
  if ((*(void **)&p = dlsym(lib, name)) == NULL)                               \
    return 0;
  SYM(p_create, "nvJitLinkCreate");
  SYM(p_add, "nvJitLinkAddData");
  SYM(p_complete, "nvJitLinkComplete");
  SYM(p_cubin_size, "nvJitLinkGetLinkedCubinSize");
  SYM(p_cubin, "nvJitLinkGetLinkedCubin");
  SYM(p_info_size, "nvJitLinkGetInfoLogSize");
  SYM(p_info, "nvJitLinkGetInfoLog");
  SYM(p_error_size, "nvJitLinkGetErrorLogSize");
  SYM(p_error, "nvJitLinkGetErrorLog");
  SYM(p_destroy, "nvJitLinkDestroy");
  SYM(p_version, "nvJitLinkVersion");
#undef SYM
  return 1;
}

int mn_njl_version(unsigned *major, unsigned *minor) {
  return p_version(major, minor);
}

static char *take_log(njl_handle h, int (*size_fn)(njl_handle, size_t *),
                      int (*log_fn)(njl_handle, char *)) {
  size_t n = 0;
  if (size_fn(h, &n) != 0 || n == 0)
    return NULL;
  char *s = calloc(n + 1, 1);
  if (s != NULL && log_fn(h, s) != 0) {
    free(s);
    return NULL;
  }
  return s;
}

int mn_njl_link_ptx(const char *ptx, size_t len, const char *name,
                    const char **options, unsigned n_options,
                    mn_njl_result *out) {
  memset(out, 0, sizeof *out);
  njl_handle h = NULL;
  int r = p_create(&h, n_options, options);
  if (r != 0) {
    out->failed_call = "nvJitLinkCreate";
    return r;
  }
  r = p_add(h, 2 /* NVJITLINK_INPUT_PTX */, ptx, len, name);
  if (r != 0)
    out->failed_call = "nvJitLinkAddData";
  if (r == 0) {
    r = p_complete(h);
    if (r != 0)
      out->failed_call = "nvJitLinkComplete";
  }
  out->info_log = take_log(h, p_info_size, p_info);
  out->error_log = take_log(h, p_error_size, p_error);
  if (r == 0 && p_cubin_size(h, &out->cubin_size) == 0 &&
      (out->cubin = malloc(out->cubin_size)) != NULL &&
      p_cubin(h, out->cubin) != 0) {
    free(out->cubin);
    out->cubin = NULL;
  }
  if (r == 0 && out->cubin == NULL) {
    out->failed_call = "nvJitLinkGetLinkedCubin";
    r = -1;
  }
  p_destroy(&h);
  return r;
}
