package record

import (
	"strings"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

var testLimits = StatsLimits{MaxShapes: 2, MaxArgValues: 2, MaxArgBytes: 8, TimedFirst: 4, TimedEvery: 64}

func dim(x uint32) mneme.Dim3 { return mneme.Dim3{X: x, Y: 1, Z: 1} }

// stepRaw is a step kernel: a pointer that holds, a counter that overflows
// the value table, a size with two values; two shapes, the larger timed.
func stepRaw() RawKernelStats {
	return RawKernelStats{
		Kernel:   Kernel{Name: "_Z4stepPfii", Demangled: "step(float*, int, int)", Module: 0},
		Launches: 21, OtherLaunches: 1, NParams: 3,
		Shapes: []RawShape{
			{Grid: dim(4), Block: dim(256), Launches: 10, Timed: 2, TimedNs: 2000},
			{Grid: dim(400), Block: dim(256), Shared: 1024, Launches: 10, Timed: 2, TimedNs: 200000},
		},
		Args: []RawArg{
			{Size: 8, Tracked: true, Values: []uint64{0x7f0000001000}, Counts: []uint64{21}},
			{Size: 4, Tracked: true, More: true, Values: []uint64{0, 1}, Counts: []uint64{1, 1}},
			{Size: 4, Tracked: true, Values: []uint64{1024, 102400}, Counts: []uint64{11, 10}},
		},
	}
}

func TestBuildLaunchStats(t *testing.T) {
	other := RawKernelStats{Kernel: Kernel{Name: "_Z4initv", Demangled: "_Z4initv", Module: 1}, Launches: 1, NParams: -1,
		Shapes: []RawShape{{Grid: dim(1), Block: dim(32), Launches: 1}}}
	unused := RawKernelStats{Kernel: Kernel{Name: "_Z6unusedv", Module: 1}, NParams: 0}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	hash := func(k Kernel) string {
		if k.Name == "_Z4stepPfii" {
			return "00000000000000aa"
		}
		return ""
	}
	s := BuildLaunchStats([]RawKernelStats{other, stepRaw(), unused}, testLimits, hash, true, now)
	if _, err := db.MarshalLaunchStats(s); err != nil {
		t.Fatalf("the statistics do not validate: %v", err)
	}
	if !s.Complete || s.WrittenAt != "2026-01-02T03:04:05Z" || s.Limits != testLimits || s.Launches != 22 {
		t.Errorf("run: complete %v, written %q, limits %+v, launches %d", s.Complete, s.WrittenAt, s.Limits, s.Launches)
	}
	if len(s.Kernels) != 2 {
		t.Fatalf("%d kernels, want 2 (a kernel never launched is left out)", len(s.Kernels))
	}
	step, init := s.Kernels[0], s.Kernels[1]
	if step.KernelName != "_Z4stepPfii" || step.StaticHash != "00000000000000aa" || step.DemangledName != "step(float*, int, int)" {
		t.Errorf("step kernel named %q %q %q", step.KernelName, step.StaticHash, step.DemangledName)
	}
	if init.DemangledName != "" || init.StaticHash != "" || len(init.Args) != 0 || init.Launches != 1 {
		t.Errorf("init kernel: %+v (a demangled name equal to the mangled one is left out; no args learnt)", init)
	}
	if step.Shapes[0].GridDims.X != 400 || step.Shapes[0].SharedMem != 1024 || step.Shapes[0].GPUTimeNs != 1_000_000 {
		t.Errorf("largest shape %+v, want grid 400, 1 KiB shared, 1 ms", step.Shapes[0])
	}
	want := []db.ArgStats{
		{Index: 0, Size: 8, Tracked: true, Invariant: true, Distinct: 1, Values: []db.ArgValue{{Bytes: "00100000007f0000", Launches: 21}}},
		{Index: 1, Size: 4, Tracked: true, Distinct: 2, MoreValues: true, Values: []db.ArgValue{{Bytes: "00000000", Launches: 1}, {Bytes: "01000000", Launches: 1}}},
		{Index: 2, Size: 4, Tracked: true, Distinct: 2, Values: []db.ArgValue{{Bytes: "00040000", Launches: 11}, {Bytes: "00900100", Launches: 10}}},
	}
	for i, w := range want {
		if got := step.Args[i]; !sameArg(got, w) {
			t.Errorf("arg %d = %+v, want %+v", i, got, w)
		}
	}
}

func sameArg(a, b db.ArgStats) bool {
	if a.Index != b.Index || a.Size != b.Size || a.Tracked != b.Tracked || a.Invariant != b.Invariant || a.Distinct != b.Distinct || a.MoreValues != b.MoreValues || len(a.Values) != len(b.Values) {
		return false
	}
	for i := range a.Values {
		if a.Values[i] != b.Values[i] {
			return false
		}
	}
	return true
}

// TestBuildLaunchStatsRepairs: what the shim's tables hold is turned into
// a file that validates, whatever moment they were read at.
func TestBuildLaunchStatsRepairs(t *testing.T) {
	none := func(Kernel) string { return "" }
	build := func(edit func(r *RawKernelStats)) db.KernelStats {
		t.Helper()
		r := stepRaw()
		edit(&r)
		s := BuildLaunchStats([]RawKernelStats{r}, testLimits, none, false, time.Now())
		if _, err := db.MarshalLaunchStats(s); err != nil {
			t.Fatalf("the statistics do not validate: %v", err)
		}
		return s.Kernels[0]
	}
	// The library timed a launch the shim had not counted yet.
	k := build(func(r *RawKernelStats) { r.Shapes[0].Timed, r.Shapes[0].TimedNs = 11, 11000 })
	if sh := k.ShapeOf(dim(4), dim(256), 0); sh.TimedLaunches != 10 || sh.TimedNs != 10000 {
		t.Errorf("timed more than launched: %+v, want 10 timed, 10 us", sh)
	}
	// A launch the driver refused for a zero dimension counts, shapeless.
	k = build(func(r *RawKernelStats) { r.Shapes[0].Grid.Y = 0 })
	if len(k.Shapes) != 1 || k.OtherShapeLaunches != 11 || k.Launches != 21 {
		t.Errorf("zero grid: %d shapes, %d other, %d launches", len(k.Shapes), k.OtherShapeLaunches, k.Launches)
	}
	// More shapes than the limit: the rest are other launches.
	k = build(func(r *RawKernelStats) {
		r.Shapes = append(r.Shapes, RawShape{Grid: dim(8), Block: dim(256), Launches: 3})
		r.Args[0].Counts[0], r.Args[2].Counts[0] = 24, 14
	})
	if len(k.Shapes) != 2 || k.OtherShapeLaunches != 4 {
		t.Errorf("past the shape limit: %d shapes, %d other", len(k.Shapes), k.OtherShapeLaunches)
	}
	// Values that do not account for every launch are dropped, not guessed.
	k = build(func(r *RawKernelStats) { r.Args[2].Counts[1] = 9 })
	if a := k.Args[2]; a.Tracked || a.Distinct != 0 {
		t.Errorf("values short of the launches: %+v, want untracked", a)
	}
	// Parameters learnt too late, or never: no arguments.
	for _, n := range []int{-1, -2} {
		k = build(func(r *RawKernelStats) { r.NParams = n })
		if len(k.Args) != 0 {
			t.Errorf("NParams %d: %d args, want none", n, len(k.Args))
		}
	}
	// An argument too large to track, and one the shim did not track.
	k = build(func(r *RawKernelStats) { r.Args[1].Size = 16; r.Args[2].Tracked = false })
	if k.Args[1].Tracked || k.Args[2].Tracked || len(k.Args[2].Values) != 0 {
		t.Errorf("untracked: %+v %+v", k.Args[1], k.Args[2])
	}
}

func TestBuildLaunchStatsMergesAKernelOfTwoModules(t *testing.T) {
	a, b := stepRaw(), stepRaw()
	b.Kernel.Module = 1
	b.Shapes = []RawShape{{Grid: dim(4), Block: dim(256), Launches: 5, Timed: 1, TimedNs: 1000}, {Grid: dim(9), Block: dim(32), Launches: 2}}
	b.OtherLaunches = 0
	b.Launches = 7
	b.Args = []RawArg{
		{Size: 8, Tracked: true, Values: []uint64{0x7f0000001000}, Counts: []uint64{7}},
		{Size: 4, Tracked: true, Values: []uint64{5}, Counts: []uint64{7}},
		{Size: 4, Tracked: true, Values: []uint64{1024}, Counts: []uint64{7}},
	}
	s := BuildLaunchStats([]RawKernelStats{a, b}, testLimits, func(Kernel) string { return "" }, true, time.Now())
	if _, err := db.MarshalLaunchStats(s); err != nil {
		t.Fatalf("the statistics do not validate: %v", err)
	}
	if len(s.Kernels) != 1 {
		t.Fatalf("%d kernels, want the two modules' merged", len(s.Kernels))
	}
	k := s.Kernels[0]
	if k.Launches != 28 || k.OtherShapeLaunches != 3 {
		t.Errorf("merged: %d launches, %d other (want 28, 3: grid 9 does not fit)", k.Launches, k.OtherShapeLaunches)
	}
	if sh := k.ShapeOf(dim(4), dim(256), 0); sh == nil || sh.Launches != 15 || sh.TimedLaunches != 3 {
		t.Errorf("merged shape %+v", sh)
	}
	if a := k.Args[0]; !a.Invariant || a.Values[0].Launches != 28 {
		t.Errorf("pointer: %+v", a)
	}
	if a := k.Args[2]; a.Distinct != 2 || a.Values[0].Launches != 18 {
		t.Errorf("size: %+v", a)
	}
	if a := k.Args[1]; !a.MoreValues || a.Distinct != 2 {
		t.Errorf("step: %+v", a)
	}
}

// TestRecorderWritesLaunchStats: the recorder names a kernel's file in
// the statistics once an instance of it is written, and writes them into
// the database whole.
func TestRecorderWritesLaunchStats(t *testing.T) {
	f := newFixture(t, nil)
	f.setup()
	l := saxpyLaunch(2, f.x, f.y, 4)
	raw := RawKernelStats{Kernel: l.Kernel, Launches: 1, NParams: 0, Shapes: []RawShape{{Grid: l.Grid, Block: l.Block, Launches: 1}}}
	if h := f.rec.StaticHash(l.Kernel); h != "" {
		t.Errorf("static hash %q before any instance", h)
	}
	f.launch(l)
	f.rec.WriteLaunchStats([]RawKernelStats{raw}, testLimits, false)
	s, err := db.ReadLaunchStats(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	k := f.open().Kernels[0]
	if s.Complete || len(s.Kernels) != 1 || s.Kernels[0].StaticHash != k.StaticHash {
		t.Errorf("statistics %+v, want the kernel under static hash %s, not complete", s, k.StaticHash)
	}
	f.rec.WriteLaunchStats([]RawKernelStats{raw}, testLimits, true)
	if s, err = db.ReadLaunchStats(f.dir); err != nil || !s.Complete {
		t.Errorf("final statistics: %v, complete %v", err, s != nil && s.Complete)
	}
	if st := f.rec.Status(); st.StatsKernels != 1 {
		t.Errorf("status stats_kernels %d, want 1", st.StatsKernels)
	}
	// A database directory that cannot take the file: reported once.
	bad := testLimits
	bad.MaxShapes = 0
	f.rec.WriteLaunchStats([]RawKernelStats{raw}, bad, true)
	f.rec.WriteLaunchStats([]RawKernelStats{raw}, bad, true)
	if n := strings.Count(f.log.String(), "write "+db.LaunchStatsFileName); n != 1 {
		t.Errorf("the failure was reported %d times, want once:\n%s", n, f.log.String())
	}
}
