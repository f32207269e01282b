package tune

import (
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/deploy"
)

// foldedArgs describes every argument the entry's configurations fold, its
// classes' included, so the runtime knows the values each class's variants
// rest on, and the entry passes deploy's Validate; an argument no
// configuration folds is not described.
func TestFoldedArgsCoverTheClasses(t *testing.T) {
	k := &db.Kernel{ArgNames: []string{"y", "n", "a"}, Specializations: []bool{false, true, true}}
	stats := &KernelStats{Args: []ArgStats{{Arg: 1, Distinct: 2}, {Arg: 2, Invariant: true, Distinct: 1}}}
	insts := []*db.Instance{{Args: []string{"00", "01000000", "0000803f"}}, {Args: []string{"00", "02000000", "0000803f"}}}
	top := mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Specialize: true, SpecializeArgs: []int{2}}
	class := mneme.Config{Passes: "default<O2>", CodegenOpt: 3, Specialize: true, SpecializeArgs: []int{1}}
	plain := mneme.Config{Passes: "default<O1>", CodegenOpt: 3}
	got := foldedArgs([]mneme.Config{top, class, plain}, k, stats, insts)
	if len(got) != 2 || got[0].Arg != 1 || got[1].Arg != 2 {
		t.Fatalf("folded %+v, want arguments 1 (a class's) and 2 (the entry's)", got)
	}
	if got[0].Name != "n" || got[0].Distinct != 2 || got[0].Invariant || len(got[0].Values) != 2 {
		t.Errorf("argument 1: %+v, want its two values and statistics", got[0])
	}
	if !got[1].Invariant || len(got[1].Values) != 1 {
		t.Errorf("argument 2: %+v, want one value, invariant", got[1])
	}
	tk := deploy.TunedKernel{Config: top, Statistics: StatisticsRun, Folded: got, Classes: []deploy.TunedClass{
		{Grid: mneme.Dim3{X: 4, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Config: class}}}
	if err := tk.Validate(); err != nil {
		t.Errorf("the entry does not validate: %v", err)
	}
	tk.Folded = foldedArgs([]mneme.Config{top}, k, stats, insts)
	if err := tk.Validate(); err == nil {
		t.Error("an entry whose class folds an argument Folded does not describe validated")
	}
	if got := foldedArgs([]mneme.Config{plain}, k, stats, insts); got != nil {
		t.Errorf("nothing folded: %+v", got)
	}
}
