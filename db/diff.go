package db

import (
	"bytes"
	"sort"
)

// DiffGranule is the unit ChangedRanges compares in: 64 KiB keeps the list
// short for big arrays while a reset copies little more than was written.
const DiffGranule = 64 << 10

// Range is a span of device memory that a kernel changed. For a heap blob,
// Global is empty, Addr is the device address and Offset the offset inside
// the blob that starts at Addr-Offset. For a device global, Global names it,
// Addr is its address in the recording and Offset the offset inside it (replay
// adds Offset to the global's address in the compiled module).
type Range struct {
	Addr   uint64
	Size   uint64
	Global string
	Offset uint64
}

// ChangedRanges lists the memory whose bytes differ between the prologue and
// the epilogue, in DiffGranule units, adjacent granules merged. Resetting
// these ranges to the prologue undoes everything the kernel wrote. A blob or
// global present in only one snapshot, or with a different size, is reported
// whole (from the epilogue, or the prologue if it is only there).
func ChangedRanges(pro, epi *Snapshot) []Range {
	var out []Range
	proBlobs := make(map[uint64]*Blob, len(pro.Blobs))
	for i := range pro.Blobs {
		proBlobs[pro.Blobs[i].Addr] = &pro.Blobs[i]
	}
	seen := make(map[uint64]bool, len(epi.Blobs))
	for i := range epi.Blobs {
		e := &epi.Blobs[i]
		seen[e.Addr] = true
		p := proBlobs[e.Addr]
		if p == nil || p.Size != e.Size {
			out = appendWhole(out, e.Addr, e.Size, "")
			continue
		}
		out = appendDiff(out, p.Data, e.Data, e.Addr, "")
	}
	for i := range pro.Blobs {
		if p := &pro.Blobs[i]; !seen[p.Addr] {
			out = appendWhole(out, p.Addr, p.Size, "")
		}
	}
	proGlobals := make(map[string]*Global, len(pro.Globals))
	for i := range pro.Globals {
		proGlobals[pro.Globals[i].Name] = &pro.Globals[i]
	}
	seenG := make(map[string]bool, len(epi.Globals))
	for i := range epi.Globals {
		e := &epi.Globals[i]
		seenG[e.Name] = true
		p := proGlobals[e.Name]
		if p == nil || p.Size != e.Size {
			out = appendWhole(out, e.Addr, e.Size, e.Name)
			continue
		}
		out = appendDiff(out, p.Data, e.Data, e.Addr, e.Name)
	}
	for i := range pro.Globals {
		if p := &pro.Globals[i]; !seenG[p.Name] {
			out = appendWhole(out, p.Addr, p.Size, p.Name)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Global == "") != (out[j].Global == "") {
			return out[i].Global == "" // heap first
		}
		if out[i].Global != out[j].Global {
			return out[i].Global < out[j].Global
		}
		return out[i].Addr < out[j].Addr
	})
	return out
}

func appendWhole(out []Range, addr, size uint64, global string) []Range {
	if size == 0 {
		return out
	}
	return append(out, Range{Addr: addr, Size: size, Global: global})
}

// appendDiff compares a and b (same length) granule by granule.
func appendDiff(out []Range, a, b []byte, base uint64, global string) []Range {
	open := false
	for off := 0; off < len(a); off += DiffGranule {
		end := min(off+DiffGranule, len(a))
		if bytes.Equal(a[off:end], b[off:end]) {
			open = false
			continue
		}
		if open {
			out[len(out)-1].Size += uint64(end - off)
			continue
		}
		out = append(out, Range{Addr: base + uint64(off), Size: uint64(end - off), Global: global, Offset: uint64(off)})
		open = true
	}
	return out
}
