/* Calls from Go into the shim's launch statistics (struct mneme_host_api's
 * stats_* entries), and the driver entry that times their samples. */
#ifndef MNEME_LIBRT_STATS_HOST_H
#define MNEME_LIBRT_STATS_HOST_H
#include "mneme_shim.h"

void rts_set_api(const struct mneme_host_api *a);
int rts_enable(int kernel_index, int nparams, const size_t *sizes);
/* rts_timer_on turns launch timing on with the driver's cuEventRecord,
 * cuEventElapsedTime, cuStreamIsCapturing,
 * cuThreadExchangeStreamCaptureMode and cuLaunchHostFunc (entries),
 * 2 * MNEME_STATS_TIMER_SLOTS events and the sampled launches' gate
 * timeout; 0 when the shim refuses them. */
int rts_timer_on(const uintptr_t entries[5], const uintptr_t *events, int n,
                 uint64_t gate_timeout_ns);
void rts_timer_off(void);
int rts_collect(void);
int rts_read(int kernel_index, struct mneme_kernel_stats *out);
void rts_add_time(int kernel_index, unsigned gx, unsigned gy, unsigned gz,
                  unsigned bx, unsigned by, unsigned bz, size_t shared,
                  uint64_t ns);
/* rts_event_elapsed_entry is the driver's cuEventElapsedTime (the _v2
 * entry where the driver has one), or 0. */
uintptr_t rts_event_elapsed_entry(void);
/* rts_gate_hold enqueues a gate on stream (a driver stream handle) for
 * one of the recorder's own timed launches, as the shim does for its
 * samples, with the entries and timeout rts_timer_on was given; it returns
 * the gate's ticket, or 0 (timing off, the stream being captured, the
 * driver refused). rts_gate_open lets it go; rts_gate_expired says whether
 * it gave up first (the sample then holds the host's latency). */
uint64_t rts_gate_hold(uintptr_t stream);
void rts_gate_open(uint64_t ticket);
int rts_gate_expired(uint64_t ticket);
/* rts_launch_host_func_entry is the driver's cuLaunchHostFunc, or 0. */
uintptr_t rts_launch_host_func_entry(void);
#endif
