package deploy

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// triadSizes are examples/sizesweep's six triad sizes, each launched with
// grid (n+255)/256 and block 256.
var triadSizes = []uint32{1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24}

// triadEntry is a tuned entry as `mneme tune --kernel triad` writes it for
// sizesweep: one class per size, each class folding a (argument 2, a float)
// and n (argument 3) when foldClasses, the folded values those the six
// instances had.
func triadEntry(foldClasses bool) map[string]any {
	f32 := func(v float32) string {
		return fmt.Sprintf("%x", binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
	}
	i32 := func(v uint32) string { return fmt.Sprintf("%x", binary.LittleEndian.AppendUint32(nil, v)) }
	var classes []any
	var ns []string
	passes := []string{"default<O2>", "default<O3>", "default<O3>", "default<O2>", "default<Os>", "default<O2>"}
	for i, n := range triadSizes {
		cfg := map[string]any{"passes": passes[i], "codegen_opt": 3, "block": map[string]any{"x": 256, "y": 1, "z": 1}}
		if foldClasses {
			cfg["specialize"], cfg["specialize_args"] = true, []int{2, 3}
		}
		classes = append(classes, map[string]any{"grid": map[string]any{"x": (n + 255) / 256, "y": 1, "z": 1},
			"block": map[string]any{"x": 256, "y": 1, "z": 1}, "shared_mem": 0, "config": cfg, "launches": 20, "speedup": 1.02})
		ns = append(ns, i32(n))
	}
	return map[string]any{"_Z5triadPfPKffi": map[string]any{
		"config":   map[string]any{"passes": "default<O3>", "codegen_opt": 3, "specialize": true, "specialize_args": []int{2, 3}},
		"instance": "sh/dh", "speedup": 1.02, "metric": "mean", "statistics": "run", "launch_searched": true,
		"recorded_block": map[string]any{"x": 256, "y": 1, "z": 1}, "recorded_grid": map[string]any{"x": 64, "y": 1, "z": 1},
		"folded": []any{
			map[string]any{"arg": 2, "name": "a", "invariant": true, "distinct": 1, "values": []string{f32(0.25)}},
			map[string]any{"arg": 3, "name": "n", "distinct": 6, "values": ns},
		},
		"classes": classes,
	}}
}

// scriptEdits are scripts/gpu-deploy-classes.sh's two edits of a tuned
// file, done as its python does them: the first class dropped; every
// folded argument's values replaced by one no launch has.
func scriptEdits(entries map[string]any) (dropped, unmeasured map[string]any) {
	clone := func() map[string]any {
		b, _ := json.Marshal(entries)
		var out map[string]any
		json.Unmarshal(b, &out)
		return out
	}
	dropped = clone()
	for _, e := range dropped {
		e := e.(map[string]any)
		e["classes"] = e["classes"].([]any)[1:]
	}
	unmeasured = clone()
	for _, e := range unmeasured {
		for _, f := range e.(map[string]any)["folded"].([]any) {
			f := f.(map[string]any)
			v := f["values"].([]any)[0].(string)
			if len(v) == 8 {
				f["values"] = []any{"ffffff7f"}
			} else {
				f["values"] = []any{strings.Repeat("ff", len(v)/2)}
			}
			f["distinct"] = max(f["distinct"].(float64), 1)
		}
	}
	return dropped, unmeasured
}

// sweepRun is one run of sizesweep against tuned file path and a disk
// cache in dir: the preload, then 20 launches of each size in order. It
// returns the trace lines and warnings.
func sweepRun(t *testing.T, path, dir string, c *passesCompiler) (traces, warns []string) {
	t.Helper()
	traces, warns, _, _ = sweepLoads(t, path, dir, c)
	return traces, warns
}

// sweepLoads is sweepRun that also counts the code loaded by the preload
// and by the launches.
func sweepLoads(t *testing.T, path, dir string, c *passesCompiler) (traces, warns []string, preloaded, launched int) {
	t.Helper()
	plans, errs := Load(path, "")
	if len(errs) != 0 {
		t.Fatalf("%s: %v", path, errs)
	}
	l := &fakeLoader{}
	r := &Runtime{Plans: plans, Store: NewCache(dir), Compiler: c, Loader: l, IRHash: "ir",
		Warn:  func(m string) { warns = append(warns, m) },
		Trace: func(f string, a ...any) { traces = append(traces, fmt.Sprintf(f, a...)) }}
	r.Preload()
	preloaded = l.count()
	k := r.Kernel("_Z5triadPfPKffi")
	if k == nil {
		t.Fatalf("%s: triad has no deployment state", path)
	}
	for _, n := range triadSizes {
		args := [][]byte{make([]byte, 8), make([]byte, 8), binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.25)),
			binary.LittleEndian.AppendUint32(nil, n)}
		for range 20 {
			if _, err := r.Prepare(k, dim((n+255)/256, 1, 1), dim(256, 1, 1), args, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	return traces, warns, preloaded, l.count() - preloaded
}

func count(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// The runtime's policy on scripts/gpu-deploy-classes.sh's two edits of a
// sizesweep entry (six classes, arguments 2 and 3 folded), after a run of
// the original filled the cache: with the first class dropped its size's
// launch shape is traced as in no class (one shape, every launch of it)
// and nothing compiles; with folded values no launch has, one warning
// names the file and the kernel and nothing compiles. Whether the classes
// fold or only the entry's configuration does changes the second: a class
// that folds nothing is not restricted by folded values.
func TestScriptEditsOfAClassedEntry(t *testing.T) {
	for _, foldClasses := range []bool{true, false} {
		t.Run(fmt.Sprintf("classes fold %v", foldClasses), func(t *testing.T) {
			dir := t.TempDir()
			write := func(name string, v any) string {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			entries := triadEntry(foldClasses)
			d, u := scriptEdits(entries)
			orig, dropped, unmeasured := write("tuned.json", entries), write("dropped.json", d), write("unmeasured.json", u)
			cache := filepath.Join(dir, "cache")
			c := &passesCompiler{facts: KernelFacts{ScalarArgs: []int{2, 3}, ArgSizes: []int{8, 8, 4, 4}}}
			// Folding, each class compiles its own variant; not, the classes
			// of one configuration share theirs.
			cold := 6
			if !foldClasses {
				cold = 3
			}
			if _, warns := sweepRun(t, orig, cache, c); len(warns) != 0 || c.count() != cold {
				t.Fatalf("the cold run: %d compiles, warnings %q; want %d and none", c.count(), warns, cold)
			}
			traces, warns := sweepRun(t, dropped, cache, c)
			if got := count(traces, "is in no class"); got != 20 || len(warns) != 0 || c.count() != cold {
				t.Errorf("one class dropped: %d launches traced in no class (want 20), warnings %q, %d compiles (want %d)\n%s",
					got, warns, c.count(), cold, strings.Join(traces, "\n"))
			}
			_, warns = sweepRun(t, unmeasured, cache, c)
			want := 0
			if foldClasses {
				want = 1
			}
			if len(warns) != want || c.count() != cold {
				t.Errorf("folded values no launch has: warnings %q (want %d), %d compiles (want %d)", warns, want, c.count(), cold)
			}
			if want == 1 && (!strings.Contains(warns[0], unmeasured) || !strings.Contains(warns[0], "_Z5triadPfPKffi")) {
				t.Errorf("the warning %q does not name the file and the kernel", warns[0])
			}
		})
	}
}

// The preload loads, for a kernel whose classes fold argument values, the
// variants of the values the entry lists that are in the store, so the
// first launch of each class finds its code in memory: after a cold run of
// sizesweep, a warm run's preload loads the six classes' variants and its
// launches load and compile nothing. A file whose folded values no launch
// has preloads nothing (no such variant is stored), nor does one whose
// folded argument lists no values (any value could come).
func TestPreloadMeasuredFoldedValues(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	entries := triadEntry(true)
	_, u := scriptEdits(entries)
	noValues := triadEntry(true)
	for _, f := range noValues["_Z5triadPfPKffi"].(map[string]any)["folded"].([]any) {
		delete(f.(map[string]any), "values")
	}
	orig, unmeasured, unlisted := write("tuned.json", entries), write("unmeasured.json", u), write("novalues.json", noValues)
	cache := filepath.Join(dir, "cache")
	c := &passesCompiler{facts: KernelFacts{ScalarArgs: []int{2, 3}, ArgSizes: []int{8, 8, 4, 4}}}
	if _, _, pre, run := sweepLoads(t, orig, cache, c); pre != 0 || run != 6 || c.count() != 6 {
		t.Fatalf("the cold run: %d preloaded, %d loaded by launches, %d compiles; want 0, 6, 6", pre, run, c.count())
	}
	if _, _, pre, run := sweepLoads(t, orig, cache, c); pre != 6 || run != 0 || c.count() != 6 {
		t.Errorf("a warm run: %d preloaded, %d loaded by launches, %d compiles; want 6, 0, 6", pre, run, c.count())
	}
	if _, _, pre, run := sweepLoads(t, unmeasured, cache, c); pre != 0 || run != 0 || c.count() != 6 {
		t.Errorf("values no launch has: %d preloaded, %d loaded by launches, %d compiles; want none", pre, run, c.count())
	}
	if _, _, pre, _ := sweepLoads(t, unlisted, cache, c); pre != 0 {
		t.Errorf("folded arguments without values: %d preloaded, want 0", pre)
	}
}
