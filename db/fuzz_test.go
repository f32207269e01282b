package db

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// smallSnapshots are fuzz seeds: every codec and entry kind, with 4 KiB
// chunks so seeds stay small.
func smallSnapshots(t testing.TB) [][]byte {
	fl := floatData(200 << 10)
	var seeds [][]byte
	for _, s := range []*Snapshot{
		{},
		{Args: [][]byte{{1, 2, 3, 4}, {}}},
		{Globals: []Global{{Name: "g", Addr: 0x10, Size: 5, Data: []byte("hello")}}},
		{Blobs: []Blob{{Addr: 0x1000, Size: 9000, Data: append(make([]byte, 4096), randomData(4904, 1)...)}}},
		{Blobs: []Blob{{Addr: 0x1000, Size: uint64(len(fl)), Data: fl}}, Args: [][]byte{{9}}},
		{Blobs: []Blob{{Addr: 0x1000, Size: 6000, Data: bytes.Repeat([]byte("abc"), 2000)}}},
	} {
		// Uncompressed, zstd, and as a recording writes (version 4: S2
		// chunks where zstd would go).
		for _, opts := range []SnapshotOptions{{}, {Compress: true}, {Compress: true, Fast: true}} {
			var buf bytes.Buffer
			opts.ChunkSize = 4096
			if err := EncodeSnapshot(&buf, s, opts); err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, buf.Bytes())
		}
	}
	// Chunks of 128 KiB are the smallest that are tried as byte planes:
	// float data stored as zstd planes and as S2 planes (version 4).
	for _, fast := range []bool{false, true} {
		var buf bytes.Buffer
		s := &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: uint64(len(fl)), Data: fl}}}
		if err := EncodeSnapshot(&buf, s, SnapshotOptions{Compress: true, Fast: fast, ChunkSize: 128 << 10}); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	return seeds
}

// refBase is the snapshot the reference seeds point into.
const refBase = "DeviceState.prologue.0000000000000000.0000000000000001.mneme"

// refSeeds writes refBase into dir and returns version 2 snapshots whose
// blobs reference its chunks, next to zero and stored chunks: the
// reference parser and resolver get explored.
func refSeeds(t testing.TB, dir string) [][]byte {
	base := &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: 3 * 4096, Data: randomData(3*4096, 5)}}}
	if _, err := WriteSnapshot(filepath.Join(dir, refBase), base, SnapshotOptions{ChunkSize: 4096}); err != nil {
		t.Fatal(err)
	}
	var seeds [][]byte
	for _, plan := range [][]SourceChunk{
		{{Ref: &ChunkRef{File: refBase, Chunk: 1}}, {Zero: true}, {Data: randomData(100, 6)}},
		{{Ref: &ChunkRef{File: refBase, Chunk: 0}}, {Ref: &ChunkRef{File: refBase, Chunk: 2}}, {Ref: &ChunkRef{File: refBase, Chunk: 7}}},
	} {
		plan := plan
		n := uint64(4096*(len(plan)-1)) + 4096
		if plan[len(plan)-1].Data != nil {
			n = uint64(4096*(len(plan)-1) + len(plan[len(plan)-1].Data))
		}
		s := &Snapshot{Globals: []Global{{Name: "g", Addr: 0x10, Size: 2, Data: []byte{1, 2}}},
			Blobs: []Blob{{Addr: 0x9000, Size: n, Chunks: func(i int) (SourceChunk, error) { return plan[i], nil }}}}
		var buf bytes.Buffer
		if err := EncodeSnapshot(&buf, s, SnapshotOptions{ChunkSize: 4096}); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	return seeds
}

// checkDecoded re-encodes what decoded and insists it decodes the same.
func checkDecoded(t *testing.T, s *Snapshot) {
	var buf bytes.Buffer
	if err := EncodeSnapshot(&buf, s, SnapshotOptions{Compress: true, ChunkSize: 4096}); err != nil {
		t.Fatalf("a decoded snapshot does not re-encode: %v", err)
	}
	again, err := DecodeSnapshotBytes(buf.Bytes())
	if err != nil {
		t.Fatalf("a re-encoded snapshot does not decode: %v", err)
	}
	equalSnapshots(t, s, again)
}

func FuzzDecodeSnapshot(f *testing.F) {
	for _, s := range append(smallSnapshots(f), craftedSeeds(f)...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSnapshot(bytes.NewReader(data), 1<<24)
		if err == nil {
			checkDecoded(t, s)
		}
	})
}

// FuzzDecodeSnapshotUnchecked skips the metadata checksum, which random
// mutations almost never get past, so the fuzzer explores the structure
// parser and the chunk decoders behind it as a crafted file could.
func FuzzDecodeSnapshotUnchecked(f *testing.F) {
	for _, s := range append(append(smallSnapshots(f), craftedSeeds(f)...), refSeeds(f, f.TempDir())...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		skipMetaChecksum, maxDecodedSize = true, 64<<20
		defer func() { skipMetaChecksum, maxDecodedSize = false, 1<<42 }()
		s, err := DecodeSnapshotBytes(data)
		if err == nil {
			checkDecoded(t, s)
		}
	})
}

func FuzzReadSnapshot(f *testing.F) {
	dir := f.TempDir()
	for _, s := range append(append(smallSnapshots(f), craftedSeeds(f)...), refSeeds(f, dir)...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "DeviceState.epilogue.0000000000000000.0000000000000001.mneme")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := ReadSnapshot(path)
		if err == nil {
			checkDecoded(t, s)
		}
	})
}

// FuzzSnapshotRoundTrip builds snapshots from fuzz input: every valid one
// must come back byte for byte.
func FuzzSnapshotRoundTrip(f *testing.F) {
	f.Add([]byte("seed"), uint8(2), uint16(100), true)
	f.Add(make([]byte, 9000), uint8(1), uint16(5000), false)
	f.Fuzz(func(t *testing.T, payload []byte, nBlobs uint8, split uint16, compress bool) {
		s := &Snapshot{Globals: []Global{{Name: "g", Addr: 1, Size: uint64(len(payload)), Data: payload}}}
		addr := uint64(0x10000)
		for i := 0; i < int(nBlobs%8); i++ {
			d := payload[:min(int(split), len(payload))]
			s.Blobs = append(s.Blobs, Blob{Addr: addr, Size: uint64(len(d)), Data: d})
			addr += uint64(len(d)) + uint64(i)
		}
		s.Args = [][]byte{binary.LittleEndian.AppendUint16(nil, split), payload[:min(len(payload), 64)]}
		var buf bytes.Buffer
		if err := EncodeSnapshot(&buf, s, SnapshotOptions{Compress: compress, ChunkSize: 4096}); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSnapshotBytes(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		equalSnapshots(t, s, got)
	})
}

func FuzzReadKernel(f *testing.F) {
	k := sampleKernel(f, "_Z1kPfif", 1, 2)
	good, err := MarshalKernel(k)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"StaticHash":"x"}`))
	f.Add([]byte(`{"instances":{"a":null}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKernel("fuzz.json", data)
		if err != nil {
			return
		}
		out, err := MarshalKernel(k)
		if err != nil {
			t.Fatalf("a kernel that parsed does not marshal: %v", err)
		}
		again, err := ParseKernel("again.json", out)
		if err != nil {
			t.Fatalf("a kernel that parsed does not parse after writing: %v\n%s", err, out)
		}
		a, _ := json.Marshal(k)
		b, _ := json.Marshal(again)
		if !bytes.Equal(a, b) {
			t.Fatalf("round trip changed the kernel:\n%s\n%s", a, b)
		}
	})
}

// FuzzSnapshotStream reads fuzzed snapshots both whole and as a stream, in
// windows that cut chunks: every file one reader accepts, the other must,
// with the same bytes (the metadata checksum is skipped, as in
// FuzzDecodeSnapshotUnchecked, so crafted structures reach the decoders).
func FuzzSnapshotStream(f *testing.F) {
	dir := f.TempDir()
	for _, s := range append(append(smallSnapshots(f), craftedSeeds(f)...), refSeeds(f, dir)...) {
		f.Add(s, uint16(4097))
	}
	f.Fuzz(func(t *testing.T, data []byte, step uint16) {
		skipMetaChecksum, maxDecodedSize = true, 64<<20
		defer func() { skipMetaChecksum, maxDecodedSize = false, 1<<42 }()
		path := filepath.Join(dir, "DeviceState.epilogue.0000000000000000.0000000000000002.mneme")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		whole, wholeErr := ReadSnapshot(path)
		st, err := OpenSnapshotStream(path, SnapshotLimits{})
		if err != nil {
			if wholeErr == nil {
				t.Fatalf("the stream refuses what the whole read accepts: %v", err)
			}
			return
		}
		defer st.Close()
		var streamErr error
		w := uint64(max(step, 1))
		for i, b := range st.Snapshot.Blobs {
			for off := uint64(0); off < b.Size && streamErr == nil; off += w {
				buf := make([]byte, min(w, b.Size-off))
				if _, streamErr = st.ReadBlob(i, off, buf); streamErr == nil && wholeErr == nil && !bytes.Equal(buf, whole.Blobs[i].Data[off:off+uint64(len(buf))]) {
					t.Fatalf("blob %d bytes %d+%d: the stream reads other bytes than the whole read", i, off, len(buf))
				}
			}
		}
		if (streamErr == nil) != (wholeErr == nil) {
			t.Fatalf("whole read: %v; stream: %v", wholeErr, streamErr)
		}
	})
}
