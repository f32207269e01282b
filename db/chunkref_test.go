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

// storedChunks writes a plain snapshot of one blob (no globals) and returns
// references to its chunks.
func storedChunks(t *testing.T, dir, name string, data []byte, compress bool) []ChunkRef {
	t.Helper()
	s := &Snapshot{Blobs: []Blob{{Addr: 0x10000, Size: uint64(len(data)), Data: data}}}
	if _, err := WriteSnapshot(filepath.Join(dir, name), s, SnapshotOptions{ChunkSize: refTestChunk, Compress: compress}); err != nil {
		t.Fatal(err)
	}
	var refs []ChunkRef
	for i := 0; i*refTestChunk < len(data); i++ {
		refs = append(refs, ChunkRef{File: name, Chunk: ChunkIndex(nil, []uint64{uint64(len(data))}, 0, i, refTestChunk)})
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

func TestChunkIndex(t *testing.T) {
	// Globals of 0, 1 and 2 chunks, then blobs of 3 and 1 chunks.
	g, b := []uint64{0, 100, refTestChunk + 1}, []uint64{3 * refTestChunk, 5}
	if n := ChunkIndex(g, b, 0, 0, refTestChunk); n != 3 {
		t.Errorf("first blob chunk is %d, want 3", n)
	}
	if n := ChunkIndex(g, b, 1, 0, refTestChunk); n != 6 {
		t.Errorf("second blob's chunk is %d, want 6", n)
	}
}

func TestChunkSourcesAndReferencesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	base := randomData(3*refTestChunk, 11)
	const first = "DeviceState.prologue.aaaaaaaaaaaaaaaa.0000000000000001.mneme"
	refs := storedChunks(t, dir, first, base, false)

	// The second snapshot: chunk 0 is base's chunk 2 by reference, chunk 1
	// is zero, chunk 2 new data, and a 100-byte tail; a global comes first.
	fresh := randomData(refTestChunk+100, 12)
	var done atomic.Int32
	plan := []SourceChunk{
		{Ref: &refs[2]},
		{Zero: true},
		{Data: fresh[:refTestChunk], Done: func() { done.Add(1) }},
		{Data: fresh[refTestChunk:], Done: func() { done.Add(1) }},
	}
	var calls []int
	const second = "DeviceState.epilogue.aaaaaaaaaaaaaaaa.0000000000000001.mneme"
	s := &Snapshot{Globals: []Global{{Name: "g", Addr: 0x100, Size: 3, Data: []byte{1, 2, 3}}},
		Blobs: []Blob{sourced(0x10000, 3*refTestChunk+100, plan, &calls)}, Args: [][]byte{{1, 2}}}
	for _, workers := range []int{1, 4} {
		calls = calls[:0]
		done.Store(0)
		var buf bytes.Buffer
		if err := encodeWithWorkers(&buf, s, SnapshotOptions{ChunkSize: refTestChunk}, workers); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, second), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if !slicesEqual(calls, []int{0, 1, 2, 3}) {
			t.Errorf("workers %d: chunks asked for %v, want each once in order", workers, calls)
		}
		if done.Load() != 2 {
			t.Errorf("workers %d: Done called %d times, want once per data chunk (2)", workers, done.Load())
		}
		got, err := ReadSnapshot(filepath.Join(dir, second))
		if err != nil {
			t.Fatal(err)
		}
		want := append(append(append([]byte{}, base[2*refTestChunk:]...), make([]byte, refTestChunk)...), fresh...)
		if !bytes.Equal(got.Blobs[0].Data, want) || !bytes.Equal(got.Globals[0].Data, []byte{1, 2, 3}) {
			t.Fatalf("workers %d: the referencing snapshot does not read back as the bytes it was written from", workers)
		}
		hdr := buf.Bytes()
		if v := binary.LittleEndian.Uint32(hdr[8:]); v != snapshotVersionRefs {
			t.Errorf("a snapshot written from chunk sources has version %d, want %d", v, snapshotVersionRefs)
		}
		// Read from memory, outside any database, the reference cannot resolve.
		if _, err := DecodeSnapshotBytes(hdr); err == nil || !strings.Contains(err.Error(), "not read from a database") {
			t.Errorf("decoding a referencing snapshot outside its database: %v", err)
		}
	}
	// A third snapshot referencing the second's stored chunk (index: the
	// global's one chunk, then blob chunk 2).
	third := &Snapshot{Blobs: []Blob{sourced(0x10000, refTestChunk, []SourceChunk{{Ref: &ChunkRef{File: second, Chunk: ChunkIndex([]uint64{3}, nil, 0, 2, refTestChunk)}}}, &calls)}}
	path := filepath.Join(dir, "DeviceState.prologue.aaaaaaaaaaaaaaaa.0000000000000003.mneme")
	if _, err := WriteSnapshot(path, third, SnapshotOptions{ChunkSize: refTestChunk}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSnapshot(path)
	if err != nil || !bytes.Equal(got.Blobs[0].Data, fresh[:refTestChunk]) {
		t.Fatalf("a reference into a snapshot that holds references: %v", err)
	}
}

func TestReferenceToCompressedChunk(t *testing.T) {
	dir := t.TempDir()
	base := floatData(2 * refTestChunk)
	const first = "DeviceState.prologue.bbbbbbbbbbbbbbbb.0000000000000001.mneme"
	refs := storedChunks(t, dir, first, base, true)
	var calls []int
	s := &Snapshot{Blobs: []Blob{sourced(0x20000, refTestChunk, []SourceChunk{{Ref: &refs[1]}}, &calls)}}
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
	// A snapshot holding a reference and a zero chunk, to point others at.
	var calls []int
	const middle = "DeviceState.prologue.cccccccccccccccc.0000000000000002.mneme"
	refHolder := &Snapshot{Blobs: []Blob{sourced(0x30000, 2*refTestChunk, []SourceChunk{{Ref: &refs[0]}, {Zero: true}}, &calls)},
		Globals: []Global{{Name: "g", Addr: 0x100, Size: refTestChunk, Data: randomData(refTestChunk, 1)}}}
	if _, err := WriteSnapshot(filepath.Join(dir, middle), refHolder, SnapshotOptions{ChunkSize: refTestChunk}); err != nil {
		t.Fatal(err)
	}
	// Corrupt the first snapshot's copy in a fourth file, to reach the
	// checksum of a referenced chunk.
	const corrupt = "DeviceState.prologue.cccccccccccccccc.0000000000000004.mneme"
	data, err := os.ReadFile(filepath.Join(dir, first))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-trailerSize-100] ^= 1 // inside the last chunk's data
	if err := os.WriteFile(filepath.Join(dir, corrupt), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ref  ChunkRef
		want string
	}{
		{"missing file", ChunkRef{File: "DeviceState.prologue.dddddddddddddddd.0000000000000009.mneme"}, "no such file"},
		{"index past the end", ChunkRef{File: first, Chunk: 2}, "that file has 2 chunks"},
		{"reference to a reference", ChunkRef{File: middle, Chunk: 1}, "not a stored blob chunk"},
		{"reference to a zero chunk", ChunkRef{File: middle, Chunk: 2}, "not a stored blob chunk"},
		{"reference to a global", ChunkRef{File: middle, Chunk: 0}, "not a stored blob chunk"},
		{"corrupt referenced chunk", ChunkRef{File: corrupt, Chunk: 1}, "checksum does not match"},
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
	for _, name := range []string{"../DeviceState.x.mneme", "RecordedIR_aaaaaaaaaaaaaaaa.bc", "DeviceState..mneme/x"} {
		bad := &Snapshot{Blobs: []Blob{{Addr: 0x90000, Size: 1, Chunks: func(int) (SourceChunk, error) {
			return SourceChunk{Ref: &ChunkRef{File: name}}, nil
		}}}}
		if _, err := WriteSnapshot(filepath.Join(dir, "z"), bad, SnapshotOptions{}); err == nil || !strings.Contains(err.Error(), "not a snapshot file name") {
			t.Errorf("a reference to %q: %v", name, err)
		}
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
