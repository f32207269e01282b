package devicecopy

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// HostShadowShare is the share of the host memory the process could still
// allocate (db.HostMemoryBudget) that one host shadow may take: the rest
// stays the application's.
const HostShadowShare = 2

// HostShadow copies the runs into one new anonymous mapping of host memory
// at once, through the pinned ring at the bus's speed, the bytes moved on
// into the mapping by as many goroutines as there are cores (the copies
// and the first touch of its pages run in parallel); while the ring drains
// a device shadow, through plain copies instead. The background writer
// then encodes from host memory without calling the driver again, which
// makes it the choice for small snapshots: a device shadow's drain calls
// the driver once or more per 8 MiB from the writer's thread, and such a
// call waits while the application's thread is inside a synchronizing call
// or (unless the shim throttles it) waits inside a launch for room in the
// GPU's queue. It refuses a copy larger than a HostShadowShare-th of what
// the host can spare.
func (r *Reader) HostShadow(runs []fingerprint.Range) (record.Shadow, error) {
	sh, err := newHostShadow(runs)
	if err != nil {
		return nil, err
	}
	if !r.stageMu.TryLock() {
		// The ring is busy: the writer drains a large device shadow out
		// of it, or a small one is moving into host memory. The
		// application must not wait for that: copy through the driver's
		// own staging instead.
		start := time.Now()
		for i, run := range runs {
			if err := cuda.MemcpyDtoH(sh.runs[i], run.Addr); err != nil {
				sh.Free()
				return nil, err
			}
			sh.stats.Bytes += int64(run.Len)
		}
		sh.stats.TransferSeconds = time.Since(start).Seconds()
		return sh, nil
	}
	st, err := r.stageLocked(runs, true)
	if err != nil {
		sh.Free()
		return nil, err
	}
	sh.stats, err = moveOut(st, sh.runs, func(int) {})
	if err != nil {
		sh.Free()
		return nil, err
	}
	return sh, nil
}

// newHostShadow maps host memory for runs, refusing more than a
// HostShadowShare-th of what the host can spare; its pages are touched
// only as the copies land.
func newHostShadow(runs []fingerprint.Range) (*hostShadow, error) {
	var need uint64
	for _, run := range runs {
		need += run.Len
	}
	if need == 0 {
		return nil, fmt.Errorf("a host shadow of nothing")
	}
	if budget := db.HostMemoryBudget() / HostShadowShare; need > budget {
		return nil, fmt.Errorf("a host shadow of %d bytes exceeds the %d the host can spare", need, budget)
	}
	mem, err := syscall.Mmap(-1, 0, int(need), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("a host shadow of %d bytes: %w", need, err)
	}
	// Huge pages: 512 times fewer faults on first touch (a hint; may be off).
	_ = syscall.Madvise(mem, syscall.MADV_HUGEPAGE)
	sh := &hostShadow{mem: mem}
	at := uint64(0)
	for _, run := range runs {
		sh.runs = append(sh.runs, mem[at:at+run.Len:at+run.Len])
		at += run.Len
	}
	return sh, nil
}

// moveOut moves every run of st into dst (one slice per run) and closes
// st. Each staged run is moved on in pieces of hostShadowPiece bytes, so
// every core copies (and takes first-touch page faults) even while only a
// few runs are staged; a run's slot goes back with its last piece, and
// landed(i) is called once run i is all in dst (from any goroutine).
func moveOut(st *staging, dst [][]byte, landed func(i int)) (record.CopyStats, error) {
	type piece struct {
		run      int
		dst, src []byte
		left     *atomic.Int32
	}
	pieces := make(chan piece, 4*runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range pieces {
				copy(p.dst, p.src)
				if p.left.Add(-1) == 0 {
					st.Release(p.run)
					landed(p.run)
				}
			}
		}()
	}
	var waitErr error
	for i := range dst {
		data, err := st.Wait(i)
		if err != nil {
			waitErr = err
			break
		}
		n := (len(data) + hostShadowPiece - 1) / hostShadowPiece
		if n == 0 {
			st.Release(i)
			landed(i)
			continue
		}
		left := new(atomic.Int32)
		left.Store(int32(n))
		for k := 0; k < n; k++ {
			lo, hi := k*hostShadowPiece, min(len(data), (k+1)*hostShadowPiece)
			pieces <- piece{run: i, dst: dst[i][lo:hi], src: data[lo:hi], left: left}
		}
	}
	close(pieces)
	wg.Wait()
	return st.Close(), waitErr
}

// hostShadowPiece is the unit one goroutine moves from a staging slot
// into a host shadow.
const hostShadowPiece = 1 << 20

// hostShadow is a HostShadow: the runs' bytes in one mapping.
type hostShadow struct {
	mem   []byte
	runs  [][]byte
	stats record.CopyStats
}

func (s *hostShadow) Stage() (record.Staging, error) {
	if s.mem == nil {
		return nil, fmt.Errorf("host shadow already freed")
	}
	return record.HeldStaging(s.runs, s.stats), nil
}

func (s *hostShadow) Free() {
	if s.mem != nil {
		_ = syscall.Munmap(s.mem)
		s.mem, s.runs = nil, nil
	}
}
