package db

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// Compression is kept only when it saves at least an eighth.
func TestPaysNeedsAnEighth(t *testing.T) {
	for _, tc := range []struct {
		stored, raw int
		want        bool
	}{{700, 800, false}, {699, 800, true}, {800, 800, false}, {0, 8, true}, {7, 8, false}} {
		if got := pays(tc.stored, tc.raw); got != tc.want {
			t.Errorf("pays(%d, %d) = %v, want %v", tc.stored, tc.raw, got, tc.want)
		}
	}
}

func TestEncodeChunkCodecs(t *testing.T) {
	if c := encodeChunk(make([]byte, 4096), compressZstd); c.codec != codecZero || c.stored != nil {
		t.Errorf("zeros: codec %d, %d stored bytes", c.codec, len(c.stored))
	}
	small := bytes.Repeat([]byte{7}, 255) // compressible, but too small to bother
	if c := encodeChunk(small, compressZstd); c.codec != codecRaw || !bytes.Equal(c.stored, small) || c.sum != xxh3.Hash(small) {
		t.Errorf("255 bytes: codec %d", c.codec)
	}
	big := bytes.Repeat([]byte("mneme "), 1000)
	c := encodeChunk(big, compressZstd)
	if c.codec == codecRaw || len(c.stored) >= len(big) {
		t.Errorf("compressible 6000 bytes: codec %d, %d stored", c.codec, len(c.stored))
	}
	if c.sum != xxh3.Hash(big) {
		t.Error("the checksum is of the raw bytes")
	}
	c.release()
	if c := encodeChunk(big, compressNone); c.codec != codecRaw || len(c.stored) != len(big) {
		t.Errorf("without compression: codec %d", c.codec)
	}
}

// Fast planes: a float chunk is stored as byte planes, at least one of
// them S2-compressed, and decodes to the same bytes.
func TestFastPlanesRoundTrip(t *testing.T) {
	raw := floatData(1 << 20)
	c := encodeChunk(raw, compressFast)
	defer c.release()
	if c.codec != codecShuffle4 {
		t.Fatalf("float chunk with fast planes: codec %d, want %d (shuffle4)", c.codec, codecShuffle4)
	}
	s2Planes := 0
	for p := 0; p < shufflePlanes; p++ {
		if binary.LittleEndian.Uint32(c.stored[8*p+4:]) == planeS2 {
			s2Planes++
		}
	}
	if s2Planes == 0 {
		t.Fatal("no plane is stored as S2")
	}
	got := make([]byte, len(raw))
	var scratch []byte
	if err := decodeShuffle(got, c.stored, &scratch); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, raw) {
		t.Fatal("S2 planes do not decode to the chunk")
	}
	if xxh3.Hash(got) != c.sum {
		t.Fatal("checksum mismatch")
	}
}

func TestDecodersRefuseWrongSizes(t *testing.T) {
	s2raw := bytes.Repeat([]byte("wxyz"), 5000)
	s2block := appendS2(nil, s2raw)
	if err := decodeS2(make([]byte, len(s2raw)), s2block); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{len(s2raw) - 1, len(s2raw) + 1} {
		if err := decodeS2(make([]byte, n), s2block); err == nil || !strings.Contains(err.Error(), "s2") {
			t.Errorf("S2 data of %d bytes decoded into %d: %v", len(s2raw), n, err)
		}
	}
	if err := decodeS2(make([]byte, 16), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err == nil {
		t.Error("a corrupt S2 block decoded")
	}
	raw := bytes.Repeat([]byte("abcd"), 5000)
	z := zstdEncoder().EncodeAll(raw, nil)
	if err := decodeZstd(make([]byte, len(raw)), z); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{len(raw) - 1, len(raw) + 1} {
		if err := decodeZstd(make([]byte, n), z); err == nil {
			t.Errorf("zstd data of %d bytes decoded into %d", len(raw), n)
		}
	}
	var scratch []byte
	if err := decodeShuffle(make([]byte, 6), make([]byte, shuffleHeader), &scratch); err == nil || !strings.Contains(err.Error(), "multiple of 4") {
		t.Errorf("6 bytes: %v", err)
	}
	if err := decodeShuffle(make([]byte, 8), make([]byte, shuffleHeader-1), &scratch); err == nil || !strings.Contains(err.Error(), "plane table") {
		t.Errorf("short plane table: %v", err)
	}
}

func TestProcValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meminfo")
	text := "MemTotal:       1000 kB\nMemAvailable:    512 kB\nPlain:  42\nBad: x kB\nEmpty:\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want uint64
		ok   bool
	}{{"MemAvailable:", 512 << 10, true}, {"MemTotal:", 1000 << 10, true}, {"Plain:", 42, true},
		{"Bad:", 0, false}, {"Empty:", 0, false}, {"Missing:", 0, false}} {
		got, ok := procValue(path, tc.key)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := procValue(filepath.Join(t.TempDir(), "none"), "MemAvailable:"); ok {
		t.Error("a missing file gave a value")
	}
	if before, ok := procValue("/proc/meminfo", "MemAvailable:"); ok {
		// Other processes change the figure between reads: bound the budget
		// by the larger of the readings around it.
		b := HostMemoryBudget()
		after, _ := procValue("/proc/meminfo", "MemAvailable:")
		if avail := max(before, after); b > avail/4*3 {
			t.Errorf("budget %d exceeds three quarters of the available %d", b, avail)
		}
	}
}

func TestCgroupMemoryLeft(t *testing.T) {
	dir := t.TempDir()
	if _, ok := cgroupMemoryLeft(dir); ok {
		t.Error("no cgroup files, yet a limit was read")
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("memory.max", "max\n")
	write("memory.current", "100\n")
	if _, ok := cgroupMemoryLeft(dir); ok {
		t.Error(`"max" is no limit`)
	}
	write("memory.max", "1000\n")
	if left, ok := cgroupMemoryLeft(dir); !ok || left != 900 {
		t.Errorf("left %d, %v; want 900", left, ok)
	}
	write("memory.current", "5000\n")
	if left, ok := cgroupMemoryLeft(dir); !ok || left != 0 {
		t.Errorf("over the limit: left %d, %v; want 0", left, ok)
	}
}
