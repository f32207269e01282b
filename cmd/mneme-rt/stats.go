package main

/*
#cgo CFLAGS: -O2 -Wall -I${SRCDIR}/shim
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "host.h"
#include "stats_host.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
)

// statsInterval is how often the launch statistics are written while the
// application runs, so a run that dies leaves recent counts.
const statsInterval = 2 * time.Second

// statsGateTimeout bounds how long a sampled launch's gate holds its
// stream (see struct mneme_stats_timer): far above any launch call's
// latency, short enough that a launch that waits for the GPU itself (a full
// queue behind the gate) costs the application little.
const statsGateTimeout = 20 * time.Millisecond

// statsLimits are the shim's caps, recorded with the statistics.
var statsLimits = record.StatsLimits{
	MaxShapes:    C.MNEME_STATS_MAX_SHAPES,
	MaxArgValues: C.MNEME_STATS_MAX_VALUES,
	MaxArgBytes:  C.MNEME_STATS_MAX_ARG_BYTES,
	TimedFirst:   C.MNEME_STATS_TIMED_FIRST,
	TimedEvery:   C.MNEME_STATS_TIMED_EVERY,
}

// launchStats drives the shim's launch statistics: the events it times
// launches with, the periodic writer, and the timing of the launches the
// recorder performs itself.
var launchStats struct {
	mu     sync.Mutex
	events []*cuda.Event // the shim's timer pool, while timing is on
	// launchStart and launchEnd time the recorder's own launches.
	launchStart, launchEnd *cuda.Event
	timing                 sync.Mutex // held while one of them times a launch
	stop                   chan struct{}
	done                   chan struct{}

	write     sync.Mutex // one writer at a time
	finished  bool       // the final statistics are written
	appFailed bool       // writing appStatsPath failed, and was said
}

// envLaunchStats names the file a run outside `mneme record` writes its
// launch statistics to at exit (`mneme deploy measure` sets it).
const envLaunchStats = "MNEME_LAUNCH_STATS"

// appStatsPath is that file, when the application runs with it set.
var appStatsPath string

// appStatsInit starts launch statistics in a run outside a recording: the
// shim counts every launch (it read MNEME_LAUNCH_STATS too) and times a
// sample with the events this sets up; statsFinish writes them to path.
func appStatsInit(api *C.struct_mneme_host_api, path string) {
	appStatsPath = path
	if proc == nil && api.cuda_initialized != 0 {
		p, err := newProcess()
		if err != nil {
			fmt.Fprintf(os.Stderr, "mneme: launches are counted but not timed: %v\n", err)
		} else {
			proc = p
		}
	}
	statsInit(api)
}

// statsInit hands the shim's statistics entries the host API and, when
// the process has a device, turns launch timing on and starts the
// periodic writer. Without timing the counts are still kept and written.
func statsInit(api *C.struct_mneme_host_api) {
	C.rts_set_api(api)
	if proc == nil {
		return
	}
	if err := statsTimerOn(); err != nil {
		record.Trace("runtime", "launch timing off: %v", err)
		fmt.Fprintf(os.Stderr, "mneme record: launches are counted but not timed: %v\n", err)
	}
	launchStats.stop, launchStats.done = make(chan struct{}), make(chan struct{})
	go statsLoop(launchStats.stop, launchStats.done)
}

func statsTimerOn() error {
	if err := proc.enter(); err != nil {
		return err
	}
	ep, err := cuda.EventEntries()
	if err != nil {
		return err
	}
	elapsed := C.rts_event_elapsed_entry()
	if elapsed == 0 {
		return fmt.Errorf("the CUDA driver has no cuEventElapsedTime")
	}
	hostFunc := C.rts_launch_host_func_entry()
	if hostFunc == 0 {
		return fmt.Errorf("the CUDA driver has no cuLaunchHostFunc")
	}
	n := 2 * C.MNEME_STATS_TIMER_SLOTS
	events := make([]*cuda.Event, 0, n+2)
	fail := func(err error) error {
		for _, e := range events {
			e.Destroy()
		}
		return err
	}
	for len(events) < n+2 {
		e, err := cuda.NewEvent()
		if err != nil {
			return fail(err)
		}
		events = append(events, e)
	}
	entries := [5]C.uintptr_t{C.uintptr_t(ep.EventRecord), elapsed, C.uintptr_t(ep.StreamIsCapturing), C.uintptr_t(ep.ExchangeCaptureMode), hostFunc}
	handles := make([]C.uintptr_t, n)
	for i := range handles {
		handles[i] = C.uintptr_t(events[i].Handle())
	}
	if C.rts_timer_on(&entries[0], &handles[0], C.int(n), C.uint64_t(statsGateTimeout.Nanoseconds())) == 0 {
		return fail(fmt.Errorf("the shim refused the launch timer"))
	}
	launchStats.mu.Lock()
	launchStats.events = events[:n]
	launchStats.launchStart, launchStats.launchEnd = events[n], events[n+1]
	launchStats.mu.Unlock()
	return nil
}

// statsLoop writes the statistics every statsInterval until stop closes.
func statsLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	// Collecting calls the driver, which wants the application's context
	// current on this thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := time.NewTicker(statsInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			writeStats(false)
		}
	}
}

// writeStats collects the finished timings and writes the statistics. It
// never holds launchStats.mu while the recorder's lock is taken: the
// recorder's own launches take launchStats.mu under that lock.
func writeStats(complete bool) {
	launchStats.write.Lock()
	defer launchStats.write.Unlock()
	if launchStats.finished {
		return
	}
	launchStats.mu.Lock()
	if launchStats.events != nil && proc != nil && proc.enter() == nil {
		C.rts_collect()
	}
	launchStats.mu.Unlock()
	if rec != nil {
		rec.WriteLaunchStats(readStats(), statsLimits, complete)
	} else {
		writeAppStats(readStats(), complete)
	}
	launchStats.finished = complete
}

// writeAppStats writes the statistics of a run outside a recording to
// appStatsPath (replaced whole, never seen half written); a failure is
// said once.
func writeAppStats(raw []record.RawKernelStats, complete bool) {
	s := record.BuildLaunchStats(raw, statsLimits, func(record.Kernel) string { return "" }, complete, time.Now())
	data, err := db.MarshalLaunchStats(s)
	if err == nil {
		err = db.ReplaceFile(appStatsPath, data)
	}
	if err != nil && !launchStats.appFailed {
		launchStats.appFailed = true
		fmt.Fprintf(os.Stderr, "mneme: launch statistics (%s=%s): %v\n", envLaunchStats, appStatsPath, err)
	}
}

// readStats copies every kernel's statistics out of the shim.
func readStats() []record.RawKernelStats {
	cs := (*C.struct_mneme_kernel_stats)(C.malloc(C.sizeof_struct_mneme_kernel_stats))
	defer C.free(unsafe.Pointer(cs))
	var out []record.RawKernelStats
	for i := range int(C.rth_kernel_count()) {
		var reg C.struct_mneme_kernel_reg
		if C.rts_read(C.int(i), cs) == 0 || C.rth_kernel_at(C.int(i), &reg) == 0 {
			continue
		}
		r := record.RawKernelStats{
			Kernel:        record.Kernel{Name: C.GoString(reg.device_name), Demangled: C.GoString(reg.demangled), Module: int(reg.module)},
			Launches:      uint64(cs.launches),
			OtherLaunches: uint64(cs.other_launches),
			EarlyLaunches: uint64(cs.early_launches),
			NParams:       int(cs.nparams),
		}
		for _, sh := range cs.shapes[:min(int(cs.nshapes), len(cs.shapes))] {
			r.Shapes = append(r.Shapes, record.RawShape{
				Grid:     mneme.Dim3{X: uint32(sh.grid[0]), Y: uint32(sh.grid[1]), Z: uint32(sh.grid[2])},
				Block:    mneme.Dim3{X: uint32(sh.block[0]), Y: uint32(sh.block[1]), Z: uint32(sh.block[2])},
				Shared:   uint64(sh.shared),
				Launches: uint64(sh.launches), Timed: uint64(sh.timed), TimedNs: uint64(sh.timed_ns),
				FirstNs: uint64(sh.first_ns),
			})
		}
		for _, a := range cs.args[:max(0, min(int(cs.nparams), len(cs.args)))] {
			ra := record.RawArg{Size: uint64(a.size), Tracked: a.tracked != 0, More: a.more != 0}
			for j := range min(int(a.nvalues), len(a.values)) {
				ra.Values = append(ra.Values, uint64(a.values[j]))
				ra.Counts = append(ra.Counts, uint64(a.counts[j]))
			}
			r.Args = append(r.Args, ra)
		}
		// Parameters past the shim's table are not tracked.
		for len(r.Args) < int(cs.nparams) {
			r.Args = append(r.Args, record.RawArg{})
		}
		out = append(out, r)
	}
	return out
}

// statsEnable tells the shim a kernel's parameter sizes, on its first
// launch, before the shim counts it.
func statsEnable(index int, sizes []uint64) {
	cs := make([]C.size_t, len(sizes)+1)
	for i, n := range sizes {
		cs[i] = C.size_t(n)
	}
	C.rts_enable(C.int(index), C.int(len(sizes)), &cs[0])
}

// timeLaunch runs launch, the recorder's own launch of kernel index,
// between two events on its stream, behind a gate as the shim's samples
// are (the stream is idle after the prologue's snapshot, so the first
// event would otherwise fire before the launch reaches the GPU), and adds
// its GPU time to the launch's shape. The recorder waits for the launch
// right after (for the snapshot), so waiting for the second event costs
// nothing more.
func timeLaunch(n *nativeLaunch, l *record.Launch, launch func() error) error {
	launchStats.mu.Lock()
	start, end := launchStats.launchStart, launchStats.launchEnd
	launchStats.mu.Unlock()
	if start == nil || n.index < 0 {
		return launch()
	}
	// One timed launch at a time: the pair of events and the gate are one.
	launchStats.timing.Lock()
	defer launchStats.timing.Unlock()
	s := cuda.Stream(uintptr(n.stream))
	if s == 0 && n.ptsz != 0 {
		s = cuda.Stream(2) // CU_STREAM_PER_THREAD
	}
	gate := C.rts_gate_hold(C.uintptr_t(s))
	if gate == 0 {
		return launch()
	}
	if start.Record(s) != nil {
		C.rts_gate_open(gate)
		return launch()
	}
	if err := launch(); err != nil {
		C.rts_gate_open(gate)
		return err
	}
	recorded := end.Record(s) == nil
	C.rts_gate_open(gate)
	if !recorded || end.Synchronize() != nil {
		return nil
	}
	if C.rts_gate_expired(gate) != 0 {
		record.Trace("runtime", "a recorded launch's gate gave up; its time is dropped")
		return nil
	}
	d, err := cuda.Elapsed(start, end)
	if err == nil && d >= 0 {
		C.rts_add_time(C.int(n.index), C.unsigned(l.Grid.X), C.unsigned(l.Grid.Y), C.unsigned(l.Grid.Z),
			C.unsigned(l.Block.X), C.unsigned(l.Block.Y), C.unsigned(l.Block.Z), C.size_t(l.Shared), C.uint64_t(d.Nanoseconds()))
	}
	return nil
}

// statsBeforeReset collects what was timed and turns timing off before
// the application resets the device, which destroys the events; counting
// goes on.
func statsBeforeReset() {
	launchStats.mu.Lock()
	defer launchStats.mu.Unlock()
	if launchStats.events == nil {
		return
	}
	if proc.enter() == nil && proc.Synchronize() == nil {
		C.rts_collect()
	}
	// A launch of the recorder's being timed finishes with the events
	// and the gate's entries first.
	launchStats.timing.Lock()
	defer launchStats.timing.Unlock()
	C.rts_timer_off()
	launchStats.events = nil
	launchStats.launchStart, launchStats.launchEnd = nil, nil
	record.Trace("runtime", "launch timing off before a device reset")
}

// statsFinish stops the periodic writer, waits for the sampled launches
// and writes the final statistics.
func statsFinish() {
	if launchStats.stop != nil {
		close(launchStats.stop)
		<-launchStats.done
		launchStats.stop = nil
	}
	launchStats.mu.Lock()
	timing := launchStats.events != nil
	launchStats.mu.Unlock()
	if timing && proc != nil && proc.enter() == nil {
		proc.Synchronize() // the last sampled launches finish
	}
	writeStats(true)
}
