package main

/*
#include "inject.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/deploy"
	"github.com/mneme-gpu/mneme/record"
)

// Deployment through the driver: with MNEME_TUNED_KERNELS set and no
// recording, the library applies the tuned entries of kernels recorded as
// machine code (deploy.MachineCodeRuntime) to the application's launches,
// changing cuLaunchKernel's parameters in place in CUPTI's enter callback.

// envTunedKernels names the tuned-kernels file (as for the runtime library).
const envTunedKernels = "MNEME_TUNED_KERNELS"

// dep is the deployment of this process; nil when not deploying.
var dep *deployer

type deployer struct {
	rt *deploy.MachineCodeRuntime

	mu sync.Mutex
	// images are the module images the application loaded, kept only when
	// some entry reassembles PTX (keep).
	images [][]byte
	keep   bool
	// ours are the functions of modules the library assembled (kept loaded
	// for the process's lifetime).
	ours    map[uint64]*cuda.Function
	modules []*cuda.Module
	warned  map[string]bool
}

// startDeploy reads the tuned file; nil when there is nothing to deploy.
func startDeploy() *deployer {
	path := os.Getenv(envTunedKernels)
	if path == "" {
		return nil
	}
	plans, errs := deploy.Load(path, "")
	d := &deployer{ours: map[uint64]*cuda.Function{}, warned: map[string]bool{}}
	for _, err := range errs {
		d.warn(err.Error())
	}
	if len(plans) == 0 {
		return nil
	}
	for _, p := range plans {
		d.keep = d.keep || p.Reassembles()
	}
	d.rt = &deploy.MachineCodeRuntime{Plans: plans, Asm: d, Warn: d.warn}
	record.Trace("inject", "deploy: %d tuned kernel(s) from %s", len(plans), path)
	return d
}

// warn prints a warning once, on the application's standard error.
func (d *deployer) warn(msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.warned[msg] {
		return
	}
	d.warned[msg] = true
	fmt.Fprintln(os.Stderr, "mneme deploy:", msg)
	record.Trace("inject", "deploy warning: %s", msg)
}

// image keeps a module image; its id, or -1 when images are not needed.
func (d *deployer) image(b []byte) int {
	if !d.keep {
		return -1
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.images = append(d.images, append([]byte(nil), b...))
	return len(d.images) - 1
}

// Assemble implements deploy.Assembler over the driver, in the
// application's context (the callback runs inside its launch).
func (d *deployer) Assemble(image int, kernel string, ptxasOpt, maxRegisters int) (uint64, error) {
	d.mu.Lock()
	var img []byte
	if image >= 0 && image < len(d.images) {
		img = d.images[image]
	}
	d.mu.Unlock()
	if img == nil {
		return 0, errors.New("the module it came from was not seen loading")
	}
	ctx, err := cuda.CurrentContext()
	if err != nil {
		return 0, err
	}
	props, err := ctx.Device().Props()
	if err != nil {
		return 0, err
	}
	arch, err := cuda.ParseArch(props.Arch())
	if err != nil {
		return 0, err
	}
	ptx, err := deploy.ReassemblyPTX(img, kernel, arch&0xffff)
	if err != nil {
		return 0, err
	}
	opt := ptxasOpt
	if opt == 0 {
		opt = -1 // the driver's default
	}
	res, err := cuda.LinkPTX(ptx, kernel, cuda.JITOptions{OptLevel: opt, MaxRegisters: maxRegisters, Arch: props.Arch()})
	if err != nil {
		return 0, err
	}
	mod, err := cuda.LoadModule(res.Cubin)
	if err != nil {
		return 0, err
	}
	fn, err := mod.Function(kernel)
	if err != nil {
		mod.Unload()
		return 0, err
	}
	d.mu.Lock()
	d.modules = append(d.modules, mod)
	d.ours[uint64(fn.Handle())] = fn
	d.mu.Unlock()
	record.Trace("inject", "deploy: kernel %s assembled from its PTX (%s)", kernel, res.Options)
	return uint64(fn.Handle()), nil
}

// Fits implements deploy.Assembler: the function's thread limit, and for a
// function of ours the dynamic shared memory the application had opened up
// on its own.
func (d *deployer) Fits(fn uint64, threads uint64, shared uint32) error {
	var max C.int
	if r := C.mi_max_threads(C.uintptr_t(fn), &max); r != 0 {
		return fmt.Errorf("its thread limit cannot be read (CUDA error %d)", int(r))
	}
	if threads > uint64(max) {
		return fmt.Errorf("%d threads per block exceed its limit of %d", threads, int(max))
	}
	d.mu.Lock()
	f := d.ours[fn]
	d.mu.Unlock()
	if f != nil && shared > 48<<10 {
		if err := f.SetMaxDynamicShared(int(shared)); err != nil {
			return err
		}
	}
	return nil
}

// finish traces what each tuned kernel's launches ran.
func (d *deployer) finish() {
	st := d.rt.Stats()
	sort.Slice(st, func(i, j int) bool { return st[i].Kernel < st[j].Kernel })
	for _, s := range st {
		record.Trace("inject", "deploy: kernel %s: %d launch(es), %d tuned, disabled %v", s.Kernel, s.Launches, s.Tuned, s.Disabled)
	}
}

// miDeployLaunch decides a launch while deploying: -1 no tuned entry (never
// ask again for this function), 0 unchanged, 1 changed (d updated).
//
//export miDeployLaunch
func miDeployLaunch(l *C.struct_mi_deploy) C.int {
	if dep == nil {
		return -1
	}
	name := C.GoString(l.name)
	if dep.rt.Plans[name] == nil {
		return -1
	}
	grid := mneme.Dim3{X: uint32(l.grid[0]), Y: uint32(l.grid[1]), Z: uint32(l.grid[2])}
	block := mneme.Dim3{X: uint32(l.block[0]), Y: uint32(l.block[1]), Z: uint32(l.block[2])}
	got := dep.rt.Launch(name, int(l.image), uint64(l.fn), grid, block, uint32(l.shared))
	if !got.Changed(grid, block) {
		return 0
	}
	l.fn = C.uintptr_t(got.Fn)
	l.grid = [3]C.uint{C.uint(got.Grid.X), C.uint(got.Grid.Y), C.uint(got.Grid.Z)}
	l.block = [3]C.uint{C.uint(got.Block.X), C.uint(got.Block.Y), C.uint(got.Block.Z)}
	return 1
}

// miDeployFailed: a launch miDeployLaunch changed failed with a CUDA error;
// the kernel's later launches run the application's code.
//
//export miDeployFailed
func miDeployFailed(name *C.char, result C.int) {
	if dep != nil {
		dep.rt.Failed(C.GoString(name), fmt.Errorf("CUDA error %d", int(result)))
	}
}
