package db

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

const refTestChunk = 4 << 10

// storedChunks writes a plain snapshot of one blob and returns where each of
// its chunks stored with data landed.
func storedChunks(t *testing.T, dir, name string, data []byte, compress bool) map[int]ChunkRef {
	t.Helper()
	refs := map[int]ChunkRef{}
	s := &Snapshot{Blobs: []Blob{{Addr: 0x10000, Size: uint64(len(data)), Data: data}}}
	opts := SnapshotOptions{ChunkSize: refTestChunk, Compress: compress, Stored: func(blob, chunk int, r ChunkRef) {
		if blob != 0 {
			t.Errorf("Stored: blob %d, want 0", blob)
		}
		r.File = name
		refs[chunk] = r
	}}
	if _, err := WriteSnapshot(filepath.Join(dir, name), s, opts); err != nil {
		t.Fatal(err)
	}
	return refs
}

// sourced is a blob written from Chunks: chunk i is taken from plan[i].
func sourced(addr uint64, size int, plan []SourceChunk, calls *[]int) Blob {
	return Blob{Addr: addr, Size: uint64(size), Chunks: func(i int) (SourceChunk, error) {
		*calls = append(*calls, i)
		return plan[i], nil
	}}
}

func TestChunkSourcesAndReferencesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	base := randomData(3*refTestChunk, 11)
	const first = "DeviceState.prologue.aaaaaaaaaaaaaaaa.0000000000000001.mneme"
	refs := storedChunks(t, dir, first, base, false)
	if len(refs) != 3 {
		t.Fatalf("Stored told of %d chunks, want 3: %v", len(refs), refs)
	}
	for i, r := range refs {
		if r.Offset < headerSize {
			t.Errorf("chunk %d stored at offset %d, inside the header", i, r.Offset)
		}
	}

	// The second snapshot: chunk 0 is base's chunk 2 by reference, chunk 1
	// is zero, chunk 2 new data, and a 100-byte tail.
	fresh := randomData(refTestChunk+100, 12)
	var done atomic.Int32
	r2 := refs[2]
	plan := []SourceChunk{
		{Ref: &r2},
		{Zero: true},
		{Data: fresh[:refTestChunk], Done: func() { done.Add(1) }},
		{Data: fresh[refTestChunk:], Done: func() { done.Add(1) }},
	}
	var calls []int
	const second = "DeviceState.epilogue.aaaaaaaaaaaaaaaa.0000000000000001.mneme"
	var stored []int
	s := &Snapshot{Blobs: []Blob{sourced(0x10000, 3*refTestChunk+100, plan, &calls)}, Args: [][]byte{{1, 2}}}
	if _, err := WriteSnapshot(filepath.Join(dir, second), s, SnapshotOptions{ChunkSize: refTestChunk, Stored: func(_, chunk int, _ ChunkRef) { stored = append(stored, chunk) }}); err != nil {
		t.Fatal(err)
	}
	if !slicesEqual(calls, []int{0, 1, 2, 3}) {
		t.Errorf("chunks asked for %v, want each once in order", calls)
	}
	if done.Load() != 2 {
		t.Errorf("Done called %d times, want once per data chunk (2)", done.Load())
	}
	if !slicesEqual(stored, []int{2, 3}) {
		t.Errorf("Stored told of chunks %v, want only the ones stored with data [2 3]", stored)
	}
	got, err := ReadSnapshot(filepath.Join(dir, second))
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte{}, base[2*refTestChunk:]...), make([]byte, refTestChunk)...), fresh...)
	if !bytes.Equal(got.Blobs[0].Data, want) {
		t.Fatal("the referenced snapshot does not read back as the bytes it was written from")
	}
	hdr, _ := os.ReadFile(filepath.Join(dir, second))
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != snapshotVersionRefs {
		t.Errorf("a snapshot written from chunk sources has version %d, want %d", v, snapshotVersionRefs)
	}
	// Read from memory, outside any database, the reference cannot resolve.
	if _, err := DecodeSnapshotBytes(hdr); err == nil || !strings.Contains(err.Error(), "not read from a database") {
		t.Errorf("decoding a referencing snapshot outside its database: %v", err)
	}
}

func TestReferenceToCompressedChunk(t *testing.T) {
	dir := t.TempDir()
	base := floatData(2 * refTestChunk)
	const first = "DeviceState.prologue.bbbbbbbbbbbbbbbb.0000000000000001.mneme"
	refs := storedChunks(t, dir, first, base, true)
	r := refs[1]
	var calls []int
	s := &Snapshot{Blobs: []Blob{sourced(0x20000, refTestChunk, []SourceChunk{{Ref: &r}}, &calls)}}
	path := filepath.Join(dir, "DeviceState.epilogue.bbbbbbbbbbbbbbbb.0000000000000001.mneme")
	if _, err := WriteSnapshot(path, s, SnapshotOptions{ChunkSize: refTestChunk}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Blobs[0].Data, base[refTestChunk:]) {
		t.Fatal("a reference to a compressed chunk does not decode to its bytes")
	}
}

// TestBadReferencesAreRefused: every way a reference can point at the wrong
// thing is an error naming the chunk, never wrong bytes.
func TestBadReferencesAreRefused(t *testing.T) {
	dir := t.TempDir()
	base := randomData(2*refTestChunk, 21)
	const first = "DeviceState.prologue.cccccccccccccccc.0000000000000001.mneme"
	refs := storedChunks(t, dir, first, base, false)
	// A snapshot holding a reference, to point another one at.
	r0 := refs[0]
	var calls []int
	const middle = "DeviceState.prologue.cccccccccccccccc.0000000000000002.mneme"
	refHolder := &Snapshot{Blobs: []Blob{sourced(0x30000, refTestChunk, []SourceChunk{{Ref: &r0}}, &calls)}}
	if _, err := WriteSnapshot(filepath.Join(dir, middle), refHolder, SnapshotOptions{ChunkSize: refTestChunk}); err != nil {
		t.Fatal(err)
	}
	// The offset of middle's only chunk header: after the header (24), the
	// global count (8), the blob count (8) and the blob's three fields (24).
	middleChunk := int64(headerSize + 8 + 8 + 24)
	cases := []struct {
		name string
		ref  ChunkRef
		want string
	}{
		{"missing file", ChunkRef{File: "DeviceState.prologue.dddddddddddddddd.0000000000000009.mneme", Offset: r0.Offset, Sum: r0.Sum}, "no such file"},
		{"wrong checksum", ChunkRef{File: first, Offset: r0.Offset, Sum: r0.Sum ^ 1}, "no chunk with checksum"},
		{"offset past the end", ChunkRef{File: first, Offset: 1 << 30, Sum: r0.Sum}, "past the end"},
		{"offset into data", ChunkRef{File: first, Offset: r0.Offset + chunkHeader + 8, Sum: r0.Sum}, "no chunk with checksum"},
		{"reference to a reference", ChunkRef{File: middle, Offset: middleChunk, Sum: r0.Sum}, "cannot hold"},
		{"a path", ChunkRef{File: "../DeviceState.x.mneme", Offset: r0.Offset, Sum: r0.Sum}, "not a snapshot of this database"},
		{"not a snapshot name", ChunkRef{File: "RecordedIR_aaaaaaaaaaaaaaaa.bc", Offset: r0.Offset, Sum: r0.Sum}, "not a snapshot of this database"},
		{"offset in the header", ChunkRef{File: first, Offset: 8, Sum: r0.Sum}, "not a snapshot of this database"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := c.ref
			var calls []int
			s := &Snapshot{Blobs: []Blob{sourced(0x40000, refTestChunk, []SourceChunk{{Ref: &ref}}, &calls)}}
			path := filepath.Join(dir, "DeviceState.epilogue.eeeeeeeeeeeeeeee.00000000000000"+string(rune('a'+i))+"0.mneme")
			if _, err := WriteSnapshot(path, s, SnapshotOptions{ChunkSize: refTestChunk}); err != nil {
				t.Fatal(err)
			}
			_, err := ReadSnapshot(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "blob 0x40000 chunk 0") {
				t.Errorf("the error does not name the chunk: %v", err)
			}
		})
	}
}

func TestVersionOneSnapshotMayNotHoldReferences(t *testing.T) {
	dir := t.TempDir()
	refs := storedChunks(t, dir, "DeviceState.prologue.ffffffffffffffff.0000000000000001.mneme", randomData(refTestChunk, 3), false)
	r := refs[0]
	r.File = "DeviceState.prologue.ffffffffffffffff.0000000000000001.mneme"
	var calls []int
	s := &Snapshot{Blobs: []Blob{sourced(0x50000, refTestChunk, []SourceChunk{{Ref: &r}}, &calls)}}
	path := filepath.Join(dir, "DeviceState.epilogue.ffffffffffffffff.0000000000000001.mneme")
	if _, err := WriteSnapshot(path, s, SnapshotOptions{ChunkSize: refTestChunk}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	binary.LittleEndian.PutUint32(data[8:], FormatVersion)
	skipMetaChecksum = true // reach the chunk check behind the checksum
	defer func() { skipMetaChecksum = false }()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadSnapshot(path)
	if err == nil || !strings.Contains(err.Error(), "only blobs of version 2") {
		t.Fatalf("a version 1 file with a reference: %v", err)
	}
}

// TestChunkSourceErrors: a failing or inconsistent source ends the write
// with an error naming the blob, and every chunk handed over is given back.
func TestChunkSourceErrors(t *testing.T) {
	dir := t.TempDir()
	boom := errors.New("copy failed")
	for _, workers := range []int{1, 8} {
		var given, back atomic.Int32
		n := 40
		s := &Snapshot{Blobs: []Blob{{Addr: 0x60000, Size: uint64(n * refTestChunk), Chunks: func(i int) (SourceChunk, error) {
			if i == 17 {
				return SourceChunk{}, boom
			}
			given.Add(1)
			return SourceChunk{Data: randomData(refTestChunk, uint64(i)), Done: func() { back.Add(1) }}, nil
		}}}}
		var buf bytes.Buffer
		err := encodeWithWorkers(&buf, s, SnapshotOptions{ChunkSize: refTestChunk}, workers)
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "blob 0x60000") {
			t.Errorf("workers %d: got %v, want the source's error naming the blob", workers, err)
		}
		if given.Load() != back.Load() {
			t.Errorf("workers %d: %d chunks handed over, %d given back", workers, given.Load(), back.Load())
		}
	}
	short := &Snapshot{Blobs: []Blob{{Addr: 0x70000, Size: 2 * refTestChunk, Chunks: func(i int) (SourceChunk, error) {
		return SourceChunk{Data: make([]byte, 10)}, nil
	}}}}
	if _, err := WriteSnapshot(filepath.Join(dir, "x"), short, SnapshotOptions{ChunkSize: refTestChunk}); err == nil || !strings.Contains(err.Error(), "10 bytes, want 4096") {
		t.Errorf("a chunk of the wrong length: %v", err)
	}
	both := &Snapshot{Blobs: []Blob{{Addr: 0x80000, Size: 1, Data: []byte{1}, Chunks: func(int) (SourceChunk, error) { return SourceChunk{}, nil }}}}
	if _, err := WriteSnapshot(filepath.Join(dir, "y"), both, SnapshotOptions{}); err == nil {
		t.Error("a blob with both Data and Chunks was written")
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
