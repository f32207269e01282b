package inject

import (
	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// Launch statistics of a recording through the driver: every kernel that
// ran, the application's and its libraries' (cuBLAS ...), recorded or not,
// with its launches per shape and GPU time, from CUPTI's kernel activity
// records, which time every launch. They go into the database's
// LaunchStats.mnemestats, which `mneme inspect` lists by time share.
// Arguments are not seen there: the statistics hold none.

// KernelActivity is one kernel execution as an activity record reports it.
type KernelActivity struct {
	Name        string // mangled
	Grid, Block mneme.Dim3
	Shared      uint32 // dynamic shared memory, bytes
	Ns          uint64 // GPU time
}

// ActivityStatsLimits are the statistics' bounds: every launch is timed,
// arguments are not tracked.
var ActivityStatsLimits = record.StatsLimits{MaxShapes: 16, MaxArgValues: 1, MaxArgBytes: 1, TimedFirst: 0, TimedEvery: 1}

// maxActivityKernels bounds the kernels counted (a library loads
// thousands, a run launches far fewer); launches of kernels beyond it are
// not counted.
const maxActivityKernels = 1 << 14

type activityShape struct {
	grid, block mneme.Dim3
	shared      uint32
}

type activityKernel struct {
	shapes []record.RawShape
	index  map[activityShape]int
	other  uint64 // launches of shapes beyond the bound
}

// KernelsRan counts kernel executions the activity records reported.
func (r *Recorder) KernelsRan(acts []KernelActivity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.activity == nil {
		r.activity = map[string]*activityKernel{}
	}
	for _, a := range acts {
		if a.Name == "" || a.Name == fingerprint.Kernel {
			continue // the recorder's own kernel is not the application's
		}
		k := r.activity[a.Name]
		if k == nil {
			if len(r.activity) >= maxActivityKernels {
				continue
			}
			k = &activityKernel{index: map[activityShape]int{}}
			r.activity[a.Name] = k
		}
		key := activityShape{a.Grid, a.Block, a.Shared}
		i, ok := k.index[key]
		if !ok {
			if len(k.shapes) >= ActivityStatsLimits.MaxShapes {
				k.other++
				continue
			}
			i = len(k.shapes)
			k.index[key] = i
			k.shapes = append(k.shapes, record.RawShape{Grid: a.Grid, Block: a.Block, Shared: uint64(a.Shared)})
		}
		sh := &k.shapes[i]
		if sh.Launches == 0 {
			sh.FirstNs = a.Ns // shown apart, as the shim's; counted among the timed too
		}
		sh.Launches++
		sh.Timed++
		sh.TimedNs += a.Ns
	}
}

// WriteLaunchStats writes the statistics counted so far into the database
// (complete: the application is exiting); a failure is reported once in
// the status. Nothing is written before a kernel ran.
func (r *Recorder) WriteLaunchStats(complete bool) {
	r.mu.Lock()
	raw := make([]record.RawKernelStats, 0, len(r.activity))
	for name, k := range r.activity {
		var n uint64
		for _, sh := range k.shapes {
			n += sh.Launches
		}
		// Module -1: the activity record names the kernel, not its module;
		// the recorder finds its file by name.
		raw = append(raw, record.RawKernelStats{Kernel: record.Kernel{Name: name, Demangled: name, Module: -1}, Launches: n + k.other,
			OtherLaunches: k.other, Shapes: append([]record.RawShape(nil), k.shapes...), NParams: -1})
	}
	r.mu.Unlock()
	if len(raw) == 0 {
		return
	}
	r.rec.WriteLaunchStats(raw, ActivityStatsLimits, complete)
}
