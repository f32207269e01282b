package db

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// sampleStats is a run of two kernels: a step kernel whose counter changes
// every launch, at two sizes, and a one-shape kernel never timed.
func sampleStats() *LaunchStats {
	s := &LaunchStats{
		FormatVersion: LaunchStatsVersion,
		Complete:      true,
		WrittenAt:     "2026-01-02T03:04:05Z",
		Limits:        StatsLimits{MaxShapes: 4, MaxArgValues: 2, MaxArgBytes: 8, TimedFirst: 4, TimedEvery: 64},
		Kernels: []KernelStats{
			{
				KernelName: "_Z4initPf", StaticHash: "00000000000000aa",
				Shapes: []ShapeStats{{GridDims: mneme.Dim3{X: 1, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 32, Y: 1, Z: 1}, Launches: 2}},
				Args: []ArgStats{
					{Index: 0, Size: 8, Tracked: true, Invariant: true, Distinct: 1, Values: []ArgValue{{Bytes: "0010000000000000", Launches: 2}}},
				},
			},
			{
				KernelName: "_Z4stepPfii", DemangledName: "step(float*, int, int)",
				Shapes: []ShapeStats{
					{GridDims: mneme.Dim3{X: 4, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 10, TimedLaunches: 5, TimedNs: 5000},
					{GridDims: mneme.Dim3{X: 400, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 256, Y: 1, Z: 1}, SharedMem: 1024, Launches: 10, TimedLaunches: 2, TimedNs: 200000},
				},
				OtherShapeLaunches: 1,
				Args: []ArgStats{
					{Index: 0, Size: 8, Tracked: true, Invariant: true, Distinct: 1, Values: []ArgValue{{Bytes: "0020000000000000", Launches: 21}}},
					{Index: 1, Size: 4, Tracked: true, Distinct: 2, MoreValues: true, Values: []ArgValue{{Bytes: "00000000", Launches: 1}, {Bytes: "01000000", Launches: 1}}},
					{Index: 2, Size: 4, Tracked: true, Distinct: 2, Values: []ArgValue{{Bytes: "00100000", Launches: 11}, {Bytes: "00a00f00", Launches: 10}}},
				},
			},
		},
	}
	s.Finish()
	return s
}

func TestLaunchStatsFinishEstimatesTimeAndShares(t *testing.T) {
	s := sampleStats()
	if s.Launches != 23 {
		t.Errorf("Launches = %d, want 23", s.Launches)
	}
	step := s.Kernel("_Z4stepPfii", "")
	if step == nil || &s.Kernels[0] != step {
		t.Fatalf("the step kernel should come first (it has all the time): %+v", s.Kernels)
	}
	// Shapes: 10 x 1000 ns and 10 x 100000 ns; the one launch of an
	// untracked shape counts at the kernel's mean (205000/7 ns).
	big, small := step.Shapes[0], step.Shapes[1]
	if big.GridDims.X != 400 || big.GPUTimeNs != 1_000_000 || small.GPUTimeNs != 10_000 {
		t.Errorf("shapes = %+v, want the 400-block shape (1 ms) first, then 10 us", step.Shapes)
	}
	if want := uint64(1_010_000 + 29_286); step.GPUTimeNs != want {
		t.Errorf("kernel GPUTimeNs = %d, want %d", step.GPUTimeNs, want)
	}
	if step.TimedLaunches != 7 || step.TimedNs != 205000 || step.Launches != 21 {
		t.Errorf("kernel sums = %d timed, %d ns, %d launches", step.TimedLaunches, step.TimedNs, step.Launches)
	}
	if got := big.KernelShare + small.KernelShare; got >= 1 || got < 0.97 {
		t.Errorf("shape shares sum to %v: the untracked launch holds the rest", got)
	}
	init := s.Kernel("_Z4initPf", "00000000000000aa")
	if init == nil || init.GPUTimeNs != 0 || init.TimeShare != 0 || step.TimeShare != 1 {
		t.Errorf("an untimed kernel has no time: init %+v, step share %v", init, step.TimeShare)
	}
	if s.GPUTimeNs != step.GPUTimeNs {
		t.Errorf("run GPUTimeNs = %d, want the step kernel's %d", s.GPUTimeNs, step.GPUTimeNs)
	}
}

func TestLaunchStatsKernelLookup(t *testing.T) {
	s := sampleStats()
	s.Kernels = append(s.Kernels, KernelStats{KernelName: "_Z4initPf", StaticHash: "00000000000000bb"})
	if k := s.Kernel("_Z4initPf", "00000000000000bb"); k == nil || k.StaticHash != "00000000000000bb" {
		t.Errorf("by hash: %+v", k)
	}
	if k := s.Kernel("_Z4initPf", "00000000000000aa"); k == nil || k.StaticHash != "00000000000000aa" {
		t.Errorf("by the other hash: %+v", k)
	}
	if k := s.Kernel("_Z4initPf", "00000000000000cc"); k != nil {
		t.Errorf("a hash that no entry has found %+v", k)
	}
	if k := s.Kernel("_Z4stepPfii", "00000000000000cc"); k == nil {
		t.Error("a kernel recorded without a hash is found by name")
	}
	if k := s.Kernel("_Z4nonePf", ""); k != nil {
		t.Errorf("an unknown name found %+v", k)
	}
	step := s.Kernel("_Z4stepPfii", "")
	if sh := step.ShapeOf(mneme.Dim3{X: 400, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 1024); sh == nil || sh.Launches != 10 {
		t.Errorf("ShapeOf the large shape: %+v", sh)
	}
	if sh := step.ShapeOf(mneme.Dim3{X: 400, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0); sh != nil {
		t.Errorf("ShapeOf with other shared memory found %+v", sh)
	}
}

func TestLaunchStatsForRecordedKernelAndInstance(t *testing.T) {
	s := sampleStats()
	k := &Kernel{KernelName: "_Z4initPf", StaticHash: "00000000000000aa"}
	ks := s.ForKernel(k)
	if ks == nil || ks.KernelName != "_Z4initPf" {
		t.Fatalf("ForKernel: %+v", ks)
	}
	if s.ForKernel(&Kernel{KernelName: "_Z4initPf", StaticHash: "00000000000000bb"}) != nil {
		t.Error("ForKernel found a kernel of another static hash")
	}
	inst := &Instance{GridDims: mneme.Dim3{X: 1, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 32, Y: 1, Z: 1}}
	if sh := ks.ForInstance(inst); sh == nil || sh.Launches != 2 {
		t.Errorf("ForInstance: %+v", sh)
	}
	inst.SharedMem = 16
	if sh := ks.ForInstance(inst); sh != nil {
		t.Errorf("ForInstance with other shared memory: %+v", sh)
	}
}

func TestLaunchStatsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := sampleStats()
	if err := WriteLaunchStats(dir, s); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLaunchStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(s)
	b, _ := json.Marshal(got)
	if !bytes.Equal(a, b) {
		t.Fatalf("round trip changed the stats:\n%s\n%s", a, b)
	}
	// The file is no kernel file: Open of a database beside it ignores it.
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "no kernel files") {
		t.Errorf("Open of a directory with only statistics: %v", err)
	}
}

func TestReadLaunchStatsMissing(t *testing.T) {
	_, err := ReadLaunchStats(t.TempDir())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want one wrapping fs.ErrNotExist", err)
	}
}

// TestLaunchStatsRejects changes one field at a time of a valid file and
// expects an error naming it.
func TestLaunchStatsRejects(t *testing.T) {
	cases := []struct {
		name, want string
		edit       func(s *LaunchStats)
	}{
		{"version", "FormatVersion", func(s *LaunchStats) { s.FormatVersion = 2 }},
		{"time", "WrittenAt", func(s *LaunchStats) { s.WrittenAt = "yesterday" }},
		{"limit shapes", "Limits.MaxShapes", func(s *LaunchStats) { s.Limits.MaxShapes = 0 }},
		{"limit values", "Limits.MaxArgValues", func(s *LaunchStats) { s.Limits.MaxArgValues = 0 }},
		{"limit bytes", "Limits.MaxArgBytes", func(s *LaunchStats) { s.Limits.MaxArgBytes = 0 }},
		{"limit every", "Limits.TimedEvery", func(s *LaunchStats) { s.Limits.TimedEvery = 0 }},
		{"limit first", "Limits.TimedFirst", func(s *LaunchStats) { s.Limits.TimedFirst = -1 }},
		{"run launches", "Launches", func(s *LaunchStats) { s.Launches++ }},
		{"run time", "GPUTimeNs", func(s *LaunchStats) { s.GPUTimeNs++ }},
		{"name", "Kernels[1].KernelName", func(s *LaunchStats) { s.Kernels[1].KernelName = "" }},
		{"hash", "Kernels[1].StaticHash", func(s *LaunchStats) { s.Kernels[1].StaticHash = "../x" }},
		{"twice", "Kernels[1].KernelName", func(s *LaunchStats) {
			s.Kernels[1].KernelName, s.Kernels[1].StaticHash = s.Kernels[0].KernelName, s.Kernels[0].StaticHash
		}},
		{"too many shapes", "Kernels[0].Shapes", func(s *LaunchStats) { s.Limits.MaxShapes = 1 }},
		{"share", "Kernels[0].TimeShare", func(s *LaunchStats) { s.Kernels[0].TimeShare = 1.5 }},
		{"grid", "Kernels[0].Shapes[1].GridDims", func(s *LaunchStats) { s.Kernels[0].Shapes[1].GridDims.Y = 0 }},
		{"block", "Kernels[0].Shapes[0].BlockDims", func(s *LaunchStats) { s.Kernels[0].Shapes[0].BlockDims.Z = 0 }},
		{"same shape", "Kernels[0].Shapes[1]", func(s *LaunchStats) {
			s.Kernels[0].Shapes[1].GridDims, s.Kernels[0].Shapes[1].SharedMem = s.Kernels[0].Shapes[0].GridDims, s.Kernels[0].Shapes[0].SharedMem
		}},
		{"shape launches", "Kernels[1].Shapes[0].Launches", func(s *LaunchStats) {
			s.Kernels[1].Shapes[0].Launches, s.Kernels[1].OtherShapeLaunches = 0, 2
		}},
		{"timed", "Kernels[0].Shapes[1].TimedLaunches", func(s *LaunchStats) { s.Kernels[0].Shapes[1].TimedLaunches = 11 }},
		{"shape share", "Kernels[0].Shapes[0].KernelShare", func(s *LaunchStats) { s.Kernels[0].Shapes[0].KernelShare = -0.1 }},
		{"kernel launches", "Kernels[0].Launches", func(s *LaunchStats) { s.Kernels[0].OtherShapeLaunches++ }},
		{"kernel timed", "Kernels[0].TimedLaunches", func(s *LaunchStats) { s.Kernels[0].TimedLaunches++ }},
		{"kernel timed ns", "Kernels[0].TimedNs", func(s *LaunchStats) { s.Kernels[0].TimedNs++ }},
		{"early launches", "Kernels[0].EarlyLaunches", func(s *LaunchStats) { s.Kernels[0].EarlyLaunches = s.Kernels[0].Launches + 1 }},
		{"arg index", "Kernels[0].Args[1].Index", func(s *LaunchStats) { s.Kernels[0].Args[1].Index = 2 }},
		{"arg size", "Kernels[0].Args[1].Size", func(s *LaunchStats) { s.Kernels[0].Args[1].Size = 1 << 17 }},
		{"untracked with values", "Kernels[0].Args[2].Tracked", func(s *LaunchStats) { s.Kernels[0].Args[2].Tracked = false }},
		{"tracked too large", "Kernels[0].Args[0].Size", func(s *LaunchStats) { s.Limits.MaxArgBytes = 4 }},
		{"distinct", "Kernels[0].Args[2].Distinct", func(s *LaunchStats) { s.Kernels[0].Args[2].Distinct = 1 }},
		{"distinct cap", "Kernels[0].Args[2].Distinct", func(s *LaunchStats) {
			a := &s.Kernels[0].Args[2]
			a.Distinct = 3
			a.Values = append(a.Values, ArgValue{Bytes: "00000000", Launches: 1})
			a.Values[0].Launches--
		}},
		{"more before the cap", "Kernels[0].Args[1].MoreValues", func(s *LaunchStats) { s.Limits.MaxArgValues = 3 }},
		{"invariant", "Kernels[0].Args[2].Invariant", func(s *LaunchStats) { s.Kernels[0].Args[2].Invariant = true }},
		{"not invariant", "Kernels[0].Args[0].Invariant", func(s *LaunchStats) { s.Kernels[0].Args[0].Invariant = false }},
		{"hex", "Kernels[0].Args[2].Values[1].Bytes", func(s *LaunchStats) { s.Kernels[0].Args[2].Values[1].Bytes = "zz" }},
		{"value size", "Kernels[0].Args[2].Values[1].Bytes", func(s *LaunchStats) { s.Kernels[0].Args[2].Values[1].Bytes = "00" }},
		{"same value", "Kernels[0].Args[2].Values[1].Bytes", func(s *LaunchStats) {
			s.Kernels[0].Args[2].Values[1].Bytes = s.Kernels[0].Args[2].Values[0].Bytes
		}},
		{"value launches", "Kernels[0].Args[1].Values[0].Launches", func(s *LaunchStats) { s.Kernels[0].Args[1].Values[0].Launches = 0 }},
		{"values sum", "Kernels[0].Args[2].Values", func(s *LaunchStats) { s.Kernels[0].Args[2].Values[0].Launches++ }},
		{"values sum beyond", "Kernels[0].Args[1].Values", func(s *LaunchStats) { s.Kernels[0].Args[1].Values[0].Launches = 21 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := sampleStats()
			if err := s.Validate(); err != nil {
				t.Fatalf("the sample itself: %v", err)
			}
			c.edit(s)
			_, err := MarshalLaunchStats(s)
			if err == nil || !strings.Contains(err.Error(), c.want+":") {
				t.Fatalf("err = %v, want one naming %s", err, c.want)
			}
			// The reader names it the same way, with the file.
			data, _ := json.Marshal(s)
			_, err = ParseLaunchStats("s.mnemestats", data)
			if err == nil || !strings.HasPrefix(err.Error(), "s.mnemestats: "+c.want+":") {
				t.Fatalf("read: err = %v, want one naming the file and %s", err, c.want)
			}
		})
	}
}

func TestParseLaunchStatsSyntax(t *testing.T) {
	good, err := MarshalLaunchStats(sampleStats())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, data, want string
	}{
		{"null", `null`, "not a JSON object"},
		{"missing", strings.Replace(string(good), `"Kernels"`, `"Kernel"`, 1), "Kernels: missing"},
		{"null key", strings.Replace(string(good), `"Complete": true`, `"Complete": null`, 1), "Complete: null"},
		{"twice", strings.Replace(string(good), `"Complete": true`, `"Complete": true, "Complete": false`, 1), "Complete: the key appears twice"},
		{"type", strings.Replace(string(good), `"Launches": 23`, `"Launches": "23"`, 1), "Launches: JSON string"},
		{"syntax", string(good[:len(good)/2]), "invalid JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseLaunchStats("s.mnemestats", []byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "s.mnemestats: ") {
				t.Fatalf("err = %v, want one naming the file and %q", err, c.want)
			}
		})
	}
}

func TestReadLaunchStatsRefusesALinkOut(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	if err := WriteLaunchStats(other, sampleStats()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, LaunchStatsFileName), filepath.Join(dir, LaunchStatsFileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLaunchStats(dir); err == nil {
		t.Fatal("a statistics file that links out of the database was read")
	}
}

func FuzzReadLaunchStats(f *testing.F) {
	good, err := MarshalLaunchStats(sampleStats())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"FormatVersion":1,"Complete":false,"Launches":0,"GPUTimeNs":0,"Limits":{},"Kernels":[]}`))
	f.Add([]byte(`{"Kernels":[null]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseLaunchStats("fuzz.mnemestats", data)
		if err != nil {
			return
		}
		out, err := MarshalLaunchStats(s)
		if err != nil {
			t.Fatalf("stats that parsed do not marshal: %v", err)
		}
		again, err := ParseLaunchStats("again.mnemestats", out)
		if err != nil {
			t.Fatalf("stats that parsed do not parse after writing: %v\n%s", err, out)
		}
		a, _ := json.Marshal(s)
		b, _ := json.Marshal(again)
		if !bytes.Equal(a, b) {
			t.Fatalf("round trip changed the stats:\n%s\n%s", a, b)
		}
	})
}

// A shape's first launch, timed apart, stands for the shape's launches
// only when nothing else of it was timed: a one-shot kernel gets its time
// (and its share) from it, a sampled shape ignores it, and a kernel with
// neither has none. Each input changed alone.
func TestLaunchStatsFirstLaunchTime(t *testing.T) {
	shape := func(launches, timed, timedNs, first uint64) ShapeStats {
		return ShapeStats{GridDims: mneme.Dim3{X: 1, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 32, Y: 1, Z: 1},
			Launches: launches, TimedLaunches: timed, TimedNs: timedNs, FirstLaunchNs: first}
	}
	for _, tc := range []struct {
		name      string
		sh        ShapeStats
		wantNs    uint64
		wantShare float64
	}{
		{"launched once, first timed", shape(1, 0, 0, 5000), 5000, 0.5},
		{"launched once, not timed", shape(1, 0, 0, 0), 0, 0},
		{"launched twice, first timed only", shape(2, 0, 0, 5000), 10000, 2.0 / 3},
		{"sampled: the first is set aside", shape(2, 1, 1000, 5000), 2000, 2000.0 / 7000},
	} {
		s := &LaunchStats{FormatVersion: LaunchStatsVersion, Complete: true, WrittenAt: "2026-01-02T03:04:05Z",
			Limits: StatsLimits{MaxShapes: 4, MaxArgValues: 2, MaxArgBytes: 8, TimedFirst: 4, TimedEvery: 64},
			Kernels: []KernelStats{
				{KernelName: "oneshot", Shapes: []ShapeStats{tc.sh}, Args: []ArgStats{}},
				{KernelName: "other", Shapes: []ShapeStats{shape(5, 5, 5000, 0)}, Args: []ArgStats{}},
			}}
		s.Finish()
		k := s.Kernel("oneshot", "")
		if k.GPUTimeNs != tc.wantNs || k.Shapes[0].GPUTimeNs != tc.wantNs {
			t.Errorf("%s: GPUTimeNs kernel %d shape %d, want %d", tc.name, k.GPUTimeNs, k.Shapes[0].GPUTimeNs, tc.wantNs)
		}
		if d := k.TimeShare - tc.wantShare; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: share %v, want %v", tc.name, k.TimeShare, tc.wantShare)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: a finished file does not validate: %v", tc.name, err)
		}
	}
}
