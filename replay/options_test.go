package replay

import (
	"errors"
	"testing"

	"github.com/mneme-gpu/mneme/replay/internal/compare"
	"github.com/mneme-gpu/mneme/spec"
)

func TestOptionsDefaultsAndRejections(t *testing.T) {
	o := Options{DB: "x"}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if o.Iterations != DefaultIterations || o.Timer != TimerAuto || o.Verify.Mode != VerifyBitwise || o.Verify.DType != "f32" {
		t.Fatalf("defaults not applied: %+v", o)
	}
	bad := []Options{
		{Iterations: -1},
		{Warmup: -1},
		{Device: -2},
		{Timer: "stopwatch"},
		{Verify: VerifyOptions{Mode: "fuzzy"}},
		{Verify: VerifyOptions{Mode: VerifyAbs, Tolerance: -1}},
		{Verify: VerifyOptions{Mode: VerifyClose, RTol: -1}},
		{Verify: VerifyOptions{DType: "f16"}},
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
		v          VerifyOptions
		mode       uint32
		dtype      uint32
		atol, rtol float64
	}{
		{VerifyOptions{Mode: VerifyBitwise}, compare.ModeBitwise, 4, 0, 0},
		{VerifyOptions{Mode: VerifyAbs, Tolerance: 0.5, DType: "f64"}, compare.ModeTolerance, 8, 0.5, 0},
		{VerifyOptions{Mode: VerifyRel, Tolerance: 0.25}, compare.ModeTolerance, 4, 0, 0.25},
		{VerifyOptions{Mode: VerifyClose, ATol: 1, RTol: 2}, compare.ModeTolerance, 4, 1, 2},
	}
	for _, c := range cases {
		m, d, a, r := c.v.compareMode()
		if m != c.mode || d != c.dtype || a != c.atol || r != c.rtol {
			t.Errorf("%+v: got %d %d %g %g", c.v, m, d, a, r)
		}
	}
}

func TestFillDim(t *testing.T) {
	rec := spec.Dim3{X: 4, Y: 2, Z: 1}
	if got := fillDim(spec.Dim3{}, rec); got != rec {
		t.Errorf("unset: %v", got)
	}
	if got := fillDim(spec.Dim3{X: 128}, rec); got != (spec.Dim3{X: 128, Y: 1, Z: 1}) {
		t.Errorf("partial: %v", got)
	}
}
