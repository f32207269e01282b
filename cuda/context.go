package cuda

/*
#include "driver.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
)

// Context is a CUDA context: the device's primary context, retained by us
// or found current on the calling thread.
type Context struct {
	h        uintptr
	dev      Device
	retained bool
	release  sync.Once
}

// RetainPrimaryContext retains the device's primary context, the one the
// CUDA runtime also uses. Release it when done.
func (d Device) RetainPrimaryContext() (*Context, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	var h C.uintptr_t
	if err := check("cuDevicePrimaryCtxRetain", C.mn_cuDevicePrimaryCtxRetain(&h, C.CUdevice(d))); err != nil {
		return nil, fmt.Errorf("device %d: %w", int(d), err)
	}
	return &Context{h: uintptr(h), dev: d, retained: true}, nil
}

// CurrentContext returns the context current on this OS thread (inside an
// application, the CUDA runtime's). It fails when the thread has none.
// The returned context is not retained: Release does nothing for it.
func CurrentContext() (*Context, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	var h C.uintptr_t
	if err := check("cuCtxGetCurrent", C.mn_cuCtxGetCurrent(&h)); err != nil {
		return nil, err
	}
	if h == 0 {
		return nil, errors.New("cuCtxGetCurrent: no CUDA context is current on this thread")
	}
	var d C.CUdevice
	if err := check("cuCtxGetDevice", C.mn_cuCtxGetDevice(&d)); err != nil {
		return nil, err
	}
	return &Context{h: uintptr(h), dev: Device(d)}, nil
}

// SetCurrent makes c current on the calling OS thread (callers that use
// several contexts hold the thread with runtime.LockOSThread) and binds it
// as the context given to any thread that calls into the driver without one.
func (c *Context) SetCurrent() error {
	if err := Init(); err != nil {
		return err
	}
	if err := check("cuCtxSetCurrent", C.mn_cuCtxSetCurrent(C.uintptr_t(c.h))); err != nil {
		return err
	}
	C.mn_bind_context(C.uintptr_t(c.h))
	return nil
}

// Release drops the reference RetainPrimaryContext took; later calls are no-ops.
func (c *Context) Release() error {
	if !c.retained {
		return nil
	}
	var err error
	c.release.Do(func() {
		C.mn_unbind_context(C.uintptr_t(c.h))
		err = check("cuDevicePrimaryCtxRelease_v2", C.mn_cuDevicePrimaryCtxRelease(C.CUdevice(c.dev)))
	})
	return err
}

// Device is the device the context belongs to.
func (c *Context) Device() Device { return c.dev }

// Handle is the raw CUcontext.
func (c *Context) Handle() uintptr { return c.h }
