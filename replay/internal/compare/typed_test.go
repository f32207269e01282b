package compare

import (
	"encoding/binary"
	"math"
	"testing"
)

func f64s(xs ...float64) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// ulpsAbove is x moved n representable f32 values up.
func ulpsAbove(x float32, n int) float32 {
	for range n {
		x = math.Nextafter32(x, float32(math.Inf(1)))
	}
	return x
}

func TestTypedEqualities(t *testing.T) {
	nan1, nan2 := math.Float32frombits(0x7fc00001), math.Float32frombits(0xffc00abc)
	negZero := float32(math.Copysign(0, -1))
	f := Typed(f32s(nan1, 0, 1.5), f32s(nan2, negZero, 1.5), F32, Bounds{})
	if f.Differing != 0 || f.Failing != 0 || f.First != -1 || !f.Passed() {
		t.Fatalf("NaN payloads and signed zeros must compare equal: %+v", f)
	}
	f = Typed(f32s(float32(math.Inf(1))), f32s(float32(math.Inf(-1))), F32, Bounds{ULP: math.MaxUint64})
	if f.Failing != 1 || f.NonFinite != 1 || f.MaxAbs != 0 {
		t.Fatalf("+inf vs -inf must fail as non-finite: %+v", f)
	}
	f = Typed(f32s(float32(math.NaN())), f32s(1), F32, Bounds{Rel: 1})
	if f.Failing != 1 || f.NonFinite != 1 || f.FirstGot != "NaN" || f.FirstWant != "1" {
		t.Fatalf("NaN vs number must fail: %+v", f)
	}
}

func TestTypedULPBound(t *testing.T) {
	want := f32s(1, -2, 1e-40 /* subnormal */)
	got := f32s(ulpsAbove(1, 16), ulpsAbove(-2, 3), ulpsAbove(1e-40, 16))
	f := Typed(got, want, F32, Bounds{ULP: 16})
	if f.Differing != 3 || f.Failing != 0 || f.MaxULP != 16 {
		t.Fatalf("16 ulp apart under a 16 ulp bound: %+v", f)
	}
	f = Typed(got, want, F32, Bounds{ULP: 15})
	if f.Failing != 2 || f.First != 0 || f.FirstGot != "1.0000019" || f.FirstWant != "1" {
		t.Fatalf("16 ulp apart under a 15 ulp bound: %+v", f)
	}
	// Across zero both sides count: the smallest subnormals of either sign are 2 ulp apart.
	f = Typed(f32s(math.Float32frombits(1)), f32s(math.Float32frombits(0x80000001)), F32, Bounds{ULP: 1})
	if f.MaxULP != 2 || f.Failing != 1 {
		t.Fatalf("across zero: %+v", f)
	}
	// f64 at the extremes must not overflow the distance.
	f = Typed(f64s(math.MaxFloat64), f64s(-math.MaxFloat64), F64, Bounds{})
	if f.MaxULP != 2*0x7fefffffffffffff || f.MaxAbs != math.MaxFloat64 || math.IsInf(f.MaxRel, 0) {
		t.Fatalf("extreme f64: %+v", f)
	}
}

func TestTypedRelAndAbsBounds(t *testing.T) {
	want := f64s(100, 0, 1)
	got := f64s(100.001, 1e-9, 1)
	f := Typed(got, want, F64, Bounds{Rel: 1e-5})
	if f.Differing != 2 || f.Failing != 1 || f.First != 1 {
		t.Fatalf("rel 1e-5: %+v", f)
	}
	if math.Abs(f.MaxRel-1) > 1e-12 || math.Abs(f.MaxAbs-0.001) > 1e-9 {
		t.Fatalf("rel 1e-5 figures: %+v", f)
	}
	f = Typed(got, want, F64, Bounds{Abs: 1e-8})
	if f.Failing != 1 || f.First != 0 {
		t.Fatalf("abs 1e-8: %+v", f)
	}
	f = Typed(got, want, F64, Bounds{Abs: 1e-8, Rel: 1e-5})
	if f.Failing != 0 {
		t.Fatalf("either bound suffices: %+v", f)
	}
	if s := (Bounds{ULP: 16, Rel: 1e-5}).String(); s != "16 ulp or rel 1e-05" {
		t.Errorf("Bounds.String: %q", s)
	}
}

func TestTypedHalfTypes(t *testing.T) {
	// 1.0 and the next f16 (1+2^-10); bf16 1.0 is 0x3f80.
	f := Typed([]byte{0x01, 0x3c}, []byte{0x00, 0x3c}, F16, Bounds{ULP: 1})
	if f.Failing != 0 || f.MaxULP != 1 || f.FirstGot != "1.0009766" {
		t.Fatalf("f16: %+v", f)
	}
	f = Typed([]byte{0x82, 0x3f}, []byte{0x80, 0x3f}, BF16, Bounds{ULP: 1})
	if f.Failing != 1 || f.MaxULP != 2 || f.FirstWant != "1" {
		t.Fatalf("bf16: %+v", f)
	}
	if h := halfToFloat(0x7c00); !math.IsInf(h, 1) {
		t.Errorf("f16 inf: %v", h)
	}
	if h := halfToFloat(0x0001); h != math.Ldexp(1, -24) {
		t.Errorf("f16 smallest subnormal: %v", h)
	}
}

func TestTypedUntypedAndTail(t *testing.T) {
	f := Typed([]byte{1, 2, 3, 9, 5, 6}, []byte{1, 2, 3, 4, 5, 7}, Untyped, Bounds{ULP: 100})
	if f.First != 3 || f.Differing != 2 || f.Failing != 2 || f.FirstGot != "09 05 06" || f.FirstWant != "04 05 07" {
		t.Fatalf("untyped: %+v", f)
	}
	// 6 bytes as f32: one element, then 2 tail bytes compared bitwise.
	f = Typed(append(f32s(1), 0, 1), append(f32s(1), 0, 2), F32, Bounds{ULP: 100})
	if f.Elements != 1 || f.Failing != 1 || f.First != 1 {
		t.Fatalf("tail: %+v", f)
	}
}

// FuzzTyped checks the comparison's invariants on arbitrary bytes.
func FuzzTyped(f *testing.F) {
	f.Add(f32s(1, 2, 3), f32s(1, 2.0000002, -3), uint8(3), uint64(1), 1e-6)
	f.Add(f64s(math.NaN(), 0), f64s(math.Inf(1), math.Copysign(0, -1)), uint8(4), uint64(0), 0.0)
	f.Add([]byte{0, 0x3c, 0xff, 0x7f}, []byte{1, 0x3c, 0xff, 0xff}, uint8(1), uint64(2), 1e-3)
	f.Add([]byte{1, 2, 3}, []byte{1, 2, 4}, uint8(0), uint64(5), 0.5)
	f.Fuzz(func(t *testing.T, got, want []byte, typ uint8, ulp uint64, rel float64) {
		ty := ElemType(typ % 5)
		if math.IsNaN(rel) || rel < 0 {
			rel = 0
		}
		b := Bounds{ULP: ulp, Rel: rel}
		self := Typed(got, got, ty, b)
		if self.Differing != 0 || self.First != -1 {
			t.Fatalf("a buffer differs from itself: %+v", self)
		}
		ab, ba := Typed(got, want, ty, b), Typed(want, got, ty, b)
		if ab.Differing != ba.Differing || ab.Failing != ba.Failing || ab.MaxULP != ba.MaxULP || ab.MaxRel != ba.MaxRel || ab.MaxAbs != ba.MaxAbs {
			t.Fatalf("not symmetric: %+v vs %+v", ab, ba)
		}
		if ab.Failing > ab.Differing || ab.NonFinite > ab.Failing || (ab.Differing > 0) != (ab.First >= 0) {
			t.Fatalf("inconsistent counts: %+v", ab)
		}
		for _, x := range []float64{ab.MaxAbs, ab.MaxRel} {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				t.Fatalf("figure not a finite non-negative number: %+v", ab)
			}
		}
		strict := Typed(got, want, ty, Bounds{})
		if strict.Failing != strict.Differing {
			t.Fatalf("without bounds every difference fails: %+v", strict)
		}
		if looser := Typed(got, want, ty, Bounds{ULP: ulp + 1, Rel: rel * 2}); looser.Failing > ab.Failing {
			t.Fatalf("a looser bound fails more: %+v vs %+v", looser, ab)
		}
		if ty == Untyped {
			n, first := uint64(0), int64(-1)
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					if first < 0 {
						first = int64(i)
					}
					n++
				}
			}
			if ab.Differing != n || ab.First != first {
				t.Fatalf("untyped: %+v, want %d differing from %d", ab, n, first)
			}
		}
	})
}
