// Kernel-only timing through CUPTI's activity API, loaded with dlopen.
// CUPTI hands filled buffers to the completion callback on its own threads;
// the callback decodes the kernel records it needs and appends them to an
// array guarded by a mutex, which the Go side drains.
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUptiResult;
typedef void (*mn_buffer_requested)(uint8_t **buffer, size_t *size,
                                    size_t *max_records);
typedef void (*mn_buffer_completed)(CUcontext ctx, uint32_t stream,
                                    uint8_t *buffer, size_t size, size_t valid);

static void *cupti;
static CUptiResult (*p_cuptiActivityRegisterCallbacks)(mn_buffer_requested,
                                                       mn_buffer_completed);
static CUptiResult (*p_cuptiActivityEnable)(int kind);
static CUptiResult (*p_cuptiActivityDisable)(int kind);
static CUptiResult (*p_cuptiActivityFlushAll)(uint32_t flag);
static CUptiResult (*p_cuptiActivityGetNextRecord)(uint8_t *buffer,
                                                   size_t valid, void **record);
static CUptiResult (*p_cuptiGetResultString)(CUptiResult r, const char **s);

// CUpti_ActivityKind values.
enum { KIND_KERNEL = 3, KIND_CONCURRENT_KERNEL = 10 };

// Offsets in CUpti_ActivityKernel4 through Kernel10 (CUDA 11-13): the
// packed, 8-byte-aligned record starts with kind, cache and shared-memory
// configuration, registers and partitioned-cache fields (16 bytes), then
// start, end and completed; after the device, context and stream ids come
// gridX..Z and blockX..Z (int32), the static and dynamic shared memory,
// local memory per thread and in total, correlationId, gridId and name.
enum {
  OFF_KIND = 0,
  OFF_START = 16,
  OFF_END = 24,
  OFF_GRID = 52,
  OFF_BLOCK = 64,
  OFF_DYNAMIC_SHARED = 80,
  OFF_CORRELATION = 92,
  OFF_NAME = 104,
};

#define BUFFER_BYTES (4u << 20)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static mn_kernel_record *recs;
static size_t nrecs, caprecs;
static uint64_t dropped;
static int collecting;

static void on_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  void *p = NULL;
  if (posix_memalign(&p, 8, BUFFER_BYTES) != 0)
    p = NULL;
  *buffer = p;
  *size = p ? BUFFER_BYTES : 0;
  *max_records = 0;
}

static void on_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                         size_t size, size_t valid) {
  void *rec = NULL;
  (void)ctx;
  (void)stream;
  (void)size;
  if (!buffer)
    return;
  pthread_mutex_lock(&mu);
  while (valid > 0 && p_cuptiActivityGetNextRecord(buffer, valid, &rec) == 0) {
    const uint8_t *r = rec;
    uint32_t kind;
    memcpy(&kind, r + OFF_KIND, 4);
    if ((kind != KIND_CONCURRENT_KERNEL && kind != KIND_KERNEL) || !collecting)
      continue;
    if (nrecs == caprecs) {
      size_t ncap = caprecs ? caprecs * 2 : 1024;
      mn_kernel_record *n = realloc(recs, ncap * sizeof(*n));
      if (!n) {
        dropped++;
        continue;
      }
      recs = n;
      caprecs = ncap;
    }
    mn_kernel_record *k = &recs[nrecs++];
    const char *name = NULL;
    memcpy(&k->start, r + OFF_START, 8);
    memcpy(&k->end, r + OFF_END, 8);
    memcpy(&k->correlation_id, r + OFF_CORRELATION, 4);
    memcpy(k->grid, r + OFF_GRID, sizeof k->grid);
    memcpy(k->block, r + OFF_BLOCK, sizeof k->block);
    memcpy(&k->dynamic_shared, r + OFF_DYNAMIC_SHARED, 4);
    memcpy(&name, r + OFF_NAME, sizeof(name));
    k->name = name ? strdup(name) : NULL;
  }
  pthread_mutex_unlock(&mu);
  free(buffer);
}

static int try_open(const char *path) {
  cupti = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  return cupti != NULL;
}

int mn_cupti_load(char *err, size_t errlen) {
  static const char *names[] = {
      "libcupti.so",
      "libcupti.so.13",
      "libcupti.so.12",
      "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
      "/usr/local/cuda/lib64/libcupti.so",
      "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
      "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.12",
  };
  char path[4096];
  const char *home = getenv("CUDA_HOME");
  if (!home)
    home = getenv("CUDA_PATH");
  if (home) {
    snprintf(path, sizeof(path), "%s/extras/CUPTI/lib64/libcupti.so", home);
    if (try_open(path))
      goto found;
    snprintf(path, sizeof(path), "%s/lib64/libcupti.so", home);
    if (try_open(path))
      goto found;
  }
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (try_open(names[i]))
      goto found;
  snprintf(err, errlen,
           "libcupti.so not found (tried the loader path, $CUDA_HOME, "
           "/usr/local/cuda/extras/CUPTI/lib64 and /usr/local/cuda/lib64)");
  return 0;
found:
#define R(name) p_##name = (__typeof__(p_##name))dlsym(cupti, #name)
  R(cuptiActivityRegisterCallbacks);
  R(cuptiActivityEnable);
  R(cuptiActivityDisable);
  R(cuptiActivityFlushAll);
  R(cuptiActivityGetNextRecord);
  R(cuptiGetResultString);
#undef R
  if (!p_cuptiActivityRegisterCallbacks || !p_cuptiActivityEnable ||
      !p_cuptiActivityDisable || !p_cuptiActivityFlushAll ||
      !p_cuptiActivityGetNextRecord) {
    snprintf(err, errlen,
             "libcupti.so lacks the activity API (cuptiActivityEnable ...)");
    return 0;
  }
  CUptiResult r = p_cuptiActivityRegisterCallbacks(on_requested, on_completed);
  if (r != 0) {
    snprintf(err, errlen, "cuptiActivityRegisterCallbacks: %s",
             mn_cupti_result_string(r));
    return 0;
  }
  return 1;
}

const char *mn_cupti_result_string(int r) {
  const char *s = NULL;
  if (p_cuptiGetResultString && p_cuptiGetResultString(r, &s) == 0 && s)
    return s;
  return "unknown CUPTI error";
}

int mn_cupti_enable(void) {
  pthread_mutex_lock(&mu);
  collecting = 1;
  pthread_mutex_unlock(&mu);
  return p_cuptiActivityEnable(KIND_CONCURRENT_KERNEL);
}

int mn_cupti_disable(void) {
  int r = p_cuptiActivityDisable(KIND_CONCURRENT_KERNEL);
  // Deliver what is buffered, then drop it: nobody will drain it.
  p_cuptiActivityFlushAll(1);
  pthread_mutex_lock(&mu);
  collecting = 0;
  pthread_mutex_unlock(&mu);
  mn_kernel_record *old;
  uint64_t d;
  size_t n = mn_cupti_take(&old, &d);
  mn_cupti_free_records(old, n);
  return r;
}

// CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1: also flush buffers not yet full.
int mn_cupti_flush(void) { return p_cuptiActivityFlushAll(1); }

size_t mn_cupti_take(mn_kernel_record **out, uint64_t *d) {
  pthread_mutex_lock(&mu);
  size_t n = nrecs;
  *out = recs;
  *d = dropped;
  recs = NULL;
  nrecs = caprecs = 0;
  dropped = 0;
  pthread_mutex_unlock(&mu);
  return n;
}

void mn_cupti_free_records(mn_kernel_record *r, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(r[i].name);
  free(r);
}
