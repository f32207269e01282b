package devicecopy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// Prepare loads the fingerprint kernel in the background, so that the
// load is done before a snapshot needs it instead of while the application
// is held: 0.4 ms from a cubin on an H100, but where only the PTX fits
// the GPU the driver compiles it (5 ms from the driver's cache, 45 ms
// without it, 170 ms on a freshly started H100 machine). Fingerprints
// waits for a load in progress, and loads the kernel itself if Prepare was
// not called or failed.
func (r *Reader) Prepare() {
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := r.loadKernel(); err != nil {
			record.Trace("runtime", "fingerprint kernel not loaded ahead: %v", err)
		}
	}()
}

// loadKernel loads the fingerprint kernel unless it is loaded.
func (r *Reader) loadKernel() error {
	r.kernelMu.Lock()
	defer r.kernelMu.Unlock()
	if r.fn != nil {
		return nil
	}
	if r.closed {
		return errors.New("the reader is closed")
	}
	start := time.Now()
	mod, from, err := loadFingerprintModule()
	if err != nil {
		return fmt.Errorf("loading the fingerprint kernel: %w", err)
	}
	fn, err := mod.Function(fingerprint.Kernel)
	if err != nil {
		mod.Unload()
		return err
	}
	r.mod, r.fn, r.kernelFrom = mod, fn, from
	record.Trace("runtime", "fingerprint kernel loaded from its %s in %.4f s", from, time.Since(start).Seconds())
	return nil
}

// loadFingerprintModule loads the fingerprint kernel from its fatbin, where
// a cubin fits the GPU and nothing is compiled, else from its PTX (a
// driver that cannot take the fatbin may still take the PTX). from names
// the image that loaded.
func loadFingerprintModule() (mod *cuda.Module, from string, err error) {
	mod, fatErr := cuda.LoadModule(fingerprint.Fatbin)
	if fatErr == nil {
		return mod, "fatbin", nil
	}
	mod, err = cuda.LoadModule(fingerprint.PTX)
	if err != nil {
		return nil, "", fmt.Errorf("fatbin: %v; PTX: %w", fatErr, err)
	}
	record.Trace("runtime", "fingerprint fatbin not loaded (%v): using the PTX", fatErr)
	return mod, "PTX", nil
}

// Fingerprints hashes each range on the GPU with the fingerprint kernel.
func (r *Reader) Fingerprints(rs []fingerprint.Range) ([]fingerprint.Sum, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(rs) == 0 {
		return nil, nil
	}
	if err := ensureStream(&r.stream); err != nil {
		return nil, err
	}
	if err := r.loadKernel(); err != nil {
		return nil, err
	}
	desc, err := fingerprint.EncodeRanges(rs)
	if err != nil {
		return nil, err
	}
	grown := r.desc.size < len(desc)
	if err := r.desc.ensure(len(desc)); err != nil {
		return nil, err
	}
	if err := r.sums.ensure(fingerprint.SumBytes * len(rs)); err != nil {
		return nil, err
	}
	// Snapshots of one recording mostly hash the same ranges: upload them
	// only when they changed (each synchronous copy waits behind the copy
	// engine's queue, busy with a settling shadow).
	if grown || !bytes.Equal(desc, r.lastDesc) {
		r.lastDesc = nil
		if err := cuda.MemcpyHtoD(r.desc.addr, desc); err != nil {
			return nil, err
		}
		r.lastDesc = desc
	}
	n := fingerprint.SumBytes * len(rs)
	if r.sumsHost == nil || len(r.sumsHost.Bytes()) < n {
		if r.sumsHost != nil {
			r.sumsHost.Free()
			r.sumsHost = nil
		}
		buf, err := cuda.MemAllocHost(max(n, 64<<10))
		if err != nil {
			return nil, err
		}
		r.sumsHost = buf
	}
	grid := mneme.Dim3{X: uint32(min(len(rs), 1<<30)), Y: 1, Z: 1}
	block := mneme.Dim3{X: fingerprint.Threads, Y: 1, Z: 1}
	args := [][]byte{binary.LittleEndian.AppendUint64(nil, r.desc.addr), binary.LittleEndian.AppendUint64(nil, r.sums.addr),
		binary.LittleEndian.AppendUint32(nil, uint32(len(rs)))}
	if err := r.fn.Launch(grid, block, 0, r.stream, args); err != nil {
		return nil, err
	}
	out := r.sumsHost.Bytes()[:n]
	if err := cuda.MemcpyDtoHAsync(out, r.sums.addr, r.stream); err != nil {
		return nil, err
	}
	if err := r.stream.Synchronize(); err != nil {
		return nil, fmt.Errorf("fingerprint kernel: %w", err)
	}
	return fingerprint.DecodeSums(out, len(rs))
}
