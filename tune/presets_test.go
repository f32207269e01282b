package tune

import (
	"testing"

	"github.com/mneme-gpu/mneme"
)

func collect(t *testing.T, s *Space) []mneme.Config {
	t.Helper()
	ex, err := NewExhaustive(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []mneme.Config
	seen := map[string]bool{}
	for {
		pt, ok := ex.Ask()
		if !ok {
			return out
		}
		cfg, err := s.Evaluate(pt)
		if err != nil {
			t.Fatal(err)
		}
		k := ConfigKey(cfg)
		if seen[k] {
			t.Fatalf("preset %s: two points derive the same configuration %+v", s.Name, cfg)
		}
		seen[k] = true
		out = append(out, cfg)
	}
}

func TestPresets1DKeepWorkCovered(t *testing.T) {
	lim := mneme.DeviceLimits{MaxThreadsPerBlock: 1024, WarpSize: 32, RegsPerSM: 65536, SMCount: 132}
	n := vecadd.Threads()
	wantCounts := map[string]int{
		"quick":    6 * 2 * 2,      // 32..1024 powers of two (256 included) x 2 pipelines x specialize
		"standard": 16 * 5 * 2 * 2, // 64..1024 step 64 x 5 pipelines x specialize x specialize_dims
		"compiler": 5 * 4 * 2 * 2 * 5 * 4,
	}
	for _, name := range PresetNames {
		s, err := Preset(name, vecadd, lim)
		if err != nil {
			t.Fatal(err)
		}
		size, finite := s.Size()
		if !finite || size == 0 {
			t.Fatalf("%s: size %d finite %v", name, size, finite)
		}
		if name == "full" {
			continue // millions of points: for random and TPE
		}
		cfgs := collect(t, s)
		if w, ok := wantCounts[name]; ok && len(cfgs) != w {
			t.Errorf("%s: %d configurations, want %d", name, len(cfgs), w)
		}
		for _, c := range cfgs {
			if c.Block.X%32 != 0 || c.Block.X > 1024 || c.Block.Y != 1 {
				t.Fatalf("%s: block %s", name, c.Block)
			}
			if g := uint64(c.Grid.X) * uint64(c.Block.X); g < n || g-uint64(c.Block.X) >= n {
				t.Fatalf("%s: grid %d x block %d does not tightly cover %d", name, c.Grid.X, c.Block.X, n)
			}
			if c.SetLaunchBounds && (c.MaxThreads != int(c.Block.X) || c.MinBlocksPerSM*c.MaxThreads > 2048) {
				t.Fatalf("%s: launch bounds %d/%d for block %d", name, c.MaxThreads, c.MinBlocksPerSM, c.Block.X)
			}
			if !c.SetLaunchBounds && c.MinBlocksPerSM != 0 {
				t.Fatalf("%s: min blocks without launch bounds", name)
			}
		}
	}
	// launch: 32 block sizes; bounds off (1) + on with 0,1,2,4,8 where min*threads <= 2048.
	s, _ := Preset("launch", vecadd, lim)
	want := 0
	for b := 32; b <= 1024; b += 32 {
		want++
		for _, mb := range []int{0, 1, 2, 4, 8} {
			if mb*b <= 2048 {
				want++
			}
		}
	}
	if got := len(collect(t, s)); got != want {
		t.Errorf("launch: %d configurations, want %d", got, want)
	}
}

func TestPresetSmallerDeviceLimit(t *testing.T) {
	s, err := Preset("standard", vecadd, mneme.DeviceLimits{MaxThreadsPerBlock: 512})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range collect(t, s) {
		if c.Block.X > 512 {
			t.Fatalf("block %d over the device limit", c.Block.X)
		}
	}
}

func TestPreset2DCoversBothDims(t *testing.T) {
	stencil := Launch{Grid: mneme.Dim3{X: 100, Y: 30, Z: 1}, Block: mneme.Dim3{X: 32, Y: 8, Z: 1}}
	s, err := Preset("quick", stencil, mneme.DeviceLimits{})
	if err != nil {
		t.Fatal(err)
	}
	cfgs := collect(t, s)
	if len(cfgs) == 0 {
		t.Fatal("no configurations")
	}
	for _, c := range cfgs {
		if c.Block.Count() > 1024 || c.Block.Count()%32 != 0 {
			t.Fatalf("block %s", c.Block)
		}
		if c.Grid.X*c.Block.X < 3200 || c.Grid.Y*c.Block.Y < 240 {
			t.Fatalf("grid %s x block %s does not cover 3200x240", c.Grid, c.Block)
		}
	}
	if _, err := Preset("nope", stencil, mneme.DeviceLimits{}); err == nil {
		t.Fatal("unknown preset accepted")
	}
	if _, err := Preset("quick", Launch{}, mneme.DeviceLimits{}); err == nil {
		t.Fatal("a launch without geometry was accepted")
	}
}

func TestNoScalarArgsMeansNoSpecializeParam(t *testing.T) {
	l := vecadd
	l.ScalarArgs = nil
	s, _ := Preset("standard", l, mneme.DeviceLimits{})
	if _, ok := s.Param(ParamSpecialize); ok {
		t.Fatal("specialize offered for a kernel without scalar arguments")
	}
}
