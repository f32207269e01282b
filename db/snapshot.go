package db

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"runtime"
	"sort"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/xxh3"
)

// Global is a device global variable (a __device__ symbol) as recorded.
// Replay finds it by Name in the compiled module; Addr is where it lived in
// the recording process.
type Global struct {
	Name string
	Addr uint64
	Size uint64
	Data []byte // len(Data) == Size
}

// Blob is one live device allocation of the recording arena.
type Blob struct {
	Addr uint64
	Size uint64
	Data []byte // len(Data) == Size
}

// Snapshot is the device state around one launch: globals, live allocations
// and the argument bytes. See FORMAT.md for the file layout.
type Snapshot struct {
	Globals []Global
	Blobs   []Blob
	Args    [][]byte
}

// SnapshotOptions tune how a snapshot is written; the reader needs none of them.
type SnapshotOptions struct {
	// Compress stores each chunk zstd-compressed (whole or as byte planes)
	// when that saves at least 1/8 of its bytes. All-zero chunks are elided
	// whether or not this is set, which is where most of the savings are.
	// It is off by default: on float data it halves the file but encodes at
	// about 1 GB/s per core, below what an uncompressed write sustains
	// (db/FORMAT.md has the figures).
	Compress bool
	// ChunkSize is the unit of compression, checksumming and parallelism: a
	// power of two from 4 KiB to 64 MiB; 0 means DefaultChunkSize.
	ChunkSize int
	// NoSync skips the fsync of WriteSnapshot: the file is still replaced
	// atomically (safe if the application crashes) but not durable across
	// a power loss.
	NoSync bool
}

// DefaultChunkSize is 1 MiB: large enough for zstd to find redundancy and
// for per-chunk headers to cost nothing, small enough to parallelize.
const DefaultChunkSize = 1 << 20

const (
	snapMagic      = "MNEMESNP"
	trailerMagic   = "MNEMEEND"
	headerSize     = 24 // magic, version u32, flags u32, chunk size u32, reserved u32
	trailerSize    = 16 // magic, xxh3 of all metadata
	chunkHeader    = 16 // codec u8, reserved [3]u8, stored length u32, xxh3 of raw bytes u64
	flagCompressed = 1

	minChunkSize = 4 << 10
	maxChunkSize = 64 << 20

	codecRaw  = 0
	codecZstd = 1
	codecZero = 2
	// codecShuffle4: the chunk's bytes split into four planes (byte 0 of
	// every 4-byte word, then byte 1, ...), each stored raw or as zstd. The
	// exponent and high mantissa planes of float and int arrays compress
	// where the interleaved bytes do not.
	codecShuffle4 = 3

	// Sanity limits on metadata, far above anything CUDA produces.
	maxNameLen = 1 << 16 // a global's (mangled) name
	maxMetaLen = 1 << 20 // a blob's reserved metadata
	maxArgSize = 1 << 16 // CUDA kernel parameters are at most 32 KiB in all
	pageSize   = 4096    // pageRoundedSize granularity (Mneme's field)
)

// maxDecodedSize caps the data a snapshot may declare: far above any GPU's
// memory, it only stops a crafted file from asking for the impossible.
// skipMetaChecksum lets fuzz tests reach the code behind the trailer check.
var (
	maxDecodedSize   uint64 = 1 << 42
	skipMetaChecksum        = false
)

// Minimum encoded size of each kind of entry with an empty payload, used to
// reject counts a file cannot hold before looping over them.
const (
	minGlobalEntry = 8 + 8 + 8
	minBlobEntry   = 8 + 8 + 8 + 8
	minArgEntry    = 8
)

// validate checks what both the writer and the reader insist on.
func (s *Snapshot) validate() error {
	names := make(map[string]bool, len(s.Globals))
	for i, g := range s.Globals {
		switch {
		case g.Name == "":
			return fmt.Errorf("global %d: empty name", i)
		case len(g.Name) > maxNameLen:
			return fmt.Errorf("global %d: name of %d bytes exceeds %d", i, len(g.Name), maxNameLen)
		case names[g.Name]:
			return fmt.Errorf("global %q appears twice", g.Name)
		case uint64(len(g.Data)) != g.Size:
			return fmt.Errorf("global %q: %d data bytes for size %d", g.Name, len(g.Data), g.Size)
		case g.Addr+g.Size < g.Addr:
			return fmt.Errorf("global %q: address 0x%x + size %d overflows", g.Name, g.Addr, g.Size)
		}
		names[g.Name] = true
	}
	for i, b := range s.Blobs {
		if uint64(len(b.Data)) != b.Size {
			return fmt.Errorf("blob %d at 0x%x: %d data bytes for size %d", i, b.Addr, len(b.Data), b.Size)
		}
		if b.Addr+b.Size < b.Addr {
			return fmt.Errorf("blob %d: address 0x%x + size %d overflows", i, b.Addr, b.Size)
		}
	}
	if err := checkBlobOverlaps(s.Blobs); err != nil {
		return err
	}
	for i, a := range s.Args {
		if len(a) > maxArgSize {
			return fmt.Errorf("argument %d: %d bytes exceed %d", i, len(a), maxArgSize)
		}
	}
	return nil
}

func checkBlobOverlaps(blobs []Blob) error {
	idx := make([]int, 0, len(blobs))
	for i, b := range blobs {
		if b.Size > 0 {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return blobs[idx[a]].Addr < blobs[idx[b]].Addr })
	for j := 1; j < len(idx); j++ {
		p, q := blobs[idx[j-1]], blobs[idx[j]]
		if p.Addr+p.Size > q.Addr {
			return fmt.Errorf("blobs overlap: [0x%x, 0x%x) and [0x%x, 0x%x)", p.Addr, p.Addr+p.Size, q.Addr, q.Addr+q.Size)
		}
	}
	return nil
}

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

func chunkSizeOf(opts SnapshotOptions) (int, error) {
	cs := opts.ChunkSize
	if cs == 0 {
		return DefaultChunkSize, nil
	}
	if cs < minChunkSize || cs > maxChunkSize || bits.OnesCount(uint(cs)) != 1 {
		return 0, fmt.Errorf("chunk size %d: want a power of two from %d to %d", cs, minChunkSize, maxChunkSize)
	}
	return cs, nil
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

func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// snapWriter writes the format to a buffered stream, hashing every metadata
// byte for the trailer.
type snapWriter struct {
	w        *bufio.Writer
	meta     *xxh3.Hasher
	cs       int
	compress bool
	workers  int
	scratch  [chunkHeader]byte
}

func (sw *snapWriter) writeMeta(b []byte) error {
	sw.meta.Write(b)
	_, err := sw.w.Write(b)
	return err
}

func (sw *snapWriter) u64(v uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return sw.writeMeta(b[:])
}

func (sw *snapWriter) writeChunk(c *encodedChunk) error {
	h := sw.scratch[:]
	clear(h)
	h[0] = c.codec
	binary.LittleEndian.PutUint32(h[4:], uint32(len(c.stored)))
	binary.LittleEndian.PutUint64(h[8:], c.sum)
	if err := sw.writeMeta(h); err != nil {
		return err
	}
	_, err := sw.w.Write(c.stored)
	c.release()
	return err
}

// region writes data as chunks, compressing chunks in parallel while writing
// finished ones in order; at most 2*workers chunks are in flight.
func (sw *snapWriter) region(data []byte) error {
	n := (len(data) + sw.cs - 1) / sw.cs
	chunk := func(i int) []byte { return data[i*sw.cs : min(len(data), (i+1)*sw.cs)] }
	if n <= 1 || sw.workers <= 1 {
		for i := 0; i < n; i++ {
			c := encodeChunk(chunk(i), sw.compress)
			if err := sw.writeChunk(&c); err != nil {
				return err
			}
		}
		return nil
	}
	results := make([]encodedChunk, n)
	done := make([]chan struct{}, n)
	window := 2 * sw.workers
	launched := 0
	var err error
	for i := 0; i < n; i++ {
		for ; launched < n && launched < i+window; launched++ {
			j := launched
			done[j] = make(chan struct{})
			go func() {
				results[j] = encodeChunk(chunk(j), sw.compress)
				close(done[j])
			}()
		}
		<-done[i]
		if err == nil {
			err = sw.writeChunk(&results[i])
		} else {
			results[i].release()
		}
	}
	return err
}

// EncodeSnapshot writes s in the snapshot format (FORMAT.md) to w.
func EncodeSnapshot(w io.Writer, s *Snapshot, opts SnapshotOptions) error {
	cs, err := chunkSizeOf(opts)
	if err != nil {
		return err
	}
	if err := s.validate(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	sw := &snapWriter{w: bufio.NewWriterSize(w, 256<<10), meta: xxh3.New(), cs: cs, compress: opts.Compress, workers: runtime.GOMAXPROCS(0)}
	var hdr [headerSize]byte
	copy(hdr[:], snapMagic)
	binary.LittleEndian.PutUint32(hdr[8:], FormatVersion)
	if opts.Compress {
		binary.LittleEndian.PutUint32(hdr[12:], flagCompressed)
	}
	binary.LittleEndian.PutUint32(hdr[16:], uint32(cs))
	if err := sw.writeMeta(hdr[:]); err != nil {
		return err
	}
	if err := sw.u64(uint64(len(s.Globals))); err != nil {
		return err
	}
	for _, g := range s.Globals {
		if err := sw.u64(uint64(len(g.Name))); err != nil {
			return err
		}
		if err := sw.writeMeta([]byte(g.Name)); err != nil {
			return err
		}
		if err := sw.u64(g.Size); err != nil {
			return err
		}
		if err := sw.u64(g.Addr); err != nil {
			return err
		}
		if err := sw.region(g.Data); err != nil {
			return err
		}
	}
	if err := sw.u64(uint64(len(s.Blobs))); err != nil {
		return err
	}
	for _, b := range s.Blobs {
		for _, v := range []uint64{roundUp(b.Size, pageSize), b.Size, b.Addr} {
			if err := sw.u64(v); err != nil {
				return err
			}
		}
		if err := sw.region(b.Data); err != nil {
			return err
		}
		if err := sw.u64(0); err != nil { // meta: reserved, empty
			return err
		}
	}
	if err := sw.u64(uint64(len(s.Args))); err != nil {
		return err
	}
	for _, a := range s.Args {
		if err := sw.u64(uint64(len(a))); err != nil {
			return err
		}
		if err := sw.region(a); err != nil {
			return err
		}
	}
	if err := sw.writeMeta([]byte(trailerMagic)); err != nil {
		return err
	}
	var sum [8]byte
	binary.LittleEndian.PutUint64(sum[:], sw.meta.Sum64())
	if _, err := sw.w.Write(sum[:]); err != nil {
		return err
	}
	return sw.w.Flush()
}

// WriteSnapshot writes s to path atomically and returns the file's size.
func WriteSnapshot(path string, s *Snapshot, opts SnapshotOptions) (int64, error) {
	return writeAtomic(path, !opts.NoSync, func(w io.Writer) error { return EncodeSnapshot(w, s, opts) })
}

// ReadSnapshot reads and fully verifies a snapshot file.
func ReadSnapshot(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return decodeSnapshot(path, f, fi.Size())
}

// DecodeSnapshot reads a whole snapshot from r, refusing streams longer than
// limit bytes (limit <= 0: no limit), and verifies it as ReadSnapshot does.
func DecodeSnapshot(r io.Reader, limit int64) (*Snapshot, error) {
	lr := r
	if limit > 0 {
		lr = io.LimitReader(r, limit+1)
	}
	data, err := io.ReadAll(lr)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, fmt.Errorf("snapshot: longer than the limit of %d bytes", limit)
	}
	return decodeSnapshot("snapshot", bytes.NewReader(data), int64(len(data)))
}

// DecodeSnapshotBytes verifies and decodes an in-memory snapshot.
func DecodeSnapshotBytes(data []byte) (*Snapshot, error) {
	return decodeSnapshot("snapshot", bytes.NewReader(data), int64(len(data)))
}

// formatError locates a problem in a snapshot file.
type formatError struct {
	name string
	off  int64
	msg  string
}

func (e *formatError) Error() string {
	return fmt.Sprintf("%s: byte offset %d: %s", e.name, e.off, e.msg)
}

// ErrCorruptSnapshot is wrapped by every error about a snapshot's contents
// (as opposed to an I/O error), so callers can tell a bad file from a bad disk.
var ErrCorruptSnapshot = errors.New("corrupt snapshot")

func (e *formatError) Unwrap() error { return ErrCorruptSnapshot }

// metaReader walks a snapshot's metadata through a small buffered window over
// a ReaderAt, hashing what it reads and skipping over payloads unread.
type metaReader struct {
	name   string
	ra     io.ReaderAt
	size   int64
	off    int64
	win    []byte
	winOff int64
	hash   *xxh3.Hasher
}

func (m *metaReader) errf(off int64, format string, a ...any) error {
	return &formatError{name: m.name, off: off, msg: fmt.Sprintf(format, a...)}
}

// read returns the next n metadata bytes; the slice is valid until the next call.
func (m *metaReader) read(n int64, what string) ([]byte, error) {
	if n > m.size-m.off {
		return nil, m.errf(m.off, "truncated: %s needs %d bytes but the file ends at %d", what, n, m.size)
	}
	if m.off < m.winOff || m.off+n > m.winOff+int64(len(m.win)) {
		want := max(n, 64<<10)
		want = min(want, m.size-m.off)
		if int64(cap(m.win)) < want {
			m.win = make([]byte, want)
		}
		m.win = m.win[:want]
		if _, err := m.ra.ReadAt(m.win, m.off); err != nil && !(errors.Is(err, io.EOF)) {
			return nil, fmt.Errorf("%s: read at %d: %w", m.name, m.off, err)
		}
		m.winOff = m.off
	}
	b := m.win[m.off-m.winOff : m.off-m.winOff+n]
	m.hash.Write(b)
	m.off += n
	return b, nil
}

func (m *metaReader) u64(what string) (uint64, error) {
	b, err := m.read(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads an entry count and checks the rest of the file can hold it.
func (m *metaReader) count(what string, minEntry int64) (int, error) {
	at := m.off
	n, err := m.u64(what)
	if err != nil {
		return 0, err
	}
	if n > uint64((m.size-m.off)/minEntry) {
		return 0, m.errf(at, "%s %d cannot fit in the %d bytes left", what, n, m.size-m.off)
	}
	return int(n), nil
}

// chunkPlan is one chunk found by the metadata pass, decoded in the second.
type chunkPlan struct {
	region  int    // index into plan.regions
	rawOff  uint64 // offset in the region's data
	rawLen  int
	codec   byte
	stored  int
	sum     uint64
	hdrOff  int64 // where its header is, for errors
	dataOff int64
}

type regionRef struct {
	kind byte // 'g', 'b', 'a'
	idx  int
	size uint64
	what string
}

type plan struct {
	cs      int
	regions []regionRef
	chunks  []chunkPlan
	raw     uint64
}

// region walks the chunk headers of a payload of size bytes.
func (m *metaReader) region(p *plan, size uint64, ref regionRef) error {
	at := m.off
	// Checked first: it also keeps the chunk count below from overflowing.
	if size > maxDecodedSize || p.raw+size > maxDecodedSize {
		return m.errf(at, "%s: %d bytes would take the snapshot past %d data bytes", ref.what, size, maxDecodedSize)
	}
	n := (size + uint64(p.cs) - 1) / uint64(p.cs)
	if n > uint64((m.size-m.off)/chunkHeader) {
		return m.errf(at, "%s: %d bytes need %d chunks, more than the %d bytes left can hold", ref.what, size, n, m.size-m.off)
	}
	ri := len(p.regions)
	p.regions = append(p.regions, ref)
	p.raw += size
	for i := uint64(0); i < n; i++ {
		hdrOff := m.off
		h, err := m.read(chunkHeader, "chunk header")
		if err != nil {
			return err
		}
		c := chunkPlan{region: ri, rawOff: i * uint64(p.cs), codec: h[0], stored: int(binary.LittleEndian.Uint32(h[4:])), sum: binary.LittleEndian.Uint64(h[8:]), hdrOff: hdrOff}
		c.rawLen = int(min(uint64(p.cs), size-c.rawOff))
		if h[1]|h[2]|h[3] != 0 {
			return m.errf(hdrOff, "%s chunk %d: reserved header bytes are not zero", ref.what, i)
		}
		switch c.codec {
		case codecRaw:
			if c.stored != c.rawLen {
				return m.errf(hdrOff, "%s chunk %d: raw chunk stores %d bytes, want %d", ref.what, i, c.stored, c.rawLen)
			}
		case codecZstd, codecShuffle4:
			if c.stored == 0 || c.stored >= c.rawLen {
				return m.errf(hdrOff, "%s chunk %d: compressed chunk stores %d bytes for %d", ref.what, i, c.stored, c.rawLen)
			}
		case codecZero:
			if c.stored != 0 || c.sum != 0 {
				return m.errf(hdrOff, "%s chunk %d: zero chunk with stored bytes or a checksum", ref.what, i)
			}
		default:
			return m.errf(hdrOff, "%s chunk %d: unknown codec %d", ref.what, i, c.codec)
		}
		if int64(c.stored) > m.size-m.off {
			return m.errf(m.off, "truncated: %s chunk %d needs %d bytes but the file ends at %d", ref.what, i, c.stored, m.size)
		}
		c.dataOff = m.off
		m.off += int64(c.stored)
		p.chunks = append(p.chunks, c)
	}
	return nil
}

func decodeSnapshot(name string, ra io.ReaderAt, size int64) (*Snapshot, error) {
	m := &metaReader{name: name, ra: ra, size: size, hash: xxh3.New()}
	s, p, err := m.walk()
	if err != nil {
		return nil, err
	}
	// The whole structure is consistent and its checksum matched: only now
	// allocate what it declares.
	datas := make([][]byte, len(p.regions))
	for i, r := range p.regions {
		datas[i] = make([]byte, r.size)
	}
	if err := decodeChunks(m, p, datas); err != nil {
		return nil, err
	}
	for i, r := range p.regions {
		switch r.kind {
		case 'g':
			s.Globals[r.idx].Data = datas[i]
		case 'b':
			s.Blobs[r.idx].Data = datas[i]
		case 'a':
			s.Args[r.idx] = datas[i]
		}
	}
	return s, nil
}

// walk reads and checks all metadata, leaving payloads for decodeChunks.
func (m *metaReader) walk() (*Snapshot, *plan, error) {
	hdr, err := m.read(headerSize, "header")
	if err != nil {
		if m.size < int64(len(snapMagic)) || !bytes.Equal(mustPrefix(m, len(snapMagic)), []byte(snapMagic)) {
			return nil, nil, m.errf(0, "not a mneme snapshot (no %s header)", snapMagic)
		}
		return nil, nil, err
	}
	if string(hdr[:8]) != snapMagic {
		return nil, nil, m.errf(0, "not a mneme snapshot (no %s header)", snapMagic)
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != FormatVersion {
		return nil, nil, m.errf(8, "snapshot format version %d is not supported (this mneme reads %d)", v, FormatVersion)
	}
	if f := binary.LittleEndian.Uint32(hdr[12:]); f&^flagCompressed != 0 {
		return nil, nil, m.errf(12, "unknown flags 0x%x", f)
	}
	cs := int(binary.LittleEndian.Uint32(hdr[16:]))
	if _, err := chunkSizeOf(SnapshotOptions{ChunkSize: cs}); err != nil || cs == 0 {
		return nil, nil, m.errf(16, "chunk size %d: want a power of two from %d to %d", cs, minChunkSize, maxChunkSize)
	}
	if binary.LittleEndian.Uint32(hdr[20:]) != 0 {
		return nil, nil, m.errf(20, "reserved header field is not zero")
	}
	p := &plan{cs: cs}
	s := &Snapshot{}

	n, err := m.count("global count", minGlobalEntry)
	if err != nil {
		return nil, nil, err
	}
	s.Globals = make([]Global, 0, min(n, 1024))
	names := map[string]bool{}
	for i := 0; i < n; i++ {
		at := m.off
		nameLen, err := m.u64("global name length")
		if err != nil {
			return nil, nil, err
		}
		if nameLen == 0 || nameLen > maxNameLen {
			return nil, nil, m.errf(at, "global %d: name length %d outside 1..%d", i, nameLen, maxNameLen)
		}
		nb, err := m.read(int64(nameLen), "global name")
		if err != nil {
			return nil, nil, err
		}
		g := Global{Name: string(nb)}
		if names[g.Name] {
			return nil, nil, m.errf(at, "global %q appears twice", g.Name)
		}
		names[g.Name] = true
		if g.Size, err = m.u64("global size"); err != nil {
			return nil, nil, err
		}
		if g.Addr, err = m.u64("global address"); err != nil {
			return nil, nil, err
		}
		if g.Addr+g.Size < g.Addr {
			return nil, nil, m.errf(at, "global %q: address 0x%x + size %d overflows", g.Name, g.Addr, g.Size)
		}
		if err := m.region(p, g.Size, regionRef{kind: 'g', idx: len(s.Globals), size: g.Size, what: fmt.Sprintf("global %q", g.Name)}); err != nil {
			return nil, nil, err
		}
		s.Globals = append(s.Globals, g)
	}

	blobsAt := m.off
	if n, err = m.count("blob count", minBlobEntry); err != nil {
		return nil, nil, err
	}
	s.Blobs = make([]Blob, 0, min(n, 1024))
	for i := 0; i < n; i++ {
		at := m.off
		rounded, err := m.u64("blob rounded size")
		if err != nil {
			return nil, nil, err
		}
		var b Blob
		if b.Size, err = m.u64("blob size"); err != nil {
			return nil, nil, err
		}
		if b.Addr, err = m.u64("blob address"); err != nil {
			return nil, nil, err
		}
		if b.Size > ^uint64(0)-pageSize || rounded != roundUp(b.Size, pageSize) {
			return nil, nil, m.errf(at, "blob %d: rounded size %d is not size %d rounded up to %d", i, rounded, b.Size, pageSize)
		}
		if b.Addr+b.Size < b.Addr {
			return nil, nil, m.errf(at, "blob %d: address 0x%x + size %d overflows", i, b.Addr, b.Size)
		}
		if err := m.region(p, b.Size, regionRef{kind: 'b', idx: len(s.Blobs), size: b.Size, what: fmt.Sprintf("blob 0x%x", b.Addr)}); err != nil {
			return nil, nil, err
		}
		metaAt := m.off
		metaLen, err := m.u64("blob metadata length")
		if err != nil {
			return nil, nil, err
		}
		if metaLen > maxMetaLen {
			return nil, nil, m.errf(metaAt, "blob %d: metadata length %d exceeds %d", i, metaLen, maxMetaLen)
		}
		if _, err := m.read(int64(metaLen), "blob metadata"); err != nil {
			return nil, nil, err
		}
		s.Blobs = append(s.Blobs, b)
	}
	if err := checkBlobOverlaps(s.Blobs); err != nil {
		return nil, nil, m.errf(blobsAt, "%v", err)
	}

	if n, err = m.count("argument count", minArgEntry); err != nil {
		return nil, nil, err
	}
	s.Args = make([][]byte, n)
	for i := 0; i < n; i++ {
		at := m.off
		size, err := m.u64("argument size")
		if err != nil {
			return nil, nil, err
		}
		if size > maxArgSize {
			return nil, nil, m.errf(at, "argument %d: size %d exceeds %d", i, size, maxArgSize)
		}
		if err := m.region(p, size, regionRef{kind: 'a', idx: i, size: size, what: fmt.Sprintf("argument %d", i)}); err != nil {
			return nil, nil, err
		}
	}

	trailerAt := m.off
	tm, err := m.read(int64(len(trailerMagic)), "trailer")
	if err != nil {
		return nil, nil, err
	}
	if string(tm) != trailerMagic {
		return nil, nil, m.errf(trailerAt, "no %s trailer where the arguments end", trailerMagic)
	}
	want := m.hash.Sum64()
	sb, err := m.read(8, "trailer checksum")
	if err != nil {
		return nil, nil, err
	}
	if got := binary.LittleEndian.Uint64(sb); got != want && !skipMetaChecksum {
		return nil, nil, m.errf(trailerAt+8, "metadata checksum mismatch (stored %016x, computed %016x): names, addresses or sizes are corrupt", got, want)
	}
	if m.off != m.size {
		return nil, nil, m.errf(m.off, "%d unexpected bytes after the trailer", m.size-m.off)
	}
	return s, p, nil
}

// mustPrefix reads up to n bytes from the start of the file, for the
// "is this a snapshot at all" message; failures give an empty slice.
func mustPrefix(m *metaReader, n int) []byte {
	b := make([]byte, min(int64(n), m.size))
	k, _ := m.ra.ReadAt(b, 0)
	return b[:k]
}

// decodeChunks fills datas from the payloads, in parallel when there is
// enough to do, verifying every chunk's checksum.
func decodeChunks(m *metaReader, p *plan, datas [][]byte) error {
	workers := runtime.GOMAXPROCS(0)
	if p.raw < 4<<20 || len(p.chunks) < 2 {
		workers = 1
	}
	workers = min(workers, len(p.chunks))
	if workers <= 1 {
		var scratch []byte
		for i := range p.chunks {
			if err := decodeChunk(m, p, datas, &p.chunks[i], &scratch); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		firstAt  = int64(-1)
		next     = make(chan int, len(p.chunks))
	)
	for i := range p.chunks {
		next <- i
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []byte
			for i := range next {
				c := &p.chunks[i]
				if err := decodeChunk(m, p, datas, c, &scratch); err != nil {
					mu.Lock()
					// Report the earliest bad chunk, as a sequential reader would.
					if firstAt < 0 || c.hdrOff < firstAt {
						firstErr, firstAt = err, c.hdrOff
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func decodeChunk(m *metaReader, p *plan, datas [][]byte, c *chunkPlan, scratch *[]byte) error {
	ref := p.regions[c.region]
	end := c.rawOff + uint64(c.rawLen)
	// Capped so an overlong zstd frame cannot spill into the next chunk.
	dst := datas[c.region][c.rawOff:end:end]
	idx := c.rawOff / uint64(p.cs)
	switch c.codec {
	case codecZero:
		return nil // make() zeroed it
	case codecRaw:
		if _, err := m.ra.ReadAt(dst, c.dataOff); err != nil && !(errors.Is(err, io.EOF)) {
			return fmt.Errorf("%s: read at %d: %w", m.name, c.dataOff, err)
		}
	case codecZstd, codecShuffle4:
		if cap(*scratch) < c.stored {
			*scratch = make([]byte, c.stored)
		}
		src := (*scratch)[:c.stored]
		if _, err := m.ra.ReadAt(src, c.dataOff); err != nil && !(errors.Is(err, io.EOF)) {
			return fmt.Errorf("%s: read at %d: %w", m.name, c.dataOff, err)
		}
		var err error
		if c.codec == codecZstd {
			err = decodeZstd(dst, src)
		} else {
			planes := getBuf(len(dst))
			err = decodeShuffle(dst, src, planes)
			putBuf(planes)
		}
		if err != nil {
			return m.errf(c.dataOff, "%s chunk %d: %v", ref.what, idx, err)
		}
	}
	if got := xxh3.Hash(dst); got != c.sum {
		return m.errf(c.hdrOff, "%s chunk %d: checksum mismatch (stored %016x, computed %016x): data corrupt", ref.what, idx, c.sum, got)
	}
	return nil
}

// RawSize is the number of data bytes the snapshot holds.
func (s *Snapshot) RawSize() uint64 {
	var n uint64
	for _, g := range s.Globals {
		n += uint64(len(g.Data))
	}
	for _, b := range s.Blobs {
		n += uint64(len(b.Data))
	}
	for _, a := range s.Args {
		n += uint64(len(a))
	}
	return n
}
