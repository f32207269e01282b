package replay

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/replay/internal/compare"
)

// bufferType is what the kernel's IR says about the writes that may reach
// one recorded buffer.
type bufferType struct {
	elem compare.ElemType
	// atomicSum marks a buffer written by float atomicrmw fadd or fsub:
	// its values are sums whose rounding depends on the order of arrival.
	atomicSum bool
	// written says a write of the kernel was traced to this buffer (writes
	// through untraceable pointers only make its type less specific).
	written bool
	args    []int // the pointer arguments that point into it
}

// elemTypeOf maps an IR scalar type to the element type it stores.
func elemTypeOf(irType string) compare.ElemType {
	switch irType {
	case "half":
		return compare.F16
	case "bfloat":
		return compare.BF16
	case "float":
		return compare.F32
	case "double":
		return compare.F64
	}
	return compare.Untyped
}

// bufferTypes maps a kernel's writes onto the recorded buffers: a pointer
// argument's (or a by-value argument's pointer field's) recorded value
// selects the allocation it falls in; globals match by name. A buffer
// takes the float type that every write that may reach it stores; a write
// through a pointer that cannot be traced (or that falls in no recorded
// allocation) may reach every buffer. Mixed, integer, untyped or no writes
// leave a buffer untyped, which compares bitwise. kw nil (no analysis)
// leaves every buffer untyped.
func bufferTypes(kw *llvm.KernelWrites, args [][]byte, blobs []blobSlot, globals []globalSlot) (blobTypes, globalTypes []bufferType) {
	blobTypes = make([]bufferType, len(blobs))
	globalTypes = make([]bufferType, len(globals))
	if kw == nil {
		return blobTypes, globalTypes
	}
	type acc struct {
		types map[compare.ElemType]bool
		any   bool
	}
	blobAcc, globalAcc := make([]acc, len(blobs)), make([]acc, len(globals))
	blobAt := func(addr uint64) int {
		for i, b := range blobs {
			if addr >= b.Addr && addr < b.Addr+b.Size {
				return i
			}
		}
		return -1
	}
	pointerAt := func(arg int, off int64) (uint64, bool) {
		if arg < 0 || arg >= len(args) || off < 0 || int(off)+8 > len(args[arg]) {
			return 0, false
		}
		return binary.LittleEndian.Uint64(args[arg][off:]), true
	}
	note := func(a *acc, t *bufferType, w llvm.Write, direct bool) {
		if a.types == nil {
			a.types = map[compare.ElemType]bool{}
		}
		e := elemTypeOf(w.Type)
		a.types[e] = true
		a.any = true
		if e != compare.Untyped && w.Kind == llvm.WriteAtomicRMW && (w.Op == "fadd" || w.Op == "fsub") {
			t.atomicSum = true
		}
		if direct {
			t.written = true
		}
	}
	everywhere := func(w llvm.Write) {
		for i := range blobs {
			note(&blobAcc[i], &blobTypes[i], w, false)
		}
		for i := range globals {
			note(&globalAcc[i], &globalTypes[i], w, false)
		}
	}
	for _, s := range kw.Writes {
		switch s.Base.Kind {
		case llvm.BaseParam, llvm.BaseParamField:
			p := s.Base.Param
			if s.Base.Kind == llvm.BaseParam && p >= 0 && p < len(kw.Params) && kw.Params[p].ByVal {
				continue // the kernel's own copy of a by-value argument
			}
			off := s.Base.Offset
			if s.Base.Kind == llvm.BaseParam && (p >= len(kw.Params) || kw.Params[p].Kind != llvm.ParamPointer) {
				everywhere(s.Write)
				continue
			}
			addr, ok := pointerAt(p, off)
			i := blobAt(addr)
			if !ok || i < 0 {
				// A null, foreign or global-pointing argument: it may alias anything.
				everywhere(s.Write)
				continue
			}
			note(&blobAcc[i], &blobTypes[i], s.Write, true)
		case llvm.BaseGlobal:
			for i, g := range globals {
				if g.Name == s.Base.Global {
					note(&globalAcc[i], &globalTypes[i], s.Write, true)
				}
			}
		default:
			everywhere(s.Write)
		}
	}
	settle := func(a acc, t *bufferType) {
		if len(a.types) == 1 {
			for e := range a.types {
				t.elem = e
			}
		}
		if t.elem == compare.Untyped {
			t.atomicSum = false
		}
	}
	for i := range blobs {
		settle(blobAcc[i], &blobTypes[i])
	}
	for i := range globals {
		settle(globalAcc[i], &globalTypes[i])
	}
	for p, prm := range kw.Params {
		if prm.Kind != llvm.ParamPointer {
			continue
		}
		if addr, ok := pointerAt(p, 0); ok {
			if i := blobAt(addr); i >= 0 {
				blobTypes[i].args = append(blobTypes[i].args, p)
			}
		}
	}
	return blobTypes, globalTypes
}

// Bounds of verification mode auto, for buffers of one float type written
// by plain stores. A recompiled configuration changes the rounding of a
// few operations per element (fma contraction, reassociated reductions,
// other intrinsics): each changes a result by about one unit in the last
// place, and a chain of dependent operations lets that grow. The relative
// bound allows about a hundred such roundings (1e-5 is 84 f32 epsilons,
// 1e-13 is 450 f64 epsilons: double code tends to run longer chains before
// its result is stored); the ULP bound covers tiny and subnormal values,
// where a relative bound means nothing. f16 and bf16 results are almost
// always computed in f32 and rounded once on store, so a few ULP of the
// narrow type suffice; their relative bound is about two epsilons.
var autoBounds = map[compare.ElemType]compare.Bounds{
	compare.F64:  {ULP: 16, Rel: 1e-13},
	compare.F32:  {ULP: 16, Rel: 1e-5},
	compare.F16:  {ULP: 4, Rel: 2e-3},
	compare.BF16: {ULP: 4, Rel: 1.6e-2},
}

// atomicSumBounds widens the auto bounds of a buffer that float atomics
// accumulate into. Each element is a sum of n contributions added in the
// order they arrive, which changes between runs; the rounding error of such
// a sum grows like sqrt(n) epsilons relative to the magnitude of the
// summands (a random walk of roundings), so the relative bound scales by
// sqrt(n), n estimated as the recorded launch's threads per element. The
// widening stops at 100 times, where it would stop being a check. Sums that
// cancel to near zero keep the error of their large summands, so the bound
// is also absolute, relative to the largest recorded magnitude in the
// buffer.
func atomicSumBounds(base compare.Bounds, threads uint64, elements uint64, magnitude float64) compare.Bounds {
	n := 1.0
	if elements > 0 && threads > elements {
		n = float64(threads) / float64(elements)
	}
	widen := math.Min(math.Sqrt(n), 100)
	b := base
	b.Rel = base.Rel * widen
	b.Abs = b.Rel * magnitude
	return b
}

// blobMagnitude is maxMagnitude of allocation i as the snapshot holds it,
// read window by window.
func blobMagnitude(st *db.SnapshotStream, i int, t compare.ElemType) (float64, error) {
	if t == compare.Untyped {
		return 0, nil
	}
	size := st.Snapshot.Blobs[i].Size
	buf := make([]byte, min(size, magnitudeWindow))
	var m float64
	for off := uint64(0); off < size; off += magnitudeWindow {
		w := buf[:min(magnitudeWindow, size-off)]
		zero, err := st.ReadBlob(i, off, w)
		if err != nil {
			return 0, err
		}
		if !zero {
			m = max(m, maxMagnitude(w, t))
		}
	}
	return m, nil
}

// magnitudeWindow is what blobMagnitude reads at once (a multiple of every
// element size).
const magnitudeWindow = 4 << 20

// maxMagnitude is the largest finite |value| among the elements of data.
func maxMagnitude(data []byte, t compare.ElemType) float64 {
	if t == compare.Untyped {
		return 0
	}
	size := t.Size()
	var m float64
	for off := 0; off+size <= len(data); off += size {
		if v := math.Abs(compare.Decode(t, data[off:off+size])); v > m && !math.IsInf(v, 0) {
			m = v
		}
	}
	return m
}

// bufferName names an allocation and the arguments that point into it.
func bufferName(addr uint64, args []int) string {
	name := fmt.Sprintf("allocation 0x%x", addr)
	if len(args) > 0 {
		parts := make([]string, len(args))
		for i, a := range args {
			parts[i] = fmt.Sprint(a)
		}
		word := "arg"
		if len(args) > 1 {
			word = "args"
		}
		name += " (" + word + " " + strings.Join(parts, ", ") + ")"
	}
	return name
}
