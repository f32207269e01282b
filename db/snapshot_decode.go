package db

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/zeebo/xxh3"
)

// SnapshotLimits bound what a snapshot may declare, from the kernel file it
// belongs to, before any of its data is allocated. Zero fields do not limit.
type SnapshotLimits struct {
	// ArenaBase and ArenaSize are the recording arena (VAddr, VASize):
	// every allocation lies inside it.
	ArenaBase, ArenaSize uint64
	// MaxGlobalBytes bounds the device globals together: a global cannot
	// exceed the memory of the device it was recorded on (Device.TotalMem).
	MaxGlobalBytes uint64
	// MaxBlobBytes bounds the live allocations together: an application
	// cannot have held more device memory than its GPU had
	// (Device.TotalMem), however large the arena it reserved.
	MaxBlobBytes uint64
}

// KernelLimits are the limits a snapshot of kernel k must respect.
func KernelLimits(k *Kernel) SnapshotLimits {
	l := SnapshotLimits{ArenaSize: k.VASize, MaxGlobalBytes: k.Device.TotalMem, MaxBlobBytes: k.Device.TotalMem}
	l.ArenaBase, _ = k.ParseVAddr()
	if l.ArenaSize == 0 {
		l.ArenaSize = 1 // no arena: no allocation fits
	}
	return l
}

// ReadSnapshot reads and fully verifies a snapshot file (a regular file; a
// FIFO or device is refused), without limits beyond the file's own.
func ReadSnapshot(path string) (*Snapshot, error) {
	return ReadSnapshotLimited(path, SnapshotLimits{})
}

// ReadSnapshotLimited reads and fully verifies a snapshot file whose blobs
// and globals must respect lim. Data is allocated only once the metadata
// has been checked, and only if this process has the memory for it.
func ReadSnapshotLimited(path string, lim SnapshotLimits) (*Snapshot, error) {
	f, fi, err := safefile.Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeSnapshotIn(filepath.Dir(path), path, f, fi.Size(), lim, true)
}

// ReadSnapshotMetadata reads and verifies a snapshot's metadata (globals'
// names and sizes, blobs' addresses and sizes, arguments' sizes) and leaves
// every Data nil: what compile-only work needs, at the cost of the metadata.
func ReadSnapshotMetadata(path string, lim SnapshotLimits) (*Snapshot, error) {
	f, fi, err := safefile.Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeSnapshot(path, f, fi.Size(), lim, false)
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
	return decodeSnapshot("snapshot", bytes.NewReader(data), int64(len(data)), SnapshotLimits{}, true)
}

// DecodeSnapshotBytes verifies and decodes an in-memory snapshot.
func DecodeSnapshotBytes(data []byte) (*Snapshot, error) {
	return decodeSnapshot("snapshot", bytes.NewReader(data), int64(len(data)), SnapshotLimits{}, true)
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
	lim    SnapshotLimits
	// globalBytes and blobBytes sum the globals' and the blobs' sizes, for
	// lim.MaxGlobalBytes and lim.MaxBlobBytes.
	globalBytes, blobBytes uint64
	version                uint32
	// dir is the database directory that referenced chunks (codecRef) are
	// read from; empty when the snapshot is not read from a database.
	dir  string
	refs *refFiles
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

// chunkPlan is one chunk found by the metadata pass, decoded in the second:
// the expanded view of a storedChunk (or of a zero chunk, which the plan
// does not keep).
type chunkPlan struct {
	region  int    // index into plan.regions
	rawOff  uint64 // offset in the region's data
	rawLen  int
	codec   byte
	stored  int
	sum     uint64
	hdrOff  int64 // where its header is, for errors
	dataOff int64
	ref     *ChunkRef // codecRef: where the bytes are
}

// storedChunk is what the plan keeps of a chunk that stores something (not
// a zero chunk): the plan's memory is bounded by the file's stored bytes,
// not by the size its headers declare (a file of zero-chunk headers
// declaring 128 GiB keeps nothing per chunk).
type storedChunk struct {
	idx     uint64 // the chunk's index among all chunks of the file
	dataOff int64
	sum     uint64
	stored  uint32
	region  uint32
	codec   byte
}

type regionRef struct {
	kind byte // 'g', 'b', 'a'
	idx  int
	size uint64
	what string
	// first is the index of the region's first chunk among all chunks of
	// the file; storedAt the index in plan.stored of its first stored one.
	first    uint64
	storedAt int
}

type plan struct {
	cs      int
	regions []regionRef
	stored  []storedChunk        // chunks with stored bytes, in file order
	refs    map[uint64]*ChunkRef // codecRef chunks' targets, by chunk index
	n       uint64               // all chunks, zero chunks included
	raw     uint64
}

// expand is the full view of stored chunk sc.
func (p *plan) expand(sc *storedChunk) chunkPlan {
	r := &p.regions[sc.region]
	c := chunkPlan{region: int(sc.region), rawOff: (sc.idx - r.first) * uint64(p.cs), codec: sc.codec, stored: int(sc.stored), sum: sc.sum, dataOff: sc.dataOff}
	c.rawLen = int(min(uint64(p.cs), r.size-c.rawOff))
	c.hdrOff = sc.dataOff - chunkHeader
	if sc.codec == codecRef {
		c.ref = p.refs[sc.idx]
		c.hdrOff -= int64(sc.stored)
	}
	return c
}

// storedEnd is the index in p.stored past region ri's stored chunks.
func (p *plan) storedEnd(ri int) int {
	if ri+1 < len(p.regions) {
		return p.regions[ri+1].storedAt
	}
	return len(p.stored)
}

// chunkIn is chunk k of region ri.
func (p *plan) chunkIn(ri int, k uint64) chunkPlan {
	r := &p.regions[ri]
	lo, hi := r.storedAt, p.storedEnd(ri)
	idx := r.first + k
	if j := lo + sort.Search(hi-lo, func(j int) bool { return p.stored[lo+j].idx >= idx }); j < hi && p.stored[j].idx == idx {
		return p.expand(&p.stored[j])
	}
	c := chunkPlan{region: ri, rawOff: k * uint64(p.cs), codec: codecZero}
	c.rawLen = int(min(uint64(p.cs), r.size-c.rawOff))
	return c
}

// chunk is chunk i among all chunks of the file.
func (p *plan) chunk(i uint64) chunkPlan {
	ri := sort.Search(len(p.regions), func(j int) bool { return p.regions[j].first > i }) - 1
	return p.chunkIn(ri, i-p.regions[ri].first)
}

// storedBetween reports whether any of chunks [k0, k1) of region ri stores
// bytes (is not a zero chunk).
func (p *plan) storedBetween(ri int, k0, k1 uint64) bool {
	r := &p.regions[ri]
	lo, hi := r.storedAt, p.storedEnd(ri)
	j := lo + sort.Search(hi-lo, func(j int) bool { return p.stored[lo+j].idx >= r.first+k0 })
	return j < hi && p.stored[j].idx < r.first+k1
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
	ref.first, ref.storedAt = p.n, len(p.stored)
	p.regions = append(p.regions, ref)
	p.raw += size
	p.n += n
	for i := uint64(0); i < n; i++ {
		hdrOff := m.off
		h, err := m.read(chunkHeader, "chunk header")
		if err != nil {
			return err
		}
		c := storedChunk{idx: ref.first + i, region: uint32(ri), codec: h[0], stored: binary.LittleEndian.Uint32(h[4:]), sum: binary.LittleEndian.Uint64(h[8:])}
		rawLen := min(uint64(p.cs), size-i*uint64(p.cs))
		if h[1]|h[2]|h[3] != 0 {
			return m.errf(hdrOff, "%s chunk %d: reserved header bytes are not zero", ref.what, i)
		}
		switch c.codec {
		case codecRaw:
			if uint64(c.stored) != rawLen {
				return m.errf(hdrOff, "%s chunk %d: raw chunk stores %d bytes, want %d", ref.what, i, c.stored, rawLen)
			}
		case codecZstd, codecShuffle4, codecS2:
			if c.codec == codecS2 && m.version < snapshotVersionS2Chunks {
				return m.errf(hdrOff, "%s chunk %d: an S2 chunk, which only version %d files may hold", ref.what, i, snapshotVersionS2Chunks)
			}
			if c.stored == 0 || uint64(c.stored) >= rawLen {
				return m.errf(hdrOff, "%s chunk %d: compressed chunk stores %d bytes for %d", ref.what, i, c.stored, rawLen)
			}
		case codecZero:
			if c.stored != 0 || c.sum != 0 {
				return m.errf(hdrOff, "%s chunk %d: zero chunk with stored bytes or a checksum", ref.what, i)
			}
			continue // nothing to keep: its bytes are zero
		case codecRef:
			if m.version < snapshotVersionRefs || ref.kind != 'b' {
				return m.errf(hdrOff, "%s chunk %d: a reference to another snapshot, which only blobs of version %d files may hold", ref.what, i, snapshotVersionRefs)
			}
			if c.stored <= refFixed || c.stored > refFixed+maxRefName {
				return m.errf(hdrOff, "%s chunk %d: reference of %d bytes", ref.what, i, c.stored)
			}
			b, err := m.read(int64(c.stored), "chunk reference")
			if err != nil {
				return err
			}
			r := &ChunkRef{Chunk: binary.LittleEndian.Uint64(b), File: string(b[refFixed:])}
			if n := int(binary.LittleEndian.Uint16(b[8:])); n != len(r.File) || !validRefName(r.File) || c.sum != 0 {
				return m.errf(hdrOff, "%s chunk %d: reference to %q (chunk %d) is not a snapshot of this database, or carries a checksum", ref.what, i, r.File, r.Chunk)
			}
			if p.refs == nil {
				p.refs = map[uint64]*ChunkRef{}
			}
			p.refs[c.idx] = r
			c.dataOff = m.off
			p.stored = append(p.stored, c)
			continue
		default:
			return m.errf(hdrOff, "%s chunk %d: unknown codec %d", ref.what, i, c.codec)
		}
		if int64(c.stored) > m.size-m.off {
			return m.errf(m.off, "truncated: %s chunk %d needs %d bytes but the file ends at %d", ref.what, i, c.stored, m.size)
		}
		c.dataOff = m.off
		m.off += int64(c.stored)
		p.stored = append(p.stored, c)
	}
	return nil
}

func decodeSnapshot(name string, ra io.ReaderAt, size int64, lim SnapshotLimits, withData bool) (*Snapshot, error) {
	return decodeSnapshotIn("", name, ra, size, lim, withData)
}

// decodeSnapshotIn decodes a snapshot of the database in dir ("" when it is
// not read from one: references to other snapshots are then an error).
func decodeSnapshotIn(dir, name string, ra io.ReaderAt, size int64, lim SnapshotLimits, withData bool) (*Snapshot, error) {
	m := &metaReader{name: name, ra: ra, size: size, hash: xxh3.New(), lim: lim, dir: dir, refs: &refFiles{}}
	defer m.refs.close()
	s, p, err := m.walk()
	if err != nil {
		return nil, err
	}
	if !withData {
		return s, nil
	}
	// The whole structure is consistent and its checksum matched: only now
	// allocate what it declares, and only what this process can hold (a
	// failed allocation would end the process, not return an error).
	if budget := HostMemoryBudget(); p.raw > budget {
		return nil, fmt.Errorf("%s: %w: its data takes %s, more than the %s of memory this process can still use",
			name, mneme.ErrOutOfResources, FormatSize(p.raw), FormatSize(budget))
	}
	datas := make([][]byte, len(p.regions))
	for i, r := range p.regions {
		datas[i] = make([]byte, r.size)
	}
	if err := decodeChunks(m, p, datas); err != nil {
		return nil, err
	}
	p.assign(s, datas)
	return s, nil
}

// assign hands each region's decoded data to its global, blob or argument;
// a global or argument without chunks gets an empty slice, a blob left
// undecoded (nil: a stream's) keeps Data nil.
func (p *plan) assign(s *Snapshot, datas [][]byte) {
	for i, r := range p.regions {
		d := datas[i]
		if d == nil && r.kind != 'b' {
			d = []byte{}
		}
		switch r.kind {
		case 'g':
			s.Globals[r.idx].Data = d
		case 'b':
			s.Blobs[r.idx].Data = d
		case 'a':
			s.Args[r.idx] = d
		}
	}
}

// walk reads and checks all metadata, leaving payloads for decodeChunks:
// the header, the globals, the blobs, the arguments and the trailer, in the
// order the file holds them.
func (m *metaReader) walk() (*Snapshot, *plan, error) {
	cs, err := m.header()
	if err != nil {
		return nil, nil, err
	}
	p := &plan{cs: cs}
	s := &Snapshot{}
	for _, step := range []func(*Snapshot, *plan) error{m.globals, m.blobs, m.args} {
		if err := step(s, p); err != nil {
			return nil, nil, err
		}
	}
	if err := m.trailer(); err != nil {
		return nil, nil, err
	}
	return s, p, nil
}

// header checks the magic, the format version, the flags and the reserved
// field, and returns the chunk size.
func (m *metaReader) header() (int, error) {
	hdr, err := m.read(headerSize, "header")
	if err != nil {
		if m.size < int64(len(snapMagic)) || !bytes.Equal(mustPrefix(m, len(snapMagic)), []byte(snapMagic)) {
			return 0, m.errf(0, "not a mneme snapshot (no %s header)", snapMagic)
		}
		return 0, err
	}
	if string(hdr[:8]) != snapMagic {
		return 0, m.errf(0, "not a mneme snapshot (no %s header)", snapMagic)
	}
	switch v := binary.LittleEndian.Uint32(hdr[8:]); v {
	case FormatVersion, snapshotVersionRefs, snapshotVersionS2, snapshotVersionS2Chunks:
		m.version = v
	default:
		return 0, m.errf(8, "snapshot format version %d is not supported (this mneme reads %d to %d)", v, FormatVersion, snapshotVersionS2Chunks)
	}
	if f := binary.LittleEndian.Uint32(hdr[12:]); f&^flagCompressed != 0 {
		return 0, m.errf(12, "unknown flags 0x%x", f)
	}
	cs := int(binary.LittleEndian.Uint32(hdr[16:]))
	if _, err := chunkSizeOf(SnapshotOptions{ChunkSize: cs}); err != nil || cs == 0 {
		return 0, m.errf(16, "chunk size %d: want a power of two from %d to %d", cs, minChunkSize, maxChunkSize)
	}
	if binary.LittleEndian.Uint32(hdr[20:]) != 0 {
		return 0, m.errf(20, "reserved header field is not zero")
	}
	return cs, nil
}

// globals reads the global count and each global, whose names must be
// unique and whose address ranges must not wrap around.
func (m *metaReader) globals(s *Snapshot, p *plan) error {
	n, err := m.count("global count", minGlobalEntry)
	if err != nil {
		return err
	}
	s.Globals = make([]Global, 0, min(n, 1024))
	names := map[string]bool{}
	for i := 0; i < n; i++ {
		at := m.off
		nameLen, err := m.u64("global name length")
		if err != nil {
			return err
		}
		if nameLen == 0 || nameLen > maxNameLen {
			return m.errf(at, "global %d: name length %d outside 1..%d", i, nameLen, maxNameLen)
		}
		nb, err := m.read(int64(nameLen), "global name")
		if err != nil {
			return err
		}
		g := Global{Name: string(nb)}
		if names[g.Name] {
			return m.errf(at, "global %q appears twice", g.Name)
		}
		names[g.Name] = true
		if g.Size, err = m.u64("global size"); err != nil {
			return err
		}
		if g.Addr, err = m.u64("global address"); err != nil {
			return err
		}
		if g.Addr+g.Size < g.Addr {
			return m.errf(at, "global %q: address 0x%x + size %d overflows", g.Name, g.Addr, g.Size)
		}
		m.globalBytes += min(g.Size, maxDecodedSize)
		if m.lim.MaxGlobalBytes > 0 && m.globalBytes > m.lim.MaxGlobalBytes {
			return m.errf(at, "global %q: size %d takes the globals past the %d bytes of the recording device (Device.TotalMem)", g.Name, g.Size, m.lim.MaxGlobalBytes)
		}
		if err := m.region(p, g.Size, regionRef{kind: 'g', idx: len(s.Globals), size: g.Size, what: fmt.Sprintf("global %q", g.Name)}); err != nil {
			return err
		}
		s.Globals = append(s.Globals, g)
	}
	return nil
}

// blobs reads the blob count and each blob, then checks that no two blobs
// overlap.
func (m *metaReader) blobs(s *Snapshot, p *plan) error {
	blobsAt := m.off
	n, err := m.count("blob count", minBlobEntry)
	if err != nil {
		return err
	}
	s.Blobs = make([]Blob, 0, min(n, 1024))
	for i := 0; i < n; i++ {
		b, err := m.blob(i, p, len(s.Blobs))
		if err != nil {
			return err
		}
		s.Blobs = append(s.Blobs, b)
	}
	if err := checkBlobOverlaps(s.Blobs); err != nil {
		return m.errf(blobsAt, "%v", err)
	}
	return nil
}

// blob reads blob i (stored as index idx): its rounded size, size, address,
// payload and reserved metadata.
func (m *metaReader) blob(i int, p *plan, idx int) (Blob, error) {
	at := m.off
	var b Blob
	rounded, err := m.u64("blob rounded size")
	if err != nil {
		return b, err
	}
	if b.Size, err = m.u64("blob size"); err != nil {
		return b, err
	}
	if b.Addr, err = m.u64("blob address"); err != nil {
		return b, err
	}
	if b.Size > ^uint64(0)-pageSize || rounded != roundUp(b.Size, pageSize) {
		return b, m.errf(at, "blob %d: rounded size %d is not size %d rounded up to %d", i, rounded, b.Size, pageSize)
	}
	if b.Addr+b.Size < b.Addr {
		return b, m.errf(at, "blob %d: address 0x%x + size %d overflows", i, b.Addr, b.Size)
	}
	if l := m.lim; l.ArenaSize > 0 && b.Size > 0 && (b.Addr < l.ArenaBase || b.Addr-l.ArenaBase > l.ArenaSize || b.Size > l.ArenaSize-(b.Addr-l.ArenaBase)) {
		return b, m.errf(at, "blob %d: size %d at address 0x%x lies outside the recording arena [0x%x, 0x%x) of the kernel file (VAddr, VASize)",
			i, b.Size, b.Addr, l.ArenaBase, l.ArenaBase+l.ArenaSize)
	}
	m.blobBytes += min(b.Size, maxDecodedSize)
	if m.lim.MaxBlobBytes > 0 && m.blobBytes > m.lim.MaxBlobBytes {
		return b, m.errf(at, "blob %d: size %d takes the allocations past the %d bytes of the recording device (Device.TotalMem)", i, b.Size, m.lim.MaxBlobBytes)
	}
	if err := m.region(p, b.Size, regionRef{kind: 'b', idx: idx, size: b.Size, what: fmt.Sprintf("blob 0x%x", b.Addr)}); err != nil {
		return b, err
	}
	metaAt := m.off
	metaLen, err := m.u64("blob metadata length")
	if err != nil {
		return b, err
	}
	if metaLen > maxMetaLen {
		return b, m.errf(metaAt, "blob %d: metadata length %d exceeds %d", i, metaLen, maxMetaLen)
	}
	if _, err := m.read(int64(metaLen), "blob metadata"); err != nil {
		return b, err
	}
	return b, nil
}

// args reads the argument count and each argument's size and payload.
func (m *metaReader) args(s *Snapshot, p *plan) error {
	n, err := m.count("argument count", minArgEntry)
	if err != nil {
		return err
	}
	s.Args = make([][]byte, n)
	for i := 0; i < n; i++ {
		at := m.off
		size, err := m.u64("argument size")
		if err != nil {
			return err
		}
		if size > maxArgSize {
			return m.errf(at, "argument %d: size %d exceeds %d", i, size, maxArgSize)
		}
		if err := m.region(p, size, regionRef{kind: 'a', idx: i, size: size, what: fmt.Sprintf("argument %d", i)}); err != nil {
			return err
		}
	}
	return nil
}

// trailer checks the trailer magic, the checksum of all metadata before it,
// and that nothing follows.
func (m *metaReader) trailer() error {
	trailerAt := m.off
	tm, err := m.read(int64(len(trailerMagic)), "trailer")
	if err != nil {
		return err
	}
	if string(tm) != trailerMagic {
		return m.errf(trailerAt, "no %s trailer where the arguments end", trailerMagic)
	}
	want := m.hash.Sum64()
	sb, err := m.read(8, "trailer checksum")
	if err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint64(sb); got != want && !skipMetaChecksum {
		return m.errf(trailerAt+8, "metadata checksum mismatch (stored %016x, computed %016x): names, addresses or sizes are corrupt", got, want)
	}
	if m.off != m.size {
		return m.errf(m.off, "%d unexpected bytes after the trailer", m.size-m.off)
	}
	return nil
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
	if p.raw < 4<<20 || len(p.stored) < 2 {
		workers = 1
	}
	workers = min(workers, len(p.stored))
	if workers <= 1 {
		var scratch []byte
		for i := range p.stored {
			c := p.expand(&p.stored[i])
			if err := decodeChunk(m, p, datas, &c, &scratch); err != nil {
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
		next     = make(chan int, len(p.stored))
	)
	for i := range p.stored {
		next <- i
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []byte
			for i := range next {
				c := p.expand(&p.stored[i])
				if err := decodeChunk(m, p, datas, &c, &scratch); err != nil {
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
	if c.codec == codecZero {
		return nil // make() zeroed it
	}
	end := c.rawOff + uint64(c.rawLen)
	// Capped so an overlong zstd frame cannot spill into the next chunk.
	return decodeChunkTo(m, p, c, datas[c.region][c.rawOff:end:end], scratch)
}

// decodeChunkTo decodes chunk c into dst (exactly its raw length) and
// verifies its checksum.
func decodeChunkTo(m *metaReader, p *plan, c *chunkPlan, dst []byte, scratch *[]byte) error {
	ref := p.regions[c.region]
	dst = dst[:c.rawLen:c.rawLen]
	idx := c.rawOff / uint64(p.cs)
	switch c.codec {
	case codecZero:
		clear(dst)
		return nil
	case codecRef:
		sum, err := m.readRef(dst, c, ref.what, idx, scratch)
		if err != nil {
			return err
		}
		if got := xxh3.Hash(dst); got != sum {
			return m.errf(c.hdrOff, "%s chunk %d: the referenced chunk's checksum does not match its bytes (stored %016x, computed %016x): %s is corrupt", ref.what, idx, sum, got, c.ref.File)
		}
		return nil
	case codecRaw:
		if _, err := m.ra.ReadAt(dst, c.dataOff); err != nil && !(errors.Is(err, io.EOF)) {
			return fmt.Errorf("%s: read at %d: %w", m.name, c.dataOff, err)
		}
	case codecZstd, codecShuffle4, codecS2:
		if cap(*scratch) < c.stored {
			*scratch = make([]byte, c.stored)
		}
		src := (*scratch)[:c.stored]
		if _, err := m.ra.ReadAt(src, c.dataOff); err != nil && !(errors.Is(err, io.EOF)) {
			return fmt.Errorf("%s: read at %d: %w", m.name, c.dataOff, err)
		}
		if err := decodeStored(c.codec, dst, src); err != nil {
			return m.errf(c.dataOff, "%s chunk %d: %v", ref.what, idx, err)
		}
	}
	if got := xxh3.Hash(dst); got != c.sum {
		return m.errf(c.hdrOff, "%s chunk %d: checksum mismatch (stored %016x, computed %016x): data corrupt", ref.what, idx, c.sum, got)
	}
	return nil
}

// validRefName accepts what a reference may name: a snapshot file of the
// same database (DeviceState.*.mneme), never a path.
func validRefName(name string) bool {
	if !strings.HasPrefix(name, "DeviceState.") || !strings.HasSuffix(name, ".mneme") || strings.Contains(name, "..") {
		return false
	}
	for _, r := range name {
		if !(r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// refFiles keeps the snapshot files that references point into open while
// one snapshot is decoded.
type refFiles struct {
	mu    sync.Mutex
	files map[string]*refFile
}

type refFile struct {
	f    *os.File
	plan *plan // its chunks, from a verified walk of its metadata
	err  error
}

func (r *refFiles) open(dir, name string) (*refFile, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rf, ok := r.files[name]; ok {
		return rf, rf.err
	}
	if r.files == nil {
		r.files = map[string]*refFile{}
	}
	rf := &refFile{}
	f, fi, err := safefile.OpenIn(dir, name, 0)
	if err != nil {
		rf.err = err
	} else {
		rf.f = f
		m := &metaReader{name: name, ra: f, size: fi.Size(), hash: xxh3.New()}
		if _, rf.plan, err = m.walk(); err != nil {
			rf.err = err
		}
	}
	r.files[name] = rf
	return rf, rf.err
}

func (r *refFiles) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rf := range r.files {
		if rf.f != nil {
			rf.f.Close()
		}
	}
	r.files = nil
}

// readRef decodes a referenced chunk into dst and returns its checksum:
// the referenced file's metadata must verify, and the chunk must be a blob
// chunk of dst's length stored with its data (raw or compressed, never
// another reference or a zero chunk).
func (m *metaReader) readRef(dst []byte, c *chunkPlan, what string, idx uint64, scratch *[]byte) (uint64, error) {
	r := c.ref
	where := fmt.Sprintf("%s chunk %d: reference to chunk %d of %s", what, idx, r.Chunk, r.File)
	if m.dir == "" {
		return 0, m.errf(c.hdrOff, "%s: the snapshot is not read from a database directory", where)
	}
	rf, err := m.refs.open(m.dir, r.File)
	if err != nil {
		return 0, m.errf(c.hdrOff, "%s: %v", where, err)
	}
	if r.Chunk >= rf.plan.n {
		return 0, m.errf(c.hdrOff, "%s: that file has %d chunks", where, rf.plan.n)
	}
	t := rf.plan.chunk(r.Chunk)
	if rf.plan.regions[t.region].kind != 'b' || t.rawLen != len(dst) || t.codec != codecRaw && t.codec != codecZstd && t.codec != codecShuffle4 && t.codec != codecS2 {
		return 0, m.errf(c.hdrOff, "%s: the chunk there (codec %d, %d bytes) is not a stored blob chunk of %d bytes", where, t.codec, t.rawLen, len(dst))
	}
	src := dst
	if t.codec != codecRaw {
		if cap(*scratch) < t.stored {
			*scratch = make([]byte, t.stored)
		}
		src = (*scratch)[:t.stored]
	}
	if _, err := rf.f.ReadAt(src, t.dataOff); err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("%s: %s: %w", m.name, where, err)
	}
	if t.codec != codecRaw {
		if err := decodeStored(t.codec, dst, src); err != nil {
			return 0, m.errf(c.hdrOff, "%s: %v", where, err)
		}
	}
	return t.sum, nil
}

// decodeStored decodes the stored bytes src of a compressed chunk (zstd,
// S2 or shuffle4) into dst, which it must fill exactly.
func decodeStored(codec byte, dst, src []byte) error {
	switch codec {
	case codecZstd:
		return decodeZstd(dst, src)
	case codecS2:
		return decodeS2(dst, src)
	case codecShuffle4:
		planes := getBuf(len(dst))
		defer putBuf(planes)
		return decodeShuffle(dst, src, planes)
	}
	return fmt.Errorf("codec %d is not a compressed one", codec)
}
