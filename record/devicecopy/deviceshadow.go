package devicecopy

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// ShadowReserve is the device memory a shadow copy always leaves free: the
// larger of 1 GiB and an eighth of the GPU, for the application's own
// allocations outside the recorder's arena (library workspaces).
func ShadowReserve(total uint64) uint64 { return max(1<<30, total/8) }

// Shadow copies the runs, packed, into one new device allocation, on the
// GPU. It refuses when that would leave less than ShadowReserve free.
func (r *Reader) Shadow(runs []fingerprint.Range) (record.Shadow, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var need uint64
	for _, run := range runs {
		need += (run.Len + 255) &^ 255
	}
	free, total, err := cuda.MemGetInfo()
	if err != nil {
		return nil, err
	}
	if reserve := ShadowReserve(total); free < reserve || need > free-reserve {
		return nil, fmt.Errorf("a shadow copy of %d bytes would leave less than %d of the %d bytes free", need, reserve, free)
	}
	if err := ensureStream(&r.stream); err != nil {
		return nil, err
	}
	// cuMemAlloc: 0.4 ms for 4 GiB on an H100, where the stream-ordered
	// pool took 17 ms the first time, with the application waiting. Its
	// cuMemFree waits for the device to be idle (for the launches queued,
	// 128 at most under the throttle), which is why the background writer
	// frees shadows off its own path.
	base, err := cuda.MemAlloc(need)
	if err != nil {
		return nil, err
	}
	sh := &shadow{r: r, addr: base}
	at := base
	for _, run := range runs {
		if err := cuda.MemcpyDtoDAsync(at, run.Addr, run.Len, r.stream); err != nil {
			r.stream.Synchronize()
			sh.release()
			return nil, err
		}
		sh.runs = append(sh.runs, fingerprint.Range{Addr: at, Len: run.Len})
		at += (run.Len + 255) &^ 255
	}
	if err := r.stream.Synchronize(); err != nil {
		sh.release()
		return nil, err
	}
	r.shadowBorn()
	sh.born = true
	// The ring is allocated here, on the recording thread, if it is not
	// yet: allocated by a background goroutine it held up the recording
	// thread's driver calls longer than it takes here. A ring in use (held)
	// exists already.
	if r.stageMu.TryLock() {
		if err := r.ensureSlots(); err != nil {
			record.Trace("runtime", "pinned ring: %v", err)
		}
		r.stageMu.Unlock()
	}
	if r.keepOnDevice || need >= SettleMaxBytes {
		return sh, nil
	}
	var lens []fingerprint.Range
	for _, run := range runs {
		lens = append(lens, fingerprint.Range{Len: run.Len})
	}
	if host, err := newHostShadow(lens); err == nil {
		sh.host, sh.landed = host, make([]bool, len(runs))
		sh.cond = sync.NewCond(&sh.mu)
		r.settleLater(sh)
	} else {
		record.Trace("runtime", "device shadow stays on the device: %v", err)
	}
	return sh, nil
}

// SettleMaxBytes is the largest device shadow that moves into host memory
// in the background; larger ones stay on the device and the writer
// encodes them straight out of the pinned ring. Moving a large one costs a
// copy into fresh host pages on every core beside the writer's encoding
// (on an H100 machine, `tracer`'s 4 GiB were written in 1.0-1.2 s that way
// against 0.85-0.9 s from the ring), and the application runs beside both;
// a small one moves in milliseconds and then leaves the device memory and
// the driver alone while it waits for the writer.
const SettleMaxBytes = 256 << 20

type shadow struct {
	r    *Reader
	addr uint64
	runs []fingerprint.Range

	// The shadow settles into host memory in the background (Reader.settle)
	// when the host can spare it; host is nil otherwise. mu guards the rest,
	// cond signals runs landing and the settle ending.
	host     *hostShadow
	mu       sync.Mutex
	cond     *sync.Cond
	landed   []bool
	settled  bool
	settling error // why the settle stopped part-way
	freed    bool
	born     bool // counted by Reader.shadowBorn
}

// release frees the shadow's device memory, once.
func (s *shadow) release() {
	s.mu.Lock()
	addr := s.addr
	s.addr = 0
	s.mu.Unlock()
	if addr == 0 {
		return
	}
	if s.born {
		s.r.shadowGone()
	}
	cuda.MemFree(addr)
}

// Stage hands the runs over from host memory as they land there, or, when
// the shadow does not settle into host memory, drains the device copy
// through the pinned ring.
func (s *shadow) Stage() (record.Staging, error) {
	if s.host == nil {
		return s.r.Stage(s.runs)
	}
	return &settlingStaging{s: s}, nil
}

func (s *shadow) Free() {
	if s.host != nil {
		s.mu.Lock()
		for !s.settled {
			s.cond.Wait()
		}
		s.freed = true
		s.mu.Unlock()
		s.host.Free()
	}
	s.release()
}

// settlingStaging is the Staging of a shadow settling into host memory.
type settlingStaging struct{ s *shadow }

func (st *settlingStaging) Wait(i int) ([]byte, error) {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.landed) {
		return nil, fmt.Errorf("run %d of %d shadowed", i, len(s.landed))
	}
	for !s.landed[i] && !s.settled {
		s.cond.Wait()
	}
	switch {
	case s.freed:
		return nil, fmt.Errorf("shadow already freed")
	case !s.landed[i]:
		return nil, fmt.Errorf("moving the shadow into host memory: %w", s.settling)
	}
	return s.host.runs[i], nil
}

func (st *settlingStaging) Release(int) {}

// Close waits for the settle to end and reports its copies.
func (st *settlingStaging) Close() record.CopyStats {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.settled {
		s.cond.Wait()
	}
	return s.host.stats
}

// settleLater queues sh to move into host memory. One goroutine settles
// the queued shadows in order, through the ring (once the writer is done
// with a large shadow there), and frees each one's device memory as soon
// as it has landed: from then on the snapshot needs no driver call, which
// would wait while the application's thread is inside a synchronizing
// call, and holds no device memory while it waits for the writer.
func (r *Reader) settleLater(sh *shadow) {
	r.settleMu.Lock()
	defer r.settleMu.Unlock()
	r.settleQueue = append(r.settleQueue, sh)
	if !r.settling {
		r.settling = true
		r.settleWG.Add(1)
		go r.settleQueued()
	}
}

func (r *Reader) settleQueued() {
	defer r.settleWG.Done()
	// The driver's calls bind the application's context to this thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		r.settleMu.Lock()
		if len(r.settleQueue) == 0 {
			r.settling = false
			r.settleMu.Unlock()
			return
		}
		sh := r.settleQueue[0]
		r.settleQueue = r.settleQueue[1:]
		r.settleMu.Unlock()
		r.settle(sh)
	}
}

// settle moves sh's runs into its host mapping and frees its device memory.
func (r *Reader) settle(sh *shadow) {
	landed := func(i int) {
		sh.mu.Lock()
		sh.landed[i] = true
		sh.mu.Unlock()
		sh.cond.Broadcast()
	}
	// Through the ring, after the writer is done with a large shadow there
	// if it is: plain copies through the driver's own staging moved the
	// 41 MiB of `tracer`'s epilogues at 2.8 GB/s beside that drain.
	st, err := r.stage(sh.runs, true)
	if err == nil {
		sh.host.stats, err = moveOut(st, sh.host.runs, landed)
	}
	if err == nil {
		sh.release()
	}
	sh.mu.Lock()
	sh.settled, sh.settling = true, err
	sh.mu.Unlock()
	sh.cond.Broadcast()
	if err != nil {
		record.Trace("runtime", "device shadow not moved into host memory: %v", err)
	}
}
