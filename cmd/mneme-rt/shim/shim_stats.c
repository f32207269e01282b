/* Launch statistics (see MNEME_STATS_* in mneme_shim.h): the tables the
 * launch path counts into (inline in shim_internal.h), the timing of a
 * sample of launches with the library's events, and the host API calls
 * that enable, read and collect them.
 *
 * Timing uses a pool of MNEME_STATS_TIMER_SLOTS event pairs under a lock of
 * its own, taken only by sampled launches and by the library's collection:
 * a slot is free, begun (its first event recorded, the launch under way) or
 * ended (both recorded, waiting to be collected). Turning timing off bumps
 * a generation, so a launch that began before it records nothing more on
 * events the library is about to destroy. */
#include "shim_internal.h"

int mneme_stats_timing;

enum { SLOT_FREE = 0, SLOT_BEGUN = 1, SLOT_ENDED = 2 };

struct timer_slot {
  int state;
  int kernel, shape;
  unsigned generation;
};

static pthread_mutex_t timer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mneme_stats_timer timer;
static struct timer_slot slots[MNEME_STATS_TIMER_SLOTS];
static unsigned generation;
static int next_slot;

/* CUstreamCaptureStatus and CUstreamCaptureMode values, and
 * CUDA_ERROR_NOT_READY (cuda.h). */
enum {
  STATS_CAPTURE_NONE = 0,
  STATS_CAPTURE_RELAXED = 2,
  STATS_NOT_READY = 600
};

/* The driver's per-thread default stream (CU_STREAM_PER_THREAD). */
#define STATS_PER_THREAD_STREAM ((void *)0x2)

struct mneme_kernel_stats *mneme_stats_new(int nparams, const size_t *sizes) {
  struct mneme_kernel_stats *s = calloc(1, sizeof *s);
  if (s == NULL)
    return NULL;
  s->nparams = nparams;
  for (int i = 0; i < nparams && i < MNEME_STATS_MAX_ARGS; i++) {
    s->args[i].size = (unsigned)sizes[i];
    s->args[i].tracked = sizes[i] <= MNEME_STATS_MAX_ARG_BYTES;
  }
  return s;
}

int mneme_api_stats_enable(int idx, int nparams, const size_t *sizes) {
  if (nparams < 0 || (nparams > 0 && sizes == NULL))
    return 0;
  struct mneme_kernel_stats *fresh = mneme_stats_new(nparams, sizes);
  if (fresh == NULL)
    return 0;
  pthread_mutex_lock(&mneme_table_lock);
  int ok = idx >= 0 && idx < mneme_n_kernels;
  if (ok) {
    struct kernel_entry *k = &mneme_kernels[idx];
    if (k->stats == NULL) {
      k->stats = fresh;
      fresh = NULL;
    } else if (k->stats->nparams == -1) {
      /* Launches were counted before the parameters were known: the
       * values would not cover them. */
      k->stats->nparams = k->stats->launches > 0 ? -2 : nparams;
      if (k->stats->launches == 0)
        memcpy(k->stats->args, fresh->args, sizeof fresh->args);
    }
  }
  pthread_mutex_unlock(&mneme_table_lock);
  free(fresh);
  return ok;
}

int mneme_api_stats_read(int idx, struct mneme_kernel_stats *out) {
  pthread_mutex_lock(&mneme_table_lock);
  int ok = idx >= 0 && idx < mneme_n_kernels && mneme_kernels[idx].stats;
  if (ok)
    *out = *mneme_kernels[idx].stats;
  pthread_mutex_unlock(&mneme_table_lock);
  return ok;
}

/* add_time adds one timed launch to shape (or, with shape -1, to the shape
 * of grid, block and shared, added to the table if need be). Called with
 * mneme_table_lock held. */
static void add_time(int idx, int shape, dim3 grid, dim3 block, uint64_t shared,
                     uint64_t ns) {
  if (idx < 0 || idx >= mneme_n_kernels)
    return;
  struct kernel_entry *k = &mneme_kernels[idx];
  if (k->stats == NULL && (k->stats = mneme_stats_new(-1, NULL)) == NULL)
    return;
  struct mneme_kernel_stats *s = k->stats;
  if (shape < 0) {
    int last = s->last_shape;
    shape = stats_shape(s, grid, block, shared);
    s->last_shape = last; /* the launch path's guess stays its own */
  }
  if (shape < 0 || shape >= s->nshapes)
    return;
  s->shapes[shape].timed++;
  s->shapes[shape].timed_ns += ns;
}

void mneme_api_stats_add_time(int idx, dim3 grid, dim3 block, size_t shared,
                              uint64_t ns) {
  pthread_mutex_lock(&mneme_table_lock);
  add_time(idx, -1, grid, block, shared, ns);
  pthread_mutex_unlock(&mneme_table_lock);
}

int mneme_api_stats_timer(const struct mneme_stats_timer *t) {
  if (t != NULL &&
      (t->event_record == NULL || t->event_elapsed == NULL ||
       t->stream_is_capturing == NULL || t->exchange_capture_mode == NULL))
    return 0;
  pthread_mutex_lock(&timer_lock);
  generation++;
  memset(slots, 0, sizeof slots);
  if (t != NULL)
    timer = *t;
  __atomic_store_n(&mneme_stats_timing, t != NULL, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&timer_lock);
  return 1;
}

/* record_on records event on the launch's stream in relaxed capture mode,
 * unless the stream is being captured into a graph (its launches do not
 * run now). Called with timer_lock held. */
static int record_on(void *event, cudaStream_t stream, int ptsz) {
  void *s = stream == NULL && ptsz ? STATS_PER_THREAD_STREAM : stream;
  int mode = STATS_CAPTURE_RELAXED, status = STATS_CAPTURE_NONE, ok = 0;
  if (timer.exchange_capture_mode(&mode) != 0)
    return 0;
  if (timer.stream_is_capturing(s, &status) == 0 &&
      status == STATS_CAPTURE_NONE)
    ok = timer.event_record(event, s) == 0;
  timer.exchange_capture_mode(&mode);
  return ok;
}

int mneme_stats_begin(int idx, int shape, cudaStream_t stream, int ptsz) {
  pthread_mutex_lock(&timer_lock);
  int slot = -1;
  if (mneme_stats_timing) {
    for (int n = 0; n < MNEME_STATS_TIMER_SLOTS; n++) {
      int i = (next_slot + n) % MNEME_STATS_TIMER_SLOTS;
      if (slots[i].state == SLOT_FREE) {
        slot = i;
        break;
      }
    }
  }
  if (slot >= 0) {
    if (record_on(timer.events[2 * slot], stream, ptsz)) {
      slots[slot] = (struct timer_slot){SLOT_BEGUN, idx, shape, generation};
      next_slot = (slot + 1) % MNEME_STATS_TIMER_SLOTS;
    } else {
      slot = -1;
    }
  }
  pthread_mutex_unlock(&timer_lock);
  return slot;
}

void mneme_stats_end(int slot, int ok, cudaStream_t stream, int ptsz) {
  if (slot < 0 || slot >= MNEME_STATS_TIMER_SLOTS)
    return;
  pthread_mutex_lock(&timer_lock);
  struct timer_slot *s = &slots[slot];
  if (s->state == SLOT_BEGUN && s->generation == generation) {
    if (ok && record_on(timer.events[2 * slot + 1], stream, ptsz))
      s->state = SLOT_ENDED;
    else
      s->state = SLOT_FREE;
  }
  pthread_mutex_unlock(&timer_lock);
}

int mneme_api_stats_collect(void) {
  int left = 0;
  pthread_mutex_lock(&timer_lock);
  for (int i = 0; mneme_stats_timing && i < MNEME_STATS_TIMER_SLOTS; i++) {
    struct timer_slot *s = &slots[i];
    if (s->state == SLOT_BEGUN)
      left++;
    if (s->state != SLOT_ENDED)
      continue;
    float ms = 0;
    int r =
        timer.event_elapsed(&ms, timer.events[2 * i], timer.events[2 * i + 1]);
    if (r == STATS_NOT_READY) {
      left++;
      continue;
    }
    if (r == 0 && ms >= 0) {
      dim3 none = {0, 0, 0};
      pthread_mutex_lock(&mneme_table_lock);
      add_time(s->kernel, s->shape, none, none, 0,
               (uint64_t)((double)ms * 1e6 + 0.5));
      pthread_mutex_unlock(&mneme_table_lock);
    }
    s->state = SLOT_FREE;
  }
  pthread_mutex_unlock(&timer_lock);
  return left;
}
