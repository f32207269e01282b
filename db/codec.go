package db

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/xxh3"
)

// encodedChunk is one chunk ready to write.
type encodedChunk struct {
	codec  byte
	sum    uint64
	stored []byte
	buf    *[]byte // pooled buffer behind stored, if any
	done   func()  // tells the source its bytes are no longer needed
}

// chunkBufs recycles chunk-sized buffers for compressed output and shuffling.
var chunkBufs sync.Pool

func getBuf(n int) *[]byte {
	bp, _ := chunkBufs.Get().(*[]byte)
	if bp == nil || cap(*bp) < n {
		b := make([]byte, 0, max(n, DefaultChunkSize))
		bp = &b
	}
	return bp
}

func putBuf(bp *[]byte) {
	if bp != nil {
		chunkBufs.Put(bp)
	}
}

func (c *encodedChunk) release() {
	putBuf(c.buf)
	c.buf = nil
	if c.done != nil {
		c.done()
		c.done = nil
	}
}

// probeSize is how much of a chunk is compressed first to decide whether the
// rest is worth trying, so incompressible data costs a fraction of a pass.
const probeSize = 32 << 10

// pays reports whether compression saved at least an eighth; less is not
// worth the decompression time on every replay.
func pays(stored, raw int) bool { return stored < raw-raw/8 }

// shufflePlanes is the number of byte planes of codecShuffle4, and
// shuffleHeader the size of its per-plane table (stored length u32, codec u32).
const (
	shufflePlanes = 4
	shuffleHeader = shufflePlanes * 8
)

// compression is how a snapshot's chunks are compressed.
type compression int

const (
	compressNone compression = iota
	compressZstd
	// compressFast: S2 for whole chunks and for byte planes
	// (SnapshotOptions.Fast).
	compressFast
)

func compressionOf(opts SnapshotOptions) compression {
	switch {
	case !opts.Compress:
		return compressNone
	case opts.Fast:
		return compressFast
	}
	return compressZstd
}

func encodeChunk(raw []byte, how compression) encodedChunk {
	if IsZero(raw) {
		return encodedChunk{codec: codecZero}
	}
	c := encodedChunk{codec: codecRaw, sum: xxh3.Hash(raw), stored: raw}
	if how == compressNone || len(raw) < 256 {
		return c
	}
	if how == compressFast {
		if out, bp, ok := tryS2(raw); ok {
			c.codec, c.stored, c.buf = codecS2, out, bp
			return c
		}
	} else if out, bp, ok := tryZstd(raw); ok {
		c.codec, c.stored, c.buf = codecZstd, out, bp
		return c
	}
	if out, bp, ok := tryShuffle(raw, how == compressFast); ok {
		c.codec, c.stored, c.buf = codecShuffle4, out, bp
	}
	return c
}

// tryZstd compresses raw whole as one zstd frame, tryWhole's way.
func tryZstd(raw []byte) ([]byte, *[]byte, bool) {
	return tryWhole(raw, len(raw), func(dst, src []byte) []byte { return zstdEncoder().EncodeAll(src, dst) })
}

// tryS2 compresses raw whole as one S2 block, tryWhole's way.
func tryS2(raw []byte) ([]byte, *[]byte, bool) {
	return tryWhole(raw, s2.MaxEncodedLen(len(raw)), appendS2)
}

// tryWhole compresses raw whole with encode (which appends src compressed
// to dst) into a pooled buffer of at least bufLen bytes, after a probe of
// its start says it may pay; it keeps the result only when it pays.
func tryWhole(raw []byte, bufLen int, encode func(dst, src []byte) []byte) ([]byte, *[]byte, bool) {
	bp := getBuf(bufLen)
	if len(raw) >= 4*probeSize {
		probe := encode((*bp)[:0], raw[:probeSize])
		*bp = probe[:0]
		if !pays(len(probe), probeSize) {
			putBuf(bp)
			return nil, nil, false
		}
	}
	out := encode((*bp)[:0], raw)
	*bp = out[:0]
	if !pays(len(out), len(raw)) {
		putBuf(bp)
		return nil, nil, false
	}
	return out, bp, true
}

// shuffle4 splits src's 32-bit words into dst's four byte planes. Four
// words at a time, as one 4x4 byte transpose in registers: a quarter of the
// loads and stores of a byte at a time.
func shuffle4(dst, src []byte) {
	n := len(src) / 4
	p0, p1, p2, p3 := dst[:n], dst[n:2*n], dst[2*n:3*n], dst[3*n:4*n]
	src = src[:4*n]
	i := 0
	for ; i+4 <= n; i += 4 {
		s := src[4*i : 4*i+16 : 4*i+16]
		w0 := binary.LittleEndian.Uint32(s[0:])
		w1 := binary.LittleEndian.Uint32(s[4:])
		w2 := binary.LittleEndian.Uint32(s[8:])
		w3 := binary.LittleEndian.Uint32(s[12:])
		binary.LittleEndian.PutUint32(p0[i:i+4:i+4], w0&0xff|(w1&0xff)<<8|(w2&0xff)<<16|w3<<24)
		binary.LittleEndian.PutUint32(p1[i:i+4:i+4], (w0>>8)&0xff|w1&0xff00|(w2&0xff00)<<8|(w3>>8)<<24)
		binary.LittleEndian.PutUint32(p2[i:i+4:i+4], (w0>>16)&0xff|(w1>>8)&0xff00|w2&0xff0000|(w3>>16)<<24)
		binary.LittleEndian.PutUint32(p3[i:i+4:i+4], w0>>24|(w1>>24)<<8|(w2>>24)<<16|(w3>>24)<<24)
	}
	for ; i < n; i++ {
		w := src[4*i : 4*i+4 : 4*i+4]
		p0[i], p1[i], p2[i], p3[i] = w[0], w[1], w[2], w[3]
	}
}

// unshuffle4 is shuffle4's inverse, four words at a time likewise.
func unshuffle4(dst, src []byte) {
	n := len(dst) / 4
	p0, p1, p2, p3 := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
	dst = dst[:4*n]
	i := 0
	for ; i+4 <= n; i += 4 {
		b0 := binary.LittleEndian.Uint32(p0[i : i+4 : i+4])
		b1 := binary.LittleEndian.Uint32(p1[i : i+4 : i+4])
		b2 := binary.LittleEndian.Uint32(p2[i : i+4 : i+4])
		b3 := binary.LittleEndian.Uint32(p3[i : i+4 : i+4])
		d := dst[4*i : 4*i+16 : 4*i+16]
		binary.LittleEndian.PutUint32(d[0:], b0&0xff|(b1&0xff)<<8|(b2&0xff)<<16|b3<<24)
		binary.LittleEndian.PutUint32(d[4:], (b0>>8)&0xff|b1&0xff00|(b2&0xff00)<<8|(b3>>8)<<24)
		binary.LittleEndian.PutUint32(d[8:], (b0>>16)&0xff|(b1>>8)&0xff00|b2&0xff0000|(b3>>16)<<24)
		binary.LittleEndian.PutUint32(d[12:], b0>>24|(b1>>24)<<8|(b2>>24)<<16|(b3>>24)<<24)
	}
	for ; i < n; i++ {
		w := dst[4*i : 4*i+4 : 4*i+4]
		w[0], w[1], w[2], w[3] = p0[i], p1[i], p2[i], p3[i]
	}
}

// tryShuffle stores raw as four byte planes, each compressed (with zstd, or
// with S2 when fast) when that pays.
func tryShuffle(raw []byte, fast bool) ([]byte, *[]byte, bool) {
	if len(raw)%4 != 0 || len(raw) < 4*probeSize {
		return nil, nil, false
	}
	enc := zstdEncoder()
	planes := getBuf(len(raw))
	defer putBuf(planes)
	// Probe: shuffle only the start and see whether any plane compresses.
	probe := (*planes)[:probeSize]
	shuffle4(probe, raw[:probeSize])
	out := getBuf(s2.MaxEncodedLen(len(raw)) + shuffleHeader)
	anyPays := false
	for p := 0; p < shufflePlanes; p++ {
		pl := probe[p*probeSize/4 : (p+1)*probeSize/4]
		var z []byte
		if fast {
			z = appendS2((*out)[:0], pl)
		} else {
			z = enc.EncodeAll(pl, (*out)[:0])
		}
		if pays(len(z), len(pl)) {
			anyPays = true
			break
		}
	}
	if !anyPays {
		putBuf(out)
		return nil, nil, false
	}
	all := (*planes)[:len(raw)]
	shuffle4(all, raw)
	n := len(raw) / 4
	dst := append((*out)[:0], make([]byte, shuffleHeader)...)
	for p := 0; p < shufflePlanes; p++ {
		pl := all[p*n : (p+1)*n]
		start := len(dst)
		codec := uint32(planeRaw)
		if fast {
			// S2 costs less than a zstd probe: no probe.
			if z := appendS2(dst, pl); pays(len(z)-start, n) {
				dst, codec = z, planeS2
			}
		} else if z := enc.EncodeAll(pl[:min(probeSize, n)], dst); pays(len(z)-start, min(probeSize, n)) {
			if z = enc.EncodeAll(pl, z[:start]); pays(len(z)-start, n) {
				dst, codec = z, planeZstd
			}
		}
		if codec == planeRaw {
			dst = append(dst[:start], pl...)
		}
		binary.LittleEndian.PutUint32(dst[8*p:], uint32(len(dst)-start))
		binary.LittleEndian.PutUint32(dst[8*p+4:], codec)
	}
	*out = dst[:0]
	if !pays(len(dst), len(raw)) {
		putBuf(out)
		return nil, nil, false
	}
	return dst, out, true
}

// appendS2 appends src compressed in S2's block format to dst.
func appendS2(dst, src []byte) []byte {
	need := s2.MaxEncodedLen(len(src))
	dst = slices.Grow(dst, need)
	out := s2.Encode(dst[len(dst):len(dst)+need], src)
	return dst[:len(dst)+len(out)]
}

// decodeS2 decompresses an S2 block into dst, which it must fill exactly.
func decodeS2(dst, src []byte) error {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return fmt.Errorf("s2: %v", err)
	}
	if n != len(dst) {
		return fmt.Errorf("s2 block decodes to %d bytes, want %d", n, len(dst))
	}
	out, err := s2.Decode(dst, src)
	if err != nil {
		return fmt.Errorf("s2: %v", err)
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		copy(dst, out)
	}
	return nil
}

// decodeZstd decompresses src into dst, which it must fill exactly.
func decodeZstd(dst, src []byte) error {
	out, err := zstdDecoder().DecodeAll(src, dst[:0])
	if err != nil {
		return fmt.Errorf("zstd: %v", err)
	}
	if len(out) != len(dst) {
		return fmt.Errorf("decompressed to %d bytes, want %d", len(out), len(dst))
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		copy(dst, out)
	}
	return nil
}

// decodeShuffle reverses tryShuffle into dst, using scratch for the planes.
func decodeShuffle(dst, src []byte, scratch *[]byte) error {
	if len(dst)%4 != 0 {
		return fmt.Errorf("shuffled chunk of %d bytes is not a multiple of 4", len(dst))
	}
	if len(src) < shuffleHeader {
		return fmt.Errorf("shuffled chunk of %d bytes has no plane table", len(src))
	}
	n := len(dst) / 4
	if cap(*scratch) < len(dst) {
		*scratch = make([]byte, len(dst))
	}
	planes := (*scratch)[:len(dst)]
	body := src[shuffleHeader:]
	for p := 0; p < shufflePlanes; p++ {
		stored := uint64(binary.LittleEndian.Uint32(src[8*p:]))
		codec := binary.LittleEndian.Uint32(src[8*p+4:])
		if stored > uint64(len(body)) {
			return fmt.Errorf("plane %d claims %d bytes, %d remain", p, stored, len(body))
		}
		in, pl := body[:stored], planes[p*n:(p+1)*n:(p+1)*n]
		body = body[stored:]
		switch codec {
		case planeRaw:
			if len(in) != n {
				return fmt.Errorf("raw plane %d holds %d bytes, want %d", p, len(in), n)
			}
			copy(pl, in)
		case planeZstd:
			if err := decodeZstd(pl, in); err != nil {
				return fmt.Errorf("plane %d: %v", p, err)
			}
		case planeS2:
			if err := decodeS2(pl, in); err != nil {
				return fmt.Errorf("plane %d: %v", p, err)
			}
		default:
			return fmt.Errorf("plane %d: unknown codec %d", p, codec)
		}
	}
	if len(body) != 0 {
		return fmt.Errorf("%d bytes after the last plane", len(body))
	}
	unshuffle4(dst, planes)
	return nil
}

// zstd coders are shared: EncodeAll and DecodeAll are safe for concurrent
// use and keep their state between calls, so a snapshot pays no setup cost.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderCRC(false), // every chunk has its own xxh3
			zstd.WithWindowSize(maxChunkSize))
		if err != nil {
			panic(err) // only invalid static options get here
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.IgnoreChecksum(true),
			// A chunk never decodes to more than the largest chunk size, so
			// a corrupt frame cannot make the decoder allocate more.
			zstd.WithDecoderMaxMemory(maxChunkSize),
			zstd.WithDecoderMaxWindow(maxChunkSize))
		if err != nil {
			panic(err)
		}
		return d
	})
	zeroPage [64 << 10]byte
)

// IsZero reports whether every byte of b is zero: the chunks a snapshot
// stores as zero, without their bytes.
func IsZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
