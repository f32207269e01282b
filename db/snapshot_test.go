package db

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// floatData is a smooth float32 field, like a simulation array.
func floatData(n int) []byte {
	b := make([]byte, n/4*4)
	for i := 0; i < len(b)/4; i++ {
		v := float32(math.Sin(float64(i)/1000)) * 100
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}

// sampleSnapshot mixes every kind of content and size edge.
func sampleSnapshot() *Snapshot {
	mixed := floatData(3 << 20)
	copy(mixed[1<<20:], make([]byte, 1<<20)) // a zero chunk in the middle
	return &Snapshot{
		Globals: []Global{
			{Name: "counter", Addr: 0x7000, Size: 4, Data: []byte{1, 2, 3, 4}},
			{Name: "_ZN5table4dataE", Addr: 0x8000, Size: 100000, Data: randomData(100000, 7)},
			{Name: "empty", Addr: 0x9000, Size: 0, Data: []byte{}},
		},
		Blobs: []Blob{
			{Addr: 0x153940000000, Size: uint64(len(mixed)), Data: mixed},
			{Addr: 0x153940400000, Size: 1<<20 + 17, Data: randomData(1<<20+17, 3)},
			{Addr: 0x153940600000, Size: 5000, Data: make([]byte, 5000)},
		},
		Args: [][]byte{
			binary.LittleEndian.AppendUint64(nil, 0x153940000000),
			{42, 0, 0, 0},
			{},
		},
	}
}

func equalSnapshots(t *testing.T, a, b *Snapshot) {
	t.Helper()
	if len(a.Globals) != len(b.Globals) || len(a.Blobs) != len(b.Blobs) || len(a.Args) != len(b.Args) {
		t.Fatalf("counts differ: %d/%d/%d vs %d/%d/%d", len(a.Globals), len(a.Blobs), len(a.Args), len(b.Globals), len(b.Blobs), len(b.Args))
	}
	for i := range a.Globals {
		x, y := a.Globals[i], b.Globals[i]
		if x.Name != y.Name || x.Addr != y.Addr || x.Size != y.Size || !bytes.Equal(x.Data, y.Data) {
			t.Fatalf("global %d differs: %q 0x%x %d vs %q 0x%x %d", i, x.Name, x.Addr, x.Size, y.Name, y.Addr, y.Size)
		}
	}
	for i := range a.Blobs {
		x, y := a.Blobs[i], b.Blobs[i]
		if x.Addr != y.Addr || x.Size != y.Size || !bytes.Equal(x.Data, y.Data) {
			t.Fatalf("blob %d differs: 0x%x %d vs 0x%x %d", i, x.Addr, x.Size, y.Addr, y.Size)
		}
	}
	for i := range a.Args {
		if !bytes.Equal(a.Args[i], b.Args[i]) {
			t.Fatalf("argument %d differs: %x vs %x", i, a.Args[i], b.Args[i])
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := sampleSnapshot()
	dir := t.TempDir()
	sizes := map[string]int64{}
	for _, opts := range []SnapshotOptions{{}, {Compress: true}, {Compress: true, Fast: true}, {Compress: true, ChunkSize: 4096}, {ChunkSize: 64 << 20, NoSync: true}} {
		path := filepath.Join(dir, "DeviceState.prologue.a.b.mneme")
		n, err := WriteSnapshot(path, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(path)
		if fi.Size() != n {
			t.Fatalf("%+v: WriteSnapshot reported %d bytes, file has %d", opts, n, fi.Size())
		}
		got, err := ReadSnapshot(path)
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		equalSnapshots(t, s, got)
		header, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		wantVersion := uint32(FormatVersion)
		if opts.Fast {
			wantVersion = snapshotVersionS2Chunks
		}
		if v := binary.LittleEndian.Uint32(header[8:]); v != wantVersion {
			t.Errorf("%+v: format version %d, want %d", opts, v, wantVersion)
		}
		if opts.ChunkSize == 0 {
			switch {
			case opts.Fast:
				sizes["s2"] = n
			case opts.Compress:
				sizes["zstd"] = n
			default:
				sizes["raw"] = n
			}
		}
	}
	raw := int64(s.RawSize())
	// Zero chunks are elided even uncompressed; float data compresses.
	if sizes["raw"] >= raw-(1<<20) {
		t.Errorf("uncompressed file %d bytes for %d raw bytes with a 1 MiB zero chunk", sizes["raw"], raw)
	}
	if sizes["zstd"] >= sizes["raw"] {
		t.Errorf("compressed file %d bytes is not smaller than uncompressed %d", sizes["zstd"], sizes["raw"])
	}
	// S2 planes trade a little size for speed: smaller than raw, within a
	// quarter of zstd's.
	if sizes["s2"] >= sizes["raw"] || sizes["s2"] > sizes["zstd"]+sizes["zstd"]/4 {
		t.Errorf("S2 planes: %d bytes, zstd %d, raw %d", sizes["s2"], sizes["zstd"], sizes["raw"])
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files in the directory after rewriting one, want 1 (temp files left?)", len(entries))
	}
}

func TestEmptySnapshot(t *testing.T) {
	var buf bytes.Buffer
	if err := EncodeSnapshot(&buf, &Snapshot{}, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != headerSize+3*8+trailerSize {
		t.Errorf("empty snapshot is %d bytes", buf.Len())
	}
	got, err := DecodeSnapshot(&buf, 0)
	if err != nil || len(got.Globals)+len(got.Blobs)+len(got.Args) != 0 {
		t.Fatalf("empty snapshot read back as %+v, %v", got, err)
	}
}

func TestEncodeSnapshotRefuses(t *testing.T) {
	for name, s := range map[string]*Snapshot{
		"short data":     {Blobs: []Blob{{Addr: 0x1000, Size: 10, Data: make([]byte, 9)}}},
		"overlap":        {Blobs: []Blob{{Addr: 0x1000, Size: 0x100, Data: make([]byte, 0x100)}, {Addr: 0x10ff, Size: 1, Data: []byte{0}}}},
		"duplicate name": {Globals: []Global{{Name: "g", Size: 1, Data: []byte{1}}, {Name: "g", Size: 1, Data: []byte{1}}}},
		"empty name":     {Globals: []Global{{Name: "", Size: 0, Data: nil}}},
		"huge arg":       {Args: [][]byte{make([]byte, maxArgSize+1)}},
	} {
		if err := EncodeSnapshot(&bytes.Buffer{}, s, SnapshotOptions{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := EncodeSnapshot(&bytes.Buffer{}, &Snapshot{}, SnapshotOptions{ChunkSize: 5000}); err == nil || !strings.Contains(err.Error(), "power of two") {
		t.Errorf("chunk size 5000: %v", err)
	}
}

func encodeSample(t testing.TB, opts SnapshotOptions) []byte {
	var buf bytes.Buffer
	if err := EncodeSnapshot(&buf, sampleSnapshot(), opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSnapshotTruncation cuts a valid file at many points: each must fail
// with a located error, never panic.
func TestSnapshotTruncation(t *testing.T) {
	data := encodeSample(t, SnapshotOptions{Compress: true, ChunkSize: 64 << 10})
	dir := t.TempDir()
	path := filepath.Join(dir, "cut.mneme")
	step := len(data)/97 + 1
	for cut := 0; cut < len(data); cut += step {
		os.WriteFile(path, data[:cut], 0o644)
		_, err := ReadSnapshot(path)
		if err == nil {
			t.Fatalf("truncated at %d of %d: accepted", cut, len(data))
		}
		if !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), path) {
			t.Fatalf("truncated at %d: error %q does not name the file or is not a format error", cut, err)
		}
	}
	// Extra bytes are refused too.
	if _, err := DecodeSnapshotBytes(append(append([]byte{}, data...), 0)); err == nil || !strings.Contains(err.Error(), "after the trailer") {
		t.Fatalf("trailing byte: %v", err)
	}
}

// TestSnapshotCorruption flips bytes everywhere in the file: every flip is
// detected (metadata by the trailer checksum, payloads by chunk checksums).
func TestSnapshotCorruption(t *testing.T) {
	for _, opts := range []SnapshotOptions{{ChunkSize: 64 << 10}, {Compress: true, ChunkSize: 64 << 10}} {
		data := encodeSample(t, opts)
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 300; i++ {
			bad := append([]byte{}, data...)
			off := r.IntN(len(bad))
			bad[off] ^= byte(1 + r.IntN(255))
			_, err := DecodeSnapshotBytes(bad)
			if err == nil {
				t.Fatalf("%+v: flip at byte %d of %d not detected", opts, off, len(data))
			}
			if !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), "byte offset") {
				t.Fatalf("flip at %d: unlocated error %q", off, err)
			}
		}
	}
}

func TestSnapshotNotASnapshot(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("MNEME"), []byte(`{"StaticHash": "x"}`), bytes.Repeat([]byte{0}, 100)} {
		_, err := DecodeSnapshotBytes(in)
		if err == nil || !strings.Contains(err.Error(), "not a mneme snapshot") {
			t.Errorf("%q: %v", in, err)
		}
	}
	if _, err := DecodeSnapshot(bytes.NewReader(make([]byte, 100)), 50); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("over limit: %v", err)
	}
	if _, err := ReadSnapshot(filepath.Join(t.TempDir(), "missing.mneme")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestSnapshotAbsurdSizes hand-builds headers that claim huge payloads in a
// tiny file: they must be rejected before anything is allocated.
func TestSnapshotAbsurdSizes(t *testing.T) {
	hdr := func() []byte {
		b := []byte(snapMagic)
		b = binary.LittleEndian.AppendUint32(b, FormatVersion)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint32(b, DefaultChunkSize)
		return binary.LittleEndian.AppendUint32(b, 0)
	}
	u := binary.LittleEndian.AppendUint64
	cases := map[string][]byte{
		"global count": u(hdr(), 1<<60),
		"blob size":    u(u(u(u(u(hdr(), 0), 1), roundUp(1<<50, pageSize)), 1<<50), 0x1000),
		"name length":  u(u(hdr(), 1), 1<<40),
		"arg count":    u(u(u(hdr(), 0), 0), math.MaxUint64),
		"chunk size":   append(append([]byte(snapMagic), 1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f), make([]byte, 40)...),
	}
	for name, data := range cases {
		var m1, m2 runtimeMem
		m1.read()
		_, err := DecodeSnapshotBytes(data)
		m2.read()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if grown := m2.total - m1.total; grown > 16<<20 {
			t.Errorf("%s: allocated %d bytes before failing", name, grown)
		}
		if !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestChangedRanges(t *testing.T) {
	pro := sampleSnapshot()
	epi := sampleSnapshot()
	// Change a byte in granule 3 and the last byte of granule 4 of blob 0,
	// all of granule 10, and one byte of the global "counter".
	epi.Blobs[0].Data = append([]byte{}, pro.Blobs[0].Data...)
	epi.Blobs[0].Data[3*DiffGranule+5] ^= 1
	epi.Blobs[0].Data[5*DiffGranule-1] ^= 1
	for i := 10 * DiffGranule; i < 11*DiffGranule; i++ {
		epi.Blobs[0].Data[i]++
	}
	epi.Globals[0].Data = []byte{1, 2, 3, 5}
	// Blob 2 changes in its last, partial granule.
	epi.Blobs[2].Data = make([]byte, 5000)
	epi.Blobs[2].Data[4999] = 1
	got := ChangedRanges(pro, epi)
	b0 := pro.Blobs[0].Addr
	want := []Range{
		{Addr: b0 + 3*DiffGranule, Size: 2 * DiffGranule, Offset: 3 * DiffGranule},
		{Addr: b0 + 10*DiffGranule, Size: DiffGranule, Offset: 10 * DiffGranule},
		{Addr: pro.Blobs[2].Addr, Size: 5000},
		{Addr: 0x7000, Size: 4, Global: "counter"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ChangedRanges =\n%+v\nwant\n%+v", got, want)
	}
	if r := ChangedRanges(pro, sampleSnapshot()); len(r) != 0 {
		t.Fatalf("identical snapshots: %+v", r)
	}
	// A blob that exists only after the launch is reported whole.
	epi2 := sampleSnapshot()
	epi2.Blobs = append(epi2.Blobs, Blob{Addr: 0x200000000000, Size: 10, Data: make([]byte, 10)})
	if r := ChangedRanges(pro, epi2); len(r) != 1 || r[0].Addr != 0x200000000000 || r[0].Size != 10 {
		t.Fatalf("new blob: %+v", r)
	}
	// A global that exists only before the launch, or changes size, is
	// reported whole too.
	epi3 := sampleSnapshot()
	if epi3.Globals[0].Name != "counter" {
		t.Fatalf("sample snapshot changed: first global %q", epi3.Globals[0].Name)
	}
	epi3.Globals = epi3.Globals[1:]
	if r := ChangedRanges(pro, epi3); len(r) != 1 || r[0].Global != "counter" || r[0].Size != pro.Globals[0].Size {
		t.Fatalf("vanished global: %+v", r)
	}
	epi3.Globals = append([]Global{{Name: "counter", Addr: 0x7000, Size: 8, Data: make([]byte, 8)}}, epi3.Globals...)
	if r := ChangedRanges(pro, epi3); len(r) != 1 || r[0].Global != "counter" || r[0].Size != 8 {
		t.Fatalf("resized global: %+v", r)
	}
}

// TestCodecChoice checks which codec each kind of content gets.
func TestCodecChoice(t *testing.T) {
	text := bytes.Repeat([]byte("kernel launch record; "), 1<<20/22+1)[:1<<20]
	cases := []struct {
		name     string
		data     []byte
		compress bool
		fast     bool
		want     byte
	}{
		{"zeros", make([]byte, 1<<20), false, false, codecZero},
		{"zeros compressed", make([]byte, 1<<20), true, false, codecZero},
		{"floats uncompressed", floatData(1 << 20), false, false, codecRaw},
		{"floats", floatData(1 << 20), true, false, codecShuffle4},
		{"text", text, true, false, codecZstd},
		{"random", randomData(1<<20, 9), true, false, codecRaw},
		// Fast, as a recording writes: S2 where zstd would go.
		{"floats fast", floatData(1 << 20), true, true, codecShuffle4},
		{"text fast", text, true, true, codecS2},
		{"random fast", randomData(1<<20, 9), true, true, codecRaw},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		s := &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: uint64(len(c.data)), Data: c.data}}}
		if err := EncodeSnapshot(&buf, s, SnapshotOptions{Compress: c.compress, Fast: c.fast}); err != nil {
			t.Fatal(err)
		}
		m := &metaReader{name: c.name, ra: bytes.NewReader(buf.Bytes()), size: int64(buf.Len()), hash: xxh3.New()}
		_, p, err := m.walk()
		if err != nil {
			t.Fatal(err)
		}
		if p.n != 1 || p.chunk(0).codec != c.want {
			t.Errorf("%s: %d chunks, codec %d, want 1 of codec %d", c.name, p.n, p.chunk(0).codec, c.want)
		}
		got, err := DecodeSnapshotBytes(buf.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(got.Blobs[0].Data, c.data) {
			t.Fatalf("%s: data changed in the round trip", c.name)
		}
		t.Logf("%s: %d bytes stored for %d", c.name, p.chunk(0).stored, len(c.data))
	}
}

// An S2 chunk belongs to version 4: the same bytes labelled version 3 are
// refused with a message naming the chunk, not decoded.
func TestS2ChunkNeedsVersion4(t *testing.T) {
	data := bytes.Repeat([]byte("kernel launch record; "), 1<<20/22+1)[:1<<20]
	var buf bytes.Buffer
	s := &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: uint64(len(data)), Data: data}}}
	if err := EncodeSnapshot(&buf, s, SnapshotOptions{Compress: true, Fast: true}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if v := binary.LittleEndian.Uint32(b[8:]); v != snapshotVersionS2Chunks {
		t.Fatalf("version %d, want %d", v, snapshotVersionS2Chunks)
	}
	binary.LittleEndian.PutUint32(b[8:], snapshotVersionS2)
	_, err := DecodeSnapshotBytes(b)
	if err == nil || !strings.Contains(err.Error(), "S2 chunk") {
		t.Fatalf("a version 3 file with an S2 chunk: %v", err)
	}
}
