package record

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// DeviceReader is a Process that reads device memory the fast way: chunk
// fingerprints computed on the GPU, copies through pinned staging buffers
// that overlap the encoding and writing of earlier chunks, and device-side
// shadow copies that let a snapshot be written while the application goes
// on. With it a snapshot copies only the chunks that are neither zero nor
// already in the database (a chunk of an earlier snapshot with the same
// fingerprint); after the launch that leaves only the chunks the kernel
// changed. cmd/mneme-rt implements it (record/devicecopy); without it every
// allocation is copied whole.
type DeviceReader interface {
	// Fingerprints hashes each range on the GPU (package fingerprint).
	Fingerprints(rs []fingerprint.Range) ([]fingerprint.Sum, error)
	// Stage starts copying the runs to the host, in order.
	Stage(runs []fingerprint.Range) (Staging, error)
	// HostShadow copies the runs into host memory of its own at once, at
	// the bus's speed while the application waits, so they can be encoded
	// and written later without touching the GPU again; an error (no host
	// memory to spare) makes the caller try Shadow, or copy from the live
	// memory at once.
	HostShadow(runs []fingerprint.Range) (Shadow, error)
	// Shadow copies the runs into device memory of its own (milliseconds
	// for gigabytes), so they can be drained to the host later, beside the
	// application; an error (no memory to spare) makes the caller try
	// HostShadow, or copy from the live memory at once.
	Shadow(runs []fingerprint.Range) (Shadow, error)
}

// FingerprintPreparer is a DeviceReader that can get its fingerprint kernel
// ready ahead of the first snapshot, in the background.
type FingerprintPreparer interface {
	PrepareFingerprints()
}

// Staging is a copy of device runs in progress.
type Staging interface {
	// Wait returns run i's bytes once they have arrived. Runs are waited
	// for in order; the bytes stay valid until Release(i).
	Wait(i int) ([]byte, error)
	// Release gives run i's buffer back; any goroutine may call it.
	Release(i int)
	// Close waits for the copies in flight and reports them.
	Close() CopyStats
}

// Shadow is a copy of runs made by DeviceReader.HostShadow or Shadow.
type Shadow interface {
	// Stage hands the copied runs' bytes over as DeviceReader.Stage does
	// those of live memory. The Staging's CopyStats count the copies from
	// the device, whenever they were made.
	Stage() (Staging, error)
	// Free releases the copy's memory.
	Free()
}

// HeldStaging is the Staging of runs already in host memory (a host
// shadow's): Wait returns them at once, Release keeps them (the shadow
// frees them all), Close reports stats, the copies that brought them.
func HeldStaging(runs [][]byte, stats CopyStats) Staging {
	return &heldStaging{runs: runs, stats: stats}
}

type heldStaging struct {
	runs  [][]byte
	stats CopyStats
}

func (h *heldStaging) Wait(i int) ([]byte, error) {
	if i < 0 || i >= len(h.runs) {
		return nil, fmt.Errorf("run %d of %d held", i, len(h.runs))
	}
	return h.runs[i], nil
}
func (h *heldStaging) Release(int)      {}
func (h *heldStaging) Close() CopyStats { return h.stats }

// CopyStats reports the device-to-host copies of one snapshot.
type CopyStats struct {
	Bytes int64
	// TransferSeconds is the GPU's time on the transfers themselves (from
	// events around each), the figure to compare with the bus's bandwidth.
	TransferSeconds float64
}

// stagedRunChunks is how many consecutive chunks one staged copy moves:
// large enough that a copy's fixed cost is small next to its transfer.
const stagedRunChunks = 8

// StagedRunBytes is the largest run a DeviceReader is asked to stage.
const StagedRunBytes = stagedRunChunks * db.DefaultChunkSize

// chunkPlanKind says how one chunk of a staged snapshot is written.
type chunkPlanKind byte

const (
	chunkCopy chunkPlanKind = iota
	chunkZero
	chunkRef
)

// blobPlan is the plan for one blob of a staged snapshot.
type blobPlan struct {
	addr, size uint64
	kinds      []chunkPlanKind
	refs       []db.ChunkRef // for chunkRef
	run        []int         // for chunkCopy: index of its run
	runOff     []uint64      // for chunkCopy: offset in its run
}

// snapshotPlan is a snapshot decided from fingerprints: globals and
// arguments copied, each blob chunk zero, referenced or to copy, and the
// runs of consecutive chunks to copy.
type snapshotPlan struct {
	name   string // file name in the database
	skel   *db.Snapshot
	blobs  []blobPlan
	runs   []fingerprint.Range // device sources of the chunks to copy
	runLen []int32             // chunks per run
	refs   map[string]bool     // files the references point into
	added  []fingerprint.Sum   // chunks this file adds to the content store
	raw    uint64
}

// planSnapshot fingerprints the live allocations and plans the snapshot of
// launch l to file name. The chunks it will store enter r.chunks at once,
// so that snapshots planned before this one is written can reference them;
// r.chunks.forget takes them back if the file is never written.
func (r *Recorder) planSnapshot(dr DeviceReader, l *Launch, name string) (*snapshotPlan, error) {
	cs := uint64(db.DefaultChunkSize)
	p := &snapshotPlan{name: name, skel: &db.Snapshot{Args: l.Args}, refs: map[string]bool{}}
	if err := r.copyGlobals(p.skel, l); err != nil {
		return nil, err
	}
	var ranges []fingerprint.Range
	var globalSizes, blobSizes []uint64
	for _, g := range p.skel.Globals {
		globalSizes = append(globalSizes, g.Size)
	}
	for _, b := range r.live() {
		p.blobs = append(p.blobs, blobPlan{addr: b.Addr, size: b.Size})
		blobSizes = append(blobSizes, b.Size)
		for off := uint64(0); off < b.Size; off += cs {
			ranges = append(ranges, fingerprint.Range{Addr: b.Addr + off, Len: min(cs, b.Size-off)})
		}
	}
	var sums []fingerprint.Sum
	if len(ranges) > 0 {
		fstart := time.Now()
		var err error
		if sums, err = dr.Fingerprints(ranges); err != nil {
			return nil, fmt.Errorf("fingerprints: %w", err)
		}
		if len(sums) != len(ranges) {
			return nil, fmt.Errorf("fingerprints: %d for %d chunks", len(sums), len(ranges))
		}
		r.status.FingerprintSeconds += time.Since(fstart).Seconds()
		Trace("runtime", "%s: %d chunks fingerprinted in %.4f s", name, len(ranges), time.Since(fstart).Seconds())
	}
	// From here on the plan's chunks enter the content store: the name is
	// taken for good.
	r.chunks.plan(name)
	k := 0
	for bi := range p.blobs {
		b := &p.blobs[bi]
		n := int((b.size + cs - 1) / cs)
		b.kinds, b.refs, b.run, b.runOff = make([]chunkPlanKind, n), make([]db.ChunkRef, n), make([]int, n), make([]uint64, n)
		for i := 0; i < n; i++ {
			sum := sums[k]
			k++
			switch ref, known := r.chunks.lookup(sum); {
			case sum.Zero:
				b.kinds[i] = chunkZero
				r.status.ChunksZero++
			case known:
				b.kinds[i], b.refs[i] = chunkRef, ref
				p.refs[ref.File] = true
				r.status.ChunksReferenced++
			default:
				b.kinds[i] = chunkCopy
				r.status.ChunksCopied++
				r.chunks.add(sum, db.ChunkRef{File: name, Chunk: db.ChunkIndex(globalSizes, blobSizes, bi, i, int(cs))})
				p.added = append(p.added, sum)
				addr, size := b.addr+uint64(i)*cs, min(cs, b.size-uint64(i)*cs)
				last := len(p.runs) - 1
				if i > 0 && b.kinds[i-1] == chunkCopy && p.runLen[last] < stagedRunChunks {
					b.runOff[i] = p.runs[last].Len
					p.runs[last].Len += size
					p.runLen[last]++
				} else {
					p.runs = append(p.runs, fingerprint.Range{Addr: addr, Len: size})
					p.runLen = append(p.runLen, 1)
				}
				b.run[i] = len(p.runs) - 1
			}
		}
	}
	p.raw = p.skel.RawSize()
	for _, b := range p.blobs {
		p.raw += b.size
	}
	return p, nil
}

// writePlan writes a planned snapshot to dir, its runs' bytes coming from
// stage (copies from the live device memory, or from a shadow copy), which
// is called only when the plan copies anything. It touches no recorder
// state, so the background writer can run it.
func writePlan(stage func() (Staging, error), dir string, p *snapshotPlan, opts db.SnapshotOptions) (int64, CopyStats, error) {
	cs := uint64(db.DefaultChunkSize)
	var staging Staging
	if len(p.runs) > 0 {
		var err error
		if staging, err = stage(); err != nil {
			return 0, CopyStats{}, fmt.Errorf("staging copies: %w", err)
		}
	}
	pending := make([]atomic.Int32, len(p.runs))
	for i, n := range p.runLen {
		pending[i].Store(n)
	}
	runData := make([][]byte, len(p.runs))
	s := *p.skel
	s.Blobs = nil
	for bi := range p.blobs {
		b := &p.blobs[bi]
		s.Blobs = append(s.Blobs, db.Blob{Addr: b.addr, Size: b.size, Chunks: func(i int) (db.SourceChunk, error) {
			switch b.kinds[i] {
			case chunkZero:
				return db.SourceChunk{Zero: true}, nil
			case chunkRef:
				ref := b.refs[i]
				return db.SourceChunk{Ref: &ref}, nil
			}
			ri := b.run[i]
			if b.runOff[i] == 0 {
				data, err := staging.Wait(ri)
				if err != nil {
					return db.SourceChunk{}, err
				}
				runData[ri] = data
			}
			data := runData[ri][b.runOff[i] : b.runOff[i]+min(cs, b.size-uint64(i)*cs)]
			return db.SourceChunk{Data: data, Done: func() {
				if pending[ri].Add(-1) == 0 {
					staging.Release(ri)
				}
			}}, nil
		}})
	}
	n, err := db.WriteSnapshot(filepath.Join(dir, p.name), &s, opts)
	var st CopyStats
	if staging != nil {
		st = staging.Close()
	}
	return n, st, err
}

// copyGlobals copies the kernel module's device globals (small, copied
// whole) and lists its __managed__ ones. r.mu is held.
func (r *Recorder) copyGlobals(s *db.Snapshot, l *Launch) error {
	globals, err := r.proc.Globals(l.Kernel.Module)
	if err != nil {
		return fmt.Errorf("device globals: %w", err)
	}
	for _, g := range globals {
		if g.Managed {
			// Not in device memory a replay restores (the shim warned):
			// listed, so that replay refuses the kernels that read it.
			if r.managed.AddVariable(g.Name, g.Size, g.Addr) {
				r.managedDirty = true
			}
			continue
		}
		data := make([]byte, g.Size) // kept until the snapshot is written, maybe later
		if err := r.proc.CopyToHost(data, g.Addr); err != nil {
			return fmt.Errorf("copy global %s (%d bytes): %w", g.Name, g.Size, err)
		}
		s.Globals = append(s.Globals, db.Global{Name: g.Name, Addr: g.Addr, Size: g.Size, Data: data})
	}
	return nil
}
