package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// fakeCompiler compiles to a cubin that names what it was compiled from:
// the kernel, the configuration's key, the geometry folded in and the
// folded values, so a test can tell which variant a launch ran.
type fakeCompiler struct {
	mu    sync.Mutex
	calls []string // kernel: cfg summary
	fail  map[string]error
	facts map[string]KernelFacts
}

func (c *fakeCompiler) Compile(kernel string, cfg mneme.Config, args [][]byte) (*CompileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.facts[kernel]
	name := fmt.Sprintf("%s spec=%v dims=%v grid=%v block=%v", kernel, cfg.Specialize, cfg.SpecializeDims, cfg.Grid, cfg.Block)
	if cfg.Specialize {
		for _, i := range FoldedArgs(cfg, f) {
			if i < len(args) {
				name += fmt.Sprintf(" a%d=%x", i, args[i])
			}
		}
	}
	c.calls = append(c.calls, name)
	if err := c.fail[kernel]; err != nil {
		return nil, err
	}
	return &CompileResponse{Cubin: []byte(name), Scalars: f.ScalarArgs, ArgSizes: f.ArgSizes, Globals: f.Globals}, nil
}

func (c *fakeCompiler) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// fakeLoader "loads" a cubin as its text.
type fakeLoader struct {
	mu    sync.Mutex
	loads []string
	fail  map[string]error
	host  map[string]HostVar
}

func (l *fakeLoader) Load(kernel string, cubin []byte, links []GlobalLink) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loads = append(l.loads, string(cubin))
	if err := l.fail[kernel]; err != nil {
		return nil, err
	}
	return string(cubin), nil
}

func (l *fakeLoader) HostVars() map[string]HostVar { return l.host }

func (l *fakeLoader) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.loads)
}

// testRuntime is a runtime over a disk cache in dir with the plans given.
func testRuntime(dir string, plans Plans, c *fakeCompiler, l *fakeLoader, warnings *[]string) *Runtime {
	return &Runtime{Plans: plans, Store: NewCache(dir), Compiler: c, Loader: l, IRHash: "ir", Arch: "sm_90", Driver: 13000,
		Warn: func(m string) { *warnings = append(*warnings, m) }}
}

func plan(name string, cfg mneme.Config) *Plan {
	return &Plan{Kernel: name, Config: cfg, Source: "tuned.json"}
}

func u32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// launch prepares one launch and fails the test on an error.
func launch(t *testing.T, r *Runtime, name string, grid, block mneme.Dim3, args ...[]byte) LaunchPlan {
	t.Helper()
	k := r.Kernel(name)
	if k == nil {
		t.Fatalf("%s: no deployment state", name)
	}
	lp, err := r.Prepare(k, grid, block, args, 0)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return lp
}

var twoArgs = KernelFacts{ScalarArgs: []int{1}, ArgSizes: []int{8, 4}}

// The cache order: the kernel's variants in memory, then the disk cache,
// then the compiler; a later process finds on disk what an earlier one
// compiled and compiles nothing; a corrupt entry is compiled again.
func TestRuntimeCacheOrder(t *testing.T) {
	dir := t.TempDir()
	plans := Plans{"k": plan("k", mneme.Config{Passes: "default<O2>", CodegenOpt: 3})}
	c := &fakeCompiler{facts: map[string]KernelFacts{"k": twoArgs}}
	l := &fakeLoader{}
	var warns []string
	r := testRuntime(dir, plans, c, l, &warns)
	g, b := dim(4, 1, 1), dim(128, 1, 1)
	first := launch(t, r, "k", g, b, u32(1), u32(7))
	if c.count() != 1 || l.count() != 1 {
		t.Fatalf("first launch: %d compiles, %d loads; want 1, 1", c.count(), l.count())
	}
	// Another launch, other values (nothing folds): the variant in memory.
	again := launch(t, r, "k", dim(9, 1, 1), b, u32(2), u32(8))
	if again.Variant != first.Variant || c.count() != 1 || l.count() != 1 {
		t.Fatalf("second launch: %d compiles, %d loads, same variant %v; want 1, 1, true", c.count(), l.count(), again.Variant == first.Variant)
	}
	// A new process: facts and code from disk, no compile.
	r2 := testRuntime(dir, plans, c, l, &warns)
	launch(t, r2, "k", g, b, u32(1), u32(7))
	if c.count() != 1 || l.count() != 2 {
		t.Fatalf("a later process: %d compiles, %d loads; want 1 (none new), 2", c.count(), l.count())
	}
	if len(warns) != 0 {
		t.Fatalf("warnings without a failure: %q", warns)
	}
	// A corrupt entry: one warning, compiled again, the application unharmed.
	entries, _ := filepath.Glob(filepath.Join(dir, "??", "*.cubin"))
	if len(entries) != 1 {
		t.Fatalf("cache entries %v, want one", entries)
	}
	if err := os.WriteFile(entries[0], []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	r3 := testRuntime(dir, plans, c, l, &warns)
	launch(t, r3, "k", g, b, u32(1), u32(7))
	if c.count() != 2 || len(warns) != 1 || !strings.Contains(warns[0], "compiling again") {
		t.Fatalf("a corrupt entry: %d compiles, warnings %q; want 2 and one warning", c.count(), warns)
	}
}

// Fail, then carry on: a kernel whose compile fails is disabled with one
// warning and never compiled again, however often it is launched; the
// other kernels are unaffected; a failure to load is treated alike.
func TestRuntimeFailThenCarryOn(t *testing.T) {
	plans := Plans{
		"bad":  plan("bad", mneme.Config{Passes: "no-such-pass"}),
		"good": plan("good", mneme.Config{Passes: "default<O3>"}),
		"load": plan("load", mneme.Config{Passes: "default<O1>"}),
	}
	c := &fakeCompiler{fail: map[string]error{"bad": errors.New("unknown pass")}, facts: map[string]KernelFacts{"bad": twoArgs, "good": twoArgs, "load": twoArgs}}
	l := &fakeLoader{fail: map[string]error{"load": errors.New("CUDA_ERROR_INVALID_IMAGE")}}
	var warns []string
	r := testRuntime("", plans, c, l, &warns)
	ownCode := 0
	for i := 0; i < 6; i++ {
		for _, name := range []string{"bad", "good", "load"} {
			k := r.Kernel(name)
			if k == nil {
				ownCode++
				continue
			}
			if _, err := r.Prepare(k, dim(1, 1, 1), dim(32, 1, 1), [][]byte{u32(0), u32(uint32(i))}, 0); err != nil {
				r.Disable(k, err)
				ownCode++
			}
		}
	}
	if ownCode != 12 {
		t.Errorf("%d launches ran the application's own code, want the 12 of bad and load", ownCode)
	}
	var badCompiles, goodCompiles int
	for _, call := range c.calls {
		switch {
		case strings.HasPrefix(call, "bad "):
			badCompiles++
		case strings.HasPrefix(call, "good "):
			goodCompiles++
		}
	}
	if badCompiles != 1 || goodCompiles != 1 {
		t.Errorf("compiles: bad %d, good %d; want one each (no retry after the failure)", badCompiles, goodCompiles)
	}
	if len(l.loads) != 2 {
		t.Errorf("%d loads, want good's and load's one each: %q", len(l.loads), l.loads)
	}
	if len(warns) != 2 || !strings.Contains(warns[0]+warns[1], "tuned kernel bad: unknown pass; the application's own code runs") ||
		!strings.Contains(warns[0]+warns[1], "tuned kernel load: loading its tuned code: CUDA_ERROR_INVALID_IMAGE") {
		t.Errorf("warnings %q, want one per failed kernel naming it and the cause", warns)
	}
	if r.Kernel("good") == nil {
		t.Error("the good kernel was disabled by the others' failures")
	}
}

// Unlisted kernels and kernels whose own code tuning found best get no
// deployment state: the application's own code runs.
func TestRuntimeUnlistedAndOriginal(t *testing.T) {
	c := &fakeCompiler{}
	var warns []string
	r := testRuntime("", Plans{"own": &Plan{Kernel: "own", Original: true}, "tuned": plan("tuned", mneme.Config{Passes: "default<O3>"})}, c, &fakeLoader{}, &warns)
	if r.Kernel("own") != nil || r.Kernel("unlisted") != nil {
		t.Error("an original or unlisted kernel got deployment state")
	}
	if r.Kernel("tuned") == nil {
		t.Error("a tuned kernel got no deployment state")
	}
	if first, again := r.Kernel("tuned"), r.Kernel("tuned"); first != again {
		t.Error("a kernel's state is not kept between launches")
	}
}

// The variant cap: each new folded value compiles its own variant until
// MaxVariants; beyond it new values share the unspecialized tuned code,
// compiled once; values that already have a variant keep it (the
// exception applies); below the cap no value runs the generic code (it does
// not).
func TestRuntimeVariantCap(t *testing.T) {
	cfg := mneme.Config{Passes: "default<O3>", Specialize: true}
	for _, cap := range []int{2, 16} {
		t.Run(fmt.Sprint("cap", cap), func(t *testing.T) {
			c := &fakeCompiler{facts: map[string]KernelFacts{"s": twoArgs}}
			var warns []string
			r := testRuntime("", Plans{"s": plan("s", cfg)}, c, &fakeLoader{}, &warns)
			r.MaxVariants = cap
			code := func(v uint32) string {
				return launch(t, r, "s", dim(1, 1, 1), dim(32, 1, 1), u32(0), u32(v)).Variant.Code.(string)
			}
			for _, v := range []uint32{1, 2} {
				if got := code(v); !strings.Contains(got, fmt.Sprintf("a1=%x", u32(v))) {
					t.Errorf("value %d ran %q, want its own variant", v, got)
				}
			}
			for _, v := range []uint32{3, 4} {
				got := code(v)
				if cap == 2 && got != "s spec=false dims=false grid=0,0,0 block=0,0,0" {
					t.Errorf("value %d beyond the cap ran %q, want the unspecialized tuned code", v, got)
				}
				if cap == 16 && !strings.Contains(got, fmt.Sprintf("a1=%x", u32(v))) {
					t.Errorf("value %d below the cap ran %q, want its own variant", v, got)
				}
			}
			if got := code(1); !strings.Contains(got, fmt.Sprintf("a1=%x", u32(1))) {
				t.Errorf("value 1 after the cap ran %q, want its own variant", got)
			}
			want := map[int]int{2: 3, 16: 4}[cap] // 2 variants + generic once, or 4 variants
			if c.count() != want {
				t.Errorf("%d compiles, want %d: %q", c.count(), want, c.calls)
			}
		})
	}
}

// A launch's key among a kernel's launches: each input changed alone. The
// block always counts; the grid only when dimensions are folded; a folded
// argument's bytes count, an argument not folded does not.
func TestRuntimeHotKeyEachInput(t *testing.T) {
	base := struct {
		grid, block mneme.Dim3
		a0, a1      uint32
	}{dim(8, 4, 2), dim(32, 2, 1), 5, 6}
	type launchIn = struct {
		name        string
		grid, block mneme.Dim3
		a0, a1      uint32
	}
	changes := []launchIn{
		{"block.x", base.grid, dim(64, 2, 1), base.a0, base.a1},
		{"block.y", base.grid, dim(32, 4, 1), base.a0, base.a1},
		{"block.z", base.grid, dim(32, 2, 2), base.a0, base.a1},
		{"grid.x", dim(9, 4, 2), base.block, base.a0, base.a1},
		{"grid.y", dim(8, 5, 2), base.block, base.a0, base.a1},
		{"grid.z", dim(8, 4, 3), base.block, base.a0, base.a1},
		{"arg0", base.grid, base.block, 99, base.a1},
		{"arg1", base.grid, base.block, base.a0, 99},
	}
	for _, dims := range []bool{false, true} {
		cfg := mneme.Config{Passes: "default<O3>", Specialize: true, SpecializeDims: dims}
		for _, ch := range changes {
			c := &fakeCompiler{facts: map[string]KernelFacts{"h": twoArgs}}
			var warns []string
			r := testRuntime("", Plans{"h": plan("h", cfg)}, c, &fakeLoader{}, &warns)
			launch(t, r, "h", base.grid, base.block, u32(base.a0), u32(base.a1))
			launch(t, r, "h", base.grid, base.block, u32(base.a0), u32(base.a1))
			if c.count() != 1 {
				t.Fatalf("dims %v: an equal launch compiled again (%d compiles)", dims, c.count())
			}
			launch(t, r, "h", ch.grid, ch.block, u32(ch.a0), u32(ch.a1))
			differs := strings.HasPrefix(ch.name, "block") || ch.name == "arg1" || (dims && strings.HasPrefix(ch.name, "grid"))
			// A changed block is a new key but, without folded
			// dimensions, the same cache key: found among the variants.
			wantCompiles := 1
			if ch.name == "arg1" || (dims && (strings.HasPrefix(ch.name, "grid") || strings.HasPrefix(ch.name, "block"))) {
				wantCompiles = 2
			}
			if c.count() != wantCompiles {
				t.Errorf("dims %v, %s changed: %d compiles, want %d", dims, ch.name, c.count(), wantCompiles)
			}
			k := r.Kernel("h")
			if got := len(k.hot); (got == 2) != differs {
				t.Errorf("dims %v, %s changed: %d launch keys, want a new one: %v", dims, ch.name, got, differs)
			}
		}
	}
}

// VariantLaunchKey's layout, each input changed alone.
func TestVariantLaunchKey(t *testing.T) {
	g, b := dim(1, 2, 3), dim(4, 5, 6)
	folded := [][]byte{{7, 8}, {9}}
	want := []byte{4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 7, 8, 9}
	if got := VariantLaunchKey(nil, g, b, true, false, 0, folded); !bytes.Equal(got, want) {
		t.Fatalf("key %v, want %v", got, want)
	}
	if got := VariantLaunchKey(nil, g, b, false, false, 0, folded); !bytes.Equal(got, append(want[:12:12], 7, 8, 9)) {
		t.Fatalf("key without dims %v", got)
	}
	withShared := append(append(want[:24:24], 0x00, 0x01, 0x02, 0x00), 7, 8, 9)
	if got := VariantLaunchKey(nil, g, b, true, true, 0x20100, folded); !bytes.Equal(got, withShared) {
		t.Fatalf("key with shared memory %v, want %v", got, withShared)
	}
	key := func(g, b mneme.Dim3, dims, sk bool, shared uint32, f [][]byte) string {
		return string(VariantLaunchKey(nil, g, b, dims, sk, shared, f))
	}
	ref := key(g, b, true, true, 256, folded)
	for name, other := range map[string]string{
		"grid.x": key(dim(9, 2, 3), b, true, true, 256, folded), "grid.y": key(dim(1, 9, 3), b, true, true, 256, folded), "grid.z": key(dim(1, 2, 9), b, true, true, 256, folded),
		"block.x": key(g, dim(9, 5, 6), true, true, 256, folded), "block.y": key(g, dim(4, 9, 6), true, true, 256, folded), "block.z": key(g, dim(4, 5, 9), true, true, 256, folded),
		"arg0": key(g, b, true, true, 256, [][]byte{{7, 9}, {9}}), "arg1": key(g, b, true, true, 256, [][]byte{{7, 8}, {8}}), "dims": key(g, b, false, true, 256, folded),
		"shared": key(g, b, true, true, 257, folded), "shared keyed": key(g, b, true, false, 256, folded),
	} {
		if other == ref {
			t.Errorf("changing %s alone left the key unchanged", name)
		}
	}
	if key(g, b, true, true, 256, folded) != ref {
		t.Error("equal inputs gave another key")
	}
	if key(g, b, true, false, 1, folded) != key(g, b, true, false, 2, folded) {
		t.Error("the shared memory entered a key that does not key it")
	}
}

// What the shim may run alone: nothing folded, every launch; folded values,
// keyed launches; nothing when the code's variables are refreshed per
// launch or the key is beyond the limits, each limit on both sides.
func TestRuntimeFastPath(t *testing.T) {
	limits := Limits{MaxFolded: 2, MaxKeyedArg: 8, MaxKeys: 16, DefaultShared: 48 << 10}
	for _, tc := range []struct {
		name  string
		cfg   mneme.Config
		facts KernelFacts
		args  [][]byte
		host  map[string]HostVar
		want  string // "all", "keyed", "none"
	}{
		{"nothing folded", mneme.Config{}, twoArgs, [][]byte{u32(1), u32(2)}, nil, "all"},
		{"one folded", mneme.Config{Specialize: true}, twoArgs, [][]byte{u32(1), u32(2)}, nil, "keyed"},
		{"dims folded", mneme.Config{SpecializeDims: true}, twoArgs, [][]byte{u32(1), u32(2)}, nil, "keyed"},
		{"launch bounds", mneme.Config{SetLaunchBounds: true, MaxThreads: 64}, twoArgs, [][]byte{u32(1), u32(2)}, nil, "keyed"},
		{"arg at the size limit", mneme.Config{Specialize: true}, KernelFacts{ScalarArgs: []int{0}, ArgSizes: []int{8}}, [][]byte{make([]byte, 8)}, nil, "keyed"},
		{"arg over the size limit", mneme.Config{Specialize: true}, KernelFacts{ScalarArgs: []int{0}, ArgSizes: []int{9}}, [][]byte{make([]byte, 9)}, nil, "none"},
		{"folded at the count limit", mneme.Config{Specialize: true}, KernelFacts{ScalarArgs: []int{0, 1}, ArgSizes: []int{4, 4}}, [][]byte{u32(1), u32(2)}, nil, "keyed"},
		{"folded over the count limit", mneme.Config{Specialize: true}, KernelFacts{ScalarArgs: []int{0, 1, 2}, ArgSizes: []int{4, 4, 4}}, [][]byte{u32(1), u32(2), u32(3)}, nil, "none"},
		{"a __constant__ refreshed", mneme.Config{}, KernelFacts{ArgSizes: []int{4}, Globals: []Global{{Name: "table", AddressSpace: 4}}}, [][]byte{u32(1)},
			map[string]HostVar{"table": {Addr: 0x100, Size: 64, Constant: true}}, "none"},
		{"a variable of the code's own", mneme.Config{}, KernelFacts{ArgSizes: []int{4}, Globals: []Global{{Name: "lut", AddressSpace: 4}}}, [][]byte{u32(1)},
			map[string]HostVar{"table": {Addr: 0x100, Size: 64, Constant: true}}, "all"},
	} {
		c := &fakeCompiler{facts: map[string]KernelFacts{"f": tc.facts}}
		var warns []string
		r := testRuntime("", Plans{"f": plan("f", tc.cfg)}, c, &fakeLoader{host: tc.host}, &warns)
		r.Limits = limits
		lp := launch(t, r, "f", dim(2, 1, 1), dim(32, 1, 1), tc.args...)
		got := "none"
		switch {
		case lp.Fast.Variant != nil && lp.Fast.Keyed:
			got = "keyed"
		case lp.Fast.Variant != nil:
			got = "all"
		}
		if got != tc.want {
			t.Errorf("%s: fast path %s, want %s", tc.name, got, tc.want)
		}
		if got == "keyed" {
			if lp.Fast.DimsFolded != tc.cfg.SpecializeDims || len(lp.Fast.Folded) != len(lp.Fast.FoldedSizes) {
				t.Errorf("%s: keyed fast path %+v", tc.name, lp.Fast)
			}
			for i, a := range lp.Fast.Folded {
				if lp.Fast.FoldedSizes[i] != len(tc.args[a]) {
					t.Errorf("%s: folded %d has size %d, want %d", tc.name, a, lp.Fast.FoldedSizes[i], len(tc.args[a]))
				}
			}
		}
	}
}

// Variables: a __constant__ (or read-only __device__) variable the
// application registered is refreshed; a writable __device__ one cannot be
// shared and keeps the kernel on its own code; the code's own variables
// need nothing.
func TestGlobalLinks(t *testing.T) {
	host := map[string]HostVar{"c": {Addr: 1, Size: 4, Constant: true}, "d": {Addr: 2, Size: 8}}
	for _, tc := range []struct {
		name    string
		globals []Global
		links   []string
		fails   bool
	}{
		{"constant shared", []Global{{Name: "c"}}, []string{"c"}, false},
		{"device read-only shared", []Global{{Name: "d", ReadOnly: true}}, []string{"d"}, false},
		{"device writable shared", []Global{{Name: "d"}}, nil, true},
		{"constant written by nobody, not shared", []Global{{Name: "own"}}, nil, false},
		{"both", []Global{{Name: "own"}, {Name: "c", ReadOnly: true}}, []string{"c"}, false},
	} {
		links, err := GlobalLinks(tc.globals, host)
		if (err != nil) != tc.fails {
			t.Errorf("%s: error %v, want failure %v", tc.name, err, tc.fails)
			continue
		}
		var names []string
		for _, l := range links {
			names = append(names, l.Name)
			if l.Host != host[l.Name] {
				t.Errorf("%s: link %s carries %+v, want %+v", tc.name, l.Name, l.Host, host[l.Name])
			}
		}
		if fmt.Sprint(names) != fmt.Sprint(tc.links) {
			t.Errorf("%s: links %v, want %v", tc.name, names, tc.links)
		}
	}
	// Through a launch: the writable variable disables the kernel.
	c := &fakeCompiler{facts: map[string]KernelFacts{"w": {ArgSizes: []int{4}, Globals: []Global{{Name: "d"}}}}}
	var warns []string
	r := testRuntime("", Plans{"w": plan("w", mneme.Config{})}, c, &fakeLoader{host: host}, &warns)
	if _, err := r.Prepare(r.Kernel("w"), dim(1, 1, 1), dim(1, 1, 1), [][]byte{u32(0)}, 0); err == nil || !strings.Contains(err.Error(), "__device__ variable d") {
		t.Errorf("a writable shared variable: %v", err)
	}
}

// Dynamic shared memory beyond the default needs the code opened up, once
// per larger size; at or under the default it never does.
func TestRuntimeSharedOptIn(t *testing.T) {
	c := &fakeCompiler{facts: map[string]KernelFacts{"k": twoArgs}}
	var warns []string
	r := testRuntime("", Plans{"k": plan("k", mneme.Config{})}, c, &fakeLoader{}, &warns)
	k := r.Kernel("k")
	prep := func(shared uint32) LaunchPlan {
		lp, err := r.Prepare(k, dim(1, 1, 1), dim(32, 1, 1), [][]byte{u32(0), u32(0)}, shared)
		if err != nil {
			t.Fatal(err)
		}
		return lp
	}
	def := uint32(DefaultLimits.DefaultShared)
	if prep(def).OptInShared {
		t.Error("the default shared memory asked for an opt-in")
	}
	lp := prep(def + 1)
	if !lp.OptInShared {
		t.Fatal("one byte over the default asked for no opt-in")
	}
	r.SharedOpened(lp.Variant, 64<<10)
	if prep(64 << 10).OptInShared {
		t.Error("a size the code was opened up for asked again")
	}
	if !prep(64<<10 + 1).OptInShared {
		t.Error("a larger size than opened asked for no opt-in")
	}
}

// The launch's geometry is the plan's: the tuned block for launches with
// the recorded block, the grid re-derived; other launches unchanged.
func TestRuntimePrepareAppliesGeometry(t *testing.T) {
	p := plan("g", mneme.Config{})
	p.TunedBlock, p.RecordedBlock = dim(128, 1, 1), dim(256, 1, 1)
	c := &fakeCompiler{facts: map[string]KernelFacts{"g": twoArgs}}
	var warns []string
	r := testRuntime("", Plans{"g": p}, c, &fakeLoader{}, &warns)
	if lp := launch(t, r, "g", dim(10, 1, 1), dim(256, 1, 1), u32(0), u32(0)); lp.Grid != dim(20, 1, 1) || lp.Block != dim(128, 1, 1) {
		t.Errorf("recorded block: launched %v x %v, want 20 x 128", lp.Grid, lp.Block)
	}
	if lp := launch(t, r, "g", dim(10, 1, 1), dim(64, 1, 1), u32(0), u32(0)); lp.Grid != dim(10, 1, 1) || lp.Block != dim(64, 1, 1) {
		t.Errorf("another block: launched %v x %v, want it unchanged", lp.Grid, lp.Block)
	}
}

// Preload loads what a first launch will need when it is already compiled,
// and never compiles: after it, the first launch loads nothing. A kernel
// whose values fold, or whose code or facts are not cached, is left alone.
func TestRuntimePreload(t *testing.T) {
	dir := t.TempDir()
	plain := plan("plain", mneme.Config{Passes: "default<O3>", SetLaunchBounds: true, MaxThreads: 256})
	plain.RecordedBlock, plain.RecordedGrid, plain.TunedBlock = dim(512, 1, 1), dim(8, 1, 1), dim(256, 1, 1)
	dims := plan("dims", mneme.Config{Passes: "default<O3>", SpecializeDims: true})
	dims.RecordedBlock, dims.RecordedGrid = dim(64, 1, 1), dim(16, 1, 1)
	folds := plan("folds", mneme.Config{Passes: "default<O3>", Specialize: true})
	folds.RecordedBlock, folds.RecordedGrid = dim(64, 1, 1), dim(16, 1, 1)
	uncached := plan("uncached", mneme.Config{Passes: "default<O2>"})
	factsOnly := plan("factsonly", mneme.Config{Passes: "default<O1>"})
	plans := Plans{"plain": plain, "dims": dims, "folds": folds, "uncached": uncached, "factsonly": factsOnly}
	facts := map[string]KernelFacts{"plain": twoArgs, "dims": twoArgs, "folds": twoArgs, "uncached": twoArgs, "factsonly": twoArgs}
	if err := NewCache(dir).PutFacts("ir", "factsonly", &twoArgs); err != nil {
		t.Fatal(err)
	}
	c := &fakeCompiler{facts: facts}
	var warns []string
	// An earlier run compiled the recorded launches of three kernels.
	first := testRuntime(dir, Plans{"plain": plain, "dims": dims, "folds": folds}, c, &fakeLoader{}, &warns)
	launch(t, first, "plain", dim(8, 1, 1), dim(512, 1, 1), u32(0), u32(1))
	launch(t, first, "dims", dim(16, 1, 1), dim(64, 1, 1), u32(0), u32(1))
	launch(t, first, "folds", dim(16, 1, 1), dim(64, 1, 1), u32(0), u32(1))
	compiled := c.count()

	l := &fakeLoader{}
	r := testRuntime(dir, plans, c, l, &warns)
	pre := r.Preload()
	var names []string
	for _, p := range pre {
		names = append(names, p.Kernel.Name)
		// plain's code depends on the block (launch bounds), dims' on the
		// launch's dimensions: each is handed to the shim for its recorded
		// launch's key only.
		if len(p.Fast) != 1 || !p.Fast[0].Keyed || p.Fast[0].DimsFolded != (p.Kernel.Name == "dims") ||
			p.Fast[0].Block != p.Kernel.Plan.RecordedBlock || p.Fast[0].Grid != p.Kernel.Plan.RecordedGrid {
			t.Errorf("%s: preloaded fast paths %+v, want one keyed by its recorded launch", p.Kernel.Name, p.Fast)
		}
	}
	if strings.Join(names, " ") != "dims plain" {
		t.Errorf("preloaded %q, want dims and plain: %q", names, l.loads)
	}
	if c.count() != compiled {
		t.Errorf("preload compiled %d variants, want none", c.count()-compiled)
	}
	loaded := l.count()
	launch(t, r, "plain", dim(8, 1, 1), dim(512, 1, 1), u32(0), u32(1))
	launch(t, r, "dims", dim(16, 1, 1), dim(64, 1, 1), u32(0), u32(1))
	if l.count() != loaded || c.count() != compiled {
		t.Errorf("the preloaded kernels' first launches loaded %d and compiled %d, want none", l.count()-loaded, c.count()-compiled)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	// The others load or compile at their first launch, as before.
	launch(t, r, "folds", dim(16, 1, 1), dim(64, 1, 1), u32(0), u32(1))
	launch(t, r, "uncached", dim(16, 1, 1), dim(64, 1, 1), u32(0), u32(1))
	launch(t, r, "factsonly", dim(16, 1, 1), dim(64, 1, 1), u32(0), u32(1))
	if l.count() != loaded+3 || c.count() != compiled+2 {
		t.Errorf("folds, uncached and factsonly: %d loads and %d compiles, want 3 and 2 (the last two)", l.count()-loaded, c.count()-compiled)
	}
}

// Preload hands the shim the fast path a first launch of the recorded shape
// would: for every launch where each launch runs one code; keyed by the
// recorded launch where the code depends on the block (launch bounds) or
// the dimensions (folded), when the launch was recorded; none where a
// variable is refreshed before each launch. Each input changed alone.
func TestRuntimePreloadFastPath(t *testing.T) {
	withConst := KernelFacts{ArgSizes: []int{8, 4}, Globals: []Global{{Name: "table", AddressSpace: 4}}}
	for _, tc := range []struct {
		name     string
		cfg      mneme.Config
		facts    KernelFacts
		recorded bool
		want     string // "all", "keyed", "none"
	}{
		{"nothing folded", mneme.Config{Passes: "default<O3>"}, twoArgs, true, "all"},
		{"nothing folded, launch not recorded", mneme.Config{Passes: "default<O3>"}, twoArgs, false, "all"},
		{"launch bounds", mneme.Config{Passes: "default<O3>", SetLaunchBounds: true, MaxThreads: 128}, twoArgs, true, "keyed"},
		{"dims folded", mneme.Config{Passes: "default<O3>", SpecializeDims: true}, twoArgs, true, "keyed"},
		{"launch bounds, launch not recorded", mneme.Config{Passes: "default<O3>", SetLaunchBounds: true, MaxThreads: 128}, twoArgs, false, "none"},
		{"a __constant__ refreshed", mneme.Config{Passes: "default<O3>"}, withConst, true, "none"},
	} {
		dir := t.TempDir()
		p := plan("k", tc.cfg)
		if tc.recorded {
			p.RecordedBlock, p.RecordedGrid, p.TunedBlock = dim(128, 1, 1), dim(8, 1, 1), dim(64, 1, 1)
		}
		c := &fakeCompiler{facts: map[string]KernelFacts{"k": tc.facts}}
		host := map[string]HostVar{"table": {Addr: 0x100, Size: 64, Constant: true}}
		var warns []string
		// The warm run launches what Preload expects: the recorded launch,
		// or a block of MaxThreads.
		warm := testRuntime(dir, Plans{"k": p}, c, &fakeLoader{host: host}, &warns)
		launch(t, warm, "k", dim(8, 1, 1), dim(128, 1, 1), u32(0), u32(1))
		l := &fakeLoader{host: host}
		r := testRuntime(dir, Plans{"k": p}, c, l, &warns)
		pre := r.Preload()
		if len(pre) != 1 {
			t.Fatalf("%s: preloaded %d kernels, want 1", tc.name, len(pre))
		}
		got := "none"
		if len(pre[0].Fast) == 1 {
			got = map[bool]string{false: "all", true: "keyed"}[pre[0].Fast[0].Keyed]
		}
		if got != tc.want || len(pre[0].Fast) > 1 {
			t.Errorf("%s: fast paths %+v, want %s", tc.name, pre[0].Fast, tc.want)
		}
		if got == "none" {
			continue
		}
		f := pre[0].Fast[0]
		if f.TunedBlock != p.TunedBlock || f.RecordedBlock != p.RecordedBlock {
			t.Errorf("%s: block rule %v from %v, want %v from %v", tc.name, f.TunedBlock, f.RecordedBlock, p.TunedBlock, p.RecordedBlock)
		}
		// The recorded launch's first launch runs the preloaded variant,
		// loads nothing and would leave the shim the same fast path.
		loads := l.count()
		lp := launch(t, r, "k", dim(8, 1, 1), dim(128, 1, 1), u32(0), u32(1))
		if lp.Variant != f.Variant || l.count() != loads {
			t.Errorf("%s: the first launch ran another variant than the preloaded one, or loaded again", tc.name)
		}
		if lp.Fast.Variant != f.Variant || lp.Fast.Keyed != f.Keyed || lp.Fast.DimsFolded != f.DimsFolded ||
			lp.Fast.SharedKeyed != f.SharedKeyed || len(lp.Fast.Folded) != 0 {
			t.Errorf("%s: the first launch's fast path %+v differs from the preloaded %+v", tc.name, lp.Fast, f.FastPath)
		}
		if f.Keyed && (f.Grid != dim(8, 1, 1) || f.Block != dim(128, 1, 1) || f.Shared != 0) {
			t.Errorf("%s: keyed by %v x %v shared %d, want the recorded launch", tc.name, f.Grid, f.Block, f.Shared)
		}
	}
}

// A kernel's facts come from its first compile or the cache; until then it
// has no sizes to offer and folds nothing.
func TestKernelArgSizesAndFolds(t *testing.T) {
	c := &fakeCompiler{facts: map[string]KernelFacts{"s": twoArgs, "n": twoArgs}}
	var warns []string
	r := testRuntime("", Plans{"s": plan("s", mneme.Config{Specialize: true}), "n": plan("n", mneme.Config{})}, c, &fakeLoader{}, &warns)
	for _, name := range []string{"s", "n"} {
		k := r.Kernel(name)
		if k.ArgSizes() != nil || k.FoldsArgs() {
			t.Errorf("%s before its first launch: sizes %v, folds %v", name, k.ArgSizes(), k.FoldsArgs())
		}
		launch(t, r, name, dim(1, 1, 1), dim(1, 1, 1), u32(0), u32(0))
		if fmt.Sprint(k.ArgSizes()) != "[8 4]" || k.FoldsArgs() != (name == "s") {
			t.Errorf("%s after: sizes %v, folds %v", name, k.ArgSizes(), k.FoldsArgs())
		}
	}
}

// The launch Preload expects, from each thing a plan may know.
func TestExpectedLaunch(t *testing.T) {
	for _, tc := range []struct {
		name                string
		recBlock, recGrid   mneme.Dim3
		tuned               mneme.Dim3
		cfg                 mneme.Config
		wantGrid, wantBlock mneme.Dim3
		ok                  bool
	}{
		{"recorded, tuned block", dim(256, 1, 1), dim(8, 1, 1), dim(128, 1, 1), mneme.Config{}, dim(16, 1, 1), dim(128, 1, 1), true},
		{"recorded block only, tuned block", dim(256, 1, 1), mneme.Dim3{}, dim(128, 1, 1), mneme.Config{}, mneme.Dim3{}, dim(128, 1, 1), true},
		{"recorded, no tuned block", dim(256, 1, 1), dim(8, 1, 1), mneme.Dim3{}, mneme.Config{}, dim(8, 1, 1), dim(256, 1, 1), true},
		{"nothing recorded, nothing bound", mneme.Dim3{}, mneme.Dim3{}, mneme.Dim3{}, mneme.Config{}, mneme.Dim3{}, mneme.Dim3{}, true},
		{"nothing recorded, dims folded", mneme.Dim3{}, mneme.Dim3{}, mneme.Dim3{}, mneme.Config{SpecializeDims: true}, mneme.Dim3{}, mneme.Dim3{}, false},
		{"nothing recorded, launch bounds", mneme.Dim3{}, mneme.Dim3{}, mneme.Dim3{}, mneme.Config{SetLaunchBounds: true, MaxThreads: 128}, mneme.Dim3{}, dim(128, 1, 1), true},
		{"nothing recorded, launch bounds without a maximum", mneme.Dim3{}, mneme.Dim3{}, mneme.Dim3{}, mneme.Config{SetLaunchBounds: true}, mneme.Dim3{}, mneme.Dim3{}, false},
		{"nothing recorded, launch bounds and dims", mneme.Dim3{}, mneme.Dim3{}, mneme.Dim3{}, mneme.Config{SetLaunchBounds: true, MaxThreads: 128, SpecializeDims: true}, mneme.Dim3{}, mneme.Dim3{}, false},
	} {
		p := &Plan{Config: tc.cfg, RecordedBlock: tc.recBlock, RecordedGrid: tc.recGrid, TunedBlock: tc.tuned}
		g, b, ok := p.expectedLaunch()
		if ok != tc.ok || (ok && (g != tc.wantGrid || b != tc.wantBlock)) {
			t.Errorf("%s: %v x %v ok %v, want %v x %v ok %v", tc.name, g, b, ok, tc.wantGrid, tc.wantBlock, tc.ok)
		}
	}
}

// The table of launches seen keeps at most MaxKeys of a kernel's launch
// keys; launches beyond it still run the right variant, found among the
// variants instead, and compile nothing new.
func TestRuntimeHotKeysBound(t *testing.T) {
	c := &fakeCompiler{facts: map[string]KernelFacts{"k": twoArgs}}
	var warns []string
	r := testRuntime("", Plans{"k": plan("k", mneme.Config{Passes: "default<O3>"})}, c, &fakeLoader{}, &warns)
	r.Limits = Limits{MaxFolded: 32, MaxKeyedArg: 4096, MaxKeys: 2, DefaultShared: 48 << 10}
	var first *Variant
	for x := uint32(1); x <= 4; x++ {
		lp := launch(t, r, "k", dim(1, 1, 1), dim(32*x, 1, 1), u32(0), u32(0))
		if first == nil {
			first = lp.Variant
		}
		if lp.Variant != first {
			t.Errorf("block %d ran another variant", 32*x)
		}
		if want := min(int(x), 2); len(r.Kernel("k").hot) != want {
			t.Errorf("after %d blocks: %d launch keys kept, want %d", x, len(r.Kernel("k").hot), want)
		}
	}
	if c.count() != 1 {
		t.Errorf("%d compiles, want 1", c.count())
	}
}

// Launches from many threads beside Preload: every launch runs a variant,
// each kernel's code is loaded once and compiled at most once.
func TestRuntimeConcurrentLaunchesAndPreload(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a", "b", "c", "d"}
	plans, facts := Plans{}, map[string]KernelFacts{}
	for _, n := range names {
		p := plan(n, mneme.Config{Passes: "default<O3>"})
		p.RecordedBlock, p.RecordedGrid = dim(64, 1, 1), dim(4, 1, 1)
		plans[n], facts[n] = p, twoArgs
	}
	c := &fakeCompiler{facts: facts}
	var warns []string
	warm := testRuntime(dir, Plans{"a": plans["a"], "b": plans["b"]}, c, &fakeLoader{}, &warns)
	launch(t, warm, "a", dim(4, 1, 1), dim(64, 1, 1), u32(0), u32(0))
	launch(t, warm, "b", dim(4, 1, 1), dim(64, 1, 1), u32(0), u32(0))
	l := &fakeLoader{}
	r := testRuntime(dir, plans, c, l, &warns)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.Preload() }()
	errs := make(chan error, 64)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k := r.Kernel(names[i%len(names)])
			lp, err := r.Prepare(k, dim(4, 1, 1), dim(64, 1, 1), [][]byte{u32(0), u32(uint32(i))}, 0)
			if err == nil && lp.Variant == nil {
				err = errors.New("no variant")
			}
			if err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if l.count() != len(names) {
		t.Errorf("%d loads, want one per kernel: %q", l.count(), l.loads)
	}
	if c.count() != 4 {
		t.Errorf("%d compiles, want the warm run's 2 and c's and d's", c.count())
	}
}

// failingStore is a cache whose writes fail, as on a full disk.
type failingStore struct {
	*Cache
	err error
}

func (s failingStore) Put(Key, []byte) error                       { return s.err }
func (s failingStore) PutFacts(string, string, *KernelFacts) error { return s.err }

// Fail, then carry on, for the cache: writes that fail are traced and the
// launches run their tuned code all the same; the first launch of a kernel
// is traced once, and not when it failed; a preload that fails to load is
// traced and leaves the kernel to its first launch.
func TestRuntimeTraces(t *testing.T) {
	c := &fakeCompiler{facts: map[string]KernelFacts{"k": twoArgs, "bad": twoArgs}, fail: map[string]error{"bad": errors.New("no")}}
	var warns, traces []string
	r := testRuntime("", Plans{"k": plan("k", mneme.Config{}), "bad": plan("bad", mneme.Config{})}, c, &fakeLoader{}, &warns)
	r.Store = failingStore{NewCache(""), errors.New("disk full")}
	r.Trace = func(f string, a ...any) { traces = append(traces, fmt.Sprintf(f, a...)) }
	launch(t, r, "k", dim(1, 1, 1), dim(32, 1, 1), u32(0), u32(0))
	launch(t, r, "k", dim(1, 1, 1), dim(32, 1, 1), u32(0), u32(0))
	if _, err := r.Prepare(r.Kernel("bad"), dim(1, 1, 1), dim(32, 1, 1), [][]byte{u32(0), u32(0)}, 0); err == nil {
		t.Fatal("a failing compile prepared a launch")
	}
	want := []string{"facts of k not cached: disk full", "variant of k not cached: disk full", "first launch of k runs its tuned code"}
	if strings.Join(traces, "\n") != strings.Join(want, "\n") {
		t.Errorf("traces:\n%s\nwant:\n%s", strings.Join(traces, "\n"), strings.Join(want, "\n"))
	}
	if len(warns) != 0 || c.count() != 2 {
		t.Errorf("warnings %q and %d compiles; want none and 2", warns, c.count())
	}

	dir := t.TempDir()
	p := plan("p", mneme.Config{})
	p.RecordedBlock, p.RecordedGrid = dim(32, 1, 1), dim(1, 1, 1)
	warm := testRuntime(dir, Plans{"p": p}, &fakeCompiler{facts: map[string]KernelFacts{"p": twoArgs}}, &fakeLoader{}, &warns)
	launch(t, warm, "p", dim(1, 1, 1), dim(32, 1, 1), u32(0), u32(0))
	traces = nil
	r2 := testRuntime(dir, Plans{"p": p}, c, &fakeLoader{fail: map[string]error{"p": errors.New("CUDA_ERROR_OUT_OF_MEMORY")}}, &warns)
	r2.Trace = r.Trace
	if pre := r2.Preload(); len(pre) != 0 {
		t.Errorf("a failed preload counted %d kernels", len(pre))
	}
	want = []string{"preload p: start", "preload of p: loading its tuned code: CUDA_ERROR_OUT_OF_MEMORY", "preload p: end (loaded false)"}
	if strings.Join(traces, "\n") != strings.Join(want, "\n") {
		t.Errorf("preload traces:\n%s\nwant:\n%s", strings.Join(traces, "\n"), strings.Join(want, "\n"))
	}
	if r2.Kernel("p") == nil || len(warns) != 0 {
		t.Errorf("a failed preload disabled the kernel or warned: %q", warns)
	}
}

// A folded first argument keys launches like any other.
func TestRuntimeHotKeyFoldedFirstArgument(t *testing.T) {
	c := &fakeCompiler{facts: map[string]KernelFacts{"k": {ScalarArgs: []int{0}, ArgSizes: []int{4, 4}}}}
	var warns []string
	r := testRuntime("", Plans{"k": plan("k", mneme.Config{Specialize: true})}, c, &fakeLoader{}, &warns)
	a := launch(t, r, "k", dim(1, 1, 1), dim(32, 1, 1), u32(1), u32(0))
	b := launch(t, r, "k", dim(1, 1, 1), dim(32, 1, 1), u32(2), u32(0))
	if a.Variant == b.Variant || len(r.Kernel("k").hot) != 2 || c.count() != 2 {
		t.Errorf("two values of the folded argument 0: same variant %v, %d keys, %d compiles; want different, 2, 2",
			a.Variant == b.Variant, len(r.Kernel("k").hot), c.count())
	}
}

// A launch that passes fewer arguments than the kernel's facts fold (the
// driver's parameter list disagreeing with the IR's) neither panics nor
// lets the shim key launches on bytes it was not given.
func TestRuntimeFewerArgumentsThanFolded(t *testing.T) {
	c := &fakeCompiler{facts: map[string]KernelFacts{"k": twoArgs}}
	var warns []string
	r := testRuntime("", Plans{"k": plan("k", mneme.Config{Specialize: true})}, c, &fakeLoader{}, &warns)
	r.Store.PutFacts("ir", "k", &twoArgs)
	lp, err := r.Prepare(r.Kernel("k"), dim(1, 1, 1), dim(32, 1, 1), [][]byte{u32(5)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lp.Fast.Variant != nil {
		t.Errorf("the shim may key launches on an argument it was not given: %+v", lp.Fast)
	}
	if hot := r.Kernel("k").hot; len(hot) != 1 {
		t.Errorf("%d launch keys, want 1", len(hot))
	}
}

// A configuration folding an argument gets a variant per value its entry
// says was measured, each preloaded and handed to the shim keyed by the
// recorded launch and that value (so no launch with it asks the runtime);
// a value the entry lists without code in the store, or a launch's other
// values, are not handed over. The fast path handed over is the one the
// first launch with that value would leave.
func TestRuntimePreloadFoldedValues(t *testing.T) {
	dir := t.TempDir()
	p := plan("k", mneme.Config{Passes: "default<O3>", Specialize: true, SpecializeArgs: []int{1}})
	p.RecordedBlock, p.RecordedGrid, p.TunedBlock = dim(128, 1, 1), dim(8, 1, 1), dim(128, 1, 1)
	p.Folded = []FoldedValues{{Arg: 1, Values: [][]byte{u32(5), u32(6), u32(7)}}}
	c := &fakeCompiler{facts: map[string]KernelFacts{"k": twoArgs}}
	var warns []string
	// A warm run met the values 5 and 6 (7 was measured but never ran here).
	warm := testRuntime(dir, Plans{"k": p}, c, &fakeLoader{}, &warns)
	launch(t, warm, "k", dim(8, 1, 1), dim(128, 1, 1), u32(0), u32(5))
	launch(t, warm, "k", dim(8, 1, 1), dim(128, 1, 1), u32(0), u32(6))
	l := &fakeLoader{}
	r := testRuntime(dir, Plans{"k": p}, c, l, &warns)
	pre := r.Preload()
	if len(pre) != 1 || len(pre[0].Fast) != 2 {
		t.Fatalf("preloaded %+v, want one kernel with two fast paths (values 5 and 6)", pre)
	}
	for i, want := range [][]byte{u32(5), u32(6)} {
		f := pre[0].Fast[i]
		if !f.Keyed || f.DimsFolded || len(f.Folded) != 1 || f.Folded[0] != 1 || f.FoldedSizes[0] != 4 {
			t.Errorf("value %x: fast path %+v, want keyed by the block and argument 1 (4 bytes), not the grid", want, f.FastPath)
		}
		if len(f.Args) != 2 || f.Args[0] != nil || !bytes.Equal(f.Args[1], want) {
			t.Errorf("value %x: handed with the values %x, want argument 1 only", want, f.Args)
		}
		if f.Grid != p.RecordedGrid || f.Block != p.RecordedBlock {
			t.Errorf("value %x: keyed by %v x %v, want the recorded launch", want, f.Grid, f.Block)
		}
		loads, compiles := l.count(), c.count()
		lp := launch(t, r, "k", dim(8, 1, 1), dim(128, 1, 1), u32(9), want)
		if lp.Variant != f.Variant || l.count() != loads || c.count() != compiles {
			t.Errorf("value %x: the launch ran another variant than the one handed over, or loaded or compiled", want)
		}
		if lp.Fast.Variant != f.Variant || !lp.Fast.Keyed || lp.Fast.DimsFolded != f.DimsFolded ||
			fmt.Sprint(lp.Fast.Folded, lp.Fast.FoldedSizes) != fmt.Sprint(f.Folded, f.FoldedSizes) {
			t.Errorf("value %x: the launch's fast path %+v differs from the one handed over %+v", want, lp.Fast, f.FastPath)
		}
	}
	if pre[0].Fast[0].Variant == pre[0].Fast[1].Variant {
		t.Error("the two values were handed the same variant")
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
}
