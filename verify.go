package mneme

import (
	"fmt"
	"math"
)

// Verification modes: how a replay's output memory is compared with the
// recorded epilogue.
const (
	// VerifyAuto (the default) compares each buffer by the element type the
	// kernel's IR writes to it: floats within per-type ULP or relative
	// bounds, everything else bitwise.
	VerifyAuto      = "auto"
	VerifyULP       = "ulp"       // float buffers within ULP units in the last place, the rest bitwise
	VerifyBitwise   = "bitwise"   // every byte equal
	VerifyAbs       = "abs"       // |got - want| <= Tolerance
	VerifyRel       = "rel"       // |got - want| <= Tolerance * |want|
	VerifyTolerance = "tolerance" // |got - want| <= ATol + RTol * |want| (numpy's isclose)
	VerifyNone      = "none"      // not compared
)

// Element types of float comparisons.
const (
	VerifyF32 = "f32"
	VerifyF64 = "f64"
)

// VerifyOptions say how a replay's output is compared with the recording.
// The tuner and the worker protocol use the modes auto, bitwise, ulp,
// tolerance and none; a replay from the command line also abs and rel.
type VerifyOptions struct {
	Mode      string  `json:"mode,omitempty" yaml:"mode"`
	Tolerance float64 `json:"tolerance,omitempty" yaml:"tolerance,omitempty"` // for abs and rel
	ATol      float64 `json:"atol,omitempty" yaml:"atol"`                     // for tolerance
	RTol      float64 `json:"rtol,omitempty" yaml:"rtol"`                     // for tolerance
	ULP       uint64  `json:"ulp,omitempty" yaml:"ulp,omitempty"`             // for ulp
	// DType is the element type of float comparisons: f32 (default) or f64.
	DType string `json:"dtype,omitempty" yaml:"dtype,omitempty"`
}

// WithDefaults fills the unset mode (auto) and element type (f32).
func (v VerifyOptions) WithDefaults() VerifyOptions {
	if v.Mode == "" {
		v.Mode = VerifyAuto
	}
	if v.DType == "" {
		v.DType = VerifyF32
	}
	return v
}

// Validate checks the mode, the tolerances it uses and the element type;
// unset mode and element type mean the defaults.
func (v VerifyOptions) Validate() error {
	switch v.Mode {
	case "", VerifyAuto, VerifyBitwise, VerifyULP, VerifyNone:
	case VerifyAbs, VerifyRel:
		if !validTolerance(v.Tolerance) {
			return fmt.Errorf("tolerance %g: want a finite number, not negative", v.Tolerance)
		}
	case VerifyTolerance:
		if !validTolerance(v.ATol) || !validTolerance(v.RTol) {
			return fmt.Errorf("tolerances atol %g, rtol %g: want finite numbers, not negative", v.ATol, v.RTol)
		}
	default:
		return fmt.Errorf("verify mode %q: want auto, bitwise, ulp, abs, rel, tolerance or none", v.Mode)
	}
	switch v.DType {
	case "", VerifyF32, VerifyF64:
	default:
		return fmt.Errorf("verify dtype %q: want f32 or f64", v.DType)
	}
	return nil
}

// validTolerance accepts finite non-negative tolerances; NaN would compare
// false with everything and pass every output.
func validTolerance(t float64) bool { return t >= 0 && !math.IsInf(t, 1) }
