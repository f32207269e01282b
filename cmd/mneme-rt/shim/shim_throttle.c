/* The launch throttle (struct mneme_launch_throttle): while the library
 * drains a snapshot out of device memory, the launches the shim forwards
 * keep at most every * MNEME_THROTTLE_EVENTS launches queued on the GPU.
 * One lock orders the marks of all the application's threads: a thread
 * waiting for an old mark holds up the others' launches, which would wait
 * for room in the GPU's queue just the same. Events are waited for in the
 * order the launches were made, whatever their streams, so no wait can
 * depend on a launch made after it. */
#include "shim_internal.h"

int mneme_throttling;

static pthread_mutex_t throttle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mneme_launch_throttle throttle;
static unsigned long long throttled_launches;

/* CUstreamCaptureStatus and CUstreamCaptureMode values (cuda.h). */
enum { CAPTURE_STATUS_NONE = 0, CAPTURE_MODE_RELAXED = 2 };

/* The driver's per-thread default stream (CU_STREAM_PER_THREAD). */
#define THROTTLE_PER_THREAD_STREAM ((void *)0x2)

void mneme_throttle_launch(cudaStream_t stream, int ptsz) {
  pthread_mutex_lock(&throttle_lock);
  if (!mneme_throttling) {
    pthread_mutex_unlock(&throttle_lock);
    return;
  }
  unsigned long long n = throttled_launches++;
  if (n % throttle.every != 0) {
    pthread_mutex_unlock(&throttle_lock);
    return;
  }
  void *s = stream == NULL && ptsz ? THROTTLE_PER_THREAD_STREAM : stream;
  int mode = CAPTURE_MODE_RELAXED, status = CAPTURE_STATUS_NONE;
  if (throttle.exchange_capture_mode(&mode) == 0) {
    if (throttle.stream_is_capturing(s, &status) == 0 &&
        status == CAPTURE_STATUS_NONE) {
      unsigned long long mark = n / throttle.every;
      void *ev = throttle.events[mark % MNEME_THROTTLE_EVENTS];
      /* The event's previous record followed the launch
       * every * MNEME_THROTTLE_EVENTS launches ago. A failure leaves the
       * application unthrottled, never failing. */
      if (mark < MNEME_THROTTLE_EVENTS || throttle.event_synchronize(ev) == 0)
        throttle.event_record(ev, s);
    }
    throttle.exchange_capture_mode(&mode);
  }
  pthread_mutex_unlock(&throttle_lock);
}

int mneme_api_throttle(const struct mneme_launch_throttle *t) {
  if (t != NULL &&
      (t->every == 0 || t->event_record == NULL ||
       t->event_synchronize == NULL || t->stream_is_capturing == NULL ||
       t->exchange_capture_mode == NULL))
    return 0;
  pthread_mutex_lock(&throttle_lock);
  if (t != NULL) {
    throttle = *t;
    throttled_launches = 0;
  }
  __atomic_store_n(&mneme_throttling, t != NULL, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&throttle_lock);
  return 1;
}
