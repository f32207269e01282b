package record

import (
	"fmt"
	"os"
	"sync"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/arena"
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

// GraphCapture is a Process that can tell a launch made on a stream being
// captured into a CUDA graph: it does not run now, and recording it would
// synchronize the device inside the capture, which the driver refuses and
// which invalidates the capture. Such a launch runs as the application made
// it, unrecorded. It is asked only of a launch about to be recorded. (The
// shim asks in C before it shows a launch to the library.)
type GraphCapture interface {
	Captured(l *Launch) bool
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
	managed   db.ManagedList // the managed allocations and __managed__ variables seen so far
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

	// Recording through the driver (driver.go): the allocations tracked,
	// by address, and how many were made (allocMu guards both); the launch
	// between BeginLaunch and EndLaunch, and its token.
	throughDriver bool
	allocMu       sync.Mutex
	external      map[uint64]uint64
	allocations   int64
	trackedBytes  uint64 // held by the tracked allocations now
	trackedPeak   uint64 // and at most
	inFlight      *inFlight
	inFlightToken int
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
	if r.throughDriver {
		r.allocMu.Lock()
		r.status.Allocations = r.allocations
		r.status.ArenaPeak = r.trackedPeak
		r.allocMu.Unlock()
	}
	if err := WriteStatus(r.cfg.DB, &r.status); err != nil {
		fmt.Fprintln(r.cfg.Log, "mneme record: status file:", err)
	}
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
