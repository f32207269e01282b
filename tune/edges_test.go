package tune

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// Edges of parameter validation, random draws and launch probing: where a
// flipped comparison would let a bad space through or draw outside it.

func TestParamValidateBoundaries(t *testing.T) {
	for _, c := range []struct {
		p    Param
		want string // "" valid
	}{
		{IntRange("n", 0, 1<<40-1, 1), ""},
		{IntRange("n", 0, 1<<40, 1), "too many values"},
		{IntRange("n", 1<<40, 1<<40+1, 1), ""}, // large bounds, two values
		{IntRange("n", 0, 1<<41, 2), "too many values"},
		{IntRange("n", 0, 1<<41-2, 2), ""},
		{IntRange("n", 5, 5, 1), ""},
		{IntRange("n", 5, 4, 1), "below low"},
		{Param{Name: "n", Kind: KindInt, Low: 1, High: 64, Step: 1, Log: true}, ""},
		{Param{Name: "n", Kind: KindInt, Low: 0, High: 64, Step: 1, Log: true}, "log-scaled int"},
		{Param{Name: "n", Kind: KindInt, Low: 1, High: 64, Step: 2, Log: true}, "log-scaled int"},
		{RealRange("x", 2, 2, false), ""},
		{RealRange("x", 2, 1.5, false), "below low"},
		{RealRange("x", 1e-9, 1, true), ""},
		{RealRange("x", 0, 1, true), "low > 0"},
		{RealRange("x", -1, 1, true), "low > 0"},
	} {
		err := c.p.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", c.p, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error saying %q", c.p, err, c.want)
		}
	}
}

func TestIndexOfFindsTheChoice(t *testing.T) {
	p := Categorical("c", "a", "b", 3)
	for v, want := range map[any]int{"a": 0, "b": 1, 3: 2} {
		if i, ok := p.IndexOf(v); !ok || i != want {
			t.Errorf("IndexOf(%v) = %d, %v; want %d", v, i, ok, want)
		}
	}
	if _, ok := p.IndexOf("z"); ok {
		t.Error("IndexOf found a value that is not a choice")
	}
}

func TestRandomDrawsRealsUniformlyInTheirScale(t *testing.T) {
	sp := smoothSpace(RealRange("x", 2, 5, false), RealRange("y", 2, 2000, true))
	r := NewRandom(sp, 4)
	var sx, sy float64
	const n = 20000
	for range n {
		pt, ok := r.Ask()
		if !ok {
			t.Fatal("an infinite space ran out")
		}
		x, y := pt["x"].(float64), pt["y"].(float64)
		if x < 2 || x > 5 || y < 2 || y > 2000 {
			t.Fatalf("drew x %v, y %v outside 2..5 and 2..2000", x, y)
		}
		sx += x
		sy += math.Log10(y)
	}
	if m := sx / n; math.Abs(m-3.5) > 0.03 {
		t.Errorf("mean of x %v, want 3.5 (uniform on 2..5)", m)
	}
	if m, want := sy/n, math.Log10(2)+1.5; math.Abs(m-want) > 0.03 {
		t.Errorf("mean of log10 y %v, want %v (log-uniform on 2..2000)", m, want)
	}
}

func TestRandomPermutesSpacesUpToItsLimit(t *testing.T) {
	at := smoothSpace(IntRange("n", 1, maxPermuted, 1))
	if r := NewRandom(at, 1); !r.permute || r.size != maxPermuted {
		t.Errorf("a space of exactly %d points: permute %v, size %d", maxPermuted, r.permute, r.size)
	}
	if r := NewRandom(smoothSpace(IntRange("n", 1, maxPermuted+1, 1)), 1); r.permute {
		t.Error("a space above the permutation limit is permuted")
	}
}

func TestSearchesLaunchOnlyWhenAPointMovesIt(t *testing.T) {
	base := mneme.Config{Grid: mneme.Dim3{X: 64, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}}
	space := func(derive func(Point) mneme.Config) *Space {
		return &Space{Name: "s", Params: []Param{IntRange("k", 0, 3, 1)}, Baseline: base,
			Derive: func(pt Point) (mneme.Config, error) { return derive(pt), nil }}
	}
	keep := space(func(Point) mneme.Config { return base })
	if keep.searchesLaunch() {
		t.Error("a space that always derives the baseline's launch searches launches")
	}
	blocks := space(func(pt Point) mneme.Config {
		c := base
		c.Block.X = 128 << pt["k"].(int)
		return c
	})
	if !blocks.searchesLaunch() {
		t.Error("a space over block sizes does not search launches")
	}
	grids := space(func(pt Point) mneme.Config {
		c := base
		c.Grid.X = 64 + uint32(pt["k"].(int))
		return c
	})
	if !grids.searchesLaunch() {
		t.Error("a space over grid sizes does not search launches")
	}
}

func TestProbeConfigCoversTheSameThreads(t *testing.T) {
	lim := mneme.DeviceLimits{}
	for _, c := range []struct {
		block, grid     uint32
		wantB, wantG    uint32
		wantProbeExists bool
	}{
		{256, 100, 128, 200, true},
		{96, 7, 32, 21, true}, // half of 96, down to whole warps
		{48, 5, 96, 3, true},  // narrower than two warps: doubled, grid rounded up
		{1024, 1, 512, 2, true},
	} {
		base := mneme.Config{Grid: mneme.Dim3{X: c.grid, Y: 1, Z: 1}, Block: mneme.Dim3{X: c.block, Y: 1, Z: 1}, SetLaunchBounds: true}
		got, ok := probeConfig(base, lim)
		if ok != c.wantProbeExists || got.Block.X != c.wantB || got.Grid.X != c.wantG || got.MaxThreads != int(c.wantB) {
			t.Errorf("block %d grid %d: probe block %d grid %d (launch bounds %d, %v), want block %d grid %d",
				c.block, c.grid, got.Block.X, got.Grid.X, got.MaxThreads, ok, c.wantB, c.wantG)
		}
	}
	// A narrow block that cannot double within the device's threads has no probe.
	base := mneme.Config{Grid: mneme.Dim3{X: 3, Y: 1, Z: 1}, Block: mneme.Dim3{X: 16, Y: 40, Z: 1}}
	if _, ok := probeConfig(base, lim); ok {
		t.Error("a 16x40 block doubled past 1024 threads")
	}
}

func blockXChoices(t *testing.T, s *Space) []int {
	t.Helper()
	p, ok := s.Param(ParamBlockX)
	if !ok {
		t.Fatal("no block_x parameter")
	}
	var out []int
	for i := range int(p.Cardinality()) {
		out = append(out, p.ValueAt(i).(int))
	}
	return out
}

func TestPresetBlockRangesAtTheDeviceLimit(t *testing.T) {
	one := func(block uint32) Launch {
		return Launch{Grid: mneme.Dim3{X: 40, Y: 1, Z: 1}, Block: mneme.Dim3{X: block, Y: 1, Z: 1}, NumArgs: 2}
	}
	// pow2: the recorded block joins the powers of two when the device
	// allows it, also when it is exactly the limit.
	s, err := Preset("quick", one(768), mneme.DeviceLimits{MaxThreadsPerBlock: 768})
	if err != nil {
		t.Fatal(err)
	}
	if got := blockXChoices(t, s); len(got) == 0 || got[len(got)-1] != 768 || got[len(got)-2] != 512 {
		t.Errorf("pow2 blocks under a 768-thread limit with 768 recorded: %v", got)
	}
	// warp: multiples of the warp up to the limit rounded down to a warp.
	s, err = Preset("launch", one(256), mneme.DeviceLimits{MaxThreadsPerBlock: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got := blockXChoices(t, s); got[0] != 32 || got[len(got)-1] != 992 || len(got) != 31 {
		t.Errorf("warp blocks under a 1000-thread limit: %v", got)
	}
	// A device limit above CUDA's 1024 is capped; one below is kept.
	s, _ = Preset("standard", one(256), mneme.DeviceLimits{MaxThreadsPerBlock: 4096})
	if got := blockXChoices(t, s); got[len(got)-1] != 1024 {
		t.Errorf("step64 blocks under a 4096-thread limit end at %d, want 1024", got[len(got)-1])
	}
	s, _ = Preset("standard", one(256), mneme.DeviceLimits{MaxThreadsPerBlock: 256})
	if got := blockXChoices(t, s); got[len(got)-1] != 256 {
		t.Errorf("step64 blocks under a 256-thread limit end at %d", got[len(got)-1])
	}
}

func TestPreset3DBlocksAndVars(t *testing.T) {
	l := Launch{Grid: mneme.Dim3{X: 10, Y: 6, Z: 3}, Block: mneme.Dim3{X: 16, Y: 4, Z: 4}, NumArgs: 1}
	lim := mneme.DeviceLimits{}
	v := l.Vars(lim)
	if v["N"] != 10*6*3*16*4*4 || v["Nx"] != 160 || v["Ny"] != 24 || v["Nz"] != 12 || v["rec_block_z"] != 4 || v["rec_grid_z"] != 3 {
		t.Fatalf("vars of a 3D launch: %v", v)
	}
	s, err := Preset("quick", l, lim)
	if err != nil {
		t.Fatal(err)
	}
	// Powers of two in x and y up to 1024 each, the product with z = 4
	// within 1024 and a multiple of 32: 1024 itself is a choice.
	if got := blockXChoices(t, s); got[len(got)-1] != 1024 {
		t.Errorf("2D/3D block_x choices %v do not reach 1024", got)
	}
	accepts := func(bx, by int) bool {
		pt := Point{ParamBlockX: bx, ParamBlockY: by, ParamPasses: "default<O3>"}
		ok, err := s.Constraints[0].Check(pt)
		return err == nil && ok
	}
	if !accepts(16, 16) || !accepts(256, 1) || accepts(512, 1) || accepts(2, 2) || accepts(1, 4) {
		t.Errorf("block constraint with z=4: 16x16 %v, 256x1 %v, 512x1 %v (over), 2x2 %v, 1x4 %v (under a warp)",
			accepts(16, 16), accepts(256, 1), accepts(512, 1), accepts(2, 2), accepts(1, 4))
	}
	// A zero dimension counts as one.
	if d := normDim(mneme.Dim3{X: 0, Y: 5, Z: 0}); d != (mneme.Dim3{X: 1, Y: 5, Z: 1}) {
		t.Errorf("normDim: %v", d)
	}
}

func TestLaunchBoundsCountTheWholeBlock(t *testing.T) {
	l := Launch{Grid: mneme.Dim3{X: 8, Y: 8, Z: 1}, Block: mneme.Dim3{X: 32, Y: 4, Z: 2}, NumArgs: 1}
	s, err := Preset("launch", l, mneme.DeviceLimits{RegsPerSM: 65536})
	if err != nil {
		t.Fatal(err)
	}
	var lb Constraint
	for _, c := range s.Constraints {
		if strings.HasPrefix(c.Name, "min_blocks_per_sm") {
			lb = c
		}
	}
	// 2048 resident threads: 64x4x2 = 512 threads fit 4 blocks, not 8.
	for mb, want := range map[int]bool{4: true, 8: false} {
		pt := Point{ParamBlockX: 64, ParamBlockY: 4, ParamLaunchBounds: true, ParamMinBlocks: mb}
		if ok, err := lb.Check(pt); err != nil || ok != want {
			t.Errorf("min_blocks_per_sm %d with a 64x4x2 block: %v, want %v", mb, ok, want)
		}
	}
	if blockThreads(Point{}, s.Baseline) != 32*4*2 {
		t.Errorf("the baseline block has %d threads", blockThreads(Point{}, s.Baseline))
	}
}

func TestNormalizeRefusesWhatTheSpaceLacks(t *testing.T) {
	sp := smoothSpace(IntRange("n", 1, 4, 1), RealRange("x", 0, 1, false))
	got, err := sp.Normalize(Point{"n": 2.0, "x": 0.5})
	if err != nil || got["n"] != 2 || got["x"] != 0.5 {
		t.Fatalf("a JSON point: %v, %v", got, err)
	}
	if _, err := sp.Normalize(Point{"n": 2.0, "x": 0.5, "m": 1.0}); err == nil || !strings.Contains(err.Error(), `unknown parameter "m"`) {
		t.Errorf("a point with an extra parameter: %v", err)
	}
	if _, err := sp.Normalize(Point{"n": 5.0, "x": 0.5}); err == nil || !strings.Contains(err.Error(), "not one of its values") {
		t.Errorf("a value outside the range: %v", err)
	}
	if _, err := sp.Normalize(Point{"n": 2.0, "x": 1.5}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("a real outside the range: %v", err)
	}
}

func TestValidIdentAtEveryCharacterRangeEdge(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "z": true, "A": true, "Z": true, "_": true, "_x9": true, "a0": true, "b9": true,
		"": false, "0a": false, "9": false, "`": false, "{": false, "@": false, "[": false,
		"a/": false, "a:": false, "a-b": false, "é": false,
	} {
		if validIdent(s) != want {
			t.Errorf("validIdent(%q) = %v, want %v", s, !want, want)
		}
	}
}

func TestBaseNameAndFirstLine(t *testing.T) {
	for in, want := range map[string]string{"dir/x.yaml": "x.yaml", "/x": "x", "x": "x", "a/b/": ""} {
		if got := baseName(in); got != want {
			t.Errorf("baseName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"one\ntwo": "one", "\nsecond": "", "only": "only"} {
		if got := firstLine(in); got != want {
			t.Errorf("firstLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIntIndexOfAtItsEnds(t *testing.T) {
	p := IntRange("n", 3, 15, 4) // 3, 7, 11, 15
	for v, want := range map[any]int{3: 0, 7: 1, 15: 3, 11.0: 2} {
		if i, ok := p.IndexOf(v); !ok || i != want {
			t.Errorf("IndexOf(%v) = %d, %v; want %d", v, i, ok, want)
		}
	}
	for _, v := range []any{-1, 2, 5, 19, 16, "7"} {
		if i, ok := p.IndexOf(v); ok {
			t.Errorf("IndexOf(%v) = %d, found in 3..15 step 4", v, i)
		}
	}
}

func TestSizeSaturatesInsteadOfOverflowing(t *testing.T) {
	big := IntRange("a", 0, 1<<30, 1)
	sp := smoothSpace(big, IntRange("b", 0, 1<<30, 1), IntRange("c", 0, 7, 1))
	if n, finite := sp.Size(); !finite || n != math.MaxInt64 {
		t.Errorf("a space of 2^63 points and more: size %d, finite %v; want saturated", n, finite)
	}
	if n, _ := smoothSpace(IntRange("a", 1, 3, 1), IntRange("b", 1, 5, 1)).Size(); n != 15 {
		t.Errorf("3 x 5 points: size %d", n)
	}
	if _, finite := smoothSpace(big, RealRange("x", 0, 1, false)).Size(); finite {
		t.Error("a space with a real range is finite")
	}
}

func TestNormalizeAcceptsARealAtItsBounds(t *testing.T) {
	sp := smoothSpace(RealRange("x", 0.5, 2, false))
	for _, v := range []float64{0.5, 2} {
		if _, err := sp.Normalize(Point{"x": v}); err != nil {
			t.Errorf("x = %v (a bound): %v", v, err)
		}
	}
}

func TestCheckWorkersAtTheMachinesLimit(t *testing.T) {
	limit := maxWorkersPerCore * runtime.NumCPU()
	for _, c := range []struct {
		workers, gpus, compile int
		ok                     bool
	}{
		{1, 1, -1, true},
		{0, 1, 0, false},
		{limit, 1, limit, true},
		{limit + 1, 1, 0, false},
		{limit, 0, 0, true}, // no GPU named counts as one
		{limit / 2, 2, 0, true},
		{limit/2 + 1, 2, 0, false},
		{1, 1, limit + 1, false},
	} {
		err := CheckWorkers(c.workers, c.gpus, c.compile)
		if (err == nil) != c.ok {
			t.Errorf("%d workers on %d GPUs, %d compile workers (limit %d): %v, want ok %v", c.workers, c.gpus, c.compile, limit, err, c.ok)
		}
		var in *mneme.InputError
		if err != nil && !errors.As(err, &in) {
			t.Errorf("%v is not bad input", err)
		}
	}
}
