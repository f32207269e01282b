// Package inject records applications that were not built with mneme's
// compiler wrapper (nvcc builds, with the CUDA runtime linked statically or
// not). The in-application library cmd/mneme-inject, which the CUDA driver
// loads through CUDA_INJECTION64_PATH, sees the driver calls through CUPTI's
// callbacks and hands them to a Recorder: the module images the application
// loads, its allocations (address, size, lifetime) and each launch before
// and after it runs. The Recorder selects launches with the same settings as
// `mneme record` (record.Config: --kernels, --skip, --max-recordings),
// snapshots every live allocation and the argument bytes before and after a
// selected launch, and writes the recording database's usual files, the
// kernels marked as carrying machine code only (db.CodeMachine): their
// DeviceCode is the image the application loaded, there is no IR.
//
// Allocations stay where the driver put them; a replay maps them back at
// the same addresses (replay reserves each recorded range with the VMM
// API), so pointers stored in device memory stay valid without an arena at
// record time.
package inject

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/nvbin"
	"github.com/mneme-gpu/mneme/record"
)

// Device is the application's GPU as the recorder needs it; the
// in-application library implements it over the driver, tests with a fake.
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

// Launch is one kernel launch as the driver saw it.
type Launch struct {
	Kernel string // mangled name
	Image  int    // the image (Recorder.Image) the kernel came from, -1 if unknown
	Grid   mneme.Dim3
	Block  mneme.Dim3
	Shared uint32
	Args   [][]byte // each parameter's bytes, sized by the kernel's parameter layout
}

// AddressAlign is the alignment of the range a kernel file declares around
// its allocations (VAddr, VASize): the driver honours a fixed-address
// reservation at a 64 MiB boundary, not inside one (measured on an H200,
// driver 580: a request for 0x7f3552800000 was given 0x7f3554000000).
const AddressAlign = 64 << 20

// Recorder records one application run.
type Recorder struct {
	cfg record.Config
	dev Device

	mu      sync.Mutex
	allocs  map[uint64]uint64 // live allocations: address -> size
	managed db.ManagedList    // the managed allocations and __managed__ variables seen so far
	// managedDirty: managed lists allocations not yet written; writeStatus
	// writes them (once per status, not once per allocation).
	managedDirty bool
	images       [][]byte       // module images by id
	written      map[int]string // image id -> DeviceCode file name
	kernels      map[kernelKey]*kernelState
	pending      map[int]*pendingLaunch
	nextTok      int
	match        int // launches of selected kernels so far (--skip)
	status       record.Status
	device       *db.DeviceInfo
	// activity counts every kernel that ran, by mangled name (stats.go).
	activity map[string]*activityKernel
	// store holds the chunks this recording's snapshot files store, by
	// content (contentstore.go).
	store contentStore

	// Toolchain names the versions the recording is made with (set by the
	// caller before launches begin).
	Toolchain db.Toolchain
}

type kernelKey struct {
	name  string
	image int
}

type kernelState struct {
	selected bool
	broken   bool
	meta     *db.Kernel
	// globals are the device variables of the kernel's module, snapshotted
	// with its allocations (replay restores them by name).
	globals []db.Global
}

type pendingLaunch struct {
	ks       *kernelState
	l        *Launch
	dh       string
	prologue *db.Snapshot
}

// New prepares a recording into cfg.DB.
func New(cfg record.Config, dev Device) (*Recorder, error) {
	if err := os.MkdirAll(cfg.DB, 0o755); err != nil {
		return nil, fmt.Errorf("recording database %s: %w", cfg.DB, err)
	}
	r := &Recorder{cfg: cfg, dev: dev, allocs: map[uint64]uint64{}, written: map[int]string{},
		kernels: map[kernelKey]*kernelState{}, pending: map[int]*pendingLaunch{}}
	r.status.PID = os.Getpid()
	if err := record.WriteStatus(cfg.DB, &r.status); err != nil {
		return nil, err
	}
	return r, nil
}

// Alloc notes a device allocation the application made.
func (r *Recorder) Alloc(addr, size uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.Allocations++
	if size > 0 {
		r.allocs[addr] = size
	}
}

// Managed counts a managed allocation of size bytes at addr: it is not
// replayable at its address (its pages move between host and device), and is
// left out of snapshots. It is listed in the database (db.ManagedFileName),
// so replay refuses the launches whose arguments point into it.
func (r *Recorder) Managed(addr, size uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.ManagedAllocations++
	r.managed.Add(addr, size)
	r.managedDirty = true
}

// Free notes that the application freed an allocation.
func (r *Recorder) Free(addr uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.allocs, addr)
}

// ContextEnds forgets every allocation: the application destroyed or reset
// its context, which frees them.
func (r *Recorder) ContextEnds() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.allocs)
}

// Image keeps a module image the application loads (a fat binary, a cubin
// or PTX text) and returns its id for Launch.Image.
func (r *Recorder) Image(data []byte) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images = append(r.images, append([]byte(nil), data...))
	r.status.Fatbinaries++
	r.writeStatus()
	return len(r.images) - 1
}

// ReportError logs msg to the application's stderr and the status file.
func (r *Recorder) ReportError(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reportError(msg)
}

func (r *Recorder) reportError(msg string) {
	fmt.Fprintln(r.cfg.Log, "mneme record:", msg)
	r.status.Errors = append(r.status.Errors, msg)
	r.writeStatus()
}

func (r *Recorder) writeStatus() {
	if r.managedDirty {
		r.managedDirty = false
		if err := db.WriteManaged(r.cfg.DB, &r.managed); err != nil {
			r.status.Errors = append(r.status.Errors, fmt.Sprintf("listing the managed allocations: %v", err))
		}
	}
	if err := record.WriteStatus(r.cfg.DB, &r.status); err != nil {
		fmt.Fprintln(r.cfg.Log, "mneme record: status file:", err)
	}
}

// Wants reports whether a kernel's launches are to be shown to LaunchBegin
// at all; the caller asks once per kernel and counts the others' launches
// with Forwarded.
func (r *Recorder) Wants(kernel string) bool {
	if r.cfg.Selects(kernel, kernel) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.KernelsRegistered++
	r.writeStatus()
	return false
}

// Forwarded counts n launches the caller did not show (kernels not wanted).
func (r *Recorder) Forwarded(n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.LaunchesSeen += int64(n)
}

// LaunchBegin is shown a launch before the driver performs it. A non-zero
// token means the launch is being recorded: its prologue was taken, and
// LaunchEnd(token) must follow once the driver has performed it.
func (r *Recorder) LaunchBegin(l *Launch) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.LaunchesSeen++
	key := kernelKey{l.Kernel, l.Image}
	ks := r.kernels[key]
	if ks == nil {
		ks = &kernelState{selected: r.cfg.Selects(l.Kernel, l.Kernel)}
		r.kernels[key] = ks
		r.status.KernelsRegistered++
	}
	if !ks.selected || ks.broken {
		return 0
	}
	r.status.LaunchesSelected++
	r.match++
	if r.match <= r.cfg.Skip {
		return 0
	}
	dh := db.DynamicHash(l.Grid, l.Block, l.Shared, l.Args)
	if ks.meta != nil {
		if inst := ks.meta.Instances[dh]; inst != nil {
			inst.Occurrences++
			return 0
		}
		if r.cfg.MaxRecordings > 0 && len(ks.meta.Instances) >= r.cfg.MaxRecordings {
			return 0
		}
	}
	for _, p := range r.pending {
		if p.ks == ks && p.dh == dh {
			return 0 // the same instance on another thread, not yet finished
		}
	}
	if ks.meta == nil {
		meta, err := r.describe(l)
		if err != nil {
			ks.broken = true
			r.reportError(fmt.Sprintf("kernel %s is not recorded: %v", l.Kernel, err))
			return 0
		}
		ks.meta = meta
		ks.globals = r.variables(l.Image)
	}
	start := time.Now()
	pro, err := r.snapshot(l.Args, ks.globals)
	r.status.SnapshotSeconds += time.Since(start).Seconds()
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: prologue: %v", l.Kernel, err))
		return 0
	}
	r.nextTok++
	r.pending[r.nextTok] = &pendingLaunch{ks: ks, l: l, dh: dh, prologue: pro}
	return r.nextTok
}

// LaunchEnd completes a recorded launch: launchErr is what the driver
// returned for it.
func (r *Recorder) LaunchEnd(token int, launchErr error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending[token]
	if p == nil {
		return
	}
	delete(r.pending, token)
	if launchErr != nil {
		r.reportError(fmt.Sprintf("kernel %s: the launch failed (%v); the instance is not recorded", p.l.Kernel, launchErr))
		return
	}
	start := time.Now()
	epi, err := r.snapshot(p.l.Args, p.ks.globals)
	if err == nil {
		err = r.writeInstance(p, epi)
	}
	r.status.SnapshotSeconds += time.Since(start).Seconds()
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: %v", p.l.Kernel, err))
	}
}

// snapshot copies every live allocation and the module's device variables
// after the device is idle.
func (r *Recorder) snapshot(args [][]byte, globals []db.Global) (*db.Snapshot, error) {
	if err := r.dev.Synchronize(); err != nil {
		return nil, fmt.Errorf("synchronizing the device: %w", err)
	}
	s := &db.Snapshot{Args: args}
	for _, g := range globals {
		b := make([]byte, g.Size)
		if err := r.dev.CopyToHost(b, g.Addr); err != nil {
			return nil, fmt.Errorf("copying device variable %s (%d bytes): %w", g.Name, g.Size, err)
		}
		s.Globals = append(s.Globals, db.Global{Name: g.Name, Addr: g.Addr, Size: g.Size, Data: b})
	}
	addrs := make([]uint64, 0, len(r.allocs))
	for a := range r.allocs {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	for _, a := range addrs {
		b := make([]byte, r.allocs[a])
		start := time.Now()
		if err := r.dev.CopyToHost(b, a); err != nil {
			return nil, fmt.Errorf("copying the allocation at 0x%x (%d bytes): %w", a, len(b), err)
		}
		r.status.CopySeconds += time.Since(start).Seconds()
		r.status.CopiedBytes += int64(len(b))
		s.Blobs = append(s.Blobs, db.Blob{Addr: a, Size: uint64(len(b)), Data: b})
	}
	return s, nil
}

// describe builds a kernel's database entry from its first recorded launch.
func (r *Recorder) describe(l *Launch) (*db.Kernel, error) {
	if l.Image < 0 || l.Image >= len(r.images) {
		return nil, errors.New("the module it came from was not seen loading (loaded before the recorder started, or from a file)")
	}
	if r.device == nil {
		dev, err := r.dev.Describe()
		if err != nil {
			return nil, fmt.Errorf("describe the GPU: %w", err)
		}
		r.device = &dev
	}
	image := r.images[l.Image]
	code, err := r.saveImage(l.Image)
	if err != nil {
		return nil, err
	}
	sh := db.StaticHash(l.Kernel, image)
	k := &db.Kernel{
		StaticHash:    sh,
		KernelName:    l.Kernel,
		DemangledName: l.Kernel,
		Modules:       []string{},
		Code:          db.CodeMachine,
		DeviceCode:    code,
		Device:        *r.device,
		Toolchain:     r.Toolchain,
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

// variables finds the device variables of the module loaded from an image
// and where they live: the cubins of the image for the recording's GPU (a
// fat binary's, or the image itself) name them; the driver places them.
// A variable the driver does not find is left out (the code the GPU runs
// was compiled from PTX, say), as is everything of an image that is PTX.
// A __managed__ variable is listed in the database's managed list instead
// of snapshotted. r.mu is held.
func (r *Recorder) variables(image int) []db.Global {
	var arch int
	if r.device != nil {
		fmt.Sscanf(r.device.Arch, "sm_%d", &arch)
	}
	var out []db.Global
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
				if r.managed.AddVariable(v.Name, v.Size, addr) {
					r.managedDirty = true
				}
				continue
			}
			if err != nil || size == 0 {
				continue
			}
			out = append(out, db.Global{Name: v.Name, Addr: addr, Size: size})
		}
	}
	return out
}

// saveImage writes a module image into the database once.
func (r *Recorder) saveImage(id int) (string, error) {
	if name, ok := r.written[id]; ok {
		return name, nil
	}
	image := r.images[id]
	if _, err := nvbin.ParseFatbin(image); errors.Is(err, nvbin.ErrNotFatbin) {
		// A cubin or PTX loaded directly: kept as is, the driver loads
		// either (the file name says fatbin for every device-code image).
	} else if err != nil {
		return "", fmt.Errorf("its module image: %w", err)
	}
	name := db.DeviceCodeFileName(image)
	if err := db.ReplaceFile(filepath.Join(r.cfg.DB, name), image); err != nil {
		return "", err
	}
	r.written[id] = name
	return name, nil
}

// writeInstance writes both snapshots and the kernel file.
func (r *Recorder) writeInstance(p *pendingLaunch, epi *db.Snapshot) error {
	k, l := p.ks.meta, p.l
	opts := db.SnapshotOptions{Compress: r.cfg.Compress, Fast: r.cfg.Compress}
	proName, epiName := db.PrologueFileName(k.StaticHash, p.dh), db.EpilogueFileName(k.StaticHash, p.dh)
	lo, hi := span(p.prologue, epi)
	if err := r.widen(k, lo, hi); err != nil {
		return err
	}
	// Chunks an earlier file of this recording stores (the prologue's, for
	// an epilogue whose launch left most memory as it was) are referenced,
	// not written again.
	write := func(name string, s *db.Snapshot) (int64, error) {
		cs := db.DefaultChunkSize
		if opts.ChunkSize > 0 {
			cs = opts.ChunkSize
		}
		chunked, counts, commit := r.store.chunked(s, name, cs)
		n, err := db.WriteSnapshot(filepath.Join(r.cfg.DB, name), chunked, opts)
		if err != nil {
			return 0, err
		}
		commit()
		r.status.ChunksCopied += counts.stored
		r.status.ChunksZero += counts.zero
		r.status.ChunksReferenced += counts.referenced
		return n, nil
	}
	proBytes, err := write(proName, p.prologue)
	if err != nil {
		return fmt.Errorf("prologue: %w", err)
	}
	epiBytes, err := write(epiName, epi)
	if err != nil {
		return fmt.Errorf("epilogue: %w", err)
	}
	var hex []string
	for _, a := range l.Args {
		hex = append(hex, fmt.Sprintf("%x", a))
	}
	if hex == nil {
		hex = []string{}
	}
	k.Instances[p.dh] = &db.Instance{
		DynamicHash: p.dh, Prologue: proName, Epilogue: epiName,
		BlockDims: l.Block, GridDims: l.Grid, SharedMem: l.Shared, Args: hex, Occurrences: 1,
		PrologueBytes: uint64(proBytes), EpilogueBytes: uint64(epiBytes),
		RecordedAt: time.Now().UTC().Format(time.RFC3339),
	}
	for _, s := range []*db.Snapshot{p.prologue, epi} {
		r.status.SnapshotRawBytes += int64(s.RawSize())
	}
	r.status.SnapshotBytes += proBytes + epiBytes
	if len(k.Instances) == 1 {
		r.status.KernelsRecorded++
	}
	r.status.InstancesRecorded++
	if err := db.WriteKernel(r.cfg.DB, k); err != nil {
		return err
	}
	r.writeStatus()
	return nil
}

// span is the address range the snapshots' allocations cover.
func span(ss ...*db.Snapshot) (lo, hi uint64) {
	lo = ^uint64(0)
	for _, s := range ss {
		for _, b := range s.Blobs {
			lo, hi = min(lo, b.Addr), max(hi, b.Addr+b.Size)
		}
	}
	if hi == 0 {
		return 0, 0
	}
	return lo, hi
}

// widen makes the kernel's declared range (VAddr, VASize) cover [lo, hi),
// aligned to AddressAlign.
func (r *Recorder) widen(k *db.Kernel, lo, hi uint64) error {
	if hi == 0 {
		if k.VAddr == "" {
			k.VAddr, k.VASize = db.FormatVAddr(AddressAlign), AddressAlign
		}
		return nil
	}
	lo = lo / AddressAlign * AddressAlign
	hi = (hi + AddressAlign - 1) / AddressAlign * AddressAlign
	if k.VAddr != "" && k.VASize > 0 {
		base, err := k.ParseVAddr()
		if err != nil {
			return err
		}
		lo, hi = min(lo, base), max(hi, base+k.VASize)
	}
	k.VAddr, k.VASize = db.FormatVAddr(lo), hi-lo
	return nil
}

// Finish marks the recording complete (the application is exiting) and
// reports launches begun and never ended.
func (r *Recorder) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.pending); n > 0 {
		r.status.Errors = append(r.status.Errors, fmt.Sprintf("%d recorded launch(es) never completed", n))
	}
	r.status.Finished = true
	r.writeStatus()
}

// Status returns a copy of the current status.
func (r *Recorder) Status() record.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}
