package db

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"

	"github.com/zeebo/xxh3"
)

// snapWriter writes the format to a buffered stream, hashing every metadata
// byte for the trailer.
type snapWriter struct {
	w        *bufio.Writer
	meta     *xxh3.Hasher
	cs       int
	version  uint32
	compress compression
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

// writeChunk writes one chunk's header and stored bytes. A reference's
// stored bytes are metadata (hashed); a payload is covered by its own
// checksum.
func (sw *snapWriter) writeChunk(c *encodedChunk) error {
	h := sw.scratch[:]
	clear(h)
	h[0] = c.codec
	binary.LittleEndian.PutUint32(h[4:], uint32(len(c.stored)))
	binary.LittleEndian.PutUint64(h[8:], c.sum)
	if err := sw.writeMeta(h); err != nil {
		return err
	}
	var err error
	if c.codec == codecRef {
		err = sw.writeMeta(c.stored)
	} else {
		_, err = sw.w.Write(c.stored)
	}
	c.release()
	return err
}

// dataChunks is the chunk source of bytes held in memory.
func (sw *snapWriter) dataChunks(data []byte) func(int) (SourceChunk, error) {
	return func(i int) (SourceChunk, error) {
		return SourceChunk{Data: data[i*sw.cs : min(len(data), (i+1)*sw.cs)]}, nil
	}
}

// region writes data as chunks.
func (sw *snapWriter) region(data []byte) error {
	return sw.chunks(uint64(len(data)), sw.dataChunks(data))
}

// encodeSource turns one source chunk into what is written.
func (sw *snapWriter) encodeSource(c SourceChunk) encodedChunk {
	switch {
	case c.Zero:
		return encodedChunk{codec: codecZero}
	case c.Ref != nil:
		return encodedChunk{codec: codecRef, stored: encodeRef(c.Ref)}
	}
	e := encodeChunk(c.Data, sw.compress)
	// A raw chunk is written from Data itself: the caller gets it back
	// (Done) once the chunk is written.
	e.done = c.Done
	return e
}

// checkSource rejects a source chunk the format cannot hold.
func checkSource(c SourceChunk, i, rawLen int) error {
	switch {
	case c.Ref != nil:
		if c.Zero || c.Data != nil {
			return fmt.Errorf("chunk %d: a reference with data", i)
		}
		if !validRefName(c.Ref.File) {
			return fmt.Errorf("chunk %d: reference to %q, not a snapshot file name", i, c.Ref.File)
		}
	case !c.Zero && len(c.Data) != rawLen:
		return fmt.Errorf("chunk %d: %d bytes, want %d", i, len(c.Data), rawLen)
	}
	return nil
}

// chunks writes size bytes as chunks taken from src in order, encoding them
// in parallel while writing finished ones in order; at most 2*workers
// chunks are in flight.
func (sw *snapWriter) chunks(size uint64, src func(int) (SourceChunk, error)) error {
	n := int((size + uint64(sw.cs) - 1) / uint64(sw.cs))
	rawLen := func(i int) int { return int(min(uint64(sw.cs), size-uint64(i)*uint64(sw.cs))) }
	get := func(i int) (SourceChunk, error) {
		c, err := src(i)
		if err == nil {
			err = checkSource(c, i, rawLen(i))
		}
		if err != nil && c.Done != nil {
			c.Done()
		}
		return c, err
	}
	if n <= 1 || sw.workers <= 1 {
		for i := 0; i < n; i++ {
			c, err := get(i)
			if err != nil {
				return err
			}
			e := sw.encodeSource(c)
			if err := sw.writeChunk(&e); err != nil {
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
		for ; err == nil && launched < n && launched < i+window; launched++ {
			j := launched
			c, gerr := get(j)
			if gerr != nil {
				err = gerr
				break
			}
			done[j] = make(chan struct{})
			go func() {
				results[j] = sw.encodeSource(c)
				close(done[j])
			}()
		}
		if i >= launched {
			break // the source failed: nothing more was started
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

// encodeRef is a reference's stored bytes: chunk index u64, name length
// u16, name.
func encodeRef(r *ChunkRef) []byte {
	b := make([]byte, refFixed+len(r.File))
	binary.LittleEndian.PutUint64(b, r.Chunk)
	binary.LittleEndian.PutUint16(b[8:], uint16(len(r.File)))
	copy(b[refFixed:], r.File)
	return b
}

// EncodeSnapshot writes s in the snapshot format (FORMAT.md) to w: the
// header, the globals, the blobs, the arguments and the trailer, in order.
func EncodeSnapshot(w io.Writer, s *Snapshot, opts SnapshotOptions) error {
	return encodeWithWorkers(w, s, opts, runtime.GOMAXPROCS(0))
}

// encodeWithWorkers encodes with up to workers chunks compressed at once.
func encodeWithWorkers(w io.Writer, s *Snapshot, opts SnapshotOptions, workers int) error {
	cs, err := chunkSizeOf(opts)
	if err != nil {
		return err
	}
	if err := s.validate(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	sw := &snapWriter{w: bufio.NewWriterSize(w, 256<<10), meta: xxh3.New(), cs: cs, compress: compressionOf(opts), workers: workers}
	sw.version = FormatVersion
	if s.hasChunkSources() {
		sw.version = snapshotVersionRefs
	}
	if sw.compress == compressFast {
		sw.version = snapshotVersionS2Chunks
	}
	for _, step := range []func(*Snapshot) error{sw.header, sw.globals, sw.blobs, sw.args, sw.trailer} {
		if err := step(s); err != nil {
			return err
		}
	}
	return sw.w.Flush()
}

// header writes the magic, the format version, the flags and the chunk size.
func (sw *snapWriter) header(*Snapshot) error {
	var hdr [headerSize]byte
	copy(hdr[:], snapMagic)
	binary.LittleEndian.PutUint32(hdr[8:], sw.version)
	if sw.compress != compressNone {
		binary.LittleEndian.PutUint32(hdr[12:], flagCompressed)
	}
	binary.LittleEndian.PutUint32(hdr[16:], uint32(sw.cs))
	return sw.writeMeta(hdr[:])
}

// globals writes the global count, then each global's name, size, address
// and data.
func (sw *snapWriter) globals(s *Snapshot) error {
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
	return nil
}

// blobs writes the blob count, then each blob's rounded size, size, address,
// data and (empty, reserved) metadata.
func (sw *snapWriter) blobs(s *Snapshot) error {
	if err := sw.u64(uint64(len(s.Blobs))); err != nil {
		return err
	}
	for _, b := range s.Blobs {
		for _, v := range []uint64{roundUp(b.Size, pageSize), b.Size, b.Addr} {
			if err := sw.u64(v); err != nil {
				return err
			}
		}
		src := b.Chunks
		if src == nil {
			src = sw.dataChunks(b.Data)
		}
		if err := sw.chunks(b.Size, src); err != nil {
			return fmt.Errorf("blob 0x%x: %w", b.Addr, err)
		}
		if err := sw.u64(0); err != nil { // meta: reserved, empty
			return err
		}
	}
	return nil
}

// args writes the argument count, then each argument's size and bytes.
func (sw *snapWriter) args(s *Snapshot) error {
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
	return nil
}

// trailer writes the trailer magic and the checksum of all metadata before it.
func (sw *snapWriter) trailer(*Snapshot) error {
	if err := sw.writeMeta([]byte(trailerMagic)); err != nil {
		return err
	}
	var sum [8]byte
	binary.LittleEndian.PutUint64(sum[:], sw.meta.Sum64())
	_, err := sw.w.Write(sum[:])
	return err
}

// WriteSnapshot writes s to path atomically and returns the file's size.
func WriteSnapshot(path string, s *Snapshot, opts SnapshotOptions) (int64, error) {
	return writeAtomic(path, !opts.NoSync, func(w io.Writer) error { return EncodeSnapshot(w, s, opts) })
}
