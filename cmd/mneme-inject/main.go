// Command mneme-inject is built with -buildmode=c-shared into
// libmneme_inject.so, the library `mneme record` names in
// CUDA_INJECTION64_PATH to record an application that was not built with
// mneme's compiler wrapper (an nvcc build, with the CUDA runtime linked
// statically or not). The driver loads it inside cuInit and calls
// InitializeInjection (inject.c), which subscribes to CUPTI's callbacks on
// the driver API; the callbacks hand module loads, allocations and launches
// to the exported functions here, which drive package record/inject. This
// file is cgo glue only.
package main

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "inject.h"
*/
import "C"

import (
	"debug/elf"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/devicecopy"
	"github.com/mneme-gpu/mneme/record/fingerprint"
	"github.com/mneme-gpu/mneme/record/inject"
)

func main() {}

var (
	rec     *inject.Recorder
	device  *driverDevice
	startMu sync.Mutex
	// fatal is an error that stopped recording before it began (no CUPTI);
	// it is in the status file, where `mneme record` reads it.
	fatal string
)

// driverDevice is the application's GPU through the driver, in the context
// current on the calling thread (the application's: every call comes from
// inside one of its driver calls, whose callbacks the C half ignores for the
// calls made from there). It reads memory the fast way
// (record.DeviceReader) through a devicecopy.Reader made on first use, in
// that context, which it binds for the reader's own threads: the
// background writer's calls are reported as callbacks too, of which only
// the frees of its shadow copies concern the recorder, which ignores
// addresses it does not track.
type driverDevice struct {
	mu           sync.Mutex
	copier       *devicecopy.Reader
	keepOnDevice bool // device shadows stay on the device (MNEME_SHADOW=device)
}

var (
	_ record.DeviceReader  = (*driverDevice)(nil)
	_ inject.StreamCapture = (*driverDevice)(nil)
)

func (d *driverDevice) reader() (*devicecopy.Reader, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.copier == nil {
		ctx, err := cuda.CurrentContext()
		if err != nil {
			return nil, err
		}
		if err := ctx.SetCurrent(); err != nil {
			return nil, err
		}
		d.copier = devicecopy.New(record.StagedRunBytes)
		d.copier.KeepOnDevice(d.keepOnDevice)
		d.copier.SetThrottle(launchThrottle{})
	}
	return d.copier, nil
}

// launchThrottle is the C half's launch throttle (devicecopy.Throttle): on
// while device shadows are drained from the background writer's thread.
type launchThrottle struct{}

// The C half cycles through as many events as the reader makes (a
// negative array length fails the build otherwise).
var (
	_ [devicecopy.ThrottleEvents - C.MI_THROTTLE_EVENTS]struct{}
	_ [C.MI_THROTTLE_EVENTS - devicecopy.ThrottleEvents]struct{}
)

func (launchThrottle) On(events []*cuda.Event, every int) error {
	if len(events) != C.MI_THROTTLE_EVENTS {
		return fmt.Errorf("the launch throttle takes %d events, not %d", C.MI_THROTTLE_EVENTS, len(events))
	}
	var handles [C.MI_THROTTLE_EVENTS]C.uintptr_t
	for i, ev := range events {
		handles[i] = C.uintptr_t(ev.Handle())
	}
	if C.mi_throttle_on(&handles[0], C.int(len(events)), C.unsigned(every)) == 0 {
		return fmt.Errorf("the launch throttle was refused (every %d launches; the driver lacks an event entry point)", every)
	}
	return nil
}

func (launchThrottle) Off() { C.mi_throttle_off() }

// reset drops the reader's device resources before the context that holds
// them goes; the next snapshot makes new ones.
func (d *driverDevice) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.copier != nil {
		d.copier.Close()
		d.copier = nil
	}
}

func (d *driverDevice) Fingerprints(rs []fingerprint.Range) ([]fingerprint.Sum, error) {
	c, err := d.reader()
	if err != nil {
		return nil, err
	}
	return c.Fingerprints(rs)
}

func (d *driverDevice) Stage(runs []fingerprint.Range) (record.Staging, error) {
	c, err := d.reader()
	if err != nil {
		return nil, err
	}
	return c.Stage(runs)
}

func (d *driverDevice) HostShadow(runs []fingerprint.Range) (record.Shadow, error) {
	c, err := d.reader()
	if err != nil {
		return nil, err
	}
	return c.HostShadow(runs)
}

func (d *driverDevice) Shadow(runs []fingerprint.Range) (record.Shadow, error) {
	c, err := d.reader()
	if err != nil {
		return nil, err
	}
	return c.Shadow(runs)
}

func (*driverDevice) Capturing(stream uintptr) bool {
	return C.mi_stream_capturing(C.uintptr_t(stream)) != 0
}

func (*driverDevice) Synchronize() error                      { return cuda.Synchronize() }
func (*driverDevice) CopyToHost(dst []byte, src uint64) error { return cuda.MemcpyDtoH(dst, src) }
func (*driverDevice) GlobalAddress(image int, name string) (addr, size uint64, err error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var a C.ulonglong
	var n C.size_t
	if r := C.mi_global(C.int(image), cname, &a, &n); r != 0 {
		return 0, 0, fmt.Errorf("device variable %s: driver error %d", name, int(r))
	}
	return uint64(a), uint64(n), nil
}

func (*driverDevice) Describe() (db.DeviceInfo, error) {
	ctx, err := cuda.CurrentContext()
	if err != nil {
		return db.DeviceInfo{}, err
	}
	props, err := ctx.Device().Props()
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

// miStart reads the recording's settings; called inside cuInit, so it makes
// no driver call. 0: record; 2: deploy tuned kernels (MNEME_TUNED_KERNELS,
// not recording); 1: neither.
//
//export miStart
func miStart() C.int {
	startMu.Lock()
	defer startMu.Unlock()
	if carriesShim() {
		return 1 // built with mneme's wrapper: its shim records it or deploys
	}
	if os.Getenv(record.EnvDB) == "" {
		if dep = startDeploy(); dep != nil {
			return 2
		}
		return 1
	}
	cfg, err := record.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mneme record:", err)
		return 1
	}
	// Under MNEME_FULL_COPIES=1 the recorder copies whole, as the
	// wrapper's does, without the device's DeviceReader.
	device = &driverDevice{keepOnDevice: cfg.Shadow == record.ShadowDevice}
	return started(inject.New(cfg, device))
}

// started finishes miStart with the recorder New made.
func started(r *inject.Recorder, err error) C.int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "mneme record:", err)
		return 1
	}
	r.Toolchain = db.Toolchain{Mneme: version()}
	rec = r
	return 0
}

// carriesShim reports whether this process's executable was built with
// mneme's compiler wrapper (it embeds IR), whose shim records it: the
// injection library then stands aside (`mneme record` sets both up for a
// script, not knowing what it runs).
func carriesShim() bool {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return false
	}
	defer f.Close()
	sec := f.Section(appabi.IRSection)
	return sec != nil && sec.Type != elf.SHT_NOBITS
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

//export miFatal
func miFatal(msg *C.char) {
	fatal = C.GoString(msg)
	if dep != nil {
		dep.warn(fatal + "; the application's own code runs")
	}
	if rec != nil {
		rec.ReportError(fatal)
		rec.Finish()
	}
}

//export miWants
func miWants(name *C.char) C.int {
	if rec != nil && rec.Wants(C.GoString(name)) {
		return 1
	}
	return 0
}

//export miUnreadable
func miUnreadable(name *C.char) {
	rec.ReportError(fmt.Sprintf("kernel %s: its parameter layout cannot be read (the driver lacks cuFuncGetParamInfo and cuKernelGetParamInfo, CUDA 12.4 or later)", C.GoString(name)))
}

//export miImage
func miImage(p unsafe.Pointer, n C.size_t) C.int {
	if dep != nil {
		return C.int(dep.image(unsafe.Slice((*byte)(p), int(n))))
	}
	if rec == nil {
		return -1
	}
	return C.int(rec.Image(unsafe.Slice((*byte)(p), int(n))))
}

//export miImageFile
func miImageFile(path *C.char) C.int {
	if rec == nil && (dep == nil || !dep.keep) {
		return -1
	}
	name := C.GoString(path)
	b, err := os.ReadFile(name)
	if dep != nil {
		if err != nil {
			return -1
		}
		return C.int(dep.image(b))
	}
	if err != nil {
		rec.ReportError(fmt.Sprintf("module file %s: %v; its kernels are not recorded", name, err))
		return -1
	}
	return C.int(rec.Image(b))
}

//export miAlloc
func miAlloc(ctx C.uintptr_t, addr C.ulonglong, size C.size_t) {
	if rec != nil {
		rec.Alloc(uintptr(ctx), uint64(addr), uint64(size))
	}
}

//export miFree
func miFree(addr C.ulonglong) {
	if rec != nil {
		rec.Free(uint64(addr))
	}
}

//export miManaged
func miManaged(addr C.ulonglong, size C.size_t) {
	if rec != nil {
		rec.Managed(uint64(addr), uint64(size))
	}
}

//export miLaunchBegin
func miLaunchBegin(l *C.struct_mi_launch) C.int {
	if rec == nil {
		return 0
	}
	n := int(l.nparams)
	args := make([][]byte, n)
	if n > 0 {
		ptrs := unsafe.Slice(l.args, n)
		sizes := unsafe.Slice(l.sizes, n)
		for i := range n {
			if ptrs[i] == nil {
				rec.ReportError(fmt.Sprintf("kernel %s: parameter %d has no value", C.GoString(l.name), i))
				return 0
			}
			args[i] = C.GoBytes(ptrs[i], C.int(sizes[i]))
		}
	}
	return C.int(rec.LaunchBegin(&inject.Launch{
		Context: uintptr(l.context),
		Stream:  uintptr(l.stream),
		Kernel:  C.GoString(l.name),
		Image:   int(l.image),
		Grid:    mneme.Dim3{X: uint32(l.grid[0]), Y: uint32(l.grid[1]), Z: uint32(l.grid[2])},
		Block:   mneme.Dim3{X: uint32(l.block[0]), Y: uint32(l.block[1]), Z: uint32(l.block[2])},
		Shared:  uint32(l.shared),
		Args:    args,
	}))
}

//export miLaunchEnd
func miLaunchEnd(token C.int, result C.int) {
	var err error
	if result != 0 {
		err = fmt.Errorf("CUDA error %d", int(result))
	}
	rec.LaunchEnd(int(token), err)
}

// miContextEnds: the application resets or destroys its context; the
// allocations it held are gone.
//
//export miContextEnds
func miContextEnds() {
	if rec != nil {
		rec.ContextEnds()
		device.reset()
	}
}

// miContextReleasing: the application (or its runtime, at exit) releases
// its primary context, which may destroy it: the snapshots the background
// writer holds copies of in that context are written first.
//
//export miContextReleasing
func miContextReleasing() {
	if rec != nil {
		rec.Drain()
	}
}

//export miFinish
func miFinish(ignored C.ulong) {
	if dep != nil {
		dep.finish()
	}
	if rec == nil {
		return
	}
	finishStats()
	rec.Forwarded(uint64(ignored))
	rec.Finish()
}
