// Package devicecopy reads device memory for the recorder the fast way
// (record.DeviceReader over the CUDA driver): chunk fingerprints computed by
// the fingerprint kernel on the GPU, host- and device-side shadow copies of
// what a snapshot stores (so it can be written while the application goes
// on),
// and device-to-host copies through a ring of pinned staging buffers,
// issued ahead on their own stream so the bus stays busy while earlier
// chunks are encoded and written. Both streams are non-blocking: the
// background copies neither wait for the application's kernels nor make
// them wait.
//
// It is plain Go over package cuda; cmd/mneme-rt creates one per recording
// in the application's context.
package devicecopy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// Reader implements record.DeviceReader in the current CUDA context.
type Reader struct {
	slotBytes int
	nSlots    int

	// mu guards the fingerprints and the shadow copies, made on stream by
	// the recording thread.
	mu sync.Mutex
	// kernelMu guards loading the fingerprint kernel, which Prepare may
	// have started in the background; closed says Close unloaded it.
	kernelMu sync.Mutex
	fn       *cuda.Function
	mod      *cuda.Module
	// kernelFrom names the image the kernel was loaded from: fatbin or PTX.
	kernelFrom string
	closed     bool
	stream     cuda.Stream
	desc       deviceBuffer
	lastDesc   []byte // what desc holds, nil when unknown
	sums       deviceBuffer
	sumsHost   *cuda.HostBuffer // page-locked: the sums come back with the kernel, one wait for both

	// stageMu is held by one staging from Stage to Close; the drain runs
	// on copyStreams (slot k on stream k mod copyStreamCount: more than
	// one copy engine keeps the bus busy beside an application's
	// bandwidth-bound kernels), possibly on the background writer's thread.
	stageMu     sync.Mutex
	copyStreams [copyStreamCount]cuda.Stream
	ref         *cuda.Event // recorded as each staging starts
	slots       []*slot
	ringMem     []byte           // the slots' mapping (lockedRing), or nil
	ringLock    *cuda.HostBuffer // its page lock

	keepOnDevice bool // device shadows never move into host memory

	// settleMu guards the device shadows queued to move into host memory
	// (settleLater); settleWG counts the goroutine moving them.
	settleMu    sync.Mutex
	settleQueue []*shadow
	settling    bool
	settleWG    sync.WaitGroup

	// throttleMu guards the launch throttle, on while device shadows live.
	throttleMu     sync.Mutex
	throttle       Throttle
	throttleEvents []*cuda.Event
	liveShadows    int
}

// Throttle is the application's launch throttle (cmd/mneme-rt's, over the
// shim's struct mneme_launch_throttle): while it is on, the application's
// threads keep at most every * len(events) launches queued on the GPU.
// A device shadow is drained from the background writer's thread, and an
// application whose GPU queue is full waits inside the driver's launch,
// where it makes every driver call of another thread wait for a kernel to
// finish; throttled, it waits on an event instead, and the drain runs at
// the bus's speed (cmd/mneme-rt/shim/bench/drain_contention.cu measures
// both).
type Throttle interface {
	// On bounds the application's queued launches with these marker events.
	On(events []*cuda.Event, every int) error
	// Off lifts the bound; when it returns no application thread uses the
	// events any more.
	Off()
}

// ThrottleEvents and ThrottleEvery shape the throttle: at most 128
// launches queued. An H100 queues about 1000 before a launch waits; at 128
// to 900 queued a drain beside a launching thread ran at full speed and the
// application's kernels ran back to back (drain_contention.cu). The fewer
// queued, the shorter the application's synchronizing calls (a
// cudaMemcpy waits for the queue to empty), during which the drain's
// driver calls wait too.
const (
	ThrottleEvents = 32
	ThrottleEvery  = 4
)

// KeepOnDevice keeps device shadows in device memory until they are
// written, drained through the pinned ring as the writer encodes (for
// recordings told to leave host memory alone: MNEME_SHADOW=device).
func (r *Reader) KeepOnDevice(keep bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keepOnDevice = keep
}

// SetThrottle gives the reader the application's launch throttle, turned
// on while device shadows exist.
func (r *Reader) SetThrottle(t Throttle) {
	r.throttleMu.Lock()
	defer r.throttleMu.Unlock()
	r.throttle = t
}

// shadowBorn turns the throttle on with the first live device shadow.
// Without it the drain still works, only slower.
func (r *Reader) shadowBorn() {
	r.throttleMu.Lock()
	defer r.throttleMu.Unlock()
	r.liveShadows++
	if r.liveShadows > 1 || r.throttle == nil {
		return
	}
	for len(r.throttleEvents) < ThrottleEvents {
		ev, err := cuda.NewMarkerEvent()
		if err != nil {
			record.Trace("runtime", "launch throttle: %v", err)
			return
		}
		r.throttleEvents = append(r.throttleEvents, ev)
	}
	if err := r.throttle.On(r.throttleEvents, ThrottleEvery); err != nil {
		record.Trace("runtime", "launch throttle: %v", err)
	}
}

// shadowGone turns the throttle off with the last live device shadow.
func (r *Reader) shadowGone() {
	r.throttleMu.Lock()
	defer r.throttleMu.Unlock()
	r.liveShadows--
	if r.liveShadows == 0 && r.throttle != nil {
		r.throttle.Off()
	}
}

type deviceBuffer struct {
	addr uint64
	size int
}

func (b *deviceBuffer) ensure(n int) error {
	if b.size >= n {
		return nil
	}
	if b.addr != 0 {
		cuda.MemFree(b.addr)
		b.addr, b.size = 0, 0
	}
	addr, err := cuda.MemAlloc(uint64(n))
	if err != nil {
		return err
	}
	b.addr, b.size = addr, n
	return nil
}

type slot struct {
	buf        []byte           // page-locked: in the ring's mapping, or own
	own        *cuda.HostBuffer // the slot's own allocation, nil in the mapping
	start, end *cuda.Event
}

// New prepares a reader whose staged copies move runs of at most slotBytes
// (record's run size). The slots hold what the snapshot writer keeps in
// flight (two chunks per core) with room to copy ahead: the writer hands a
// slot back only after writing its chunks, from the goroutine that waits
// for the next run, so too few slots would stall that wait (with only the
// writer's share, `tracer`'s 4 GiB drained at 2.3 GB/s instead of 50 on an
// H100). Short runs are packed into a slot together (staging.issue), so
// the count holds for them too. Page-locked memory costs ~3 ms per 8 MiB to
// allocate, during which the driver serves no other thread.
func New(slotBytes int) *Reader {
	n := max(8, 2*runtime.GOMAXPROCS(0)*(1<<20)/slotBytes+4)
	return &Reader{slotBytes: slotBytes, nSlots: n}
}

// Close frees the reader's device and pinned memory, once the shadows
// queued to move into host memory have moved.
func (r *Reader) Close() {
	r.settleWG.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stageMu.Lock()
	defer r.stageMu.Unlock()
	for _, s := range r.slots {
		if s.own != nil {
			s.own.Free()
		}
		s.start.Destroy()
		s.end.Destroy()
	}
	r.slots = nil
	if r.ringLock != nil {
		r.ringLock.Free()
		r.ringLock = nil
	}
	if r.ringMem != nil {
		_ = syscall.Munmap(r.ringMem)
		r.ringMem = nil
	}
	if r.ref != nil {
		r.ref.Destroy()
		r.ref = nil
	}
	for _, b := range []*deviceBuffer{&r.desc, &r.sums} {
		if b.addr != 0 {
			cuda.MemFree(b.addr)
		}
		*b = deviceBuffer{}
	}
	r.lastDesc = nil
	if r.sumsHost != nil {
		r.sumsHost.Free()
		r.sumsHost = nil
	}
	r.kernelMu.Lock()
	if r.mod != nil {
		r.mod.Unload()
		r.mod, r.fn = nil, nil
	}
	r.closed = true
	r.kernelMu.Unlock()
	r.throttleMu.Lock()
	if r.throttle != nil && r.liveShadows > 0 {
		r.throttle.Off()
	}
	for _, ev := range r.throttleEvents {
		ev.Destroy()
	}
	r.throttleEvents, r.liveShadows = nil, 0
	r.throttleMu.Unlock()
	for _, s := range append([]*cuda.Stream{&r.stream}, r.copyStreamPtrs()...) {
		if *s != 0 {
			s.Destroy()
			*s = 0
		}
	}
}

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

// Prepare loads the fingerprint kernel in the background, so that the
// load is done before a snapshot needs it instead of while the application
// is held: 0.4 ms from a cubin on an H100, but where only the PTX fits
// the GPU the driver compiles it (5 ms from the driver's cache, 45 ms
// without it, 170 ms on a freshly started H100 machine). Fingerprints
// waits for a load in progress, and loads the kernel itself if Prepare was
// not called or failed.
func (r *Reader) Prepare() {
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := r.loadKernel(); err != nil {
			record.Trace("runtime", "fingerprint kernel not loaded ahead: %v", err)
		}
	}()
}

// loadKernel loads the fingerprint kernel unless it is loaded.
func (r *Reader) loadKernel() error {
	r.kernelMu.Lock()
	defer r.kernelMu.Unlock()
	if r.fn != nil {
		return nil
	}
	if r.closed {
		return errors.New("the reader is closed")
	}
	start := time.Now()
	mod, from, err := loadFingerprintModule()
	if err != nil {
		return fmt.Errorf("loading the fingerprint kernel: %w", err)
	}
	fn, err := mod.Function(fingerprint.Kernel)
	if err != nil {
		mod.Unload()
		return err
	}
	r.mod, r.fn, r.kernelFrom = mod, fn, from
	record.Trace("runtime", "fingerprint kernel loaded from its %s in %.4f s", from, time.Since(start).Seconds())
	return nil
}

// loadFingerprintModule loads the fingerprint kernel from its fatbin, where
// a cubin fits the GPU and nothing is compiled, else from its PTX (a
// driver that cannot take the fatbin may still take the PTX). from names
// the image that loaded.
func loadFingerprintModule() (mod *cuda.Module, from string, err error) {
	mod, fatErr := cuda.LoadModule(fingerprint.Fatbin)
	if fatErr == nil {
		return mod, "fatbin", nil
	}
	mod, err = cuda.LoadModule(fingerprint.PTX)
	if err != nil {
		return nil, "", fmt.Errorf("fatbin: %v; PTX: %w", fatErr, err)
	}
	record.Trace("runtime", "fingerprint fatbin not loaded (%v): using the PTX", fatErr)
	return mod, "PTX", nil
}

// Fingerprints hashes each range on the GPU with the fingerprint kernel.
func (r *Reader) Fingerprints(rs []fingerprint.Range) ([]fingerprint.Sum, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(rs) == 0 {
		return nil, nil
	}
	if err := ensureStream(&r.stream); err != nil {
		return nil, err
	}
	if err := r.loadKernel(); err != nil {
		return nil, err
	}
	desc, err := fingerprint.EncodeRanges(rs)
	if err != nil {
		return nil, err
	}
	grown := r.desc.size < len(desc)
	if err := r.desc.ensure(len(desc)); err != nil {
		return nil, err
	}
	if err := r.sums.ensure(fingerprint.SumBytes * len(rs)); err != nil {
		return nil, err
	}
	// Snapshots of one recording mostly hash the same ranges: upload them
	// only when they changed (each synchronous copy waits behind the copy
	// engine's queue, busy with a settling shadow).
	if grown || !bytes.Equal(desc, r.lastDesc) {
		r.lastDesc = nil
		if err := cuda.MemcpyHtoD(r.desc.addr, desc); err != nil {
			return nil, err
		}
		r.lastDesc = desc
	}
	n := fingerprint.SumBytes * len(rs)
	if r.sumsHost == nil || len(r.sumsHost.Bytes()) < n {
		if r.sumsHost != nil {
			r.sumsHost.Free()
			r.sumsHost = nil
		}
		buf, err := cuda.MemAllocHost(max(n, 64<<10))
		if err != nil {
			return nil, err
		}
		r.sumsHost = buf
	}
	grid := mneme.Dim3{X: uint32(min(len(rs), 1<<30)), Y: 1, Z: 1}
	block := mneme.Dim3{X: fingerprint.Threads, Y: 1, Z: 1}
	args := [][]byte{binary.LittleEndian.AppendUint64(nil, r.desc.addr), binary.LittleEndian.AppendUint64(nil, r.sums.addr),
		binary.LittleEndian.AppendUint32(nil, uint32(len(rs)))}
	if err := r.fn.Launch(grid, block, 0, r.stream, args); err != nil {
		return nil, err
	}
	out := r.sumsHost.Bytes()[:n]
	if err := cuda.MemcpyDtoHAsync(out, r.sums.addr, r.stream); err != nil {
		return nil, err
	}
	if err := r.stream.Synchronize(); err != nil {
		return nil, fmt.Errorf("fingerprint kernel: %w", err)
	}
	return fingerprint.DecodeSums(out, len(rs))
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
