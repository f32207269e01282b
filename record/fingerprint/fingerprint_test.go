package fingerprint

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func randomChunk(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 9))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Every single-bit change of a chunk changes both lanes: each word enters
// through a bijection, so no change confined to one word can cancel.
func TestEveryBitFlipChangesBothLanes(t *testing.T) {
	for _, n := range []int{4096, 4096 + 5} { // whole words, and a tail
		data := randomChunk(n, uint64(n))
		base := Chunk(data)
		for bit := 0; bit < 8*n; bit++ {
			data[bit/8] ^= 1 << (bit % 8)
			s := Chunk(data)
			data[bit/8] ^= 1 << (bit % 8)
			if s.A == base.A || s.B == base.B {
				t.Fatalf("%d bytes: flipping bit %d leaves a lane unchanged (%+v vs %+v)", n, bit, s, base)
			}
		}
	}
}

// Changes the per-word bijection does not cover on its own: swapped words
// (position enters each term), the same word written elsewhere, a shifted
// chunk, and many random two-word changes.
func TestStructuredChangesAreSeen(t *testing.T) {
	data := randomChunk(1<<16, 3)
	base := Chunk(data)
	seen := map[Sum]string{base: "original"}
	check := func(what string, b []byte) {
		t.Helper()
		s := Chunk(b)
		if prev, ok := seen[s]; ok {
			t.Fatalf("%s has the fingerprint of %s", what, prev)
		}
		seen[s] = what
	}
	swapped := bytes.Clone(data)
	copy(swapped[0:8], data[8:16])
	copy(swapped[8:16], data[0:8])
	check("two words swapped", swapped)
	shifted := append(bytes.Clone(data[8:]), data[:8]...)
	check("words rotated by one", shifted)
	r := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < 2000; i++ {
		b := bytes.Clone(data)
		for k := 0; k < 2; k++ {
			j := 8 * r.IntN(len(b)/8)
			b[j] ^= byte(1 + r.IntN(255))
		}
		if bytes.Equal(b, data) {
			continue
		}
		s := Chunk(b)
		if s.A == base.A || s.B == base.B {
			t.Fatalf("random change %d leaves a lane unchanged", i)
		}
	}
}

func TestZeroIsExact(t *testing.T) {
	for _, n := range []int{1, 7, 8, 4096, 1<<20 + 3} {
		z := make([]byte, n)
		if !Chunk(z).Zero {
			t.Errorf("%d zero bytes: not Zero", n)
		}
		for _, at := range []int{0, n / 2, n - 1} {
			z[at] = 1
			if Chunk(z).Zero {
				t.Errorf("%d bytes with byte %d set: Zero", n, at)
			}
			z[at] = 0
		}
	}
}

// The length is part of the fingerprint: zero chunks and data followed by
// zero bytes differ from shorter ones.
func TestLengthCounts(t *testing.T) {
	if Chunk(make([]byte, 4096)) == Chunk(make([]byte, 4104)) {
		t.Error("zero chunks of different lengths share a fingerprint")
	}
	d := randomChunk(100, 5)
	if Chunk(d) == Chunk(append(bytes.Clone(d), 0)) {
		t.Error("a trailing zero byte is not seen")
	}
}

func TestDescriptorsAndResults(t *testing.T) {
	b, err := EncodeRanges([]Range{{Addr: 0x1000, Len: 5}, {Addr: 0x2008, Len: 1 << 20}})
	if err != nil || len(b) != 2*DescBytes || b[0] != 0 || b[1] != 0x10 || b[16+1] != 0x20 || b[16+8+2] != 0x10 {
		t.Fatalf("EncodeRanges: %x, %v", b, err)
	}
	if _, err := EncodeRanges([]Range{{Addr: 0x1004, Len: 8}}); err == nil {
		t.Error("an unaligned chunk was accepted")
	}
	res := make([]byte, 2*SumBytes)
	res[0], res[8], res[16] = 1, 2, 0    // zero chunk: OR word 0
	res[24], res[32], res[40] = 3, 4, 64 // data
	sums, err := DecodeSums(res, 2)
	if err != nil || sums[0] != (Sum{A: 1, B: 2, Zero: true}) || sums[1] != (Sum{A: 3, B: 4}) {
		t.Fatalf("DecodeSums: %+v, %v", sums, err)
	}
	if _, err := DecodeSums(res[:SumBytes], 2); err == nil {
		t.Error("short results were accepted")
	}
}

// The embedded PTX is what fingerprint.cu compiles to: regenerate it with
// clang-22 and compare, so the kernel and its Go reference cannot drift.
func TestPTXIsGeneratedFromSource(t *testing.T) {
	clang, err := exec.LookPath("clang++-22")
	if err != nil {
		t.Skip("clang++-22 is not installed: cannot regenerate fingerprint.ptx")
	}
	dir := t.TempDir()
	for _, f := range []string{"fingerprint.cu", "gen.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(dir, "gen.sh"))
	cmd.Env = append(os.Environ(), "CLANGXX="+clang)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "fingerprint.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, PTX) {
		t.Fatal("fingerprint.ptx is out of date: run go generate ./record/fingerprint")
	}
}
