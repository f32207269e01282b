package db

import (
	"bytes"
	"cmp"
	"slices"
	"sort"
	"sync"
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
	blobs := func(s *Snapshot) []region {
		out := make([]region, len(s.Blobs))
		for i, b := range s.Blobs {
			out[i] = region{addr: b.Addr, size: b.Size, data: b.Data}
		}
		return out
	}
	globals := func(s *Snapshot) []region {
		out := make([]region, len(s.Globals))
		for i, g := range s.Globals {
			out[i] = region{addr: g.Addr, size: g.Size, data: g.Data, global: g.Name}
		}
		return out
	}
	// Heap blocks are matched by address, globals by name.
	out := diffRegions(nil, blobs(pro), blobs(epi), func(r region) uint64 { return r.addr })
	out = diffRegions(out, globals(pro), globals(epi), func(r region) string { return r.global })
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

// ChangedRangesStream is ChangedRanges of two streamed snapshots of the
// same allocations. Their blobs are decoded window by window on all cores,
// never whole, so this also verifies every chunk of both files.
func ChangedRangesStream(pro, epi *SnapshotStream) ([]Range, error) {
	var (
		mu    sync.Mutex
		blobs []Range
	)
	err := WalkBlobPairs(pro, epi, func(w BlobWindow) error {
		if w.ProZero && w.EpiZero {
			return nil
		}
		r := appendDiff(nil, w.Pro, w.Epi, pro.Snapshot.Blobs[w.Blob].Addr+w.Off, "")
		for i := range r {
			r[i].Offset += w.Off
		}
		mu.Lock()
		blobs = append(blobs, r...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(blobs, func(a, b Range) int { return cmp.Compare(a.Addr, b.Addr) })
	// Windows split runs of changed granules: join them again, within a blob.
	var out []Range
	for _, r := range blobs {
		if n := len(out); n > 0 && out[n-1].Addr+out[n-1].Size == r.Addr && out[n-1].Offset+out[n-1].Size == r.Offset {
			out[n-1].Size += r.Size
			continue
		}
		out = append(out, r)
	}
	// The blobs carry no data here: ChangedRanges adds the globals only.
	return append(out, ChangedRanges(pro.Snapshot, epi.Snapshot)...), nil
}

// region is a heap block or a device global as ChangedRanges compares them.
type region struct {
	addr, size uint64
	data       []byte
	global     string // the global's name; "" for heap blocks
}

// diffRegions appends what differs between the prologue's and the
// epilogue's regions, matched by key: the differing bytes of a region in
// both, and the whole of a region in only one or resized.
func diffRegions[K comparable](out []Range, pro, epi []region, key func(region) K) []Range {
	before := make(map[K]region, len(pro))
	for _, p := range pro {
		before[key(p)] = p
	}
	seen := make(map[K]bool, len(epi))
	for _, e := range epi {
		seen[key(e)] = true
		p, ok := before[key(e)]
		if !ok || p.size != e.size {
			out = appendWhole(out, e.addr, e.size, e.global)
			continue
		}
		out = appendDiff(out, p.data, e.data, e.addr, e.global)
	}
	for _, p := range pro {
		if !seen[key(p)] {
			out = appendWhole(out, p.addr, p.size, p.global)
		}
	}
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
