package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/arena"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// Process is the recorded application and its GPU, as the recorder needs
// them. cmd/mneme-rt implements it over the shim's real CUDA calls.
type Process interface {
	// Synchronize waits until the device is idle.
	Synchronize() error
	// CopyToHost copies len(dst) bytes from device address src.
	CopyToHost(dst []byte, src uint64) error
	// Launch performs the application's launch for real.
	Launch(l *Launch) error
	// Globals lists the device globals registered by a module, with their
	// device addresses.
	Globals(module int) ([]Global, error)
	// KernelIR finds the IR embedded in the application that defines a
	// kernel.
	KernelIR(mangled string) (*KernelIR, error)
	// Device describes the GPU the application runs on.
	Device() (db.DeviceInfo, error)
	// Toolchain names the versions the recording is made with.
	Toolchain() db.Toolchain
}

// DeviceCoder is a Process that can hand over the device code the
// application registered for a module (its fat binary), so replay can run
// the application's own code as the baseline. Processes that cannot are
// recorded without it; replay then recompiles the baseline from the IR.
type DeviceCoder interface {
	DeviceCode(module int) ([]byte, error)
}

// Kernel is a registered kernel.
type Kernel struct {
	Name      string // mangled device name
	Demangled string
	Module    int // index of the fat binary that registered it
}

// Launch is one kernel launch of the application.
type Launch struct {
	Kernel Kernel
	Grid   mneme.Dim3
	Block  mneme.Dim3
	Shared uint32
	Args   [][]byte // each parameter's bytes, sized by cuFuncGetParamInfo
	Native any      // what the Process needs to perform the launch
}

// Global is a device global variable of a module.
type Global struct {
	Name     string
	Addr     uint64
	Size     uint64
	Managed  bool
	Constant bool
}

// KernelIR is the IR of one kernel: either the kernel extracted with what
// it uses and its parameters analyzed, or (inside the application, which
// does not load LLVM) the bitcode of the translation unit that defines it,
// with ArgKinds empty until Finalize analyzes it.
type KernelIR struct {
	Bitcode  []byte
	ArgNames []string
	ArgKinds []mneme.ArgKind // empty until the IR is analyzed
	// Flags are the compile flags the wrapper embedded with the translation
	// unit (appabi.IREntry.Flags).
	Flags []string
}

// Decision says who performs a launch the recorder was shown.
type Decision int

const (
	// Forward: the caller performs the launch.
	Forward Decision = iota
	// Launched: the recorder performed it; its error is the launch's result.
	Launched
	// ForwardAlways: the caller performs it and need not show this kernel again.
	ForwardAlways
)

// Memo is what the caller may remember about a launch it showed the
// recorder, so that it need not show the launch's repeats: the shim keeps it
// in C, because showing a launch to the Go library costs microseconds, and
// an application launches the same kernel thousands of times.
type Memo struct {
	// Repeat, when non-zero, names the recorded instance this launch is:
	// later launches of the kernel with the same geometry, shared memory
	// and argument bytes are that instance too, and the caller reports how
	// many it forwarded with AddRepeats.
	Repeat int
	// Capped: the kernel takes no new instances (--max-recordings). Its
	// launches that are not a remembered repeat need not be shown, only
	// counted (AddForwarded).
	Capped bool
	// ShapeCovered: the kernel takes no new instance of this launch's
	// shape (grid, block, dynamic shared memory) whatever its arguments
	// (it is full under --max-recordings, and only new shapes may still
	// take an instance's place), so such launches need not be shown
	// either, only counted (AddForwarded).
	ShapeCovered bool
}

// Recorder records the selected launches of one application run.
type Recorder struct {
	cfg  Config
	proc Process
	vm   arena.Backend

	mu        sync.Mutex
	arena     *arena.Arena
	arenaErr  error  // a failed reservation, reported once and then repeated
	deviceMem uint64 // the GPU's memory, the arena's size under -vass auto
	oomSeen   bool   // an allocation the arena could not serve was reported
	kernels   map[kernelKey]*kernelState
	matching  int // launches of selected kernels so far (for --skip)
	status    Status
	managed   db.ManagedList // the managed allocations made so far
	// managedDirty: managed lists allocations not yet written; writeStatus
	// writes them (once per status, not once per allocation).
	managedDirty bool
	device       *db.DeviceInfo
	toolchain    db.Toolchain

	buffers     [2][][]byte // snapshot buffers: prologue, epilogue
	bufferBytes uint64

	repeats []repeatRef // Memo.Repeat-1 indexes it

	// chunks is the content store later snapshots reference.
	chunks chunkStore
	// writer writes shadowed snapshots in the background; pending are the
	// instances waiting for them, by snapshot file name.
	writer  *backgroundWriter
	pending map[string]*pendingInstance
	// stagedMin is minStagedBytes, deviceShadowMin the constant of that
	// name (tests lower them).
	stagedMin, deviceShadowMin uint64
	// fingerprintsPrepared: the reader was asked to get its fingerprint
	// kernel ready, once the live memory reached stagedMin.
	fingerprintsPrepared bool
	// statsFailed: writing the launch statistics failed, and was reported.
	statsFailed bool
}

// repeatRef is the instance a Memo.Repeat names.
type repeatRef struct {
	ks *kernelState
	dh string
}

// launchShape is a launch's grid, block and dynamic shared memory.
type launchShape struct {
	grid, block mneme.Dim3
	shared      uint32
}

type kernelKey struct {
	name   string
	module int
}

type kernelState struct {
	// order lists the kernel's instances by the time they were recorded,
	// and evictions counts those that gave their place to a new shape
	// under --max-recordings (instances.go).
	order     []string
	evictions int
	selected  bool
	broken    bool           // could not be recorded (no IR, ...); reported once
	meta      *db.Kernel     // nil until the first instance is recorded
	dirty     bool           // Occurrences changed since the last write
	repeat    map[string]int // dynamic hash -> Memo.Repeat handed out for it
	recorded  int            // instances written to the kernel file
}

// New prepares a recording into cfg.DB, creating the directory and the
// status file. vm serves the arena, reserved on the first allocation.
func New(cfg Config, p Process, vm arena.Backend) (*Recorder, error) {
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	if err := os.MkdirAll(cfg.DB, 0o755); err != nil {
		return nil, fmt.Errorf("recording database %s: %w", cfg.DB, err)
	}
	r := &Recorder{cfg: cfg, proc: p, vm: vm, kernels: map[kernelKey]*kernelState{}, chunks: newChunkStore(), pending: map[string]*pendingInstance{}, stagedMin: minStagedBytes, deviceShadowMin: deviceShadowMin}
	r.status.PID = os.Getpid()
	r.status.ArenaBase = db.FormatVAddr(cfg.VABase)
	r.status.ArenaSize = cfg.VASize
	if err := WriteStatus(cfg.DB, &r.status); err != nil {
		return nil, err
	}
	return r, nil
}

// SetRegistered updates the registration counts shown in the status file.
func (r *Recorder) SetRegistered(fatbins, kernels, globals int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.Fatbinaries, r.status.KernelsRegistered, r.status.GlobalsRegistered = fatbins, kernels, globals
	r.writeStatus()
}

// SetLoadSeconds records how long loading the runtime into the application took.
func (r *Recorder) SetLoadSeconds(s float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.LoadSeconds = s
	r.writeStatus()
}

// Status returns a copy of the current status.
func (r *Recorder) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.status
	s.Errors = append([]string(nil), s.Errors...)
	return s
}

// Wants reports whether launches of k are to be recorded (--kernels).
func (r *Recorder) Wants(k Kernel) bool { return r.cfg.Selects(k.Name, k.Demangled) }

// ReportError reports a problem found outside the recorder (in the runtime
// library) on stderr and in the status file.
func (r *Recorder) ReportError(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reportError(msg)
}

// reportError logs msg to the application's stderr and the status file.
func (r *Recorder) reportError(msg string) {
	fmt.Fprintln(r.cfg.Log, "mneme record:", msg)
	r.status.addError(msg)
	r.writeStatus()
}

func (r *Recorder) writeStatus() {
	if r.managedDirty {
		r.managedDirty = false
		if err := db.WriteManaged(r.cfg.DB, &r.managed); err != nil {
			r.status.addError(fmt.Sprintf("listing the managed allocations: %v", err))
		}
	}
	if r.arena != nil {
		r.status.ArenaPeak = r.arena.MappedBytes()
	}
	if err := WriteStatus(r.cfg.DB, &r.status); err != nil {
		fmt.Fprintln(r.cfg.Log, "mneme record: status file:", err)
	}
}

// Malloc serves a device allocation from the arena, reserving it first if
// needed. An error means the application's call must fail with
// cudaErrorMemoryAllocation; it has already been reported.
func (r *Recorder) Malloc(size uint64) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.Allocations++
	if r.arena == nil && r.arenaErr == nil {
		Trace("runtime", "arena reserve")
		start := time.Now()
		r.arena, r.arenaErr = r.reserveArena()
		r.status.ArenaSeconds += time.Since(start).Seconds()
		if r.arenaErr != nil {
			r.status.ArenaError = r.arenaErr.Error()
			r.reportError(r.arenaErr.Error())
		}
	}
	if r.arenaErr != nil {
		return 0, r.arenaErr
	}
	start := time.Now()
	addr, err := r.arena.Alloc(size)
	if err != nil && r.writer != nil && len(r.pending) > 0 {
		// Shadow copies of snapshots being written hold device memory the
		// application may need: let them drain, then try again.
		r.writer.wait()
		r.collect()
		addr, err = r.arena.Alloc(size)
	}
	r.status.ArenaSeconds += time.Since(start).Seconds()
	if err == nil && !r.fingerprintsPrepared && !r.cfg.FullCopies && r.liveBytes() >= r.stagedMin {
		// Snapshots will be taken from fingerprints from now on.
		r.fingerprintsPrepared = true
		if p, ok := r.proc.(FingerprintPreparer); ok {
			p.PrepareFingerprints()
		}
	}
	if err != nil {
		var ex *arena.ExhaustedError
		if errors.As(err, &ex) && r.status.ArenaError == "" {
			r.status.ArenaError = err.Error()
		}
		// Once, clearly: an application that retries or probes for the
		// largest allocation would otherwise bury the message.
		if !r.oomSeen {
			r.oomSeen = true
			r.reportError(fmt.Sprintf("allocation %d of %d bytes failed; the application gets cudaErrorMemoryAllocation: %v", r.status.Allocations, size, err))
		}
		return 0, err
	}
	return addr, nil
}

// MinReservation is the smallest virtual range the arena reserves: the
// driver honours the fixed base address for a reservation of this size
// (measured on an H200) but not for every smaller one.
const MinReservation = arena.DefaultSize

// reservation is the size of the range the arena reserves and a replay must
// reserve: -vass (by default the GPU's memory), at least MinReservation, in
// whole 2 MiB units.
func (r *Recorder) reservation() uint64 {
	if r.arena != nil {
		return r.arena.Reserved()
	}
	const unit = 2 << 20
	return max((r.arenaSize()+unit-1)/unit*unit, MinReservation)
}

// Fallback arena bases: arenaBaseRetries more, arenaBaseStride apart.
const (
	arenaBaseRetries = 4
	arenaBaseStride  = 1 << 40
)

// reserveArena reserves the arena at the configured base or, when the
// driver already holds part of that range and the base was not chosen
// (MNEME_VA_BASE), at the next bases a TiB apart: a whole-GPU reservation
// at the default base once met a driver mapping 2.5 GiB into it (H100,
// about one recording in a hundred). The recording names the base it got,
// and replays reserve that one.
func (r *Recorder) reserveArena() (*arena.Arena, error) {
	a, err := arena.NewReserving(r.vm, r.cfg.VABase, r.arenaSize(), r.reservation())
	for k := uint64(1); err != nil && !r.cfg.VABaseChosen && k <= arenaBaseRetries; k++ {
		base := r.cfg.VABase + k*arenaBaseStride
		if b, e := arena.NewReserving(r.vm, base, r.arenaSize(), r.reservation()); e == nil {
			Trace("runtime", "arena at %#x: %v", base, err)
			a, err = b, nil
			r.cfg.VABase = base
			r.status.ArenaBase = db.FormatVAddr(base)
		}
	}
	return a, err
}

// arenaSize is -vass, or the GPU's memory when -vass is auto.
func (r *Recorder) arenaSize() uint64 {
	if r.cfg.VASize != 0 {
		return r.cfg.VASize
	}
	if r.deviceMem == 0 {
		r.deviceMem = arena.DefaultSize
		if dev, err := r.proc.Device(); err == nil && dev.TotalMem > 0 {
			r.deviceMem = dev.TotalMem
		} else {
			r.reportError(fmt.Sprintf("-vass auto: the GPU's memory size is unknown (%v); the arena holds %s", err, "4 GiB"))
		}
	}
	return r.deviceMem
}

// Free returns an arena block. ours is false for addresses the arena did
// not hand out, which the caller passes on to CUDA. The device is
// synchronized first, as cudaFree does, because the block may be handed out
// again at once while a kernel still uses it.
func (r *Recorder) Free(addr uint64) (ours bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.arena == nil || !r.arena.Owns(addr) {
		return false, nil
	}
	if err := r.proc.Synchronize(); err != nil {
		return true, err
	}
	return true, r.arena.Free(addr)
}

// Managed counts a managed allocation of size bytes at addr (the shim
// warns about it) and lists it in the database (db.ManagedFileName), so
// replay can refuse the launches whose arguments point into it.
func (r *Recorder) Managed(addr, size uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.ManagedAllocations++
	r.managed.Add(addr, size)
	r.managedDirty = true
}

// Launch is shown every launch of the application. It records the launch
// when it is selected and new, performing it itself; otherwise it tells the
// caller to perform it.
func (r *Recorder) Launch(l *Launch) (Decision, error) {
	d, _, err := r.LaunchMemo(l)
	return d, err
}

// LaunchMemo is Launch, and says what the caller may remember so that it
// need not show this launch's repeats (see Memo).
func (r *Recorder) LaunchMemo(l *Launch) (Decision, Memo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collect()
	r.status.LaunchesSeen++
	ks := r.kernelState(l.Kernel)
	if !ks.selected || ks.broken {
		return ForwardAlways, Memo{}, nil
	}
	r.status.LaunchesSelected++
	r.matching++
	if r.matching <= r.cfg.Skip {
		return Forward, Memo{}, nil
	}
	dh := db.DynamicHash(l.Grid, l.Block, l.Shared, l.Args)
	var evicted *db.Instance
	if ks.meta != nil {
		if inst := ks.meta.Instances[dh]; inst != nil {
			inst.Occurrences++
			ks.dirty = true
			m := r.memo(ks, dh)
			m.ShapeCovered = r.capped(ks)
			return Forward, m, nil
		}
		if r.capped(ks) {
			// Full: a new shape may take the place of an instance that
			// stands for less (instances.go); nothing else is recorded.
			if evicted = r.makeRoom(ks, shapeOf(l)); evicted == nil {
				return Forward, Memo{ShapeCovered: true, Capped: !r.canEvict(ks)}, nil
			}
		}
	}
	if ks.meta == nil {
		Trace("runtime", "describe kernel %s", l.Kernel.Name)
		meta, err := r.describeKernel(l)
		if err != nil {
			ks.broken = true
			r.reportError(fmt.Sprintf("kernel %s is not recorded: %v", l.Kernel.Demangled, err))
			return ForwardAlways, Memo{}, nil
		}
		ks.meta = meta
	}
	d, err := r.recordInstance(ks, l, dh)
	var m Memo
	if ks.meta.Instances[dh] != nil {
		ks.order = append(ks.order, dh)
		if evicted != nil {
			r.evicted(ks, evicted)
		}
		m = r.memo(ks, dh)
		m.ShapeCovered = r.capped(ks)
		m.Capped = m.ShapeCovered && !r.canEvict(ks)
	} else if evicted != nil {
		// The new launch was not recorded: the instance it was to replace
		// stays.
		ks.meta.Instances[evicted.DynamicHash] = evicted
	}
	return d, m, err
}

func shapeOf(l *Launch) launchShape { return launchShape{l.Grid, l.Block, l.Shared} }

func (r *Recorder) kernelState(k Kernel) *kernelState {
	key := kernelKey{k.Name, k.Module}
	ks := r.kernels[key]
	if ks == nil {
		ks = &kernelState{selected: r.cfg.Selects(k.Name, k.Demangled)}
		r.kernels[key] = ks
	}
	return ks
}

// capped reports whether the kernel takes no new instances.
func (r *Recorder) capped(ks *kernelState) bool {
	return r.cfg.MaxRecordings > 0 && ks.meta != nil && len(ks.meta.Instances) >= r.cfg.MaxRecordings
}

// memo names a recorded instance for Memo.Repeat, once per instance.
func (r *Recorder) memo(ks *kernelState, dh string) Memo {
	if ks.repeat == nil {
		ks.repeat = map[string]int{}
	}
	id, ok := ks.repeat[dh]
	if !ok {
		r.repeats = append(r.repeats, repeatRef{ks, dh})
		id = len(r.repeats)
		ks.repeat[dh] = id
	}
	return Memo{Repeat: id}
}

// AddRepeats counts n launches the caller forwarded as repeats of the
// instance that a Memo.Repeat of id named.
func (r *Recorder) AddRepeats(id int, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 1 || id > len(r.repeats) || n == 0 {
		return
	}
	ref := r.repeats[id-1]
	inst := ref.ks.meta.Instances[ref.dh]
	if inst == nil {
		return
	}
	inst.Occurrences += int(n)
	ref.ks.dirty = true
	r.status.LaunchesSeen += int64(n)
	r.status.LaunchesSelected += int64(n)
}

// AddForwarded counts n launches of k that the caller forwarded without
// showing them (a kernel answered ForwardAlways, or a Memo.Capped one).
func (r *Recorder) AddForwarded(k Kernel, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ks := r.kernelState(k)
	r.status.LaunchesSeen += int64(n)
	if ks.selected {
		r.status.LaunchesSelected += int64(n)
	}
}

// describeKernel builds the kernel's database entry and writes its IR.
func (r *Recorder) describeKernel(l *Launch) (*db.Kernel, error) {
	start := time.Now()
	ir, err := r.proc.KernelIR(l.Kernel.Name)
	r.status.IRSeconds += time.Since(start).Seconds()
	if err != nil {
		return nil, err
	}
	sizes := make([]uint64, len(l.Args))
	for i, a := range l.Args {
		sizes[i] = uint64(len(a))
	}
	names, kinds, specs, err := argMeta(ir, sizes)
	if err != nil {
		return nil, err
	}
	if r.device == nil {
		dev, err := r.proc.Device()
		if err != nil {
			return nil, fmt.Errorf("describe the GPU: %w", err)
		}
		r.device = &dev
		r.toolchain = r.proc.Toolchain()
	}
	sh := db.StaticHash(l.Kernel.Name, ir.Bitcode)
	k := &db.Kernel{
		StaticHash:    sh,
		VAddr:         db.FormatVAddr(r.cfg.VABase),
		VASize:        r.reservation(),
		KernelName:    l.Kernel.Name,
		DemangledName: l.Kernel.Demangled,
		Modules:       []string{db.IRFileName(sh)},
		Device:        *r.device,
		Toolchain:     r.toolchain,
		FormatVersion: db.FormatVersion,
		Instances:     map[string]*db.Instance{},
	}
	k.ArgNames, k.ArgKinds, k.ArgSizes, k.Specializations = names, kinds, sizes, specs
	if r.cfg.Rank != nil {
		rank := *r.cfg.Rank
		k.Rank = &rank
	}
	if err := db.ReplaceFile(filepath.Join(r.cfg.DB, db.IRFileName(sh)), ir.Bitcode); err != nil {
		return nil, err
	}
	k.DeviceCode = r.saveDeviceCode(l.Kernel)
	k.CompileFlags = ir.Flags
	return k, nil
}

// saveDeviceCode writes the fat binary that registered the kernel into the
// database, once per distinct image, and returns its file name; "" when the
// process cannot provide it (the recording is still complete: replay then
// recompiles its baseline).
func (r *Recorder) saveDeviceCode(k Kernel) string {
	dc, ok := r.proc.(DeviceCoder)
	if !ok {
		return ""
	}
	code, err := dc.DeviceCode(k.Module)
	if err != nil || len(code) == 0 {
		r.reportError(fmt.Sprintf("kernel %s: its device code is not recorded (%v); replay will recompile the baseline from IR", k.Name, err))
		return ""
	}
	name := db.DeviceCodeFileName(code)
	path := filepath.Join(r.cfg.DB, name)
	if _, err := os.Stat(path); err == nil {
		return name
	}
	if err := db.ReplaceFile(path, code); err != nil {
		r.reportError(fmt.Sprintf("kernel %s: writing its device code: %v", k.Name, err))
		return ""
	}
	return name
}

// argMeta names and classifies a kernel's arguments. The launch's parameter
// sizes (cuFuncGetParamInfo) are the truth: a kind from the IR that
// disagrees with its size (bool as i1, a struct) is kept as raw bytes
// (byval:N). Without kinds (IR not yet analyzed, see Finalize) every
// argument is raw bytes, which replay restores as is.
func argMeta(ir *KernelIR, sizes []uint64) (names []string, kinds []mneme.ArgKind, specs []bool, err error) {
	if len(ir.ArgKinds) != 0 && len(ir.ArgKinds) != len(sizes) {
		return nil, nil, nil, fmt.Errorf("its IR has %d parameters but the launch passes %d", len(ir.ArgKinds), len(sizes))
	}
	for i, size := range sizes {
		kind := mneme.ArgByVal(size)
		if i < len(ir.ArgKinds) && ir.ArgKinds[i].Size() == size {
			kind = ir.ArgKinds[i]
		}
		name := fmt.Sprintf("arg%d", i)
		if i < len(ir.ArgNames) && ir.ArgNames[i] != "" {
			name = ir.ArgNames[i]
		}
		names = append(names, name)
		kinds = append(kinds, kind)
		specs = append(specs, kind.Specializable())
	}
	return names, kinds, specs, nil
}

// minCompressedSnapshot is the raw size from which compression is worth its
// cost inside the application: below it, writing the raw bytes is faster than
// compressing them (measured on the H200 machine: a 4 MiB recording took
// 11 ms with zstd, while 512 MiB wrote at 13.8 GB/s with it and 2.1 raw).
const minCompressedSnapshot = 16 << 20

// snapshotOptions are the write options of a snapshot holding raw bytes of
// data. Chunks and byte planes are compressed with S2
// (db.SnapshotOptions.Fast): the application waits for these
// writes, or shares the CPU with them.
func (r *Recorder) snapshotOptions(raw uint64) db.SnapshotOptions {
	compress := r.cfg.Compress && raw >= minCompressedSnapshot
	return db.SnapshotOptions{Compress: compress, Fast: compress, NoSync: true}
}

// minStagedBytes is the live device memory from which snapshots are taken
// from fingerprints and staged copies: below it a whole copy takes less
// than loading the fingerprint kernel (a driver JIT of tens of ms, once).
const minStagedBytes = 64 << 20

// liveBytes is the device memory the application holds in the arena.
func (r *Recorder) liveBytes() uint64 {
	var n uint64
	if r.arena != nil {
		for _, b := range r.arena.Live() {
			n += b.Size
		}
	}
	return n
}

// recordInstance performs the launch between two snapshots and writes the
// instance. Files appear in an order that keeps the database valid at every
// moment: snapshots (each written under a temporary name and renamed), then
// the kernel file that names them.
func (r *Recorder) recordInstance(ks *kernelState, l *Launch, dh string) (Decision, error) {
	name := l.Kernel.Demangled
	Trace("runtime", "record %s begin", dh)
	defer Trace("runtime", "record %s end", dh)
	if err := r.proc.Synchronize(); err != nil {
		// The application's own earlier work failed; it will see the error
		// itself, and this launch cannot be recorded in a known state.
		r.reportError(fmt.Sprintf("kernel %s: synchronize before recording: %v", name, err))
		return Forward, nil
	}
	Trace("runtime", "record %s: device idle", dh)
	k := ks.meta
	inst := &db.Instance{
		DynamicHash: dh,
		Prologue:    db.PrologueFileName(k.StaticHash, dh),
		Epilogue:    db.EpilogueFileName(k.StaticHash, dh),
		BlockDims:   l.Block,
		GridDims:    l.Grid,
		SharedMem:   l.Shared,
		Args:        db.EncodeArgs(l.Args),
		Occurrences: 1,
		RecordedAt:  time.Now().UTC().Format(time.RFC3339Nano),
	}
	if r.chunks.isPlanned(inst.Prologue) || r.chunks.isPlanned(inst.Epilogue) {
		// An earlier attempt at this instance was lost after its snapshots
		// were planned; other snapshots may reference their chunks, so the
		// files must not be written again with other contents.
		return Forward, nil
	}
	var ok bool
	var d Decision
	var err error
	var pend *pendingInstance
	if dr, isReader := r.proc.(DeviceReader); isReader && !r.cfg.FullCopies && r.liveBytes() >= r.stagedMin {
		ok, pend, d, err = r.recordStaged(dr, ks, l, dh, inst)
	} else {
		ok, d, err = r.recordCopied(l, dh, inst)
	}
	if !ok {
		return d, err
	}
	k.Instances[dh] = inst
	if pend != nil {
		// Its snapshots are being written: the kernel file names it once
		// they are (collect).
		return Launched, nil
	}
	start := time.Now()
	err = r.writeKernel(k)
	r.status.DBWriteSeconds += time.Since(start).Seconds()
	if err != nil {
		delete(k.Instances, dh)
		r.reportError(fmt.Sprintf("kernel %s: write %s: %v", name, db.KernelFileName(k.StaticHash), err))
		return Launched, nil
	}
	r.instanceRecorded(ks)
	return Launched, nil
}

// instanceRecorded counts an instance whose files and kernel file are written.
func (r *Recorder) instanceRecorded(ks *kernelState) {
	if ks.recorded == 0 {
		r.status.KernelsRecorded++
	}
	ks.recorded++
	ks.dirty = false
	r.status.InstancesRecorded++
	r.writeStatus()
}

// recordCopied performs the launch between two whole copies of the device
// state, then writes both snapshots. ok means both were written; otherwise
// the instance is not recorded and recordInstance returns d and err (Forward
// when the launch has not happened yet).
func (r *Recorder) recordCopied(l *Launch, dh string, inst *db.Instance) (ok bool, d Decision, err error) {
	name := l.Kernel.Demangled
	pro, err := r.snapshot(l, 0)
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: prologue snapshot: %v", name, err))
		return false, Forward, nil
	}
	Trace("runtime", "record %s: prologue copied", dh)
	if err := r.launchRecorded(l, dh); err != nil {
		return false, Launched, err
	}
	epi, err := r.snapshot(l, 1)
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: epilogue snapshot: %v", name, err))
		return false, Launched, nil
	}
	Trace("runtime", "record %s: epilogue copied", dh)
	start := time.Now()
	// No fsync: the rename alone keeps the database valid if the
	// application crashes, which is what recording must survive; an fsync
	// per snapshot would cost more than the copy on many file systems.
	pn, err := db.WriteSnapshot(filepath.Join(r.cfg.DB, inst.Prologue), pro, r.snapshotOptions(pro.RawSize()))
	if err == nil {
		var en int64
		en, err = db.WriteSnapshot(filepath.Join(r.cfg.DB, inst.Epilogue), epi, r.snapshotOptions(epi.RawSize()))
		inst.PrologueBytes, inst.EpilogueBytes = uint64(pn), uint64(en)
	}
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: write snapshot: %v", name, err))
		return false, Launched, nil
	}
	r.status.CopiedBytes += int64(pro.RawSize() + epi.RawSize())
	r.status.SnapshotBytes += int64(inst.PrologueBytes + inst.EpilogueBytes)
	r.status.SnapshotRawBytes += int64(pro.RawSize() + epi.RawSize())
	r.status.SnapshotSeconds += time.Since(start).Seconds()
	Trace("runtime", "record %s: snapshots written", dh)
	return true, Launched, nil
}

// recordStaged snapshots the launch from fingerprints: the prologue before
// it, the epilogue after it. Each is written at once from the live memory,
// or, where the device has the memory to spare for a shadow copy of the
// chunks to store, by the background writer while the application goes on
// (pend then holds the instance until collect sees both written). Results
// as recordCopied's. A prologue file is written even when the instance is
// then lost: later snapshots may already reference its chunks.
func (r *Recorder) recordStaged(dr DeviceReader, ks *kernelState, l *Launch, dh string, inst *db.Instance) (ok bool, pend *pendingInstance, d Decision, err error) {
	name := l.Kernel.Demangled
	pend = &pendingInstance{ks: ks, inst: inst}
	start := time.Now()
	pro, err := r.planSnapshot(dr, l, inst.Prologue)
	if err == nil {
		err = r.writeOrQueue(dr, pro, pend)
	}
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: prologue snapshot: %v", name, err))
		return false, nil, Forward, nil
	}
	Trace("runtime", "record %s: prologue planned", dh)
	took := time.Since(start)
	if err := r.launchRecorded(l, dh); err != nil {
		pend.lost = true
		return false, nil, Launched, err
	}
	start = time.Now()
	epi, err := r.planSnapshot(dr, l, inst.Epilogue)
	if err == nil {
		err = r.writeOrQueue(dr, epi, pend)
	}
	if err != nil {
		// The launch happened: the instance is lost, not the application's work.
		pend.lost = true
		r.reportError(fmt.Sprintf("kernel %s: epilogue snapshot: %v", name, err))
		return false, nil, Launched, nil
	}
	Trace("runtime", "record %s: epilogue planned", dh)
	took += time.Since(start)
	r.status.SnapshotRawBytes += int64(pro.raw + epi.raw)
	r.status.SnapshotSeconds += took.Seconds()
	pend.planned = true
	switch {
	case pend.err != nil: // a queued snapshot failed while the other was written
		r.reportError(fmt.Sprintf("kernel %s: instance %s not recorded: %v", name, dh, pend.err))
		return false, nil, Launched, nil
	case pend.jobs == 0:
		return true, nil, Launched, nil
	}
	return true, pend, Launched, nil
}

// pendingInstance is an instance whose snapshots the background writer
// has yet to write.
type pendingInstance struct {
	ks      *kernelState
	inst    *db.Instance
	jobs    int  // snapshots not yet written
	planned bool // both snapshots are planned: collect may finish the instance
	lost    bool // the instance will not be recorded (its files are still written)
	err     error
}

// writeOrQueue writes a planned snapshot of the pending instance: into a shadow copy and the background queue where the
// device can spare the memory, otherwise at once from the live memory
// after the queue has drained (the files must appear in plan order).
func (r *Recorder) writeOrQueue(dr DeviceReader, p *snapshotPlan, pend *pendingInstance) error {
	queue := func(sh Shadow) {
		if r.writer == nil {
			r.writer = newBackgroundWriter(r.cfg.DB)
		}
		pend.jobs++
		r.pending[p.name] = pend
		r.writer.add(&writeJob{plan: p, shadow: sh, opts: r.snapshotOptions(p.raw)})
	}
	switch {
	case r.cfg.NoBackground:
	case len(p.runs) == 0:
		// Nothing to copy (zeros and references): behind the queued
		// snapshots, whose files it may reference, without waiting (a
		// 4 GiB prologue of zeros took 6 ms to write at once).
		queue(nil)
		return nil
	case len(p.runs) > 0:
		if sh := r.shadow(dr, p.runs); sh != nil {
			queue(sh)
			return nil
		}
		r.status.ShadowRefusals++
	}
	if r.writer != nil {
		r.writer.wait()
		r.collect()
		if err := r.writer.failedReference(p.refs); err != nil {
			r.chunks.forget(p)
			return err
		}
	}
	start := time.Now()
	live := func() (Staging, error) { return dr.Stage(p.runs) }
	n, st, err := writePlan(live, r.cfg.DB, p, r.snapshotOptions(p.raw))
	r.status.addCopies(st)
	r.status.CopySeconds += time.Since(start).Seconds() // the copies overlap the writing: one figure for both
	if err != nil {
		r.chunks.forget(p)
		return err
	}
	r.status.SnapshotBytes += n
	pend.written(p.name, n)
	return nil
}

// shadow copies runs for the background writer where the configuration
// and the memory allow: on the device first (copied now at the device's
// speed, milliseconds for gigabytes; the reader then moves it into host
// memory in the background, or the writer drains it as it encodes), else
// into host memory at once (at the bus's speed, bound by the host's supply
// of fresh pages: a quarter of a second for 4 GiB on an H100 machine); nil
// when neither can be had.
//
// Under ShadowAuto a snapshot of less than deviceShadowMin bytes goes to
// host memory first: copied in well under a millisecond, it costs less
// than a device allocation and leaves the background no driver call to
// make (such calls wait while the application's thread is inside a
// synchronizing call: an 8 KiB drain waited 0.26 s for `tracer`'s final
// cudaMemcpy on an H100).
func (r *Recorder) shadow(dr DeviceReader, runs []fingerprint.Range) Shadow {
	start := time.Now()
	defer func() { r.status.ShadowSeconds += time.Since(start).Seconds() }()
	device := func() Shadow {
		if r.cfg.Shadow == ShadowHost {
			return nil
		}
		sh, err := dr.Shadow(runs)
		if err != nil {
			Trace("runtime", "device shadow refused: %v", err)
			return nil
		}
		r.status.DeviceShadows++
		return sh
	}
	host := func() Shadow {
		if r.cfg.Shadow == ShadowDevice {
			return nil
		}
		sh, err := dr.HostShadow(runs)
		if err != nil {
			Trace("runtime", "host shadow refused: %v", err)
			return nil
		}
		r.status.HostShadows++
		return sh
	}
	first, second := device, host
	var n uint64
	for _, run := range runs {
		n += run.Len
	}
	if n < r.deviceShadowMin {
		first, second = host, device
	}
	if sh := first(); sh != nil {
		return sh
	}
	return second()
}

// deviceShadowMin is the smallest snapshot ShadowAuto copies on the device
// before trying host memory.
const deviceShadowMin = 4 << 20

// written records the size of one of the instance's snapshot files.
func (pend *pendingInstance) written(name string, n int64) {
	if name == pend.inst.Prologue {
		pend.inst.PrologueBytes = uint64(n)
	} else {
		pend.inst.EpilogueBytes = uint64(n)
	}
}

// collect takes what the background writer finished: sizes and figures
// into the instances and the status, failed files out of the content
// store, and each instance whose snapshots are all written into its kernel
// file (or, if one failed, out of the recording).
func (r *Recorder) collect() {
	if r.writer == nil {
		return
	}
	for _, j := range r.writer.take() {
		pend := r.pending[j.plan.name]
		delete(r.pending, j.plan.name)
		r.status.addCopies(j.stats)
		r.status.BackgroundSeconds += j.seconds
		if j.err != nil {
			r.chunks.forget(j.plan)
		} else {
			r.status.SnapshotBytes += j.size
		}
		if pend == nil {
			continue
		}
		pend.jobs--
		switch {
		case j.err != nil && pend.err == nil:
			pend.err = fmt.Errorf("write %s: %w", j.plan.name, j.err)
		case j.err == nil:
			pend.written(j.plan.name, j.size)
		}
		if pend.jobs > 0 || pend.lost || !pend.planned {
			continue
		}
		k := pend.ks.meta
		if pend.err == nil {
			if err := r.writeKernel(k); err != nil {
				pend.err = fmt.Errorf("write %s: %w", db.KernelFileName(k.StaticHash), err)
			}
		}
		if pend.err != nil {
			delete(k.Instances, pend.inst.DynamicHash)
			r.reportError(fmt.Sprintf("kernel %s: instance %s not recorded: %v", k.DemangledName, pend.inst.DynamicHash, pend.err))
			continue
		}
		r.instanceRecorded(pend.ks)
	}
}

// launchRecorded performs the recorded launch and waits for it; an error
// is the launch's result, already reported.
func (r *Recorder) launchRecorded(l *Launch, dh string) error {
	name := l.Kernel.Demangled
	if err := r.proc.Launch(l); err != nil {
		r.reportError(fmt.Sprintf("kernel %s: launch failed while recording: %v", name, err))
		return err
	}
	if err := r.proc.Synchronize(); err != nil {
		r.reportError(fmt.Sprintf("kernel %s faulted while recording: %v", name, err))
		return err
	}
	Trace("runtime", "record %s: launched", dh)
	return nil
}

// writeKernel replaces the kernel's JSON file. Like the snapshots it is
// renamed into place without an fsync: valid whenever the application dies.
func (r *Recorder) writeKernel(k *db.Kernel) error {
	if len(r.pending) > 0 {
		// Only instances whose snapshots are written may be named.
		c := *k
		c.Instances = map[string]*db.Instance{}
		for dh, inst := range k.Instances {
			if r.pending[inst.Prologue] == nil && r.pending[inst.Epilogue] == nil {
				c.Instances[dh] = inst
			}
		}
		k = &c
	}
	data, err := db.MarshalKernel(k)
	if err != nil {
		return err
	}
	return db.ReplaceFile(filepath.Join(r.cfg.DB, db.KernelFileName(k.StaticHash)), data)
}

// snapshot copies every live arena block, the kernel module's device
// globals and the argument bytes.
// set picks the buffers (0: prologue, 1: epilogue), reused from one
// instance to the next: first touches of fresh host pages, not the
// transfer, dominate the copy time of large snapshots.
func (r *Recorder) snapshot(l *Launch, set int) (*db.Snapshot, error) {
	start := time.Now()
	defer func() { r.status.CopySeconds += time.Since(start).Seconds() }()
	s := &db.Snapshot{Args: l.Args}
	if r.arena != nil {
		for i, b := range r.arena.Live() {
			data := r.buffer(set, i, b.Size)
			if err := r.proc.CopyToHost(data, b.Addr); err != nil {
				return nil, fmt.Errorf("copy allocation %#x (%d bytes): %w", b.Addr, b.Size, err)
			}
			s.Blobs = append(s.Blobs, db.Blob{Addr: b.Addr, Size: b.Size, Data: data})
		}
	}
	if err := r.copyGlobals(s, l); err != nil {
		return nil, err
	}
	return s, nil
}

// maxReusedBuffers bounds the snapshot buffers kept between instances; an
// application with more live memory than this gets fresh buffers each time,
// so recording does not pin twice its device memory in host memory for good.
const maxReusedBuffers = 8 << 30

// buffer returns buffer i of a set with length n, reusing its memory.
func (r *Recorder) buffer(set, i int, n uint64) []byte {
	bufs := &r.buffers[set]
	for len(*bufs) <= i {
		*bufs = append(*bufs, nil)
	}
	if uint64(cap((*bufs)[i])) < n {
		r.bufferBytes += n - uint64(cap((*bufs)[i]))
		(*bufs)[i] = make([]byte, n)
	}
	b := (*bufs)[i][:n]
	if r.bufferBytes > maxReusedBuffers {
		r.buffers = [2][][]byte{}
		r.bufferBytes = 0
	}
	return b
}

// Drain waits until every snapshot the background writer holds is written
// and its instance recorded: before the application resets the device.
func (r *Recorder) Drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writer != nil {
		r.writer.wait()
		r.collect()
	}
}

// Finish writes what changed since the last instance (occurrence counts)
// and marks the status finished. It is called when the application exits.
func (r *Recorder) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	Trace("runtime", "finish")
	if r.writer != nil {
		r.writer.wait()
		r.collect()
		Trace("runtime", "background snapshots written")
	}
	for _, ks := range r.kernels {
		if ks.meta == nil || !ks.dirty {
			continue
		}
		if err := r.writeKernel(ks.meta); err != nil {
			r.reportError(fmt.Sprintf("kernel %s: write occurrence counts: %v", ks.meta.DemangledName, err))
			continue
		}
		ks.dirty = false
	}
	r.status.Finished = true
	r.writeStatus()
}
