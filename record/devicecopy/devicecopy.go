// Package devicecopy reads device memory for the recorder the fast way
// (record.DeviceReader over the CUDA driver): chunk fingerprints computed by
// the fingerprint kernel on the GPU, host- and device-side shadow copies of
// what a snapshot stores (so it can be written while the application goes
// on), and device-to-host copies through a ring of pinned staging buffers,
// issued ahead on their own stream so the bus stays busy while earlier
// chunks are encoded and written. Both streams are non-blocking: the
// background copies neither wait for the application's kernels nor make
// them wait.
//
// The Reader is in devicecopy.go; fingerprints.go, staging.go (the pinned
// ring), hostshadow.go and deviceshadow.go hold one service each.
//
// It is plain Go over package cuda; cmd/mneme-rt creates one per recording
// in the application's context.
package devicecopy

import (
	"runtime"
	"sync"
	"syscall"

	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/record"
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
// the bus's speed (bench/drain_contention.cu measures both).
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
