package tune

import (
	"slices"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// stepStats is a run's statistics of a step kernel launched at two sizes: a
// pointer that held, a counter that changed (past the values the statistics
// keep), a flag with two values and an aggregate too large to watch.
func stepStats(complete bool) *db.LaunchStats {
	s := &db.LaunchStats{FormatVersion: db.LaunchStatsVersion, Complete: complete, WrittenAt: "2026-01-02T03:04:05Z",
		Limits: db.StatsLimits{MaxShapes: 4, MaxArgValues: 2, MaxArgBytes: 8, TimedFirst: 4, TimedEvery: 64},
		Kernels: []db.KernelStats{{KernelName: "_Z4stepPfii", StaticHash: "00000000000000aa",
			Shapes: []db.ShapeStats{
				{GridDims: mneme.Dim3{X: 4, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 10},
				{GridDims: mneme.Dim3{X: 400, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 30}},
			Args: []db.ArgStats{
				{Index: 0, Size: 8, Tracked: true, Invariant: true, Distinct: 1, Values: []db.ArgValue{{Bytes: "0020000000000000", Launches: 40}}},
				{Index: 1, Size: 4, Tracked: true, Distinct: 2, MoreValues: true, Values: []db.ArgValue{{Bytes: "00000000", Launches: 1}, {Bytes: "01000000", Launches: 1}}},
				{Index: 2, Size: 4, Tracked: true, Distinct: 2, Values: []db.ArgValue{{Bytes: "00000000", Launches: 20}, {Bytes: "01000000", Launches: 20}}},
				{Index: 3, Size: 24, Tracked: false},
			}}}}
	s.Finish()
	return s
}

func TestDBStats(t *testing.T) {
	k := &db.Kernel{KernelName: "_Z4stepPfii", StaticHash: "00000000000000aa"}
	dir := t.TempDir()
	if s, err := DBStats(dir, k); s != nil || err != nil {
		t.Errorf("a database without statistics: %+v, %v; want none and no error", s, err)
	}
	if err := db.WriteLaunchStats(dir, stepStats(true)); err != nil {
		t.Fatal(err)
	}
	s, err := DBStats(dir, k)
	if err != nil || s == nil {
		t.Fatalf("%+v, %v", s, err)
	}
	launches := map[uint32]uint64{}
	for _, sh := range s.Shapes {
		launches[sh.Grid.X] = sh.Launches
	}
	if s.Launches != 40 || len(s.Shapes) != 2 || s.MoreShapes || launches[4] != 10 || launches[400] != 30 {
		t.Errorf("launches and shapes: %+v", s)
	}
	want := []ArgStats{{Arg: 0, Invariant: true, Distinct: 1}, {Arg: 1, Distinct: 2, Capped: true}, {Arg: 2, Distinct: 2}}
	if !slices.Equal(s.Args, want) {
		t.Errorf("arguments %+v, want %+v (the untracked aggregate left out)", s.Args, want)
	}
	if s, err := DBStats(dir, &db.Kernel{KernelName: "_Z5otherv", StaticHash: "00000000000000bb"}); s != nil || err != nil {
		t.Errorf("a kernel the statistics lack: %+v, %v; want none", s, err)
	}
	// A run that did not finish: its launches and shapes, none of its
	// arguments.
	if err := db.WriteLaunchStats(dir, stepStats(false)); err != nil {
		t.Fatal(err)
	}
	if s, err := DBStats(dir, k); err != nil || s == nil || s.Launches != 40 || len(s.Args) != 0 {
		t.Errorf("an unfinished run: %+v, %v", s, err)
	}
}
