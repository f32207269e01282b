/* Launches: forwarded at once when neither recording nor deploying; while
 * recording, decided by the launch memo when it can, else handed to the
 * library; while deploying, a tuned kernel runs its JIT-compiled code.
 * Everything a launch calls is in this file or inline in shim_internal.h. */
#include "shim_internal.h"

#include <stdio.h>

/* A key fits this buffer on the stack unless the kernel takes more than
 * ~1 KiB of arguments. */
#define MEMO_STACK_KEY 1024

/* memo_forward decides a launch in C when it can: a kernel the library
 * never wants to see, a remembered repeat, or a capped kernel. It returns
 * the kernel's index (or -1) in *idx and whether to forward at once. The
 * launch's key goes to *key, replaced by a heap buffer for large keys,
 * which the caller frees. Called with mneme_table_lock held. */
static int memo_forward(const void *func, dim3 grid, dim3 block, void **args,
                        size_t shared, int *idx, unsigned char **key) {
  *idx = kernel_index_locked(func);
  if (*idx < 0)
    return 0;
  struct kernel_entry *k = &mneme_kernels[*idx];
  if (k->forward_always) {
    k->forwarded++;
    mneme_memo_pending++;
    return 1;
  }
  struct launch_memo *m = k->memo;
  if (m == NULL)
    return 0;
  if (m->key_len > MEMO_STACK_KEY && (*key = malloc(m->key_len)) == NULL)
    return 0;
  if (!launch_key(m, grid, block, shared, args, *key))
    return 0;
  struct memo_slot *s = memo_find(m, key_hash(*key, m->key_len), *key);
  if (s != NULL) {
    s->launches++;
    mneme_memo_pending++;
    return 1;
  }
  if (m->capped) {
    k->forwarded++;
    mneme_memo_pending++;
    return 1;
  }
  return 0;
}

/* memo_learn applies what the library said about a launch it was shown.
 * Called with mneme_table_lock held. */
static void memo_learn(int idx, int handled,
                       const struct mneme_launch_memo *memo, dim3 grid,
                       dim3 block, void **args, size_t shared,
                       unsigned char **key) {
  if (idx < 0 || idx >= mneme_n_kernels)
    return;
  struct kernel_entry *k = &mneme_kernels[idx];
  if (handled == MNEME_LAUNCH_FORWARD_ALWAYS)
    k->forward_always = 1;
  struct launch_memo *m = k->memo;
  if (m == NULL)
    return;
  if (memo->capped)
    m->capped = 1;
  if (memo->repeat <= 0)
    return;
  /* The memo may have been enabled during this very call: key it now. */
  if (m->key_len > MEMO_STACK_KEY && (*key = malloc(m->key_len)) == NULL)
    return;
  if (launch_key(m, grid, block, shared, args, *key))
    mneme_memo_insert(m, key_hash(*key, m->key_len), *key, memo->repeat);
}

static cudaError_t record_launch(const void *func, dim3 grid, dim3 block,
                                 void **args, size_t shared,
                                 cudaStream_t stream, int ptsz) {
  if (!load_runtime(1))
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  unsigned char stack_key[MEMO_STACK_KEY], *key = stack_key;
  int idx;
  pthread_mutex_lock(&mneme_table_lock);
  int forward = memo_forward(func, grid, block, args, shared, &idx, &key);
  pthread_mutex_unlock(&mneme_table_lock);
  if (key != stack_key) {
    free(key);
    key = stack_key;
  }
  if (forward)
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  int handled = MNEME_LAUNCH_FORWARD;
  struct mneme_launch_memo memo = {0, 0};
  cudaError_t e =
      mneme_rt.launch(func, idx, grid.x, grid.y, grid.z, block.x, block.y,
                      block.z, args, shared, stream, ptsz, &handled, &memo);
  if (idx >= 0 && (handled == MNEME_LAUNCH_FORWARD_ALWAYS || memo.repeat > 0 ||
                   memo.capped)) {
    pthread_mutex_lock(&mneme_table_lock);
    memo_learn(idx, handled, &memo, grid, block, args, shared, &key);
    pthread_mutex_unlock(&mneme_table_lock);
    if (key != stack_key)
      free(key);
  }
  if (handled == MNEME_LAUNCH_DONE)
    return e;
  return api_launch(func, grid, block, args, shared, stream, ptsz);
}

typedef int (*cu_launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz,
                            unsigned bx, unsigned by, unsigned bz,
                            unsigned shared, void *stream, void **params,
                            void **extra);

/* The driver's per-thread default stream (CU_STREAM_PER_THREAD), for
 * launches the application made on the per-thread stream 0. */
#define CU_STREAM_PER_THREAD_HANDLE ((void *)0x2)

static cu_launch_fn deploy_cu_launch;

/* rederive is the grid dimension that keeps grid * block threads covered
 * with the tuned block dimension; 0 when it exceeds limit. */
static unsigned rederive(unsigned grid, unsigned block, unsigned tuned,
                         unsigned long long limit) {
  if (tuned == block)
    return grid;
  unsigned long long g = ((unsigned long long)grid * block + tuned - 1) / tuned;
  return g > limit ? 0 : (unsigned)g;
}

/* fast_launch runs a tuned kernel's code; the geometry follows
 * deploy.Plan.Geometry (see struct mneme_deploy_answer). */
static int fast_launch(void *fn, const unsigned tb[3], const unsigned rb[3],
                       dim3 grid, dim3 block, void **args, size_t shared,
                       cudaStream_t stream, int ptsz) {
  void *s = (ptsz && stream == NULL) ? CU_STREAM_PER_THREAD_HANDLE : stream;
  int retune = tb[0] != 0 && grid.x && grid.y && grid.z &&
               (rb[0] == 0 ||
                (block.x == rb[0] && block.y == rb[1] && block.z == rb[2]));
  if (retune) {
    unsigned gx = rederive(grid.x, block.x, tb[0], 2147483647ull),
             gy = rederive(grid.y, block.y, tb[1], 65535ull),
             gz = rederive(grid.z, block.z, tb[2], 65535ull);
    if (gx && gy && gz)
      return deploy_cu_launch(fn, gx, gy, gz, tb[0], tb[1], tb[2],
                              (unsigned)shared, s, args, NULL);
  }
  return deploy_cu_launch(fn, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                          (unsigned)shared, s, args, NULL);
}

static cudaError_t deploy_launch(const void *func, dim3 grid, dim3 block,
                                 void **args, size_t shared,
                                 cudaStream_t stream, int ptsz) {
  pthread_mutex_lock(&mneme_table_lock);
  int idx = kernel_index_locked(func);
  int state = DEPLOY_FORWARD;
  void *fn = NULL;
  unsigned tb[3] = {0, 0, 0}, rb[3] = {0, 0, 0};
  if (idx >= 0) {
    struct kernel_entry *k = &mneme_kernels[idx];
    state = k->deploy;
    fn = k->jit_fn;
    memcpy(tb, k->jit_block, sizeof tb);
    memcpy(rb, k->jit_recorded, sizeof rb);
  }
  pthread_mutex_unlock(&mneme_table_lock);
  if (state == DEPLOY_FORWARD)
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  if (state == DEPLOY_FAST) {
    int r = fast_launch(fn, tb, rb, grid, block, args, shared, stream, ptsz);
    if (__builtin_expect(r == 0, 1))
      return mneme_cudaSuccess;
    fprintf(stderr,
            "mneme: tuned code of %s failed to launch (CUDA driver error %d); "
            "the application's own code runs from now on\n",
            mneme_kernels[idx].reg.device_name, r);
    pthread_mutex_lock(&mneme_table_lock);
    mneme_kernels[idx].deploy = DEPLOY_FORWARD;
    pthread_mutex_unlock(&mneme_table_lock);
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  }
  if (!load_runtime(1)) {
    if (idx >= 0) {
      pthread_mutex_lock(&mneme_table_lock);
      mneme_kernels[idx].deploy = DEPLOY_FORWARD;
      pthread_mutex_unlock(&mneme_table_lock);
    }
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  }
  struct mneme_deploy_answer a;
  memset(&a, 0, sizeof a);
  a.handled = MNEME_LAUNCH_FORWARD;
  cudaError_t e =
      mneme_rt.deploy_launch(func, idx, grid.x, grid.y, grid.z, block.x,
                             block.y, block.z, args, shared, stream, ptsz, &a);
  if (idx >= 0 && (a.handled == MNEME_LAUNCH_FORWARD_ALWAYS ||
                   (a.function != NULL && a.cu_launch != NULL))) {
    pthread_mutex_lock(&mneme_table_lock);
    struct kernel_entry *k = &mneme_kernels[idx];
    if (a.handled == MNEME_LAUNCH_FORWARD_ALWAYS) {
      k->deploy = DEPLOY_FORWARD;
    } else {
      deploy_cu_launch = (cu_launch_fn)a.cu_launch;
      k->jit_fn = a.function;
      memcpy(k->jit_block, a.block, sizeof k->jit_block);
      memcpy(k->jit_recorded, a.recorded_block, sizeof k->jit_recorded);
      k->deploy = DEPLOY_FAST;
    }
    pthread_mutex_unlock(&mneme_table_lock);
  }
  if (a.handled == MNEME_LAUNCH_DONE)
    return e;
  return api_launch(func, grid, block, args, shared, stream, ptsz);
}

cudaError_t __wrap_cudaLaunchKernel(const void *func, dim3 grid, dim3 block,
                                    void **args, size_t shared,
                                    cudaStream_t stream) {
  if (__builtin_expect(!mneme_launch_hook, 1))
    return __real_cudaLaunchKernel(func, grid, block, args, shared, stream);
  if (mneme_deploying)
    return deploy_launch(func, grid, block, args, shared, stream, 0);
  return record_launch(func, grid, block, args, shared, stream, 0);
}

cudaError_t __wrap_cudaLaunchKernel_ptsz(const void *func, dim3 grid,
                                         dim3 block, void **args, size_t shared,
                                         cudaStream_t stream) {
  if (__builtin_expect(!mneme_launch_hook, 1))
    return __real_cudaLaunchKernel_ptsz(func, grid, block, args, shared,
                                        stream);
  if (mneme_deploying)
    return deploy_launch(func, grid, block, args, shared, stream, 1);
  return record_launch(func, grid, block, args, shared, stream, 1);
}
