package db

import (
	"fmt"
	"math/bits"
	"sort"
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
	Data []byte // len(Data) == Size, or nil when Chunks provides the bytes
	// Chunks, when set, provides the blob chunk by chunk (chunks of the
	// writer's chunk size, called in order from one goroutine) instead of
	// Data: how a recording streams device memory through pinned staging
	// buffers, and leaves out chunks it knows to be zero or already stored.
	Chunks func(i int) (SourceChunk, error)
}

// SourceChunk is one chunk of a Blob written from Blob.Chunks.
type SourceChunk struct {
	// Zero: every byte of the chunk is zero (nothing is stored).
	Zero bool
	// Ref: the chunk's bytes are those of a chunk already stored in another
	// snapshot file of the same database (nothing but the reference is
	// stored).
	Ref *ChunkRef
	// Data holds the chunk's raw bytes otherwise.
	Data []byte
	// Done, if set, is called once Data is no longer needed (from any
	// goroutine), so a staging buffer can be reused.
	Done func()
}

// ChunkRef locates a chunk stored with its data in another snapshot file of
// the database: the content store a recording references instead of copying
// and writing the same bytes again. A chunk is named by its position, so a
// recording can reference a file it has planned but not yet written.
type ChunkRef struct {
	File  string // snapshot file name inside the database directory
	Chunk uint64 // the chunk's index among all chunks of File, in file order
}

// ChunkIndex is the index in a snapshot file (ChunkRef.Chunk) of chunk i of
// blob b, for a snapshot whose globals and blobs have these sizes, written
// with chunk size cs: globals' chunks come first, then each blob's.
func ChunkIndex(globalSizes, blobSizes []uint64, b, i int, cs int) uint64 {
	n := uint64(i)
	for _, g := range globalSizes {
		n += (g + uint64(cs) - 1) / uint64(cs)
	}
	for _, sz := range blobSizes[:b] {
		n += (sz + uint64(cs) - 1) / uint64(cs)
	}
	return n
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
	// Fast (with Compress) compresses with S2 instead of zstd, whole
	// chunks and byte planes: about twice the encoding speed of the planes
	// of a float chunk and four times that of repetitive data (and faster
	// decoding) for more bytes, for writes that hold up an application. The
	// file is a version 4 snapshot.
	Fast bool
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
	// codecRef: the chunk is stored in another snapshot file of the same
	// database (ChunkRef); the stored bytes are the chunk's index in that
	// file u64, the name's length u16 and the name; the checksum field is 0
	// (the referenced chunk's own checksum verifies the bytes). Only in
	// blobs of snapshots of version 2.
	codecRef = 4
	// codecS2: one S2 block of the chunk's bytes (the block format of
	// github.com/klauspost/compress/s2). Only in snapshots of version 4,
	// written with Fast: it encodes repetitive data about four times
	// faster than zstd, for about twice the (already small) size.
	codecS2 = 5

	// snapshotVersionRefs is the snapshot format version that may hold
	// codecRef chunks; version 1 files (FormatVersion) may not.
	snapshotVersionRefs = 2
	// snapshotVersionS2 may also hold planes compressed with S2.
	snapshotVersionS2 = 3
	// snapshotVersionS2Chunks may also hold whole chunks compressed with
	// S2 (codecS2).
	snapshotVersionS2Chunks = 4

	// Codecs of a codecShuffle4 chunk's planes.
	planeRaw  = 0
	planeZstd = 1
	planeS2   = 2 // S2 block format (github.com/klauspost/compress/s2)
	// refFixed is the fixed part of a reference's stored bytes.
	refFixed = 8 + 2
	// maxRefName bounds a referenced file's name.
	maxRefName = 255

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
		if b.Chunks != nil && b.Data != nil {
			return fmt.Errorf("blob %d at 0x%x: both Data and Chunks are set", i, b.Addr)
		}
		if b.Chunks == nil && uint64(len(b.Data)) != b.Size {
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

// hasChunkSources reports whether any blob is written from Blob.Chunks,
// which may produce references (a version 2 file).
func (s *Snapshot) hasChunkSources() bool {
	for _, b := range s.Blobs {
		if b.Chunks != nil {
			return true
		}
	}
	return false
}

// RawSize is the number of data bytes the snapshot holds.
func (s *Snapshot) RawSize() uint64 {
	var n uint64
	for _, g := range s.Globals {
		n += uint64(len(g.Data))
	}
	for _, b := range s.Blobs {
		if b.Chunks != nil {
			n += b.Size
		} else {
			n += uint64(len(b.Data))
		}
	}
	for _, a := range s.Args {
		n += uint64(len(a))
	}
	return n
}
