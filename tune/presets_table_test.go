package tune

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// describeParams is a space's parameters as one line: name, kind and
// values, in order.
func describeParams(s *Space) string {
	var parts []string
	for _, p := range s.Params {
		switch p.Kind {
		case KindInt, KindReal:
			parts = append(parts, fmt.Sprintf("%s %s %g..%g/%g", p.Name, p.Kind, p.Low, p.High, p.Step))
		default:
			parts = append(parts, fmt.Sprintf("%s %s %v", p.Name, p.Kind, p.Choices))
		}
	}
	return strings.Join(parts, "; ")
}

// Every preset's row of tune/SPACES.md, pinned parameter by parameter, with
// and without scalar arguments, and its size for vector add.
func TestPresetEveryRow(t *testing.T) {
	lim := mneme.DeviceLimits{MaxThreadsPerBlock: 1024, WarpSize: 32, RegsPerSM: 65536, SMCount: 132}
	const (
		pipes  = "passes pipeline [default<O1> default<O2> default<O3> default<Os> default<Oz>]"
		spec   = "specialize bool [false true]"
		dims   = "specialize_dims bool [false true]"
		bounds = "launch_bounds bool [false true]; min_blocks_per_sm categorical [0 1 2 4 8]"
		ptxas  = "max_registers categorical [0 32 64 128 255]; ptxas_opt categorical [0 1 2 3]"
		cg     = "codegen_opt int 0..3/1"
	)
	rows := []struct {
		name       string
		params     string
		size       int64
		noScalars  string // the parameters without scalar arguments
		sizeNoSpec int64
	}{
		{"quick", "block_x categorical [32 64 128 256 512 1024]; passes pipeline [default<O2> default<O3>]; " + spec, 24,
			"block_x categorical [32 64 128 256 512 1024]; passes pipeline [default<O2> default<O3>]", 12},
		{"standard", "block_x int 64..1024/64; " + pipes + "; " + spec + "; " + dims, 320,
			"block_x int 64..1024/64; " + pipes + "; " + dims, 160},
		{"launch", "block_x int 32..1024/32; " + bounds, 320, "block_x int 32..1024/32; " + bounds, 320},
		{"compiler", pipes + "; " + cg + "; " + spec + "; " + dims + "; " + ptxas, 1600,
			pipes + "; " + cg + "; " + dims + "; " + ptxas, 800},
		{"full", "block_x int 32..1024/32; " + pipes + "; " + cg + "; " + spec + "; " + dims + "; " + bounds + "; " + ptxas, 512000,
			"block_x int 32..1024/32; " + pipes + "; " + cg + "; " + dims + "; " + bounds + "; " + ptxas, 256000},
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
		noScalars := vecadd
		noScalars.ScalarArgs = nil
		for _, c := range []struct {
			launch Launch
			params string
			size   int64
		}{{vecadd, r.params, r.size}, {noScalars, r.noScalars, r.sizeNoSpec}} {
			s, err := Preset(r.name, c.launch, lim)
			if err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			if got := describeParams(s); got != c.params {
				t.Errorf("%s (%d scalars): parameters\n  %s\nwant\n  %s", r.name, len(c.launch.ScalarArgs), got, c.params)
			}
			if size, finite := s.Size(); !finite || size != c.size {
				t.Errorf("%s (%d scalars): size %d, want %d", r.name, len(c.launch.ScalarArgs), size, c.size)
			}
		}
	}
	if strings.Join(names, " ") != strings.Join(PresetNames, " ") {
		t.Errorf("presets %v, this table has %v", PresetNames, names)
	}
	if _, err := Preset("fast", vecadd, lim); err == nil || !strings.Contains(err.Error(), strings.Join(PresetNames, ", ")) {
		t.Errorf("an unknown preset: %v", err)
	}
}

// Every parameter a preset offers reaches the configuration: over the
// compiler preset's configurations each field takes every value its
// parameter offers.
func TestPresetParametersReachTheConfiguration(t *testing.T) {
	lim := mneme.DeviceLimits{MaxThreadsPerBlock: 1024, WarpSize: 32, RegsPerSM: 65536, SMCount: 132}
	s, err := Preset("compiler", vecadd, lim)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]map[string]bool{}
	add := func(k string, v any) {
		if values[k] == nil {
			values[k] = map[string]bool{}
		}
		values[k][fmt.Sprint(v)] = true
	}
	for _, c := range collect(t, s) {
		add("passes", c.Passes)
		add("codegen_opt", c.CodegenOpt)
		add("specialize", c.Specialize)
		add("specialize_dims", c.SpecializeDims)
		add("max_registers", c.MaxRegisters)
		add("ptxas_opt", c.PtxasOpt)
		add("block", c.Block)
	}
	want := map[string]string{
		"passes":          "default<O1> default<O2> default<O3> default<Os> default<Oz>",
		"codegen_opt":     "0 1 2 3",
		"specialize":      "false true",
		"specialize_dims": "false true",
		"max_registers":   "0 128 255 32 64",
		"ptxas_opt":       "0 1 2 3",
		"block":           vecadd.Block.String(),
	}
	for k, w := range want {
		var got []string
		for v := range values[k] {
			got = append(got, v)
		}
		sort.Strings(got)
		if strings.Join(got, " ") != w {
			t.Errorf("%s takes %v, want %s", k, got, w)
		}
	}
}
