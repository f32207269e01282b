package deploy

import (
	"errors"
	"fmt"
	"sync"

	"github.com/mneme-gpu/mneme"
)

// The in-application deployment policy: which code a launch of a tuned
// kernel runs, where that code comes from (memory, the disk cache, the
// compiler), how many variants a kernel may have, what the shim may run
// without asking, and what happens after a failure. The runtime library
// (cmd/mneme-rt) is its cgo glue: it supplies a Compiler, a Loader and the
// launch's bytes, and performs what Runtime decides.

// Compiler compiles one variant of a kernel: the runtime's runs
// `mneme deploy compile-variant` in its own process (CommandCompiler).
type Compiler interface {
	Compile(kernel string, cfg mneme.Config, args [][]byte) (*CompileResponse, error)
}

// HostVar is a device variable the application registered: its device
// address and size, and whether it is __constant__.
type HostVar struct {
	Addr, Size uint64
	Constant   bool
}

// Loader loads compiled code into the application's context.
type Loader interface {
	// Load loads cubin and returns its kernel's code (the loader's handle,
	// kept in Variant.Code). The code's copies of the variables in links
	// must be refreshed from the application's before every launch.
	Load(kernel string, cubin []byte, links []GlobalLink) (any, error)
	// HostVars are the application's device variables by device name.
	HostVars() map[string]HostVar
}

// Store is where compiled variants and kernel facts are kept between
// launches and runs; *Cache is the runtime's.
type Store interface {
	Get(Key) ([]byte, Hit, error)
	Put(Key, []byte) error
	GetFacts(irHash, kernel string) (*KernelFacts, bool)
	PutFacts(irHash, kernel string, facts *KernelFacts) error
}

var _ Store = (*Cache)(nil)

// GlobalLink is a variable of a variant's code that mirrors the
// application's: refreshed from Host before every launch.
type GlobalLink struct {
	Name string
	Host HostVar
}

// Variant is one loaded compilation of a kernel.
type Variant struct {
	// Code is the Loader's handle of the loaded code.
	Code any
	// Links are the variables refreshed before each launch.
	Links []GlobalLink
	// SharedMax is the dynamic shared memory the code was opened up for
	// (0: the default only).
	SharedMax int
}

// FastPath is what the shim may run without asking the runtime again.
type FastPath struct {
	// Variant is nil when every launch must keep asking.
	Variant *Variant
	// Keyed: Variant serves only the launches whose key (VariantLaunchKey
	// of their block, grid when DimsFolded, and the Folded arguments, of
	// FoldedSizes bytes each) equals this launch's.
	Keyed       bool
	DimsFolded  bool
	Folded      []int
	FoldedSizes []int
}

// LaunchPlan is what the runtime decided for one launch.
type LaunchPlan struct {
	// Grid and Block are the geometry to launch with (Plan.Geometry).
	Grid, Block mneme.Dim3
	Variant     *Variant
	// OptInShared: the launch asks for more dynamic shared memory than the
	// code accepts; open it up (then SharedOpened) before launching.
	OptInShared bool
	Fast        FastPath
}

// Runtime is the deployment policy of one process. Set the fields, then
// use it from any number of threads.
type Runtime struct {
	Plans    Plans
	Store    Store
	Compiler Compiler
	Loader   Loader
	// IRHash identifies the executable's embedded IR (IRHash); Arch, Driver
	// and Ptxas the target, as VariantKey takes them.
	IRHash, Arch string
	Driver       int
	Ptxas        string
	// MaxVariants bounds each kernel's specialized variants; beyond it the
	// unspecialized tuned code runs. 0: DefaultMaxVariants.
	MaxVariants int
	// Limits are deploy_policy.h's (the zero value: DefaultLimits).
	Limits Limits
	// Warn prints one warning line; Trace logs a step (both may be nil).
	Warn  func(msg string)
	Trace func(format string, args ...any)

	mu      sync.Mutex
	kernels map[string]*Kernel // nil entry: the application's own code

	hostOnce sync.Once
	hostVars map[string]HostVar
}

// Kernel is one tuned kernel's deployment state.
type Kernel struct {
	Name string
	Plan *Plan

	mu       sync.Mutex // one launch at a time builds the kernel's variants
	facts    *KernelFacts
	variants Variants[*Variant]
	generic  *Variant // the unspecialized tuned code, beyond the variant bound
	disabled bool
	// hot maps the launch keys seen to their variants, so a launch like an
	// earlier one finds its code without building the cache key.
	hot      map[string]*Variant
	hotBuf   []byte
	launched bool // a launch was prepared
}

func (r *Runtime) warn(format string, args ...any) {
	if r.Warn != nil {
		r.Warn(fmt.Sprintf(format, args...))
	}
}

func (r *Runtime) trace(format string, args ...any) {
	if r.Trace != nil {
		r.Trace(format, args...)
	}
}

func (r *Runtime) limits() Limits {
	if r.Limits == (Limits{}) {
		return DefaultLimits
	}
	return r.Limits
}

func (r *Runtime) maxVariants() int {
	if r.MaxVariants <= 0 {
		return DefaultMaxVariants
	}
	return r.MaxVariants
}

// Kernel returns the deployment state of a kernel by mangled name: nil when
// it is not listed, tuning found the application's own code best, or it was
// disabled after a failure. The application's own code then runs.
func (r *Runtime) Kernel(name string) *Kernel {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.kernels[name]; ok {
		if k == nil || k.disabled {
			return nil
		}
		return k
	}
	if r.kernels == nil {
		r.kernels = map[string]*Kernel{}
	}
	plan := r.Plans[name]
	if plan == nil || plan.Original {
		r.kernels[name] = nil
		return nil
	}
	k := &Kernel{Name: name, Plan: plan}
	k.variants.MaxVariants = r.maxVariants()
	r.kernels[name] = k
	return k
}

// Disable makes every later launch of k run the application's own code,
// warning once: a kernel whose tuned code failed once is not compiled or
// loaded again.
func (r *Runtime) Disable(k *Kernel, err error) {
	r.mu.Lock()
	first := !k.disabled
	k.disabled = true
	r.mu.Unlock()
	if first {
		r.warn("tuned kernel %s: %v; the application's own code runs", k.Name, err)
		r.trace("disabled %s: %v", k.Name, err)
	}
}

// ArgSizes are the kernel's parameter sizes once its facts are known (from
// the cache or a first compile), else nil.
func (k *Kernel) ArgSizes() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.facts == nil {
		return nil
	}
	return k.facts.ArgSizes
}

// Prepare decides a launch of k with grid, block and the bytes of every
// argument (views valid during the call; nothing keeps them): the geometry
// to launch with and the variant to run, found in memory, then the disk
// cache, then compiled. An error means the tuned code cannot run: the
// caller runs the application's own code and Disables k.
func (r *Runtime) Prepare(k *Kernel, grid, block mneme.Dim3, args [][]byte, shared uint32) (LaunchPlan, error) {
	grid, block = k.Plan.Geometry(grid, block)
	k.mu.Lock()
	v, err := r.variant(k, grid, block, args)
	first := !k.launched && err == nil
	k.launched = k.launched || err == nil
	k.mu.Unlock()
	if first {
		r.trace("first launch of %s runs its tuned code", k.Name)
	}
	if err != nil {
		return LaunchPlan{}, err
	}
	lp := LaunchPlan{Grid: grid, Block: block, Variant: v}
	r.mu.Lock()
	lp.OptInShared = int(shared) > r.limits().DefaultShared && int(shared) > v.SharedMax
	r.mu.Unlock()
	lp.Fast = r.fastPath(k, v, args)
	return lp, nil
}

// SharedOpened records that v's code now accepts shared bytes of dynamic
// shared memory.
func (r *Runtime) SharedOpened(v *Variant, shared uint32) {
	r.mu.Lock()
	v.SharedMax = max(v.SharedMax, int(shared))
	r.mu.Unlock()
}

// variant finds or builds the variant of k for this launch. Called with
// k.mu held.
func (r *Runtime) variant(k *Kernel, grid, block mneme.Dim3, args [][]byte) (*Variant, error) {
	if k.facts != nil {
		k.hotBuf = r.hotKey(k, k.hotBuf[:0], grid, block, args)
		if v := k.hot[string(k.hotBuf)]; v != nil {
			return v, nil
		}
	}
	v, err := r.variantFor(k, launchConfig(k.Plan.ConfigFor(block), grid, block), args)
	if err != nil {
		return nil, err
	}
	if len(k.hot) < r.limits().MaxKeys {
		if k.hot == nil {
			k.hot = map[string]*Variant{}
		}
		k.hot[string(r.hotKey(k, nil, grid, block, args))] = v
	}
	return v, nil
}

// launchConfig is cfg with the launch's geometry where it is folded in.
func launchConfig(cfg mneme.Config, grid, block mneme.Dim3) mneme.Config {
	if cfg.SpecializeDims {
		cfg.Grid, cfg.Block = grid, block
	} else {
		cfg.Grid, cfg.Block = mneme.Dim3{}, mneme.Dim3{}
	}
	return cfg
}

// hotKey is the launch's key among k's launches (VariantLaunchKey); k's
// facts are known.
func (r *Runtime) hotKey(k *Kernel, buf []byte, grid, block mneme.Dim3, args [][]byte) []byte {
	idx := FoldedArgs(k.Plan.Config, *k.facts)
	folded := make([][]byte, 0, len(idx))
	for _, i := range idx {
		if i >= 0 && i < len(args) {
			folded = append(folded, args[i])
		}
	}
	return VariantLaunchKey(buf, grid, block, k.Plan.Config.SpecializeDims, folded)
}

// variantFor finds the variant for cfg and args: the kernel's variants in
// memory, then the store, then the compiler. The first launch of a kernel
// whose facts are unknown compiles (the compile tells which arguments
// fold). Beyond MaxVariants new values run the unspecialized tuned code,
// built once. Called with k.mu held.
func (r *Runtime) variantFor(k *Kernel, cfg mneme.Config, args [][]byte) (*Variant, error) {
	if k.facts == nil {
		if f, ok := r.Store.GetFacts(r.IRHash, k.Name); ok {
			k.facts = f
		}
	}
	if k.facts == nil {
		resp, err := r.compile(k, cfg, args)
		if err != nil {
			return nil, err
		}
		facts := resp.Facts()
		k.facts = &facts
		if err := r.Store.PutFacts(r.IRHash, k.Name, &facts); err != nil {
			r.trace("facts of %s not cached: %v", k.Name, err)
		}
		key := r.key(k, cfg, args)
		r.store(k, key, resp.Cubin)
		return r.install(k, key, resp.Cubin, true)
	}
	key := r.key(k, cfg, args)
	if v, ok := k.variants.Lookup(key.Hash()); ok {
		return v, nil
	}
	if k.variants.Len() >= r.maxVariants() {
		if k.generic != nil {
			return k.generic, nil
		}
		generic := cfg
		generic.Specialize, generic.SpecializeArgs, generic.SpecializeDims = false, nil, false
		generic.Grid, generic.Block = mneme.Dim3{}, mneme.Dim3{}
		v, err := r.build(k, r.key(k, generic, args), generic, args, false)
		if err != nil {
			return nil, err
		}
		k.generic = v
		return v, nil
	}
	return r.build(k, key, cfg, args, true)
}

// build loads a variant from the store or compiles it; remember files it
// among the kernel's variants.
func (r *Runtime) build(k *Kernel, key Key, cfg mneme.Config, args [][]byte, remember bool) (*Variant, error) {
	cubin, hit, err := r.Store.Get(key)
	if err != nil {
		r.warn("deployment cache: %v; compiling again", err)
	}
	if cubin != nil {
		r.trace("cache hit (%s) %s", hit, k.Name)
		return r.install(k, key, cubin, remember)
	}
	resp, err := r.compile(k, cfg, args)
	if err != nil {
		return nil, err
	}
	r.store(k, key, resp.Cubin)
	return r.install(k, key, resp.Cubin, remember)
}

// store caches a cubin just compiled; a failure costs a compile next run.
func (r *Runtime) store(k *Kernel, key Key, cubin []byte) {
	if err := r.Store.Put(key, cubin); err != nil {
		r.trace("variant of %s not cached: %v", k.Name, err)
	}
}

// install loads a cubin and remembers it among the kernel's variants.
func (r *Runtime) install(k *Kernel, key Key, cubin []byte, remember bool) (*Variant, error) {
	links, err := GlobalLinks(k.facts.Globals, r.hostVarsOnce())
	if err != nil {
		return nil, err
	}
	code, err := r.Loader.Load(k.Name, cubin, links)
	if err != nil {
		return nil, fmt.Errorf("loading its tuned code: %w", err)
	}
	v := &Variant{Code: code, Links: links}
	if remember {
		k.variants.Add(key.Hash(), v)
	}
	return v, nil
}

func (r *Runtime) hostVarsOnce() map[string]HostVar {
	r.hostOnce.Do(func() { r.hostVars = r.Loader.HostVars() })
	return r.hostVars
}

// GlobalLinks decides how a variant's copies of the application's variables
// are kept in agreement with the application: a __constant__ variable (or a
// __device__ one the code only reads) is refreshed from the application's
// before every launch (returned); a __device__ variable the code may write
// cannot be shared between two modules, so the kernel keeps its own code
// (an error); a variable the application does not register (a literal, a
// table of the code's own) needs nothing.
func GlobalLinks(globals []Global, host map[string]HostVar) ([]GlobalLink, error) {
	var links []GlobalLink
	for _, g := range globals {
		hv, shared := host[g.Name]
		if !shared {
			continue
		}
		if !hv.Constant && !g.ReadOnly {
			return nil, fmt.Errorf("its code uses the __device__ variable %s, which the application also sees (deployment does not share writable variables)", g.Name)
		}
		links = append(links, GlobalLink{Name: g.Name, Host: hv})
	}
	return links, nil
}

// key is the cache key of a variant for this launch.
func (r *Runtime) key(k *Kernel, cfg mneme.Config, args [][]byte) Key {
	return VariantKey(r.IRHash, k.Name, cfg, *k.facts, args, r.Arch, r.Driver, r.Ptxas)
}

func (r *Runtime) compile(k *Kernel, cfg mneme.Config, args [][]byte) (*CompileResponse, error) {
	if r.Compiler == nil {
		return nil, errors.New("no compiler")
	}
	return r.Compiler.Compile(k.Name, cfg, args)
}

// fastPath says what the shim may remember of a launch that ran v: v for
// every launch when nothing is folded; v for the launches with this
// launch's key when arguments or dimensions are; nothing when the code's
// variables must be refreshed before each launch or the key exceeds the
// limits the shim keys within.
func (r *Runtime) fastPath(k *Kernel, v *Variant, args [][]byte) FastPath {
	if len(v.Links) > 0 {
		return FastPath{}
	}
	cfg := k.Plan.Config
	k.mu.Lock()
	folded := FoldedArgs(cfg, *k.facts)
	k.mu.Unlock()
	if len(folded) == 0 && !cfg.SpecializeDims {
		return FastPath{Variant: v}
	}
	if len(folded) > r.limits().MaxFolded {
		return FastPath{}
	}
	sizes := make([]int, len(folded))
	for i, a := range folded {
		if a < 0 || a >= len(args) || len(args[a]) > r.limits().MaxKeyedArg {
			return FastPath{}
		}
		sizes[i] = len(args[a])
	}
	return FastPath{Variant: v, Keyed: true, DimsFolded: cfg.SpecializeDims, Folded: folded, FoldedSizes: sizes}
}

// Preload loads, off the application's critical path, the code of every
// tuned kernel whose first launch is predictable and already compiled: its
// facts and its variant for the launch it was tuned on are in the store.
// A kernel whose configuration folds argument values (unknown until a
// launch) is left to its first launch, as is one whose code is not in the
// store: Preload never compiles. It holds each kernel while loading it, so
// a launch that comes meanwhile waits for the code instead of loading it
// twice. It returns how many kernels it loaded.
func (r *Runtime) Preload() int {
	r.mu.Lock()
	names := make([]string, 0, len(r.Plans))
	for name := range r.Plans {
		names = append(names, name)
	}
	r.mu.Unlock()
	n := 0
	for _, name := range names {
		k := r.Kernel(name)
		if k == nil {
			continue
		}
		k.mu.Lock()
		ok, err := r.preload(k)
		k.mu.Unlock()
		if err != nil {
			r.trace("preload of %s: %v", name, err)
		}
		if ok {
			n++
		}
	}
	return n
}

// preload loads k's variant for its expected launch when it is in the
// store. Called with k.mu held.
func (r *Runtime) preload(k *Kernel) (bool, error) {
	if k.facts == nil {
		f, ok := r.Store.GetFacts(r.IRHash, k.Name)
		if !ok {
			return false, nil
		}
		k.facts = f
	}
	grid, block, ok := k.Plan.expectedLaunch()
	if !ok {
		return false, nil
	}
	cfg := k.Plan.ConfigFor(block)
	if len(FoldedArgs(cfg, *k.facts)) > 0 {
		return false, nil
	}
	if cfg.SpecializeDims && (hasZeroDim(grid) || hasZeroDim(block)) {
		return false, nil
	}
	cfg = launchConfig(cfg, grid, block)
	key := r.key(k, cfg, nil)
	if _, ok := k.variants.Lookup(key.Hash()); ok {
		return true, nil
	}
	cubin, _, err := r.Store.Get(key)
	if cubin == nil {
		return false, err
	}
	if _, err := r.install(k, key, cubin, true); err != nil {
		return false, err
	}
	r.trace("preloaded %s", k.Name)
	return true, nil
}

// expectedLaunch is the geometry the plan's kernel is expected to run with:
// the recorded launch after Geometry. Without a recorded block, a plan
// whose launch bounds depend on the block expects a block of MaxThreads
// threads (what tuning bounded it to); ok is false when the compile
// configuration cannot be predicted.
func (p *Plan) expectedLaunch() (grid, block mneme.Dim3, ok bool) {
	if !p.RecordedBlock.IsZero() {
		grid, block = p.Geometry(p.RecordedGrid, p.RecordedBlock)
		if block == p.RecordedBlock && !p.TunedBlock.IsZero() && hasZeroDim(p.RecordedGrid) {
			block = p.TunedBlock // the grid is unknown; the block tuned is still the one run
		}
		return grid, block, true
	}
	if !p.Config.SetLaunchBounds {
		return mneme.Dim3{}, mneme.Dim3{}, !p.Config.SpecializeDims
	}
	if p.Config.MaxThreads > 0 && !p.Config.SpecializeDims {
		return mneme.Dim3{}, mneme.Dim3{X: uint32(p.Config.MaxThreads), Y: 1, Z: 1}, true
	}
	return mneme.Dim3{}, mneme.Dim3{}, false
}

// FoldsArgs tells whether k's configuration folds argument values, which
// makes their bytes part of its launches' keys; false while its facts are
// unknown.
func (k *Kernel) FoldsArgs() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.facts != nil && len(FoldedArgs(k.Plan.Config, *k.facts)) > 0
}
