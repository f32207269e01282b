package tune

import (
	"errors"
	"io/fs"

	"github.com/mneme-gpu/mneme/db"
)

// DBStats is the StatsSource of a recording database: the kernel's entry of
// its launch statistics (db.LaunchStats). A database recorded before
// statistics were kept, or whose statistics lack the kernel, has none
// (nil, nil). Statistics of a run that did not finish (Complete false) give
// the launches and shapes seen, but nothing of the arguments: a value that
// held so far proves nothing of the launches that never came.
func DBStats(dbDir string, k *db.Kernel) (*KernelStats, error) {
	s, err := db.ReadLaunchStats(dbDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ks := s.Kernel(k.KernelName, k.StaticHash)
	if ks == nil {
		return nil, nil
	}
	return kernelStatsOf(ks, s.Complete), nil
}

// kernelStatsOf converts one kernel's database statistics.
func kernelStatsOf(ks *db.KernelStats, complete bool) *KernelStats {
	out := &KernelStats{Launches: ks.Launches, MoreShapes: ks.OtherShapeLaunches > 0}
	for _, s := range ks.Shapes {
		out.Shapes = append(out.Shapes, ShapeStats{Grid: s.GridDims, Block: s.BlockDims, SharedMem: s.SharedMem, Launches: s.Launches})
	}
	if !complete {
		return out
	}
	for _, a := range ks.Args {
		if !a.Tracked {
			continue // too large to watch: nothing is known of it
		}
		out.Args = append(out.Args, ArgStats{Arg: a.Index, Invariant: a.Invariant, Distinct: a.Distinct, Capped: a.MoreValues})
	}
	return out
}
