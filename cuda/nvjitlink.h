// See nvjitlink.c.
#ifndef MNEME_CUDA_NVJITLINK_H
#define MNEME_CUDA_NVJITLINK_H
#include <stddef.h>

typedef struct {
  void *cubin;
  size_t cubin_size;
  char *info_log;  /* malloc'd, or NULL */
  char *error_log; /* malloc'd, or NULL */
  const char *failed_call;
} mn_njl_result;

int mn_njl_open(const char *path);
int mn_njl_version(unsigned *major, unsigned *minor);
int mn_njl_link_ptx(const char *ptx, size_t len, const char *name,
                    const char **options, unsigned n_options,
                    mn_njl_result *out);
#endif
