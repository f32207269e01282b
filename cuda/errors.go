package cuda

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mneme-gpu/mneme"
)

// ErrNoDriver is what every call returns, wrapped, on a machine without a
// usable CUDA driver. Test it with errors.Is. Such errors also match
// mneme.ErrNoGPU, as does a driver's CUDA_ERROR_NO_DEVICE.
var ErrNoDriver = errors.New("no CUDA driver found")

// ErrNoCUPTI is returned, wrapped, by NewKernelTimer when libcupti cannot be loaded.
var ErrNoCUPTI = errors.New("CUPTI not available")

// driverLoadError says why the driver could not be used; it matches ErrNoDriver.
type driverLoadError struct {
	detail string
	cause  error // the failing cuInit, when the library loaded but could not start
}

func (e *driverLoadError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("no usable CUDA driver: %v", e.cause)
	}
	return "no CUDA driver found (libcuda.so.1 could not be loaded): " + e.detail
}

func (e *driverLoadError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrNoDriver, mneme.ErrNoGPU, e.cause}
	}
	return []error{ErrNoDriver, mneme.ErrNoGPU}
}

// Error is a failed driver call: the call's name and the CUDA error it returned.
type Error struct {
	Call string // e.g. "cuMemAlloc_v2"
	Code int    // the CUresult value; -1 when the driver lacks the entry point
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // e.g. "out of memory"
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Call, e.Name, e.Msg)
}

// Is makes a driver that sees no device match mneme.ErrNoGPU, like a
// missing driver: for the user both mean there is no GPU to run on.
func (e *Error) Is(target error) bool {
	return target == mneme.ErrNoGPU && e.Code == ErrCodeNoDevice
}

// CUresult values the package and its callers classify on.
const (
	ErrCodeInvalidValue            = 1
	ErrCodeOutOfMemory             = 2
	ErrCodeNotInitialized          = 3
	ErrCodeNoDevice                = 100
	ErrCodeInvalidDevice           = 101
	ErrCodeInvalidImage            = 200
	ErrCodeInvalidContext          = 201
	ErrCodeECCUncorrectable        = 214
	ErrCodeInvalidPTX              = 218
	ErrCodeInvalidHandle           = 400
	ErrCodeNotFound                = 500
	ErrCodeNotReady                = 600
	ErrCodeIllegalAddress          = 700
	ErrCodeLaunchOutOfResources    = 701
	ErrCodeLaunchTimeout           = 702
	ErrCodeContextIsDestroyed      = 709
	ErrCodeAssert                  = 710
	ErrCodeHardwareStackError      = 714
	ErrCodeIllegalInstruction      = 715
	ErrCodeMisalignedAddress       = 716
	ErrCodeInvalidAddressSpace     = 717
	ErrCodeInvalidPC               = 718
	ErrCodeLaunchFailed            = 719
	ErrCodeCooperativeLaunchTooBig = 720
	ErrCodeNotSupported            = 801
	ErrCodeUnknown                 = 999
	// errCodeSymbolMissing is MN_SYMBOL_MISSING of driver.h.
	errCodeSymbolMissing = 0x7fff0001
)

// codeOf returns the CUresult of a driver error in err's chain, or 0.
func codeOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// IsNoGPU reports whether err means this machine cannot run kernels at all:
// no driver, or a driver that sees no device. It is the one test every
// command and the replay worker use, so "no GPU" (exit code 6) means the
// same everywhere; errors from the tuning protocol's no_gpu match it too.
func IsNoGPU(err error) bool { return errors.Is(err, mneme.ErrNoGPU) }

// IsLaunchFailure reports whether err is a fault raised while a kernel ran:
// an illegal or misaligned address, a trap or device assert, an illegal
// instruction, a stack error, a timeout. Such errors surface at the launch
// or at the next synchronizing call, and they are sticky.
func IsLaunchFailure(err error) bool {
	switch codeOf(err) {
	case ErrCodeIllegalAddress, ErrCodeLaunchTimeout, ErrCodeAssert, ErrCodeHardwareStackError,
		ErrCodeIllegalInstruction, ErrCodeMisalignedAddress, ErrCodeInvalidAddressSpace,
		ErrCodeInvalidPC, ErrCodeLaunchFailed:
		return true
	}
	return false
}

// IsInvalidLaunch reports whether a launch was refused before the kernel ran:
// a bad grid, block or shared-memory size (CUDA_ERROR_INVALID_VALUE from a
// launch), too many resources per block, or a cooperative grid too large.
// The context stays usable.
func IsInvalidLaunch(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case ErrCodeLaunchOutOfResources, ErrCodeCooperativeLaunchTooBig:
		return true
	case ErrCodeInvalidValue:
		return strings.HasPrefix(e.Call, "cuLaunch")
	}
	return false
}

// IsSticky reports whether err leaves the context unusable: every later
// call in this process fails the same way, so the process must restart to
// use the GPU again.
func IsSticky(err error) bool {
	return IsLaunchFailure(err) || codeOf(err) == ErrCodeECCUncorrectable
}

// IsOutOfMemory reports whether err is CUDA_ERROR_OUT_OF_MEMORY.
func IsOutOfMemory(err error) bool { return codeOf(err) == ErrCodeOutOfMemory }

// IsNotFound reports whether err is CUDA_ERROR_NOT_FOUND (an unknown kernel
// or global name, for example).
func IsNotFound(err error) bool { return codeOf(err) == ErrCodeNotFound }
