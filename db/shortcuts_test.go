package db

import (
	"path/filepath"
	"slices"
	"testing"
)

// oneSidedPair is a prologue and an epilogue whose zero chunks differ: a
// window zero in the prologue only (the kernel filled fresh memory), one
// zero in the epilogue only (the kernel cleared it), ranges of either kind
// that start inside one walk window and end in the next, a chunk zero on
// one side inside a window that is not, and a window zero on both sides.
func oneSidedPair() (pro, epi *Snapshot) {
	const n = 3*blobWindowSize + 5*DiffGranule
	proA, epiA := make([]byte, n), make([]byte, n)
	fill := func(b []byte, from, to int, seed uint64) { copy(b[from:to], randomData(to-from, seed)) }
	// Window 0: zero in the prologue, written in the epilogue from its
	// fourth granule on (its first chunks stay zero).
	fill(epiA, 3*DiffGranule+100, blobWindowSize-DiffGranule, 1)
	// Window 1: data in both, the epilogue clears a range that crosses
	// into window 2.
	fill(proA, blobWindowSize, 3*blobWindowSize, 2)
	copy(epiA[blobWindowSize:], proA[blobWindowSize:3*blobWindowSize])
	clear(epiA[2*blobWindowSize-3*DiffGranule : 2*blobWindowSize+2*DiffGranule])
	// Window 2: one granule zero in the prologue only, inside data.
	clear(proA[2*blobWindowSize+8*DiffGranule : 2*blobWindowSize+9*DiffGranule])
	// The tail window: zero on both sides.
	proB, epiB := randomData(2*DiffGranule, 7), make([]byte, 2*DiffGranule) // cleared whole
	snap := func(a, b []byte) *Snapshot {
		return &Snapshot{Blobs: []Blob{
			{Addr: 0x100000000, Size: uint64(len(a)), Data: a},
			{Addr: 0x200000000, Size: uint64(len(b)), Data: b},
		}}
	}
	return snap(proA, proB), snap(epiA, epiB)
}

// The streamed comparison skips windows stored as zero chunks on both
// sides; a window zero on one side only must still be compared, with either
// side the zero one and with the two files written in different chunk
// sizes. The whole comparison is the reference.
func TestChangedRangesStreamWithZeroOnOneSide(t *testing.T) {
	pro, epi := oneSidedPair()
	want := ChangedRanges(pro, epi)
	if len(want) < 4 {
		t.Fatalf("the fixture changes too little: %v", want)
	}
	for _, cs := range [][2]int{{DiffGranule, DiffGranule}, {4 << 10, DiffGranule}, {DiffGranule, 1 << 20}, {1 << 20, 4 << 10}} {
		for _, swap := range []bool{false, true} {
			p, e := pro, epi
			if swap {
				p, e = epi, pro
			}
			dir := t.TempDir()
			pp, ep := filepath.Join(dir, "pro.mneme"), filepath.Join(dir, "epi.mneme")
			if _, err := WriteSnapshot(pp, p, SnapshotOptions{ChunkSize: cs[0], NoSync: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := WriteSnapshot(ep, e, SnapshotOptions{ChunkSize: cs[1], NoSync: true, Compress: true}); err != nil {
				t.Fatal(err)
			}
			ps, es := openStreams(t, pp, ep)
			got, err := ChangedRangesStream(ps, es)
			if err != nil {
				t.Fatal(err)
			}
			w := want
			if swap {
				w = ChangedRanges(p, e)
			}
			if !slices.Equal(got, w) {
				t.Errorf("chunk sizes %v, swapped %v: streamed ranges\n%v\nwant\n%v", cs, swap, got, w)
			}
		}
	}
}

// The walk reports a window's sides as zero exactly when each side is
// stored as zero chunks, one side or both.
func TestWalkBlobPairsZeroFlagsPerSide(t *testing.T) {
	pro, epi := oneSidedPair()
	dir := t.TempDir()
	pp, ep := filepath.Join(dir, "pro.mneme"), filepath.Join(dir, "epi.mneme")
	if _, err := WriteSnapshot(pp, pro, SnapshotOptions{ChunkSize: DiffGranule, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSnapshot(ep, epi, SnapshotOptions{ChunkSize: DiffGranule, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	ps, es := openStreams(t, pp, ep)
	type flags struct{ pro, epi bool }
	got := make(chan [3]any, 64)
	err := WalkBlobPairs(ps, es, func(w BlobWindow) error {
		got <- [3]any{w.Blob, w.Off, flags{w.ProZero, w.EpiZero}}
		return nil
	})
	close(got)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]uint64]flags{}
	for g := range got {
		seen[[2]uint64{uint64(g[0].(int)), g[1].(uint64)}] = g[2].(flags)
	}
	want := map[[2]uint64]flags{
		{0, 0}:                  {true, false},
		{0, blobWindowSize}:     {false, false},
		{0, 2 * blobWindowSize}: {false, false},
		{0, 3 * blobWindowSize}: {true, true},
		{1, 0}:                  {false, true},
	}
	for k, w := range want {
		if seen[k] != w {
			t.Errorf("blob %d window at %d: zero %+v, want %+v", k[0], k[1], seen[k], w)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("windows %v", seen)
	}
}
