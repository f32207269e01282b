package mneme

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ArgKind classifies a kernel argument the way the recording database
// stores it (the ArgKinds of a kernel): a scalar type, a pointer, or
// byval:N for N bytes the recorder keeps as they are (an aggregate passed by
// value, or an argument whose IR type disagrees with its launch size). It is
// its text in JSON.
type ArgKind string

// The scalar and pointer kinds; see ArgByVal for the rest.
const (
	ArgI8   ArgKind = "i8"
	ArgI16  ArgKind = "i16"
	ArgI32  ArgKind = "i32"
	ArgI64  ArgKind = "i64"
	ArgF16  ArgKind = "f16"
	ArgBF16 ArgKind = "bf16"
	ArgF32  ArgKind = "f32"
	ArgF64  ArgKind = "f64"
	ArgPtr  ArgKind = "ptr" // a 64-bit device address
)

const byValPrefix = "byval:"

// argKindSizes are the sizes of the fixed kinds.
var argKindSizes = map[ArgKind]uint64{
	ArgI8: 1, ArgI16: 2, ArgI32: 4, ArgI64: 8,
	ArgF16: 2, ArgBF16: 2, ArgF32: 4, ArgF64: 8,
	ArgPtr: 8,
}

// ArgByVal is the kind of n bytes kept as they are.
func ArgByVal(n uint64) ArgKind { return ArgKind(byValPrefix + strconv.FormatUint(n, 10)) }

// ParseArgKind checks a kind's text: i8, i16, i32, i64, f16, bf16, f32, f64,
// ptr, or byval:N with N a positive 32-bit count. The text is kept as given.
func ParseArgKind(s string) (ArgKind, error) {
	k := ArgKind(s)
	if k.Size() == 0 {
		return "", fmt.Errorf("unknown argument kind %q (want i8, i16, i32, i64, f16, bf16, f32, f64, ptr or byval:N)", s)
	}
	return k, nil
}

func (k ArgKind) String() string { return string(k) }

// Size is the argument's size in bytes; 0 when k is not a valid kind.
func (k ArgKind) Size() uint64 {
	if n, ok := argKindSizes[k]; ok {
		return n
	}
	n, _ := k.byValSize()
	return n
}

// byValSize is N of byval:N; ok is false for any other text.
func (k ArgKind) byValSize() (n uint64, ok bool) {
	rest, ok := strings.CutPrefix(string(k), byValPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 32)
	if err != nil || n == 0 {
		return 0, false
	}
	return n, true
}

// IsByVal reports whether k is byval:N.
func (k ArgKind) IsByVal() bool {
	_, ok := k.byValSize()
	return ok
}

// Specializable reports whether an argument of this kind can be folded into
// the code as a constant: scalars can; addresses and raw bytes cannot.
func (k ArgKind) Specializable() bool {
	_, fixed := argKindSizes[k]
	return fixed && k != ArgPtr
}

// Format shows an argument's little-endian bytes as a value of kind k:
// integers in decimal, floats in the shortest form, pointers in hex. Raw
// bytes, an unknown kind or a size that disagrees with the kind show as hex
// (shortened past 16 bytes).
func (k ArgKind) Format(b []byte) string {
	if size := k.Size(); size == 0 || uint64(len(b)) != size {
		return hexBytes(b)
	}
	switch k {
	case ArgI8:
		return strconv.Itoa(int(int8(b[0])))
	case ArgI16:
		return strconv.Itoa(int(int16(binary.LittleEndian.Uint16(b))))
	case ArgI32:
		return strconv.Itoa(int(int32(binary.LittleEndian.Uint32(b))))
	case ArgI64:
		return strconv.FormatInt(int64(binary.LittleEndian.Uint64(b)), 10)
	case ArgF16:
		return strconv.FormatFloat(float64(halfToFloat(binary.LittleEndian.Uint16(b))), 'g', -1, 32)
	case ArgBF16:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b))<<16)), 'g', -1, 32)
	case ArgF32:
		return strconv.FormatFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 'g', -1, 32)
	case ArgF64:
		return strconv.FormatFloat(math.Float64frombits(binary.LittleEndian.Uint64(b)), 'g', -1, 64)
	case ArgPtr:
		return fmt.Sprintf("0x%x", binary.LittleEndian.Uint64(b))
	}
	return hexBytes(b)
}

// hexBytes shows raw bytes, shortened past 16.
func hexBytes(b []byte) string {
	if len(b) <= 16 {
		return "0x" + hex.EncodeToString(b)
	}
	return fmt.Sprintf("0x%s…(%d bytes)", hex.EncodeToString(b[:16]), len(b))
}

// halfToFloat converts an IEEE binary16 value.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		return float32(math.Copysign(float64(mant)*math.Pow(2, -24), float64(int32(sign)|1)))
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
