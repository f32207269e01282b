package deploy

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// passesCompiler compiles to a cubin naming the pipeline and the geometry
// folded in, so a test tells which class's configuration a launch ran.
type passesCompiler struct {
	mu    sync.Mutex
	cfgs  []mneme.Config
	facts KernelFacts
}

func (c *passesCompiler) Compile(kernel string, cfg mneme.Config, args [][]byte) (*CompileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfgs = append(c.cfgs, cfg)
	name := cfg.Passes
	if cfg.SpecializeDims {
		name += " grid=" + cfg.Grid.String() + " block=" + cfg.Block.String()
	}
	return &CompileResponse{Cubin: []byte(name), Scalars: c.facts.ScalarArgs, ArgSizes: c.facts.ArgSizes}, nil
}

func (c *passesCompiler) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cfgs)
}

// classedPlan is a kernel tuned per launch shape: grid 4 x block 256 runs
// default<O1>, grid 16 x block 256 with 64 bytes of shared memory runs
// default<O2> with the tuned block 128.
func classedPlan() *Plan {
	p := &Plan{Kernel: "k", Source: "tuned.json", Config: mneme.Config{Passes: "default<O3>", CodegenOpt: 3}}
	p.Classes = []*ClassPlan{
		{Plan: Plan{Kernel: "k", Source: "tuned.json", Config: mneme.Config{Passes: "default<O1>", CodegenOpt: 3},
			RecordedGrid: dim(4, 1, 1), RecordedBlock: dim(256, 1, 1)}},
		{SharedMem: 64, Plan: Plan{Kernel: "k", Source: "tuned.json", Config: mneme.Config{Passes: "default<O2>", CodegenOpt: 3},
			RecordedGrid: dim(16, 1, 1), RecordedBlock: dim(256, 1, 1), TunedBlock: dim(128, 1, 1)}},
	}
	return p
}

// Plan.For: a launch of a class's exact shape takes the class; changing
// any one of grid x, y, z, block x, y, z or the shared memory alone leaves
// it in no class; a plan without classes serves every shape; a zero
// dimension reads as 1, as CUDA reads it.
func TestPlanForEachShapeInputAlone(t *testing.T) {
	p := classedPlan()
	g, b, sh := dim(16, 1, 1), dim(256, 1, 1), uint32(64)
	if got := p.For(g, b, sh); got != &p.Classes[1].Plan {
		t.Fatalf("the class's own shape: %v, want the second class", got)
	}
	if got := p.For(dim(16, 0, 0), dim(256, 0, 1), sh); got != &p.Classes[1].Plan {
		t.Errorf("zero dimensions read as 1: %v, want the second class", got)
	}
	for name, shape := range map[string]struct {
		g, b mneme.Dim3
		sh   uint32
	}{
		"grid.x": {dim(17, 1, 1), b, sh}, "grid.y": {dim(16, 2, 1), b, sh}, "grid.z": {dim(16, 1, 2), b, sh},
		"block.x": {g, dim(128, 1, 1), sh}, "block.y": {g, dim(256, 2, 1), sh}, "block.z": {g, dim(256, 1, 2), sh},
		"shared": {g, b, 0},
	} {
		if got := p.For(shape.g, shape.b, shape.sh); got != nil {
			t.Errorf("%s changed alone: served by %+v, want no class", name, got.Config)
		}
	}
	plain := &Plan{Kernel: "k"}
	if plain.For(dim(99, 1, 1), b, 7) != plain {
		t.Error("a plan without classes must serve every shape")
	}
}

// The runtime with classes: each class's launches run its configuration
// (its own tuned block and re-derived grid), a shape in no class runs the
// application's own code without compiling, and the fast paths key every
// launch by grid, block and shared memory so the shim tells the classes
// and the uncovered shapes apart.
func TestRuntimeClasses(t *testing.T) {
	c := &passesCompiler{facts: twoArgs}
	var warns []string
	r := &Runtime{Plans: Plans{"k": classedPlan()}, Store: NewCache(""), Compiler: c, Loader: &fakeLoader{}, IRHash: "ir",
		Warn: func(m string) { warns = append(warns, m) }}
	k := r.Kernel("k")
	args := [][]byte{u32(1), u32(7)}
	a, err := r.Prepare(k, dim(4, 1, 1), dim(256, 1, 1), args, 0)
	if err != nil || a.Variant == nil || a.Variant.Code != "default<O1>" || a.Grid != dim(4, 1, 1) || a.Block != dim(256, 1, 1) {
		t.Fatalf("the first class: %+v, %v; want default<O1> at grid 4 block 256", a, err)
	}
	bl, err := r.Prepare(k, dim(16, 1, 1), dim(256, 1, 1), args, 64)
	if err != nil || bl.Variant == nil || bl.Variant.Code != "default<O2>" || bl.Grid != dim(32, 1, 1) || bl.Block != dim(128, 1, 1) {
		t.Fatalf("the second class: %+v, %v; want default<O2> at grid 32 block 128", bl, err)
	}
	if bl.TunedBlock != dim(128, 1, 1) || bl.RecordedBlock != dim(256, 1, 1) || a.TunedBlock != (mneme.Dim3{}) {
		t.Errorf("block rules: first %v/%v, second %v/%v; want the classes' own", a.TunedBlock, a.RecordedBlock, bl.TunedBlock, bl.RecordedBlock)
	}
	for _, lp := range []LaunchPlan{a, bl} {
		if f := lp.Fast; f.Variant != lp.Variant || !f.Keyed || !f.DimsFolded || !f.SharedKeyed || f.Own || len(f.Folded) != 0 {
			t.Errorf("a class's fast path %+v: want its variant keyed by grid, block and shared memory", f)
		}
	}
	n := c.count()
	// The second class's grid and block with other shared memory: no class.
	own, err := r.Prepare(k, dim(16, 1, 1), dim(256, 1, 1), args, 0)
	if err != nil || own.Variant != nil || own.Own == "" || own.Grid != dim(16, 1, 1) || own.Block != dim(256, 1, 1) {
		t.Fatalf("an uncovered shape: %+v, %v; want the application's own code at its own geometry", own, err)
	}
	if f := own.Fast; !f.Own || !f.Keyed || !f.DimsFolded || !f.SharedKeyed || f.Variant != nil {
		t.Errorf("an uncovered shape's fast path %+v: want the application's code, keyed", f)
	}
	if c.count() != n || len(warns) != 0 {
		t.Errorf("an uncovered shape compiled (%d compiles, want %d) or warned %q", c.count(), n, warns)
	}
	// The classes again: from memory.
	if again, _ := r.Prepare(k, dim(4, 1, 1), dim(256, 1, 1), args, 0); again.Variant != a.Variant || c.count() != n {
		t.Errorf("a repeated launch of a class ran %v with %d compiles", again.Variant, c.count())
	}
}

// Folding only values that were measured: a launch whose folded argument
// has a value the entry lists runs the variant; one with another value
// runs the application's own code, warned once per kernel naming the file
// and the kernel, compiles nothing and is remembered; a change of an
// argument that is not folded changes nothing.
func TestRuntimeUnmeasuredValues(t *testing.T) {
	facts := KernelFacts{ScalarArgs: []int{1, 2}, ArgSizes: []int{8, 4, 4}}
	p := &Plan{Kernel: "k", Source: "tuned.json", Config: mneme.Config{Passes: "default<O3>", Specialize: true, SpecializeArgs: []int{1}},
		Folded: []FoldedValues{{Arg: 1, Name: "n", Values: [][]byte{u32(1000), u32(2000)}}}}
	c := &passesCompiler{facts: facts}
	var warns []string
	r := &Runtime{Plans: Plans{"k": p}, Store: NewCache(""), Compiler: c, Loader: &fakeLoader{}, IRHash: "ir",
		Warn: func(m string) { warns = append(warns, m) }}
	k := r.Kernel("k")
	g, b := dim(4, 1, 1), dim(256, 1, 1)
	prep := func(a1, a2 uint32) LaunchPlan {
		t.Helper()
		lp, err := r.Prepare(k, g, b, [][]byte{make([]byte, 8), u32(a1), u32(a2)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return lp
	}
	if lp := prep(1000, 5); lp.Variant == nil || lp.Own != "" {
		t.Fatalf("a measured value: %+v; want the tuned variant", lp)
	}
	if lp := prep(1000, 6); lp.Variant == nil || c.count() != 1 {
		t.Errorf("an argument that is not folded changed: %+v, %d compiles; want the same variant", lp, c.count())
	}
	if lp := prep(2000, 5); lp.Variant == nil || c.count() != 2 {
		t.Errorf("the other measured value: %+v, %d compiles; want its own variant", lp, c.count())
	}
	lp := prep(3000, 5)
	if lp.Variant != nil || !strings.Contains(lp.Own, "not measured") {
		t.Fatalf("an unmeasured value: %+v; want the application's own code", lp)
	}
	if f := lp.Fast; !f.Own || !f.Keyed || len(f.Folded) != 1 || f.Folded[0] != 1 || f.FoldedSizes[0] != 4 || f.SharedKeyed {
		t.Errorf("an unmeasured value's fast path %+v: want the application's code keyed by argument 1", f)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "tuned.json") || !strings.Contains(warns[0], "tuned kernel k") ||
		!strings.Contains(warns[0], "argument 1 (n)") || !strings.Contains(warns[0], "application's own code") {
		t.Errorf("warnings %q: want one naming the file, the kernel and the argument", warns)
	}
	prep(3000, 5)
	prep(4000, 5)
	if c.count() != 2 || len(warns) != 1 {
		t.Errorf("more unmeasured values: %d compiles, %d warnings; want 2 and 1", c.count(), len(warns))
	}
	if _, ok := k.hot[string(r.hotKey(k, nil, g, b, 0, [][]byte{nil, u32(3000), nil}))]; !ok {
		t.Error("the unmeasured value's key was not remembered")
	}
}

// Before the kernel's facts are known, a configuration that folds every
// scalar (no list) cannot say its key, so the shim is given nothing to
// remember for a launch it must run with the application's code; one that
// names its arguments can.
func TestRuntimeOwnFastPathNeedsTheLayout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   mneme.Config
		keyed bool
	}{
		{"arguments named", mneme.Config{Passes: "default<O3>", Specialize: true, SpecializeArgs: []int{1}}, true},
		{"every scalar", mneme.Config{Passes: "default<O3>", Specialize: true}, false},
	} {
		p := &Plan{Kernel: "k", Source: "tuned.json", Config: tc.cfg,
			Folded: []FoldedValues{{Arg: 1, Values: [][]byte{u32(1)}}}}
		c := &passesCompiler{facts: twoArgs}
		var warns []string
		r := &Runtime{Plans: Plans{"k": p}, Store: NewCache(""), Compiler: c, Loader: &fakeLoader{}, IRHash: "ir",
			Warn: func(m string) { warns = append(warns, m) }}
		lp, err := r.Prepare(r.Kernel("k"), dim(1, 1, 1), dim(32, 1, 1), [][]byte{make([]byte, 8), u32(2)}, 0)
		if err != nil || lp.Variant != nil || c.count() != 0 {
			t.Fatalf("%s: %+v, %v, %d compiles; want the application's code, nothing compiled", tc.name, lp, err, c.count())
		}
		if lp.Fast.Own != tc.keyed || lp.Fast.Keyed != tc.keyed {
			t.Errorf("%s: fast path %+v, want keyed %v", tc.name, lp.Fast, tc.keyed)
		}
	}
}

// The key layout: the union of what the classes fold, the grid and the
// shared memory with classes; FoldsArgs follows it.
func TestKernelLayoutWithClasses(t *testing.T) {
	p := classedPlan()
	p.Classes[0].Config.Specialize, p.Classes[0].Config.SpecializeArgs = true, []int{2}
	p.Classes[1].Config.Specialize, p.Classes[1].Config.SpecializeArgs = true, []int{1, 2}
	k := &Kernel{Name: "k", Plan: p}
	l := k.layout(KernelFacts{})
	if !l.dims || !l.shared || len(l.args) != 2 || l.args[0] != 1 || l.args[1] != 2 {
		t.Errorf("layout %+v: want grid, shared memory and arguments 1, 2", l)
	}
	if k.FoldsArgs() {
		t.Error("FoldsArgs before the facts are known")
	}
	k.facts = &KernelFacts{}
	if !k.FoldsArgs() {
		t.Error("FoldsArgs: a class folds arguments")
	}
	plain := &Kernel{Name: "k", Plan: &Plan{Config: mneme.Config{Passes: "default<O3>"}}, facts: &KernelFacts{}}
	if l := plain.layout(KernelFacts{}); l.dims || l.shared || len(l.args) != 0 || plain.FoldsArgs() {
		t.Errorf("a plan without classes or folding: layout %+v", l)
	}
}

// Preload loads each class's code for its shape when it is in the store.
func TestRuntimePreloadClasses(t *testing.T) {
	dir := t.TempDir()
	c := &passesCompiler{facts: twoArgs}
	var warns []string
	mk := func() *Runtime {
		return &Runtime{Plans: Plans{"k": classedPlan()}, Store: NewCache(dir), Compiler: c, Loader: &fakeLoader{}, IRHash: "ir",
			Warn: func(m string) { warns = append(warns, m) }}
	}
	r := mk()
	k := r.Kernel("k")
	for _, s := range []struct {
		g      mneme.Dim3
		shared uint32
	}{{dim(4, 1, 1), 0}, {dim(16, 1, 1), 64}} {
		if _, err := r.Prepare(k, s.g, dim(256, 1, 1), [][]byte{u32(1), u32(2)}, s.shared); err != nil {
			t.Fatal(err)
		}
	}
	if c.count() != 2 {
		t.Fatalf("%d compiles, want one per class", c.count())
	}
	r2 := mk()
	pre := r2.Preload()
	if len(pre) != 1 {
		t.Fatalf("preloaded %d kernels, want 1", len(pre))
	}
	// Each class's code is handed to the shim for its recorded launch's key:
	// grid, block and shared memory, and its own block rule.
	var fast []string
	for _, f := range pre[0].Fast {
		fast = append(fast, fmt.Sprintf("keyed=%v dims=%v shared=%v grid=%v block=%v shared=%d tuned=%v from=%v",
			f.Keyed, f.DimsFolded, f.SharedKeyed, f.Grid, f.Block, f.Shared, f.TunedBlock, f.RecordedBlock))
	}
	want := []string{}
	for _, c := range classedPlan().Classes {
		want = append(want, fmt.Sprintf("keyed=true dims=true shared=true grid=%v block=%v shared=%d tuned=%v from=%v",
			c.RecordedGrid, c.RecordedBlock, c.SharedMem, c.TunedBlock, c.RecordedBlock))
	}
	if strings.Join(fast, "\n") != strings.Join(want, "\n") {
		t.Errorf("fast paths:\n%s\nwant:\n%s", strings.Join(fast, "\n"), strings.Join(want, "\n"))
	}
	if got := r2.Kernel("k").variants.Len(); got != 2 {
		t.Errorf("%d variants preloaded, want both classes'", got)
	}
	if c.count() != 2 || len(warns) != 0 {
		t.Errorf("preload compiled (%d) or warned %q", c.count(), warns)
	}
}

// Reading classes and folded values: each class becomes a plan of its
// shape with its own tuned block (where blocks were searched), and the
// folded values are decoded.
func TestReadMnemeTunedClassPlans(t *testing.T) {
	path := writeFile(t, "t.json", `{"k":{"config":{"passes":"default<O3>","codegen_opt":3,"block":{"x":256,"y":1,"z":1},"specialize":true,"specialize_args":[1]},
		"launch_searched":true,"recorded_block":{"x":256,"y":1,"z":1},"statistics":"run",
		"folded":[{"arg":1,"name":"n","distinct":2,"values":["e8030000","d0070000"]}],
		"classes":[{"grid":{"x":4,"y":1,"z":1},"block":{"x":256,"y":1,"z":1},"config":{"passes":"default<O1>","codegen_opt":2,"block":{"x":128,"y":1,"z":1},"grid":{"x":8,"y":1,"z":1}}},
		           {"grid":{"x":16},"block":{"x":256},"shared_mem":64,"config":{"codegen_opt":3,"block":{"x":256,"y":1,"z":1}}}]}}`)
	plans, err := ReadMnemeTuned(path)
	if err != nil {
		t.Fatal(err)
	}
	p := plans["k"]
	if len(p.Classes) != 2 {
		t.Fatalf("%d classes, want 2", len(p.Classes))
	}
	c0, c1 := p.Classes[0], p.Classes[1]
	if c0.RecordedGrid != dim(4, 1, 1) || c0.RecordedBlock != dim(256, 1, 1) || c0.TunedBlock != dim(128, 1, 1) ||
		c0.Config.Passes != "default<O1>" || c0.Config.CodegenOpt != 2 || !c0.Config.Grid.IsZero() || !c0.Config.Block.IsZero() || c0.Source != path {
		t.Errorf("the first class: %+v", c0)
	}
	if c1.RecordedGrid != dim(16, 1, 1) || c1.SharedMem != 64 || !c1.TunedBlock.IsZero() || c1.Config.Passes != mneme.DefaultPipeline {
		t.Errorf("the second class: %+v (its block is the recorded one, its pipeline the default)", c1)
	}
	if len(p.Folded) != 1 || p.Folded[0].Arg != 1 || len(p.Folded[0].Values) != 2 || string(p.Folded[0].Values[1]) != string(u32(2000)) {
		t.Errorf("folded values %+v", p.Folded)
	}
	if len(c0.Folded) != 1 {
		t.Error("a class does not see the entry's folded values")
	}
	// Without launch_searched the classes keep the application's block.
	path = writeFile(t, "u.json", strings.Replace(string(mustRead(t, path)), `"launch_searched":true`, `"launch_searched":false`, 1))
	if plans, err = ReadMnemeTuned(path); err != nil || !plans["k"].Classes[0].TunedBlock.IsZero() {
		t.Errorf("a kernel whose blocks were not searched got a tuned class block: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Precompiling a kernel with classes: each class compiles its own
// configuration for its shape (its tuned block), a recorded launch goes to
// the class of its shape, and a launch of a shape no class covers compiles
// nothing. The jobs key as the runtime's launches do: a run after them
// compiles nothing.
func TestPrecompileJobsClasses(t *testing.T) {
	p := classedPlan()
	p.Classes[0].Config.Specialize, p.Classes[0].Config.SpecializeArgs = true, []int{1}
	launches := map[string][]Launch{"k": {
		{Grid: dim(4, 1, 1), Block: dim(256, 1, 1), Args: [][]byte{u32(0), u32(7)}},
		{Grid: dim(4, 1, 1), Block: dim(256, 1, 1), SharedMem: 64, Args: [][]byte{u32(0), u32(8)}}, // no class
		{Grid: dim(64, 1, 1), Block: dim(256, 1, 1), Args: [][]byte{u32(0), u32(9)}},               // no class
	}}
	jobs := PrecompileJobs(Plans{"k": p}, []string{"k"}, launches)
	if len(jobs) != 2 {
		t.Fatalf("jobs %+v, want the first class's recorded launch and the second class's generic code", jobs)
	}
	if jobs[0].Config.Passes != "default<O1>" || string(jobs[0].Args[1]) != string(u32(7)) || jobs[0].Label != "class 1, recorded launch 1" {
		t.Errorf("the first class's job %+v", jobs[0])
	}
	if jobs[1].Config.Passes != "default<O2>" || jobs[1].Label != "class 2, generic" {
		t.Errorf("the second class's job %+v", jobs[1])
	}
	// The runtime finds both in the store.
	dir := t.TempDir()
	store := NewCache(dir)
	facts := KernelFacts{ScalarArgs: []int{1}, ArgSizes: []int{4, 4}}
	if err := store.PutFacts("ir", "k", &facts); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := store.Put(VariantKey("ir", "k", j.Config, facts, j.Args, "", 0, ""), []byte(j.Config.Passes)); err != nil {
			t.Fatal(err)
		}
	}
	c := &passesCompiler{facts: facts}
	r := &Runtime{Plans: Plans{"k": p}, Store: store, Compiler: c, Loader: &fakeLoader{}, IRHash: "ir"}
	k := r.Kernel("k")
	a, err := r.Prepare(k, dim(4, 1, 1), dim(256, 1, 1), [][]byte{u32(0), u32(7)}, 0)
	if err != nil || a.Variant == nil || a.Variant.Code != "default<O1>" {
		t.Errorf("the first class after precompiling: %+v, %v", a, err)
	}
	b, err := r.Prepare(k, dim(16, 1, 1), dim(256, 1, 1), [][]byte{u32(0), u32(7)}, 64)
	if err != nil || b.Variant == nil || b.Variant.Code != "default<O2>" {
		t.Errorf("the second class after precompiling: %+v, %v", b, err)
	}
	if c.count() != 0 {
		t.Errorf("%d compiles after precompiling, want none", c.count())
	}
}
