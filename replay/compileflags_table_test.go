package replay

import (
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// Every -O level clang takes, each ptxas -O level and each spelling of the
// register cap with its bounds: one row each.
func TestApplyCompileFlagsEveryRow(t *testing.T) {
	base := mneme.Baseline(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 32, Y: 1, Z: 1}, 0)
	base.Passes, base.CodegenOpt = "custom", 9 // neither is any level's
	for _, r := range []struct {
		flag    string
		passes  string
		codegen int
	}{
		{"-O0", "default<O0>", 0}, {"-O1", "default<O1>", 1}, {"-Og", "default<O1>", 1}, {"-O2", "default<O2>", 2},
		{"-O3", "default<O3>", 3}, {"-Ofast", "default<O3>", 3}, {"-Os", "default<Os>", 2}, {"-Oz", "default<Oz>", 2},
	} {
		if got := ApplyCompileFlags(base, []string{r.flag}); got.Passes != r.passes || got.CodegenOpt != r.codegen {
			t.Errorf("%s: %s codegen %d, want %s %d", r.flag, got.Passes, got.CodegenOpt, r.passes, r.codegen)
		}
	}
	for _, r := range []struct {
		flags []string
		ptxas int
		regs  int
	}{
		{[]string{"-Xcuda-ptxas", "-O1"}, 1, 0},
		{[]string{"-Xcuda-ptxas", "-O2"}, 2, 0},
		{[]string{"-Xcuda-ptxas", "-O3"}, 3, 0},
		{[]string{"-Xcuda-ptxas", "-O0"}, 0, 0},
		{[]string{"-Xcuda-ptxas", "-O4"}, 0, 0},
		{[]string{"-Xcuda-ptxas", "-maxrregcount=1"}, 0, 1},
		{[]string{"-Xcuda-ptxas", "-maxrregcount=255"}, 0, 255},
		{[]string{"-Xcuda-ptxas", "-maxrregcount=0"}, 0, 0},
		{[]string{"-Xcuda-ptxas", "-maxrregcount=256"}, 0, 0},
		{[]string{"-Xcuda-ptxas", "--maxrregcount=48"}, 0, 48},
		{[]string{"-Xcuda-ptxas", "-maxrregcount", "-Xcuda-ptxas", "32"}, 0, 32},
		{[]string{"-Xcuda-ptxas", "--maxrregcount", "-Xcuda-ptxas", "255"}, 0, 255},
		{[]string{"-Xcuda-ptxas", "-maxrregcount", "32"}, 0, 0}, // the value not passed to ptxas
		{[]string{"-Xcuda-ptxas"}, 0, 0},
		{[]string{"-maxrregcount=64"}, 0, 0}, // not a ptxas flag
		{[]string{"-Xcuda-ptxas", "-O1", "-Xcuda-ptxas", "-O3", "-Xcuda-ptxas", "-maxrregcount=64", "-Xcuda-ptxas", "-maxrregcount=32"}, 3, 32},
	} {
		if got := ApplyCompileFlags(base, r.flags); got.PtxasOpt != r.ptxas || got.MaxRegisters != r.regs || got.Passes != "custom" {
			t.Errorf("%q: ptxas -O%d, max registers %d, passes %s; want %d, %d, unchanged", r.flags, got.PtxasOpt, got.MaxRegisters, got.Passes, r.ptxas, r.regs)
		}
	}
}

// Resolve fills each unset member from the recording alone, and keeps each
// set one.
func TestResolveEachMemberAlone(t *testing.T) {
	r := &Recording{Kernel: &db.Kernel{CompileFlags: []string{"-O1"}},
		Instance: &db.Instance{GridDims: mneme.Dim3{X: 4, Y: 5, Z: 6}, BlockDims: mneme.Dim3{X: 64, Y: 2, Z: 3}, SharedMem: 512}}
	set := mneme.Config{Grid: mneme.Dim3{X: 7, Y: 1, Z: 1}, Block: mneme.Dim3{X: 32, Y: 1, Z: 1}, SharedMem: 64, Passes: "default<O2>", CodegenOpt: 2}
	if got := r.Resolve(set); got.Grid != set.Grid || got.Block != set.Block || got.SharedMem != 64 || got.Passes != "default<O2>" || got.CodegenOpt != 2 {
		t.Errorf("everything set: %+v", got)
	}
	for name, c := range map[string]mneme.Config{
		"grid":   {Block: set.Block, SharedMem: 64, Passes: "default<O2>", CodegenOpt: 2},
		"block":  {Grid: set.Grid, SharedMem: 64, Passes: "default<O2>", CodegenOpt: 2},
		"shared": {Grid: set.Grid, Block: set.Block, Passes: "default<O2>", CodegenOpt: 2},
		"passes": {Grid: set.Grid, Block: set.Block, SharedMem: 64, CodegenOpt: 2},
	} {
		got := r.Resolve(c)
		want := set
		switch name {
		case "grid":
			want.Grid = r.Instance.GridDims
		case "block":
			want.Block = r.Instance.BlockDims
		case "shared":
			want.SharedMem = 512
		case "passes":
			want.Passes, want.CodegenOpt = "default<O1>", 1
		}
		if got.Grid != want.Grid || got.Block != want.Block || got.SharedMem != want.SharedMem || got.Passes != want.Passes || got.CodegenOpt != want.CodegenOpt {
			t.Errorf("%s unset: %+v, want %+v", name, got, want)
		}
	}
	// A shape given in part is kept as given (JSON completes left-out
	// components when it is read; a zero given is refused by Validate).
	for _, d := range []mneme.Dim3{{X: 8}, {Y: 8}, {Z: 8}, {X: 8, Y: 2}, {X: 8, Z: 2}, {Y: 8, Z: 2}} {
		if got := fillDim(d, r.Instance.BlockDims); got != d {
			t.Errorf("fillDim(%+v) = %+v, want it kept", d, got)
		}
	}
}
