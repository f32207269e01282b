package main

/*
#cgo CFLAGS: -O2 -Wall -I${SRCDIR}/shim
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/devicecopy"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = ""

// cudaError is a CUDA runtime error code returned by a real call; its code
// goes back to the application unchanged.
type cudaError struct {
	call string
	code int
}

func (e *cudaError) Error() string {
	return fmt.Sprintf("%s: %s (%d)", e.call, C.GoString(C.rth_error_string(C.cudaError_t(e.code))), e.code)
}

func check(call string, e C.cudaError_t) error {
	if e == 0 {
		return nil
	}
	return &cudaError{call: call, code: int(e)}
}

// nativeLaunch is what the shim passed for one launch.
type nativeLaunch struct {
	fn     unsafe.Pointer
	args   *unsafe.Pointer
	stream C.cudaStream_t
	ptsz   C.int
	index  int // in the shim's kernel table
}

// process implements record.Process over the shim's host API and the
// driver API (cuda package).
type process struct {
	dev cuda.Device
	ctx *cuda.Context

	irOnce  sync.Once
	irErr   error
	entries []appabi.IREntry

	globals map[int][]record.Global // module -> resolved globals

	copier *devicecopy.Reader // fingerprints and staged copies, made on first use
	// keepOnDevice: device shadows stay on the device (MNEME_SHADOW=device).
	keepOnDevice bool
}

// The process reads device memory through fingerprints and pinned staging
// (record.DeviceReader) unless MNEME_FULL_COPIES=1.
var _ record.DeviceReader = (*process)(nil)

func (p *process) reader() *devicecopy.Reader {
	if p.copier == nil {
		p.copier = devicecopy.New(stagedRunBytes)
		p.copier.SetThrottle(shimThrottle{})
		p.copier.KeepOnDevice(p.keepOnDevice)
	}
	return p.copier
}

// shimThrottle is the shim's launch throttle (devicecopy.Throttle).
type shimThrottle struct{}

func (shimThrottle) On(events []*cuda.Event, every int) error {
	if len(events) != C.MNEME_THROTTLE_EVENTS {
		return fmt.Errorf("the shim's launch throttle takes %d events, not %d", C.MNEME_THROTTLE_EVENTS, len(events))
	}
	ep, err := cuda.EventEntries()
	if err != nil {
		return err
	}
	entries := [4]C.uintptr_t{C.uintptr_t(ep.EventRecord), C.uintptr_t(ep.EventSynchronize), C.uintptr_t(ep.StreamIsCapturing), C.uintptr_t(ep.ExchangeCaptureMode)}
	var handles [C.MNEME_THROTTLE_EVENTS]C.uintptr_t
	for i, ev := range events {
		handles[i] = C.uintptr_t(ev.Handle())
	}
	if C.rth_throttle_on(&entries[0], &handles[0], C.int(len(events)), C.unsigned(every)) == 0 {
		return fmt.Errorf("the shim refused the launch throttle (every %d launches)", every)
	}
	record.Trace("runtime", "launch throttle on")
	return nil
}

func (shimThrottle) Off() {
	C.rth_throttle_off()
	record.Trace("runtime", "launch throttle off")
}

// stagedRunBytes is the recorder's largest staged copy: a run of chunks.
const stagedRunBytes = record.StagedRunBytes

// resetReader drops the reader's device resources before a device reset
// takes them; the next snapshot makes new ones.
func (p *process) resetReader() {
	if p.copier != nil {
		p.copier.Close()
		p.copier = nil
	}
}

func (p *process) Fingerprints(rs []fingerprint.Range) ([]fingerprint.Sum, error) {
	return p.reader().Fingerprints(rs)
}

// PrepareFingerprints loads the fingerprint kernel in the background
// (record.FingerprintPreparer).
func (p *process) PrepareFingerprints() { p.reader().Prepare() }

func (p *process) Stage(runs []fingerprint.Range) (record.Staging, error) {
	return p.reader().Stage(runs)
}

func (p *process) HostShadow(runs []fingerprint.Range) (record.Shadow, error) {
	return p.reader().HostShadow(runs)
}

func (p *process) Shadow(runs []fingerprint.Range) (record.Shadow, error) {
	return p.reader().Shadow(runs)
}

func newProcess() (*process, error) {
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	var ord C.int
	if err := check("cudaGetDevice", C.rth_get_device(&ord)); err != nil {
		return nil, err
	}
	dev, err := cuda.GetDevice(int(ord))
	if err != nil {
		return nil, err
	}
	// The shim made the CUDA runtime create its primary context on this
	// thread before calling us; keep it to make it current on other threads.
	ctx, err := cuda.CurrentContext()
	if err != nil {
		return nil, err
	}
	return &process{dev: dev, ctx: ctx, globals: map[int][]record.Global{}}, nil
}

// enter makes the application's context current on the calling thread,
// which may be another application thread than the one that initialized us.
func (p *process) enter() error { return p.ctx.SetCurrent() }

func (p *process) Synchronize() error {
	return check("cudaDeviceSynchronize", C.rth_device_synchronize())
}

func (p *process) CopyToHost(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	return check("cudaMemcpy", C.rth_memcpy_dtoh(unsafe.Pointer(&dst[0]), C.uintptr_t(src), C.size_t(len(dst))))
}

// Launch performs a launch the recorder records, timed for the launch
// statistics (the recorder waits for it right after, for the snapshot).
func (p *process) Launch(l *record.Launch) error {
	n := l.Native.(*nativeLaunch)
	return timeLaunch(n, l, func() error {
		return check("cudaLaunchKernel", C.rth_launch(n.fn,
			C.unsigned(l.Grid.X), C.unsigned(l.Grid.Y), C.unsigned(l.Grid.Z),
			C.unsigned(l.Block.X), C.unsigned(l.Block.Y), C.unsigned(l.Block.Z),
			(*unsafe.Pointer)(n.args), C.size_t(l.Shared), n.stream, n.ptsz))
	})
}

// DeviceCode copies the fat binary image that registered a module.
func (p *process) DeviceCode(module int) ([]byte, error) {
	var data unsafe.Pointer
	var size C.size_t
	if C.rth_fatbin_image(C.int(module), &data, &size) == 0 {
		return nil, fmt.Errorf("module %d: no fat binary image the shim recognizes", module)
	}
	if size > 1<<30 {
		return nil, fmt.Errorf("module %d: fat binary of %d bytes is implausibly large", module, size)
	}
	return C.GoBytes(data, C.int(size)), nil
}

// Globals resolves the device addresses of a module's registered globals
// once (they do not move while the module is loaded).
func (p *process) Globals(module int) ([]record.Global, error) {
	if g, ok := p.globals[module]; ok {
		return g, nil
	}
	var out []record.Global
	n := int(C.rth_var_count())
	for i := 0; i < n; i++ {
		var v C.struct_mneme_var_reg
		if C.rth_var_at(C.int(i), &v) == 0 || int(v.module) != module {
			continue
		}
		g := record.Global{Name: C.GoString(v.device_name), Size: uint64(v.size), Managed: v.managed != 0, Constant: v.constant != 0}
		if g.Managed && v.host_var != nil {
			// __cudaRegisterManagedVar's host_var_ptr_addr: the runtime
			// points it at the variable's managed storage once the module
			// is loaded (0 before; the address is then unknown).
			g.Addr = uint64(*(*uintptr)(v.host_var))
		}
		if !g.Managed {
			var addr C.uintptr_t
			var size C.size_t
			if err := check("cudaGetSymbolAddress", C.rth_symbol_address(v.host_var, &addr, &size)); err != nil {
				return nil, fmt.Errorf("global %s: %w", g.Name, err)
			}
			g.Addr, g.Size = uint64(addr), uint64(size)
		}
		out = append(out, g)
	}
	p.globals[module] = out
	return out, nil
}

// irEntries decodes the executable's embedded IR section once. An error
// comes back only when nothing could be decoded.
func (p *process) irEntries() ([]appabi.IREntry, error) {
	p.irOnce.Do(func() {
		start, size := C.rth_ir_start(), C.rth_ir_size()
		if start == nil || size == 0 {
			p.irErr = fmt.Errorf("the application has no embedded IR (section %s): build it with the compilers of `mneme config cxx`", appabi.IRSection)
			return
		}
		sec := C.GoBytes(unsafe.Pointer(start), C.int(size))
		p.entries, p.irErr = appabi.DecodeIRSection(sec)
	})
	if p.irErr != nil && len(p.entries) == 0 {
		return nil, p.irErr
	}
	return p.entries, nil
}

// KernelIR returns the embedded translation unit whose bitcode names the
// kernel. Bitcode keeps symbol names verbatim in its string table, so a
// byte search finds the defining unit without loading LLVM into the
// application; `mneme record` extracts and analyzes the kernel afterwards
// (record.Finalize) and falls back to the other units if this one only
// declares it.
func (p *process) KernelIR(mangled string) (*record.KernelIR, error) {
	entries, err := p.irEntries()
	if err != nil {
		return nil, err
	}
	name := []byte(mangled)
	for _, e := range entries {
		if bytes.Contains(e.Bitcode, name) {
			return &record.KernelIR{Bitcode: e.Bitcode, Flags: e.Flags}, nil
		}
	}
	return nil, fmt.Errorf("no embedded IR names it (%d translation units searched); was its source compiled with `mneme config cxx`?", len(p.entries))
}

func (p *process) Device() (db.DeviceInfo, error) {
	props, err := p.dev.Props()
	if err != nil {
		return db.DeviceInfo{}, err
	}
	drv, _ := cuda.DriverVersion()
	return db.DeviceInfo{
		Name:              props.Name,
		ComputeCapability: fmt.Sprintf("%d.%d", props.Major, props.Minor),
		Arch:              props.Arch(),
		SMCount:           props.SMCount,
		TotalMem:          props.TotalMem,
		DriverVersion:     drv,
	}, nil
}

func (p *process) Toolchain() db.Toolchain {
	// The LLVM version is filled in by `mneme record`, which analyzes the IR.
	t := db.Toolchain{Mneme: mnemeVersion()}
	var drv, rt C.int
	C.rth_driver_version(&drv)
	C.rth_runtime_version(&rt)
	t.CUDA = fmt.Sprintf("runtime %s, driver %s", cudaVersion(int(rt)), cudaVersion(int(drv)))
	return t
}

func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

func mnemeVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// vmm is the arena's backend: the driver's virtual-memory management calls.
type vmm struct{ p *process }

func (v vmm) Granularity() (uint64, error) { return cuda.AllocationGranularity(v.p.dev) }

func (v vmm) Reserve(base, size uint64) error {
	_, err := cuda.AddressReserve(size, base)
	return err
}

// Map creates physical memory, maps it and grants the device access. The
// handle is released once mapped: the mapping keeps the memory alive.
func (v vmm) Map(addr, size uint64) error {
	h, err := cuda.MemCreate(v.p.dev, size)
	if err != nil {
		return err
	}
	if err := cuda.MemMap(addr, size, h); err != nil {
		h.Release()
		return err
	}
	if err := cuda.MemSetAccess(addr, size, v.p.dev); err != nil {
		cuda.MemUnmap(addr, size)
		h.Release()
		return err
	}
	return h.Release()
}
