package tune

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

var vecadd = Launch{Kernel: "_Z6vecaddPfS_S_i", Grid: mneme.Dim3{X: 4096, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, NumArgs: 4, ScalarArgs: []int{3}}

func TestFractionalSpaceDerivesCoveringGrid(t *testing.T) {
	s, err := LoadSpaceFile("testdata/fractional.yaml", vecadd, mneme.DeviceLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "fractional" || len(s.Params) != 3 {
		t.Fatalf("name %q params %d", s.Name, len(s.Params))
	}
	n := vecadd.Threads()
	for _, frac := range []float64{0.03, 0.1, 0.33, 0.5, 0.77, 1.0} {
		cfg, err := s.Evaluate(Point{"frac": frac, "opt": "default<O2>", "spec": true})
		if err != nil {
			t.Fatalf("frac %v: %v", frac, err)
		}
		wantBlock := uint32(32 * math.Ceil(frac*1024/32))
		if cfg.Block.X != wantBlock || cfg.Block.Y != 1 {
			t.Errorf("frac %v: block %s, want %d", frac, cfg.Block, wantBlock)
		}
		if uint64(cfg.Grid.X)*uint64(cfg.Block.X) < n || uint64(cfg.Grid.X-1)*uint64(cfg.Block.X) >= n {
			t.Errorf("frac %v: grid %d x block %d does not tightly cover %d threads", frac, cfg.Grid.X, cfg.Block.X, n)
		}
		if cfg.Passes != "default<O2>" || !cfg.Specialize {
			t.Errorf("frac %v: passes %q specialize %v", frac, cfg.Passes, cfg.Specialize)
		}
	}
	// TPE and random can search it; exhaustive cannot.
	if _, err := NewExhaustive(s); err == nil {
		t.Error("exhaustive accepted a continuous space")
	}
	r := NewRandom(s, 1)
	for range 20 {
		pt, ok := r.Ask()
		if !ok {
			t.Fatal("random ran dry on a continuous space")
		}
		if _, err := s.Evaluate(pt); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTiles2DSpace(t *testing.T) {
	stencil := Launch{Grid: mneme.Dim3{X: 64, Y: 64, Z: 1}, Block: mneme.Dim3{X: 16, Y: 16, Z: 1}}
	s, err := LoadSpaceFile("testdata/tiles2d.yaml", stencil, mneme.DeviceLimits{})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := NewExhaustive(s)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for {
		pt, ok := ex.Ask()
		if !ok {
			break
		}
		count++
		cfg, err := s.Evaluate(pt)
		if err != nil {
			t.Fatal(err)
		}
		w, h := 1<<pt["log_w"].(int), 1<<pt["log_h"].(int)
		if int(cfg.Block.X) != w || int(cfg.Block.Y) != h || w*h > 1024 || (w*h)%32 != 0 {
			t.Fatalf("%v: block %s", pt, cfg.Block)
		}
		if cfg.Grid.X*cfg.Block.X < 1024 || cfg.Grid.Y*cfg.Block.Y < 1024 {
			t.Fatalf("%v: grid %s does not cover 1024x1024", pt, cfg.Grid)
		}
		mb := pt["min_blocks"].(int)
		if cfg.SetLaunchBounds != (mb > 0) || cfg.MinBlocksPerSM != mb || (mb > 0 && cfg.MaxThreads != w*h) {
			t.Fatalf("%v: launch bounds %v %d %d", pt, cfg.SetLaunchBounds, cfg.MaxThreads, cfg.MinBlocksPerSM)
		}
	}
	// Pairs (w,h) with w in 8..128, h in 1..32, w*h in [32,1024] and a multiple of 32, by hand:
	want := 0
	for lw := 3; lw <= 7; lw++ {
		for lh := 0; lh <= 5; lh++ {
			if p := 1 << (lw + lh); p <= 1024 && p%32 == 0 {
				want += 3
			}
		}
	}
	if count != want {
		t.Fatalf("exhaustive gave %d points, want %d", count, want)
	}
}

func TestSpaceFileErrorsNameFileAndKey(t *testing.T) {
	cases := map[string][]string{
		"testdata/bad_key.yaml":  {"bad_key.yaml:5", "derive.grid.w", "unknown configuration field"},
		"testdata/bad_expr.yaml": {"bad_expr.yaml:4", "derive.block.x", "nosuchname"},
		"testdata/bad_type.yaml": {"bad_type.yaml:2", "params.x.type", "integer"},
	}
	for file, wants := range cases {
		_, err := LoadSpaceFile(file, vecadd, mneme.DeviceLimits{})
		if err == nil {
			t.Errorf("%s: no error", file)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", file, err, w)
			}
		}
	}
	inline := map[string]string{
		"params: {x: {type: int, low: 1, high: 4, stride: 2}}\nderive: {block.x: \"x\"}":  "params.x.stride",
		"params: {x: {type: int, low: 1, high: 4}}\nderive: {block.x: \"x\"}\nextra: 1":   "extra: unknown key",
		"params: {N: {type: int, low: 1, high: 4}}":                                       "params.N",
		"params: {x: {type: real, low: 2, high: 1}}":                                      "below low",
		"params: {x: {type: int, low: 1, high: 4}}\nconstraints: [\"x + \"]":              "constraints[0]",
		"params: {x: {type: int, low: 1, high: 4}}\nconstraints: [\"x * 2\"]":             "constraints[0]",
		"params: {x: {type: categorical}}":                                                "needs a list",
		"- just\n- a list":                                                                "want a mapping",
		"params: {x: {type: int, low: 1, high: 4, log: maybe}}":                           "params.x.log",
		"params: {x: {type: real, low: 0, high: 1, step: 0.1}}":                           "params.x.step",
		"params: {x: {type: fixed}}":                                                      "fixed needs a value",
		"params: {x: {type: categorical, values: [1, 1]}}":                                "appears twice",
		"params: {\"a-b\": {type: bool}}":                                                 "identifiers",
		"params: {x: {type: int, low: 1, high: 4}}\nderive: {block.x: \"x\", block.x: 2}": "derive.block.x: defined twice",
		"params: {x: {type: int, low: 1, high: 4}}\nlet: {y: \"x\", y: \"2\"}":            "let.y: defined twice",
	}
	for src, want := range inline {
		_, err := ParseSpace("inline.yaml", []byte(src), vecadd, mneme.DeviceLimits{})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "inline.yaml") {
			t.Errorf("%q: error %v, want one naming inline.yaml and %q", src, err, want)
		}
	}
}

// A derived value of the wrong type is accepted at load time (the type of
// an expression is known only when it is evaluated) and makes every point
// infeasible, naming the field.
func TestDeriveOfWrongTypeIsInfeasible(t *testing.T) {
	s, err := ParseSpace("inline.yaml", []byte("params: {x: {type: int, low: 1, high: 4}}\nderive: {passes: \"x\"}"), vecadd, mneme.DeviceLimits{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Evaluate(Point{"x": 1})
	if !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "derive.passes") || !strings.Contains(err.Error(), "want a pipeline text") {
		t.Errorf("passes from an int: %v", err)
	}
}

// TestIntStep reads step: of an int range: the values are low, low+step, ...
// up to high, and the published 80-point vector-add space has 80 points.
func TestIntStep(t *testing.T) {
	for _, c := range []struct {
		def  string
		want []int
	}{
		{"{type: int, low: 1, high: 10, step: 3}", []int{1, 4, 7, 10}},
		{"{type: int, low: 1, high: 9, step: 3}", []int{1, 4, 7}},
		{"{type: int, low: 5, high: 5, step: 4}", []int{5}},
		{"{type: int, low: 2, high: 6}", []int{2, 3, 4, 5, 6}},
	} {
		s, err := ParseSpace("inline.yaml", []byte("params: {x: "+c.def+"}\nderive: {block.x: \"x\"}"), vecadd, mneme.DeviceLimits{})
		if err != nil {
			t.Fatalf("%s: %v", c.def, err)
		}
		e, err := NewExhaustive(s)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for {
			pt, ok := e.Ask()
			if !ok {
				break
			}
			x, _ := toFloat(pt["x"])
			got = append(got, int(x))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: values %v, want %v", c.def, got, c.want)
		}
		if n, ok := s.Size(); !ok || n != int64(len(c.want)) {
			t.Errorf("%s: size %d %v, want %d", c.def, n, ok, len(c.want))
		}
	}
	s, err := LoadSpaceFile("../examples/vecadd/tune-80.yaml", vecadd, mneme.DeviceLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := s.Size(); !ok || n != 80 {
		t.Errorf("tune-80.yaml: %d points (%v), want 80", n, ok)
	}
}

func FuzzParseSpace(f *testing.F) {
	for _, file := range []string{"fractional.yaml", "tiles2d.yaml", "bad_key.yaml", "bad_expr.yaml", "bad_type.yaml"} {
		data, err := readTestdata(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpace("fuzz.yaml", data, vecadd, mneme.DeviceLimits{})
		if err != nil {
			return
		}
		// A space that loads must evaluate its points without panicking.
		r := NewRandom(s, 1)
		for range 3 {
			if _, ok := r.Ask(); !ok {
				break
			}
		}
	})
}

// The space hash that --resume compares follows the parameters, constraints
// and baseline, and ignores the name and the device's recorded values.
func TestSpaceHashFollowsDefinition(t *testing.T) {
	base := `
params:
  b: {type: int, low: 32, high: 256, step: 32}
derive:
  block.x: "b"
  grid.x: "ceil(N / block_x)"
`
	parse := func(name, text string, l Launch, lim mneme.DeviceLimits) string {
		t.Helper()
		s, err := ParseSpace(name, []byte(text), l, lim)
		if err != nil {
			t.Fatal(err)
		}
		return s.Hash()
	}
	h := parse("a.yaml", base, vecadd, mneme.DeviceLimits{})
	if len(h) != 16 {
		t.Fatalf("hash %q is not 16 hex digits", h)
	}
	if got := parse("other.yaml", base, vecadd, mneme.DeviceLimits{SMCount: 132}); got != h {
		t.Errorf("renaming the file or changing the SM count changed the hash: %s vs %s", got, h)
	}
	if got := parse("a.yaml", base+"constraints:\n  - \"b <= 128\"\n", vecadd, mneme.DeviceLimits{}); got == h {
		t.Error("adding a constraint kept the hash")
	}
	if got := parse("a.yaml", strings.Replace(base, "high: 256", "high: 512", 1), vecadd, mneme.DeviceLimits{}); got == h {
		t.Error("widening a parameter kept the hash")
	}
	other := vecadd
	other.Block.X = 128
	if got := parse("a.yaml", base, other, mneme.DeviceLimits{}); got == h {
		t.Error("a different recorded launch (baseline) kept the hash")
	}
}

func TestLoadSpaceRefusesTheBaselineParamName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte("params:\n  baseline: {type: bool}\nderive:\n  specialize: \"baseline\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSpaceFile(path, Launch{Grid: mneme.Dim3{X: 1, Y: 1, Z: 1}, Block: mneme.Dim3{X: 32, Y: 1, Z: 1}}, mneme.DeviceLimits{})
	if err == nil || !strings.Contains(err.Error(), "params.baseline") {
		t.Fatalf("a parameter named baseline: %v", err)
	}
}

// TestSpaceExpressionNestingIsBounded: an expression nesting parentheses a
// million deep (a 2 MB file) is refused naming the file and the key, before
// the expression parser recurses into it; one at the limit still compiles,
// as do brackets inside a string.
func TestSpaceExpressionNestingIsBounded(t *testing.T) {
	space := func(expr string) error {
		_, err := ParseSpace("deep.yaml", []byte("params: {x: {type: int, low: 1, high: 4}}\nderive: {block.x: \""+expr+"\"}"), vecadd, mneme.DeviceLimits{})
		return err
	}
	deep := func(n int) string { return strings.Repeat("(", n) + "x" + strings.Repeat(")", n) }
	if err := space(strings.Repeat("(", 1_000_000) + "x" + strings.Repeat(")", 1_000_000)); err == nil || !strings.Contains(err.Error(), "deep.yaml") || !strings.Contains(err.Error(), "derive.block.x") || !strings.Contains(err.Error(), "bytes: the limit is") {
		t.Errorf("a million parentheses: %v", err)
	}
	if err := space(deep(maxExprDepth + 1)); err == nil || !strings.Contains(err.Error(), "derive.block.x") || !strings.Contains(err.Error(), "more than 64 deep") {
		t.Errorf("%d parentheses: %v", maxExprDepth+1, err)
	}
	if err := space(deep(maxExprDepth)); err != nil {
		t.Errorf("%d parentheses: %v", maxExprDepth, err)
	}
	if err := space(strings.Repeat("-", maxExprBytes+1) + "x"); err == nil || !strings.Contains(err.Error(), "the limit is 4096") {
		t.Errorf("a chain of unary minus past the length limit: %v", err)
	}
	if err := checkExprSize(`len('` + strings.Repeat("(", 100) + `') > 0 ? x : x`); err != nil {
		t.Errorf("brackets inside a string counted: %v", err)
	}
}
