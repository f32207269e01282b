// Package compare holds the GPU kernel that verifies a replay: it compares
// device memory with the recorded epilogue (also in device memory) and finds
// the first differing byte offset, bitwise or within a float tolerance. The
// kernel ships as PTX generated from compare.cu; Reference is the same
// comparison on the host, the specification the kernel is tested against.
//
// Typed (typed.go) is the host-side comparison of typed verification: a
// buffer of float elements within ULP, relative or absolute bounds, with the
// error figures a tuner reports; replay runs it on the buffers the kernel
// finds differing bitwise.
package compare

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
)

// PTX is the comparison kernel's module image for the driver JIT.
//
//go:embed compare.ptx
var PTX []byte

// KernelName is the kernel's symbol in PTX.
const KernelName = "mneme_compare"

// Modes of the kernel's mode argument (compare.cu's MODE_*).
const (
	ModeBitwise   uint32 = 0
	ModeTolerance uint32 = 1
)

// NoDifference is the initial value of the result word: the kernel only lowers it.
const NoDifference = math.MaxUint64

// Params are one comparison of n bytes.
type Params struct {
	Got, Want uint64 // device addresses
	N         uint64
	Elem      uint32 // 1, 4 or 8 bytes per element
	Mode      uint32
	ATol      float64
	RTol      float64
	Result    uint64 // device address of the u64 the kernel lowers
}

// ElemSize picks the element width: the float width (4 for f32, 8 for f64)
// in tolerance mode, else the widest word both addresses are aligned to. A
// tolerance comparison of misaligned data falls back to bytes, bitwise.
func ElemSize(mode uint32, dtypeBytes uint32, got, want uint64) (elem, effectiveMode uint32) {
	aligned := func(w uint64) bool { return got%w == 0 && want%w == 0 }
	if mode == ModeTolerance {
		if aligned(uint64(dtypeBytes)) {
			return dtypeBytes, ModeTolerance
		}
		return 1, ModeBitwise
	}
	switch {
	case aligned(8):
		return 8, ModeBitwise
	case aligned(4):
		return 4, ModeBitwise
	}
	return 1, ModeBitwise
}

// Args lays out the kernel's parameters as the driver wants them.
func (p Params) Args() [][]byte {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	return [][]byte{
		u64(p.Got), u64(p.Want), u64(p.N), u32(p.Elem), u32(p.Mode),
		u64(math.Float64bits(p.ATol)), u64(math.Float64bits(p.RTol)), u64(p.Result),
	}
}

// Validate rejects parameters the kernel cannot honour.
func (p Params) Validate() error {
	switch p.Elem {
	case 1, 4, 8:
	default:
		return fmt.Errorf("compare: element size %d: want 1, 4 or 8", p.Elem)
	}
	if p.Got%uint64(p.Elem) != 0 || p.Want%uint64(p.Elem) != 0 {
		return fmt.Errorf("compare: addresses 0x%x, 0x%x not aligned to %d bytes", p.Got, p.Want, p.Elem)
	}
	if p.Mode == ModeTolerance && p.Elem == 1 {
		return fmt.Errorf("compare: tolerance mode needs 4- or 8-byte elements")
	}
	if p.Mode != ModeBitwise && p.Mode != ModeTolerance {
		return fmt.Errorf("compare: mode %d unknown", p.Mode)
	}
	return nil
}

// within is the kernel's isclose.
func within(got, want, atol, rtol float64) bool {
	if got == want || (math.IsNaN(got) && math.IsNaN(want)) {
		return true
	}
	return math.Abs(got-want) <= atol+rtol*math.Abs(want)
}

// Reference compares got with want on the host exactly as the kernel does and
// returns the first differing byte offset, or NoDifference.
func Reference(got, want []byte, elem, mode uint32, atol, rtol float64) uint64 {
	n := uint64(min(len(got), len(want)))
	count := n / uint64(elem)
	for i := uint64(0); i < count; i++ {
		off := i * uint64(elem)
		var diff uint64
		same := true
		switch elem {
		case 8:
			g, w := binary.LittleEndian.Uint64(got[off:]), binary.LittleEndian.Uint64(want[off:])
			diff = g ^ w
			same = diff == 0 || (mode == ModeTolerance && within(math.Float64frombits(g), math.Float64frombits(w), atol, rtol))
		case 4:
			g, w := binary.LittleEndian.Uint32(got[off:]), binary.LittleEndian.Uint32(want[off:])
			diff = uint64(g ^ w)
			same = diff == 0 || (mode == ModeTolerance && within(float64(math.Float32frombits(g)), float64(math.Float32frombits(w)), atol, rtol))
		default:
			diff = uint64(got[off] ^ want[off])
			same = diff == 0
		}
		if same {
			continue
		}
		if mode == ModeBitwise {
			for diff&0xff == 0 {
				diff >>= 8
				off++
			}
		}
		return off
	}
	for off := count * uint64(elem); off < n; off++ {
		if got[off] != want[off] {
			return off
		}
	}
	return NoDifference
}
