package cuda

/*
#include <stdlib.h>
#include "driver.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/mneme-gpu/mneme"
)

// Module is a loaded cubin, fatbinary or PTX image.
type Module struct {
	h uintptr
}

// LoadModule loads an image into the current context (cuModuleLoadDataEx):
// a cubin, a fatbinary or PTX text (JIT-compiled by the driver). A PTX
// failure carries the JIT's error log.
func LoadModule(image []byte) (*Module, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	if len(image) == 0 {
		return nil, errors.New("LoadModule: empty image")
	}
	// A copy with a trailing NUL: PTX must be terminated, and a cubin's
	// length comes from its ELF header, so the extra byte is harmless.
	img := cBytes(image)
	defer C.free(img)
	elog := C.calloc(jitLogBytes, 1)
	defer C.free(elog)
	var h C.uintptr_t
	if r := C.mn_module_load(&h, img, (*C.char)(elog), jitLogBytes); r != 0 {
		err := check("cuModuleLoadDataEx", r)
		if log := strings.TrimSpace(C.GoString((*C.char)(elog))); log != "" {
			return nil, &LinkError{Err: err, Log: log}
		}
		return nil, err
	}
	return &Module{h: uintptr(h)}, nil
}

// Function looks up a kernel by its (mangled) name.
func (m *Module) Function(name string) (*Function, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var h C.uintptr_t
	if err := check("cuModuleGetFunction", C.mn_cuModuleGetFunction(&h, C.uintptr_t(m.h), cname)); err != nil {
		return nil, fmt.Errorf("kernel %q: %w", name, err)
	}
	return &Function{h: uintptr(h), name: name}, nil
}

// Global returns the device address and size of a module-scope variable.
func (m *Module) Global(name string) (addr, size uint64, err error) {
	if err := Init(); err != nil {
		return 0, 0, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var a C.CUdeviceptr
	var n C.size_t
	if err := check("cuModuleGetGlobal_v2", C.mn_cuModuleGetGlobal(&a, &n, C.uintptr_t(m.h), cname)); err != nil {
		return 0, 0, fmt.Errorf("device global %q: %w", name, err)
	}
	return uint64(a), uint64(n), nil
}

// Unload unloads the module; its functions become invalid.
func (m *Module) Unload() error {
	if err := Init(); err != nil {
		return err
	}
	if m.h == 0 {
		return nil
	}
	err := check("cuModuleUnload", C.mn_cuModuleUnload(C.uintptr_t(m.h)))
	m.h = 0
	return err
}

// Function is a kernel entry point.
type Function struct {
	h    uintptr
	name string

	paramsOnce sync.Once
	params     []ParamInfo
	paramsErr  error
}

// FunctionFromHandle wraps a CUfunction obtained elsewhere (from
// cudaGetFuncBySymbol inside an application, for example).
func FunctionFromHandle(h uintptr) *Function { return &Function{h: h} }

// Handle is the raw CUfunction.
func (f *Function) Handle() uintptr { return f.h }

// Name is the name the function was looked up by ("" for a wrapped handle).
func (f *Function) Name() string { return f.name }

func (f *Function) label() string {
	if f.name != "" {
		return fmt.Sprintf("kernel %q", f.name)
	}
	return fmt.Sprintf("kernel 0x%x", f.h)
}

// FuncAttrs are a compiled kernel's resource usage and limits; sizes in bytes.
type FuncAttrs struct {
	Registers          int // per thread
	LocalBytes         int // per thread
	ConstBytes         int // user constant memory
	SharedBytes        int // static shared memory
	MaxThreadsPerBlock int // the largest block this kernel can launch with
	PTXVersion         int // the virtual architecture compiled for, e.g. 90 for compute_90
	BinaryVersion      int // the binary architecture, e.g. 90 for sm_90
	MaxDynamicShared   int
}

// CUfunction_attribute values.
const (
	funcAttrMaxThreadsPerBlock = 0
	funcAttrSharedSize         = 1
	funcAttrConstSize          = 2
	funcAttrLocalSize          = 3
	funcAttrNumRegs            = 4
	funcAttrPTXVersion         = 5
	funcAttrBinaryVersion      = 6
	funcAttrMaxDynamicShared   = 8
)

// Attributes reads the kernel's registers, memory sizes and limits.
func (f *Function) Attributes() (FuncAttrs, error) {
	if err := Init(); err != nil {
		return FuncAttrs{}, err
	}
	var a FuncAttrs
	for _, x := range []struct {
		attr int
		dst  *int
	}{
		{funcAttrNumRegs, &a.Registers}, {funcAttrLocalSize, &a.LocalBytes},
		{funcAttrConstSize, &a.ConstBytes}, {funcAttrSharedSize, &a.SharedBytes},
		{funcAttrMaxThreadsPerBlock, &a.MaxThreadsPerBlock}, {funcAttrPTXVersion, &a.PTXVersion},
		{funcAttrBinaryVersion, &a.BinaryVersion}, {funcAttrMaxDynamicShared, &a.MaxDynamicShared},
	} {
		var v C.int
		if err := check("cuFuncGetAttribute", C.mn_cuFuncGetAttribute(&v, C.int(x.attr), C.uintptr_t(f.h))); err != nil {
			return a, fmt.Errorf("%s attribute %d: %w", f.label(), x.attr, err)
		}
		*x.dst = int(v)
	}
	return a, nil
}

// SetMaxDynamicShared allows launches with up to bytes of dynamic shared
// memory (needed above 48 KiB).
func (f *Function) SetMaxDynamicShared(bytes int) error {
	if err := Init(); err != nil {
		return err
	}
	if err := check("cuFuncSetAttribute", C.mn_cuFuncSetAttribute(C.uintptr_t(f.h), funcAttrMaxDynamicShared, C.int(bytes))); err != nil {
		return fmt.Errorf("%s: max dynamic shared memory %d bytes: %w", f.label(), bytes, err)
	}
	return nil
}

// Load puts the function's code on the GPU now (cuFuncLoad). Under lazy
// loading, the default since CUDA 12.2, cuModuleLoadData and
// cuModuleGetFunction leave that to the function's first launch, which
// then pays for it; a caller that loads code ahead of its use calls Load
// off the launching thread. loaded is false, with no error, on a driver
// without cuFuncLoad (before 12.4), whose cuModuleGetFunction loads the
// function itself.
func (f *Function) Load() (loaded bool, err error) {
	if err := Init(); err != nil {
		return false, err
	}
	r := C.mn_cuFuncLoad(C.uintptr_t(f.h))
	if r == errCodeSymbolMissing {
		return false, nil
	}
	if err := check("cuFuncLoad", r); err != nil {
		return false, fmt.Errorf("%s: %w", f.label(), err)
	}
	return true, nil
}

// IsLoaded tells whether the function's code is on the GPU
// (cuFuncIsLoaded); known is false on a driver without it.
func (f *Function) IsLoaded() (loaded, known bool, err error) {
	if err := Init(); err != nil {
		return false, false, err
	}
	var state C.int
	r := C.mn_cuFuncIsLoaded(&state, C.uintptr_t(f.h))
	if r == errCodeSymbolMissing {
		return false, false, nil
	}
	if err := check("cuFuncIsLoaded", r); err != nil {
		return false, false, fmt.Errorf("%s: %w", f.label(), err)
	}
	return state == 1, true, nil // CU_FUNCTION_LOADING_STATE_LOADED
}

// ParamInfo is one kernel parameter's place in the parameter buffer.
type ParamInfo struct{ Offset, Size uint64 }

// maxParams bounds the parameter scan; CUDA allows 32 KiB of parameters,
// so even one-byte parameters stay far below it.
const maxParams = 32768

// ParamInfo lists the kernel's parameters (cuFuncGetParamInfo; driver 12.4+).
func (f *Function) ParamInfo() ([]ParamInfo, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	f.paramsOnce.Do(func() {
		var out []ParamInfo
		for i := 0; i < maxParams; i++ {
			var off, size C.size_t
			r := C.mn_cuFuncGetParamInfo(C.uintptr_t(f.h), C.size_t(i), &off, &size)
			if r == ErrCodeInvalidValue {
				break // past the last parameter
			}
			if err := check("cuFuncGetParamInfo", r); err != nil {
				f.paramsErr = fmt.Errorf("%s parameter %d: %w", f.label(), i, err)
				return
			}
			out = append(out, ParamInfo{Offset: uint64(off), Size: uint64(size)})
		}
		f.params = out
	})
	return f.params, f.paramsErr
}

// checkArgs compares the argument sizes with the kernel's parameters, so a
// short argument can never make the driver read past its buffer. Drivers
// without cuFuncGetParamInfo skip the check.
func (f *Function) checkArgs(args [][]byte) error {
	params, err := f.ParamInfo()
	if err != nil {
		return nil
	}
	if len(args) != len(params) {
		return fmt.Errorf("launching %s: it takes %d parameters, %d arguments given", f.label(), len(params), len(args))
	}
	for i, p := range params {
		if uint64(len(args[i])) != p.Size {
			return fmt.Errorf("launching %s: argument %d has %d bytes, the parameter has %d", f.label(), i, len(args[i]), p.Size)
		}
	}
	return nil
}

// launchScratch is a reusable packed copy of one launch's arguments.
type launchScratch struct {
	buf  []byte
	offs []uint32
}

var scratchPool = sync.Pool{New: func() any {
	return &launchScratch{buf: make([]byte, 0, 1024), offs: make([]uint32, 0, 32)}
}}

// Launch starts the kernel on stream s. args[i] holds the bytes of the i-th
// parameter, sized as ParamInfo reports. A fault inside the kernel is
// reported by the next synchronizing call, not here.
func (f *Function) Launch(grid, block mneme.Dim3, sharedMem uint32, s Stream, args [][]byte) error {
	if err := Init(); err != nil {
		return err
	}
	if err := f.checkArgs(args); err != nil {
		return err
	}
	sc := scratchPool.Get().(*launchScratch)
	defer scratchPool.Put(sc)
	sc.buf, sc.offs = sc.buf[:0], sc.offs[:0]
	for _, a := range args {
		// 16-byte alignment suits every parameter type, vectors included.
		pad := (16 - len(sc.buf)%16) % 16
		for ; pad > 0; pad-- {
			sc.buf = append(sc.buf, 0)
		}
		sc.offs = append(sc.offs, uint32(len(sc.buf)))
		sc.buf = append(sc.buf, a...)
	}
	var bufp *C.char
	var offp *C.uint32_t
	if len(sc.buf) > 0 {
		bufp = (*C.char)(unsafe.Pointer(&sc.buf[0]))
	} else if len(args) > 0 {
		sc.buf = append(sc.buf, 0) // zero-sized parameters still need a valid pointer
		bufp = (*C.char)(unsafe.Pointer(&sc.buf[0]))
	}
	if len(sc.offs) > 0 {
		offp = (*C.uint32_t)(unsafe.Pointer(&sc.offs[0]))
	}
	r := C.mn_launch(C.uintptr_t(f.h), C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
		C.uint(block.X), C.uint(block.Y), C.uint(block.Z), C.uint(sharedMem), C.uintptr_t(s),
		bufp, offp, C.int(len(args)))
	if r != 0 {
		return fmt.Errorf("launching %s grid %v block %v shared %d: %w", f.label(), grid, block, sharedMem, check("cuLaunchKernel", r))
	}
	return nil
}

// LaunchParams starts the kernel with a parameter array laid out as
// cuLaunchKernel takes it (one pointer per parameter), such as the one an
// application passed to cudaLaunchKernel. stream is a CUstream handle (0:
// the legacy default stream, 2: the per-thread one).
func (f *Function) LaunchParams(grid, block mneme.Dim3, sharedMem uint32, stream uintptr, params unsafe.Pointer) error {
	if err := Init(); err != nil {
		return err
	}
	r := C.mn_launch_params(C.uintptr_t(f.h), C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
		C.uint(block.X), C.uint(block.Y), C.uint(block.Z), C.uint(sharedMem), C.uintptr_t(stream),
		(*unsafe.Pointer)(params))
	if r != 0 {
		return fmt.Errorf("launching %s grid %v block %v shared %d: %w", f.label(), grid, block, sharedMem, check("cuLaunchKernel", r))
	}
	return nil
}

// LaunchKernelEntry is the address of the driver's cuLaunchKernel, for C
// code that launches without a call into Go (the application's shim).
func LaunchKernelEntry() (uintptr, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	return uintptr(C.mn_launch_entry()), nil
}
