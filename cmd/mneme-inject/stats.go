package main

import "C"

import (
	"sync"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/inject"
)

// Launch statistics of a recording through the driver: CUPTI's kernel
// activity records (cuda.KernelTimer) time every kernel that runs, the
// libraries' too; they are drained every statsEvery and at exit into the
// recorder (inject.Recorder.KernelsRan), which writes the database's
// statistics file each time.

const statsEvery = 2 * time.Second

var stats struct {
	once  sync.Once
	timer *cuda.KernelTimer
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex // one drain at a time
}

// miTimingStart starts timing at the application's first launch (inside
// its driver call: the driver is initialized by then).
//
//export miTimingStart
func miTimingStart() {
	if rec == nil {
		return
	}
	stats.once.Do(func() {
		t, err := cuda.NewKernelTimer()
		if err != nil {
			record.Trace("inject", "launch statistics: %v", err)
			return
		}
		stats.timer, stats.stop, stats.done = t, make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stats.done)
			tick := time.NewTicker(statsEvery)
			defer tick.Stop()
			for {
				select {
				case <-stats.stop:
					return
				case <-tick.C:
					drainStats(false)
				}
			}
		}()
	})
}

// drainStats hands the records delivered so far to the recorder and writes
// the statistics.
func drainStats(complete bool) {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	recs, err := stats.timer.Flush()
	if err != nil {
		record.Trace("inject", "launch statistics: %v", err)
	}
	acts := make([]inject.KernelActivity, 0, len(recs))
	for _, r := range recs {
		acts = append(acts, inject.KernelActivity{Name: r.Name, Ns: r.Duration(), Shared: r.DynamicShared,
			Grid:  mneme.Dim3{X: r.Grid[0], Y: r.Grid[1], Z: r.Grid[2]},
			Block: mneme.Dim3{X: r.Block[0], Y: r.Block[1], Z: r.Block[2]}})
	}
	rec.KernelsRan(acts)
	rec.WriteLaunchStats(complete)
}

// finishStats drains the last records as the application exits.
func finishStats() {
	if stats.timer == nil {
		return
	}
	close(stats.stop)
	<-stats.done
	drainStats(true)
}
