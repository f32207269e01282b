package jit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/llvm"
)

const repeatAxpy = "_Z11repeat_axpyiifPKfPf"

func i32(v int32) []byte   { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func f32(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }
func u64(v uint64) []byte  { return binary.LittleEndian.AppendUint64(nil, v) }

// recordedArgs are plausible recorded values for repeat_axpy.
func recordedArgs() [][]byte {
	return [][]byte{i32(4096), i32(1000), f32(1.5), u64(0x153940000000), u64(0x153940004000)}
}

func baseConfig() mneme.Config {
	c := mneme.Baseline(mneme.Dim3{X: 16, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0)
	return c
}

func compilePTX(t *testing.T, c *Compiler, cfg mneme.Config) string {
	t.Helper()
	out, err := c.Compile(&Request{Name: "kernels.bc", IR: testIR(t), Kernel: repeatAxpy, Config: cfg, Args: recordedArgs()})
	if err != nil {
		t.Fatalf("compile %+v: %v", cfg, err)
	}
	return string(out.PTX)
}

func TestSpecializedLoopBoundIsLiteral(t *testing.T) {
	c := NewCompiler(Options{})
	plain := compilePTX(t, c, baseConfig())
	cfg := baseConfig()
	cfg.Specialize, cfg.SpecializeArgs = true, []int{1}
	spec := compilePTX(t, c, cfg)
	// Unspecialized, the trip count is read from the parameter block; folded,
	// the parameter is never read and 1000 appears as an immediate.
	if !strings.Contains(plain, "repeat_axpyiifPKfPf_param_1") {
		t.Fatalf("baseline PTX does not read the bound parameter:\n%s", plain)
	}
	if regexp.MustCompile(`ld\.param\.\w+\s+%\w+, \[_Z11repeat_axpyiifPKfPf_param_1\]`).MatchString(spec) {
		t.Fatalf("specialized PTX still loads the bound parameter:\n%s", spec)
	}
	if !regexp.MustCompile(`\b1000\b`).MatchString(spec) {
		t.Fatalf("specialized PTX has no literal 1000:\n%s", spec)
	}
}

func TestSpecializeDimsRemovesNtid(t *testing.T) {
	c := NewCompiler(Options{})
	if plain := compilePTX(t, c, baseConfig()); !strings.Contains(plain, "%ntid.x") {
		t.Fatalf("baseline PTX should read %%ntid.x:\n%s", plain)
	}
	cfg := baseConfig()
	cfg.SpecializeDims = true
	if ptx := compilePTX(t, c, cfg); strings.Contains(ptx, "%ntid.x") {
		t.Fatalf("dimension-specialized PTX still reads %%ntid.x:\n%s", ptx)
	}
}

func TestLaunchBoundsReachPTX(t *testing.T) {
	cfg := baseConfig()
	cfg.SetLaunchBounds, cfg.MaxThreads, cfg.MinBlocksPerSM = true, 128, 2
	ptx := compilePTX(t, NewCompiler(Options{}), cfg)
	if !regexp.MustCompile(`\.maxntid 128(, 1, 1)?\s`).MatchString(ptx) || !strings.Contains(ptx, ".minnctapersm 2") {
		t.Fatalf("launch bounds missing from PTX:\n%s", ptx)
	}
}

func TestInvalidPipeline(t *testing.T) {
	cfg := baseConfig()
	cfg.Passes = "default<O7>,nonsense"
	_, err := NewCompiler(Options{}).Compile(&Request{IR: testIR(t), Kernel: repeatAxpy, Config: cfg, Args: recordedArgs()})
	var ce *CompileError
	if !errors.As(err, &ce) || ce.Stage != "optimize" {
		t.Fatalf("want an optimize-stage CompileError, got %v", err)
	}
	if !strings.Contains(err.Error(), "default<O7>,nonsense") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error should be one line naming the pipeline: %q", err)
	}
}

func TestNotBitcode(t *testing.T) {
	_, err := NewCompiler(Options{}).Compile(&Request{Name: "notes.txt", IR: []byte("hello, not bitcode"), Config: baseConfig()})
	var ce *CompileError
	if !errors.As(err, &ce) || ce.Stage != "parse" || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("want a parse error naming the file, got %v", err)
	}
}

func TestUnknownKernel(t *testing.T) {
	_, err := NewCompiler(Options{}).Compile(&Request{IR: testIR(t), Kernel: "nope", Config: baseConfig()})
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "vecadd") {
		t.Fatalf("want an error naming the missing kernel and the ones present, got %v", err)
	}
}

func TestStageTimesReported(t *testing.T) {
	out, err := NewCompiler(Options{}).Compile(&Request{IR: testIR(t), Kernel: "vecadd", Config: baseConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if out.Times.Preprocess <= 0 || out.Times.Optimize <= 0 || out.Times.Codegen <= 0 {
		t.Fatalf("stage times not measured: %+v", out.Times)
	}
	if out.Kernel != "vecadd" || out.Arch != DefaultArch || !strings.Contains(string(out.PTX), ".entry vecadd") {
		t.Fatalf("unexpected output: kernel %q arch %q", out.Kernel, out.Arch)
	}
}

func TestKeyIgnoresWhatDoesNotReachTheCode(t *testing.T) {
	c := NewCompiler(Options{})
	req := func(cfg mneme.Config, args [][]byte) *Request {
		return &Request{IR: []byte("ir"), Kernel: "k", Config: cfg, Args: args}
	}
	a := baseConfig()
	b := a
	b.Grid.X, b.SharedMem = 99, 4096 // not folded: same code
	if c.Key(req(a, recordedArgs())) != c.Key(req(b, recordedArgs())) {
		t.Error("grid and shared memory changed the key without specialize_dims")
	}
	b.SpecializeDims = true
	if c.Key(req(a, recordedArgs())) == c.Key(req(b, recordedArgs())) {
		t.Error("specialize_dims did not change the key")
	}
	s := a
	s.Specialize = true
	other := recordedArgs()
	other[1] = i32(38)
	if c.Key(req(s, recordedArgs())) == c.Key(req(s, other)) {
		t.Error("a different specialized value gave the same key")
	}
	if c.Key(req(a, recordedArgs())) != c.Key(req(a, other)) {
		t.Error("an argument that is not folded changed the key")
	}
}

func TestCacheHits(t *testing.T) {
	dir := t.TempDir()
	r := &Request{IR: testIR(t), Kernel: "vecadd", Config: baseConfig()}
	c := NewCompiler(Options{CacheDir: dir})
	first, err := c.Compile(r)
	if err != nil || first.CacheHit != "" {
		t.Fatalf("first compile: hit=%q err=%v", first.CacheHit, err)
	}
	again, err := c.Compile(r)
	if err != nil || again.CacheHit != "memory" || string(again.PTX) != string(first.PTX) {
		t.Fatalf("second compile: hit=%q err=%v", again.CacheHit, err)
	}
	fresh, err := NewCompiler(Options{CacheDir: dir}).Compile(r)
	if err != nil || fresh.CacheHit != "disk" || string(fresh.PTX) != string(first.PTX) {
		t.Fatalf("new compiler on the same directory: hit=%q err=%v", fresh.CacheHit, err)
	}
}

// Several compilers (as several processes would) filling one cache
// directory with the same keys at once must leave complete entries only.
func TestDiskCacheConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	ir := testIR(t)
	var wg sync.WaitGroup
	ptx := make([]string, 4)
	for w := range ptx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := NewCompiler(Options{CacheDir: dir}).Compile(&Request{IR: ir, Kernel: "vecadd", Config: baseConfig()})
			if err != nil {
				t.Error(err)
				return
			}
			ptx[w] = string(out.PTX)
		}()
	}
	wg.Wait()
	for _, p := range ptx[1:] {
		if p != ptx[0] {
			t.Fatal("concurrent compiles of one key disagree")
		}
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(entries) != 1 || strings.Contains(filepath.Base(entries[0]), ".tmp-") {
		t.Fatalf("want exactly one complete cache entry, have %v", entries)
	}
	if out, err := (&diskCache{dir: dir}).get(strings.TrimSuffix(filepath.Base(entries[0]), ".json")); err != nil || string(out.PTX) != ptx[0] {
		t.Fatalf("cache entry unreadable: %v", err)
	}
}

func TestDamagedCacheEntryIsRecompiled(t *testing.T) {
	dir := t.TempDir()
	r := &Request{IR: testIR(t), Kernel: "vecadd", Config: baseConfig()}
	c := NewCompiler(Options{CacheDir: dir})
	out, err := c.Compile(r)
	if err != nil {
		t.Fatal(err)
	}
	p := (&diskCache{dir: dir}).path(out.Key)
	if err := os.WriteFile(p, []byte(`{"key":"truncated`), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := NewCompiler(Options{CacheDir: dir}).Compile(r)
	if err != nil || again.CacheHit != "" || string(again.PTX) != string(out.PTX) {
		t.Fatalf("damaged entry: hit=%q err=%v", again.CacheHit, err)
	}
}

// An entry edited by hand, complete and under its own key, is not served:
// neither as edited, nor re-sealed with a secret other than this
// installation's (forged, or a cache received from elsewhere).
func TestEditedCacheEntryIsNotServed(t *testing.T) {
	dir := t.TempDir()
	r := &Request{IR: testIR(t), Kernel: "vecadd", Config: baseConfig()}
	out, err := NewCompiler(Options{CacheDir: dir}).Compile(r)
	if err != nil {
		t.Fatal(err)
	}
	p := (&diskCache{dir: dir}).path(out.Key)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&diskCache{dir: dir}).get(out.Key); err != nil {
		t.Fatalf("the entry as written: %v", err)
	}
	// The forgery: the entry's PTX changed (as `fma` turned into `sub`).
	header, body, _ := strings.Cut(string(data), "\n")
	var forged Output
	if err := json.Unmarshal([]byte(body), &forged); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(forged.PTX, []byte("vecadd")) {
		t.Fatal("the entry's PTX does not name the kernel")
	}
	forged.PTX = bytes.ReplaceAll(forged.PTX, []byte("vecadd"), []byte("vecadX"))
	forgedJSON, err := json.Marshal(&forged)
	if err != nil {
		t.Fatal(err)
	}
	edited := string(forgedJSON)
	otherSecret := hmac.New(sha256.New, []byte("another installation's secret!!!"))
	otherSecret.Write([]byte(edited))
	for name, entry := range map[string]string{
		"edited":                   header + "\n" + edited,
		"re-sealed elsewhere":      entryMagic + hex.EncodeToString(otherSecret.Sum(nil)) + "\n" + edited,
		"the seal of another key":  string(mustSeal(t, strings.Repeat("0", len(out.Key)), []byte(edited))),
		"the old unkeyed checksum": "mneme-jit-entry xxh3-128:00\n" + edited,
	} {
		if err := os.WriteFile(p, []byte(entry), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := (&diskCache{dir: dir}).get(out.Key); err == nil || !strings.Contains(err.Error(), "seal does not match") {
			t.Errorf("%s: entry read back: %v", name, err)
		}
		again, err := NewCompiler(Options{CacheDir: dir}).Compile(r)
		if err != nil || again.CacheHit != "" || strings.Contains(string(again.PTX), "vecadX") {
			t.Fatalf("%s: entry served: hit=%q err=%v", name, again.CacheHit, err)
		}
	}
	// Sealed here under its own key, the edit is served: the seal, not
	// the content, is what was checked.
	if err := os.WriteFile(p, mustSeal(t, out.Key, []byte(edited)), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := (&diskCache{dir: dir}).get(out.Key); err != nil || !strings.Contains(string(got.PTX), "vecadX") {
		t.Errorf("an entry sealed by this installation: %v", err)
	}
}

func mustSeal(t *testing.T, key string, body []byte) []byte {
	t.Helper()
	data, err := sealEntry(key, body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Internalization must leave the device globals named in Keep visible, so
// they can be found by name in the loaded module.
func TestInternalizeKeepsNamedGlobals(t *testing.T) {
	c := NewCompiler(Options{})
	visible := regexp.MustCompile(`\.visible \.global .*g_total`)
	base, err := c.Compile(&Request{IR: testIR(t), Kernel: "accumulate", Config: baseConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if !visible.Match(base.PTX) {
		t.Fatalf("the baseline does not internalize: the global must stay visible:\n%s", base.PTX)
	}
	cfg := baseConfig()
	cfg.Internalize = true
	hidden, err := c.Compile(&Request{IR: testIR(t), Kernel: "accumulate", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if visible.Match(hidden.PTX) {
		t.Fatalf("without Keep the global should be internal:\n%s", hidden.PTX)
	}
	kept, err := c.Compile(&Request{IR: testIR(t), Kernel: "accumulate", Config: cfg, Keep: []string{"g_total"}})
	if err != nil {
		t.Fatal(err)
	}
	if !visible.Match(kept.PTX) {
		t.Fatalf("a kept global must stay visible:\n%s", kept.PTX)
	}
	if hidden.Key == kept.Key {
		t.Fatal("Keep did not change the cache key")
	}
}

// TestSpecializeArgsBounds: an argument index one past the kernel's last is
// refused, naming it, rather than ignored.
func TestSpecializeArgsBounds(t *testing.T) {
	cfg := baseConfig()
	cfg.Specialize, cfg.SpecializeArgs = true, []int{4} // vecadd has 4 parameters
	_, err := NewCompiler(Options{}).Compile(&Request{IR: testIR(t), Kernel: "vecadd", Config: cfg})
	if err == nil || !strings.Contains(err.Error(), "argument 4 does not exist") {
		t.Errorf("specialize_args [4]: %v", err)
	}
}

// TestFoldArgsBounds: --arg takes 0-based indices below the parameter count.
func TestFoldArgsBounds(t *testing.T) {
	i32 := llvm.Param{Kind: llvm.ParamInt, Bits: 32, Type: "i32"}
	params := []llvm.Param{i32, i32}
	for arg, ok := range map[string]bool{"0=1": true, "1=2": true, "2=3": false, "-1=3": false, "x=1": false, "1": false} {
		var cfg mneme.Config
		args, err := foldArgs(&cfg, params, []string{arg})
		if (err == nil) != ok {
			t.Errorf("--arg %s: %v", arg, err)
		}
		if ok && (!cfg.Specialize || len(cfg.SpecializeArgs) != 1 || len(args) != 2) {
			t.Errorf("--arg %s: config %+v args %v", arg, cfg, args)
		}
	}
}

// Every preparation step applies when several are asked for at once: dims
// folded, launch bounds set and the module internalized, each visible in
// the PTX (a step that returned early on success would drop the later ones).
func TestPreparationStepsCombine(t *testing.T) {
	cfg := baseConfig()
	cfg.SpecializeDims = true
	cfg.SetLaunchBounds, cfg.MaxThreads, cfg.MinBlocksPerSM = true, 256, 3
	cfg.Internalize = true
	ptx := compilePTX(t, NewCompiler(Options{}), cfg)
	if strings.Contains(ptx, "%ntid.x") {
		t.Errorf("dims not folded with launch bounds also set:\n%s", ptx)
	}
	if !regexp.MustCompile(`\.maxntid 256(, 1, 1)?\s`).MatchString(ptx) || !strings.Contains(ptx, ".minnctapersm 3") {
		t.Errorf("launch bounds missing with dims folded:\n%s", ptx)
	}
	if n := strings.Count(ptx, ".entry"); n != 1 {
		t.Errorf("%d entries after internalizing, want only the kernel's", n)
	}
}

// TestFatalRemembersAnLLVMCrash: a compile that crashes LLVM (a pipeline
// nested 5,000 deep) fails, and the compiler says so from then on; a
// compile that only fails (an unknown pass) does not mark it.
func TestFatalRemembersAnLLVMCrash(t *testing.T) {
	c := NewCompiler(Options{})
	cfg := baseConfig()
	cfg.Passes = "no-such-pass"
	if _, err := c.Compile(&Request{IR: testIR(t), Kernel: "vecadd", Config: cfg}); err == nil || c.Fatal() != nil {
		t.Fatalf("an unknown pass: %v, fatal %v", err, c.Fatal())
	}
	cfg.Passes = strings.Repeat("function(", 5000) + "instcombine" + strings.Repeat(")", 5000)
	_, err := c.Compile(&Request{IR: testIR(t), Kernel: "vecadd", Config: cfg})
	var fe *llvm.FatalError
	if !errors.As(err, &fe) || c.Fatal() == nil {
		t.Fatalf("a crashing pipeline: %v, fatal %v", err, c.Fatal())
	}
}
