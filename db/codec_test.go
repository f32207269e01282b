package db

import (
	"bytes"
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
	if c := encodeChunk(make([]byte, 4096), true); c.codec != codecZero || c.stored != nil {
		t.Errorf("zeros: codec %d, %d stored bytes", c.codec, len(c.stored))
	}
	small := bytes.Repeat([]byte{7}, 255) // compressible, but too small to bother
	if c := encodeChunk(small, true); c.codec != codecRaw || !bytes.Equal(c.stored, small) || c.sum != xxh3.Hash(small) {
		t.Errorf("255 bytes: codec %d", c.codec)
	}
	big := bytes.Repeat([]byte("mneme "), 1000)
	c := encodeChunk(big, true)
	if c.codec == codecRaw || len(c.stored) >= len(big) {
		t.Errorf("compressible 6000 bytes: codec %d, %d stored", c.codec, len(c.stored))
	}
	if c.sum != xxh3.Hash(big) {
		t.Error("the checksum is of the raw bytes")
	}
	c.release()
	if c := encodeChunk(big, false); c.codec != codecRaw || len(c.stored) != len(big) {
		t.Errorf("without compression: codec %d", c.codec)
	}
}

func TestDecodersRefuseWrongSizes(t *testing.T) {
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
		b := hostMemoryBudget()
		after, _ := procValue("/proc/meminfo", "MemAvailable:")
		if avail := max(before, after); b > avail/4*3 {
			t.Errorf("budget %d exceeds three quarters of the available %d", b, avail)
		}
	}
}
