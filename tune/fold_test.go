package tune

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

func TestDecideFold(t *testing.T) {
	k := &db.Kernel{ArgNames: []string{"y", "step", "n", "alpha"}, Specializations: []bool{false, true, true, true}}
	shapes := func(n int) []ShapeStats { return make([]ShapeStats, n) }
	// inst is an instance whose step and alpha have the given values.
	inst := func(step, alpha string) *db.Instance {
		return &db.Instance{Args: []string{"00", step, "e8030000", alpha}}
	}
	// Every value of step (4) and alpha (3) recorded.
	all := []*db.Instance{inst("01", "a1"), inst("02", "a2"), inst("03", "a3"), inst("04", "a1")}
	for _, tc := range []struct {
		name     string
		stats    *KernelStats
		cap      int
		insts    []*db.Instance
		args     []int
		variants int
		dims     bool
		note     string
	}{
		{"no statistics", nil, 16, all, nil, 1, true, "no launch statistics"},
		{"all invariant", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Invariant: true, Distinct: 1}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Invariant: true, Distinct: 1}}},
			16, all[:1], []int{1, 2, 3}, 1, true, ""},
		{"a step counter", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Distinct: 64, Capped: true}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Invariant: true, Distinct: 1}}},
			16, all, []int{2, 3}, 1, true, "argument 1 (step): at least 64 values"},
		{"few values, all recorded", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Distinct: 4}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Distinct: 3}}},
			16, all, []int{1, 2, 3}, 12, true, ""},
		{"few values, some not recorded", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Distinct: 4}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Distinct: 3}}},
			16, all[:3], []int{2, 3}, 3, true, "argument 1 (step): 4 values over the run, 3 of them in the instances tuned on"},
		{"few values beyond a smaller cap", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Distinct: 4}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Distinct: 3}}},
			8, all, []int{2, 3}, 3, true, "argument 1 (step): 4 values, with the arguments folded before it"},
		{"more values than the cap, uncapped count", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Distinct: 17}, {Arg: 2, Invariant: true}, {Arg: 3, Invariant: true}}},
			16, all, []int{2, 3}, 1, true, "argument 1 (step): 17 values"},
		{"an argument without statistics", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 2, Invariant: true}, {Arg: 3, Invariant: true}}},
			16, all, []int{2, 3}, 1, true, "argument 1 (step): no statistics"},
		{"many shapes", &KernelStats{Shapes: shapes(20), Args: []ArgStats{{Arg: 1, Invariant: true}, {Arg: 2, Invariant: true}, {Arg: 3, Invariant: true}}},
			16, all, []int{1, 2, 3}, 1, false, "20 shapes"},
		{"more shapes than the statistics hold", &KernelStats{Shapes: shapes(2), MoreShapes: true, Args: []ArgStats{{Arg: 1, Invariant: true}, {Arg: 2, Invariant: true}, {Arg: 3, Invariant: true}}},
			16, all, []int{1, 2, 3}, 1, false, "more than 2 shapes"},
		{"shapes times variants", &KernelStats{Shapes: shapes(5), Args: []ArgStats{{Arg: 1, Distinct: 4}, {Arg: 2, Invariant: true}, {Arg: 3, Invariant: true}}},
			16, all, []int{1, 2, 3}, 4, false, "5 shapes over the run, times 4 argument variants"},
	} {
		p := DecideFold(k, tc.stats, tc.cap, tc.insts)
		if !slices.Equal(p.Args, tc.args) || p.Variants != tc.variants || p.Dims != tc.dims || !strings.Contains(p.String(), tc.note) {
			t.Errorf("%s: %s (args %v, variants %d, dims %v); want args %v, variants %d, dims %v, a note with %q", tc.name, p, p.Args, p.Variants, p.Dims, tc.args, tc.variants, tc.dims, tc.note)
		}
		if (tc.stats == nil) != (p.Statistics == StatisticsNone) {
			t.Errorf("%s: statistics %q", tc.name, p.Statistics)
		}
	}
}

func TestFoldPolicyRestrict(t *testing.T) {
	p := FoldPolicy{Args: []int{2, 3}, Dims: false}
	for _, tc := range []struct {
		in       mneme.Config
		spec     bool
		args     []int
		specDims bool
	}{
		{mneme.Config{Specialize: true}, true, []int{2, 3}, false},
		{mneme.Config{Specialize: true, SpecializeArgs: []int{1, 3}}, true, []int{3}, false},
		{mneme.Config{Specialize: true, SpecializeArgs: []int{1}}, false, nil, false},
		{mneme.Config{Specialize: false, SpecializeDims: true}, false, nil, false},
	} {
		out := p.Restrict(tc.in)
		if out.Specialize != tc.spec || !slices.Equal(out.SpecializeArgs, tc.args) || out.SpecializeDims != tc.specDims {
			t.Errorf("%+v: specialize %v args %v dims %v; want %v %v %v", tc.in, out.Specialize, out.SpecializeArgs, out.SpecializeDims, tc.spec, tc.args, tc.specDims)
		}
	}
	if out := (FoldPolicy{Dims: true}).Restrict(mneme.Config{SpecializeDims: true}); !out.SpecializeDims {
		t.Error("allowed dimensions were not kept")
	}
}

func TestInstanceWeights(t *testing.T) {
	a := &db.Instance{GridDims: mneme.Dim3{X: 4, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 256, Y: 1, Z: 1}, Occurrences: 3}
	b := &db.Instance{GridDims: mneme.Dim3{X: 4, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 256, Y: 1, Z: 1}, Occurrences: 1}
	c := &db.Instance{GridDims: mneme.Dim3{X: 8, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 256, Y: 1, Z: 1}, SharedMem: 64, Occurrences: 0}
	if w := instanceWeights([]*db.Instance{a, b, c}, nil); !slices.Equal(w, []float64{3, 1, 1}) {
		t.Errorf("without statistics: %v, want the occurrences (at least 1)", w)
	}
	stats := &KernelStats{Shapes: []ShapeStats{
		{Grid: a.GridDims, Block: a.BlockDims, Launches: 100},
		{Grid: c.GridDims, Block: c.BlockDims, Launches: 7}, // another shared-memory size than c's
		{Grid: c.GridDims, Block: c.BlockDims, SharedMem: 64, Launches: 50}}}
	if w := instanceWeights([]*db.Instance{a, b, c}, stats); !slices.Equal(w, []float64{50, 50, 50}) {
		t.Errorf("with statistics: %v, want a shape's launches shared by its instances", w)
	}
}

// TestRunFoldsWhatTheStatisticsAllow tunes the one instance with statistics
// in which the argument a changes at every launch: no trial folds it, the
// invariant n is folded, and the tuned entry and the summary say what the
// folding rested on. A second run whose probe fails (the test worker
// verifies one block only) rebuilds the preset: the rebuilt space must keep
// the restriction.
func TestRunFoldsWhatTheStatisticsAllow(t *testing.T) {
	stats := func(string, *db.Kernel) (*KernelStats, error) {
		return &KernelStats{Launches: 500, Shapes: []ShapeStats{{Grid: mneme.Dim3{X: 4, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 500}},
			Args: []ArgStats{{Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Distinct: 500, Capped: true}}}, nil
	}
	checkTrials := func(name, out string) {
		t.Helper()
		trials, _, _ := ReadTrials(filepath.Join(out, TrialsFile))
		folded := false
		for _, tr := range trials {
			if tr.Config.Specialize {
				folded = true
				if !slices.Equal(tr.Config.SpecializeArgs, []int{2}) {
					t.Errorf("%s: trial %d folds %v, want only the invariant argument 2", name, tr.Number, tr.Config.SpecializeArgs)
				}
			}
		}
		if !folded {
			t.Errorf("%s: no trial folded the invariant argument", name)
		}
	}
	ro, _, stderr := runOptions(t)
	ro.AnalyzeGeometry, ro.Stats = agnostic, stats
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	out := ro.Options.Output
	checkTrials("searched blocks", out)
	var sum Summary
	readJSON(t, filepath.Join(out, SummaryFile), &sum)
	if !strings.Contains(sum.Folding, "statistics: run") || !strings.Contains(sum.Folding, "argument 3 (a): at least 500 values") {
		t.Errorf("summary folding: %q", sum.Folding)
	}
	var tuned map[string]TunedKernel
	readJSON(t, filepath.Join(out, MnemeTunedFile), &tuned)
	tk, ok := tuned["_Z6vecaddPfPKfif"]
	if !ok || tk.Statistics != StatisticsRun {
		t.Fatalf("tuned entry: %+v", tuned)
	}
	if tk.Config.Specialize && (len(tk.Folded) != 1 || tk.Folded[0].Arg != 2 || tk.Folded[0].Name != "n" || !tk.Folded[0].Invariant || !slices.Equal(tk.Folded[0].Values, []string{"e8030000"})) {
		t.Errorf("folded: %+v", tk.Folded)
	}

	ro, _, stderr = runOptions(t, "TESTWORKER_ONLY_BLOCK=256")
	ro.AnalyzeGeometry, ro.Stats = agnostic, stats
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var geo GeometryReport
	readJSON(t, filepath.Join(ro.Options.Output, GeometryFile), &geo)
	if !geo.Probed || !geo.Dependent {
		t.Fatalf("the probe did not fail: %+v", geo)
	}
	checkTrials("after the probe", ro.Options.Output)
}

// TestRunOneInstanceClassWhenOtherShapesRan: tuned on its one recorded
// shape, a kernel whose run had another shape gets a class for the recorded
// shape alone, so the other keeps the application's code; with the recorded
// shape the only one, no class.
func TestRunOneInstanceClassWhenOtherShapesRan(t *testing.T) {
	recorded := ShapeStats{Grid: mneme.Dim3{X: 4, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 20}
	other := ShapeStats{Grid: mneme.Dim3{X: 4096, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 20}
	for _, shapes := range [][]ShapeStats{{recorded}, {recorded, other}} {
		ro, _, stderr := runOptions(t)
		ro.AnalyzeGeometry = agnostic
		ro.Stats = func(string, *db.Kernel) (*KernelStats, error) {
			return &KernelStats{Launches: 40, Shapes: shapes}, nil
		}
		if err := Run(context.Background(), ro); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var tuned map[string]TunedKernel
		readJSON(t, filepath.Join(ro.Options.Output, MnemeTunedFile), &tuned)
		tk := tuned["_Z6vecaddPfPKfif"]
		wantClasses := len(shapes) - 1
		if len(tk.Classes) != wantClasses {
			t.Fatalf("%d shapes: %d classes, want %d", len(shapes), len(tk.Classes), wantClasses)
		}
		if wantClasses == 1 {
			c := tk.Classes[0]
			if c.Grid != recorded.Grid || c.Block != recorded.Block || c.Config.Block != tk.Config.Block || c.Launches != 20 || c.Speedup != tk.Speedup {
				t.Errorf("class %+v, want the recorded shape with the tuned configuration", c)
			}
			if !strings.Contains(stderr.String(), "grid 4096,1,1 block 256,1,1 shared 0 (20 launches)") {
				t.Errorf("the shape without an instance is not named:\n%s", stderr)
			}
		}
	}
}

// Each variant a configuration makes the runtime compile beyond the first
// costs its first launch in the objective: one per launch shape when the
// dimensions fold, one per value of each folded multi-valued argument, none
// for the application's own code. Each input changed alone.
func TestVariantCost(t *testing.T) {
	k := &db.Kernel{ArgNames: []string{"y", "step", "n", "alpha"}, Specializations: []bool{false, true, true, true}}
	all := []*db.Instance{
		{Args: []string{"00", "01", "e8030000", "a1"}}, {Args: []string{"00", "02", "e8030000", "a2"}},
		{Args: []string{"00", "03", "e8030000", "a3"}}, {Args: []string{"00", "04", "e8030000", "a1"}},
	}
	stats := &KernelStats{Shapes: make([]ShapeStats, 6), Args: []ArgStats{{Arg: 1, Distinct: 4}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Distinct: 3}}}
	p := DecideFold(k, stats, 128, all)
	for _, tc := range []struct {
		name string
		c    mneme.Config
		want int
	}{
		{"nothing folded", mneme.Config{Passes: "default<O3>"}, 1},
		{"the application's own code", mneme.Config{Original: true}, 0},
		{"dimensions folded, 6 shapes", mneme.Config{SpecializeDims: true}, 6},
		{"an invariant argument folded", mneme.Config{Specialize: true, SpecializeArgs: []int{2}}, 1},
		{"a 4-valued argument folded", mneme.Config{Specialize: true, SpecializeArgs: []int{1}}, 4},
		{"4 and 3 values folded", mneme.Config{Specialize: true, SpecializeArgs: []int{1, 3}}, 12},
		{"4 values and the dimensions", mneme.Config{Specialize: true, SpecializeArgs: []int{1}, SpecializeDims: true}, 24},
	} {
		if got := p.VariantsOf(tc.c); got != tc.want {
			t.Errorf("%s: %d variants, want %d", tc.name, got, tc.want)
		}
		if got, want := p.VariantCostNS(tc.c, VariantFirstLaunchNS), float64(max(tc.want-1, 0))*VariantFirstLaunchNS; got != want {
			t.Errorf("%s: cost %v ns, want %v", tc.name, got, want)
		}
	}
	// The objective across instances carries the cost; none without one.
	members := []*member{{id: "a", launches: 10}, {id: "b", launches: 5}}
	ok := func(ns float64) JobResult {
		return JobResult{Status: mneme.StatusVerified, Result: mneme.Result{ExecTime: []float64{ns, ns, ns}}}
	}
	job := Job{Config: mneme.Config{SpecializeDims: true}}
	plain := combineInstances(job, []JobResult{ok(100), ok(200)}, members, "median", nil)
	costed := combineInstances(job, []JobResult{ok(100), ok(200)}, members, "median", func(c mneme.Config) float64 { return p.VariantCostNS(c, VariantFirstLaunchNS) })
	if plain.Result.ExecTime[0] != 2000 || costed.Result.ExecTime[0] != 2000+5*VariantFirstLaunchNS || costed.VariantCostNS != 5*VariantFirstLaunchNS || plain.VariantCostNS != 0 {
		t.Errorf("totals %v and %v, want 2000 and 2000 plus 5 variants' first launches", plain.Result.ExecTime, costed.Result.ExecTime)
	}
}

// A launch shape gets code of its own only where its best saves the
// application more than a variant's first launch over the configuration
// chosen for all: a small gain on a few launches keeps the shared code (no
// classes); a large one gets its class. Each input changed alone.
func TestShapeClassesPayForTheirVariants(t *testing.T) {
	inst := func(grid uint32) *db.Instance {
		return &db.Instance{GridDims: mneme.Dim3{X: grid, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 256, Y: 1, Z: 1}}
	}
	members := []*member{{t: &target{inst: inst(64)}, id: "small", launches: 20}, {t: &target{inst: inst(4096)}, id: "large", launches: 20}}
	trial := func(n int, key string, small, large float64) Trial {
		return Trial{Number: n, ConfigKey: key, Status: mneme.StatusVerified, TimeNS: 20 * (small + large), Config: mneme.Config{Passes: key},
			Instances: []InstanceFigure{{Instance: "small", Status: mneme.StatusVerified, TimeNS: small}, {Instance: "large", Status: mneme.StatusVerified, TimeNS: large}}}
	}
	base := trial(0, "baseline", 50_000, 100_000)
	base.Params = Point{baselineParam: true}
	chosen := trial(1, "chosen", 49_000, 80_000) // best in total
	for _, tc := range []struct {
		name    string
		small   float64 // the other configuration's time on the small shape
		classes int
	}{
		{"a gain on 20 launches far below a first launch", 48_500, 0},
		{"a gain on 20 launches above a first launch", 49_000 - VariantFirstLaunchNS/20 - 100, 2},
	} {
		other := trial(2, "other", tc.small, 90_000) // worse in total, better on the small shape
		got := shapeClasses([]Trial{base, chosen, other}, base, chosen, members, mneme.Config{}, false, VariantFirstLaunchNS)
		if len(got) != tc.classes {
			t.Errorf("%s: %d classes, want %d: %+v", tc.name, len(got), tc.classes, got)
		}
		// Without the cost the better code always gets its class.
		if free := shapeClasses([]Trial{base, chosen, other}, base, chosen, members, mneme.Config{}, false, 0); len(free) != 2 {
			t.Errorf("%s, no first-launch cost: %d classes, want 2", tc.name, len(free))
		}
	}
}

// The trials' timer and a variant's cost are checked like the other
// options: every timer name is accepted ("" is auto), anything else and a
// negative or non-finite cost are refused naming the option.
func TestOptionsValidateTimerAndVariantCost(t *testing.T) {
	ok := Options{Metric: MetricNames[0], Objective: ObjectiveNames[0], Sampler: SamplerNames[0], Iterations: 1, Workers: 1}
	for _, name := range TimerNames {
		o := ok
		o.Timer = name
		if err := o.Validate(); err != nil {
			t.Errorf("timer %q: %v", name, err)
		}
	}
	bad := ok
	bad.Timer = "fast"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `timer "fast"`) {
		t.Errorf("timer fast: %v", err)
	}
	for _, us := range []float64{-1, math.NaN(), math.Inf(1)} {
		o := ok
		o.VariantCostUS = us
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "variant-cost-us") {
			t.Errorf("variant cost %v: %v", us, err)
		}
	}
	o := ok
	o.VariantCostUS = 0
	if err := o.Validate(); err != nil {
		t.Errorf("variant cost 0: %v", err)
	}
}
