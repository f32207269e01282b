package geometry

import (
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

func TestDecide(t *testing.T) {
	block1D := mneme.Dim3{X: 256, Y: 1, Z: 1}
	block2D := mneme.Dim3{X: 16, Y: 16, Z: 1}
	for _, tc := range []struct {
		name      string
		facts     Facts
		block     mneme.Dim3
		dependent bool
		reason    string
	}{
		{"plain index", Facts{ThreadIDDims: [3]bool{true}}, block1D, false, "global-index"},
		{"tid.y with a 1D block", Facts{ThreadIDDims: [3]bool{true, true}}, block1D, false, ""},
		{"tid.y with a 2D block", Facts{ThreadIDDims: [3]bool{true, true}}, block2D, true, "threadIdx.y/z"},
		{"blockDim in a shift", Facts{NonCanonicalDimUses: []string{"ntid.x in lshr"}}, block1D, true, "ntid.x in lshr"},
		{"thread-indexed shared array", Facts{SharedArrays: []SharedArray{{Name: "tile", Bytes: 1024, IndexedByThreadID: true}}}, block1D, true, "tile"},
		{"thread-indexed dynamic shared array", Facts{SharedArrays: []SharedArray{{Name: "buf", Dynamic: true, IndexedByThreadID: true}}}, block1D, true, "dynamic shared array buf"},
		{"shared flag", Facts{SharedArrays: []SharedArray{{Name: "flag", Bytes: 4}}}, block1D, false, ""},
		{"inline assembly", Facts{Opaque: []string{"inline assembly"}}, block1D, true, "inline assembly"},
	} {
		d := Decide(tc.facts, tc.block)
		if d.Dependent != tc.dependent || !strings.Contains(d.String(), tc.reason) {
			t.Errorf("%s: %s, want dependent=%v mentioning %q", tc.name, d, tc.dependent, tc.reason)
		}
	}
	if u := Unknown("no IR"); !u.Dependent || !strings.Contains(u.String(), "no IR") {
		t.Errorf("unknown: %s", u)
	}
}

func TestDecideExactCover(t *testing.T) {
	block1D := mneme.Dim3{X: 256, Y: 1, Z: 1}
	for _, tc := range []struct {
		name             string
		facts            Facts
		exact, dependent bool
	}{
		{"unguarded index", Facts{GlobalIndexAccess: true}, true, false},
		{"bounded index", Facts{GlobalIndexAccess: true, IndexBounded: true}, false, false},
		{"no indexed access", Facts{IndexBounded: false}, false, false},
		{"unguarded and dependent", Facts{GlobalIndexAccess: true, NonCanonicalDimUses: []string{"ntid.x in lshr"}}, true, true},
	} {
		d := Decide(tc.facts, block1D)
		if d.ExactCover != tc.exact || d.Dependent != tc.dependent || (d.ExactCover != (d.ExactCoverRule != "")) {
			t.Errorf("%s: %s exact=%v rule=%q, want exact=%v dependent=%v", tc.name, d, d.ExactCover, d.ExactCoverRule, tc.exact, tc.dependent)
		}
	}
}

func TestCoversExactly(t *testing.T) {
	recG, recB := mneme.Dim3{X: 4096, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}
	for _, tc := range []struct {
		grid, block mneme.Dim3
		want        bool
	}{
		{recG, recB, true},
		{mneme.Dim3{X: 8192, Y: 1, Z: 1}, mneme.Dim3{X: 128, Y: 1, Z: 1}, true},
		{mneme.Dim3{X: 5462, Y: 1, Z: 1}, mneme.Dim3{X: 192, Y: 1, Z: 1}, false}, // ceil(1 Mi / 192)
		{mneme.Dim3{X: 4096, Y: 2, Z: 1}, recB, false},                           // y alone differs
		{mneme.Dim3{X: 4096, Y: 1, Z: 2}, recB, false},                           // z alone differs
		{mneme.Dim3{X: 4096}, mneme.Dim3{X: 256}, true},                          // zero extents count as 1
	} {
		if got := CoversExactly(tc.grid, tc.block, recG, recB); got != tc.want {
			t.Errorf("grid %s block %s: %v, want %v", tc.grid, tc.block, got, tc.want)
		}
	}
}

// The kernel's own launch bound passes into the decision, and nothing else
// of it changes; no bound, none.
func TestDecideCarriesTheLaunchBound(t *testing.T) {
	block := mneme.Dim3{X: 128, Y: 1, Z: 1}
	f := Facts{ThreadIDDims: [3]bool{true}}
	plain := Decide(f, block)
	f.MaxThreads = 128
	bounded := Decide(f, block)
	if plain.MaxThreads != 0 || bounded.MaxThreads != 128 || bounded.Dependent != plain.Dependent {
		t.Errorf("without a bound %+v, with 128 %+v", plain, bounded)
	}
	if r := LaunchBoundRule(128); !strings.Contains(r, "at most 128 threads") {
		t.Errorf("rule %q", r)
	}
}
