package mneme

import (
	"math"
	"strings"
	"testing"
)

// Every verification mode's row: accepted with the tolerances it uses, and
// each tolerance it uses refused alone when negative, NaN or infinite; the
// other fields of the row do not matter. Every element type's row too.
func TestVerifyOptionsEveryRow(t *testing.T) {
	bad := []float64{-1, math.NaN(), math.Inf(1), math.Inf(-1)}
	rows := []struct {
		mode string
		uses []string // the tolerance fields it checks
	}{
		{"", nil}, {VerifyAuto, nil}, {VerifyBitwise, nil}, {VerifyULP, nil}, {VerifyNone, nil},
		{VerifyAbs, []string{"Tolerance"}}, {VerifyRel, []string{"Tolerance"}},
		{VerifyTolerance, []string{"ATol", "RTol"}},
	}
	set := func(v *VerifyOptions, field string, x float64) {
		switch field {
		case "Tolerance":
			v.Tolerance = x
		case "ATol":
			v.ATol = x
		case "RTol":
			v.RTol = x
		}
	}
	for _, r := range rows {
		ok := VerifyOptions{Mode: r.mode, Tolerance: 0.5, ATol: 1e-6, RTol: 1e-3, ULP: 4}
		if err := ok.Validate(); err != nil {
			t.Errorf("mode %q: %v", r.mode, err)
		}
		zero := VerifyOptions{Mode: r.mode}
		if err := zero.Validate(); err != nil {
			t.Errorf("mode %q with zero tolerances: %v", r.mode, err)
		}
		for _, field := range []string{"Tolerance", "ATol", "RTol"} {
			uses := false
			for _, u := range r.uses {
				uses = uses || u == field
			}
			for _, x := range bad {
				v := ok
				set(&v, field, x)
				if err := v.Validate(); (err != nil) != uses {
					t.Errorf("mode %q, %s %g: error %v, want one: %v", r.mode, field, x, err, uses)
				}
			}
		}
	}
	for _, dt := range []string{"", VerifyF32, VerifyF64} {
		if err := (VerifyOptions{DType: dt}).Validate(); err != nil {
			t.Errorf("dtype %q: %v", dt, err)
		}
	}
	for _, dt := range []string{"f16", "bf16", "F32", "float"} {
		if err := (VerifyOptions{DType: dt}).Validate(); err == nil || !strings.Contains(err.Error(), dt) {
			t.Errorf("dtype %q: %v", dt, err)
		}
	}
	for _, m := range []string{"AUTO", "ulp 4", "exact", "tol"} {
		if err := (VerifyOptions{Mode: m}).Validate(); err == nil {
			t.Errorf("mode %q accepted", m)
		}
	}
}
