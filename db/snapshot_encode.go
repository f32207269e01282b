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

// EncodeSnapshot writes s in the snapshot format (FORMAT.md) to w: the
// header, the globals, the blobs, the arguments and the trailer, in order.
func EncodeSnapshot(w io.Writer, s *Snapshot, opts SnapshotOptions) error {
	cs, err := chunkSizeOf(opts)
	if err != nil {
		return err
	}
	if err := s.validate(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	sw := &snapWriter{w: bufio.NewWriterSize(w, 256<<10), meta: xxh3.New(), cs: cs, compress: opts.Compress, workers: runtime.GOMAXPROCS(0)}
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
	binary.LittleEndian.PutUint32(hdr[8:], FormatVersion)
	if sw.compress {
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
		if err := sw.region(b.Data); err != nil {
			return err
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
