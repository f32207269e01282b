package main

/*
#cgo CFLAGS: -O2 -Wall -I${SRCDIR}/shim
#include "host.h"
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/deploy"
	"github.com/mneme-gpu/mneme/record"
)

// Deployment: the application runs with MNEME_TUNED_KERNELS or
// PROTEUS_TUNED_KERNELS set, or has kernels annotated for run-time
// specialization. What a launch runs is decided by deploy.Runtime; this
// file is its glue to the shim and the driver: it reads the launch, loads
// code, copies variables and launches.

const (
	envTunedKernels   = "MNEME_TUNED_KERNELS"
	envProteusKernels = "PROTEUS_TUNED_KERNELS"
)

// policyLimits are deploy_policy.h's limits, read through cgo: the shim
// applies the same.
var policyLimits = deploy.Limits{
	MaxFolded:     C.MNEME_DEPLOY_MAX_FOLDED,
	MaxKeyedArg:   C.MNEME_DEPLOY_MAX_KEYED_ARG,
	MaxKeys:       C.MNEME_DEPLOY_MAX_KEYS,
	DefaultShared: C.MNEME_DEPLOY_DEFAULT_SHARED,
}

// deployer holds what deployment knows for the whole process.
type deployer struct {
	rt       *deploy.Runtime
	cuLaunch uintptr

	mu      sync.Mutex
	entries map[int]*deployEntry // by the shim's kernel index
}

// deployEntry is a launched kernel: its deployment state (nil: the
// application's own code) and parameter sizes.
type deployEntry struct {
	k     *deploy.Kernel
	sizes []int
	err   error
}

// loadedCode is a variant loaded into the application's context
// (deploy.Variant.Code).
type loadedCode struct {
	fn     *cuda.Function
	copies []globalCopy
}

type globalCopy struct{ dst, src, size uint64 }

var dep *deployer

func warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mneme: "+format+"\n", args...)
}

func traceDeploy(format string, args ...any) { record.Trace("deploy", format, args...) }

// deployInit reads the tuned files, prepares the cache and starts loading
// the cached code of the tuned kernels in the background; it never fails
// the application: without a usable plan every kernel runs its own code.
func deployInit(api *C.struct_mneme_host_api) C.int {
	// Whatever happens below, the kernels no plan covers run the
	// application's code from their first launch on, decided in the shim:
	// a tuned file that lists few (or none) of the application's kernels
	// costs the others nothing, not even one call into this library.
	var planned deploy.Plans
	defer func() { forwardUnplanned(planned) }()
	plans, errs := deploy.Load(os.Getenv(envTunedKernels), os.Getenv(envProteusKernels))
	for _, err := range errs {
		warnf("%v; the kernels it lists run the application's own code", err)
	}
	if plans == nil {
		plans = deploy.Plans{}
	}
	if api.jit_start != nil && api.jit_size > 0 {
		anns, err := appabi.DecodeJITSection(C.GoBytes(unsafe.Pointer(api.jit_start), C.int(api.jit_size)))
		if err != nil {
			warnf("%v; the annotated kernels it does not list run the application's own code", err)
		}
		plans.AddAnnotations(anns)
	}
	if len(plans) == 0 {
		return 0
	}
	enabled := plans // forwardUnplanned reads planned once init succeeded
	p := proc        // a recording's, when deploying beside it
	if p == nil {
		var err error
		if p, err = newProcess(); err != nil {
			warnf("tuned kernels disabled: %v", err)
			return 0
		}
		proc = p
	}
	executable, err := os.Executable()
	if err != nil {
		warnf("tuned kernels disabled: cannot locate the executable: %v", err)
		return 0
	}
	entries, err := p.irEntries()
	if err != nil {
		warnf("tuned kernels disabled: %v", err)
		return 0
	}
	bitcodes := make([][]byte, len(entries))
	for i, e := range entries {
		bitcodes[i] = e.Bitcode
	}
	props, err := p.dev.Props()
	if err != nil {
		warnf("tuned kernels disabled: %v", err)
		return 0
	}
	driver, _ := cuda.DriverVersion()
	cuLaunch, err := cuda.LaunchKernelEntry()
	if err != nil {
		warnf("tuned kernels disabled: %v", err)
		return 0
	}
	maxVariants, err := deploy.MaxVariantsFromEnv()
	if err != nil {
		warnf("%v", err)
	}
	for name, plan := range plans {
		if plan.TunedGPU != "" && plan.TunedGPU != props.Name {
			warnf("%s: %s was tuned on %s, this GPU is %s", plan.Source, name, plan.TunedGPU, props.Name)
		}
	}
	rt := &deploy.Runtime{
		Plans: plans, Store: deploy.NewCache(deploy.DefaultCacheDir()),
		Compiler: &deploy.CommandCompiler{Bin: deploy.MnemeBinary(C.GoString(api.rt_lib_path)),
			Executable: executable, Device: props.Ordinal, Trace: traceDeploy},
		Loader: driverLoader{}, IRHash: deploy.IRHash(bitcodes), Arch: props.Arch(), Driver: driver,
		Ptxas: os.Getenv("MNEME_PTXAS"), MaxVariants: maxVariants, Limits: policyLimits,
		Warn: func(msg string) { warnf("%s", msg) }, Trace: traceDeploy,
	}
	dep = &deployer{rt: rt, cuLaunch: cuLaunch, entries: map[int]*deployEntry{}}
	planned = enabled
	traceDeploy("init: %d tuned kernels, cache %s", len(plans), deploy.DefaultCacheDir())
	// The tuned kernels' cached code loads beside the application, so a
	// kernel launched once does not pay for it at its launch. Started on a
	// thread of its own (the shim's, from the first allocation), the
	// library loads it before it reports ready: the launches that come
	// meanwhile run the application's own code without waiting, and the
	// first launch after finds the code on the GPU and, where every launch
	// runs the same code, runs it from the shim without calling in here.
	// Started by a launch, it loads beside the launches, and a launch of a
	// kernel being loaded waits for it.
	preload := func() {
		traceDeploy("preload: start")
		pre := rt.Preload()
		handed := dep.handToShim(pre)
		read := dep.readFoldingEntries()
		traceDeploy("preload: end, %d kernels loaded from the cache, %d run from the shim, %d folding kernels' parameters read", len(pre), handed, read)
	}
	if api.background != 0 {
		if err := p.enter(); err == nil {
			preload()
		}
		return 0
	}
	go func() {
		runtime.LockOSThread() // the context made current stays this goroutine's
		defer runtime.UnlockOSThread()
		if err := p.enter(); err != nil {
			return
		}
		preload()
	}()
	return 0
}

// byLaunch says a kernel's entry is read by its first launch (entry's by).
const byLaunch = "launch"

// readFoldingEntries reads, beside the application, the entry of every
// registered kernel whose tuned configurations fold argument values: its
// parameter sizes come from the driver (two calls), which its first launch
// would otherwise pay on the application's critical path. It returns how
// many it read.
func (d *deployer) readFoldingEntries() int {
	n := 0
	for i := 0; i < int(C.rth_kernel_count()); i++ {
		var reg C.struct_mneme_kernel_reg
		if C.rth_kernel_at(C.int(i), &reg) == 0 || reg.host_fun == nil {
			continue
		}
		k := d.rt.Kernel(C.GoString(reg.device_name))
		if k == nil || !k.FoldsArgs() {
			continue
		}
		if e := d.entry(i, unsafe.Pointer(reg.host_fun), "preload"); e.err == nil {
			n++
		}
	}
	return n
}

// forwardUnplanned tells the shim that every registered kernel plans does
// not name runs the application's code (all of them when plans is nil: the
// tuned kernels are disabled).
func forwardUnplanned(plans deploy.Plans) {
	var a C.struct_mneme_deploy_answer
	a.handled = C.MNEME_LAUNCH_FORWARD_ALWAYS
	var zero [3]C.unsigned
	n := 0
	registered := map[string]bool{}
	for i := 0; i < int(C.rth_kernel_count()); i++ {
		var reg C.struct_mneme_kernel_reg
		if C.rth_kernel_at(C.int(i), &reg) == 0 {
			continue
		}
		name := C.GoString(reg.device_name)
		registered[name] = true
		if _, ok := plans[name]; ok {
			continue
		}
		n += int(C.rth_deploy_preloaded(C.int(i), &a, &zero[0], &zero[0], 0, nil))
	}
	traceDeploy("init: %d kernels no tuned file lists run the application's code from the shim", n)
	// A tuned kernel the executable does not register never runs its
	// tuned code (another build's file, a name spelled otherwise).
	for _, name := range slices.Sorted(maps.Keys(plans)) {
		if !registered[name] {
			traceDeploy("init: tuned kernel %s is not registered by this executable", name)
		}
	}
}

// handToShim gives the shim the fast paths of each preloaded kernel
// (deploy.Preloaded.Fast), under every index the kernel is registered at,
// and returns how many kernels it took any of.
func (d *deployer) handToShim(pre []deploy.Preloaded) int {
	indices := map[string][]int{}
	for _, p := range pre {
		if len(p.Fast) > 0 {
			indices[p.Kernel.Name] = nil
		}
	}
	if len(indices) == 0 {
		return 0
	}
	for i := 0; i < int(C.rth_kernel_count()); i++ {
		var reg C.struct_mneme_kernel_reg
		if C.rth_kernel_at(C.int(i), &reg) == 0 {
			continue
		}
		name := C.GoString(reg.device_name)
		if idx, ok := indices[name]; ok {
			indices[name] = append(idx, i)
		}
	}
	handed := 0
	for _, p := range pre {
		took := 0
		for _, f := range p.Fast {
			var a C.struct_mneme_deploy_answer
			a.handled = C.MNEME_LAUNCH_DONE
			C.rth_set_fast_path(&a, C.uintptr_t(f.Variant.Code.(*loadedCode).fn.Handle()), C.uintptr_t(d.cuLaunch))
			tb, rb := f.TunedBlock, f.RecordedBlock
			a.block[0], a.block[1], a.block[2] = C.unsigned(tb.X), C.unsigned(tb.Y), C.unsigned(tb.Z)
			a.recorded_block[0], a.recorded_block[1], a.recorded_block[2] = C.unsigned(rb.X), C.unsigned(rb.Y), C.unsigned(rb.Z)
			a.shared_max = C.unsigned(max(f.Variant.SharedMax, policyLimits.DefaultShared))
			if f.Keyed {
				setKey(&a, f.FastPath)
			}
			grid := [3]C.unsigned{C.unsigned(f.Grid.X), C.unsigned(f.Grid.Y), C.unsigned(f.Grid.Z)}
			block := [3]C.unsigned{C.unsigned(f.Block.X), C.unsigned(f.Block.Y), C.unsigned(f.Block.Z)}
			args, free := cArgs(f.Args)
			for _, i := range indices[p.Kernel.Name] {
				took += int(C.rth_deploy_preloaded(C.int(i), &a, &grid[0], &block[0], C.size_t(f.Shared), args))
			}
			free()
		}
		if took > 0 {
			handed++
			traceDeploy("preload %s: the shim runs its launches (%d fast paths)", p.Kernel.Name, took)
		}
	}
	return handed
}

// cArgs is values as a launch's argument array in C memory (the shim
// reads the folded entries of it; nil entries stay NULL), and the function
// that frees it; nil when there are no values.
func cArgs(values [][]byte) (*unsafe.Pointer, func()) {
	if len(values) == 0 {
		return nil, func() {}
	}
	ptrSize := C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))
	array := C.calloc(C.size_t(len(values)), ptrSize)
	slots := unsafe.Slice((*unsafe.Pointer)(array), len(values))
	for i, v := range values {
		if v != nil {
			slots[i] = C.CBytes(v)
		}
	}
	return (*unsafe.Pointer)(array), func() {
		for _, p := range slots {
			C.free(p)
		}
		C.free(array)
	}
}

// driverLoader loads cubins into the application's context through the
// driver (deploy.Loader).
type driverLoader struct{}

func (driverLoader) Load(kernel string, cubin []byte, links []deploy.GlobalLink) (any, error) {
	if err := proc.enter(); err != nil {
		return nil, err
	}
	mod, err := cuda.LoadModule(cubin)
	if err != nil {
		return nil, err
	}
	fn, err := mod.Function(kernel)
	if err != nil {
		return nil, err
	}
	// Lazy loading (CUDA's default) would put the code on the GPU at its
	// first launch, on the application's critical path: load it now.
	if loaded, err := fn.Load(); err != nil {
		return nil, err
	} else if loaded {
		traceDeploy("loaded %s on the GPU", kernel)
	}
	code := &loadedCode{fn: fn}
	if len(links) == 0 {
		return code, nil
	}
	for _, l := range links {
		addr, size, err := mod.Global(l.Name)
		if err != nil {
			return nil, err
		}
		code.copies = append(code.copies, globalCopy{dst: addr, src: l.Host.Addr, size: min(size, l.Host.Size)})
	}
	return code, nil
}

// HostVars reads the shim's table of the application's device variables.
func (driverLoader) HostVars() map[string]deploy.HostVar {
	vars := map[string]deploy.HostVar{}
	for i := 0; i < int(C.rth_var_count()); i++ {
		var reg C.struct_mneme_var_reg
		if C.rth_var_at(C.int(i), &reg) == 0 {
			continue
		}
		var addr C.uintptr_t
		var size C.size_t
		if C.rth_symbol_address(reg.host_var, &addr, &size) != 0 {
			continue
		}
		vars[C.GoString(reg.device_name)] = deploy.HostVar{Addr: uint64(addr), Size: uint64(size), Constant: reg.constant != 0}
	}
	return vars
}

// entry returns the deployment state and parameter sizes of a launched
// kernel, read once. The sizes come from the kernel's facts when its
// configuration folds no argument (their bytes then key nothing), which
// spares the first launch a lookup of the application's own function;
// otherwise from the driver, exactly. by says who reads it first: byLaunch,
// or the preload, which reads the folding kernels' beside the application.
func (d *deployer) entry(index int, fn unsafe.Pointer, by string) *deployEntry {
	d.mu.Lock()
	e := d.entries[index]
	d.mu.Unlock()
	if e != nil {
		return e
	}
	// Read without the lock: the kernel's facts may wait for its preload,
	// which must not hold up the other kernels' launches. Two first
	// launches of one kernel read alike; the first stored is kept.
	e = d.readEntry(index, fn, by)
	d.mu.Lock()
	defer d.mu.Unlock()
	if prev := d.entries[index]; prev != nil {
		return prev
	}
	d.entries[index] = e
	return e
}

func (d *deployer) readEntry(index int, fn unsafe.Pointer, by string) *deployEntry {
	e := &deployEntry{}
	var reg C.struct_mneme_kernel_reg
	if C.rth_kernel_at(C.int(index), &reg) == 0 {
		e.err = fmt.Errorf("kernel %d is not registered", index)
		return e
	}
	if by == byLaunch {
		traceDeploy("first launch of %s: entered the library", C.GoString(reg.device_name))
	} else {
		traceDeploy("%s: read the entry of %s", by, C.GoString(reg.device_name))
	}
	if e.k = d.rt.Kernel(C.GoString(reg.device_name)); e.k == nil {
		return e
	}
	if sizes := e.k.ArgSizes(); sizes != nil && !e.k.FoldsArgs() {
		e.sizes = sizes
		return e
	}
	k := kernelAt(index, fn)
	if k.err != nil {
		e.err = k.err
		return e
	}
	for _, n := range k.paramSizes {
		e.sizes = append(e.sizes, int(n))
	}
	return e
}

//export mneme_rt_deploy_launch
func mneme_rt_deploy_launch(fn unsafe.Pointer, index C.int, gx, gy, gz, bx, by, bz C.unsigned, args *unsafe.Pointer, shared C.size_t, stream C.cudaStream_t, ptsz C.int, answer *C.struct_mneme_deploy_answer) C.cudaError_t {
	answer.handled = C.MNEME_LAUNCH_FORWARD_ALWAYS
	if dep == nil || index < 0 {
		return 0
	}
	e := dep.entry(int(index), fn, byLaunch)
	if e.err != nil && e.k != nil {
		// Its launches cannot be read: the application's code runs them,
		// said once (this was silent, and looked like a tuned file that
		// changed nothing).
		dep.rt.Disable(e.k, fmt.Errorf("its parameters cannot be read: %w", e.err))
		return 0
	}
	if e.err != nil || e.k == nil {
		return 0
	}
	k := e.k
	if dep.rt.Kernel(k.Name) == nil { // disabled since
		return 0
	}
	if err := proc.enter(); err != nil {
		return 0
	}
	grid := mneme.Dim3{X: uint32(gx), Y: uint32(gy), Z: uint32(gz)}
	block := mneme.Dim3{X: uint32(bx), Y: uint32(by), Z: uint32(bz)}
	var params []unsafe.Pointer
	if len(e.sizes) > 0 {
		params = unsafe.Slice(args, len(e.sizes))
	}
	views := make([][]byte, len(params))
	for i, n := range e.sizes {
		views[i] = unsafe.Slice((*byte)(params[i]), n)
	}
	s := uintptr(unsafe.Pointer(stream))
	if ptsz != 0 && s == 0 {
		s = 2 // CU_STREAM_PER_THREAD
	}
	lp, err := dep.rt.Prepare(k, grid, block, views, uint32(shared))
	if err == nil && lp.Variant == nil {
		// The application's own code runs this launch (lp.Own says why):
		// the shim launches it, and remembers the key when it may.
		answer.handled = C.MNEME_LAUNCH_FORWARD
		if lp.Fast.Own {
			answer.own_code = 1
			setKey(answer, lp.Fast)
		}
		return 0
	}
	if err == nil {
		err = dep.launch(lp, params, uint32(shared), s)
	}
	if err != nil {
		dep.rt.Disable(k, err)
		return 0
	}
	answer.handled = C.MNEME_LAUNCH_DONE
	if f := lp.Fast; f.Variant != nil {
		C.rth_set_fast_path(answer, C.uintptr_t(f.Variant.Code.(*loadedCode).fn.Handle()), C.uintptr_t(dep.cuLaunch))
		tb, rb := lp.TunedBlock, lp.RecordedBlock
		answer.block[0], answer.block[1], answer.block[2] = C.unsigned(tb.X), C.unsigned(tb.Y), C.unsigned(tb.Z)
		answer.recorded_block[0], answer.recorded_block[1], answer.recorded_block[2] = C.unsigned(rb.X), C.unsigned(rb.Y), C.unsigned(rb.Z)
		answer.shared_max = C.unsigned(max(f.Variant.SharedMax, policyLimits.DefaultShared))
		if f.Keyed {
			setKey(answer, f)
		}
	}
	return 0
}

// setKey tells the shim how f's launches are keyed.
func setKey(answer *C.struct_mneme_deploy_answer, f deploy.FastPath) {
	answer.keyed = 1
	if f.DimsFolded {
		answer.dims_folded = 1
	}
	if f.SharedKeyed {
		answer.shared_keyed = 1
	}
	answer.nfolded = C.int(len(f.Folded))
	for i, a := range f.Folded {
		answer.folded[i] = C.int(a)
		answer.folded_size[i] = C.unsigned(f.FoldedSizes[i])
	}
}

// launch performs what the runtime decided: opens the code up for the
// launch's shared memory, refreshes its __constant__ copies and launches it
// with the application's parameter array.
func (d *deployer) launch(lp deploy.LaunchPlan, params []unsafe.Pointer, shared uint32, stream uintptr) error {
	code := lp.Variant.Code.(*loadedCode)
	if lp.OptInShared {
		if err := code.fn.SetMaxDynamicShared(int(shared)); err != nil {
			return err
		}
		d.rt.SharedOpened(lp.Variant, shared)
	}
	for _, c := range code.copies {
		if err := cuda.MemcpyDtoDAsync(c.dst, c.src, c.size, cuda.Stream(stream)); err != nil {
			return fmt.Errorf("refreshing a __constant__ variable: %w", err)
		}
	}
	var p unsafe.Pointer
	if len(params) > 0 {
		p = unsafe.Pointer(&params[0])
	}
	return code.fn.LaunchParams(lp.Grid, lp.Block, shared, stream, p)
}
