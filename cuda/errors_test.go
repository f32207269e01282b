package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

func TestErrorMessageNamesCallAndCUDAError(t *testing.T) {
	e := &Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory"}
	if got, want := e.Error(), "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("allocating 4096 bytes: %w", e)
	if !IsOutOfMemory(wrapped) {
		t.Fatal("IsOutOfMemory does not see through wrapping")
	}
}

func TestClassification(t *testing.T) {
	cases := []struct {
		call                   string
		code                   int
		fault, invalid, sticky bool
	}{
		{"cuCtxSynchronize", ErrCodeIllegalAddress, true, false, true},
		{"cuStreamSynchronize", ErrCodeLaunchFailed, true, false, true},
		{"cuCtxSynchronize", ErrCodeMisalignedAddress, true, false, true},
		{"cuCtxSynchronize", ErrCodeIllegalInstruction, true, false, true},
		{"cuCtxSynchronize", ErrCodeAssert, true, false, true},
		{"cuCtxSynchronize", ErrCodeHardwareStackError, true, false, true},
		{"cuEventSynchronize", ErrCodeLaunchTimeout, true, false, true},
		{"cuLaunchKernel", ErrCodeInvalidValue, false, true, false},
		{"cuLaunchKernel", ErrCodeLaunchOutOfResources, false, true, false},
		{"cuMemAlloc_v2", ErrCodeInvalidValue, false, false, false},
		{"cuMemAlloc_v2", ErrCodeOutOfMemory, false, false, false},
		{"cuMemcpyDtoH_v2", ErrCodeECCUncorrectable, false, false, true},
	}
	for _, c := range cases {
		err := fmt.Errorf("context: %w", &Error{Call: c.call, Code: c.code, Name: "X", Msg: "y"})
		if got := IsLaunchFailure(err); got != c.fault {
			t.Errorf("%s %d: IsLaunchFailure = %v, want %v", c.call, c.code, got, c.fault)
		}
		if got := IsInvalidLaunch(err); got != c.invalid {
			t.Errorf("%s %d: IsInvalidLaunch = %v, want %v", c.call, c.code, got, c.invalid)
		}
		if got := IsSticky(err); got != c.sticky {
			t.Errorf("%s %d: IsSticky = %v, want %v", c.call, c.code, got, c.sticky)
		}
	}
	plain := errors.New("not a CUDA error")
	if IsLaunchFailure(plain) || IsInvalidLaunch(plain) || IsSticky(plain) || IsOutOfMemory(plain) {
		t.Fatal("a non-CUDA error was classified as a CUDA error")
	}
}

func TestDriverLoadErrorMatchesErrNoDriver(t *testing.T) {
	err := error(&driverLoadError{detail: "libcuda.so.1: cannot open shared object file"})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatal("load error does not match ErrNoDriver")
	}
	if !strings.HasPrefix(err.Error(), "no CUDA driver found (libcuda.so.1 could not be loaded): libcuda.so.1") {
		t.Fatalf("message %q", err)
	}
	initFail := error(&driverLoadError{cause: &Error{Call: "cuInit", Code: ErrCodeNoDevice, Name: "CUDA_ERROR_NO_DEVICE", Msg: "no CUDA-capable device is detected"}})
	var ce *Error
	if !errors.Is(initFail, ErrNoDriver) || !errors.As(initFail, &ce) || ce.Code != ErrCodeNoDevice {
		t.Fatalf("cuInit failure %v: want ErrNoDriver and the cuInit *Error", initFail)
	}
}

func TestIsNoGPU(t *testing.T) {
	noDevice := &Error{Call: "cuDeviceGet", Code: ErrCodeNoDevice, Name: "CUDA_ERROR_NO_DEVICE", Msg: "no CUDA-capable device is detected"}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"missing driver", &driverLoadError{detail: "libcuda.so.1: cannot open shared object file"}, true},
		{"cuInit without devices", &driverLoadError{cause: &Error{Call: "cuInit", Code: ErrCodeNoDevice, Name: "CUDA_ERROR_NO_DEVICE"}}, true},
		{"driver sees no device", fmt.Errorf("device 0: %w", noDevice), true},
		{"the sentinel itself, as the tuning protocol carries it", fmt.Errorf("%w: open: no CUDA driver found", mneme.ErrNoGPU), true},
		{"a device that does not exist", &Error{Call: "cuDeviceGet", Code: ErrCodeInvalidDevice, Name: "CUDA_ERROR_INVALID_DEVICE"}, false},
		{"out of memory", &Error{Call: "cuMemAlloc_v2", Code: ErrCodeOutOfMemory}, false},
		{"not a CUDA error", errors.New("disk full"), false},
		{"nil", nil, false},
	} {
		if got := IsNoGPU(c.err); got != c.want {
			t.Errorf("%s: IsNoGPU(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
