package db

import (
	"bytes"
	"testing"
)

func TestShuffleRoundTrip(t *testing.T) {
	for _, n := range []int{0, 4, 28, 32, 36, 4096, 4100} {
		src := randomData(n+8, uint64(n))[:n]
		planes := make([]byte, n)
		shuffle4(planes, src)
		// Plane p holds byte p of every word.
		for i := 0; i < n/4; i++ {
			for p := 0; p < 4; p++ {
				if planes[p*n/4+i] != src[4*i+p] {
					t.Fatalf("n=%d: plane %d word %d = %x, want %x", n, p, i, planes[p*n/4+i], src[4*i+p])
				}
			}
		}
		back := make([]byte, n)
		unshuffle4(back, planes)
		if !bytes.Equal(back, src) {
			t.Fatalf("n=%d: unshuffle does not invert shuffle", n)
		}
	}
}

func BenchmarkShuffle4(b *testing.B) {
	src := floatData(1 << 20)
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		shuffle4(dst, src)
	}
}

func BenchmarkUnshuffle4(b *testing.B) {
	src := floatData(1 << 20)
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		unshuffle4(dst, src)
	}
}
