/* Launches: forwarded at once when neither recording nor deploying; while
 * recording, decided by the launch memo when it can, else handed to the
 * library; while deploying, a tuned kernel runs its JIT-compiled code (the
 * variant of its launch's values when they are specialized).
 * Everything a launch calls is in this file or inline in shim_internal.h. */
#include "shim_internal.h"

#include <stdio.h>

/* A key fits this buffer on the stack unless the kernel takes more than
 * ~1 KiB of arguments. */
#define MEMO_STACK_KEY 1024

/* A launch's place in its kernel's statistics, decided under the lock and
 * used after it: its kernel, its shape (-1: not in the table) and whether
 * it is one to time. counted: the launch was counted. */
struct launch_stats {
  int counted;
  int shape;
  int timed;
};

/* memo_forward decides a launch in C when it can: a kernel the library
 * never wants to see, a remembered repeat, a shape the kernel takes no new
 * instance of, or a capped kernel. It returns the kernel's index (or -1)
 * in *idx and whether to forward at once, and counts the launch in the
 * kernel's statistics once the library has seen the kernel. The launch's
 * key goes to *key, replaced by a heap buffer for large keys, which the
 * caller frees. Called with mneme_table_lock held. */
static int memo_forward(const void *func, dim3 grid, dim3 block, void **args,
                        size_t shared, int *idx, unsigned char **key,
                        struct launch_stats *st) {
  *idx = kernel_index_locked(func);
  if (*idx < 0)
    return 0;
  struct kernel_entry *k = &mneme_kernels[*idx];
  if (k->stats != NULL) {
    st->counted = 1;
    st->shape = stats_count(k, grid, block, shared, args, &st->timed);
  }
  if (k->forward_always) {
    k->forwarded++;
    mneme_memo_pending++;
    return 1;
  }
  struct launch_memo *m = k->memo;
  if (m != NULL &&
      (m->key_len <= MEMO_STACK_KEY || (*key = malloc(m->key_len)) != NULL) &&
      launch_key(m, grid, block, shared, args, *key)) {
    struct memo_slot *s = memo_find(m, key_hash(*key, m->key_len), *key);
    if (s != NULL) {
      s->launches++;
      mneme_memo_pending++;
      return 1;
    }
  }
  if ((m != NULL && m->capped) ||
      (st->counted && st->shape >= 0 && k->stats->shapes[st->shape].covered)) {
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
                       unsigned char **key, int shape) {
  if (idx < 0 || idx >= mneme_n_kernels)
    return;
  struct kernel_entry *k = &mneme_kernels[idx];
  if (handled == MNEME_LAUNCH_FORWARD_ALWAYS)
    k->forward_always = 1;
  if (memo->shape_covered && shape >= 0 && k->stats != NULL)
    k->stats->shapes[shape].covered = 1;
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

static cudaError_t deploy_launch(const void *func, dim3 grid, dim3 block,
                                 void **args, size_t shared,
                                 cudaStream_t stream, int ptsz);

/* forward_launch runs a launch the recorder does not record: the tuned
 * code when recording with tuned kernels, else the application's; counted
 * by the launch throttle while it is on. */
static inline cudaError_t forward_launch(const void *func, dim3 grid,
                                         dim3 block, void **args, size_t shared,
                                         cudaStream_t stream, int ptsz) {
  cudaError_t e =
      mneme_deploying
          ? deploy_launch(func, grid, block, args, shared, stream, ptsz)
          : api_launch(func, grid, block, args, shared, stream, ptsz);
  if (__builtin_expect(__atomic_load_n(&mneme_throttling, __ATOMIC_RELAXED),
                       0) &&
      e == mneme_cudaSuccess)
    mneme_throttle_launch(stream, ptsz);
  return e;
}

/* stats_forward forwards a launch, bracketed by a pair of the library's
 * events behind a gate when it is one to time and a pair is free. */
static inline cudaError_t stats_forward(int idx, const struct launch_stats *st,
                                        const void *func, dim3 grid, dim3 block,
                                        void **args, size_t shared,
                                        cudaStream_t stream, int ptsz) {
  if (__builtin_expect(
          !st->timed || st->shape < 0 ||
              !__atomic_load_n(&mneme_stats_timing, __ATOMIC_RELAXED),
          1))
    return forward_launch(func, grid, block, args, shared, stream, ptsz);
  int64_t token = mneme_stats_begin(idx, st->shape, st->timed, stream, ptsz);
  cudaError_t e = forward_launch(func, grid, block, args, shared, stream, ptsz);
  if (token >= 0)
    mneme_stats_end(token, e == mneme_cudaSuccess, stream, ptsz);
  return e;
}

static cudaError_t record_launch(const void *func, dim3 grid, dim3 block,
                                 void **args, size_t shared,
                                 cudaStream_t stream, int ptsz) {
  if (!load_runtime(1))
    return api_launch(func, grid, block, args, shared, stream, ptsz);
  unsigned char stack_key[MEMO_STACK_KEY], *key = stack_key;
  int idx;
  struct launch_stats st = {0, -1, 0};
  pthread_mutex_lock(&mneme_table_lock);
  int forward = memo_forward(func, grid, block, args, shared, &idx, &key, &st);
  pthread_mutex_unlock(&mneme_table_lock);
  if (key != stack_key) {
    free(key);
    key = stack_key;
  }
  /* A launch captured into a graph does not run now: recording it would
   * synchronize the device inside the capture, which invalidates it. It
   * runs as the application made it, counted. */
  if (forward || mneme_stream_capturing(stream, ptsz))
    return stats_forward(idx, &st, func, grid, block, args, shared, stream,
                         ptsz);
  int handled = MNEME_LAUNCH_FORWARD;
  struct mneme_launch_memo memo = {0, 0, 0};
  cudaError_t e =
      mneme_rt.launch(func, idx, grid.x, grid.y, grid.z, block.x, block.y,
                      block.z, args, shared, stream, ptsz, &handled, &memo);
  if (idx >= 0) {
    pthread_mutex_lock(&mneme_table_lock);
    /* A kernel's first launch is counted once the library has told the
     * shim its parameters, which it learns on that launch. */
    if (!st.counted)
      st.shape = stats_count(&mneme_kernels[idx], grid, block, shared, args,
                             &st.timed);
    if (handled == MNEME_LAUNCH_FORWARD_ALWAYS || memo.repeat > 0 ||
        memo.capped || memo.shape_covered)
      memo_learn(idx, handled, &memo, grid, block, args, shared, &key,
                 st.shape);
    pthread_mutex_unlock(&mneme_table_lock);
    if (key != stack_key)
      free(key);
  }
  if (handled == MNEME_LAUNCH_DONE)
    return e;
  return stats_forward(idx, &st, func, grid, block, args, shared, stream, ptsz);
}

typedef int (*cu_launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz,
                            unsigned bx, unsigned by, unsigned bz,
                            unsigned shared, void *stream, void **params,
                            void **extra);

/* The driver's per-thread default stream (CU_STREAM_PER_THREAD), for
 * launches the application made on the per-thread stream 0. */
#define CU_STREAM_PER_THREAD_HANDLE ((void *)0x2)

static cu_launch_fn deploy_cu_launch;

/* fast_launch runs a tuned kernel's code; the geometry follows
 * mneme_deploy_geometry (see struct mneme_deploy_answer). */
static int fast_launch(void *fn, const unsigned tb[3], const unsigned rb[3],
                       dim3 grid, dim3 block, void **args, size_t shared,
                       cudaStream_t stream, int ptsz) {
  void *s = (ptsz && stream == NULL) ? CU_STREAM_PER_THREAD_HANDLE : stream;
  const unsigned g[3] = {grid.x, grid.y, grid.z},
                 b[3] = {block.x, block.y, block.z};
  unsigned out[6];
  mneme_deploy_geometry(tb, rb, g, b, out);
  return deploy_cu_launch(fn, out[0], out[1], out[2], out[3], out[4], out[5],
                          (unsigned)shared, s, args, NULL);
}

/* ---- specialized variants: the tuned code of each launch key ---- */

/* The limits (MNEME_DEPLOY_MAX_KEYS keys per kernel, beyond which new
 * launches keep asking the library, which runs them with its unspecialized
 * tuned code; MNEME_DEPLOY_MAX_KEYED_ARG bytes per keyed argument;
 * MNEME_DEPLOY_DEFAULT_SHARED) are deploy_policy.h's. */

struct variant_slot {
  uint64_t hash;
  unsigned char *key; /* owned; NULL: empty slot */
  void *fn;           /* CUfunction of the variant; NULL: the application's */
  unsigned shared_max;
  unsigned tb[3], rb[3]; /* the block rule of the key's launches */
};

/* variant_table maps a kernel's launch keys to the code of their variants
 * (DEPLOY_KEYED), so a launch of a specialized kernel with values seen
 * before runs in C: a call into the Go library costs microseconds, which a
 * short kernel timed on its own feels. A key is the launch's block, its grid
 * when dimensions are specialized or the kernel has launch-shape classes,
 * its dynamic shared memory with classes, and the bytes of the specialized
 * arguments: what the library's own table of launches seen is keyed by.
 * A key whose launches run the application's own code (a shape no class
 * covers, a value never measured) is kept too, with no code: the negative
 * memo, bounded with the rest by MNEME_DEPLOY_MAX_KEYS. */
struct variant_table {
  int dims;
  int shared;
  int nfolded;
  int folded[MNEME_DEPLOY_MAX_FOLDED];
  unsigned folded_size[MNEME_DEPLOY_MAX_FOLDED];
  size_t key_len;
  struct variant_slot *slots; /* open addressing, at most half full */
  size_t cap, used;
};

/* key_buffer is stack when len fits it, else a heap buffer (NULL without
 * memory) that the caller frees. */
static unsigned char *key_buffer(size_t len, unsigned char *stack) {
  return len <= MEMO_STACK_KEY ? stack : malloc(len);
}

/* variant_key writes the launch's key into buf (t->key_len bytes); it fails
 * (0) when the arguments cannot be read. */
static int variant_key(const struct variant_table *t, dim3 grid, dim3 block,
                       size_t shared, void **args, unsigned char *buf) {
  const unsigned g[3] = {grid.x, grid.y, grid.z},
                 b[3] = {block.x, block.y, block.z};
  return mneme_deploy_variant_key(t->dims, t->shared, t->nfolded, t->folded,
                                  t->folded_size, g, b, (uint32_t)shared, args,
                                  buf);
}

static struct variant_slot *variant_find(const struct variant_table *t,
                                         uint64_t h, const unsigned char *key) {
  if (t->cap == 0)
    return NULL;
  for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    struct variant_slot *s = &t->slots[i];
    if (s->key == NULL)
      return NULL;
    if (s->hash == h && memcmp(s->key, key, t->key_len) == 0)
      return s;
  }
}

/* variant_lookup is the slot remembered for this launch's key, or NULL:
 * not seen, more shared memory than the code was opened up for, or no
 * memory for a large key. A slot without code says the application's own
 * code runs. Called with mneme_table_lock held. */
static const struct variant_slot *variant_lookup(const struct variant_table *t,
                                                 dim3 grid, dim3 block,
                                                 void **args, size_t shared) {
  unsigned char stack[MEMO_STACK_KEY];
  unsigned char *key = key_buffer(t->key_len, stack);
  if (key == NULL)
    return NULL;
  const struct variant_slot *found = NULL;
  if (variant_key(t, grid, block, shared, args, key)) {
    struct variant_slot *s = variant_find(t, key_hash(key, t->key_len), key);
    if (s != NULL && (s->fn == NULL || shared <= MNEME_DEPLOY_DEFAULT_SHARED ||
                      shared <= s->shared_max))
      found = s;
  }
  if (key != stack)
    free(key);
  return found;
}

/* variant_layout_matches tells whether an answer keys launches as t does. */
static int variant_layout_matches(const struct variant_table *t,
                                  const struct mneme_deploy_answer *a) {
  if (t->dims != (a->dims_folded != 0) || t->shared != (a->shared_keyed != 0) ||
      t->nfolded != a->nfolded)
    return 0;
  for (int i = 0; i < t->nfolded; i++)
    if (t->folded[i] != a->folded[i] || t->folded_size[i] != a->folded_size[i])
      return 0;
  return 1;
}

/* variant_table_new is an empty table keyed as the answer says, or NULL
 * when the answer's key is not one the shim keeps. */
static struct variant_table *
variant_table_new(const struct mneme_deploy_answer *a) {
  if (a->nfolded < 0 || a->nfolded > MNEME_DEPLOY_MAX_FOLDED)
    return NULL;
  struct variant_table *t = calloc(1, sizeof *t);
  if (t == NULL)
    return NULL;
  t->dims = a->dims_folded != 0;
  t->shared = a->shared_keyed != 0;
  t->nfolded = a->nfolded;
  for (int i = 0; i < t->nfolded; i++) {
    if (a->folded[i] < 0 || a->folded_size[i] > MNEME_DEPLOY_MAX_KEYED_ARG) {
      free(t);
      return NULL;
    }
    t->folded[i] = a->folded[i];
    t->folded_size[i] = a->folded_size[i];
  }
  t->key_len =
      mneme_deploy_key_len(t->dims, t->shared, t->nfolded, t->folded_size);
  return t;
}

/* variant_insert remembers fn under key (or updates what the key had);
 * without memory, or beyond MNEME_DEPLOY_MAX_KEYS, it remembers nothing and the
 * key keeps asking the library. */
static void variant_insert(struct variant_table *t, const unsigned char *key,
                           const struct mneme_deploy_answer *a) {
  void *fn = a->own_code ? NULL : a->function;
  uint64_t h = key_hash(key, t->key_len);
  struct variant_slot *s = variant_find(t, h, key);
  if (s != NULL) {
    s->fn = fn;
    s->shared_max = a->shared_max;
    memcpy(s->tb, a->block, sizeof s->tb);
    memcpy(s->rb, a->recorded_block, sizeof s->rb);
    return;
  }
  if (t->used >= MNEME_DEPLOY_MAX_KEYS)
    return;
  if ((t->used + 1) * 2 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    struct variant_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
      return;
    for (size_t i = 0; i < t->cap; i++) {
      if (t->slots[i].key == NULL)
        continue;
      size_t j = t->slots[i].hash & (cap - 1);
      while (slots[j].key != NULL)
        j = (j + 1) & (cap - 1);
      slots[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
  }
  unsigned char *copy = malloc(t->key_len);
  if (copy == NULL)
    return;
  memcpy(copy, key, t->key_len);
  size_t j = h & (t->cap - 1);
  while (t->slots[j].key != NULL)
    j = (j + 1) & (t->cap - 1);
  t->slots[j] = (struct variant_slot){
      .hash = h, .key = copy, .fn = fn, .shared_max = a->shared_max};
  memcpy(t->slots[j].tb, a->block, sizeof t->slots[j].tb);
  memcpy(t->slots[j].rb, a->recorded_block, sizeof t->slots[j].rb);
  t->used++;
}

/* remember_variant files the variant the library answered (or that the
 * application's own code runs) under this launch's key. Called with
 * mneme_table_lock held. */
static void remember_variant(struct kernel_entry *k,
                             const struct mneme_deploy_answer *a, dim3 grid,
                             dim3 block, size_t shared, void **args) {
  if (k->variants == NULL && (k->variants = variant_table_new(a)) == NULL)
    return;
  struct variant_table *t = k->variants;
  if (!variant_layout_matches(t, a))
    return;
  unsigned char stack[MEMO_STACK_KEY];
  unsigned char *key = key_buffer(t->key_len, stack);
  if (key == NULL)
    return;
  if (variant_key(t, grid, block, shared, args, key)) {
    variant_insert(t, key, a);
    k->deploy = DEPLOY_KEYED;
  }
  if (key != stack)
    free(key);
}

int mneme_api_deploy_preloaded(int idx, const struct mneme_deploy_answer *a,
                               dim3 grid, dim3 block, size_t shared,
                               void **args) {
  if (a != NULL && a->handled == MNEME_LAUNCH_FORWARD_ALWAYS) {
    /* A kernel no tuned file lists: its launches run the application's
     * code from the first on, never asking the library. */
    pthread_mutex_lock(&mneme_table_lock);
    int taken = idx >= 0 && idx < mneme_n_kernels &&
                mneme_kernels[idx].deploy == DEPLOY_ASK;
    if (taken)
      mneme_kernels[idx].deploy = DEPLOY_FORWARD;
    pthread_mutex_unlock(&mneme_table_lock);
    return taken;
  }
  if (a == NULL || a->function == NULL || a->cu_launch == NULL || a->own_code ||
      (a->keyed && a->nfolded != 0 && args == NULL))
    return 0;
  pthread_mutex_lock(&mneme_table_lock);
  int taken = 0;
  struct kernel_entry *k =
      idx >= 0 && idx < mneme_n_kernels ? &mneme_kernels[idx] : NULL;
  if (k != NULL && !a->keyed && k->deploy == DEPLOY_ASK) {
    deploy_cu_launch = (cu_launch_fn)a->cu_launch;
    memcpy(k->jit_block, a->block, sizeof k->jit_block);
    memcpy(k->jit_recorded, a->recorded_block, sizeof k->jit_recorded);
    k->jit_fn = a->function;
    k->jit_shared_max = a->shared_max;
    k->deploy = DEPLOY_FAST;
    taken = 1;
  } else if (k != NULL && a->keyed &&
             (k->deploy == DEPLOY_ASK || k->deploy == DEPLOY_KEYED)) {
    deploy_cu_launch = (cu_launch_fn)a->cu_launch;
    remember_variant(k, a, grid, block, shared, args);
    const struct variant_slot *s =
        k->variants != NULL && k->deploy == DEPLOY_KEYED
            ? variant_lookup(k->variants, grid, block, args, shared)
            : NULL;
    taken = s != NULL && s->fn == a->function;
  }
  pthread_mutex_unlock(&mneme_table_lock);
  return taken;
}

static cudaError_t deploy_launch(const void *func, dim3 grid, dim3 block,
                                 void **args, size_t shared,
                                 cudaStream_t stream, int ptsz) {
  pthread_mutex_lock(&mneme_table_lock);
  int idx = kernel_index_locked(func);
  int state = DEPLOY_FORWARD;
  void *fn = NULL;
  unsigned tb[3] = {0, 0, 0}, rb[3] = {0, 0, 0};
  /* A kernel's first launch is traced step by step (MNEME_TRACE): entry,
   * decision, driver launch; gpu-first-launch.sh reads the steps. */
  int first = 0;
  const char *name = NULL; /* the application's string: valid unlocked */
  if (idx >= 0) {
    struct kernel_entry *k = &mneme_kernels[idx];
    first = !k->deploy_launched;
    k->deploy_launched = 1;
    name = k->reg.device_name;
    state = k->deploy;
    fn = k->jit_fn;
    memcpy(tb, k->jit_block, sizeof tb);
    memcpy(rb, k->jit_recorded, sizeof rb);
    /* More dynamic shared memory than the code accepts: the library opens
     * it up. */
    if (state == DEPLOY_FAST && shared > MNEME_DEPLOY_DEFAULT_SHARED &&
        shared > k->jit_shared_max)
      state = DEPLOY_ASK;
    if (state == DEPLOY_KEYED) {
      const struct variant_slot *s =
          variant_lookup(k->variants, grid, block, args, shared);
      state = s == NULL       ? DEPLOY_ASK
              : s->fn != NULL ? DEPLOY_FAST
                              : DEPLOY_FORWARD;
      if (s != NULL) {
        fn = s->fn;
        memcpy(tb, s->tb, sizeof tb);
        memcpy(rb, s->rb, sizeof rb);
      }
    }
  }
  pthread_mutex_unlock(&mneme_table_lock);
  if (__builtin_expect(first, 0))
    mneme_tracef("deploy: first launch of %s: entered the shim (%s)", name,
                 state == DEPLOY_FAST      ? "its tuned code is known"
                 : state == DEPLOY_FORWARD ? "the application's code"
                                           : "asking the library");
  if (state == DEPLOY_FORWARD) {
    if (!__builtin_expect(first, 0))
      return api_launch(func, grid, block, args, shared, stream, ptsz);
    cudaError_t e = api_launch(func, grid, block, args, shared, stream, ptsz);
    mneme_tracef("deploy: first launch of %s: runtime launch returned %d", name,
                 e);
    return e;
  }
  if (state == DEPLOY_FAST) {
    if (__builtin_expect(first, 0))
      mneme_tracef("deploy: first launch of %s runs its tuned code, "
                   "preloaded, from the shim",
                   name);
    int r = fast_launch(fn, tb, rb, grid, block, args, shared, stream, ptsz);
    if (__builtin_expect(first, 0))
      mneme_tracef("deploy: first launch of %s: driver launch returned %d",
                   name, r);
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
  /* The library is being loaded beside the application: this launch runs
   * the application's own code rather than wait, and a later one asks. */
  if (__builtin_expect(library_loading(), 0)) {
    mneme_trace("deploy: a launch ran the application's code while the "
                "library loads");
    cudaError_t e = api_launch(func, grid, block, args, shared, stream, ptsz);
    if (__builtin_expect(first, 0))
      mneme_tracef("deploy: first launch of %s: runtime launch returned %d",
                   name, e);
    return e;
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
  /* Every launch that asks is traced, not only a kernel's first: a launch
   * key the shim has not seen costs a call into the library, which the
   * trace makes visible. */
  mneme_tracef("deploy: %s launch of %s: the library answered (%s)",
               first ? "first" : "a", name ? name : "?",
               a.handled == MNEME_LAUNCH_DONE ? "it launched the tuned code"
                                              : "the application's code");
  if (idx >= 0 && (a.handled == MNEME_LAUNCH_FORWARD_ALWAYS ||
                   (a.function != NULL && a.cu_launch != NULL) ||
                   (a.own_code && a.keyed))) {
    pthread_mutex_lock(&mneme_table_lock);
    struct kernel_entry *k = &mneme_kernels[idx];
    if (a.handled == MNEME_LAUNCH_FORWARD_ALWAYS) {
      k->deploy = DEPLOY_FORWARD;
    } else if (a.own_code) {
      remember_variant(k, &a, grid, block, shared, args);
    } else {
      deploy_cu_launch = (cu_launch_fn)a.cu_launch;
      memcpy(k->jit_block, a.block, sizeof k->jit_block);
      memcpy(k->jit_recorded, a.recorded_block, sizeof k->jit_recorded);
      if (a.keyed) {
        remember_variant(k, &a, grid, block, shared, args);
      } else {
        k->jit_fn = a.function;
        k->jit_shared_max = a.shared_max;
        k->deploy = DEPLOY_FAST;
      }
    }
    pthread_mutex_unlock(&mneme_table_lock);
  }
  if (a.handled == MNEME_LAUNCH_DONE)
    return e;
  return api_launch(func, grid, block, args, shared, stream, ptsz);
}

/* The early window of a counted run: a launch that waited for the library
 * shifted the application's timeline by its wait, so a launch made up to
 * that long after the library became ready would, uncounted, have come
 * while it loaded and run the application's own code: counted as early
 * too. early_window_end is that moment (CLOCK_MONOTONIC ns; 0: none, or
 * passed, when launches stop reading the clock). */
static uint64_t early_window_end;

/* widen_early_window extends the window to ready + (ready - waited_from),
 * the wait of a launch that began waiting at waited_from. */
static void widen_early_window(uint64_t waited_from) {
  uint64_t ready = mneme_now_ns();
  uint64_t end = ready + (ready - waited_from);
  uint64_t cur = __atomic_load_n(&early_window_end, __ATOMIC_RELAXED);
  while (cur < end &&
         !__atomic_compare_exchange_n(&early_window_end, &cur, end, 0,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

/* within_early_window: this launch comes inside the window; once it has
 * passed the window closes, and no later launch reads the clock. */
static inline int within_early_window(void) {
  uint64_t end = __atomic_load_n(&early_window_end, __ATOMIC_RELAXED);
  if (__builtin_expect(end == 0, 1))
    return 0;
  if (mneme_now_ns() < end)
    return 1;
  __atomic_store_n(&early_window_end, 0, __ATOMIC_RELAXED);
  return 0;
}

/* counted_launch counts a launch outside a recording (MNEME_LAUNCH_STATS)
 * and times it when it is one of the sample, then runs it as it would run
 * uncounted: the tuned code when deploying, else the application's. A
 * launch made while the library loads for deployment in the background
 * waits for it, unlike an uncounted one: counting measures (`mneme deploy
 * measure`), and the launch is then timed (the events are the library's)
 * and runs the tuned code the later launches run, which a kernel launched
 * once is judged by. Such a launch counts as early, and so do the launches
 * of the early window after it (measure drops a kernel whose every tuned
 * launch is early: deployed, none would run its tuned code). */
static cudaError_t counted_launch(const void *func, dim3 grid, dim3 block,
                                  void **args, size_t shared,
                                  cudaStream_t stream, int ptsz) {
  struct launch_stats st = {0, -1, 0};
  int idx = -1;
  int waits = mneme_deploying && library_loading();
  uint64_t waited_from = waits ? mneme_now_ns() : 0;
  int early = waits || (mneme_deploying && within_early_window());
  if (load_runtime(1)) {
    if (waits)
      widen_early_window(waited_from);
    pthread_mutex_lock(&mneme_table_lock);
    idx = kernel_index_locked(func);
    if (idx >= 0) {
      st.counted = 1;
      st.shape = stats_count(&mneme_kernels[idx], grid, block, shared, args,
                             &st.timed);
      if (early && mneme_kernels[idx].stats != NULL)
        mneme_kernels[idx].stats->early_launches++;
    }
    pthread_mutex_unlock(&mneme_table_lock);
  }
  int64_t token = -1;
  if (st.timed && st.shape >= 0 &&
      __atomic_load_n(&mneme_stats_timing, __ATOMIC_RELAXED))
    token = mneme_stats_begin(idx, st.shape, st.timed, stream, ptsz);
  cudaError_t e =
      mneme_deploying
          ? deploy_launch(func, grid, block, args, shared, stream, ptsz)
          : api_launch(func, grid, block, args, shared, stream, ptsz);
  if (token >= 0)
    mneme_stats_end(token, e == mneme_cudaSuccess, stream, ptsz);
  return e;
}

cudaError_t __wrap_cudaLaunchKernel(const void *func, dim3 grid, dim3 block,
                                    void **args, size_t shared,
                                    cudaStream_t stream) {
  if (__builtin_expect(!mneme_launch_hook, 1))
    return __real_cudaLaunchKernel(func, grid, block, args, shared, stream);
  if (mneme_recording)
    return record_launch(func, grid, block, args, shared, stream, 0);
  if (mneme_counting)
    return counted_launch(func, grid, block, args, shared, stream, 0);
  return deploy_launch(func, grid, block, args, shared, stream, 0);
}

cudaError_t __wrap_cudaLaunchKernel_ptsz(const void *func, dim3 grid,
                                         dim3 block, void **args, size_t shared,
                                         cudaStream_t stream) {
  if (__builtin_expect(!mneme_launch_hook, 1))
    return __real_cudaLaunchKernel_ptsz(func, grid, block, args, shared,
                                        stream);
  if (mneme_recording)
    return record_launch(func, grid, block, args, shared, stream, 1);
  if (mneme_counting)
    return counted_launch(func, grid, block, args, shared, stream, 1);
  return deploy_launch(func, grid, block, args, shared, stream, 1);
}
