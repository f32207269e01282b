package db

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// codecTableChunk is the chunk size of the codec table: large enough for
// shuffle4 (four probes).
const codecTableChunk = 4 * probeSize

// codecKinds are chunks of each kind of data, one chunk each, in order.
func codecKinds() (names []string, data [][]byte) {
	text := bytes.Repeat([]byte("mneme records kernels "), codecTableChunk/22+1)[:codecTableChunk]
	return []string{"zeros", "random", "text", "float", "zero but one byte", "short text tail"},
		[][]byte{make([]byte, codecTableChunk), randomData(codecTableChunk, 3), text, floatData(codecTableChunk),
			append(make([]byte, codecTableChunk-1), 1), bytes.Repeat([]byte{7}, 255)}
}

// chunkCodecs lists the codec of every chunk of a snapshot file, in file
// order.
func chunkCodecs(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	m := &metaReader{name: path, ra: f, size: fi.Size(), hash: xxh3.New(), refs: &refFiles{}}
	defer m.refs.close()
	_, p, err := m.walk()
	if err != nil {
		t.Fatal(err)
	}
	// The plan keeps the chunks that store bytes; the others are zero chunks.
	byIndex := map[uint64]byte{}
	for _, c := range p.stored {
		byIndex[c.idx] = c.codec
	}
	out := make([]byte, p.n)
	for i := range out {
		if c, ok := byIndex[uint64(i)]; ok {
			out[i] = c
		} else {
			out[i] = codecZero
		}
	}
	return out
}

// Every compression mode against every kind of chunk, through the writer
// and both readers (whole and streamed): the codec each chunk is stored
// with, and the bytes read back. A blob holds the kinds one chunk each, so
// each decision is taken next to chunks that decide otherwise.
func TestCodecEveryModeAndKind(t *testing.T) {
	names, kinds := codecKinds()
	want := map[string][]byte{ // by mode, a codec per kind
		"none": {codecZero, codecRaw, codecRaw, codecRaw, codecRaw, codecRaw},
		"zstd": {codecZero, codecRaw, codecZstd, codecShuffle4, codecZstd, codecRaw},
		"fast": {codecZero, codecRaw, codecS2, codecShuffle4, codecS2, codecRaw},
	}
	modes := map[string]SnapshotOptions{"none": {}, "zstd": {Compress: true}, "fast": {Compress: true, Fast: true}}
	data := bytes.Join(kinds, nil)
	dir := t.TempDir()
	for mode, opts := range modes {
		opts.ChunkSize = codecTableChunk
		path := filepath.Join(dir, "DeviceState.prologue."+mode+".mneme")
		s := &Snapshot{Blobs: []Blob{{Addr: 1 << 20, Size: uint64(len(data)), Data: data}}}
		if _, err := WriteSnapshot(path, s, opts); err != nil {
			t.Fatal(err)
		}
		got := chunkCodecs(t, path)
		for i, name := range names {
			if i >= len(got) || got[i] != want[mode][i] {
				t.Errorf("%s: %s chunk stored with codec %v, want %d", mode, name, got[i:min(i+1, len(got))], want[mode][i])
			}
		}
		back, err := ReadSnapshot(path)
		if err != nil || !bytes.Equal(back.Blobs[0].Data, data) {
			t.Fatalf("%s: read back differs (%v)", mode, err)
		}
		st, err := OpenSnapshotStream(path, SnapshotLimits{})
		if err != nil {
			t.Fatal(err)
		}
		// Windows that start and end inside chunks of different kinds.
		for _, w := range [][2]int{{0, len(data)}, {codecTableChunk / 2, codecTableChunk}, {codecTableChunk - 3, 2*codecTableChunk + 7}, {len(data) - 300, 300}} {
			buf := make([]byte, w[1])
			zero, err := st.ReadBlob(0, uint64(w[0]), buf)
			if err != nil || !bytes.Equal(buf, data[w[0]:w[0]+w[1]]) {
				t.Errorf("%s: streamed window %v differs (%v)", mode, w, err)
			}
			if zero != IsZero(data[w[0]:w[0]+w[1]]) {
				t.Errorf("%s: streamed window %v says zero %v", mode, w, zero)
			}
		}
		st.Close()
	}
}

// Every plane codec of shuffle4 decodes: raw, zstd and S2 planes side by
// side in one chunk.
func TestShufflePlaneEveryCodec(t *testing.T) {
	raw := floatData(codecTableChunk)
	n := len(raw) / 4
	planes := make([]byte, len(raw))
	shuffle4(planes, raw)
	dst := make([]byte, shuffleHeader)
	for p, codec := range []uint32{planeRaw, planeZstd, planeS2, planeZstd} {
		pl := planes[p*n : (p+1)*n]
		start := len(dst)
		switch codec {
		case planeRaw:
			dst = append(dst, pl...)
		case planeZstd:
			dst = zstdEncoder().EncodeAll(pl, dst)
		case planeS2:
			dst = appendS2(dst, pl)
		}
		binary.LittleEndian.PutUint32(dst[8*p:], uint32(len(dst)-start))
		binary.LittleEndian.PutUint32(dst[8*p+4:], codec)
	}
	got := make([]byte, len(raw))
	var scratch []byte
	if err := decodeShuffle(got, dst, &scratch); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("mixed planes: %v", err)
	}
	binary.LittleEndian.PutUint32(dst[4:], 3) // no such plane codec
	if err := decodeShuffle(got, dst, &scratch); err == nil {
		t.Error("plane codec 3 decoded")
	}
}

// The codec numbers are the file format: each row of db/FORMAT.md's chunk
// and plane tables names the number the code writes.
func TestCodecNumbersEveryRowOfTheFormat(t *testing.T) {
	b, err := os.ReadFile("FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for name, code := range map[string]int{"raw": codecRaw, "zstd": codecZstd, "zero": codecZero, "shuffle4": codecShuffle4, "ref": codecRef, "s2": codecS2} {
		if !regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(string(rune('0'+code))) + ` ` + name + ` \|`).MatchString(doc) {
			t.Errorf("FORMAT.md's chunk table has no row %d %s", code, name)
		}
	}
	planes := "codec 0 raw, 1 zstd, or 2 S2"
	if planeRaw != 0 || planeZstd != 1 || planeS2 != 2 || !strings.Contains(doc, planes) {
		t.Errorf("plane codecs %d %d %d, FORMAT.md should say %q", planeRaw, planeZstd, planeS2, planes)
	}
}
