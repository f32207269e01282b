package db

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// TestHashLikeBounds: ids of 1..128 characters from [0-9a-zA-Z_-] are
// accepted, and nothing else; each character class is probed at its edges.
func TestHashLikeBounds(t *testing.T) {
	for s, want := range map[string]bool{
		"": false, strings.Repeat("a", 128): true, strings.Repeat("a", 129): false,
		"0": true, "9": true, "a": true, "z": true, "A": true, "Z": true, "_": true, "-": true,
		"/": false, ":": false, "`": false, "{": false, "@": false, "[": false, ".": false, "a b": false, "é": false,
	} {
		if got := isHashLike(s); got != want {
			t.Errorf("isHashLike(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestBlockOf1024ThreadsIsValid: CUDA's limit is 1024 threads per block,
// inclusive.
func TestBlockOf1024ThreadsIsValid(t *testing.T) {
	for _, c := range []struct {
		block mneme.Dim3
		ok    bool
	}{{mneme.Dim3{X: 1024, Y: 1, Z: 1}, true}, {mneme.Dim3{X: 8, Y: 8, Z: 16}, true}, {mneme.Dim3{X: 1025, Y: 1, Z: 1}, false}, {mneme.Dim3{X: 16, Y: 8, Z: 9}, false}} {
		k := sampleKernel(t, "_Z1kPfif")
		args := [][]byte{binary.LittleEndian.AppendUint64(nil, 0x153940000000), {1, 0, 0, 0}, {0, 0, 0x20, 0x40}}
		grid := mneme.Dim3{X: 1, Y: 1, Z: 1}
		dh := DynamicHash(grid, c.block, 0, args)
		k.Instances[dh] = &Instance{DynamicHash: dh, Prologue: PrologueFileName(k.StaticHash, dh), Epilogue: EpilogueFileName(k.StaticHash, dh),
			GridDims: grid, BlockDims: c.block, Args: EncodeArgs(args), Occurrences: 1, RecordedAt: "2026-01-02T03:04:05Z"}
		data, err := MarshalKernel(k)
		if err == nil {
			_, err = ParseKernel("k.json", data)
		}
		if (err == nil) != c.ok || !c.ok && !strings.Contains(err.Error(), "1024") {
			t.Errorf("block %s: %v, want ok=%v", c.block, err, c.ok)
		}
	}
}

// TestJSONErrorsNameLineAndColumn: the position of a syntax error is given
// as 1-based line and column.
func TestJSONErrorsNameLineAndColumn(t *testing.T) {
	for data, want := range map[string]string{
		"{\n  \"StaticHash\": x\n}": "line 2, column 17",
		"{x":                        "line 1, column 2",
		"\n\n  ]":                   "line 3, column 3",
	} {
		_, err := ParseKernel("k.json", []byte(data))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", data, err, want)
		}
	}
}
