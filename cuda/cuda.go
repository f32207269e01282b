// Package cuda is mneme's binding to the NVIDIA CUDA driver API: devices and
// their limits, the primary context, PTX-to-cubin linking through the
// driver's JIT, modules, kernel attributes and parameter layout, launches,
// streams and events, memory copies, the virtual-memory calls that let
// replay map a recording's device addresses exactly, and kernel-only timing
// through CUPTI.
//
// Nothing here needs CUDA at build time: libcuda.so.1 (and libcupti) are
// loaded with dlopen when first used. On a machine without a driver every
// call returns an error matching ErrNoDriver instead of crashing, so
// CPU-only features keep working. Every other failure is an *Error naming
// the driver call and the CUDA error.
//
// The driver API works on the calling OS thread's current context. A
// program that uses one context calls SetCurrent once; threads that have no
// context are then given that one, so goroutines may move between threads.
package cuda

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "driver.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

var (
	loadOnce sync.Once
	loadErr  error
	initOnce sync.Once
	initErr  error
)

// load opens libcuda.so.1 and resolves its entry points, once.
func load() error {
	loadOnce.Do(func() {
		var buf [512]C.char
		if C.mn_load_driver(&buf[0], C.size_t(len(buf))) == 0 {
			loadErr = &driverLoadError{detail: C.GoString(&buf[0])}
		}
	})
	return loadErr
}

// Init loads the driver and calls cuInit(0). It is idempotent and safe to
// call from many goroutines; every other function calls it first.
func Init() error {
	initOnce.Do(func() {
		if err := load(); err != nil {
			initErr = err
			return
		}
		if err := check("cuInit", C.mn_cuInit()); err != nil {
			initErr = &driverLoadError{cause: err}
		}
	})
	return initErr
}

// check turns a CUresult into nil or an *Error naming call.
func check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	if r == errCodeSymbolMissing {
		return &Error{Call: call, Code: -1, Name: "SYMBOL_NOT_FOUND",
			Msg: "libcuda.so.1 does not provide this entry point; the driver is too old"}
	}
	var name, msg *C.char
	C.mn_error_strings(r, &name, &msg)
	e := &Error{Call: call, Code: int(r), Name: "CUDA_ERROR_" + fmt.Sprint(int(r)), Msg: "unknown error"}
	if name != nil {
		e.Name = C.GoString(name)
	}
	if msg != nil {
		e.Msg = C.GoString(msg)
	}
	return e
}

// DriverVersion is the CUDA version the driver supports, e.g. 13000 for 13.0.
func DriverVersion() (int, error) {
	if err := load(); err != nil {
		return 0, err
	}
	var v C.int
	if err := check("cuDriverGetVersion", C.mn_cuDriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount is the number of CUDA devices visible to this process.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.mn_cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Synchronize waits for all work in the current context (cuCtxSynchronize).
// A kernel fault of an earlier launch is reported here.
func Synchronize() error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuCtxSynchronize", C.mn_cuCtxSynchronize())
}

// cBytes copies b into C memory with a trailing NUL; the caller frees it.
func cBytes(b []byte) unsafe.Pointer {
	p := C.malloc(C.size_t(len(b) + 1))
	buf := unsafe.Slice((*byte)(p), len(b)+1)
	copy(buf, b)
	buf[len(b)] = 0
	return p
}
