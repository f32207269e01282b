package devicecopy

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// copyStreamCount is how many streams the staged copies alternate over.
const copyStreamCount = 2

func (r *Reader) copyStreamPtrs() []*cuda.Stream {
	out := make([]*cuda.Stream, copyStreamCount)
	for i := range out {
		out[i] = &r.copyStreams[i]
	}
	return out
}

func ensureStream(s *cuda.Stream) error {
	if *s != 0 {
		return nil
	}
	n, err := cuda.NewStreamNonBlocking()
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// ensureSlots allocates the pinned ring on first use: one mapping in huge
// pages, touched on every core and then page-locked in place (the driver
// serves no other thread while it locks memory, and locking pages that
// exist is quick), or, where that fails, slot by slot with cuMemAllocHost.
func (r *Reader) ensureSlots() error {
	if len(r.slots) >= r.nSlots {
		return nil
	}
	start := time.Now()
	defer func() {
		record.Trace("runtime", "pinned ring: %d slots of %d bytes in %.4f s", len(r.slots), r.slotBytes, time.Since(start).Seconds())
	}()
	var bufs [][]byte
	if len(r.slots) == 0 {
		bufs = r.lockedRing()
	}
	for len(r.slots) < r.nSlots {
		s := &slot{}
		if len(bufs) > 0 {
			s.buf, bufs = bufs[0], bufs[1:]
		} else {
			own, err := cuda.MemAllocHost(r.slotBytes)
			if err != nil {
				if len(r.slots) >= 2 {
					return nil // fewer slots copy less far ahead, still correctly
				}
				return err
			}
			s.own, s.buf = own, own.Bytes()
		}
		var err error
		if s.start, err = cuda.NewEvent(); err == nil {
			s.end, err = cuda.NewEvent()
		}
		if err != nil {
			if s.own != nil {
				s.own.Free()
			}
			return err
		}
		r.slots = append(r.slots, s)
	}
	return nil
}

// lockedRing maps, touches and page-locks the whole ring at once; nil
// when it cannot (the slots are then allocated one by one).
func (r *Reader) lockedRing() [][]byte {
	n := r.nSlots * r.slotBytes
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	_ = syscall.Madvise(mem, syscall.MADV_HUGEPAGE)
	var wg sync.WaitGroup
	const piece = 2 << 20
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := w * piece; off < n; off += workers * piece {
				clear(mem[off:min(n, off+piece)])
			}
		}()
	}
	wg.Wait()
	lock, err := cuda.HostRegister(mem)
	if err != nil {
		record.Trace("runtime", "pinned ring: %v", err)
		_ = syscall.Munmap(mem)
		return nil
	}
	r.ringMem, r.ringLock = mem, lock
	bufs := make([][]byte, r.nSlots)
	for i := range bufs {
		bufs[i] = mem[i*r.slotBytes : (i+1)*r.slotBytes : (i+1)*r.slotBytes]
	}
	return bufs
}

// Stage starts copying runs (each at most the slot size) into the pinned
// ring, as many at once as there are slots.
func (r *Reader) Stage(runs []fingerprint.Range) (record.Staging, error) {
	s, err := r.stage(runs, false)
	if err != nil {
		return nil, err // not a nil *staging inside the interface
	}
	return s, nil
}

// stage is Stage; with blocking, a run waited for while every slot is held
// waits for a slot to come back (other goroutines release them) instead of
// being copied on the spare, synchronous path.
func (r *Reader) stage(runs []fingerprint.Range, blocking bool) (*staging, error) {
	r.stageMu.Lock()
	return r.stageLocked(runs, blocking)
}

// stageLocked is stage with r.stageMu already held; it is released on
// error, else by the staging's Close.
func (r *Reader) stageLocked(runs []fingerprint.Range, blocking bool) (*staging, error) {
	for i, run := range runs {
		if run.Len > uint64(r.slotBytes) {
			r.stageMu.Unlock()
			return nil, fmt.Errorf("run %d of %d bytes exceeds the %d-byte staging buffers", i, run.Len, r.slotBytes)
		}
	}
	for _, cs := range r.copyStreamPtrs() {
		if err := ensureStream(cs); err != nil {
			r.stageMu.Unlock()
			return nil, err
		}
	}
	if err := r.ensureSlots(); err != nil {
		r.stageMu.Unlock()
		return nil, err
	}
	if r.ref == nil {
		ev, err := cuda.NewEvent()
		if err != nil {
			r.stageMu.Unlock()
			return nil, err
		}
		r.ref = ev
	}
	if err := r.ref.Record(r.copyStreams[0]); err != nil {
		r.stageMu.Unlock()
		return nil, err
	}
	s := &staging{r: r, runs: runs, slotOf: make([]int, len(runs)), offOf: make([]int, len(runs)), held: make([]int, len(r.slots)), blocking: blocking}
	s.freed = sync.NewCond(&s.mu)
	for i := range s.slotOf {
		s.slotOf[i] = -1
	}
	for i := range r.slots {
		s.free = append(s.free, i)
	}
	if err := s.issue(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// staging is one snapshot's copies. Wait and Close run on the recording
// goroutine; Release may come from any.
type staging struct {
	r      *Reader
	runs   []fingerprint.Range
	slotOf []int // run -> slot while issued and not released; -1 otherwise, spareRun when copied to spare
	offOf  []int // run -> where its bytes start in its slot
	issued int
	waited int
	stats  record.CopyStats
	// busy are the transfers' intervals on the GPU, from the reader's
	// reference event: their union is the time the bus was in use, however
	// the copies overlapped on the streams.
	busy [][2]float64

	mu       sync.Mutex
	free     []int
	held     []int // slot -> its runs not yet released
	blocking bool
	freed    *sync.Cond // signalled by Release, for blocking stagings
}

// spareRun marks a run copied into the spare buffer instead of a slot.
const spareRun = -2

// issue starts the next runs' copies into the free slots. Consecutive runs
// share a slot while they fit: a snapshot whose changed chunks are
// scattered between chunks already stored has runs of a chunk or two, and
// one run to a slot would leave the writer's window of chunks wider than
// the ring, every further run copied on the slow spare path.
func (s *staging) issue() error {
	for s.issued < len(s.runs) {
		s.mu.Lock()
		if len(s.free) == 0 {
			s.mu.Unlock()
			return nil
		}
		k := s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		s.mu.Unlock()
		sl := s.r.slots[k]
		st := s.r.copyStreams[k%copyStreamCount]
		if err := sl.start.Record(st); err != nil {
			return err
		}
		packed := 0
		for off := 0; s.issued < len(s.runs); packed++ {
			run := s.runs[s.issued]
			if packed > 0 && off+int(run.Len) > len(sl.buf) {
				break
			}
			if err := cuda.MemcpyDtoHAsync(sl.buf[off:off+int(run.Len)], run.Addr, st); err != nil {
				return err
			}
			s.slotOf[s.issued], s.offOf[s.issued] = k, off
			s.issued++
			off = (off + int(run.Len) + slotAlign - 1) &^ (slotAlign - 1)
		}
		s.mu.Lock()
		s.held[k] = packed
		s.mu.Unlock()
		if err := sl.end.Record(st); err != nil {
			return err
		}
	}
	return nil
}

// slotAlign aligns the runs packed into a slot, for full-speed copies.
const slotAlign = 4096

func (s *staging) Wait(i int) ([]byte, error) {
	if i != s.waited {
		return nil, fmt.Errorf("staged run %d waited for before run %d", i, s.waited)
	}
	s.waited++
	if err := s.issue(); err != nil {
		return nil, err
	}
	for s.blocking && s.issued <= i {
		s.mu.Lock()
		for len(s.free) == 0 {
			s.freed.Wait()
		}
		s.mu.Unlock()
		if err := s.issue(); err != nil {
			return nil, err
		}
	}
	run := s.runs[i]
	k := s.slotOf[i]
	if k < 0 {
		// No slot came free: the writer holds them all. Copy this run
		// through the driver's staging rather than wait for a release
		// that only this goroutine could make. It goes on a copy stream
		// of ours: a synchronous copy would take the legacy default
		// stream and wait for every kernel the application has queued.
		// Into pageable memory the call returns once the copy is done,
		// so buf is not written after it returns.
		buf := make([]byte, run.Len)
		s.issued = i + 1
		s.slotOf[i] = spareRun
		start := time.Now()
		st := s.r.copyStreams[0]
		if err := cuda.MemcpyDtoHAsync(buf, run.Addr, st); err != nil {
			return nil, err
		}
		if err := st.Synchronize(); err != nil {
			return nil, err
		}
		s.stats.Bytes += int64(run.Len)
		s.stats.TransferSeconds += time.Since(start).Seconds()
		return buf, nil
	}
	sl, off := s.r.slots[k], s.offOf[i]
	if err := sl.end.Synchronize(); err != nil {
		return nil, err
	}
	if off == 0 { // the slot's first run: its copies' interval, once
		a, err1 := cuda.Elapsed(s.r.ref, sl.start)
		b, err2 := cuda.Elapsed(s.r.ref, sl.end)
		if err1 == nil && err2 == nil {
			s.busy = append(s.busy, [2]float64{a.Seconds(), b.Seconds()})
		}
	}
	s.stats.Bytes += int64(run.Len)
	return sl.buf[off : off+int(run.Len) : off+int(run.Len)], nil
}

func (s *staging) Release(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.slotOf) || s.slotOf[i] < 0 {
		if i >= 0 && i < len(s.slotOf) {
			s.slotOf[i] = -1 // a spare run: nothing to give back
		}
		return
	}
	k := s.slotOf[i]
	s.slotOf[i] = -1
	if s.held[k]--; s.held[k] == 0 {
		s.free = append(s.free, k)
		s.freed.Signal()
	}
}

// Close waits for copies still in flight (a snapshot that failed half way)
// so no slot is reused under a running transfer, and gives the reader back.
func (s *staging) Close() record.CopyStats {
	if s.issued > s.waited {
		for _, st := range s.r.copyStreams {
			st.Synchronize()
		}
	}
	s.r.stageMu.Unlock()
	s.stats.TransferSeconds += unionSeconds(s.busy)
	return s.stats
}

// unionSeconds is the length of the union of intervals.
func unionSeconds(iv [][2]float64) float64 {
	sort.Slice(iv, func(i, j int) bool { return iv[i][0] < iv[j][0] })
	var total, start, end float64
	for i, v := range iv {
		switch {
		case i == 0:
			start, end = v[0], v[1]
		case v[0] > end:
			total += end - start
			start, end = v[0], v[1]
		case v[1] > end:
			end = v[1]
		}
	}
	if len(iv) > 0 {
		total += end - start
	}
	return total
}
