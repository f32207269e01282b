package llvm

import (
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/geometry"
)

// TestKernelGeometryUnguardedIndex runs the analysis on the heat stencil of
// examples/heat2d (whose index is never bounded: only blocks that divide the
// recorded threads can run it) and on kernels that differ from it in one
// respect each: a bound added, a clamp, a lower bound only, a grid-stride loop.
func TestKernelGeometryUnguardedIndex(t *testing.T) {
	heat := parseCUDA(t, "heat2d")
	geo := parseCUDA(t, "geometry")
	block := mneme.Dim3{X: 256, Y: 1, Z: 1}
	for _, tc := range []struct {
		m          *Module
		kernel     string
		access     bool
		bounded    bool
		exactCover bool
	}{
		{heat, "_Z9heat_stepPKfPfiif", true, false, true},
		{heat, "_Z17heat_step_guardedPKfPfiif", true, true, false},
		{heat, "_Z12copy_clampedPfPKfi", true, true, false},
		{heat, "_Z10shift_leftPfPKf", true, false, true},
		{heat, "_Z17heat_step_columnsPKfPfif", true, false, true},
		{heat, "_Z18heat_step_interiorPKfPfiif", true, true, false},
		{heat, "_Z4ringPfPKfi", false, false, false},
		{geo, "vecadd", true, true, false},
		{geo, "gridstride", true, true, false},
		{geo, "scale64", true, true, false},
	} {
		facts, err := tc.m.KernelGeometry(tc.kernel)
		if err != nil {
			t.Fatalf("%s: %v", tc.kernel, err)
		}
		if facts.GlobalIndexAccess != tc.access || facts.IndexBounded != tc.bounded {
			t.Errorf("%s: global-index access %v, bounded %v; want %v, %v", tc.kernel, facts.GlobalIndexAccess, facts.IndexBounded, tc.access, tc.bounded)
		}
		d := geometry.Decide(facts, block)
		if d.ExactCover != tc.exactCover {
			t.Errorf("%s: %s: exact cover %v, want %v", tc.kernel, d, d.ExactCover, tc.exactCover)
		}
		if tc.kernel == "_Z9heat_stepPKfPfiif" && (d.Dependent || d.ExactCoverRule == "") {
			t.Errorf("heat_step: %s, want agnostic under the exact-cover rule", d)
		}
	}
}
