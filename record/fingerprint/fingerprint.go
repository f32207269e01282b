// Package fingerprint defines the chunk fingerprints a recording computes on
// the GPU before and after a recorded launch, so that it copies only the
// device memory that is not zero, not already stored and, after the launch,
// changed.
//
// A fingerprint of a chunk of n bytes (words w_j: its 8-byte little-endian
// words, the last one zero-padded) has two 64-bit lanes,
//
//	A = mixA(n XOR Σ_j mixA(w_j XOR j·KA))
//	B = mixB(n·KA + Σ_j mixB(rotl(w_j, 29) XOR (j+1)·KB XOR SB))
//
// (sums mod 2^64; mixA is splitmix64's finalizer, mixB murmur3's fmix64,
// both bijections), and the OR of all words, which is zero exactly when the
// chunk is. Because each term is a bijection of its word, a change confined
// to one word always changes both lanes; any other change leaves both
// unchanged with probability about 2^-128 for data that is not built to
// collide. Sums rather than a chain let every GPU thread hash its own words.
//
// The kernel is fingerprint.cu, compiled to fingerprint.ptx and from it to
// cubins in fingerprint.fatbin (go generate); Chunk is the reference it is
// tested against on the GPU.
package fingerprint

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math/bits"
)

//go:generate ./gen.sh
//go:generate ./gen-fatbin.sh

// PTX is the fingerprint kernel, for cuModuleLoadData: any GPU CUDA 13
// runs, compiled by the driver when loaded.
//
//go:embed fingerprint.ptx
var PTX []byte

// Fatbin is the fingerprint kernel as cubins for the GPU families that
// fingerprint.fatbin.txt names, and the PTX for others: loading it compiles
// nothing on those GPUs. Load it first and fall back to PTX, which a driver
// too old for the cubins still takes.
//
//go:embed fingerprint.fatbin
var Fatbin []byte

// Kernel is the kernel's name in PTX; Threads its block size.
const (
	Kernel  = "mneme_fingerprint"
	Threads = 256
)

// DescBytes is the size of one chunk descriptor (address, length) and
// SumBytes of one result (two lanes and the OR word) in device memory.
const (
	DescBytes = 16
	SumBytes  = 24
)

// Sum is the fingerprint of one chunk.
type Sum struct {
	A, B uint64
	// Zero: every byte of the chunk is zero (exact, not a hash property).
	Zero bool
}

const (
	kA = 0x9e3779b97f4a7c15
	kB = 0xc2b2ae3d27d4eb4f
	sB = 0x165667b19e3779f9
)

func mixA(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func mixB(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

func termA(w, j uint64) uint64 { return mixA(w ^ j*kA) }
func termB(w, j uint64) uint64 { return mixB(bits.RotateLeft64(w, 29) ^ (j+1)*kB ^ sB) }

// Chunk computes the fingerprint of data as the GPU kernel does.
func Chunk(data []byte) Sum {
	var a, b, o uint64
	n := uint64(len(data))
	words := n / 8
	for j := uint64(0); j < words; j++ {
		w := binary.LittleEndian.Uint64(data[8*j:])
		a += termA(w, j)
		b += termB(w, j)
		o |= w
	}
	if n%8 != 0 {
		var tail [8]byte
		copy(tail[:], data[8*words:])
		w := binary.LittleEndian.Uint64(tail[:])
		a += termA(w, words)
		b += termB(w, words)
		o |= w
	}
	return Sum{A: mixA(a ^ n), B: mixB(b + n*kA), Zero: o == 0}
}

// Range is a span of device memory to fingerprint as one chunk.
type Range struct {
	Addr, Len uint64
}

// EncodeRanges lays out the kernel's chunk descriptors. Addresses must be
// multiples of 8 (the kernel reads whole words).
func EncodeRanges(rs []Range) ([]byte, error) {
	b := make([]byte, DescBytes*len(rs))
	for i, r := range rs {
		if r.Addr%8 != 0 {
			return nil, fmt.Errorf("fingerprint: chunk %d at %#x is not 8-byte aligned", i, r.Addr)
		}
		binary.LittleEndian.PutUint64(b[DescBytes*i:], r.Addr)
		binary.LittleEndian.PutUint64(b[DescBytes*i+8:], r.Len)
	}
	return b, nil
}

// DecodeSums reads the kernel's results for n chunks.
func DecodeSums(b []byte, n int) ([]Sum, error) {
	if len(b) != SumBytes*n {
		return nil, fmt.Errorf("fingerprint: %d result bytes for %d chunks, want %d", len(b), n, SumBytes*n)
	}
	out := make([]Sum, n)
	for i := range out {
		out[i] = Sum{
			A:    binary.LittleEndian.Uint64(b[SumBytes*i:]),
			B:    binary.LittleEndian.Uint64(b[SumBytes*i+8:]),
			Zero: binary.LittleEndian.Uint64(b[SumBytes*i+16:]) == 0,
		}
	}
	return out, nil
}
