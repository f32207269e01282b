package db

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// readLimited writes data to a file and reads it back under lim.
func readLimited(t *testing.T, data []byte, lim SnapshotLimits) (*Snapshot, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.mneme")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return ReadSnapshotLimited(path, lim)
}

// TestBlobsMustLieInsideTheArena places one blob at each edge of the
// recording arena: touching an edge from inside is fine, one byte past
// either edge is refused, and an empty blob may sit anywhere.
func TestBlobsMustLieInsideTheArena(t *testing.T) {
	const base, size = 0x100000, 0x10000
	lim := SnapshotLimits{ArenaBase: base, ArenaSize: size}
	for _, c := range []struct {
		name       string
		addr, size uint64
		ok         bool
	}{
		{"the whole arena", base, size, true},
		{"the second half", base + size/2, size / 2, true},
		{"one byte past the end", base + size/2, size/2 + 1, false},
		{"just below the base", base - 0x1000, 0x1000, false},
		{"from the base minus one", base - 1, 2, false},
		{"at the end", base + size, 0x10, false},
		{"far above", base + 4*size, 0x10, false},
		{"empty, far below", 0x10, 0, true},
	} {
		s := &Snapshot{Blobs: []Blob{{Addr: c.addr, Size: c.size, Data: make([]byte, c.size)}}}
		got, err := readLimited(t, encodeForCraft(t, s), lim)
		if c.ok && (err != nil || got.Blobs[0].Addr != c.addr || got.Blobs[0].Size != c.size) {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "outside the recording arena [0x100000, 0x110000)")) {
			t.Errorf("%s: accepted or wrong error: %v", c.name, err)
		}
	}
}

// TestGlobalsMayFillTheDeviceExactly: the globals together may take all of
// MaxGlobalBytes, not a byte more.
func TestGlobalsMayFillTheDeviceExactly(t *testing.T) {
	lim := SnapshotLimits{MaxGlobalBytes: 100}
	for _, second := range []uint64{40, 41} {
		s := &Snapshot{Globals: []Global{
			{Name: "a", Addr: 0x100, Size: 60, Data: make([]byte, 60)},
			{Name: "b", Addr: 0x200, Size: second, Data: make([]byte, second)},
		}}
		_, err := readLimited(t, encodeForCraft(t, s), lim)
		if second == 40 && err != nil {
			t.Errorf("globals of exactly 100 bytes: %v", err)
		}
		if second == 41 && (err == nil || !strings.Contains(err.Error(), `global "b"`)) {
			t.Errorf("globals of 101 bytes: %v", err)
		}
	}
}

// craftHeader is a valid snapshot header with chunk size cs.
func craftHeader(cs uint32) []byte {
	b := []byte(snapMagic)
	b = binary.LittleEndian.AppendUint32(b, FormatVersion)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, cs)
	return binary.LittleEndian.AppendUint32(b, 0)
}

// TestDeclaredSizesAreCheckedAgainstWhatIsLeft: a count or a payload that the
// rest of the file cannot hold is refused where it is declared, and the error
// says how many bytes were left.
func TestDeclaredSizesAreCheckedAgainstWhatIsLeft(t *testing.T) {
	u := binary.LittleEndian.AppendUint64
	// Three arguments need at least 24 bytes; 16 are left.
	data := append(u(u(u(craftHeader(4096), 0), 0), 3), make([]byte, 16)...)
	if _, err := DecodeSnapshotBytes(data); err == nil || !strings.Contains(err.Error(), "argument count 3 cannot fit in the 16 bytes left") {
		t.Errorf("3 arguments in 16 bytes: %v", err)
	}
	// A blob of three 4 KiB chunks needs three chunk headers (48 bytes); 40 are left.
	blob := func(size uint64) []byte {
		return append(u(u(u(u(u(craftHeader(4096), 0), 1), roundUp(size, pageSize)), size), 0x1000), make([]byte, 40)...)
	}
	if _, err := DecodeSnapshotBytes(blob(3 * 4096)); err == nil || !strings.Contains(err.Error(), "12288 bytes need 3 chunks, more than the 40 bytes left can hold") {
		t.Errorf("3 chunks in 40 bytes: %v", err)
	}
	// A blob of exactly the largest decodable size passes the size check and
	// fails only for want of chunks.
	if _, err := DecodeSnapshotBytes(blob(maxDecodedSize)); err == nil || !strings.Contains(err.Error(), "chunks, more than the 40 bytes left") {
		t.Errorf("a blob of maxDecodedSize bytes: %v", err)
	}
	if _, err := DecodeSnapshotBytes(blob(maxDecodedSize + pageSize)); err == nil || !strings.Contains(err.Error(), "past") {
		t.Errorf("a blob past maxDecodedSize bytes: %v", err)
	}
}

// TestTruncationIsReportedAsSuch cuts a snapshot inside its trailer, inside
// a payload and right after the magic: each is reported as truncated where
// the cut is, not as some other corruption.
func TestTruncationIsReportedAsSuch(t *testing.T) {
	data := encodeForCraft(t, &Snapshot{Args: [][]byte{randomData(4096, 5)}})
	for _, cut := range []int{len(data) - 1, len(data) - 8, len(data) - 9, len(data) - 15} {
		if _, err := DecodeSnapshotBytes(data[:cut]); err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("cut at %d of %d: %v", cut, len(data), err)
		}
	}
	off, _ := layout(data)
	payload := off["arg0.size"] + 8 + chunkHeader
	if _, err := DecodeSnapshotBytes(data[:payload+100]); err == nil || !strings.Contains(err.Error(), "argument 0 chunk 0 needs 4096 bytes") {
		t.Errorf("cut inside the payload: %v", err)
	}
	if _, err := DecodeSnapshotBytes(data[:payload+4096]); err == nil || !strings.Contains(err.Error(), "truncated: trailer") {
		t.Errorf("cut right after the payload: %v", err)
	}
	for _, in := range [][]byte{[]byte(snapMagic), []byte(snapMagic + "\x01\x00")} {
		if _, err := DecodeSnapshotBytes(in); err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%q: %v", in, err)
		}
	}
	// A blob's metadata cut short.
	data = encodeForCraft(t, &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: 16, Data: randomData(16, 3)}}})
	off, _ = layout(data)
	binary.LittleEndian.PutUint64(data[off["blob0.metalen"]:], 100)
	if _, err := DecodeSnapshotBytes(data[:off["blob0.metalen"]+8+10]); err == nil || !strings.Contains(err.Error(), "blob metadata") {
		t.Errorf("cut inside a blob's metadata: %v", err)
	}
	// Bytes after the trailer are counted.
	data = encodeForCraft(t, &Snapshot{Args: [][]byte{{1}}})
	if _, err := DecodeSnapshotBytes(append(data, 1, 2, 3)); err == nil || !strings.Contains(err.Error(), ": 3 unexpected bytes after the trailer") {
		t.Errorf("3 trailing bytes: %v", err)
	}
}

// TestCompressedChunkMustBeSmaller: a chunk marked compressed that stores as
// many bytes as it decodes to is refused in the metadata pass.
func TestCompressedChunkMustBeSmaller(t *testing.T) {
	data := encodeForCraft(t, &Snapshot{Args: [][]byte{randomData(4096, 9)}})
	off, _ := layout(data)
	hdr := off["arg0.size"] + 8
	if data[hdr] != codecRaw {
		t.Fatalf("random data stored with codec %d", data[hdr])
	}
	data[hdr] = codecZstd
	if !reseal(data) {
		t.Fatal("reseal")
	}
	if _, err := DecodeSnapshotBytes(data); err == nil || !strings.Contains(err.Error(), "compressed chunk stores 4096 bytes for 4096") {
		t.Errorf("a compressed chunk as large as its data: %v", err)
	}
}

// TestChecksumErrorsNameTheEarliestChunk corrupts chunks of one blob: the
// error names the chunk by its index, and with several bad chunks decoded in
// parallel still the first of them, as a sequential reader would.
func TestChecksumErrorsNameTheEarliestChunk(t *testing.T) {
	const cs = 4096
	data := encodeForCraft(t, &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: 3 * cs, Data: randomData(3*cs, 11)}}})
	off, _ := layout(data)
	first := off["blob0.addr"] + 8 // raw chunks: header, then cs stored bytes
	data[first+2*(chunkHeader+cs)+chunkHeader] ^= 1
	if _, err := DecodeSnapshotBytes(data); err == nil || !strings.Contains(err.Error(), "blob 0x1000 chunk 2: checksum mismatch") {
		t.Errorf("corrupt chunk 2: %v", err)
	}

	// Large enough (4 MiB) to be decoded in parallel.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 4 << 20
	var buf bytes.Buffer
	if err := EncodeSnapshot(&buf, &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: n, Data: randomData(n, 12)}}}, SnapshotOptions{ChunkSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	data = buf.Bytes()
	off, _ = layout(data)
	first = off["blob0.addr"] + 8
	for i := 0; i < n/(64<<10); i++ {
		data[first+i*(chunkHeader+64<<10)+chunkHeader] ^= 1
	}
	for range 5 {
		if _, err := DecodeSnapshotBytes(data); err == nil || !strings.Contains(err.Error(), "blob 0x1000 chunk 0: checksum mismatch") {
			t.Fatalf("every chunk corrupt: %v", err)
		}
	}
}

// TestBlobRoundedSizeIsPageRounded: the rounded size each blob records (a
// field Mneme reads) is its size rounded up to a whole page.
func TestBlobRoundedSizeIsPageRounded(t *testing.T) {
	for size, want := range map[uint64]uint64{0: 0, 1: 4096, 4096: 4096, 5000: 8192} {
		data := encodeForCraft(t, &Snapshot{Blobs: []Blob{{Addr: 0x10000, Size: size, Data: make([]byte, size)}}})
		off, ok := layout(data)
		if !ok {
			t.Fatal("layout")
		}
		if got := binary.LittleEndian.Uint64(data[off["blob0.rounded"]:]); got != want {
			t.Errorf("size %d: rounded size %d, want %d", size, got, want)
		}
		if _, err := DecodeSnapshotBytes(data); err != nil {
			t.Errorf("size %d: %v", size, err)
		}
	}
}

// TestEmptyBlobInsideAnotherIsNoOverlap: an empty allocation occupies no
// bytes, so it cannot overlap a blob around it; real overlaps are reported
// with both ranges.
func TestEmptyBlobInsideAnotherIsNoOverlap(t *testing.T) {
	s := &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: 4, Data: []byte{1, 2, 3, 4}}, {Addr: 0x1002, Size: 0, Data: []byte{}}}}
	if _, err := DecodeSnapshotBytes(encodeForCraft(t, s)); err != nil {
		t.Errorf("an empty blob inside another: %v", err)
	}
	s = &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: 0x100, Data: make([]byte, 0x100)}, {Addr: 0x10ff, Size: 2, Data: []byte{0, 0}}}}
	if err := EncodeSnapshot(&bytes.Buffer{}, s, SnapshotOptions{}); err == nil || !strings.Contains(err.Error(), "[0x1000, 0x1100) and [0x10ff, 0x1101)") {
		t.Errorf("overlapping blobs: %v", err)
	}
}

// TestChangedGlobalsAreOrderedByName: changed globals are listed by name,
// whatever their addresses.
func TestChangedGlobalsAreOrderedByName(t *testing.T) {
	pro := &Snapshot{Globals: []Global{
		{Name: "b", Addr: 0x100, Size: 1, Data: []byte{0}},
		{Name: "a", Addr: 0x200, Size: 1, Data: []byte{0}},
	}}
	epi := &Snapshot{Globals: []Global{
		{Name: "b", Addr: 0x100, Size: 1, Data: []byte{1}},
		{Name: "a", Addr: 0x200, Size: 1, Data: []byte{1}},
	}}
	got := ChangedRanges(pro, epi)
	if len(got) != 2 || got[0].Global != "a" || got[1].Global != "b" {
		t.Errorf("ChangedRanges = %+v, want a then b", got)
	}
}

// failingWriter accepts ok bytes and then fails every write.
type failingWriter struct{ ok int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.ok {
		n := w.ok
		w.ok = 0
		return n, errors.New("disk full")
	}
	w.ok -= len(p)
	return len(p), nil
}

// TestEncodeReportsWriteErrors: a writer that fails part-way fails the
// encoding, for a one-chunk snapshot and for one of many chunks.
func TestEncodeReportsWriteErrors(t *testing.T) {
	for name, s := range map[string]*Snapshot{
		"one chunk":   {Args: [][]byte{randomData(1000, 1)}},
		"many chunks": {Blobs: []Blob{{Addr: 0x1000, Size: 3 << 20, Data: randomData(3<<20, 2)}}},
	} {
		for _, ok := range []int{10, 100, 500} {
			if err := EncodeSnapshot(&failingWriter{ok: ok}, s, SnapshotOptions{ChunkSize: 64 << 10}); err == nil || !strings.Contains(err.Error(), "disk full") {
				t.Errorf("%s, writer failing after %d bytes: %v", name, ok, err)
			}
		}
	}
}

// The allocations of a snapshot together cannot exceed the recording
// device's memory (Device.TotalMem), whatever the arena's size.
func TestBlobsBoundedByDeviceMemory(t *testing.T) {
	s := &Snapshot{Blobs: []Blob{
		{Addr: 0x10000, Size: 3000, Data: randomData(3000, 1)},
		{Addr: 0x20000, Size: 2000, Data: randomData(2000, 2)},
	}}
	path := filepath.Join(t.TempDir(), "s.mneme")
	if _, err := WriteSnapshot(path, s, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSnapshotLimited(path, SnapshotLimits{MaxBlobBytes: 5000}); err != nil {
		t.Fatalf("allocations exactly at the device's memory: %v", err)
	}
	_, err := ReadSnapshotLimited(path, SnapshotLimits{MaxBlobBytes: 4999})
	if err == nil || !strings.Contains(err.Error(), "blob 1: size 2000") || !strings.Contains(err.Error(), "Device.TotalMem") {
		t.Fatalf("allocations past the device's memory: %v", err)
	}
	if k := (&Kernel{VASize: 1 << 30, Device: DeviceInfo{TotalMem: 80 << 30}}); KernelLimits(k).MaxBlobBytes != 80<<30 {
		t.Errorf("KernelLimits does not bound the allocations by Device.TotalMem: %+v", KernelLimits(k))
	}
}

// TestZeroChunkPlanTakesNoMemory: a blob of 1 GiB in 4 KiB chunks, all zero
// but every 4099th chunk, is a file of 4 MiB of chunk headers. Opening it
// keeps nothing per zero chunk (the plan's memory follows what the file
// stores, not what it declares), and reads still find every stored chunk.
func TestZeroChunkPlanTakesNoMemory(t *testing.T) {
	const cs, size, every = 4096, 1 << 30, 4099
	pattern := func(i int) []byte {
		b := make([]byte, cs)
		for j := range b {
			b[j] = byte(i + j/7 + 1)
		}
		return b
	}
	s := &Snapshot{
		Globals: []Global{{Name: "g", Size: 3 * cs, Data: make([]byte, 3*cs)}},
		Blobs: []Blob{{Addr: 0x100000, Size: size, Chunks: func(i int) (SourceChunk, error) {
			if i%every == every-1 {
				return SourceChunk{Data: pattern(i)}, nil
			}
			return SourceChunk{Zero: true}, nil
		}}},
		Args: [][]byte{{1, 2, 3}},
	}
	path := filepath.Join(t.TempDir(), "s.mneme")
	if _, err := WriteSnapshot(path, s, SnapshotOptions{ChunkSize: cs}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	st, err := OpenSnapshotStream(path, SnapshotLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runtime.ReadMemStats(&after)
	// The blob's stored chunks and the argument's one; the global is zero.
	stored := size/cs/every + 1
	if got := len(st.p.stored); got != stored {
		t.Errorf("the plan keeps %d chunks, want the %d stored ones", got, stored)
	}
	// 72 bytes a chunk, as a plan of every chunk took, would be 18 MiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(fi.Size())/4 {
		t.Errorf("opening a %d-byte file allocated %d bytes", fi.Size(), alloc)
	}
	if g := st.Snapshot.Globals[0].Data; len(g) != 3*cs {
		t.Errorf("an all-zero global decoded to %d bytes, want %d", len(g), 3*cs)
	}
	for _, i := range []int{0, every - 2, every - 1, every, 3*every - 1, size/cs - 1} {
		buf := make([]byte, cs)
		zero, err := st.ReadBlob(0, uint64(i)*cs, buf)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, cs)
		if i%every == every-1 {
			want = pattern(i)
		}
		if zero != (i%every != every-1) || !bytes.Equal(buf, want) {
			t.Errorf("chunk %d: zero %v, bytes differ %v", i, zero, !bytes.Equal(buf, want))
		}
		if st.zeroWindow(0, uint64(i)*cs, cs) != zero {
			t.Errorf("chunk %d: zeroWindow disagrees with ReadBlob", i)
		}
	}
	// A window across a stored chunk is not zero; one between two is.
	if st.zeroWindow(0, (every-2)*cs, 3*cs) || !st.zeroWindow(0, every*cs, (every-1)*cs) {
		t.Error("zeroWindow is wrong about windows around a stored chunk")
	}
}
