package tune

import (
	"slices"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

func TestDecideFold(t *testing.T) {
	k := &db.Kernel{ArgNames: []string{"y", "step", "n", "alpha"}, Specializations: []bool{false, true, true, true}}
	shapes := func(n int) []ShapeStats { return make([]ShapeStats, n) }
	for _, tc := range []struct {
		name     string
		stats    *KernelStats
		cap      int
		args     []int
		variants int
		dims     bool
		note     string
	}{
		{"no statistics", nil, 16, nil, 1, true, "no launch statistics"},
		{"all invariant", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Invariant: true, Distinct: 1}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Invariant: true, Distinct: 1}}},
			16, []int{1, 2, 3}, 1, true, ""},
		{"a step counter", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Distinct: 64, Capped: true}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Invariant: true, Distinct: 1}}},
			16, []int{2, 3}, 1, true, "argument 1 (step): at least 64 values"},
		{"few values", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Distinct: 4}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Distinct: 3}}},
			16, []int{1, 2, 3}, 12, true, ""},
		{"few values beyond a smaller cap", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Distinct: 4}, {Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Distinct: 3}}},
			8, []int{2, 3}, 3, true, "argument 1 (step): 4 values, with the arguments folded before it"},
		{"more values than the cap, uncapped count", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 1, Distinct: 17}, {Arg: 2, Invariant: true}, {Arg: 3, Invariant: true}}},
			16, []int{2, 3}, 1, true, "argument 1 (step): 17 values"},
		{"an argument without statistics", &KernelStats{Shapes: shapes(1), Args: []ArgStats{{Arg: 2, Invariant: true}, {Arg: 3, Invariant: true}}},
			16, []int{2, 3}, 1, true, "argument 1 (step): no statistics"},
		{"many shapes", &KernelStats{Shapes: shapes(20), Args: []ArgStats{{Arg: 1, Invariant: true}, {Arg: 2, Invariant: true}, {Arg: 3, Invariant: true}}},
			16, []int{1, 2, 3}, 1, false, "20 shapes"},
		{"shapes times variants", &KernelStats{Shapes: shapes(5), Args: []ArgStats{{Arg: 1, Distinct: 4}, {Arg: 2, Invariant: true}, {Arg: 3, Invariant: true}}},
			16, []int{1, 2, 3}, 4, false, "5 shapes over the run, times 4 argument variants"},
	} {
		p := DecideFold(k, tc.stats, tc.cap)
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
