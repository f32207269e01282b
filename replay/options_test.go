package replay

import (
	"errors"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/replay/internal/compare"
)

func TestOptionsDefaultsAndRejections(t *testing.T) {
	o := Options{DB: "x"}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if o.Iterations != DefaultIterations || o.Timer != TimerAuto || o.Verify.Mode != mneme.VerifyAuto || o.Verify.DType != "f32" {
		t.Fatalf("defaults not applied: %+v", o)
	}
	bad := []Options{
		{Iterations: -1},
		{Warmup: -1},
		{Device: -2},
		{Timer: "stopwatch"},
		{Verify: mneme.VerifyOptions{Mode: "fuzzy"}},
		{Verify: mneme.VerifyOptions{Mode: mneme.VerifyAbs, Tolerance: -1}},
		{Verify: mneme.VerifyOptions{Mode: mneme.VerifyTolerance, RTol: -1}},
		{Verify: mneme.VerifyOptions{DType: "f16"}},
	}
	for _, b := range bad {
		err := b.check()
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("%+v: got %v, want an input error", b, err)
		}
	}
}

func TestCompareModeMapsTolerances(t *testing.T) {
	cases := []struct {
		v          mneme.VerifyOptions
		mode       uint32
		dtype      uint32
		atol, rtol float64
	}{
		{mneme.VerifyOptions{Mode: mneme.VerifyBitwise}, compare.ModeBitwise, 4, 0, 0},
		// The typed modes compare bitwise on the GPU, then by element on the host.
		{mneme.VerifyOptions{Mode: mneme.VerifyAuto}, compare.ModeBitwise, 4, 0, 0},
		{mneme.VerifyOptions{Mode: mneme.VerifyULP, ULP: 8}, compare.ModeBitwise, 4, 0, 0},
		{mneme.VerifyOptions{Mode: mneme.VerifyAbs, Tolerance: 0.5, DType: "f64"}, compare.ModeTolerance, 8, 0.5, 0},
		{mneme.VerifyOptions{Mode: mneme.VerifyRel, Tolerance: 0.25}, compare.ModeTolerance, 4, 0, 0.25},
		{mneme.VerifyOptions{Mode: mneme.VerifyTolerance, ATol: 1, RTol: 2}, compare.ModeTolerance, 4, 1, 2},
	}
	for _, c := range cases {
		m, d, a, r := compareMode(c.v)
		if m != c.mode || d != c.dtype || a != c.atol || r != c.rtol {
			t.Errorf("%+v: got %d %d %g %g", c.v, m, d, a, r)
		}
	}
}

func TestFillDim(t *testing.T) {
	rec := mneme.Dim3{X: 4, Y: 2, Z: 1}
	if got := fillDim(mneme.Dim3{}, rec); got != rec {
		t.Errorf("unset: %v", got)
	}
	if got := fillDim(mneme.Dim3{X: 128, Y: 1, Z: 1}, rec); got != (mneme.Dim3{X: 128, Y: 1, Z: 1}) {
		t.Errorf("set: %v", got)
	}
	// A zero component is kept for Validate to refuse, never read as 1.
	if got := fillDim(mneme.Dim3{X: 0, Y: 1, Z: 1}, rec); got != (mneme.Dim3{X: 0, Y: 1, Z: 1}) {
		t.Errorf("a zero component: %v", got)
	}
}
