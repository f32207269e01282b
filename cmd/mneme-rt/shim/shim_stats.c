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
 * events the library is about to destroy.
 *
 * Each sampled launch is enqueued behind a gate (struct mneme_stats_timer):
 * gate_hold, a host function on the launch's stream, spins until the
 * launch's ticket is opened (after the launch and its second event are
 * enqueued, or at once when the launch failed) or its timeout passes. A
 * slot's tickets only grow and its gate is never reset, so a gate still
 * queued behind other work when its slot is reused opens as soon as it
 * runs, and a gate that gave up marks its ticket expired: that sample is
 * dropped at collection (its events bracket the host's latency too). */
#include "shim_internal.h"

#include <time.h>

int mneme_stats_timing;

enum { SLOT_FREE = 0, SLOT_BEGUN = 1, SLOT_ENDED = 2 };

struct timer_slot {
  int state;
  int kernel, shape;
  int first; /* the shape's first launch (STATS_TIMED_FIRST) */
  unsigned generation;
  uint64_t ticket; /* the gate's ticket of the launch it times */
};

static pthread_mutex_t timer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mneme_stats_timer timer;
static struct timer_slot slots[MNEME_STATS_TIMER_SLOTS];
static unsigned generation;
static int next_slot;

/* A slot's gate: the highest ticket opened and the highest that expired
 * (atomics: gate_hold runs on the driver's thread). tickets: the last
 * ticket given out per slot, under timer_lock. Never reset. */
struct gate {
  uint64_t opened;
  uint64_t expired;
};
static struct gate gates[MNEME_STATS_TIMER_SLOTS];
static uint64_t tickets[MNEME_STATS_TIMER_SLOTS];
static uint64_t gate_timeout_ns = MNEME_STATS_GATE_TIMEOUT_NS;

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
                     uint64_t ns, int first) {
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
  if (first) {
    s->shapes[shape].first_ns = ns > 0 ? ns : 1;
    return;
  }
  s->shapes[shape].timed++;
  s->shapes[shape].timed_ns += ns;
}

void mneme_api_stats_add_time(int idx, dim3 grid, dim3 block, size_t shared,
                              uint64_t ns) {
  pthread_mutex_lock(&mneme_table_lock);
  add_time(idx, -1, grid, block, shared, ns, 0);
  pthread_mutex_unlock(&mneme_table_lock);
}

int mneme_api_stats_timer(const struct mneme_stats_timer *t) {
  if (t != NULL &&
      (t->event_record == NULL || t->event_elapsed == NULL ||
       t->stream_is_capturing == NULL || t->exchange_capture_mode == NULL ||
       t->launch_host_func == NULL))
    return 0;
  pthread_mutex_lock(&timer_lock);
  generation++;
  memset(slots, 0, sizeof slots);
  if (t != NULL) {
    timer = *t;
    __atomic_store_n(&gate_timeout_ns,
                     t->gate_timeout_ns ? t->gate_timeout_ns
                                        : MNEME_STATS_GATE_TIMEOUT_NS,
                     __ATOMIC_RELAXED);
  }
  __atomic_store_n(&mneme_stats_timing, t != NULL, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&timer_lock);
  return 1;
}

/* A gate's data: its slot and ticket in one pointer-sized value. */
static void *gate_data(int slot, uint64_t ticket) {
  return (void *)(uintptr_t)(ticket * MNEME_STATS_TIMER_SLOTS + (unsigned)slot);
}

/* gate_hold is the gate's host function: it returns once its ticket is
 * opened, or marks it expired when the timeout passes first. It runs on a
 * thread of the driver, so it calls nothing of CUDA's. */
static void gate_hold(void *data) {
  uintptr_t v = (uintptr_t)data;
  int slot = (int)(v % MNEME_STATS_TIMER_SLOTS);
  uint64_t ticket = v / MNEME_STATS_TIMER_SLOTS;
  struct gate *g = &gates[slot];
  if (__atomic_load_n(&g->opened, __ATOMIC_ACQUIRE) >= ticket)
    return;
  uint64_t until =
      mneme_now_ns() + __atomic_load_n(&gate_timeout_ns, __ATOMIC_RELAXED);
  while (__atomic_load_n(&g->opened, __ATOMIC_ACQUIRE) < ticket) {
    if (mneme_now_ns() >= until) {
      uint64_t e = __atomic_load_n(&g->expired, __ATOMIC_RELAXED);
      while (e < ticket &&
             !__atomic_compare_exchange_n(&g->expired, &e, ticket, 0,
                                          __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        ;
      return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

/* gate_open lets the gate of ticket (and any older one of the slot) go. */
static void gate_open(int slot, uint64_t ticket) {
  struct gate *g = &gates[slot];
  uint64_t o = __atomic_load_n(&g->opened, __ATOMIC_RELAXED);
  while (o < ticket &&
         !__atomic_compare_exchange_n(&g->opened, &o, ticket, 0,
                                      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
    ;
}

static void *driver_stream(cudaStream_t stream, int ptsz) {
  return stream == NULL && ptsz ? STATS_PER_THREAD_STREAM : stream;
}

int mneme_stream_capturing(cudaStream_t stream, int ptsz) {
  if (!__atomic_load_n(&mneme_stats_timing, __ATOMIC_RELAXED))
    return 0;
  int capturing = 0;
  pthread_mutex_lock(&timer_lock);
  if (mneme_stats_timing) {
    int mode = STATS_CAPTURE_RELAXED, status = STATS_CAPTURE_NONE;
    if (timer.exchange_capture_mode(&mode) == 0) {
      capturing = timer.stream_is_capturing(driver_stream(stream, ptsz),
                                            &status) == 0 &&
                  status != STATS_CAPTURE_NONE;
      timer.exchange_capture_mode(&mode);
    }
  }
  pthread_mutex_unlock(&timer_lock);
  return capturing;
}

/* gated_start enqueues slot's gate (ticket) and its first event on the
 * launch's stream in relaxed capture mode, unless the stream is being
 * captured into a graph (its launches do not run now). On failure nothing
 * holds the stream. Called with timer_lock held. */
static int gated_start(int slot, uint64_t ticket, cudaStream_t stream,
                       int ptsz) {
  void *s = driver_stream(stream, ptsz);
  int mode = STATS_CAPTURE_RELAXED, status = STATS_CAPTURE_NONE, ok = 0;
  if (timer.exchange_capture_mode(&mode) != 0)
    return 0;
  if (timer.stream_is_capturing(s, &status) == 0 &&
      status == STATS_CAPTURE_NONE &&
      timer.launch_host_func(s, gate_hold, gate_data(slot, ticket)) == 0) {
    ok = timer.event_record(timer.events[2 * slot], s) == 0;
    if (!ok)
      gate_open(slot, ticket);
  }
  timer.exchange_capture_mode(&mode);
  return ok;
}

/* record_event records slot's first (which 0) or second event on the
 * launch's stream, as gated_start does without a gate. Called with
 * timer_lock held. */
static int record_event(int slot, int which, cudaStream_t stream, int ptsz) {
  void *s = driver_stream(stream, ptsz);
  int mode = STATS_CAPTURE_RELAXED, status = STATS_CAPTURE_NONE, ok = 0;
  if (timer.exchange_capture_mode(&mode) != 0)
    return 0;
  if (timer.stream_is_capturing(s, &status) == 0 &&
      status == STATS_CAPTURE_NONE)
    ok = timer.event_record(timer.events[2 * slot + which], s) == 0;
  timer.exchange_capture_mode(&mode);
  return ok;
}

int64_t mneme_stats_begin(int idx, int shape, int timed, cudaStream_t stream,
                          int ptsz) {
  pthread_mutex_lock(&timer_lock);
  int slot = -1;
  int64_t token = -1;
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
    uint64_t ticket = ++tickets[slot];
    /* A shape's first launch is timed without a gate: it may load the
     * kernel's code, which can wait for the stream the gate holds, and
     * what it costs the application, its launch included, is what a
     * kernel launched once is judged by. */
    int started = timed == STATS_TIMED_FIRST
                      ? record_event(slot, 0, stream, ptsz)
                      : gated_start(slot, ticket, stream, ptsz);
    if (started) {
      slots[slot] = (struct timer_slot){SLOT_BEGUN, idx,
                                        shape,      timed == STATS_TIMED_FIRST,
                                        generation, ticket};
      next_slot = (slot + 1) % MNEME_STATS_TIMER_SLOTS;
      token = (int64_t)(uintptr_t)gate_data(slot, ticket);
    }
  }
  pthread_mutex_unlock(&timer_lock);
  return token;
}

void mneme_stats_end(int64_t token, int ok, cudaStream_t stream, int ptsz) {
  if (token < 0)
    return;
  int slot = (int)((uint64_t)token % MNEME_STATS_TIMER_SLOTS);
  uint64_t ticket = (uint64_t)token / MNEME_STATS_TIMER_SLOTS;
  pthread_mutex_lock(&timer_lock);
  struct timer_slot *s = &slots[slot];
  if (s->state == SLOT_BEGUN && s->generation == generation &&
      s->ticket == ticket) {
    if (ok && record_event(slot, 1, stream, ptsz))
      s->state = SLOT_ENDED;
    else
      s->state = SLOT_FREE;
  }
  /* Whatever became of the launch, its stream goes on: a failed launch, a
   * failed record, or timing turned off meanwhile. */
  gate_open(slot, ticket);
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
    /* A gate that gave up let the first event fire before the launch
     * reached the GPU: the pair holds more than the kernel. */
    int expired =
        __atomic_load_n(&gates[i].expired, __ATOMIC_ACQUIRE) == s->ticket;
    if (expired)
      mneme_trace("stats: a sampled launch's gate gave up; sample dropped");
    if (r == 0 && ms >= 0 && !expired) {
      dim3 none = {0, 0, 0};
      pthread_mutex_lock(&mneme_table_lock);
      add_time(s->kernel, s->shape, none, none, 0,
               (uint64_t)((double)ms * 1e6 + 0.5), s->first);
      pthread_mutex_unlock(&mneme_table_lock);
    }
    s->state = SLOT_FREE;
  }
  pthread_mutex_unlock(&timer_lock);
  return left;
}
