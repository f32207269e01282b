package main

/*
#cgo CFLAGS: -O2 -Wall -I${SRCDIR}/shim
#include "host.h"
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/deploy"
	"github.com/mneme-gpu/mneme/record"
)

// Deployment: the application runs with MNEME_TUNED_KERNELS or
// PROTEUS_TUNED_KERNELS set, or has kernels annotated for run-time
// specialization. A listed kernel's launches run its embedded IR
// compiled under the tuned configuration; everything that goes wrong falls
// back to the application's own code with one warning naming the kernel.

const (
	envTunedKernels   = "MNEME_TUNED_KERNELS"
	envProteusKernels = "PROTEUS_TUNED_KERNELS"
	envMnemeBin       = "MNEME_BIN"
	// Launches may ask for more dynamic shared memory than the default 48 KiB
	// only after the function opts in, as the application did for its own.
	defaultSharedLimit = 48 << 10
)

// deployer holds what deployment knows for the whole process.
type deployer struct {
	plans      deploy.Plans
	cache      *deploy.Cache
	executable string
	irHash     string
	mnemeBin   string
	device     int
	arch       string
	driver     int
	cuLaunch   uintptr
	// maxVariants bounds each kernel's specialized variants; beyond it the
	// unspecialized tuned code runs.
	maxVariants int

	mu      sync.Mutex
	kernels map[int]*deployedKernel
}

// deployedKernel is one tuned kernel's state.
type deployedKernel struct {
	mu       sync.Mutex // one launch at a time builds the kernel's variants
	name     string
	plan     *deploy.Plan
	facts    *deploy.KernelFacts
	variants *deploy.Variants[*variant]
	generic  *variant // the unspecialized tuned code, beyond the variant bound
	disabled bool
	// hostVars are the application's variables by device name, read once.
	hostVars map[string]hostVar
	// hot maps the launches seen (hotKey) to their variants.
	hot    map[string]*variant
	hotBuf []byte
}

// variant is one loaded compilation of a kernel.
type variant struct {
	fn        *cuda.Function
	copies    []globalCopy
	sharedMax int
}

type globalCopy struct{ dst, src, size uint64 }

type hostVar struct {
	addr, size uint64
	constant   bool
}

var dep *deployer

func warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mneme: "+format+"\n", args...)
}

// deployInit reads the tuned files and prepares the cache; it never fails
// the application: without a usable plan every kernel runs its own code.
func deployInit(api *C.struct_mneme_host_api) C.int {
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
	p := proc // a recording's, when deploying beside it
	if p == nil {
		var err error
		if p, err = newProcess(); err != nil {
			warnf("tuned kernels disabled: %v", err)
			return 0
		}
		proc = p
	}
	d := &deployer{plans: plans, cache: deploy.NewCache(deploy.DefaultCacheDir()), kernels: map[int]*deployedKernel{}}
	var err error
	if d.executable, err = os.Executable(); err != nil {
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
	d.irHash = deploy.IRHash(bitcodes)
	props, err := p.dev.Props()
	if err != nil {
		warnf("tuned kernels disabled: %v", err)
		return 0
	}
	d.arch, d.device = props.Arch(), props.Ordinal
	d.driver, _ = cuda.DriverVersion()
	if d.cuLaunch, err = cuda.LaunchKernelEntry(); err != nil {
		warnf("tuned kernels disabled: %v", err)
		return 0
	}
	d.mnemeBin = mnemeBinary(C.GoString(api.rt_lib_path))
	if d.maxVariants, err = deploy.MaxVariantsFromEnv(); err != nil {
		warnf("%v", err)
	}
	for name, plan := range plans {
		if plan.TunedGPU != "" && plan.TunedGPU != props.Name {
			warnf("%s: %s was tuned on %s, this GPU is %s", plan.Source, name, plan.TunedGPU, props.Name)
		}
	}
	dep = d
	record.Trace("deploy", "init: %d tuned kernels, cache %s", len(plans), deploy.DefaultCacheDir())
	return 0
}

// mnemeBinary is the compiler the runtime runs: $MNEME_BIN, else the mneme
// of the prefix the library was loaded from, else mneme on PATH.
func mnemeBinary(libPath string) string {
	if b := os.Getenv(envMnemeBin); b != "" {
		return b
	}
	if libPath != "" {
		b := filepath.Join(filepath.Dir(filepath.Dir(libPath)), "bin", "mneme")
		if _, err := os.Stat(b); err == nil {
			return b
		}
	}
	return "mneme"
}

//export mneme_rt_deploy_launch
func mneme_rt_deploy_launch(fn unsafe.Pointer, index C.int, gx, gy, gz, bx, by, bz C.unsigned, args *unsafe.Pointer, shared C.size_t, stream C.cudaStream_t, ptsz C.int, answer *C.struct_mneme_deploy_answer) C.cudaError_t {
	answer.handled = C.MNEME_LAUNCH_FORWARD_ALWAYS
	if dep == nil || index < 0 {
		return 0
	}
	k := kernelAt(int(index), fn)
	if k.err != nil {
		return 0
	}
	dk := dep.kernel(int(index), k.reg.Name)
	if dk == nil {
		return 0
	}
	if err := proc.enter(); err != nil {
		return 0
	}
	grid := mneme.Dim3{X: uint32(gx), Y: uint32(gy), Z: uint32(gz)}
	block := mneme.Dim3{X: uint32(bx), Y: uint32(by), Z: uint32(bz)}
	var params []unsafe.Pointer
	if len(k.paramSizes) > 0 {
		params = unsafe.Slice(args, len(k.paramSizes))
	}
	s := uintptr(unsafe.Pointer(stream))
	if ptsz != 0 && s == 0 {
		s = 2 // CU_STREAM_PER_THREAD
	}
	fast, err := dep.launch(dk, grid, block, params, k.paramSizes, uint32(shared), s)
	if err != nil {
		dep.disable(dk, err)
		return 0
	}
	answer.handled = C.MNEME_LAUNCH_DONE
	if fast.v != nil {
		C.rth_set_fast_path(answer, C.uintptr_t(fast.v.fn.Handle()), C.uintptr_t(dep.cuLaunch))
		tb, rb := dk.plan.TunedBlock, dk.plan.RecordedBlock
		answer.block[0], answer.block[1], answer.block[2] = C.unsigned(tb.X), C.unsigned(tb.Y), C.unsigned(tb.Z)
		answer.recorded_block[0], answer.recorded_block[1], answer.recorded_block[2] = C.unsigned(rb.X), C.unsigned(rb.Y), C.unsigned(rb.Z)
		if fast.keyed {
			answer.keyed = 1
			if dk.plan.Config.SpecializeDims {
				answer.dims_folded = 1
			}
			answer.nfolded = C.int(len(fast.folded))
			for i, a := range fast.folded {
				answer.folded[i] = C.int(a)
				answer.folded_size[i] = C.unsigned(k.paramSizes[a])
			}
			answer.shared_max = C.unsigned(max(fast.v.sharedMax, defaultSharedLimit))
		}
	}
	return 0
}

// fastPath is what the shim may run without asking again: nothing (v nil),
// v for every launch, or (keyed) v for the launches whose block, grid when
// dimensions are specialized, and folded arguments equal this launch's.
type fastPath struct {
	v      *variant
	keyed  bool
	folded []int
}

// maxKeyedArg bounds an argument the shim keys variants by (as the shim's
// VARIANT_ARG_MAX does); kernels with larger specialized arguments keep
// asking.
const maxKeyedArg = 4096

// fastPathFor says what the shim may remember of a launch that ran v.
func (dk *deployedKernel) fastPathFor(v *variant, sizes []uint64) fastPath {
	if len(v.copies) > 0 {
		return fastPath{} // the __constant__ copies are refreshed here
	}
	cfg := dk.plan.Config
	folded := deploy.FoldedArgs(cfg, *dk.facts)
	if len(folded) == 0 && !cfg.SpecializeDims {
		return fastPath{v: v}
	}
	if len(folded) > C.MNEME_DEPLOY_MAX_FOLDED {
		return fastPath{}
	}
	for _, a := range folded {
		if a < 0 || a >= len(sizes) || sizes[a] > maxKeyedArg {
			return fastPath{}
		}
	}
	return fastPath{v: v, keyed: true, folded: folded}
}

// kernel returns the deployment state of a tuned kernel, nil when the
// kernel is not listed, was best as the application compiled it, or was
// disabled.
func (d *deployer) kernel(index int, name string) *deployedKernel {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dk, ok := d.kernels[index]; ok {
		if dk == nil || dk.disabled {
			return nil
		}
		return dk
	}
	plan := d.plans[name]
	if plan == nil || plan.Original {
		d.kernels[index] = nil
		return nil
	}
	dk := &deployedKernel{name: name, plan: plan, variants: &deploy.Variants[*variant]{MaxVariants: d.maxVariants}}
	d.kernels[index] = dk
	return dk
}

func (d *deployer) disable(dk *deployedKernel, err error) {
	d.mu.Lock()
	first := !dk.disabled
	dk.disabled = true
	d.mu.Unlock()
	if first {
		warnf("tuned kernel %s: %v; the application's own code runs", dk.name, err)
		record.Trace("deploy", "disabled %s: %v", dk.name, err)
	}
}

// launch runs one launch of a tuned kernel. It returns what later launches
// may run straight from the shim: the variant, for every launch or for
// those with this launch's specialized values, unless a variable needs
// refreshing.
func (d *deployer) launch(dk *deployedKernel, grid, block mneme.Dim3, params []unsafe.Pointer, sizes []uint64, shared uint32, stream uintptr) (fastPath, error) {
	grid, block = dk.plan.Geometry(grid, block)
	dk.mu.Lock()
	// A launch like an earlier one finds its variant by the raw bytes that
	// key it, without building the cache key: this path runs between the
	// application's launch call and the GPU starting the kernel.
	hot := dk.hotKey(grid, block, params, sizes)
	v := dk.hot[string(hot)]
	var err error
	if v == nil {
		args := make([][]byte, len(sizes))
		for i, n := range sizes {
			args[i] = C.GoBytes(params[i], C.int(n))
		}
		v, err = d.variantFor(dk, dk.plan.ConfigFor(block), args, grid, block)
		if err == nil && dk.facts != nil && len(dk.hot) < maxHotLaunches {
			if dk.hot == nil {
				dk.hot = map[string]*variant{}
			}
			dk.hot[string(dk.hotKey(grid, block, params, sizes))] = v
		}
	}
	dk.mu.Unlock()
	if err != nil {
		return fastPath{}, err
	}
	if int(shared) > defaultSharedLimit && int(shared) > v.sharedMax {
		if err := v.fn.SetMaxDynamicShared(int(shared)); err != nil {
			return fastPath{}, err
		}
		v.sharedMax = int(shared)
	}
	for _, c := range v.copies {
		if err := cuda.MemcpyDtoDAsync(c.dst, c.src, c.size, cuda.Stream(stream)); err != nil {
			return fastPath{}, fmt.Errorf("refreshing a __constant__ variable: %w", err)
		}
	}
	var p unsafe.Pointer
	if len(params) > 0 {
		p = unsafe.Pointer(&params[0])
	}
	if err := v.fn.LaunchParams(grid, block, shared, stream, p); err != nil {
		return fastPath{}, err
	}
	return dk.fastPathFor(v, sizes), nil
}

// maxHotLaunches bounds a kernel's table of launches seen: beyond the
// variant bound, ever new values all map to the unspecialized code.
const maxHotLaunches = 4096

// hotKey is what tells a kernel's launches apart for its variants: the
// block (the configuration depends on it), the grid when dimensions are
// folded, and the bytes of the folded arguments. Without facts yet it is
// nil, which no launch is remembered under.
func (dk *deployedKernel) hotKey(grid, block mneme.Dim3, params []unsafe.Pointer, sizes []uint64) []byte {
	if dk.facts == nil {
		return nil
	}
	key := dk.hotBuf[:0]
	for _, v := range []uint32{block.X, block.Y, block.Z} {
		key = binary.LittleEndian.AppendUint32(key, v)
	}
	if dk.plan.Config.SpecializeDims {
		for _, v := range []uint32{grid.X, grid.Y, grid.Z} {
			key = binary.LittleEndian.AppendUint32(key, v)
		}
	}
	for _, i := range deploy.FoldedArgs(dk.plan.Config, *dk.facts) {
		if i >= 0 && i < len(params) {
			key = append(key, unsafe.Slice((*byte)(params[i]), sizes[i])...)
		}
	}
	dk.hotBuf = key
	return key
}

// variantFor finds or builds the variant of dk for this launch: memory,
// then the disk cache, then the compiler.
func (d *deployer) variantFor(dk *deployedKernel, cfg mneme.Config, args [][]byte, grid, block mneme.Dim3) (*variant, error) {
	if !cfg.SpecializeDims {
		cfg.Grid, cfg.Block = mneme.Dim3{}, mneme.Dim3{}
	} else {
		cfg.Grid, cfg.Block = grid, block
	}
	if dk.facts == nil {
		if f, ok := d.cache.GetFacts(d.irHash, dk.name); ok {
			dk.facts = f
		}
	}
	if dk.facts == nil {
		// First sight of the kernel: compiling tells which arguments fold.
		resp, err := d.compile(dk, cfg, args)
		if err != nil {
			return nil, err
		}
		facts := resp.Facts()
		dk.facts = &facts
		if err := d.cache.PutFacts(d.irHash, dk.name, &facts); err != nil {
			record.Trace("deploy", "facts of %s not cached: %v", dk.name, err)
		}
		key := d.key(dk, cfg, args)
		d.store(dk, key, resp.Cubin)
		return d.install(dk, key, resp.Cubin, true)
	}
	key := d.key(dk, cfg, args)
	if v, ok := dk.variants.Lookup(key.Hash()); ok {
		return v, nil
	}
	if dk.variants.Len() >= d.maxVariants {
		if dk.generic != nil {
			return dk.generic, nil
		}
		generic := cfg
		generic.Specialize, generic.SpecializeArgs, generic.SpecializeDims = false, nil, false
		generic.Grid, generic.Block = mneme.Dim3{}, mneme.Dim3{}
		v, err := d.build(dk, d.key(dk, generic, args), generic, args, false)
		if err != nil {
			return nil, err
		}
		dk.generic = v
		return v, nil
	}
	return d.build(dk, key, cfg, args, true)
}

// build loads a variant from the disk cache or compiles it.
func (d *deployer) build(dk *deployedKernel, key deploy.Key, cfg mneme.Config, args [][]byte, remember bool) (*variant, error) {
	cubin, hit, err := d.cache.Get(key)
	if err != nil {
		warnf("deployment cache: %v; compiling again", err)
	}
	if cubin != nil {
		record.Trace("deploy", "cache hit (%s) %s", hit, dk.name)
		return d.install(dk, key, cubin, remember)
	}
	resp, err := d.compile(dk, cfg, args)
	if err != nil {
		return nil, err
	}
	d.store(dk, key, resp.Cubin)
	return d.install(dk, key, resp.Cubin, remember)
}

// store caches a cubin just compiled; one read from the cache is not
// written back.
func (d *deployer) store(dk *deployedKernel, key deploy.Key, cubin []byte) {
	if err := d.cache.Put(key, cubin); err != nil {
		record.Trace("deploy", "variant of %s not cached: %v", dk.name, err)
	}
}

// install loads a cubin and remembers it among the kernel's variants.
func (d *deployer) install(dk *deployedKernel, key deploy.Key, cubin []byte, remember bool) (*variant, error) {
	mod, err := cuda.LoadModule(cubin)
	if err != nil {
		return nil, fmt.Errorf("loading its tuned code: %w", err)
	}
	fn, err := mod.Function(dk.name)
	if err != nil {
		return nil, err
	}
	v := &variant{fn: fn}
	if err := d.linkGlobals(dk, mod, v); err != nil {
		return nil, err
	}
	if remember {
		dk.variants.Add(key.Hash(), v)
	}
	return v, nil
}

// linkGlobals makes the variant's copies of the application's variables
// agree with the application: a __constant__ variable is refreshed from the
// application's before every launch; a __device__ variable the kernel may
// write cannot be shared, so the kernel keeps its own code.
func (d *deployer) linkGlobals(dk *deployedKernel, mod *cuda.Module, v *variant) error {
	if len(dk.facts.Globals) == 0 {
		return nil
	}
	if dk.hostVars == nil {
		dk.hostVars = map[string]hostVar{}
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
			dk.hostVars[C.GoString(reg.device_name)] = hostVar{addr: uint64(addr), size: uint64(size), constant: reg.constant != 0}
		}
	}
	for _, g := range dk.facts.Globals {
		hv, shared := dk.hostVars[g.Name]
		if !shared {
			continue // the code's own (a literal, a table): its copy is right
		}
		if !hv.constant && !g.ReadOnly {
			return fmt.Errorf("its code uses the __device__ variable %s, which the application also sees (deployment does not share writable variables)", g.Name)
		}
		addr, size, err := mod.Global(g.Name)
		if err != nil {
			return err
		}
		v.copies = append(v.copies, globalCopy{dst: addr, src: hv.addr, size: min(size, hv.size)})
	}
	return nil
}

// key is the cache key of a variant for this launch.
func (d *deployer) key(dk *deployedKernel, cfg mneme.Config, args [][]byte) deploy.Key {
	return deploy.VariantKey(d.irHash, dk.name, cfg, *dk.facts, args, d.arch, d.driver, os.Getenv("MNEME_PTXAS"))
}

// compile runs `mneme deploy compile-variant`: LLVM stays out of the
// application's process.
func (d *deployer) compile(dk *deployedKernel, cfg mneme.Config, args [][]byte) (*deploy.CompileResponse, error) {
	req, err := json.Marshal(deploy.CompileRequest{Executable: d.executable, Kernel: dk.name, Config: cfg, Args: args})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	cmd := exec.Command(d.mnemeBin, "deploy", "compile-variant", "--device", strconv.Itoa(d.device))
	cmd.Stdin = bytes.NewReader(req)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("compiling its tuned configuration (%s deploy compile-variant): %s", d.mnemeBin, msg)
	}
	var resp deploy.CompileResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("compiling its tuned configuration: unreadable answer from %s: %v", d.mnemeBin, err)
	}
	record.Trace("deploy", "compiled %s in %.0f ms (%d registers)", dk.name, time.Since(start).Seconds()*1e3, resp.Registers)
	return &resp, nil
}
