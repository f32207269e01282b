package replay

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mneme-gpu/mneme/replay/internal/compare"
)

// elemBits writes one element of type t with the given bits.
func elemBits(t compare.ElemType, bits uint64) []byte {
	switch t.Size() {
	case 2:
		return binary.LittleEndian.AppendUint16(nil, uint16(bits))
	case 4:
		return binary.LittleEndian.AppendUint32(nil, uint32(bits))
	}
	return binary.LittleEndian.AppendUint64(nil, bits)
}

// oneBits are the bits of 1.0 in each float type.
var oneBits = map[compare.ElemType]uint64{
	compare.F16: 0x3c00, compare.BF16: 0x3f80, compare.F32: 0x3f800000, compare.F64: 0x3ff0000000000000,
}

// Every row of mode auto's bounds, pinned by its figures (docs/design.md
// and the table's comment give the reasons) and by what each accepts: a
// subnormal result that many ULP away passes and one more fails (the ULP
// bound: a relative bound means nothing there), and a result near 1 just
// inside the relative bound passes where one just outside the larger of
// the two bounds fails.
func TestAutoBoundsEveryRow(t *testing.T) {
	rows := []struct {
		elem compare.ElemType
		ulp  uint64
		rel  float64
	}{
		{compare.F16, 4, 2e-3},
		{compare.BF16, 4, 1.6e-2},
		{compare.F32, 16, 1e-5},
		{compare.F64, 16, 1e-13},
	}
	if len(autoBounds) != len(rows) {
		t.Errorf("auto bounds has %d rows, want %d", len(autoBounds), len(rows))
	}
	for _, r := range rows {
		b, ok := autoBounds[r.elem]
		if !ok || b.ULP != r.ulp || b.Rel != r.rel || b.Abs != 0 {
			t.Errorf("%v: bounds %+v, want %d ulp or rel %g", r.elem, b, r.ulp, r.rel)
			continue
		}
		// Subnormals: the ULP bound decides.
		want := elemBits(r.elem, 100)
		if f := compare.Typed(elemBits(r.elem, 100+r.ulp), want, r.elem, b); !f.Passed() {
			t.Errorf("%v: a subnormal %d ulp away fails: %+v", r.elem, r.ulp, f)
		}
		if f := compare.Typed(elemBits(r.elem, 100+r.ulp+1), want, r.elem, b); f.Passed() {
			t.Errorf("%v: a subnormal %d ulp away passes", r.elem, r.ulp+1)
		}
		// Near 1 (above it, where one ulp is one epsilon): k ulp away
		// passes while k·eps is within either bound.
		one := oneBits[r.elem]
		eps := compare.Decode(r.elem, elemBits(r.elem, one+1)) - 1
		inside := max(r.ulp, uint64(math.Floor(r.rel/eps*(1-1e-9)/(1+r.rel))))
		if f := compare.Typed(elemBits(r.elem, one+inside), elemBits(r.elem, one), r.elem, b); !f.Passed() {
			t.Errorf("%v: %d ulp above 1 fails: %+v", r.elem, inside, f)
		}
		outside := max(r.ulp, uint64(math.Ceil(r.rel/eps))) + 1
		if f := compare.Typed(elemBits(r.elem, one+outside), elemBits(r.elem, one), r.elem, b); f.Passed() {
			t.Errorf("%v: %d ulp above 1 passes", r.elem, outside)
		}
	}
}

// Float atomics widen each row's bounds alike: the relative bound by the
// square root of the contributions per element, the absolute one from the
// buffer's largest value, the ULP bound kept.
func TestAtomicSumBoundsEveryRow(t *testing.T) {
	for elem, base := range autoBounds {
		b := atomicSumBounds(base, 400, 4, 300) // 100 contributions per element
		if b.ULP != base.ULP || math.Abs(b.Rel-10*base.Rel) > 1e-9*base.Rel || math.Abs(b.Abs-300*b.Rel) > 1e-9*b.Abs {
			t.Errorf("%v: %+v from %+v", elem, b, base)
		}
	}
}

// Every IR type a kernel stores maps to its element type, with its width
// and name; anything else compares bitwise.
func TestElemTypeEveryRow(t *testing.T) {
	for _, r := range []struct {
		ir   string
		elem compare.ElemType
		size int
		name string
	}{
		{"half", compare.F16, 2, "f16"},
		{"bfloat", compare.BF16, 2, "bf16"},
		{"float", compare.F32, 4, "f32"},
		{"double", compare.F64, 8, "f64"},
		{"i32", compare.Untyped, 1, "untyped"},
		{"fp128", compare.Untyped, 1, "untyped"},
		{"x86_fp80", compare.Untyped, 1, "untyped"},
	} {
		e := elemTypeOf(r.ir)
		if e != r.elem || e.Size() != r.size || e.String() != r.name {
			t.Errorf("%s: %v (%d bytes, %q), want %v (%d, %q)", r.ir, e, e.Size(), e.String(), r.elem, r.size, r.name)
		}
	}
}
