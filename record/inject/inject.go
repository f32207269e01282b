// Package inject records applications that were not built with mneme's
// compiler wrapper (nvcc builds, with the CUDA runtime linked statically or
// not). The in-application library cmd/mneme-inject, which the CUDA driver
// loads through CUDA_INJECTION64_PATH, sees the driver calls through CUPTI's
// callbacks and hands them to a Recorder: the module images the application
// loads, its allocations (address, size, lifetime) and each launch before
// and after it runs. The Recorder selects launches with the same settings as
// `mneme record` (record.Config: --kernels, --skip, --max-recordings) and
// snapshots them as the wrapper's recorder does, because it is that
// recorder (record.NewThroughDriver): with a Device that reads memory the
// fast way (record.DeviceReader: GPU fingerprints, the content store,
// shadow copies written in the background), a snapshot copies only the
// chunks no earlier snapshot holds. It writes the recording database's
// usual files, the kernels marked as carrying machine code only
// (db.CodeMachine): their DeviceCode is the image the application loaded,
// there is no IR.
//
// Allocations stay where the driver put them; a replay maps them back at
// the same addresses (replay reserves each recorded range with the VMM
// API), so pointers stored in device memory stay valid without an arena at
// record time.
package inject

import (
	"errors"
	"fmt"
	"sync"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/nvbin"
	"github.com/mneme-gpu/mneme/record"
)

// Device is the application's GPU as the recorder needs it; the
// in-application library implements it over the driver, tests with a fake.
// A Device that is also a record.DeviceReader has snapshots taken from
// fingerprints; its driver calls on threads of its own (the background
// writer's) must not be reported back as the application's.
type Device interface {
	// Synchronize waits for all work of the application's context.
	Synchronize() error
	// CopyToHost copies len(dst) bytes from device address src.
	CopyToHost(dst []byte, src uint64) error
	// Describe names the GPU.
	Describe() (db.DeviceInfo, error)
	// GlobalAddress finds a device variable of the module loaded from an
	// image (Recorder.Image): its address and size in the application.
	GlobalAddress(image int, name string) (addr, size uint64, err error)
}

// StreamCapture is a Device that can tell a stream being captured into a
// CUDA graph (record.GraphCapture): a launch on it is not recorded.
type StreamCapture interface {
	Capturing(stream uintptr) bool
}

// Launch is one kernel launch as the driver saw it.
type Launch struct {
	// Context is the CUDA context the launch was made in (see Recorder.Alloc).
	Context uintptr
	// Stream is its CUstream, as the driver names it (for StreamCapture).
	Stream uintptr
	Kernel string // mangled name
	Image  int    // the image (Recorder.Image) the kernel came from, -1 if unknown
	Grid   mneme.Dim3
	Block  mneme.Dim3
	Shared uint32
	Args   [][]byte // each parameter's bytes, sized by the kernel's parameter layout
}

// AddressAlign is the alignment of the range a kernel file declares around
// its allocations (record.AddressAlign).
const AddressAlign = record.AddressAlign

// Recorder records one application run: the module images it loads, for
// the recorder proper (record.Recorder), which does the rest.
type Recorder struct {
	rec *record.Recorder
	dev Device
	cfg record.Config

	mu sync.Mutex
	// ctx is the one CUDA context recorded: the first an allocation or a
	// launch came from (haveCtx). otherCtx says a launch of another was
	// seen and reported.
	ctx               uintptr
	haveCtx, otherCtx bool
	images            [][]byte // module images by id
	// globals are each image's device variables, resolved once.
	globals map[int][]record.Global
	device  *db.DeviceInfo
	// activity counts every kernel that ran, by mangled name (stats.go).
	activity map[string]*activityKernel

	// Toolchain names the versions the recording is made with (set by the
	// caller before launches begin).
	Toolchain db.Toolchain
}

// New prepares a recording into cfg.DB.
func New(cfg record.Config, dev Device) (*Recorder, error) {
	r := &Recorder{dev: dev, cfg: cfg, globals: map[int][]record.Global{}}
	var p record.Process = &process{r}
	if dr, ok := dev.(record.DeviceReader); ok {
		p = &readingProcess{&process{r}, dr}
	}
	rec, err := record.NewThroughDriver(cfg, p)
	if err != nil {
		return nil, err
	}
	r.rec = rec
	return r, nil
}

// Alloc notes a device allocation the application made in context ctx.
// One context is recorded, the first seen: a process that drives several
// GPUs has one context each, and a snapshot read through the recorded
// context (the fingerprint kernel runs there) must not touch another
// device's memory, which replay could not restore on one GPU anyway.
func (r *Recorder) Alloc(ctx uintptr, addr, size uint64) {
	if r.recorded(ctx) {
		r.rec.TrackAllocation(addr, size)
	}
}

// recorded reports whether ctx is the context recorded, taking the first
// one asked about. A call the driver named no context for (0) is taken as
// the recorded context's.
func (r *Recorder) recorded(ctx uintptr) bool {
	if ctx == 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.haveCtx {
		r.ctx, r.haveCtx = ctx, true
	}
	return ctx == r.ctx
}

// Managed counts a managed allocation of size bytes at addr: it is not
// replayable at its address (its pages move between host and device), and is
// left out of snapshots. It is listed in the database (db.ManagedFileName),
// so replay refuses the launches whose arguments point into it.
func (r *Recorder) Managed(addr, size uint64) { r.rec.Managed(addr, size) }

// Free notes that the application freed an allocation.
func (r *Recorder) Free(addr uint64) { r.rec.UntrackAllocation(addr) }

// ContextEnds forgets every allocation, once the snapshots being written
// are: the application destroys or resets its context, which frees them.
func (r *Recorder) ContextEnds() { r.rec.ContextEnds() }

// Drain waits for the snapshots being written in the background (their
// shadow copies live in the application's context).
func (r *Recorder) Drain() { r.rec.Drain() }

// Image keeps a module image the application loads (a fat binary, a cubin
// or PTX text) and returns its id for Launch.Image.
func (r *Recorder) Image(data []byte) int {
	r.mu.Lock()
	r.images = append(r.images, append([]byte(nil), data...))
	id := len(r.images) - 1
	r.mu.Unlock()
	r.rec.ModuleLoaded()
	return id
}

// ReportError logs msg to the application's stderr and the status file.
func (r *Recorder) ReportError(msg string) { r.rec.ReportError(msg) }

// Wants reports whether a kernel's launches are to be shown to LaunchBegin
// at all; the caller asks once per kernel and counts the others' launches
// with Forwarded.
func (r *Recorder) Wants(kernel string) bool {
	k := record.Kernel{Name: kernel, Demangled: kernel, Module: -1}
	if r.rec.Wants(k) {
		return true
	}
	r.rec.AddForwarded(k, 0) // seen: counted among the kernels
	return false
}

// Forwarded counts n launches the caller did not show (kernels not wanted).
func (r *Recorder) Forwarded(n uint64) { r.rec.AddForwardedLaunches(n) }

// LaunchBegin is shown a launch before the driver performs it. A non-zero
// token means the launch is being recorded: its prologue was taken, and
// LaunchEnd(token) must follow once the driver has performed it.
func (r *Recorder) LaunchBegin(l *Launch) int {
	if !r.recorded(l.Context) {
		r.mu.Lock()
		first := !r.otherCtx
		r.otherCtx = true
		r.mu.Unlock()
		if first {
			r.rec.ReportError(fmt.Sprintf("kernel %s: launches in a second CUDA context (another GPU) are not recorded: recording through the driver records the first context only", l.Kernel))
		}
		r.rec.AddForwardedLaunches(1)
		return 0
	}
	return r.rec.BeginLaunch(&record.Launch{
		Kernel: record.Kernel{Name: l.Kernel, Demangled: l.Kernel, Module: l.Image},
		Grid:   l.Grid, Block: l.Block, Shared: l.Shared, Args: l.Args,
		Native: l.Stream,
	})
}

// LaunchEnd completes a recorded launch: launchErr is what the driver
// returned for it.
func (r *Recorder) LaunchEnd(token int, launchErr error) { r.rec.EndLaunch(token, launchErr) }

// Finish marks the recording complete (the application is exiting), once
// the snapshots being written are.
func (r *Recorder) Finish() { r.rec.Finish() }

// Status returns a copy of the current status.
func (r *Recorder) Status() record.Status { return r.rec.Status() }

// process is the application as record.Recorder sees it through the
// driver: the driver performs its launches, its kernels have no IR.
type process struct{ r *Recorder }

// readingProcess is a process whose Device reads memory the fast way.
type readingProcess struct {
	*process
	record.DeviceReader
}

func (p *process) Synchronize() error                      { return p.r.dev.Synchronize() }
func (p *process) CopyToHost(dst []byte, src uint64) error { return p.r.dev.CopyToHost(dst, src) }
func (p *process) Toolchain() db.Toolchain                 { return p.r.Toolchain }

// Captured asks the Device whether the launch's stream (record.Launch's
// Native) is being captured into a graph.
func (p *process) Captured(l *record.Launch) bool {
	c, ok := p.r.dev.(StreamCapture)
	s, _ := l.Native.(uintptr)
	return ok && c.Capturing(s)
}

func (p *process) Launch(*record.Launch) error {
	return errors.New("the driver performs the launches of an application recorded through it")
}

func (p *process) KernelIR(string) (*record.KernelIR, error) {
	return nil, errors.New("no IR: the application was not built with mneme's compiler wrapper")
}

func (p *process) Device() (db.DeviceInfo, error) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	return p.r.describe()
}

// describe names the GPU, once. r.mu is held.
func (r *Recorder) describe() (db.DeviceInfo, error) {
	if r.device == nil {
		dev, err := r.dev.Describe()
		if err != nil {
			return db.DeviceInfo{}, err
		}
		r.device = &dev
	}
	return *r.device, nil
}

// DeviceCode is the image a kernel's module was loaded from: a fat binary
// that does not parse is refused, a cubin or PTX loaded directly is kept as
// is (the driver loads either; the file name says fatbin for every image).
func (p *process) DeviceCode(image int) ([]byte, error) {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if image < 0 || image >= len(r.images) {
		return nil, errors.New("the module it came from was not seen loading (loaded before the recorder started, or from a file)")
	}
	code := r.images[image]
	if _, err := nvbin.ParseFatbin(code); err != nil && !errors.Is(err, nvbin.ErrNotFatbin) {
		return nil, fmt.Errorf("its module image: %w", err)
	}
	return code, nil
}

// Globals are the device variables of the module loaded from an image and
// where they live: the cubins of the image for the recording's GPU (a fat
// binary's, or the image itself) name them; the driver places them. A
// variable the driver does not find is left out (the code the GPU runs was
// compiled from PTX, say), as is everything of an image that is PTX. A
// __managed__ variable is returned marked, for the managed list.
func (p *process) Globals(image int) ([]record.Global, error) {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if gs, ok := r.globals[image]; ok {
		return gs, nil
	}
	if image < 0 || image >= len(r.images) {
		return nil, nil
	}
	var arch int
	if dev, err := r.describe(); err == nil {
		fmt.Sscanf(dev.Arch, "sm_%d", &arch)
	}
	out := []record.Global{}
	seen := map[string]bool{}
	for _, b := range nvbin.Cubins(r.images[image], arch) {
		c, err := nvbin.ParseCubin(b)
		if err != nil {
			continue
		}
		for _, v := range c.Variables {
			if seen[v.Name] {
				continue
			}
			seen[v.Name] = true
			addr, size, err := r.dev.GlobalAddress(image, v.Name)
			if v.Managed {
				// In managed memory, which no snapshot holds: listed, so
				// that replay refuses what may read it.
				if err != nil {
					addr = 0
				}
				out = append(out, record.Global{Name: v.Name, Addr: addr, Size: v.Size, Managed: true})
				continue
			}
			if err != nil || size == 0 {
				continue
			}
			out = append(out, record.Global{Name: v.Name, Addr: addr, Size: size})
		}
	}
	r.globals[image] = out
	return out, nil
}
