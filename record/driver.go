package record

import (
	"errors"
	"fmt"
	"sort"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/arena"
)

// Recording through the driver (record/inject): an application not built
// with mneme's wrapper is seen from CUDA driver callbacks. Its allocations
// stay where the driver put them (there is no arena; the caller tracks
// them), its kernels carry machine code only (the module image they were
// loaded from, which the Process hands over as a DeviceCoder), and the
// driver performs each launch between two callbacks: BeginLaunch takes the
// prologue before it, EndLaunch the epilogue after it. Everything else,
// selection, --max-recordings, fingerprints, the content store, shadow
// copies and the background writer, is the wrapper's path.

// AddressAlign is the alignment of the range a kernel file recorded
// through the driver declares around its allocations (VAddr, VASize): the
// driver honours a fixed-address reservation at a 64 MiB boundary, not
// inside one (measured on an H200, driver 580: a request for
// 0x7f3552800000 was given 0x7f3554000000).
const AddressAlign = 64 << 20

// NewThroughDriver prepares a recording into cfg.DB of an application seen
// through driver callbacks. p must be a DeviceCoder: a kernel's entry holds
// the image its module was loaded from.
func NewThroughDriver(cfg Config, p Process) (*Recorder, error) {
	if _, ok := p.(DeviceCoder); !ok {
		return nil, errors.New("recording through the driver: the process cannot hand over module images")
	}
	r, err := New(cfg, p, nil)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.throughDriver = true
	r.external = map[uint64]uint64{}
	r.status.ArenaBase, r.status.ArenaSize = "", 0
	r.writeStatus()
	return r, nil
}

// TrackAllocation notes a device allocation the application made through
// the driver; it is snapshotted until UntrackAllocation. It takes no lock a
// recording holds: the driver reports allocations from any thread.
func (r *Recorder) TrackAllocation(addr, size uint64) {
	r.allocMu.Lock()
	defer r.allocMu.Unlock()
	r.allocations++
	if size > 0 {
		r.trackedBytes += size - r.external[addr] // an address reused without a free seen replaces its old size
		r.external[addr] = size
		r.trackedPeak = max(r.trackedPeak, r.trackedBytes)
	}
}

// UntrackAllocation notes that the application freed an allocation; an
// address never tracked (the recorder's own memory) is ignored.
func (r *Recorder) UntrackAllocation(addr uint64) {
	r.allocMu.Lock()
	defer r.allocMu.Unlock()
	r.trackedBytes -= r.external[addr]
	delete(r.external, addr)
}

// ContextEnds waits for the snapshots being written in the background and
// forgets every tracked allocation: the application is resetting or
// destroying its context, which frees them.
func (r *Recorder) ContextEnds() {
	r.Drain()
	r.allocMu.Lock()
	defer r.allocMu.Unlock()
	clear(r.external)
	r.trackedBytes = 0
}

// ModuleLoaded counts a module image the application loaded.
func (r *Recorder) ModuleLoaded() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.Fatbinaries++
	r.writeStatus()
}

// AddForwardedLaunches counts n launches the caller did not show (of
// kernels not selected, or of a context not recorded), unnamed.
func (r *Recorder) AddForwardedLaunches(n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.LaunchesSeen += int64(n)
}

// BeginLaunch is shown a launch before the driver performs it. A non-zero
// token means the launch is being recorded: its prologue is taken, and
// EndLaunch(token) must follow once the driver has performed it. One
// launch is recorded at a time; launches of other threads meanwhile run as
// they are.
func (r *Recorder) BeginLaunch(l *Launch) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, _, _ := r.beginLaunch(l)
	if f == nil {
		return 0
	}
	if !r.beginInstance(f) {
		r.endLaunch(f)
		return 0
	}
	r.inFlight = f
	r.inFlightToken++
	return r.inFlightToken
}

// EndLaunch completes the recorded launch of token: launchErr is what the
// driver returned for it.
func (r *Recorder) EndLaunch(token int, launchErr error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.inFlight
	if f == nil || token != r.inFlightToken {
		return
	}
	r.inFlight = nil
	if launchErr != nil {
		r.reportError(fmt.Sprintf("kernel %s: the launch failed (%v); the instance is not recorded", f.l.Kernel.Demangled, launchErr))
	}
	r.endInstance(f, launchErr)
	r.endLaunch(f)
}

// live lists the allocations a snapshot holds, by address: the arena's
// blocks, or the allocations tracked through the driver.
func (r *Recorder) live() []arena.Block {
	if !r.throughDriver {
		if r.arena == nil {
			return nil
		}
		return r.arena.Live()
	}
	r.allocMu.Lock()
	defer r.allocMu.Unlock()
	out := make([]arena.Block, 0, len(r.external))
	for a, n := range r.external {
		out = append(out, arena.Block{Addr: a, Size: n, Span: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// describeMachineCode builds the database entry of a kernel recorded
// through the driver: machine code only, its module's image as the device
// code, every parameter raw bytes.
func (r *Recorder) describeMachineCode(l *Launch) (*db.Kernel, error) {
	code, err := r.proc.(DeviceCoder).DeviceCode(l.Kernel.Module)
	if err != nil {
		return nil, err
	}
	if err := r.describeDevice(); err != nil {
		return nil, err
	}
	name, err := r.writeDeviceCode(code)
	if err != nil {
		return nil, err
	}
	k := &db.Kernel{
		StaticHash:    db.StaticHash(l.Kernel.Name, code),
		KernelName:    l.Kernel.Name,
		DemangledName: l.Kernel.Demangled,
		Modules:       []string{},
		Code:          db.CodeMachine,
		DeviceCode:    name,
		Device:        *r.device,
		Toolchain:     r.toolchain,
		FormatVersion: db.FormatVersion,
		Instances:     map[string]*db.Instance{},
	}
	for i, a := range l.Args {
		k.ArgNames = append(k.ArgNames, fmt.Sprintf("arg%d", i))
		k.ArgSizes = append(k.ArgSizes, uint64(len(a)))
		k.ArgKinds = append(k.ArgKinds, mneme.ArgByVal(uint64(len(a))))
		k.Specializations = append(k.Specializations, false)
	}
	if r.cfg.Rank != nil {
		rank := *r.cfg.Rank
		k.Rank = &rank
	}
	return k, nil
}

// coverLive widens the range a kernel recorded through the driver declares
// (VAddr, VASize) to cover the live allocations, aligned to AddressAlign:
// replay reserves it at the same addresses. A kernel recorded with no
// allocation declares one aligned block.
func (r *Recorder) coverLive(k *db.Kernel) {
	if !r.throughDriver {
		return
	}
	lo, hi := ^uint64(0), uint64(0)
	for _, b := range r.live() {
		lo, hi = min(lo, b.Addr), max(hi, b.Addr+b.Size)
	}
	if hi == 0 {
		if k.VAddr == "" {
			k.VAddr, k.VASize = db.FormatVAddr(AddressAlign), AddressAlign
		}
		return
	}
	lo = lo / AddressAlign * AddressAlign
	hi = (hi + AddressAlign - 1) / AddressAlign * AddressAlign
	if k.VAddr != "" && k.VASize > 0 {
		if base, err := k.ParseVAddr(); err == nil {
			lo, hi = min(lo, base), max(hi, base+k.VASize)
		}
	}
	k.VAddr, k.VASize = db.FormatVAddr(lo), hi-lo
}
