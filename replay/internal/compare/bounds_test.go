package compare

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestBoundsAreInclusive: an element exactly at a bound passes, one step
// past it fails, for each bound alone; and the ULP distance does not depend
// on which side is larger.
func TestBoundsAreInclusive(t *testing.T) {
	// 2 vs 1 in f64: abs 1, rel 0.5, 2^52 ulp.
	got, want := f64s(2), f64s(1)
	for _, c := range []struct {
		b    Bounds
		pass bool
	}{
		{Bounds{Abs: 1}, true}, {Bounds{Abs: math.Nextafter(1, 0)}, false},
		{Bounds{Rel: 0.5}, true}, {Bounds{Rel: math.Nextafter(0.5, 0)}, false},
		{Bounds{ULP: 1 << 52}, true}, {Bounds{ULP: 1<<52 - 1}, false},
		{Bounds{}, false},
	} {
		for _, swap := range []bool{false, true} {
			g, w := got, want
			if swap {
				g, w = w, g
			}
			f := Typed(g, w, F64, c.b)
			if (f.Failing == 0) != c.pass || f.Differing != 1 || f.MaxULP != 1<<52 {
				t.Errorf("%s swapped=%v: %+v, want pass=%v", c.b, swap, f, c.pass)
			}
		}
	}
}

// TestBoundsString names the enabled bounds, or "equal".
func TestBoundsString(t *testing.T) {
	for b, want := range map[Bounds]string{
		{}: "equal", {ULP: 4}: "4 ulp", {Rel: 0.001}: "rel 0.001", {Abs: 1e-6}: "abs 1e-06",
		{ULP: 2, Rel: 0.5, Abs: 3}: "2 ulp or rel 0.5 or abs 3",
	} {
		if got := b.String(); got != want {
			t.Errorf("%+v: %q, want %q", b, got, want)
		}
	}
}

// TestHalfToFloat decodes binary16 at its edges, negative values included.
func TestHalfToFloat(t *testing.T) {
	for h, want := range map[uint16]float64{
		0x3c00: 1, 0xbc00: -1, 0xc000: -2, 0x0001: math.Ldexp(1, -24), 0x8001: -math.Ldexp(1, -24),
		0x7bff: 65504, 0xfbff: -65504, 0x7c00: math.Inf(1), 0xfc00: math.Inf(-1), 0x8000: 0,
	} {
		if got := halfToFloat(h); got != want {
			t.Errorf("halfToFloat(%#04x) = %v, want %v", h, got, want)
		}
	}
	if !math.IsNaN(halfToFloat(0x7e00)) || !math.IsNaN(halfToFloat(0xfe00)) {
		t.Error("NaN halves")
	}
	if !math.Signbit(halfToFloat(0x8000)) {
		t.Error("-0 half lost its sign")
	}
}

// TestFirstFailingOverFirstDiffering: First points at the first element
// outside the bounds, not at an earlier one that differs within them; with
// a differing tail and nothing failing before it, at the tail.
func TestFirstFailingOverFirstDiffering(t *testing.T) {
	f := Typed(f64s(1.0000001, 5, 9), f64s(1, 6, 9), F64, Bounds{Abs: 0.5})
	if f.Differing != 2 || f.Failing != 1 || f.First != 1 || f.FirstGot != "5" || f.FirstWant != "6" {
		t.Errorf("%+v", f)
	}
	// Two whole f32 elements equal, then a 3-byte tail that differs.
	got := append(f32s(1, 2), 1, 2, 3)
	want := append(f32s(1, 2), 1, 2, 4)
	f = Typed(got, want, F32, Bounds{})
	if f.Elements != 2 || f.Differing != 1 || f.Failing != 1 || f.First != 2 {
		t.Errorf("tail: %+v", f)
	}
	// Equal tails add nothing.
	f = Typed(append(f32s(1), 7), append(f32s(1), 7), F32, Bounds{})
	if f.Differing != 0 || f.First != -1 {
		t.Errorf("equal tail: %+v", f)
	}
}

// TestReferenceBoundsAndTail: the kernel's tolerance test is inclusive
// (|got-want| <= atol + rtol·|want|), and bytes past the last whole element
// compare bitwise.
func TestReferenceBoundsAndTail(t *testing.T) {
	got, want := f64s(1.5), f64s(1)
	if off := Reference(got, want, 8, ModeTolerance, 0.5, 0); off != NoDifference {
		t.Errorf("|diff| == atol: %d", off)
	}
	if off := Reference(got, want, 8, ModeTolerance, 0.25, 0.25); off != NoDifference {
		t.Errorf("|diff| == atol + rtol*|want|: %d", off)
	}
	if off := Reference(got, want, 8, ModeTolerance, math.Nextafter(0.5, 0), 0); off != 0 {
		t.Errorf("|diff| just over atol: %d", off)
	}
	g := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1))
	w := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1))
	if off := Reference(append(g, 1, 2), append(w, 1, 3), 4, ModeTolerance, 1, 1); off != 5 {
		t.Errorf("tail byte: %d, want 5", off)
	}
}
