// Package replay re-executes one recorded kernel launch in isolation, under
// any compile configuration, as many times as a tuner asks: it restores the
// recorded device memory at its recorded addresses, compiles the kernel
// through the jit cache, launches and times it, and checks its output against
// the recording on the GPU.
//
// A Session is opened once per recorded instance (context, arena, prologue and
// epilogue images in device memory, IR loaded) and then runs configurations.
// Memory is reset device-to-device before every launch, and only the ranges
// the recording shows the kernel changes once a bitwise-verified run has shown
// that it writes nothing else.
package replay

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/jit"
	"github.com/mneme-gpu/mneme/replay/internal/compare"
)

// Timers.
const (
	TimerAuto   = "auto" // CUPTI when libcupti loads, else events
	TimerCUPTI  = "cupti"
	TimerEvents = "events"
)

// Options open a Session.
type Options struct {
	DB         string // database directory or kernel JSON file
	Kernel     string // static hash (prefix) or kernel name; empty: any kernel
	Instance   string // instance id; empty when the database has exactly one
	Device     int    // CUDA device ordinal
	Iterations int    // timed launches per Run; 0 means 5
	Warmup     int    // untimed launches before the timed ones
	Verify     mneme.VerifyOptions
	CacheDir   string // jit disk cache; empty keeps compiled code in memory only
	Timer      string // auto (default), cupti or events
	// FullReset restores every recorded allocation before every launch
	// instead of only the ranges the kernel changes.
	FullReset bool
	// ColdL2 writes a buffer of twice the GPU's L2 cache before each timed
	// launch (after the reset), so the kernel reads its inputs from device
	// memory, as a kernel does in an application whose other work evicted
	// them; by default they are in L2 from the reset's copies.
	ColdL2 bool
	// CompileOnly opens without a GPU: Compile works, Run does not.
	CompileOnly bool
}

// reservationSize is the range replay reserves at base: up to the end of
// the last mapping, at least minReservation, in granules.
func reservationSize(maps []span, base, gran uint64) uint64 {
	var end uint64
	for _, m := range maps {
		end = max(end, m.end())
	}
	return alignUp(max(end-base, minReservation), gran)
}

// minReservation is the smallest arena reservation replay asks for.
const minReservation = 512 << 20

// DefaultIterations is the number of timed launches when Options leave it unset.
const DefaultIterations = 5

func (o *Options) check() error {
	if o.Iterations == 0 {
		o.Iterations = DefaultIterations
	}
	if o.Iterations < 1 {
		return inputErr("iterations %d: must be at least 1", o.Iterations)
	}
	if o.Warmup < 0 {
		return inputErr("warmup %d: must not be negative", o.Warmup)
	}
	if o.Device < 0 {
		return inputErr("device %d: must not be negative", o.Device)
	}
	switch o.Timer {
	case "":
		o.Timer = TimerAuto
	case TimerAuto, TimerCUPTI, TimerEvents:
	default:
		return inputErr("timer %q: want auto, cupti or events", o.Timer)
	}
	if err := o.Verify.Validate(); err != nil {
		return &InputError{Err: err}
	}
	o.Verify = o.Verify.WithDefaults()
	return nil
}

// compareMode turns the verification options into the comparison kernel's
// mode, element width and tolerances.
func compareMode(v mneme.VerifyOptions) (mode, dtypeBytes uint32, atol, rtol float64) {
	dtypeBytes = 4
	if v.DType == mneme.VerifyF64 {
		dtypeBytes = 8
	}
	switch v.Mode {
	case mneme.VerifyAbs:
		return compare.ModeTolerance, dtypeBytes, v.Tolerance, 0
	case mneme.VerifyRel:
		return compare.ModeTolerance, dtypeBytes, 0, v.Tolerance
	case mneme.VerifyTolerance:
		return compare.ModeTolerance, dtypeBytes, v.ATol, v.RTol
	}
	return compare.ModeBitwise, dtypeBytes, 0, 0
}

// Session is one recorded instance opened for replay. Run, Compile and
// Snapshot may be called from any goroutine; Runs are serialized.
type Session struct {
	opts Options
	rec  *Recording
	comp *jit.Compiler

	// Device state; nil in a compile-only session.
	dev      cuda.Device
	props    cuda.DeviceProps
	ctx      *cuda.Context
	stream   cuda.Stream
	arena    span
	phys     []mapping
	lay      layout
	proCopy  uint64 // device image of the prologue (blobs and globals)
	epiCopy  uint64 // device image of the epilogue
	results  uint64 // device words the comparison kernel lowers
	flush    uint64 // ColdL2's buffer, twice the L2 cache; 0 until used
	flushLen uint64
	nResults int
	cmpMod   *cuda.Module
	cmpFn    *cuda.Function
	partial  []resetCopy // reset of the ranges the kernel changes
	full     []resetCopy // reset of everything
	// unchanged holds, per blob, the spans outside the partial reset, which
	// tolerance verification checks bitwise before trusting that reset.
	unchanged [][]span
	// typed is the element type and bounds of every blob and global for
	// the typed modes (auto, ulp), computed once at open.
	typed    typedPlan
	timer    *cuda.KernelTimer
	timerErr error // why CUPTI is not used, for timer "cupti"
	events   []*cuda.Event

	mu      sync.Mutex
	loaded  map[string]*loadedKernel
	last    *loadedKernel // the kernel of the latest run, whose globals Snapshot reads
	lru     []string
	trusted bool // memory is known to be in the post-run state of a verified run, or the prologue
	broken  error
	closed  bool
}

type mapping struct {
	span
	mem cuda.PhysMem
}

// loadedKernel is a compiled configuration loaded in the context.
type loadedKernel struct {
	out     *jit.Output
	mod     *cuda.Module
	fn      *cuda.Function
	attrs   cuda.FuncAttrs
	globals []boundGlobal
	// maxDynamic is the dynamic shared memory the function is allowed so far.
	maxDynamic int
}

// boundGlobal is a recorded device global found in a loaded module.
type boundGlobal struct {
	slot  globalSlot
	index int // of the global in the layout and in both snapshots
	addr  uint64
}

// maxLoaded bounds the modules kept loaded: a tuning run visits thousands of
// configurations, each a module.
const maxLoaded = 64

// Open loads the recording and prepares the device: context, arena at the
// recorded address with the prologue's allocations mapped, prologue and
// epilogue images in device memory, the comparison kernel and the timer.
func Open(opts Options) (*Session, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if opts.CompileOnly {
		// Compiling needs no device state: the snapshots' data stay unread.
		rec, err := LoadForCompile(opts.DB, opts.Kernel, opts.Instance)
		if err != nil {
			return nil, err
		}
		arch := rec.Kernel.Device.Arch
		if arch == "" {
			arch = jit.DefaultArch
		}
		s := &Session{opts: opts, rec: rec, loaded: map[string]*loadedKernel{}}
		s.comp = jit.NewCompiler(jit.Options{CacheDir: opts.CacheDir, Arch: arch})
		return s, nil
	}
	rec, err := Load(opts.DB, opts.Kernel, opts.Instance)
	if err != nil {
		return nil, err
	}
	return openLoaded(opts, rec)
}

// openLoaded prepares the device for a loaded recording, as Open.
func openLoaded(opts Options, rec *Recording) (*Session, error) {
	// The snapshots' streams are drained into the device images here.
	defer rec.Close()
	s := &Session{opts: opts, rec: rec, loaded: map[string]*loadedKernel{}}
	s.lay = planLayout(rec.Prologue, rec.Epilogue)
	s.full = planFullReset(s.lay.blobs)
	s.partial = planPartialReset(s.lay.blobs, rec.changed)
	for _, b := range s.lay.blobs {
		s.unchanged = append(s.unchanged, unchangedSpans(b, s.partial))
	}
	var err error
	if s.typed, err = planTyped(rec, s.lay, opts.Verify); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.openDevice(); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

func (s *Session) openDevice() error {
	o := s.opts
	if err := cuda.Init(); err != nil {
		return err
	}
	var err error
	if s.dev, err = cuda.GetDevice(o.Device); err != nil {
		return fmt.Errorf("device %d: %w", o.Device, err)
	}
	if s.props, err = s.dev.Props(); err != nil {
		return fmt.Errorf("device %d: %w", o.Device, err)
	}
	if s.ctx, err = s.dev.RetainPrimaryContext(); err != nil {
		return fmt.Errorf("device %d: %w", o.Device, err)
	}
	if err := s.ctx.SetCurrent(); err != nil {
		return err
	}
	// The recorded ranges first, before this process asks the driver for
	// anything that might be placed there.
	if err := s.mapArena(); err != nil {
		return err
	}
	s.comp = jit.NewCompiler(jit.Options{CacheDir: o.CacheDir, Context: s.ctx, Arch: s.props.Arch()})
	if s.stream, err = cuda.NewStream(); err != nil {
		return err
	}
	if err := s.uploadImages(); err != nil {
		return err
	}
	if err := s.loadCompareKernel(); err != nil {
		return err
	}
	// The arena starts in the prologue state.
	if err := s.resetAll(s.full, nil); err != nil {
		return err
	}
	if err := s.stream.Synchronize(); err != nil {
		return err
	}
	s.trusted = true
	return s.openTimer()
}

// mapArena reserves the recorded address range and backs the recorded
// allocations with physical memory, so pointers stored in the data stay valid.
func (s *Session) mapArena() error {
	k := s.rec.Kernel
	gran, err := cuda.AllocationGranularity(s.dev)
	if err != nil {
		return err
	}
	maps, err := planMappings(s.lay.blobs, s.rec.VAddr, k.VASize, gran)
	if err != nil {
		return err
	}
	if len(maps) == 0 {
		return nil // the kernel touches no heap memory
	}
	// Refused up front, naming the recording, rather than by whichever
	// allocation would fail first.
	need := 2 * s.lay.copyBytes
	for _, m := range maps {
		need += m.Size
	}
	if free, _, err := cuda.MemGetInfo(); err == nil && need > free {
		return fmt.Errorf("%w: replaying %s needs %s of device memory (its allocations at their recorded addresses, and device images of the prologue and the epilogue), and device %d has %s free",
			mneme.ErrOutOfResources, s.rec.DB.Path(s.rec.Instance.Prologue), db.FormatSize(need), s.opts.Device, db.FormatSize(free))
	}
	// Only the part of the arena the allocations use is reserved: the
	// whole of it (by default as large as the GPU) collides more easily
	// with what the driver has already placed in this process (measured: a
	// context allocation 16 GB above the base refused a 79 GiB
	// reservation). The driver honours a fixed address only for large
	// reservations (256 MiB and more), so a small one gets room to spare.
	arena, err := s.reserve(reservations(maps, s.rec.VAddr, gran, recordedSpan(s.lay.blobs)))
	if err != nil {
		return err
	}
	s.arena = arena
	for _, m := range maps {
		h, err := cuda.MemCreate(s.dev, m.Size)
		if err != nil {
			return fmt.Errorf("device memory for the allocations at 0x%x (%d bytes): %w", m.Addr, m.Size, err)
		}
		if err := cuda.MemMap(m.Addr, m.Size, h); err != nil {
			h.Release()
			return err
		}
		s.phys = append(s.phys, mapping{m, h})
		if err := cuda.MemSetAccess(m.Addr, m.Size, s.dev); err != nil {
			return err
		}
	}
	return nil
}

// reservations are the ranges to try reserving for the mappings, in order:
// from the recorded base, at least minReservation (the driver honours a
// fixed address more readily for large reservations), then the recorded
// allocations' span alone (reserve.go), which reaches less far.
func reservations(maps []span, base, gran uint64, recorded span) []span {
	out := []span{{base, reservationSize(maps, base, gran)}}
	if recorded.Size != 0 && recorded != out[0] && recorded.Addr <= maps[0].Addr && maps[len(maps)-1].end() <= recorded.end() {
		out = append(out, recorded)
	}
	return out
}

// reserve reserves the first of the candidate ranges the driver gives at
// its address. Failing all, it is out of resources (exit 7) naming the
// range and what occupies it: replaying at other addresses would break
// every pointer stored in the data.
func (s *Session) reserve(cands []span) (span, error) {
	var errs []string
	for _, c := range cands {
		addr, err := cuda.AddressReserve(c.Size, c.Addr)
		if err == nil {
			return span{addr, c.Size}, nil
		}
		errs = append(errs, err.Error())
	}
	want := cands[len(cands)-1]
	what := "is another arena or allocation there?"
	occ := occupantsNow(want)
	if occ != "" {
		what = "this process has mapped " + occ + " there"
	}
	return span{}, &rangeTakenError{host: occ != "", msg: fmt.Sprintf("%v: the recording's device memory lives at 0x%x..0x%x, and that address range cannot be reserved in this process (%s): %s",
		mneme.ErrOutOfResources, want.Addr, want.end(), what, strings.Join(errs, "; "))}
}

// ErrRangeHeldByThisProcess marks a recorded range that this process's own
// host mappings (a library, a heap) occupy: a process started afresh, laid
// out anew by address-space randomization, may find it free.
var ErrRangeHeldByThisProcess = errors.New("the recorded range is mapped by this process")

// rangeTakenError is reserve's refusal: out of resources (exit 7), and held
// by this process when host is set.
type rangeTakenError struct {
	msg  string
	host bool
}

func (e *rangeTakenError) Error() string { return e.msg }

func (e *rangeTakenError) Is(target error) bool {
	return target == mneme.ErrOutOfResources || (e.host && target == ErrRangeHeldByThisProcess)
}

// uploadImages puts the prologue and epilogue into device memory once; every
// later reset and comparison is device-to-device.
func (s *Session) uploadImages() error {
	var err error
	if s.proCopy, err = cuda.MemAlloc(s.lay.copyBytes); err != nil {
		return fmt.Errorf("device copy of the prologue (%d bytes): %w", s.lay.copyBytes, err)
	}
	if s.epiCopy, err = cuda.MemAlloc(s.lay.copyBytes); err != nil {
		return fmt.Errorf("device copy of the epilogue (%d bytes): %w", s.lay.copyBytes, err)
	}
	if err := s.uploadBlobs(); err != nil {
		return err
	}
	pro, epi := s.rec.Prologue, s.rec.Epilogue
	for i, g := range s.lay.globals {
		if err := s.uploadRegion(g.Off, pro.Globals[i].Data, epi.Globals[i].Data); err != nil {
			return err
		}
	}
	// One result word per comparison: blobs, globals, and the bitwise
	// checks of unchanged spans in tolerance mode.
	s.nResults = len(s.lay.blobs) + len(s.lay.globals)
	for _, u := range s.unchanged {
		s.nResults += len(u)
	}
	s.nResults = max(s.nResults, 1)
	if s.results, err = cuda.MemAlloc(uint64(8 * s.nResults)); err != nil {
		return err
	}
	return nil
}

// uploadBlobs streams the allocations of both snapshots into the device
// images: decoded window by window on every core, each window copied by
// this (locked, context-current) thread as it comes, and windows stored as
// zero chunks set on the device without a transfer. No host buffer larger
// than a window per core is ever held, whatever the recording's size.
func (s *Session) uploadBlobs() error {
	if s.rec.proStream == nil || s.rec.epiStream == nil {
		return errors.New("replay: the recording's snapshots were closed before the session opened")
	}
	type upload struct {
		w    db.BlobWindow
		done chan error
	}
	uploads := make(chan upload)
	walked := make(chan error, 1)
	go func() {
		walked <- db.WalkBlobPairs(s.rec.proStream, s.rec.epiStream, func(w db.BlobWindow) error {
			u := upload{w, make(chan error, 1)}
			uploads <- u
			return <-u.done // the window's buffers are reused once it returns
		})
		close(uploads)
	}()
	var copyErr error
	for u := range uploads {
		if copyErr == nil {
			off := s.lay.blobs[u.w.Blob].Off + u.w.Off
			copyErr = uploadWindow(s.proCopy+off, u.w.Pro, u.w.ProZero, u.w.Len)
			if copyErr == nil {
				copyErr = uploadWindow(s.epiCopy+off, u.w.Epi, u.w.EpiZero, u.w.Len)
			}
		}
		u.done <- copyErr
	}
	if err := <-walked; err != nil && copyErr == nil {
		return snapshotErr(err)
	}
	if copyErr != nil {
		return copyErr
	}
	// Memsets of device memory may still run when they return.
	return cuda.Synchronize()
}

// uploadWindow puts n bytes at device address dst: data, or zeros when the
// window is stored as zero chunks.
func uploadWindow(dst uint64, data []byte, zero bool, n int) error {
	if zero {
		return cuda.MemsetD8(dst, 0, uint64(n))
	}
	return cuda.MemcpyHtoD(dst, data)
}

// uploadRegion copies one global's prologue and epilogue bytes to
// offset off of the device images.
func (s *Session) uploadRegion(off uint64, pro, epi []byte) error {
	if len(pro) == 0 {
		return nil
	}
	if err := cuda.MemcpyHtoD(s.proCopy+off, pro); err != nil {
		return err
	}
	return cuda.MemcpyHtoD(s.epiCopy+off, epi)
}

func (s *Session) loadCompareKernel() error {
	var err error
	if s.cmpMod, err = cuda.LoadModule(compare.PTX); err != nil {
		return fmt.Errorf("loading the verification kernel: %w", err)
	}
	if s.cmpFn, err = s.cmpMod.Function(compare.KernelName); err != nil {
		return fmt.Errorf("loading the verification kernel: %w", err)
	}
	return nil
}

func (s *Session) openTimer() error {
	if s.opts.Timer == TimerEvents {
		return nil
	}
	t, err := cuda.NewKernelTimer()
	if err != nil {
		if s.opts.Timer == TimerCUPTI {
			return fmt.Errorf("timer cupti: %w", err)
		}
		s.timerErr = err
		return nil
	}
	s.timer = t
	return nil
}

// Recording is the loaded database instance.
func (s *Session) Recording() *Recording { return s.rec }

// Baseline is the configuration that reproduces the recorded launch.
func (s *Session) Baseline() mneme.Config { return s.rec.Baseline() }

// KernelName is the mangled name of the replayed kernel.
func (s *Session) KernelName() string { return s.rec.Kernel.KernelName }

// Device is the GPU's properties (zero in a compile-only session).
func (s *Session) Device() cuda.DeviceProps { return s.props }

// Timer names the timer Run uses: "cupti" or "events" ("" without a device).
func (s *Session) Timer() string {
	if s.ctx == nil {
		return ""
	}
	if s.timer != nil {
		return TimerCUPTI
	}
	return TimerEvents
}

// Broken reports whether a kernel fault left the CUDA context unusable; every
// later Run fails, and the process must exit to use the GPU again.
func (s *Session) Broken() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken != nil
}

// BrokenError is the sticky CUDA error that broke the session, or nil.
func (s *Session) BrokenError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

// CompilerFatal is the first LLVM fatal error or crash the session's
// compiles trapped (jit.Compiler.Fatal), nil if none.
func (s *Session) CompilerFatal() error { return s.comp.Fatal() }

// ErrBroken is returned by Run after a sticky CUDA error.
var ErrBroken = errors.New("the CUDA context is unusable after an earlier kernel fault; restart the process")

// Close releases the device resources. After a sticky error it releases
// nothing: every release would go through the broken context, and the
// process must exit to use the GPU again anyway.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.ctx == nil {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if s.broken == nil {
		s.ctx.SetCurrent()
		s.release()
	}
	return nil
}

// release frees device state in reverse order of creation; errors are
// ignored because nothing can be done about them.
func (s *Session) release() {
	for _, lk := range s.loaded {
		lk.mod.Unload()
	}
	s.loaded = map[string]*loadedKernel{}
	for _, e := range s.events {
		e.Destroy()
	}
	s.events = nil
	if s.timer != nil {
		s.timer.Close()
		s.timer = nil
	}
	if s.cmpMod != nil {
		s.cmpMod.Unload()
	}
	for _, p := range []uint64{s.flush, s.results, s.epiCopy, s.proCopy} {
		if p != 0 {
			cuda.MemFree(p)
		}
	}
	for _, m := range s.phys {
		cuda.MemUnmap(m.Addr, m.Size)
		m.mem.Release()
	}
	s.phys = nil
	if s.arena.Size != 0 {
		cuda.AddressFree(s.arena.Addr, s.arena.Size)
		s.arena = span{}
	}
	if s.stream != 0 {
		s.stream.Destroy()
	}
	if s.ctx != nil {
		s.ctx.Release()
	}
}

// since is seconds elapsed, the unit of Result's times.
func since(t time.Time) float64 { return time.Since(t).Seconds() }
