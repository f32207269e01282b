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
// fingerprints computed on the GPU, and copies through pinned staging
// buffers that overlap the encoding and writing of earlier chunks. With it a
// snapshot copies only the chunks that are neither zero nor already stored
// in the database (an earlier snapshot's chunk with the same fingerprint);
// after the launch that includes every chunk the kernel left unchanged.
// cmd/mneme-rt implements it (record/devicecopy); without it every
// allocation is copied whole.
type DeviceReader interface {
	// Fingerprints hashes each range on the GPU (package fingerprint).
	Fingerprints(rs []fingerprint.Range) ([]fingerprint.Sum, error)
	// Stage starts copying the runs to the host, in order.
	Stage(runs []fingerprint.Range) (Staging, error)
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

// stagedBlob is the plan for one blob of a staged snapshot.
type stagedBlob struct {
	kinds []chunkPlanKind
	sums  []fingerprint.Sum
	refs  []db.ChunkRef // for chunkRef
	run   []int         // for chunkCopy: index of its run
	first []bool        // for chunkCopy: the first chunk of its run
}

// stagedSnapshot writes the snapshot of one launch to the database file name
// from fingerprints and staged copies: zero chunks and chunks the database
// already holds are not copied; the rest streams through pinned buffers.
// The file is complete (renamed into place) when it returns; its new chunks
// then become references for later snapshots.
func (r *Recorder) stagedSnapshot(dr DeviceReader, l *Launch, set int, name string) (int64, uint64, error) {
	cs := uint64(db.DefaultChunkSize)
	s := &db.Snapshot{Args: l.Args}
	if err := r.copyGlobals(s, l, set); err != nil {
		return 0, 0, err
	}
	var live []liveBlock
	if r.arena != nil {
		for _, b := range r.arena.Live() {
			live = append(live, liveBlock{addr: b.Addr, size: b.Size})
		}
	}
	start := time.Now()
	var ranges []fingerprint.Range
	for _, b := range live {
		for off := uint64(0); off < b.size; off += cs {
			ranges = append(ranges, fingerprint.Range{Addr: b.addr + off, Len: min(cs, b.size-off)})
		}
	}
	var sums []fingerprint.Sum
	if len(ranges) > 0 {
		var err error
		if sums, err = dr.Fingerprints(ranges); err != nil {
			return 0, 0, fmt.Errorf("fingerprints: %w", err)
		}
		if len(sums) != len(ranges) {
			return 0, 0, fmt.Errorf("fingerprints: %d for %d chunks", len(sums), len(ranges))
		}
	}
	r.status.FingerprintSeconds += time.Since(start).Seconds()

	// Plan every chunk, and the runs of consecutive chunks to copy.
	plans := make([]stagedBlob, len(live))
	var runs []fingerprint.Range
	var runLen []int32 // chunks per run, for releasing
	k := 0
	for bi, b := range live {
		n := int((b.size + cs - 1) / cs)
		p := stagedBlob{kinds: make([]chunkPlanKind, n), sums: sums[k : k+n], refs: make([]db.ChunkRef, n), run: make([]int, n), first: make([]bool, n)}
		k += n
		for i := 0; i < n; i++ {
			sum := p.sums[i]
			switch ref, ok := r.chunks[sum]; {
			case sum.Zero:
				p.kinds[i] = chunkZero
				r.status.ChunksZero++
			case ok:
				p.kinds[i], p.refs[i] = chunkRef, ref
				r.status.ChunksReferenced++
			default:
				p.kinds[i] = chunkCopy
				r.status.ChunksCopied++
				addr, size := b.addr+uint64(i)*cs, min(cs, b.size-uint64(i)*cs)
				last := len(runs) - 1
				if i > 0 && p.kinds[i-1] == chunkCopy && runLen[last] < stagedRunChunks {
					runs[last].Len += size
					runLen[last]++
				} else {
					runs = append(runs, fingerprint.Range{Addr: addr, Len: size})
					runLen = append(runLen, 1)
					p.first[i] = true
				}
				p.run[i] = len(runs) - 1
			}
		}
		plans[bi] = p
	}

	var staging Staging
	if len(runs) > 0 {
		var err error
		if staging, err = dr.Stage(runs); err != nil {
			return 0, 0, fmt.Errorf("staging copies: %w", err)
		}
	}
	pending := make([]atomic.Int32, len(runs))
	for i, n := range runLen {
		pending[i].Store(n)
	}
	runData := make([][]byte, len(runs))
	for bi, b := range live {
		p := &plans[bi]
		s.Blobs = append(s.Blobs, db.Blob{Addr: b.addr, Size: b.size, Chunks: func(i int) (db.SourceChunk, error) {
			switch p.kinds[i] {
			case chunkZero:
				return db.SourceChunk{Zero: true}, nil
			case chunkRef:
				ref := p.refs[i]
				return db.SourceChunk{Ref: &ref}, nil
			}
			ri := p.run[i]
			if p.first[i] {
				data, err := staging.Wait(ri)
				if err != nil {
					return db.SourceChunk{}, err
				}
				runData[ri] = data
			}
			// Offset of chunk i in its run: the run starts at a chunk whose
			// first[] is set, at or before i.
			j := i
			for !p.first[j] {
				j--
			}
			off := uint64(i-j) * cs
			data := runData[ri][off : off+min(cs, b.size-uint64(i)*cs)]
			return db.SourceChunk{Data: data, Done: func() {
				if pending[ri].Add(-1) == 0 {
					staging.Release(ri)
				}
			}}, nil
		}})
	}

	newChunks := map[fingerprint.Sum]db.ChunkRef{}
	opts := r.snapshotOptions(s)
	opts.Stored = func(blob, chunk int, ref db.ChunkRef) {
		ref.File = name
		newChunks[plans[blob].sums[chunk]] = ref
	}
	wstart := time.Now()
	n, err := db.WriteSnapshot(filepath.Join(r.cfg.DB, name), s, opts)
	if staging != nil {
		st := staging.Close()
		r.status.CopiedBytes += st.Bytes
		r.status.CopyTransferSeconds += st.TransferSeconds
	}
	r.status.CopySeconds += time.Since(wstart).Seconds() // copies overlap the writing: one figure for both
	if err != nil {
		return 0, 0, err
	}
	// Only a file that exists under its name may be referenced.
	for sum, ref := range newChunks {
		r.chunks[sum] = ref
	}
	return n, s.RawSize(), nil
}

type liveBlock struct{ addr, size uint64 }

// copyGlobals copies the kernel module's device globals (small, copied whole).
func (r *Recorder) copyGlobals(s *db.Snapshot, l *Launch, set int) error {
	globals, err := r.proc.Globals(l.Kernel.Module)
	if err != nil {
		return fmt.Errorf("device globals: %w", err)
	}
	for _, g := range globals {
		if g.Managed {
			continue // not in device memory we can restore; the shim warned
		}
		data := r.buffer(set, len(s.Blobs)+len(s.Globals), g.Size)
		if err := r.proc.CopyToHost(data, g.Addr); err != nil {
			return fmt.Errorf("copy global %s (%d bytes): %w", g.Name, g.Size, err)
		}
		s.Globals = append(s.Globals, db.Global{Name: g.Name, Addr: g.Addr, Size: g.Size, Data: data})
	}
	return nil
}
