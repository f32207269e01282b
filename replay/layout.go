package replay

import (
	"fmt"
	"sort"

	"github.com/mneme-gpu/mneme/db"
)

// copyAlign aligns every region inside the device copies of the prologue and
// epilogue, so the comparison kernel can read them in 8-byte words.
const copyAlign = 256

func alignUp(v, a uint64) uint64   { return (v + a - 1) / a * a }
func alignDown(v, a uint64) uint64 { return v / a * a }

// span is a device address range.
type span struct{ Addr, Size uint64 }

func (s span) end() uint64 { return s.Addr + s.Size }

// layout places the recorded memory: the heap allocations (blobs) at their
// recorded addresses inside the arena, and one device buffer each for the
// prologue and epilogue images of blobs and globals at the offsets below.
type layout struct {
	blobs     []blobSlot
	globals   []globalSlot
	copyBytes uint64 // size of each device copy
}

type blobSlot struct {
	Addr, Size uint64 // where the allocation lives in the arena
	Off        uint64 // where its image lives in the device copies
}

type globalSlot struct {
	Name    string
	Size    uint64
	Off     uint64
	Changed bool // the recording shows the kernel changed it
}

func planLayout(pro, epi *db.Snapshot) layout {
	var l layout
	off := uint64(0)
	for _, b := range pro.Blobs {
		l.blobs = append(l.blobs, blobSlot{Addr: b.Addr, Size: b.Size, Off: off})
		off = alignUp(off+b.Size, copyAlign)
	}
	for i, g := range pro.Globals {
		changed := string(g.Data) != string(epi.Globals[i].Data)
		l.globals = append(l.globals, globalSlot{Name: g.Name, Size: g.Size, Off: off, Changed: changed})
		off = alignUp(off+g.Size, copyAlign)
	}
	l.copyBytes = max(off, copyAlign)
	return l
}

// planMappings is the physical memory to map in the arena: the blobs'
// ranges rounded out to the allocation granularity and merged. Every blob
// must lie inside the recorded arena [base, base+size).
func planMappings(blobs []blobSlot, base, size, gran uint64) ([]span, error) {
	if gran == 0 {
		return nil, fmt.Errorf("allocation granularity 0")
	}
	var out []span
	for _, b := range blobs {
		if b.Size == 0 {
			continue
		}
		if b.Addr < base || b.Addr+b.Size > base+size || b.Addr+b.Size < b.Addr {
			return nil, inputErr("allocation 0x%x (%d bytes) lies outside the recorded arena 0x%x..0x%x", b.Addr, b.Size, base, base+size)
		}
		out = append(out, span{alignDown(b.Addr, gran), alignUp(b.Addr+b.Size, gran) - alignDown(b.Addr, gran)})
	}
	return mergeSpans(out, 0), nil
}

// mergeSpans sorts spans and merges those that overlap or lie less than gap
// bytes apart.
func mergeSpans(in []span, gap uint64) []span {
	if len(in) == 0 {
		return nil
	}
	s := append([]span(nil), in...)
	sort.Slice(s, func(i, j int) bool { return s[i].Addr < s[j].Addr })
	out := []span{s[0]}
	for _, r := range s[1:] {
		last := &out[len(out)-1]
		if r.Addr <= last.end()+gap {
			if r.end() > last.end() {
				last.Size = r.end() - last.Addr
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// resetCopy is one device-to-device copy that restores part of a blob.
type resetCopy struct {
	Dst    uint64 // arena address
	SrcOff uint64 // offset in the prologue copy
	Size   uint64
}

// Reset copies are merged when closer than resetGap, and merged further
// while there are more than maxResetCopies: each copy costs a few
// microseconds of driver time, copying a gap costs next to nothing.
const (
	resetGap       = 64 << 10
	maxResetCopies = 32
)

// planPartialReset turns the changed ranges (prologue vs epilogue) into the
// copies that bring the blobs back to the prologue, assuming the kernel
// writes nothing else (which the first, verified run shows).
func planPartialReset(blobs []blobSlot, changed []db.Range) []resetCopy {
	var out []resetCopy
	for _, b := range blobs {
		var in []span
		for _, c := range changed {
			if c.Global != "" {
				continue // globals live in the compiled module; they are reset whole
			}
			lo, hi := max(c.Addr, b.Addr), min(c.Addr+c.Size, b.Addr+b.Size)
			if lo < hi {
				in = append(in, span{lo, hi - lo})
			}
		}
		gap := uint64(resetGap)
		merged := mergeSpans(in, gap)
		for len(merged) > maxResetCopies {
			gap *= 4
			merged = mergeSpans(merged, gap)
		}
		for _, m := range merged {
			out = append(out, resetCopy{Dst: m.Addr, SrcOff: b.Off + (m.Addr - b.Addr), Size: m.Size})
		}
	}
	return out
}

// planFullReset restores every blob.
func planFullReset(blobs []blobSlot) []resetCopy {
	out := make([]resetCopy, 0, len(blobs))
	for _, b := range blobs {
		if b.Size > 0 {
			out = append(out, resetCopy{Dst: b.Addr, SrcOff: b.Off, Size: b.Size})
		}
	}
	return out
}

// unchangedSpans are the parts of blob b outside the reset copies: where the
// recording shows prologue == epilogue. A tolerance-verified run must leave
// them bitwise intact before a partial reset may be trusted.
func unchangedSpans(b blobSlot, resets []resetCopy) []span {
	var covered []span
	for _, r := range resets {
		lo, hi := max(r.Dst, b.Addr), min(r.Dst+r.Size, b.Addr+b.Size)
		if lo < hi {
			covered = append(covered, span{lo, hi - lo})
		}
	}
	covered = mergeSpans(covered, 0)
	var out []span
	at := b.Addr
	for _, c := range covered {
		if c.Addr > at {
			out = append(out, span{at, c.Addr - at})
		}
		at = c.end()
	}
	if end := b.Addr + b.Size; at < end {
		out = append(out, span{at, end - at})
	}
	return out
}
