// Package jit compiles one kernel's LLVM IR under a replay configuration:
// extraction and specialization of the IR, an LLVM pass pipeline, NVPTX code
// generation, and (with a CUDA context) ptxas through the driver's JIT linker.
// Results are cached in memory and on disk under a content hash of everything
// that can change the generated code, so replays and tuning trials that repeat
// a configuration never compile twice.
package jit

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/llvm"
)

// DefaultArch is the target used when neither the configuration nor a device names one.
const DefaultArch = "sm_90"

// Request is one compilation: the IR holding the kernel, which kernel, under
// which configuration, and the recorded argument bytes to fold in.
type Request struct {
	Name   string // for messages, e.g. the IR file
	IR     []byte // bitcode
	Kernel string // mangled name; empty means the module's only kernel
	Config mneme.Config
	Args   [][]byte // recorded argument bytes; needed when Config specializes
	// Keep names symbols besides the kernel that internalization must leave
	// visible: device globals that the host (or replay) looks up by name.
	Keep []string
}

// Times are the durations of the compile stages.
type Times struct {
	Preprocess time.Duration `json:"preprocess"`
	Optimize   time.Duration `json:"optimize"`
	Codegen    time.Duration `json:"codegen"`
	Ptxas      time.Duration `json:"ptxas"`
}

// Output is a compiled kernel.
type Output struct {
	Key          string   `json:"key"`
	Kernel       string   `json:"kernel"`
	Arch         string   `json:"arch"`
	PTX          []byte   `json:"ptx"`
	Cubin        []byte   `json:"cubin,omitempty"` // nil unless linked by the driver
	ObjSize      int      `json:"obj_size"`
	Registers    int      `json:"registers"`
	SpillStores  int      `json:"spill_stores"`
	SpillLoads   int      `json:"spill_loads"`
	StackBytes   int      `json:"stack_bytes"`
	LocalBytes   int      `json:"local_bytes"`
	ConstBytes   int      `json:"const_bytes"`
	SharedBytes  int      `json:"shared_bytes"`
	PtxasOptions []string `json:"ptxas_options,omitempty"`
	PtxasLog     string   `json:"ptxas_log,omitempty"`
	Times        Times    `json:"times"`
	// CacheHit says where a cached result came from: "memory", "disk" or "" (compiled now).
	CacheHit string `json:"-"`
}

// CompileError says which stage failed.
type CompileError struct {
	Stage string // "parse", "preprocess", "optimize", "codegen", "ptxas"
	Err   error
}

func (e *CompileError) Error() string { return e.Stage + ": " + e.Err.Error() }
func (e *CompileError) Unwrap() error { return e.Err }

// Options configure a Compiler.
type Options struct {
	CacheDir      string // "" keeps the cache in memory only
	MemoryEntries int    // 0 means 256
	// Context, when set, makes Compile run ptxas through the driver JIT (cubin
	// and resource usage); the context is made current on a locked OS thread.
	Context *cuda.Context
	// Arch overrides the default target when a configuration names none.
	Arch string
}

// Compiler compiles and caches kernels; safe for concurrent use.
type Compiler struct {
	opts     Options
	mem      *memoryCache
	disk     *diskCache
	mu       sync.Mutex
	inflight map[string]*call
	// fatal is the first LLVM fatal error or crash a compile trapped: LLVM
	// frames were abandoned mid-call, so this process's LLVM state is not
	// known to be sound (see Fatal).
	fatal error

	ptxasOnce sync.Once
	toolkit   bool // link with the toolkit's ptxas (its program or libnvJitLink)
	// ptxasProgram: the toolkit's ptxas program rather than libnvJitLink.
	ptxasProgram bool
	ptxasID      string // which ptxas links, for cache keys
}

type call struct {
	done chan struct{}
	out  *Output
	err  error
}

// NewCompiler makes a compiler with its caches.
func NewCompiler(opts Options) *Compiler {
	if opts.MemoryEntries <= 0 {
		opts.MemoryEntries = 256
	}
	c := &Compiler{opts: opts, mem: newMemoryCache(opts.MemoryEntries), inflight: map[string]*call{}}
	if opts.CacheDir != "" {
		c.disk = &diskCache{dir: opts.CacheDir}
	}
	return c
}

// Fatal is the first LLVM fatal error or crash a compile of this compiler
// trapped, nil if none: the process goes on, but a long-lived one (a
// worker) should be replaced rather than keep compiling with LLVM state the
// trap abandoned mid-call.
func (c *Compiler) Fatal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fatal
}

// Linking reports whether outputs carry a cubin.
func (c *Compiler) Linking() bool { return c.opts.Context != nil }

func (c *Compiler) arch(cfg mneme.Config) string {
	switch {
	case cfg.Arch != "":
		return cfg.Arch
	case c.opts.Arch != "":
		return c.opts.Arch
	}
	return DefaultArch
}

// Compile returns the compiled kernel, from a cache when it can.
func (c *Compiler) Compile(req *Request) (*Output, error) {
	if err := req.Config.Validate(); err != nil {
		return nil, &CompileError{Stage: "preprocess", Err: err}
	}
	key := c.Key(req)
	if out, ok := c.mem.get(key); ok {
		return withHit(out, "memory"), nil
	}
	// Collapse concurrent compiles of one key in this process; other
	// processes are kept correct by the disk cache's atomic renames.
	c.mu.Lock()
	if cl, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		<-cl.done
		if cl.err != nil {
			return nil, cl.err
		}
		return withHit(cl.out, "memory"), nil
	}
	cl := &call{done: make(chan struct{})}
	c.inflight[key] = cl
	c.mu.Unlock()

	cl.out, cl.err = c.compileUncached(key, req)
	if cl.err == nil {
		c.mem.put(key, cl.out)
	}
	c.mu.Lock()
	delete(c.inflight, key)
	c.mu.Unlock()
	close(cl.done)
	return cl.out, cl.err
}

func withHit(o *Output, hit string) *Output {
	cp := *o
	cp.CacheHit = hit
	return &cp
}

func (c *Compiler) compileUncached(key string, req *Request) (*Output, error) {
	if c.disk != nil {
		if out, err := c.disk.get(key); err == nil && (out.Cubin != nil || !c.Linking()) {
			out.CacheHit = "disk"
			return out, nil
		}
	}
	out, err := c.build(req)
	if err != nil {
		var fe *llvm.FatalError
		if errors.As(err, &fe) {
			c.mu.Lock()
			if c.fatal == nil {
				c.fatal = err
			}
			c.mu.Unlock()
		}
		return nil, err
	}
	out.Key = key
	if c.disk != nil {
		// A cache that cannot be written only costs speed: keep the result.
		_ = c.disk.put(key, out)
	}
	return out, nil
}

// prepare parses the IR and applies extraction and specialization; the
// float arguments to fold after optimization are returned.
func (c *Compiler) prepare(req *Request) (*llvm.Module, string, []int, error) {
	name := req.Name
	if name == "" {
		name = "kernel IR"
	}
	mod, err := llvm.ParseBitcode(req.IR, name)
	if err != nil {
		return nil, "", nil, &CompileError{Stage: "parse", Err: err}
	}
	kernel, err := resolveKernel(mod, req.Kernel, name)
	if err != nil {
		mod.Dispose()
		return nil, "", nil, &CompileError{Stage: "parse", Err: err}
	}
	mod, floats, err := preprocess(mod, kernel, req)
	if err != nil {
		return nil, "", nil, &CompileError{Stage: "preprocess", Err: err}
	}
	return mod, kernel, floats, nil
}

func resolveKernel(mod *llvm.Module, want, name string) (string, error) {
	kernels := mod.Kernels()
	if want == "" {
		switch len(kernels) {
		case 0:
			return "", fmt.Errorf("%s: holds no kernel", name)
		case 1:
			return kernels[0], nil
		}
		return "", fmt.Errorf("%s: holds %d kernels %v; name one", name, len(kernels), kernels)
	}
	for _, k := range kernels {
		if k == want {
			return k, nil
		}
	}
	return "", fmt.Errorf("%s: no kernel named %q (kernels: %v)", name, want, kernels)
}

// preprocess applies the configuration's IR rewrites and returns the module
// to optimize; on error it has disposed of every module it holds.
func preprocess(mod *llvm.Module, kernel string, req *Request) (*llvm.Module, []int, error) {
	cfg := req.Config
	if cfg.Prune {
		// Extract first: everything after works on the kernel's closure only.
		ext, err := mod.ExtractKernel(kernel)
		mod.Dispose()
		if err != nil {
			return nil, nil, err
		}
		mod = ext
	}
	deferred, err := rewrite(mod, kernel, req)
	if err != nil {
		mod.Dispose()
		return nil, nil, err
	}
	return mod, deferred, nil
}

// rewrite applies the configuration's IR rewrites. Float arguments to fold
// are left to foldAfterOptimizing: their indices are returned.
func rewrite(mod *llvm.Module, kernel string, req *Request) (floats []int, err error) {
	cfg := req.Config
	params, err := mod.KernelParams(kernel)
	if err != nil {
		return nil, err
	}
	explicit := len(cfg.SpecializeArgs) > 0
	for _, i := range cfg.SpecializeArgs {
		if i >= len(params) {
			return nil, fmt.Errorf("specialize_args: argument %d does not exist (the kernel has %d)", i, len(params))
		}
	}
	for i, p := range params {
		if !cfg.Specializes(i) {
			continue
		}
		if p.Kind == llvm.ParamOther || p.ByVal || (p.Kind == llvm.ParamPointer && !explicit) {
			if explicit {
				return nil, fmt.Errorf("argument %d (%s %s) cannot be specialized", i, p.Type, p.Name)
			}
			continue // Specialize without SpecializeArgs folds the scalars only
		}
		if i >= len(req.Args) {
			return nil, fmt.Errorf("argument %d: no recorded value to specialize (have %d)", i, len(req.Args))
		}
		if p.IsFloat() {
			// Folded only after optimization: a value of the wrong size is
			// refused now, as SpecializeArg refuses the others, not after
			// the pipeline has run.
			if len(req.Args[i]) != p.Bytes() {
				return nil, fmt.Errorf("argument %d (%s): recorded value has %d bytes, the type needs %d", i, p.Type, len(req.Args[i]), p.Bytes())
			}
			floats = append(floats, i)
			continue
		}
		if err := mod.SpecializeArg(kernel, i, req.Args[i]); err != nil {
			return nil, fmt.Errorf("argument %d: %w", i, err)
		}
	}
	if cfg.SpecializeDims {
		if cfg.Block.IsZero() || cfg.Grid.IsZero() {
			return nil, errors.New("specialize_dims needs the block and grid dimensions")
		}
		if err := mod.SpecializeDims(kernel, cfg.Block, cfg.Grid); err != nil {
			return nil, err
		}
	}
	if cfg.SetLaunchBounds {
		if err := mod.SetLaunchBounds(kernel, cfg.MaxThreads, cfg.MinBlocksPerSM); err != nil {
			return nil, err
		}
	}
	if cfg.Internalize {
		mod.Internalize(append([]string{kernel}, req.Keep...)...)
		if err := mod.DropDead(); err != nil {
			return nil, err
		}
	}
	return floats, mod.Verify()
}

// foldPipeline propagates float arguments folded after optimization and
// cleans up what they decide (branches on them, dead code), without
// reshaping the optimized code around them.
const foldPipeline = "function(sccp,instcombine,simplifycfg,adce)"

// foldAfterOptimizing folds the float arguments of optimized code. Folding
// them before optimization would let the optimizer round a product of
// constants on its own where the application's code generator fuses it
// into an add (fma: one rounding): their results would differ from the
// application's in the last place, and cancellation (a put price from a
// difference of near-equal terms) makes that a large relative error. So the
// multiply-adds that would fold are made explicit fmas first, which LLVM
// folds with one rounding, as the GPU computes them.
func foldAfterOptimizing(mod *llvm.Module, kernel string, floats []int, req *Request, tm *llvm.TargetMachine, fusion llvm.FPOpFusion) error {
	if _, err := mod.FuseFoldedMultiplyAdds(kernel, floats, fusion); err != nil {
		return err
	}
	for _, i := range floats {
		if err := mod.SpecializeArg(kernel, i, req.Args[i]); err != nil {
			return fmt.Errorf("argument %d: %w", i, err)
		}
	}
	return mod.RunPasses(foldPipeline, tm)
}

// pipeline is the configuration's pass pipeline, the default when it names none.
func pipeline(cfg mneme.Config) string {
	if cfg.Passes == "" {
		return mneme.DefaultPipeline
	}
	return cfg.Passes
}

// optimize prepares the request's IR and runs the configuration's pass
// pipeline over it, recording the stage times in times. The caller disposes
// of the module and the target machine.
func (c *Compiler) optimize(req *Request, times *Times) (*llvm.Module, string, *llvm.TargetMachine, error) {
	cfg := req.Config
	t0 := time.Now()
	mod, kernel, floats, err := c.prepare(req)
	if err != nil {
		return nil, "", nil, err
	}
	times.Preprocess = time.Since(t0)

	tm, fusion, err := newTargetMachine(mod, kernel, c.arch(cfg), cfg)
	if err != nil {
		mod.Dispose()
		return nil, "", nil, &CompileError{Stage: "codegen", Err: err}
	}
	t1 := time.Now()
	if err := mod.RunPasses(pipeline(cfg), tm); err != nil {
		tm.Dispose()
		mod.Dispose()
		return nil, "", nil, &CompileError{Stage: "optimize", Err: err}
	}
	if len(floats) > 0 {
		if err := foldAfterOptimizing(mod, kernel, floats, req, tm, fusion); err != nil {
			tm.Dispose()
			mod.Dispose()
			return nil, "", nil, &CompileError{Stage: "optimize", Err: err}
		}
	}
	times.Optimize = time.Since(t1)
	return mod, kernel, tm, nil
}

// newTargetMachine makes the code generator for one compilation. Unless the
// configuration says otherwise it generates code as the application's
// compiler did: the PTX version and the multiply-add fusion that the IR
// records. Both change the bits of float results (ptxas contracts plain
// mul/add into fma, never .rn ones) and the kernel's speed.
func newTargetMachine(mod *llvm.Module, kernel, arch string, cfg mneme.Config) (*llvm.TargetMachine, llvm.FPOpFusion, error) {
	ptx := cfg.PTXVersion
	if ptx == 0 {
		ptx = mod.KernelPTXVersion(kernel)
	}
	tm, err := llvm.NewTargetMachine(arch, ptx, cfg.CodegenOpt)
	if err != nil && cfg.PTXVersion == 0 && ptx != 0 {
		// The IR asked for a PTX version this LLVM does not know: let the backend choose.
		tm, err = llvm.NewTargetMachine(arch, 0, cfg.CodegenOpt)
	}
	if err != nil {
		return nil, 0, err
	}
	fusion := mod.FPContraction()
	if cfg.FPContract != "" {
		if fusion, err = llvm.ParseFPContract(cfg.FPContract); err != nil {
			tm.Dispose()
			return nil, 0, err
		}
	}
	if err := tm.SetFPOpFusion(fusion); err != nil {
		tm.Dispose()
		return nil, 0, err
	}
	return tm, fusion, nil
}

func (c *Compiler) build(req *Request) (*Output, error) {
	out := &Output{Arch: c.arch(req.Config)}
	mod, kernel, tm, err := c.optimize(req, &out.Times)
	if err != nil {
		return nil, err
	}
	defer mod.Dispose()
	defer tm.Dispose()
	out.Kernel = kernel

	t2 := time.Now()
	ptx, err := tm.EmitPTX(mod)
	if err != nil {
		return nil, &CompileError{Stage: "codegen", Err: err}
	}
	out.Times.Codegen = time.Since(t2)
	out.PTX = []byte(ptx)
	out.ObjSize = len(out.PTX)

	if c.opts.Context != nil {
		if err := c.link(out, req.Config, out.Arch); err != nil {
			return nil, &CompileError{Stage: "ptxas", Err: err}
		}
	}
	return out, nil
}

// link runs ptxas through the driver JIT with the compiler's context current.
func (c *Compiler) link(out *Output, cfg mneme.Config, arch string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.opts.Context.SetCurrent(); err != nil {
		return err
	}
	opt := cfg.PtxasOpt
	if opt == 0 {
		opt = -1 // the driver's default
	}
	t := time.Now()
	jo := cuda.JITOptions{OptLevel: opt, MaxRegisters: cfg.MaxRegisters, Arch: arch}
	var res *cuda.LinkResult
	var err error
	switch c.useToolkitPTXAS(); {
	case c.ptxasProgram:
		res, err = cuda.PtxasAssemble(out.PTX, out.Kernel, jo)
	case c.toolkit:
		res, err = cuda.ToolkitLinkPTX(out.PTX, out.Kernel, jo)
	default:
		res, err = cuda.LinkPTX(out.PTX, out.Kernel, jo)
	}
	out.Times.Ptxas = time.Since(t)
	if err != nil {
		return err
	}
	out.Cubin = res.Cubin
	out.ObjSize = len(res.Cubin)
	out.PtxasLog = res.InfoLog
	out.PtxasOptions = res.Options
	if st, ok := res.Stats(out.Kernel); ok {
		out.Registers, out.StackBytes = st.Registers, st.StackFrame
		out.SpillStores, out.SpillLoads = st.SpillStores, st.SpillLoads
		out.SharedBytes, out.ConstBytes, out.LocalBytes = st.SharedBytes, st.ConstBytes, st.LocalBytes
	}
	return nil
}

// PreprocessedIR is the textual IR after extraction and specialization,
// before optimization; float arguments are folded after optimization, so
// they are not folded here.
func (c *Compiler) PreprocessedIR(req *Request) (string, error) {
	mod, _, _, err := c.prepare(req)
	if err != nil {
		return "", err
	}
	defer mod.Dispose()
	return mod.String(), nil
}

// OptimizedIR is the textual IR after the configuration's pass pipeline.
func (c *Compiler) OptimizedIR(req *Request) (string, error) {
	var times Times
	mod, _, tm, err := c.optimize(req, &times)
	if err != nil {
		return "", err
	}
	defer mod.Dispose()
	defer tm.Dispose()
	return mod.String(), nil
}

// EnvPTXAS chooses the ptxas that turns PTX into machine code: "program"
// (the toolkit's ptxas program, run as a compiler driver runs it: the
// default when found), "nvjitlink" (the toolkit's ptxas through
// libnvJitLink, the default when no program is found) or "driver" (the
// driver's JIT). A toolkit newer than the driver is not used: its cubins
// may not load.
const EnvPTXAS = "MNEME_PTXAS"

// useToolkitPTXAS decides once per compiler which ptxas links: the
// toolkit's program gives the application's own machine code for the same
// PTX; libnvJitLink and the driver's JIT may not (see cuda.PtxasAssemble).
func (c *Compiler) useToolkitPTXAS() bool {
	c.ptxasOnce.Do(func() {
		c.ptxasID = "driver"
		dv, derr := cuda.DriverVersion()
		if derr == nil {
			c.ptxasID = fmt.Sprintf("driver %d", dv)
		}
		fits := func(version string) bool {
			var major, minor int
			_, err := fmt.Sscanf(version, "%d.%d", &major, &minor)
			return err == nil && derr == nil && major*1000+minor*10 <= dv
		}
		choice := os.Getenv(EnvPTXAS)
		if choice == "driver" {
			return
		}
		if choice == "" || choice == "program" {
			if _, v, err := cuda.PtxasProgram(); err == nil && fits(v) {
				c.toolkit, c.ptxasProgram = true, true
				c.ptxasID = "ptxas " + v
				return
			}
		}
		if tv, err := cuda.ToolkitPTXAS(); err == nil && fits(tv) {
			c.toolkit = true
			c.ptxasID = "toolkit " + tv
		}
	})
	return c.toolkit
}

// ptxasIdentity names the ptxas that links, for cache keys.
func (c *Compiler) ptxasIdentity() string {
	c.useToolkitPTXAS()
	return c.ptxasID
}
