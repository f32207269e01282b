package record

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// RawKernelStats are one kernel's launch statistics as the shim counted
// them (struct mneme_kernel_stats): the caller copies them out of C, and
// BuildLaunchStats turns them into the database's LaunchStats.
type RawKernelStats struct {
	Kernel        Kernel
	Launches      uint64
	OtherLaunches uint64 // of shapes beyond the shim's table
	EarlyLaunches uint64 // made while the library loaded beside the application
	Shapes        []RawShape
	// NParams is -1 when the parameters were never learnt, -2 when they
	// were learnt after launches had been counted; Args is then empty.
	NParams int
	Args    []RawArg
}

// RawShape is one launch shape of RawKernelStats.
type RawShape struct {
	Grid, Block mneme.Dim3
	Shared      uint64
	Launches    uint64
	Timed       uint64 // launches timed, the first aside
	TimedNs     uint64
	FirstNs     uint64 // the first launch's time; 0: not timed
}

// RawArg is one parameter of RawKernelStats. Values hold the argument's
// bytes little-endian in the low Size bytes.
type RawArg struct {
	Size    uint64
	Tracked bool
	More    bool
	Values  []uint64
	Counts  []uint64
}

// StatsLimits are the shim's caps (MNEME_STATS_* of mneme_shim.h), which
// the caller passes on, so the file says what it was counted under.
type StatsLimits = db.StatsLimits

// BuildLaunchStats assembles the database's launch statistics from the
// shim's counts. staticHash names a kernel's recorded file ("" when it has
// none). Kernels with the same name and static hash (one kernel registered
// by two modules and recorded by neither) are merged. Counts that a
// snapshot of the shim's tables caught mid-update are made consistent: a
// shape never has more timed launches than launches.
func BuildLaunchStats(raw []RawKernelStats, limits StatsLimits, staticHash func(Kernel) string, complete bool, now time.Time) *db.LaunchStats {
	s := &db.LaunchStats{
		FormatVersion: db.LaunchStatsVersion,
		Complete:      complete,
		WrittenAt:     now.UTC().Format(time.RFC3339Nano),
		Limits:        limits,
		Kernels:       []db.KernelStats{},
	}
	index := map[[2]string]int{}
	for _, r := range raw {
		if r.Launches == 0 {
			continue
		}
		k := kernelStats(r, limits)
		k.StaticHash = staticHash(r.Kernel)
		id := [2]string{k.KernelName, k.StaticHash}
		if i, ok := index[id]; ok {
			mergeKernelStats(&s.Kernels[i], &k, limits)
			continue
		}
		index[id] = len(s.Kernels)
		s.Kernels = append(s.Kernels, k)
	}
	s.Finish()
	return s
}

func kernelStats(r RawKernelStats, limits StatsLimits) db.KernelStats {
	k := db.KernelStats{
		KernelName:         r.Kernel.Name,
		OtherShapeLaunches: r.OtherLaunches,
		EarlyLaunches:      r.EarlyLaunches,
		Shapes:             []db.ShapeStats{},
		Args:               []db.ArgStats{},
	}
	if r.Kernel.Demangled != r.Kernel.Name {
		k.DemangledName = r.Kernel.Demangled
	}
	for _, sh := range r.Shapes {
		if sh.Launches == 0 || len(k.Shapes) == limits.MaxShapes || !validDims(sh.Grid) || !validDims(sh.Block) {
			// A launch the driver refused (a zero dimension) still counts.
			k.OtherShapeLaunches += sh.Launches
			continue
		}
		k.Shapes = append(k.Shapes, db.ShapeStats{
			GridDims: sh.Grid, BlockDims: sh.Block, SharedMem: uint32(min(sh.Shared, 1<<32-1)),
			Launches: sh.Launches, TimedLaunches: min(sh.Timed, sh.Launches), TimedNs: sh.TimedNs,
			FirstLaunchNs: sh.FirstNs,
		})
		if sh.Timed > sh.Launches {
			// Caught between the library's timing of a launch and its count.
			k.Shapes[len(k.Shapes)-1].TimedNs = sh.TimedNs / sh.Timed * sh.Launches
		}
	}
	if r.NParams >= 0 {
		for i, a := range r.Args {
			k.Args = append(k.Args, argStats(i, a, limits))
		}
		// Values counted in the tables may trail the launches by the one
		// being counted when the tables were read: keep the file's rule
		// that listed values account for every launch, or say more came.
		launches := k.OtherShapeLaunches
		for _, sh := range k.Shapes {
			launches += sh.Launches
		}
		for i := range k.Args {
			a := &k.Args[i]
			var sum uint64
			for _, v := range a.Values {
				sum += v.Launches
			}
			if a.Tracked && !a.MoreValues && sum != launches {
				*a = db.ArgStats{Index: a.Index, Size: a.Size}
			}
		}
	}
	return k
}

func validDims(d mneme.Dim3) bool { return d.X > 0 && d.Y > 0 && d.Z > 0 }

func argStats(i int, a RawArg, limits StatsLimits) db.ArgStats {
	out := db.ArgStats{Index: i, Size: a.Size, Values: []db.ArgValue{}}
	if !a.Tracked || a.Size > uint64(limits.MaxArgBytes) || a.Size > 8 || len(a.Values) != len(a.Counts) || len(a.Values) > limits.MaxArgValues {
		return out
	}
	out.Tracked = true
	out.MoreValues = a.More && len(a.Values) == limits.MaxArgValues
	for j, v := range a.Values {
		if a.Counts[j] == 0 {
			continue
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		out.Values = append(out.Values, db.ArgValue{Bytes: hex.EncodeToString(b[:a.Size]), Launches: a.Counts[j]})
	}
	out.Distinct = len(out.Values)
	if out.MoreValues && out.Distinct != limits.MaxArgValues {
		out.MoreValues = false // a value's count was lost: say nothing
		return db.ArgStats{Index: i, Size: a.Size}
	}
	out.Invariant = out.Distinct == 1 && !out.MoreValues
	return out
}

// mergeKernelStats adds b's counts to a: shapes by shape (those that do not
// fit go to OtherShapeLaunches), arguments by value when both kernels have
// the same parameters, else untracked.
func mergeKernelStats(a, b *db.KernelStats, limits StatsLimits) {
	a.OtherShapeLaunches += b.OtherShapeLaunches
	a.EarlyLaunches += b.EarlyLaunches
	for _, sh := range b.Shapes {
		if have := a.ShapeOf(sh.GridDims, sh.BlockDims, sh.SharedMem); have != nil {
			have.Launches += sh.Launches
			have.TimedLaunches += sh.TimedLaunches
			have.TimedNs += sh.TimedNs
			if have.FirstLaunchNs == 0 {
				have.FirstLaunchNs = sh.FirstLaunchNs
			}
		} else if len(a.Shapes) < limits.MaxShapes {
			a.Shapes = append(a.Shapes, sh)
		} else {
			a.OtherShapeLaunches += sh.Launches
		}
	}
	same := len(a.Args) == len(b.Args)
	for i := 0; same && i < len(a.Args); i++ {
		same = a.Args[i].Size == b.Args[i].Size
	}
	if !same {
		a.Args = []db.ArgStats{}
		return
	}
	for i := range a.Args {
		x, y := &a.Args[i], &b.Args[i]
		if !x.Tracked || !y.Tracked {
			*x = db.ArgStats{Index: i, Size: x.Size, Values: []db.ArgValue{}}
			continue
		}
		if x.MoreValues {
			continue
		}
		more := y.MoreValues
	values:
		for _, v := range y.Values {
			for j := range x.Values {
				if x.Values[j].Bytes == v.Bytes {
					x.Values[j].Launches += v.Launches
					continue values
				}
			}
			if len(x.Values) == limits.MaxArgValues {
				more = true
				continue
			}
			x.Values = append(x.Values, v)
		}
		x.Distinct = len(x.Values)
		x.MoreValues = more && x.Distinct == limits.MaxArgValues
		if more && !x.MoreValues {
			*x = db.ArgStats{Index: i, Size: x.Size, Values: []db.ArgValue{}}
			continue
		}
		x.Invariant = x.Distinct == 1 && !x.MoreValues
	}
}

// StaticHash is the static hash of the kernel's file in the database, or
// "" when none of its instances has been written. A kernel of no known
// module (Module < 0: named by the driver's activity records) is found by
// its name, "" when recorded kernels of two modules share it.
func (r *Recorder) StaticHash(k Kernel) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k.Module < 0 {
		hash := ""
		for key, ks := range r.kernels {
			if key.name != k.Name || ks.meta == nil || ks.recorded == 0 {
				continue
			}
			if hash != "" && hash != ks.meta.StaticHash {
				return ""
			}
			hash = ks.meta.StaticHash
		}
		return hash
	}
	ks := r.kernels[kernelKey{k.Name, k.Module}]
	if ks == nil || ks.meta == nil || ks.recorded == 0 {
		return ""
	}
	return ks.meta.StaticHash
}

// WriteLaunchStats writes the run's launch statistics into the database
// (complete: the application has finished). A failure is reported once,
// like any recording error, and the recording goes on.
func (r *Recorder) WriteLaunchStats(raw []RawKernelStats, limits StatsLimits, complete bool) {
	s := BuildLaunchStats(raw, limits, r.StaticHash, complete, time.Now())
	err := db.WriteLaunchStats(r.cfg.DB, s)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil && !r.statsFailed {
		r.statsFailed = true
		r.reportError(fmt.Sprintf("write %s: %v", db.LaunchStatsFileName, err))
	}
	r.status.StatsKernels = len(s.Kernels)
	if complete {
		r.writeStatus()
	}
}
