package db

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/zeebo/xxh3"
)

// SnapshotStream is a snapshot whose metadata has been read and verified
// and whose blobs stay in the file, decoded window by window on demand:
// memory of any recorded size is restored, compared or scanned without a
// host buffer of its size. Globals and arguments (bounded, small) are
// decoded at open. ReadBlob may be called from several goroutines.
type SnapshotStream struct {
	// Snapshot holds the globals and the arguments with their data, and
	// the blobs' addresses and sizes with Data nil.
	Snapshot *Snapshot
	f        *os.File
	m        *metaReader
	p        *plan
	// blobRegion is each blob's region in p.
	blobRegion []int
}

// OpenSnapshotStream opens a snapshot file for streaming, as
// OpenPrologueStream does; as ReadSnapshot, references resolve in the
// file's folder.
func OpenSnapshotStream(path string, lim SnapshotLimits) (*SnapshotStream, error) {
	f, fi, err := safefile.Open(path, 0)
	if err != nil {
		return nil, err
	}
	return openStream(filepath.Dir(path), path, f, fi.Size(), lim)
}

// OpenPrologueStream opens the prologue of instance inst of kernel k for
// streaming, with the checks ReadPrologue makes of the file.
func (d *DB) OpenPrologueStream(k *Kernel, inst *Instance) (*SnapshotStream, error) {
	return d.openSnapshotStream(k, inst, inst.Prologue, "PrologueBytes", inst.PrologueBytes)
}

// OpenEpilogueStream opens the epilogue of instance inst of kernel k for
// streaming, with the checks ReadEpilogue makes of the file.
func (d *DB) OpenEpilogueStream(k *Kernel, inst *Instance) (*SnapshotStream, error) {
	return d.openSnapshotStream(k, inst, inst.Epilogue, "EpilogueBytes", inst.EpilogueBytes)
}

func (d *DB) openSnapshotStream(k *Kernel, inst *Instance, name, field string, size uint64) (*SnapshotStream, error) {
	f, n, err := d.openSnapshot(k, inst, name, field, size)
	if err != nil {
		return nil, err
	}
	return openStream(d.Dir, d.Path(name), f, n, KernelLimits(k))
}

// openStream walks and verifies the metadata of the snapshot in f (of the
// database in dir, "" for none) and decodes its globals and arguments. The
// stream owns f from here on, also on error.
func openStream(dir, name string, f *os.File, size int64, lim SnapshotLimits) (*SnapshotStream, error) {
	m := &metaReader{name: name, ra: f, size: size, hash: xxh3.New(), lim: lim, dir: dir, refs: &refFiles{}}
	st := &SnapshotStream{f: f, m: m}
	fail := func(err error) (*SnapshotStream, error) {
		st.Close()
		return nil, err
	}
	s, p, err := m.walk()
	if err != nil {
		return fail(err)
	}
	st.Snapshot, st.p = s, p
	st.blobRegion = make([]int, len(s.Blobs))
	var small uint64
	for i, r := range p.regions {
		if r.kind == 'b' {
			st.blobRegion[r.idx] = i
		} else {
			small += r.size
		}
	}
	if budget := HostMemoryBudget(); small > budget {
		return fail(fmt.Errorf("%s: %w: its globals and arguments take %s, more than the %s of memory this process can still use",
			name, mneme.ErrOutOfResources, FormatSize(small), FormatSize(budget)))
	}
	datas := make([][]byte, len(p.regions))
	for i, r := range p.regions {
		if r.kind != 'b' {
			datas[i] = make([]byte, r.size)
		}
	}
	var scratch []byte
	for i := range p.stored {
		c := p.expand(&p.stored[i])
		if p.regions[c.region].kind == 'b' {
			continue
		}
		if err := decodeChunk(m, p, datas, &c, &scratch); err != nil {
			return fail(err)
		}
	}
	p.assign(s, datas)
	return st, nil
}

// Name is the snapshot file's path, as errors name it.
func (s *SnapshotStream) Name() string { return s.m.name }

// ChunkSize is the snapshot's chunk size: windows aligned to it decode
// without waste.
func (s *SnapshotStream) ChunkSize() int { return s.p.cs }

// Close releases the file and the files references pointed into.
func (s *SnapshotStream) Close() error {
	if s == nil || s.f == nil {
		return nil
	}
	s.m.refs.close()
	err := s.f.Close()
	s.f = nil
	return err
}

// ReadBlob decodes bytes [off, off+len(dst)) of blob i into dst, verifying
// the checksum of every chunk it touches. zero reports that all of them
// are zero chunks (dst is then zeroed): nothing was stored for the window.
func (s *SnapshotStream) ReadBlob(i int, off uint64, dst []byte) (zero bool, err error) {
	if s.f == nil {
		return false, fmt.Errorf("%s: read after Close", s.m.name)
	}
	if i < 0 || i >= len(s.blobRegion) {
		return false, fmt.Errorf("%s: no blob %d (it has %d)", s.m.name, i, len(s.blobRegion))
	}
	b := s.Snapshot.Blobs[i]
	end := off + uint64(len(dst))
	if end < off || end > b.Size {
		return false, fmt.Errorf("%s: blob 0x%x: bytes %d..%d lie outside its %d", s.m.name, b.Addr, off, end, b.Size)
	}
	if len(dst) == 0 {
		return true, nil
	}
	ri := s.blobRegion[i]
	cs := uint64(s.p.cs)
	var scratch []byte
	var whole *[]byte
	defer func() { putBuf(whole) }()
	zero = true
	for pos := off; pos < end; {
		chunk := s.p.chunkIn(ri, pos/cs)
		c := &chunk
		cEnd := c.rawOff + uint64(c.rawLen)
		hi := min(cEnd, end)
		out := dst[pos-off : hi-off]
		switch {
		case c.codec == codecZero:
			clear(out)
		case pos == c.rawOff && hi == cEnd:
			zero = false
			if err := decodeChunkTo(s.m, s.p, c, out, &scratch); err != nil {
				return false, err
			}
		default:
			// The window cuts the chunk: decode it whole (its checksum
			// covers all of it) and keep the part asked for.
			zero = false
			if whole == nil {
				whole = getBuf(int(cs))
			}
			buf := (*whole)[:c.rawLen]
			if err := decodeChunkTo(s.m, s.p, c, buf, &scratch); err != nil {
				return false, err
			}
			copy(out, buf[pos-c.rawOff:])
		}
		pos = hi
	}
	return zero, nil
}

// BlobWindow is one window of one blob as it is in two snapshots of the
// same memory (a prologue and its epilogue).
type BlobWindow struct {
	Blob int    // index in both snapshots' Blobs
	Off  uint64 // offset of the window in the blob
	Len  int    // its length
	// Pro and Epi are the window's bytes, valid only during the call; both
	// are nil when both sides are zero chunks.
	Pro, Epi []byte
	// ProZero and EpiZero say the window is stored as zero chunks: its
	// bytes are zero and nothing needs to be copied.
	ProZero, EpiZero bool
}

// blobWindowSize is the window WalkBlobPairs decodes at once: large enough
// for full-speed copies, small enough that every core can hold two.
const blobWindowSize = 4 << 20

// WalkBlobPairs decodes every blob of pro and epi window by window, on all
// cores, and calls fn for each window (from several goroutines at once).
// The two snapshots must hold the same blobs in the same order; windows are
// a multiple of DiffGranule and of both chunk sizes. The first error, from
// a chunk or from fn, stops the walk and is returned.
func WalkBlobPairs(pro, epi *SnapshotStream, fn func(BlobWindow) error) error {
	pb, eb := pro.Snapshot.Blobs, epi.Snapshot.Blobs
	if len(pb) != len(eb) {
		return fmt.Errorf("%s holds %d allocations but %s holds %d", pro.Name(), len(pb), epi.Name(), len(eb))
	}
	window := uint64(max(blobWindowSize, pro.ChunkSize(), epi.ChunkSize()))
	type task struct {
		blob int
		off  uint64
		n    int
	}
	var tasks []task
	for i := range pb {
		if pb[i].Addr != eb[i].Addr || pb[i].Size != eb[i].Size {
			return fmt.Errorf("allocation %d: 0x%x (%d bytes) in %s but 0x%x (%d bytes) in %s", i, pb[i].Addr, pb[i].Size, pro.Name(), eb[i].Addr, eb[i].Size, epi.Name())
		}
		for off := uint64(0); off < pb[i].Size; off += window {
			tasks = append(tasks, task{i, off, int(min(window, pb[i].Size-off))})
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(tasks))
	next := make(chan task)
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	fail := func(err error) {
		once.Do(func() {
			firstErr = err
			close(stop)
		})
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proBuf, epiBuf := make([]byte, window), make([]byte, window)
			for t := range next {
				w := BlobWindow{Blob: t.blob, Off: t.off, Len: t.n, ProZero: pro.zeroWindow(t.blob, t.off, t.n), EpiZero: epi.zeroWindow(t.blob, t.off, t.n)}
				var err error
				if w.ProZero && w.EpiZero {
					// Nothing stored on either side: no bytes to fill or
					// compare (a mostly-zero recording of many GiB).
					err = fn(w)
				} else {
					w.Pro, w.Epi = proBuf[:t.n], epiBuf[:t.n]
					err = readPair(pro, epi, &w, fn)
				}
				if err != nil {
					fail(err)
				}
			}
		}()
	}
feed:
	for _, t := range tasks {
		select {
		case next <- t:
		case <-stop:
			break feed
		}
	}
	close(next)
	wg.Wait()
	return firstErr
}

func readPair(pro, epi *SnapshotStream, w *BlobWindow, fn func(BlobWindow) error) error {
	var err error
	if w.ProZero, err = pro.ReadBlob(w.Blob, w.Off, w.Pro); err != nil {
		return err
	}
	if w.EpiZero, err = epi.ReadBlob(w.Blob, w.Off, w.Epi); err != nil {
		return err
	}
	return fn(*w)
}

// zeroWindow reports whether bytes [off, off+n) of blob i are all stored as
// zero chunks, without reading the file.
func (s *SnapshotStream) zeroWindow(i int, off uint64, n int) bool {
	cs := uint64(s.p.cs)
	return !s.p.storedBetween(s.blobRegion[i], off/cs, (off+uint64(n)+cs-1)/cs)
}
