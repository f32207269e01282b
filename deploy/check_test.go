package deploy

import (
	"errors"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

func TestCheckReportsEachTunedKernel(t *testing.T) {
	plans := Plans{
		"_Z6vecaddPKfS0_Pfi": {Kernel: "_Z6vecaddPKfS0_Pfi", Source: "t.json", Config: mneme.Config{Passes: "default<O2>", CodegenOpt: 3},
			TunedBlock: mneme.Dim3{X: 512, Y: 1, Z: 1}, TunedGPU: "NVIDIA H100"},
		"_Z4bestv":             {Kernel: "_Z4bestv", Source: "t.json", Original: true},
		"_Z6vecaddPKfS0_Pfiii": {Kernel: "_Z6vecaddPKfS0_Pfiii", Source: "t.json"},
	}
	rep := Check(plans, []string{"_Z6vecaddPKfS0_Pfi", "_Z4bestv"}, "NVIDIA H200")
	if rep.Matched != 2 || len(rep.Rows) != 3 {
		t.Fatalf("report %+v", rep)
	}
	byName := map[string]CheckRow{}
	for _, r := range rep.Rows {
		byName[r.Kernel] = r
	}
	v := byName["_Z6vecaddPKfS0_Pfi"]
	if v.Status != StatusDeployed || !strings.Contains(v.Note, "block 512") || !strings.Contains(v.Note, "tuned on NVIDIA H100, this GPU is NVIDIA H200") {
		t.Errorf("deployed row %+v", v)
	}
	if byName["_Z4bestv"].Status != StatusOriginal {
		t.Errorf("original row %+v", byName["_Z4bestv"])
	}
	u := byName["_Z6vecaddPKfS0_Pfiii"]
	if u.Status != StatusUnknown || !strings.Contains(u.Note, "did you mean _Z6vecaddPKfS0_Pfi?") {
		t.Errorf("unknown row %+v", u)
	}
}

// TestCheckWithReportsInvalidConfigurations: a kernel whose configuration
// the check refuses is invalid (with the reason), not deployed and not
// matched; the others are as Check reports them.
func TestCheckWithReportsInvalidConfigurations(t *testing.T) {
	plans := Plans{
		"_Z1av": {Kernel: "_Z1av", Source: "t.json", Config: mneme.Config{Passes: "no-such-pass", CodegenOpt: 3}},
		"_Z1bv": {Kernel: "_Z1bv", Source: "t.json", Config: mneme.Config{Passes: "default<O3>", CodegenOpt: 3}},
	}
	valid := func(p *Plan) error {
		if p.Config.Passes == "no-such-pass" {
			return errors.New("unknown pass name 'no-such-pass'")
		}
		return nil
	}
	rep := CheckWith(plans, []string{"_Z1av", "_Z1bv"}, "", valid)
	if rep.Matched != 1 || rep.Rows[0].Status != StatusInvalid || !strings.Contains(rep.Rows[0].Note, "no-such-pass") || rep.Rows[1].Status != StatusDeployed {
		t.Errorf("report %+v", rep)
	}
	if rep := Check(plans, []string{"_Z1av", "_Z1bv"}, ""); rep.Matched != 2 {
		t.Errorf("without a check: %+v", rep)
	}
}

func TestPrecompileJobs(t *testing.T) {
	generic := &Plan{Kernel: "g", Config: mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Grid: mneme.Dim3{X: 9, Y: 1, Z: 1}},
		TunedBlock: mneme.Dim3{X: 128, Y: 1, Z: 1}, RecordedBlock: mneme.Dim3{X: 256, Y: 1, Z: 1}}
	spec := &Plan{Kernel: "s", Config: mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Specialize: true, SpecializeDims: true}}
	plans := Plans{"g": generic, "s": spec, "o": {Kernel: "o", Original: true}, "missing": {Kernel: "missing"}}
	launches := map[string][]Launch{
		"s": {{Grid: mneme.Dim3{X: 4, Y: 1, Z: 1}, Block: mneme.Dim3{X: 64, Y: 1, Z: 1}, Args: [][]byte{{1}}},
			{Grid: mneme.Dim3{X: 8, Y: 1, Z: 1}, Block: mneme.Dim3{X: 64, Y: 1, Z: 1}, Args: [][]byte{{2}}}},
	}
	jobs := PrecompileJobs(plans, []string{"g", "s", "o"}, launches)
	if len(jobs) != 3 {
		t.Fatalf("jobs %+v, want the generic kernel once and the specialized one per recorded launch", jobs)
	}
	if jobs[0].Kernel != "g" || !jobs[0].Config.Grid.IsZero() || !jobs[0].Config.Block.IsZero() {
		t.Errorf("generic job %+v: an unspecialized variant is keyed without dimensions", jobs[0])
	}
	if jobs[1].Kernel != "s" || jobs[1].Config.Grid.X != 4 || jobs[2].Config.Grid.X != 8 || jobs[2].Args[0][0] != 2 {
		t.Errorf("specialized jobs %+v %+v: one per recorded launch with its dimensions and values", jobs[1], jobs[2])
	}
}

func TestVariantKeyFoldsOnlySpecializedValues(t *testing.T) {
	facts := KernelFacts{ScalarArgs: []int{1}}
	cfg := mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Specialize: true}
	a := VariantKey("ir", "k", cfg, facts, [][]byte{{1, 2}, {7}}, "sm_90", 13000, "")
	b := VariantKey("ir", "k", cfg, facts, [][]byte{{9, 9}, {7}}, "sm_90", 13000, "")
	c := VariantKey("ir", "k", cfg, facts, [][]byte{{1, 2}, {8}}, "sm_90", 13000, "")
	if a.Hash() != b.Hash() {
		t.Error("a pointer argument that changes gave another variant")
	}
	if a.Hash() == c.Hash() {
		t.Error("a specialized value that changes gave the same variant")
	}
	cfg.Specialize = false
	if VariantKey("ir", "k", cfg, facts, [][]byte{{1, 2}, {7}}, "sm_90", 13000, "").Hash() != VariantKey("ir", "k", cfg, facts, [][]byte{{1, 2}, {8}}, "sm_90", 13000, "").Hash() {
		t.Error("without specialization the values must not enter the key")
	}
	dims := mneme.Config{Passes: "default<O3>", CodegenOpt: 3, SpecializeDims: true, Grid: mneme.Dim3{X: 2, Y: 1, Z: 1}, Block: mneme.Dim3{X: 32, Y: 1, Z: 1}}
	dims2 := dims
	dims2.Grid.X = 3
	if VariantKey("ir", "k", dims, facts, nil, "sm_90", 1, "").Hash() == VariantKey("ir", "k", dims2, facts, nil, "sm_90", 1, "").Hash() {
		t.Error("specialized dimensions must enter the key")
	}
	if IRHash([][]byte{{1}, {2, 3}}) == IRHash([][]byte{{1, 2}, {3}}) {
		t.Error("IRHash must tell translation units apart")
	}
}

// A kernel deployed under one plan and later under another keys on what the
// later configuration folds, not on what the first compile folded: facts
// name the kernel's scalars, the configuration picks among them.
func TestFoldedArgsFollowTheConfiguration(t *testing.T) {
	facts := KernelFacts{ScalarArgs: []int{2, 3, 4}}
	named := mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Specialize: true, SpecializeArgs: []int{3, 4}}
	all := mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Specialize: true}
	if got := FoldedArgs(named, facts); len(got) != 2 || got[0] != 3 {
		t.Errorf("named arguments: %v", got)
	}
	if got := FoldedArgs(all, facts); len(got) != 3 {
		t.Errorf("every scalar: %v", got)
	}
	if got := FoldedArgs(mneme.Config{}, facts); got != nil {
		t.Errorf("no specialization: %v", got)
	}
	args := [][]byte{{0}, {0}, {1}, {7}, {5}}
	other := [][]byte{{0}, {0}, {2}, {7}, {5}} // argument 2 differs
	if VariantKey("ir", "k", all, facts, args, "sm_90", 1, "").Hash() == VariantKey("ir", "k", all, facts, other, "sm_90", 1, "").Hash() {
		t.Error("a folded scalar that differs must give another variant")
	}
	if VariantKey("ir", "k", named, facts, args, "sm_90", 1, "").Hash() != VariantKey("ir", "k", named, facts, other, "sm_90", 1, "").Hash() {
		t.Error("an argument the configuration does not fold must not split variants")
	}
}

func TestClosestNeedsHalfTheName(t *testing.T) {
	// "abcdef" shares 3 of 6 with "abcxyz" (half: not enough), 4 with "abcdzz".
	if got := closest("abcdef", []string{"abcxyz"}); got != "" {
		t.Errorf("a name sharing only half its prefix was suggested: %q", got)
	}
	if got := closest("abcdef", []string{"abcxyz", "abcdzz", "abczzz"}); got != "abcdzz" {
		t.Errorf("closest = %q, want the longest shared prefix", got)
	}
	if got := closest("abcdef", []string{"abcdzz", "abcdyy"}); got != "abcdzz" {
		t.Errorf("closest = %q, want the first of equally close names", got)
	}
}

func TestPrecompileLabelsCountFromOne(t *testing.T) {
	plans := Plans{"s": {Kernel: "s", Config: mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Specialize: true}}}
	jobs := PrecompileJobs(plans, []string{"s"}, map[string][]Launch{"s": {{Grid: dim1(1), Block: dim1(32), Args: [][]byte{{1}}}}})
	if len(jobs) != 1 || jobs[0].Label != "recorded launch 1" {
		t.Errorf("jobs %+v", jobs)
	}
}

func dim1(x uint32) mneme.Dim3 { return mneme.Dim3{X: x, Y: 1, Z: 1} }

func TestVariantKeyIgnoresIndicesOutsideTheArguments(t *testing.T) {
	cfg := mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Specialize: true, SpecializeArgs: []int{-1, 0, 5}}
	a := VariantKey("ir", "k", cfg, KernelFacts{}, [][]byte{{1}}, "sm_90", 1, "")
	b := VariantKey("ir", "k", cfg, KernelFacts{}, [][]byte{{2}}, "sm_90", 1, "")
	if a.Hash() == b.Hash() {
		t.Error("argument 0 is folded: its value must enter the key")
	}
	if string(a.Values) != string(AppendValue(nil, 0, []byte{1})) {
		t.Errorf("values % x: only argument 0 exists", a.Values)
	}
}
