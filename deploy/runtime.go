package deploy

import (
	"errors"
	"fmt"
	"slices"
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
	// Variant is nil when every launch must keep asking, unless Own.
	Variant *Variant
	// Own: the launches with this launch's key run the application's own
	// code (a shape no class covers, a folded value never measured); the
	// shim remembers that instead of asking again. Always Keyed.
	Own bool
	// Keyed: Variant serves only the launches whose key (VariantLaunchKey
	// of their block, grid when DimsFolded, dynamic shared memory when
	// SharedKeyed, and the Folded arguments, of FoldedSizes bytes each)
	// equals this launch's.
	Keyed       bool
	DimsFolded  bool
	SharedKeyed bool
	Folded      []int
	FoldedSizes []int
}

// LaunchPlan is what the runtime decided for one launch.
type LaunchPlan struct {
	// Grid and Block are the geometry to launch with (Plan.Geometry).
	Grid, Block mneme.Dim3
	// Variant is the tuned code to run; nil: the application's own code
	// runs this launch (Own says why).
	Variant *Variant
	// TunedBlock and RecordedBlock are the geometry rule's inputs for the
	// launches of this plan (a class's own when the kernel has classes),
	// for the shim to apply to the launches it runs alone.
	TunedBlock, RecordedBlock mneme.Dim3
	// Own, when Variant is nil, says why the application's own code runs.
	Own string
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
	// generic is the unspecialized tuned code of each configuration (by
	// ConfigKey), beyond the variant bound.
	generic  map[string]*Variant
	disabled bool
	// hot maps the launch keys seen to their variants (nil: the
	// application's own code), so a launch like an earlier one finds its
	// code without building the cache key or checking its values again.
	hot      map[string]*Variant
	hotBuf   []byte
	launched bool // a launch was prepared
	// unmeasured: a launch folded a value the entry's variants were not
	// measured with (warned once).
	unmeasured bool
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
//
// A kernel with classes runs the configuration of the class its launch's
// shape (grid, block, shared as launched) is in; a shape in no class runs
// the application's own code, as does a launch that would fold a value the
// entry's variants were not measured with (warned once per kernel): the
// configuration was chosen for its folded code, and its code without the
// fold was never measured, so it could be slower than the application's.
// Neither compiles anything, and the fast path lets the shim remember it.
func (r *Runtime) Prepare(k *Kernel, grid, block mneme.Dim3, args [][]byte, shared uint32) (LaunchPlan, error) {
	p := k.Plan.For(grid, block, shared)
	if p == nil {
		r.trace("%s: launch shape grid %s block %s shared %d is in no class: the application's own code runs", k.Name, grid, block, shared)
		return LaunchPlan{Grid: grid, Block: block, Own: "its launch shape is in no class of the tuned entry",
			Fast: r.ownFast(k, args)}, nil
	}
	k.mu.Lock()
	v, own, err := r.variant(k, p, grid, block, args, shared)
	first := !k.launched && err == nil && own == ""
	k.launched = k.launched || first
	k.mu.Unlock()
	if first {
		r.trace("first launch of %s runs its tuned code", k.Name)
	}
	if err != nil {
		return LaunchPlan{}, err
	}
	if own != "" {
		return LaunchPlan{Grid: grid, Block: block, Own: own, Fast: r.ownFast(k, args)}, nil
	}
	lp := LaunchPlan{Variant: v, TunedBlock: p.TunedBlock, RecordedBlock: p.RecordedBlock}
	lp.Grid, lp.Block = p.Geometry(grid, block)
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

// variant finds or builds the variant of k for this launch of p (k's plan
// or its class) with the application's grid and block; own, when not
// empty, says why the application's own code runs it instead. Called with
// k.mu held.
func (r *Runtime) variant(k *Kernel, p *Plan, appGrid, appBlock mneme.Dim3, args [][]byte, shared uint32) (v *Variant, own string, err error) {
	if k.facts == nil {
		if f, ok := r.Store.GetFacts(r.IRHash, k.Name); ok {
			k.facts = f
		}
	}
	keyed := k.facts != nil
	if keyed {
		k.hotBuf = r.hotKey(k, k.hotBuf[:0], appGrid, appBlock, shared, args)
		if v, ok := k.hot[string(k.hotBuf)]; ok {
			if v == nil {
				return nil, "its folded values were not measured", nil
			}
			return v, "", nil
		}
	}
	grid, block := p.Geometry(appGrid, appBlock)
	cfg := launchConfig(p.ConfigFor(block), grid, block)
	if a, bad := p.Unmeasured(cfg, args); bad {
		if !k.unmeasured {
			k.unmeasured = true
			r.warn("tuned kernel %s (%s): argument %s took the value %x, which the entry's variants were not measured with (its folded values contradict this run); such launches run the application's own code",
				k.Name, p.Source, p.foldedLabel(a), args[a])
		}
		if keyed {
			r.remember(k, appGrid, appBlock, shared, args, nil)
		}
		return nil, "its folded values were not measured", nil
	}
	if v, err = r.variantFor(k, cfg, args); err != nil {
		return nil, "", err
	}
	r.remember(k, appGrid, appBlock, shared, args, v)
	return v, "", nil
}

// remember files what a launch runs (v, nil for the application's own
// code) under its launch key, within the limit. Called with k.mu held and
// k's facts known.
func (r *Runtime) remember(k *Kernel, grid, block mneme.Dim3, shared uint32, args [][]byte, v *Variant) {
	if len(k.hot) >= r.limits().MaxKeys {
		return
	}
	if k.hot == nil {
		k.hot = map[string]*Variant{}
	}
	k.hot[string(r.hotKey(k, nil, grid, block, shared, args))] = v
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

// hotKey is the launch's key among k's launches (VariantLaunchKey of its
// layout, the application's grid and block); k's facts are known.
func (r *Runtime) hotKey(k *Kernel, buf []byte, grid, block mneme.Dim3, shared uint32, args [][]byte) []byte {
	l := k.layout(*k.facts)
	folded := make([][]byte, 0, len(l.args))
	for _, i := range l.args {
		if i >= 0 && i < len(args) {
			folded = append(folded, args[i])
		}
	}
	return VariantLaunchKey(buf, grid, block, l.dims, l.shared, shared, folded)
}

// keyLayout is what tells k's launches apart: the block always, the grid
// when a configuration folds dimensions or the kernel has classes, the
// dynamic shared memory when it has classes, and every argument one of its
// configurations folds. block: a configuration sets launch bounds, so the
// code depends on the launch's block (ConfigFor drops bounds a block
// exceeds); the key's block then matters even when nothing else is keyed.
type keyLayout struct {
	dims, shared, block bool
	args                []int
}

// layout is k's key layout given its facts.
func (k *Kernel) layout(facts KernelFacts) keyLayout {
	l := keyLayout{dims: len(k.Plan.Classes) > 0, shared: len(k.Plan.Classes) > 0}
	for _, p := range k.Plan.served() {
		l.dims = l.dims || p.Config.SpecializeDims
		l.block = l.block || p.Config.SetLaunchBounds
		for _, a := range FoldedArgs(p.Config, facts) {
			if !slices.Contains(l.args, a) {
				l.args = append(l.args, a)
			}
		}
	}
	slices.Sort(l.args)
	return l
}

// unkeyed: every launch runs the same code.
func (l keyLayout) unkeyed() bool { return len(l.args) == 0 && !l.dims && !l.shared && !l.block }

// knownLayout is k's key layout when it can be told without its facts:
// every configuration names the arguments it folds.
func (k *Kernel) knownLayout() (keyLayout, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.facts != nil {
		return k.layout(*k.facts), true
	}
	for _, p := range k.Plan.served() {
		if p.Config.Specialize && len(p.Config.SpecializeArgs) == 0 {
			return keyLayout{}, false
		}
	}
	return k.layout(KernelFacts{}), true
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
		generic := cfg
		generic.Specialize, generic.SpecializeArgs, generic.SpecializeDims = false, nil, false
		generic.Grid, generic.Block = mneme.Dim3{}, mneme.Dim3{}
		gk := ConfigKey(generic)
		if v := k.generic[gk]; v != nil {
			return v, nil
		}
		v, err := r.build(k, r.key(k, generic, args), generic, args, false)
		if err != nil {
			return nil, err
		}
		if k.generic == nil {
			k.generic = map[string]*Variant{}
		}
		k.generic[gk] = v
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
// launch's key when arguments or dimensions are, or the code depends on the
// block (launch bounds); nothing when the code's
// variables must be refreshed before each launch or the key exceeds the
// limits the shim keys within.
func (r *Runtime) fastPath(k *Kernel, v *Variant, args [][]byte) FastPath {
	if len(v.Links) > 0 {
		return FastPath{}
	}
	l, _ := k.knownLayout() // known: v was built, so were the facts
	if l.unkeyed() {
		return FastPath{Variant: v}
	}
	f, ok := r.keyedFast(l, args)
	if !ok {
		return FastPath{}
	}
	f.Variant = v
	return f
}

// ownFast says what the shim may remember of a launch that runs the
// application's own code: its key, when k's key layout is known (else
// the shim asks again, and the runtime answers from its own memo).
func (r *Runtime) ownFast(k *Kernel, args [][]byte) FastPath {
	l, ok := k.knownLayout()
	if !ok {
		return FastPath{}
	}
	f, ok := r.keyedFast(l, args)
	if !ok {
		return FastPath{}
	}
	f.Own = true
	return f
}

// keyedFast is the keyed fast path of layout l for a launch with args; ok
// is false when the key exceeds the limits the shim keys within.
func (r *Runtime) keyedFast(l keyLayout, args [][]byte) (FastPath, bool) {
	if len(l.args) > r.limits().MaxFolded {
		return FastPath{}, false
	}
	sizes := make([]int, len(l.args))
	for i, a := range l.args {
		if a < 0 || a >= len(args) || len(args[a]) > r.limits().MaxKeyedArg {
			return FastPath{}, false
		}
		sizes[i] = len(args[a])
	}
	return FastPath{Keyed: true, DimsFolded: l.dims, SharedKeyed: l.shared, Folded: l.args, FoldedSizes: sizes}, true
}

// Preloaded is a kernel whose tuned code Preload loaded.
type Preloaded struct {
	Kernel *Kernel
	// Fast is what the shim may run from the kernel's first launch on
	// without asking the runtime: what a launch's fastPath would say, for
	// each configuration whose code was loaded. A fast path for every launch
	// (not Keyed) where each launch runs the same code; else one per
	// configuration and measured folded values, keyed by its recorded launch
	// and those values, where the recorded launch gives what the key holds. None where the code's variables are refreshed before each
	// launch.
	Fast []PreloadedFast
}

// PreloadedFast is one fast path of a preloaded kernel.
type PreloadedFast struct {
	FastPath
	// Grid, Block and Shared are the application's launch whose key
	// FastPath serves when Keyed (its recorded launch).
	Grid, Block mneme.Dim3
	Shared      uint32
	// Args holds, by argument index, the values of the folded arguments
	// (FastPath.Folded) that the key holds; nil when it folds none.
	Args [][]byte
	// TunedBlock and RecordedBlock are the geometry rule's inputs for these
	// launches (LaunchPlan's).
	TunedBlock, RecordedBlock mneme.Dim3
}

// Preload loads, off the application's critical path, the code of every
// tuned kernel whose first launch is predictable and already compiled: its
// facts and its variant for the launch it was tuned on are in the store.
// A kernel whose configuration folds argument values gets the variants of
// the values its entry says were measured, those in the store
// (preloadMeasured), each handed to the shim for the launches with its
// values. One whose code is not in the store is left to its first
// launch: Preload never compiles. It holds each kernel while loading it, so
// a launch that comes meanwhile waits for the code instead of loading it
// twice. It returns the kernels it loaded, each with the fast path the
// shim may take from the kernel's first launch on (Preloaded.Fast).
func (r *Runtime) Preload() []Preloaded {
	r.mu.Lock()
	names := make([]string, 0, len(r.Plans))
	for name := range r.Plans {
		names = append(names, name)
	}
	r.mu.Unlock()
	slices.Sort(names) // the trace lists kernels in one order every run
	var out []Preloaded
	for _, name := range names {
		k := r.Kernel(name)
		if k == nil {
			continue
		}
		r.trace("preload %s: start", name)
		k.mu.Lock()
		pre, ok, err := r.preload(k)
		k.mu.Unlock()
		if err != nil {
			r.trace("preload of %s: %v", name, err)
		}
		if ok {
			out = append(out, pre)
		}
		r.trace("preload %s: end (loaded %v)", name, ok)
	}
	return out
}

// preload loads k's variant for its expected launch, or each class's,
// when it is in the store; ok when it loaded any. Called with k.mu held.
func (r *Runtime) preload(k *Kernel) (pre Preloaded, ok bool, err error) {
	pre.Kernel = k
	if k.facts == nil {
		f, found := r.Store.GetFacts(r.IRHash, k.Name)
		if !found {
			return pre, false, nil
		}
		k.facts = f
	}
	// The key layout is fastPath's (its knownLayout would take k.mu, held
	// here).
	l := k.layout(*k.facts)
	var errs []error
	loaded := k.variants.Len()
	serve := func(p *Plan, shared uint32) {
		v, measured, err := r.preloadPlan(k, p)
		if err != nil {
			errs = append(errs, err)
		}
		if v != nil {
			ok = true
			if f, fast := r.preloadedFast(l, v, p, shared, nil); fast {
				pre.Fast = append(pre.Fast, f)
			}
		}
		for _, m := range measured {
			if f, fast := r.preloadedFast(l, m.variant, p, shared, m.args); fast {
				pre.Fast = append(pre.Fast, f)
			}
		}
	}
	if len(k.Plan.Classes) == 0 {
		serve(k.Plan, 0)
	}
	for _, c := range k.Plan.Classes {
		serve(&c.Plan, c.SharedMem)
	}
	return pre, ok || k.variants.Len() > loaded, errors.Join(errs...)
}

// preloadedFast is the fast path of v, preloaded for p's launches: for
// every launch when l keys nothing; else for the launches with the key of
// p's recorded launch (with shared bytes of dynamic shared memory) and,
// when l keys argument values, the values args holds (the measured values
// v was built for, by argument index), when the recorded launch is known
// and args gives every keyed argument within the shim's key limits.
func (r *Runtime) preloadedFast(l keyLayout, v *Variant, p *Plan, shared uint32, args [][]byte) (PreloadedFast, bool) {
	f := PreloadedFast{FastPath: FastPath{Variant: v}, TunedBlock: p.TunedBlock, RecordedBlock: p.RecordedBlock}
	if len(v.Links) > 0 {
		return f, false
	}
	if l.unkeyed() {
		return f, true
	}
	// The recorded launch whole: the variant was built for its geometry.
	if hasZeroDim(p.RecordedBlock) || hasZeroDim(p.RecordedGrid) {
		return f, false
	}
	for _, a := range l.args {
		if a < 0 || a >= len(args) || args[a] == nil {
			return f, false // a value the key holds is not known here
		}
	}
	keyed, fits := r.keyedFast(l, args)
	if !fits {
		return f, false
	}
	keyed.Variant = v
	f.FastPath = keyed
	if len(l.args) > 0 {
		f.Args = make([][]byte, len(args))
		for _, a := range l.args {
			f.Args[a] = slices.Clone(args[a])
		}
	}
	f.Grid, f.Block, f.Shared = p.RecordedGrid, p.RecordedBlock, shared
	return f, true
}

// measuredVariant is a variant Preload loaded for measured values of the
// arguments its configuration folds: args holds them by argument index
// (nil where not folded).
type measuredVariant struct {
	variant *Variant
	args    [][]byte
}

// preloadPlan loads the variant of p's expected launch when it is in the
// store, returning it (nil when not loaded). Called with k.mu held and k's
// facts known.
func (r *Runtime) preloadPlan(k *Kernel, p *Plan) (*Variant, []measuredVariant, error) {
	grid, block, ok := p.expectedLaunch()
	if !ok {
		return nil, nil, nil
	}
	cfg := p.ConfigFor(block)
	if cfg.SpecializeDims && (hasZeroDim(grid) || hasZeroDim(block)) {
		return nil, nil, nil
	}
	cfg = launchConfig(cfg, grid, block)
	if len(FoldedArgs(cfg, *k.facts)) > 0 {
		measured, err := r.preloadMeasured(k, p, cfg)
		return nil, measured, err
	}
	v, err := r.preloadKey(k, r.key(k, cfg, nil))
	return v, nil, err
}

// preloadKey loads the variant stored under key unless it is loaded,
// returning it (nil when the store has none). Called with k.mu held.
func (r *Runtime) preloadKey(k *Kernel, key Key) (*Variant, error) {
	if v, ok := k.variants.Lookup(key.Hash()); ok {
		return v, nil
	}
	cubin, _, err := r.Store.Get(key)
	if cubin == nil {
		return nil, err
	}
	v, err := r.install(k, key, cubin, true)
	if err != nil {
		return nil, err
	}
	r.trace("preloaded %s", k.Name)
	return v, nil
}

// preloadMeasured loads the variants of cfg (p's, whose code folds argument
// values) for the values the entry says its variants were measured with,
// those in the store, within the kernel's variant bound: a launch with
// those values then finds its code in memory instead of reading and
// loading it on the application's critical path, and the shim runs it
// without asking (each variant is returned with its values, which the
// shim keys it by). Nothing is loaded when a folded argument lists no values
// (any value could come) or a value's size is not its argument's. Called
// with k.mu held and k's facts known.
func (r *Runtime) preloadMeasured(k *Kernel, p *Plan, cfg mneme.Config) ([]measuredVariant, error) {
	folded := FoldedArgs(cfg, *k.facts)
	values := make([][][]byte, len(folded))
	for i, a := range folded {
		for _, f := range p.Folded {
			if f.Arg == a {
				values[i] = f.Values
			}
		}
		if len(values[i]) == 0 || a < 0 || a >= len(k.facts.ArgSizes) {
			return nil, nil
		}
		for _, v := range values[i] {
			if len(v) != k.facts.ArgSizes[a] {
				return nil, nil
			}
		}
	}
	args := make([][]byte, len(k.facts.ArgSizes))
	var errs []error
	var loaded []measuredVariant
	// Every combination of the listed values, the last argument's varying
	// fastest, until the kernel holds as many variants as it may.
	var walk func(i int)
	walk = func(i int) {
		if k.variants.Len() >= r.maxVariants() {
			return
		}
		if i == len(folded) {
			v, err := r.preloadKey(k, r.key(k, cfg, args))
			if err != nil {
				errs = append(errs, err)
			}
			if v != nil {
				loaded = append(loaded, measuredVariant{v, slices.Clone(args)})
			}
			return
		}
		for _, v := range values[i] {
			args[folded[i]] = v
			walk(i + 1)
		}
	}
	walk(0)
	return loaded, errors.Join(errs...)
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

// FoldsArgs tells whether k's configurations (its classes' when it has
// some) fold argument values, which makes their bytes part of its
// launches' keys; false while its facts are unknown.
func (k *Kernel) FoldsArgs() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.facts != nil && len(k.layout(*k.facts).args) > 0
}
