package compare

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestPTXDeclaresTheKernelWithItsParameters(t *testing.T) {
	s := string(PTX)
	if !strings.Contains(s, ".entry "+KernelName+"(") {
		t.Fatalf("compare.ptx does not define %s", KernelName)
	}
	want := len(Params{}.Args())
	if got := strings.Count(s, KernelName+"_param_"); got < want {
		t.Fatalf("compare.ptx mentions %d parameters, Args lays out %d", got, want)
	}
}

func TestElemSizeFollowsAlignmentAndDType(t *testing.T) {
	cases := []struct {
		mode, dtype     uint32
		got, want       uint64
		elem, effective uint32
	}{
		{ModeBitwise, 4, 0x1000, 0x2000, 8, ModeBitwise},
		{ModeBitwise, 4, 0x1004, 0x2000, 4, ModeBitwise},
		{ModeBitwise, 4, 0x1002, 0x2000, 1, ModeBitwise},
		{ModeTolerance, 4, 0x1004, 0x2008, 4, ModeTolerance},
		{ModeTolerance, 8, 0x1004, 0x2008, 1, ModeBitwise},
		{ModeTolerance, 8, 0x1008, 0x2008, 8, ModeTolerance},
	}
	for _, c := range cases {
		elem, eff := ElemSize(c.mode, c.dtype, c.got, c.want)
		if elem != c.elem || eff != c.effective {
			t.Errorf("ElemSize(%d,%d,%#x,%#x) = %d,%d; want %d,%d", c.mode, c.dtype, c.got, c.want, elem, eff, c.elem, c.effective)
		}
		p := Params{Got: c.got, Want: c.want, Elem: elem, Mode: eff}
		if err := p.Validate(); err != nil {
			t.Errorf("ElemSize's choice fails validation: %v", err)
		}
	}
}

func TestReferenceFindsTheFirstDifferingByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 13, 64, 1001} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		for _, elem := range []uint32{1, 4, 8} {
			got := append([]byte(nil), want...)
			if r := Reference(got, want, elem, ModeBitwise, 0, 0); r != NoDifference {
				t.Fatalf("n=%d elem=%d: equal data reported different at %d", n, elem, r)
			}
			if n == 0 {
				continue
			}
			// Flip two bytes; the earlier one must be named whatever the element width.
			a, b := rng.IntN(n), rng.IntN(n)
			got[a] ^= 0x10
			got[b] ^= 0x01
			first := uint64(min(a, b))
			if a == b {
				first = uint64(a)
			}
			if r := Reference(got, want, elem, ModeBitwise, 0, 0); r != first {
				t.Errorf("n=%d elem=%d flips at %d,%d: reported %d, want %d", n, elem, a, b, r, first)
			}
		}
	}
}

func f32s(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func TestReferenceTolerance(t *testing.T) {
	want := f32s(1, 100, float32(math.NaN()), 0, 5)
	cases := []struct {
		name       string
		got        []byte
		atol, rtol float64
		first      uint64
	}{
		{"exact", f32s(1, 100, float32(math.NaN()), 0, 5), 0, 0, NoDifference},
		{"negative zero equals zero", f32s(1, 100, float32(math.NaN()), float32(math.Copysign(0, -1)), 5), 0, 0, NoDifference},
		{"within atol", f32s(1.0005, 100, float32(math.NaN()), 0, 5), 1e-3, 0, NoDifference},
		{"outside atol", f32s(1.01, 100, float32(math.NaN()), 0, 5), 1e-3, 0, 0},
		{"within rtol", f32s(1, 100.05, float32(math.NaN()), 0, 5), 0, 1e-3, NoDifference},
		{"outside rtol names the element", f32s(1, 100.5, float32(math.NaN()), 0, 5), 0, 1e-3, 4},
		{"NaN where a number was", f32s(1, 100, 3, 0, 5), 1, 1, 8},
		{"inf is never close", f32s(1, 100, float32(math.NaN()), float32(math.Inf(1)), 5), 1e30, 0, 12},
	}
	for _, c := range cases {
		if r := Reference(c.got, want, 4, ModeTolerance, c.atol, c.rtol); r != c.first {
			t.Errorf("%s: first difference %d, want %d", c.name, r, c.first)
		}
	}
}

func TestValidateRejectsWhatTheKernelCannotDo(t *testing.T) {
	bad := []Params{
		{Elem: 2},
		{Elem: 4, Got: 2},
		{Elem: 1, Mode: ModeTolerance},
		{Elem: 8, Mode: 7},
	}
	for _, p := range bad {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}
