// Command mneme-rt is built with -buildmode=c-shared into libmneme_rt.so, the
// library the C shim (cmd/mneme-rt/shim) loads into an application recorded by
// `mneme record`. It exports the mneme_rt_* entry points declared in
// mneme_shim.h and keeps the C-facing code thin: the recording logic is the
// record package, driven through the process adapter (process.go).
package main

/*
#cgo CFLAGS: -O2 -Wall -I${SRCDIR}/shim
#include "host.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/record"
)

func main() {}

const (
	cudaErrorMemoryAllocation = 2
	cudaErrorUnknown          = 999
)

var (
	rec  *record.Recorder
	proc *process

	// kernels caches the shim's registration entry and parameter sizes per
	// kernel index, so a launch costs one map lookup after the first.
	kernelsMu sync.Mutex
	kernels   = map[int]*kernelInfo{}
)

type kernelInfo struct {
	reg        record.Kernel
	paramSizes []uint64
	err        error
}

//export mneme_rt_init
func mneme_rt_init(api *C.struct_mneme_host_api) C.int {
	if api.abi_version != C.MNEME_RT_ABI_VERSION {
		fmt.Fprintf(os.Stderr, "mneme record: the application's shim speaks interface version %d, this runtime library %d: rebuild the application with this mneme\n", int(api.abi_version), int(C.MNEME_RT_ABI_VERSION))
		return -1
	}
	start := time.Now()
	record.Trace("runtime", "init begin")
	defer record.Trace("runtime", "init end")
	C.rth_set_api(api)
	if api.mode == C.MNEME_MODE_DEPLOY {
		rc := deployInit(api)
		if path := os.Getenv(envLaunchStats); path != "" && rc == 0 {
			appStatsInit(api, path)
		}
		return rc
	}
	cfg, err := record.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mneme record:", err)
		return -1
	}
	startProfile()
	if api.cuda_initialized == 0 {
		// Loaded at exit by an application that made no CUDA call: report
		// the registrations, touch nothing else.
		if rec, err = record.New(cfg, nil, nil); err != nil {
			fmt.Fprintln(os.Stderr, "mneme record:", err)
			return -1
		}
		registered()
		statsInit(api)
		return 0
	}
	p, err := newProcess()
	if err != nil {
		// Without a device nothing can be recorded, but the status file
		// still tells `mneme record` what happened.
		if r, e := record.New(cfg, nil, nil); e == nil {
			rec = r
			registered()
			rec.ReportError(fmt.Sprintf("no kernel can be recorded: %v", err))
		} else {
			fmt.Fprintln(os.Stderr, "mneme record:", err)
		}
		return -1
	}
	p.keepOnDevice = cfg.Shadow == record.ShadowDevice
	r, err := record.New(cfg, p, vmm{p})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mneme record:", err)
		return -1
	}
	proc, rec = p, r
	registered()
	statsInit(api)
	if os.Getenv(record.EnvRecordTuned) == "1" {
		// mneme record --with-tuned-kernels: the launches the recorder
		// forwards run tuned code, in the recording's process.
		deployInit(api)
	}
	rec.SetLoadSeconds(float64(api.load_seconds) + time.Since(start).Seconds())
	return 0
}

func registered() {
	rec.SetRegistered(int(C.rth_fatbin_count()), int(C.rth_kernel_count()), int(C.rth_var_count()))
}

// ptr is the application's void** (a device address is no Go pointer).
//
//export mneme_rt_malloc
func mneme_rt_malloc(ptr *C.uintptr_t, size C.size_t, kind C.int) C.cudaError_t {
	if rec == nil || proc == nil {
		return C.MNEME_RT_FORWARD
	}
	if err := proc.enter(); err != nil {
		fmt.Fprintln(os.Stderr, "mneme record:", err)
		return C.MNEME_RT_FORWARD
	}
	addr, err := rec.Malloc(uint64(size))
	if err != nil {
		return cudaErrorMemoryAllocation
	}
	*ptr = C.uintptr_t(addr)
	return 0
}

//export mneme_rt_free
func mneme_rt_free(ptr unsafe.Pointer, stream C.cudaStream_t, async C.int) C.cudaError_t {
	if rec == nil || proc == nil {
		return C.MNEME_RT_FORWARD
	}
	ours, err := rec.Free(uint64(uintptr(ptr)))
	if !ours {
		return C.MNEME_RT_FORWARD
	}
	return errorCode(err)
}

//export mneme_rt_managed
func mneme_rt_managed(size C.size_t) {
	if rec != nil {
		rec.Managed()
	}
}

//export mneme_rt_launch
func mneme_rt_launch(fn unsafe.Pointer, index C.int, gx, gy, gz, bx, by, bz C.unsigned, args *unsafe.Pointer, shared C.size_t, stream C.cudaStream_t, ptsz C.int, handled *C.int, memo *C.struct_mneme_launch_memo) C.cudaError_t {
	*handled = C.MNEME_LAUNCH_FORWARD
	if rec == nil || proc == nil || index < 0 {
		return 0
	}
	// Bring the counts of launches the shim decided alone up to date, so
	// kernel files written now carry them.
	drainMemo()
	k := kernelAt(int(index), fn)
	if k.err != nil {
		*handled = C.MNEME_LAUNCH_FORWARD_ALWAYS
		return 0
	}
	l := &record.Launch{
		Kernel: k.reg,
		Grid:   mneme.Dim3{X: uint32(gx), Y: uint32(gy), Z: uint32(gz)},
		Block:  mneme.Dim3{X: uint32(bx), Y: uint32(by), Z: uint32(bz)},
		Shared: uint32(shared),
		Native: &nativeLaunch{fn: fn, args: args, stream: stream, ptsz: ptsz, index: int(index)},
	}
	if !rec.Wants(l.Kernel) {
		*handled = C.MNEME_LAUNCH_FORWARD_ALWAYS
		rec.Launch(l) // counts the launch; the kernel is not selected
		return 0
	}
	ptrs := unsafe.Slice(args, len(k.paramSizes))
	l.Args = make([][]byte, len(k.paramSizes))
	for i, n := range k.paramSizes {
		l.Args[i] = C.GoBytes(ptrs[i], C.int(n))
	}
	if err := proc.enter(); err != nil {
		return 0
	}
	d, m, err := rec.LaunchMemo(l)
	memo.repeat, memo.capped = C.int(m.Repeat), 0
	if m.Capped {
		memo.capped = 1
	}
	switch d {
	case record.Launched:
		*handled = C.MNEME_LAUNCH_DONE
		return errorCode(err)
	case record.ForwardAlways:
		*handled = C.MNEME_LAUNCH_FORWARD_ALWAYS
	}
	return 0
}

// kernelAt reads a kernel's registration and parameter sizes once.
func kernelAt(index int, fn unsafe.Pointer) *kernelInfo {
	kernelsMu.Lock()
	defer kernelsMu.Unlock()
	if k := kernels[index]; k != nil {
		return k
	}
	record.Trace("runtime", "first launch of kernel %d", index)
	k := &kernelInfo{}
	kernels[index] = k
	var reg C.struct_mneme_kernel_reg
	if C.rth_kernel_at(C.int(index), &reg) == 0 {
		k.err = fmt.Errorf("kernel %d is not registered", index)
		return k
	}
	k.reg = record.Kernel{Name: C.GoString(reg.device_name), Demangled: C.GoString(reg.demangled), Module: int(reg.module)}
	if err := proc.enter(); err != nil {
		k.err = err
		return k
	}
	var h C.uintptr_t
	if err := check("cudaGetFuncBySymbol", C.rth_func_handle(fn, &h)); err != nil {
		k.err = err
	} else if params, err := cuda.FunctionFromHandle(uintptr(h)).ParamInfo(); err != nil {
		k.err = err
	} else {
		for _, p := range params {
			k.paramSizes = append(k.paramSizes, p.Size)
		}
	}
	if rec == nil { // deployment: no recording to tell
		return k
	}
	if k.err == nil {
		// The shim counts this launch, and every later one, with the
		// argument values of every kernel, selected or not.
		statsEnable(index, k.paramSizes)
	}
	if k.err != nil && rec.Wants(k.reg) {
		rec.ReportError(fmt.Sprintf("kernel %s is not recorded: its parameters cannot be read: %v", k.reg.Demangled, k.err))
	}
	if k.err == nil && rec.Wants(k.reg) {
		// Let the shim key this kernel's launches, to decide repeats alone.
		sizes := make([]C.size_t, len(k.paramSizes)+1)
		for i, n := range k.paramSizes {
			sizes[i] = C.size_t(n)
		}
		C.rth_memo_enable(C.int(index), C.int(len(k.paramSizes)), &sizes[0])
	}
	return k
}

// drainMemo hands the recorder the launches the shim forwarded without
// asking: repeats of recorded instances, and launches of kernels it need
// not see.
func drainMemo() {
	var buf [64]C.struct_mneme_launch_count
	for {
		n := int(C.rth_memo_drain(&buf[0], C.int(len(buf))))
		if n == 0 {
			return
		}
		for _, c := range buf[:n] {
			if c.repeat > 0 {
				rec.AddRepeats(int(c.repeat), uint64(c.launches))
				continue
			}
			kernelsMu.Lock()
			k := kernels[int(c.kernel_index)]
			kernelsMu.Unlock()
			if k != nil {
				rec.AddForwarded(k.reg, uint64(c.launches))
			}
		}
	}
}

// errorCode turns an error of a real CUDA call into the code the
// application sees.
func errorCode(err error) C.cudaError_t {
	if err == nil {
		return 0
	}
	var ce *cudaError
	if errors.As(err, &ce) {
		return C.cudaError_t(ce.code)
	}
	return cudaErrorUnknown
}

//export mneme_rt_drain
func mneme_rt_drain() {
	if rec == nil {
		if appStatsPath != "" {
			statsBeforeReset()
		}
		return
	}
	rec.Drain()
	if proc != nil {
		proc.resetReader()
		statsBeforeReset()
	}
	record.Trace("runtime", "drained before a device reset")
}

//export mneme_rt_finish
func mneme_rt_finish() {
	if rec == nil {
		if appStatsPath != "" {
			statsFinish()
		}
		return
	}
	registered()
	if proc != nil {
		drainMemo()
	}
	rec.Finish()
	statsFinish()
	stopProfile()
	record.Trace("runtime", "finish end")
}
