/* Launches: forwarded at once when not recording; while recording, decided
 * by the launch memo when it can, else handed to the library. Everything a
 * launch calls is in this file or inline in shim_internal.h. */
#include "shim_internal.h"

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

cudaError_t __wrap_cudaLaunchKernel(const void *func, dim3 grid, dim3 block,
                                    void **args, size_t shared,
                                    cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaLaunchKernel(func, grid, block, args, shared, stream);
  return record_launch(func, grid, block, args, shared, stream, 0);
}

cudaError_t __wrap_cudaLaunchKernel_ptsz(const void *func, dim3 grid,
                                         dim3 block, void **args, size_t shared,
                                         cudaStream_t stream) {
  if (__builtin_expect(!mneme_recording, 1))
    return __real_cudaLaunchKernel_ptsz(func, grid, block, args, shared,
                                        stream);
  return record_launch(func, grid, block, args, shared, stream, 1);
}
