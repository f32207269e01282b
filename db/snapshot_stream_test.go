package db

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// streamPair writes a prologue and an epilogue of the same two blobs, the
// first larger than two walk windows, with changes that cross a window
// boundary, sit in the last granule, and appear in a blob's zero tail.
func streamPair(t *testing.T, opts SnapshotOptions) (pro, epi *Snapshot, proPath, epiPath string) {
	t.Helper()
	big := floatData(9<<20 + 12345)
	copy(big[5<<20:], make([]byte, 2<<20)) // zero chunks in the middle
	small := randomData(70000, 5)
	// The two snapshots differ only in their data.
	snapshot := func(last byte, big, small []byte) *Snapshot {
		return &Snapshot{
			Globals: []Global{{Name: "g", Addr: 0x9000, Size: 8, Data: []byte{1, 2, 3, 4, 5, 6, 7, last}}},
			Blobs: []Blob{
				{Addr: 0x100000000, Size: uint64(len(big)), Data: big},
				{Addr: 0x200000000, Size: uint64(len(small)), Data: small},
				{Addr: 0x300000000, Size: 3 << 20, Data: make([]byte, 3<<20)},
			},
			Args: [][]byte{{1, 0, 0, 0}},
		}
	}
	pro = snapshot(8, big, small)
	epiBig := slices.Clone(big)
	for _, at := range []int{blobWindowSize - 10, blobWindowSize + 70000, 5<<20 + 100, len(big) - 1} {
		epiBig[at] ^= 0xff
	}
	epiSmall := slices.Clone(small)
	epiSmall[0] ^= 1
	epi = snapshot(9, epiBig, epiSmall)
	dir := t.TempDir()
	proPath, epiPath = filepath.Join(dir, "pro.mneme"), filepath.Join(dir, "epi.mneme")
	opts.NoSync = true
	if _, err := WriteSnapshot(proPath, pro, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSnapshot(epiPath, epi, opts); err != nil {
		t.Fatal(err)
	}
	return pro, epi, proPath, epiPath
}

func openStreams(t *testing.T, proPath, epiPath string) (*SnapshotStream, *SnapshotStream) {
	t.Helper()
	ps, err := OpenSnapshotStream(proPath, SnapshotLimits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	es, err := OpenSnapshotStream(epiPath, SnapshotLimits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { es.Close() })
	return ps, es
}

func TestStreamReadsWhatTheWholeDecodeReads(t *testing.T) {
	for _, opts := range []SnapshotOptions{{}, {Compress: true, ChunkSize: 64 << 10}, {Compress: true, Fast: true, ChunkSize: 4 << 10}} {
		pro, _, proPath, epiPath := streamPair(t, opts)
		ps, _ := openStreams(t, proPath, epiPath)
		if ps.Snapshot.Blobs[0].Data != nil {
			t.Fatal("a stream holds its blobs' data")
		}
		if !bytes.Equal(ps.Snapshot.Globals[0].Data, pro.Globals[0].Data) || !bytes.Equal(ps.Snapshot.Args[0], pro.Args[0]) {
			t.Fatalf("chunk size %d: globals or arguments do not read back", opts.ChunkSize)
		}
		for i, b := range pro.Blobs {
			// Whole, and in windows that cut chunks at odd offsets.
			for _, step := range []uint64{b.Size, 1<<20 + 3, 4097} {
				for off := uint64(0); off < b.Size; off += step {
					n := min(step, b.Size-off)
					got := bytes.Repeat([]byte{0xaa}, int(n))
					zero, err := ps.ReadBlob(i, off, got)
					if err != nil {
						t.Fatal(err)
					}
					want := b.Data[off : off+n]
					if !bytes.Equal(got, want) {
						t.Fatalf("chunk size %d: blob %d bytes %d+%d differ from the written data", opts.ChunkSize, i, off, n)
					}
					if zero && !bytes.Equal(want, make([]byte, n)) {
						t.Fatalf("blob %d bytes %d+%d reported zero but are not", i, off, n)
					}
				}
			}
		}
		if zero, err := ps.ReadBlob(2, 0, make([]byte, 1<<20)); err != nil || !zero {
			t.Errorf("a blob of zero chunks: zero %v, %v", zero, err)
		}
		if _, err := ps.ReadBlob(1, 69999, make([]byte, 2)); err == nil || !strings.Contains(err.Error(), "outside") {
			t.Errorf("a read past the blob's end: %v", err)
		}
		if _, err := ps.ReadBlob(3, 0, nil); err == nil || !strings.Contains(err.Error(), "no blob 3") {
			t.Errorf("a read of a blob that does not exist: %v", err)
		}
	}
}

func TestChangedRangesStreamMatchesTheWholeComparison(t *testing.T) {
	for _, opts := range []SnapshotOptions{{}, {Compress: true, ChunkSize: 16 << 10}} {
		pro, epi, proPath, epiPath := streamPair(t, opts)
		ps, es := openStreams(t, proPath, epiPath)
		got, err := ChangedRangesStream(ps, es)
		if err != nil {
			t.Fatal(err)
		}
		want := ChangedRanges(pro, epi)
		if !slices.Equal(got, want) {
			t.Fatalf("chunk size %d: streamed ranges\n%v\nwant\n%v", opts.ChunkSize, got, want)
		}
		if len(want) < 5 {
			t.Fatalf("the fixture changes too little to test window joins: %v", want)
		}
	}
}

func TestStreamFindsACorruptChunkInTheWalk(t *testing.T) {
	_, _, proPath, epiPath := streamPair(t, SnapshotOptions{})
	data, err := os.ReadFile(epiPath)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte well inside the first blob's payload (raw chunks).
	data[len(data)/3] ^= 0x40
	if err := os.WriteFile(epiPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ps, es := openStreams(t, proPath, epiPath)
	_, err = ChangedRangesStream(ps, es)
	if err == nil || !strings.Contains(err.Error(), "epi.mneme") || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("a flipped payload byte: %v", err)
	}
}

func TestStreamOfAZeroBombTakesNoMemory(t *testing.T) {
	// 64 GiB of zero chunks on each side: the walk reads nothing, compares
	// nothing and holds no buffer of that size.
	dir := t.TempDir()
	path := filepath.Join(dir, "bomb.mneme")
	if err := os.WriteFile(path, zeroBlobSnapshot(t, 0x100000000, 64<<30), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, es := openStreams(t, path, path)
	start := time.Now()
	// fn runs on several goroutines at once: the count is atomic.
	var windows atomic.Int64
	err := WalkBlobPairs(ps, es, func(w BlobWindow) error {
		if !w.ProZero || !w.EpiZero || w.Pro != nil {
			t.Errorf("window %d: zero %v/%v, bytes given", w.Off, w.ProZero, w.EpiZero)
		}
		windows.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Windows are at least a chunk (64 MiB here).
	if want := int64(64 << 30 / max(blobWindowSize, maxChunkSize)); windows.Load() != want {
		t.Errorf("%d windows, want %d", windows.Load(), want)
	}
	t.Logf("64 GiB of zero chunks walked in %v", time.Since(start))
}

// zeroBlobSnapshot encodes one blob of size bytes stored as zero chunks
// (64 MiB each), without ever holding its bytes.
func zeroBlobSnapshot(t *testing.T, addr, size uint64) []byte {
	t.Helper()
	s := &Snapshot{Blobs: []Blob{{Addr: addr, Size: size, Chunks: func(int) (SourceChunk, error) { return SourceChunk{Zero: true}, nil }}}}
	var buf bytes.Buffer
	if err := encodeWithWorkers(&buf, s, SnapshotOptions{ChunkSize: maxChunkSize}, 1); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
