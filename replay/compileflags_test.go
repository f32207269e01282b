package replay

import (
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

func TestApplyCompileFlags(t *testing.T) {
	base := mneme.Baseline(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 32, Y: 1, Z: 1}, 0)
	for _, c := range []struct {
		flags          []string
		passes         string
		codegen, ptxas int
		maxRegs        int
	}{
		{nil, "default<O3>", 3, 0, 0},
		{[]string{"-O2"}, "default<O2>", 2, 0, 0},
		{[]string{"-O3", "-Os"}, "default<Os>", 2, 0, 0}, // the last -O wins, as in clang
		{[]string{"-O0", "-Xcuda-ptxas", "-O1"}, "default<O0>", 0, 1, 0},
		{[]string{"-Xcuda-ptxas", "-maxrregcount=64"}, "default<O3>", 3, 0, 64},
		{[]string{"-Xcuda-ptxas", "--maxrregcount", "-Xcuda-ptxas", "40"}, "default<O3>", 3, 0, 40},
		{[]string{"-Xcuda-ptxas", "-maxrregcount=999", "-ffp-contract=off"}, "default<O3>", 3, 0, 0}, // out of range: ignored
	} {
		got := ApplyCompileFlags(base, c.flags)
		if got.Passes != c.passes || got.CodegenOpt != c.codegen || got.PtxasOpt != c.ptxas || got.MaxRegisters != c.maxRegs {
			t.Errorf("%q: passes %s codegen %d ptxas -O%d maxrreg %d; want %s %d %d %d", c.flags, got.Passes, got.CodegenOpt, got.PtxasOpt, got.MaxRegisters,
				c.passes, c.codegen, c.ptxas, c.maxRegs)
		}
	}
}

// An empty pipeline resolves to the application's -O level, recorded with
// the kernel; an explicit one stays.
func TestResolveUsesTheRecordedOptLevel(t *testing.T) {
	r := &Recording{Kernel: &db.Kernel{CompileFlags: []string{"-O1"}}, Instance: &db.Instance{GridDims: mneme.Dim3{X: 4, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 64, Y: 1, Z: 1}}}
	if got := r.Resolve(mneme.Config{}); got.Passes != "default<O1>" || got.CodegenOpt != 1 || got.Block.X != 64 {
		t.Errorf("Resolve(empty) = %+v", got)
	}
	if got := r.Resolve(mneme.Config{Passes: "default<O3>", CodegenOpt: 3}); got.Passes != "default<O3>" || got.CodegenOpt != 3 {
		t.Errorf("Resolve(O3) = %+v", got)
	}
	if b := r.Baseline(); b.Passes != "default<O1>" || b.CodegenOpt != 1 {
		t.Errorf("Baseline = %+v", b)
	}
}
