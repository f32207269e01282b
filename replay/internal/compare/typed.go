package compare

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// ElemType is the element type a buffer is compared as.
type ElemType uint8

// Element types. Untyped buffers compare bitwise.
const (
	Untyped ElemType = iota
	F16
	BF16
	F32
	F64
)

func (t ElemType) String() string {
	switch t {
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case F32:
		return "f32"
	case F64:
		return "f64"
	}
	return "untyped"
}

// Size is the element's width in bytes (1 for untyped: bytes).
func (t ElemType) Size() int {
	switch t {
	case F16, BF16:
		return 2
	case F32:
		return 4
	case F64:
		return 8
	}
	return 1
}

// Bounds say how far a float element may be from the recorded one. An
// element passes when any enabled bound accepts it; with none enabled only
// equal elements pass (NaN equals NaN of any payload, +0 equals -0).
type Bounds struct {
	ULP uint64  // units in the last place apart, ULP > 0 enables it
	Rel float64 // |got-want| <= Rel·max(|got|, |want|), Rel > 0 enables it
	Abs float64 // |got-want| <= Abs, Abs > 0 enables it
}

func (b Bounds) String() string {
	var parts []string
	if b.ULP > 0 {
		parts = append(parts, fmt.Sprintf("%d ulp", b.ULP))
	}
	if b.Rel > 0 {
		parts = append(parts, "rel "+strconv.FormatFloat(b.Rel, 'g', 3, 64))
	}
	if b.Abs > 0 {
		parts = append(parts, "abs "+strconv.FormatFloat(b.Abs, 'g', 3, 64))
	}
	if len(parts) == 0 {
		return "equal"
	}
	s := parts[0]
	for _, p := range parts[1:] {
		s += " or " + p
	}
	return s
}

// Figures are what a typed comparison of one buffer found.
type Figures struct {
	Type     ElemType
	Elements uint64 // whole elements compared (bytes when untyped)
	// Differing counts elements that are not equal (NaN payloads and the
	// sign of zero aside); Failing those outside the bounds; NonFinite the
	// differing ones where one side is NaN or infinite (they fail and are
	// left out of MaxAbs and MaxRel). Bytes past the last whole element
	// compare bitwise and count as one differing, failing element.
	Differing, Failing, NonFinite uint64
	MaxAbs, MaxRel                float64 // over differing finite pairs
	MaxULP                        uint64  // over differing finite pairs
	// First is the index of the first failing element, or of the first
	// differing one when none fails; -1 when the buffers are equal. For
	// untyped buffers it is a byte offset. FirstGot and FirstWant quote it.
	First               int64
	FirstGot, FirstWant string
}

// Passed says whether no element fails.
func (f Figures) Passed() bool { return f.Failing == 0 }

// Typed compares got with want as elements of type t under bounds b;
// untyped data compares bitwise, byte by byte. Buffers of different length
// compare over the shorter one.
func Typed(got, want []byte, t ElemType, b Bounds) Figures {
	n := min(len(got), len(want))
	got, want = got[:n], want[:n]
	f := Figures{Type: t, First: -1}
	if t == Untyped {
		f.Elements = uint64(n)
		for i := range n {
			if got[i] != want[i] {
				if f.First < 0 {
					f.First = int64(i)
					f.FirstGot, f.FirstWant = quoteBytes(got[i:]), quoteBytes(want[i:])
				}
				f.Differing++
			}
		}
		f.Failing = f.Differing
		return f
	}
	size := t.Size()
	count := n / size
	f.Elements = uint64(count)
	firstFailing := int64(-1)
	for i := range count {
		g, w := got[i*size:(i+1)*size], want[i*size:(i+1)*size]
		gv, wv, gb, wb := decode(t, g), decode(t, w), bitsOf(t, g), bitsOf(t, w)
		if gb == wb || (math.IsNaN(gv) && math.IsNaN(wv)) || (gv == 0 && wv == 0) {
			continue
		}
		f.Differing++
		if f.First < 0 {
			f.First = int64(i)
		}
		pass := false
		if isFinite(gv) && isFinite(wv) {
			d := math.Abs(gv - wv)
			// Scaled before subtracting, so huge values of opposite sign
			// give 2, not infinity.
			m := math.Max(math.Abs(gv), math.Abs(wv))
			rel := math.Abs(gv/m - wv/m)
			ulp := ulpDistance(t, gb, wb)
			f.MaxAbs = math.Max(f.MaxAbs, finiteOr(d))
			f.MaxRel = math.Max(f.MaxRel, rel)
			f.MaxULP = max(f.MaxULP, ulp)
			pass = (b.ULP > 0 && ulp <= b.ULP) || (b.Rel > 0 && rel <= b.Rel) || (b.Abs > 0 && d <= b.Abs)
		} else {
			f.NonFinite++
		}
		if !pass {
			f.Failing++
			if firstFailing < 0 {
				firstFailing = int64(i)
			}
		}
	}
	if tail := count * size; tail < n && string(got[tail:]) != string(want[tail:]) {
		f.Differing++
		f.Failing++
		if f.First < 0 {
			f.First = int64(count)
		}
		if firstFailing < 0 {
			firstFailing = int64(count)
		}
	}
	if firstFailing >= 0 {
		f.First = firstFailing
	}
	if f.First >= 0 {
		off := int(f.First) * size
		if off+size <= n {
			f.FirstGot = formatElem(t, got[off:off+size])
			f.FirstWant = formatElem(t, want[off:off+size])
		} else {
			f.FirstGot, f.FirstWant = quoteBytes(got[off:]), quoteBytes(want[off:])
		}
	}
	return f
}

// quoteBytes shows up to 8 bytes in hex.
func quoteBytes(b []byte) string { return fmt.Sprintf("% x", b[:min(len(b), 8)]) }

func formatElem(t ElemType, b []byte) string {
	bits := 64
	if t != F64 {
		bits = 32
	}
	return strconv.FormatFloat(decode(t, b), 'g', -1, bits)
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// finiteOr keeps the difference of two huge f64 values representable in
// JSON: it overflows to infinity only when they have opposite signs.
func finiteOr(d float64) float64 {
	if math.IsInf(d, 0) {
		return math.MaxFloat64
	}
	return d
}

// bitsOf reads one element's bits, little-endian.
func bitsOf(t ElemType, b []byte) uint64 {
	switch t {
	case F16, BF16:
		return uint64(binary.LittleEndian.Uint16(b))
	case F32:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

// decode reads one element as a float64 (exactly: every f16, bf16 and f32
// value is a float64 value).
func decode(t ElemType, b []byte) float64 {
	switch t {
	case F16:
		return halfToFloat(binary.LittleEndian.Uint16(b))
	case BF16:
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
	case F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// halfToFloat converts IEEE binary16 bits.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}

// ulpDistance counts the representable values between two finite elements
// of the same type: on the sign-magnitude line, +0 and -0 meet and a pair of
// opposite signs is apart by both magnitudes.
func ulpDistance(t ElemType, a, b uint64) uint64 {
	sign := uint64(1) << (8*t.Size() - 1)
	ma, mb := a&^sign, b&^sign
	if a&sign != b&sign {
		return ma + mb // each below 2^63: no overflow
	}
	if ma > mb {
		return ma - mb
	}
	return mb - ma
}

// Decode reads one element of type t (Size bytes, little-endian) as a
// float64; untyped data has no value and gives 0.
func Decode(t ElemType, b []byte) float64 {
	if t == Untyped || len(b) < t.Size() {
		return 0
	}
	return decode(t, b)
}
