package jit

import (
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/keytest"
)

// keyInputs are everything Compiler.Key reads from a request, so one table
// can change each alone.
type keyInputs struct {
	Name   string
	IR     []byte
	Kernel string
	Config mneme.Config
	Arg0   []byte
	Arg1   []byte
	Keep   []string
}

func (in keyInputs) key(c *Compiler) string {
	return c.Key(&Request{Name: in.Name, IR: in.IR, Kernel: in.Kernel, Config: in.Config,
		Args: [][]byte{in.Arg0, in.Arg1}, Keep: in.Keep})
}

// Each input of the compile key changed alone: another key where the code
// can differ, the same key where it cannot, with each switch that gates
// other inputs (specialize, specialize_dims, set_launch_bounds,
// internalize) on and off.
func TestCompileKeyEachInputAlone(t *testing.T) {
	on := keyInputs{Name: "a.bc", IR: []byte("bitcode"), Kernel: "k",
		Config: mneme.Baseline(mneme.Dim3{X: 16, Y: 2, Z: 3}, mneme.Dim3{X: 256, Y: 2, Z: 1}, 128),
		Arg0:   i32(7), Arg1: i32(9), Keep: []string{"g1", "g2"}}
	on.Config.Specialize, on.Config.SpecializeDims, on.Config.SetLaunchBounds, on.Config.Internalize = true, true, true, true
	on.Config.MaxThreads, on.Config.MinBlocksPerSM = 512, 2
	off := on
	off.Config.Specialize, off.Config.SpecializeDims, off.Config.SetLaunchBounds, off.Config.Internalize = false, false, false, false
	named := on
	named.Config.SpecializeArgs = []int{1}
	dims := []string{"Config.Grid.X", "Config.Grid.Y", "Config.Grid.Z", "Config.Block.X", "Config.Block.Y", "Config.Block.Z"}
	set := func(names ...string) map[string]bool {
		m := map[string]bool{"Name": true, "Config.SharedMem": true}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	cases := []struct {
		name string
		base keyInputs
		same map[string]bool
	}{
		{"every switch on", on, set()},
		{"every switch off", off, set(append(dims, "Arg0", "Arg1", "Keep", "Config.MaxThreads", "Config.MinBlocksPerSM", "Config.SpecializeArgs")...)},
		{"one argument named", named, set("Arg0")},
	}
	c := NewCompiler(Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base.key(c)
			if again := tc.base.key(c); again != base {
				t.Fatalf("equal requests gave keys %s and %s", base, again)
			}
			for _, v := range keytest.EachLeaf(tc.base) {
				got := v.Value.key(c)
				if want := tc.same[v.Path]; (got == base) != want {
					t.Errorf("changing %s alone: same key %v, want %v", v.Path, got == base, want)
				}
			}
		})
	}
}

// The compile key's equalities: the default pipeline spelled out or left
// empty, the target named by the configuration or by the compiler's
// options, and the kept symbols in any order are one compile; the target
// of the options is another compile when it differs.
func TestCompileKeyEquivalentSpellings(t *testing.T) {
	cfg := baseConfig()
	cfg.Internalize = true
	req := func(cfg mneme.Config, keep ...string) *Request {
		return &Request{IR: []byte("ir"), Kernel: "k", Config: cfg, Keep: keep}
	}
	c := NewCompiler(Options{})
	empty := cfg
	empty.Passes = ""
	if c.Key(req(cfg)) != c.Key(req(empty)) {
		t.Error("an empty pipeline and the default pipeline gave different keys")
	}
	if c.Key(req(cfg, "a", "b")) != c.Key(req(cfg, "b", "a")) {
		t.Error("the order of the kept symbols changed the key")
	}
	if c.Key(req(cfg, "ab")) == c.Key(req(cfg, "a", "b")) {
		t.Error("kept symbols are not delimited")
	}
	named := cfg
	named.Arch = "sm_80"
	if c.Key(req(cfg)) == c.Key(req(named)) {
		t.Error("a configuration's target did not change the key")
	}
	if got, want := NewCompiler(Options{Arch: "sm_80"}).Key(req(cfg)), c.Key(req(named)); got != want {
		t.Error("the options' target and the configuration's gave different keys for one compile")
	}
	if NewCompiler(Options{Arch: "sm_80"}).Key(req(cfg)) == c.Key(req(cfg)) {
		t.Error("the options' target did not change the key")
	}
	if !strings.HasPrefix(DefaultArch, "sm_") {
		t.Fatalf("DefaultArch %q", DefaultArch)
	}
	def := cfg
	def.Arch = DefaultArch
	if c.Key(req(def)) != c.Key(req(cfg)) {
		t.Error("the default target named gave another key than left empty")
	}
}
