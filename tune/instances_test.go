package tune

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// addInstance adds to the test kernel an instance of grid.x blocks of 256
// threads with argument a (the float's bits) counted occurrences times.
func addInstance(t *testing.T, dir string, k *db.Kernel, gridX uint32, a uint32, occurrences int) string {
	t.Helper()
	const arena = 0x153940000000
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	grid, block := mneme.Dim3{X: gridX, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}
	args := [][]byte{u64(arena), u64(arena + 4096), u32(1000), u32(a)}
	dh := db.DynamicHash(grid, block, 0, args)
	inst := &db.Instance{DynamicHash: dh, Prologue: db.PrologueFileName(k.StaticHash, dh), Epilogue: db.EpilogueFileName(k.StaticHash, dh),
		GridDims: grid, BlockDims: block, Args: db.EncodeArgs(args), Occurrences: occurrences}
	snap := &db.Snapshot{Blobs: []db.Blob{{Addr: arena, Size: 8192, Data: make([]byte, 8192)}}, Args: args}
	for _, name := range []string{inst.Prologue, inst.Epilogue} {
		if _, err := db.WriteSnapshot(filepath.Join(dir, name), snap, db.SnapshotOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k.Instances[dh] = inst
	return k.StaticHash + "/" + dh
}

// instancesDB is the test kernel recorded at two sizes: the run's small
// instance (4 blocks, seen 10 times) and its large one (16 blocks, once).
func instancesDB(t *testing.T) (dir string, small, large string) {
	dir, small = writeRunDB(t, func(dir string, k *db.Kernel) {
		for _, inst := range k.Instances {
			inst.Occurrences = 10
		}
		large = addInstance(t, dir, k, 16, 0x40400000, 1)
	})
	return dir, small, large
}

func instancesOptions(t *testing.T, dbDir string, env ...string) InstancesOptions {
	ro, _, _ := runOptions(t, append([]string{"TESTWORKER_SHAPE_TIMES=1"}, env...)...)
	ro.Options.DB, ro.Options.Instance = dbDir, ""
	ro.AnalyzeGeometry = agnostic
	return InstancesOptions{RunOptions: ro, Kernel: "_Z6vecaddPfPKfif"}
}

func TestRunInstancesTotalAndClasses(t *testing.T) {
	dbDir, small, large := instancesDB(t)
	io := instancesOptions(t, dbDir)
	if err := RunInstances(context.Background(), io); err != nil {
		t.Fatalf("%v\n%s", err, io.Stderr)
	}
	out := io.Options.Output
	if s := io.Stdout.(interface{ String() string }).String(); !strings.Contains(s, "per instance (best configuration vs baseline):\n  "+small) {
		t.Errorf("the printed result lacks the figures per instance:\n%s", s)
	}
	trials, _, _ := ReadTrials(filepath.Join(out, TrialsFile))
	for _, tr := range trials {
		if tr.Config.Specialize {
			t.Errorf("trial %d folds arguments %v without launch statistics", tr.Number, tr.Config.SpecializeArgs)
		}
		if !tr.OK() {
			continue
		}
		if len(tr.Instances) != 2 {
			t.Fatalf("trial %d: figures of %d instances, want 2", tr.Number, len(tr.Instances))
		}
		want := 0.0
		for _, f := range tr.Instances {
			want += f.TimeNS * f.Launches
		}
		if tr.TimeNS != want {
			t.Errorf("trial %d: time %.1f, want the launches' total %.1f (%+v)", tr.Number, tr.TimeNS, want, tr.Instances)
		}
	}
	var sum Summary
	readJSON(t, filepath.Join(out, SummaryFile), &sum)
	if !strings.Contains(sum.Folding, "statistics: none") || !strings.Contains(sum.Folding, "no argument") {
		t.Errorf("summary folding %q, want it to say there are no statistics and nothing is folded", sum.Folding)
	}
	var tuned map[string]TunedKernel
	readJSON(t, filepath.Join(out, MnemeTunedFile), &tuned)
	tk := tuned["_Z6vecaddPfPKfif"]
	// The entry names the GPU it was tuned on (the runtime warns when it
	// runs on another), not the kernel.
	if tk.GPU != "test GPU" {
		t.Errorf("tuned entry's GPU %q, want the workers' %q", tk.GPU, "test GPU")
	}
	// Ten small launches for one large: 128-thread blocks win overall.
	if tk.Config.Block.X != 128 || len(tk.Instances) != 2 || tk.Statistics != StatisticsNone {
		t.Fatalf("tuned entry: block %s, %d instances, statistics %q", tk.Config.Block, len(tk.Instances), tk.Statistics)
	}
	if tk.Instances[0].Instance != small || tk.Instances[0].Launches != 10 || tk.Instances[1].Instance != large || tk.Instances[1].Launches != 1 {
		t.Errorf("tuned instances: %+v", tk.Instances)
	}
	// The large launches run best with 512: one class per shape.
	if len(tk.Classes) != 2 {
		t.Fatalf("classes: %+v", tk.Classes)
	}
	for _, c := range tk.Classes {
		wantBlock, wantGrid := uint32(128), uint32(8)
		if c.Grid.X == 16 {
			wantBlock = 512
		}
		if c.Config.Block.X != wantBlock || c.Config.Grid.X != wantGrid || c.Speedup <= 1 || c.Block.X != 256 {
			t.Errorf("class grid %s block %s: config block %s grid %s, speedup %.2f; want block %d grid %d", c.Grid, c.Block, c.Config.Block, c.Config.Grid, c.Speedup, wantBlock, wantGrid)
		}
	}
}

func TestRunInstancesStatisticsWeighAndFold(t *testing.T) {
	dbDir, _, large := instancesDB(t)
	io := instancesOptions(t, dbDir)
	io.Options.Preset = "standard"
	io.Stats = func(string, *db.Kernel) (*KernelStats, error) {
		return &KernelStats{Launches: 1010,
			Shapes: []ShapeStats{
				{Grid: mneme.Dim3{X: 4, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 10},
				{Grid: mneme.Dim3{X: 16, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 1000}},
			Args: []ArgStats{{Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Distinct: 40, Capped: true}}}, nil
	}
	if err := RunInstances(context.Background(), io); err != nil {
		t.Fatalf("%v\n%s", err, io.Stderr)
	}
	out := io.Options.Output
	trials, _, _ := ReadTrials(filepath.Join(out, TrialsFile))
	folded := false
	for _, tr := range trials {
		if tr.Config.Specialize {
			folded = true
			if len(tr.Config.SpecializeArgs) != 1 || tr.Config.SpecializeArgs[0] != 2 {
				t.Errorf("trial %d folds %v, want only the invariant argument 2", tr.Number, tr.Config.SpecializeArgs)
			}
		}
	}
	if !folded {
		t.Error("no trial folded the invariant argument")
	}
	var tuned map[string]TunedKernel
	readJSON(t, filepath.Join(out, MnemeTunedFile), &tuned)
	tk := tuned["_Z6vecaddPfPKfif"]
	// A thousand large launches for ten small: 512-thread blocks win.
	if tk.Config.Block.X != 512 || tk.Statistics != StatisticsRun || tk.Instances[0].Instance != large || tk.Instances[0].Launches != 1000 {
		t.Errorf("tuned entry: block %s, statistics %q, instances %+v", tk.Config.Block, tk.Statistics, tk.Instances)
	}
	if tk.Config.Specialize && (len(tk.Folded) != 1 || tk.Folded[0].Arg != 2 || !tk.Folded[0].Invariant || len(tk.Folded[0].Values) != 1) {
		t.Errorf("folded: %+v", tk.Folded)
	}
}

func TestRunInstancesOneFailureFailsTheTrial(t *testing.T) {
	dbDir, _, _ := instancesDB(t)
	io := instancesOptions(t, dbDir, "TESTWORKER_LARGE_FAILS_BLOCK=128")
	if err := RunInstances(context.Background(), io); err != nil {
		t.Fatalf("%v\n%s", err, io.Stderr)
	}
	trials, _, _ := ReadTrials(filepath.Join(io.Options.Output, TrialsFile))
	saw := false
	for _, tr := range trials {
		if tr.Config.Block.X != 128 {
			continue
		}
		saw = true
		if tr.Status != mneme.StatusRuntimeError || !strings.Contains(tr.Error, "instance ") || len(tr.Instances) != 2 || tr.Instances[0].Status != mneme.StatusVerified {
			t.Errorf("trial %d with block 128: %s %q, figures %+v; want runtime_error from the large instance alone", tr.Number, tr.Status, tr.Error, tr.Instances)
		}
	}
	if !saw {
		t.Error("no trial ran block 128")
	}
	var tuned map[string]TunedKernel
	readJSON(t, filepath.Join(io.Options.Output, MnemeTunedFile), &tuned)
	if b := tuned["_Z6vecaddPfPKfif"].Config.Block.X; b == 128 {
		t.Errorf("the tuned block is %d, which fails on the large instance", b)
	}
}

func TestRunInstancesSelection(t *testing.T) {
	dbDir, small, large := instancesDB(t)
	for _, tc := range []struct {
		kernel string
		ids    []string
		errSub string
	}{
		{"", nil, "--kernel or -rid"},
		{"_Z6vecaddPfPKfif", []string{small}, "--kernel or -rid"},
		{"nosuchkernel", nil, `--kernel "nosuchkernel"`},
		{"", []string{small, "ffff"}, "-rid ffff"},
	} {
		io := instancesOptions(t, dbDir)
		io.Kernel, io.Instances = tc.kernel, tc.ids
		err := RunInstances(context.Background(), io)
		if err == nil || !strings.Contains(err.Error(), tc.errSub) || !errors.As(err, new(*mneme.InputError)) {
			t.Errorf("kernel %q ids %v: %v, want a bad-input error naming %q", tc.kernel, tc.ids, err, tc.errSub)
		}
	}
	// Two ids select the two instances; one id is the single-instance run.
	io := instancesOptions(t, dbDir)
	io.Kernel, io.Instances, io.DryRun = "", []string{large, small}, true
	if err := RunInstances(context.Background(), io); err != nil {
		t.Fatal(err)
	}
	if s := io.Stdout.(interface{ String() string }).String(); !strings.Contains(s, "instances: 2") {
		t.Errorf("dry run across two ids:\n%s", s)
	}
	io = instancesOptions(t, dbDir)
	io.Kernel, io.Instances, io.DryRun = "", []string{small}, true
	if err := RunInstances(context.Background(), io); err != nil {
		t.Fatal(err)
	}
	if s := io.Stdout.(interface{ String() string }).String(); strings.Contains(s, "instances:") || !strings.Contains(s, small) {
		t.Errorf("dry run of one id:\n%s", s)
	}
}

// TestRunInstancesFoldsFewValuesAllRecorded: the argument a takes two values
// over the run and both instances tuned on hold one each, so it folds, one
// variant per instance.
func TestRunInstancesFoldsFewValuesAllRecorded(t *testing.T) {
	dbDir, _, _ := instancesDB(t)
	io := instancesOptions(t, dbDir)
	io.Options.Preset = "standard"
	io.Stats = func(string, *db.Kernel) (*KernelStats, error) {
		return &KernelStats{Launches: 11, Args: []ArgStats{{Arg: 2, Invariant: true, Distinct: 1}, {Arg: 3, Distinct: 2}}}, nil
	}
	if err := RunInstances(context.Background(), io); err != nil {
		t.Fatalf("%v\n%s", err, io.Stderr)
	}
	trials, _, _ := ReadTrials(filepath.Join(io.Options.Output, TrialsFile))
	folded := false
	for _, tr := range trials {
		if tr.Config.Specialize {
			folded = true
			if len(tr.Config.SpecializeArgs) != 2 || tr.Config.SpecializeArgs[0] != 2 || tr.Config.SpecializeArgs[1] != 3 {
				t.Errorf("trial %d folds %v, want 2 and 3", tr.Number, tr.Config.SpecializeArgs)
			}
		}
	}
	if !folded {
		t.Error("no trial folded")
	}
	var sum Summary
	readJSON(t, filepath.Join(io.Options.Output, SummaryFile), &sum)
	if !strings.Contains(sum.Folding, "arguments [2 3] (2 variants)") {
		t.Errorf("summary folding %q", sum.Folding)
	}
}

// TestRunInstancesResumes stops a run across instances after three trials
// and resumes it: no configuration runs twice and every trial keeps its
// figures per instance.
func TestRunInstancesResumes(t *testing.T) {
	dbDir, _, _ := instancesDB(t)
	io := instancesOptions(t, dbDir)
	io.Options.Trials = 3
	if err := RunInstances(context.Background(), io); err != nil {
		t.Fatalf("%v\n%s", err, io.Stderr)
	}
	io.Options.Trials, io.Resume = 8, true
	if err := RunInstances(context.Background(), io); err != nil {
		t.Fatalf("resume: %v\n%s", err, io.Stderr)
	}
	trials, _, _ := ReadTrials(filepath.Join(io.Options.Output, TrialsFile))
	keys := map[string]bool{}
	for _, tr := range trials {
		if keys[tr.ConfigKey] {
			t.Errorf("trial %d repeats a configuration", tr.Number)
		}
		keys[tr.ConfigKey] = true
		if len(tr.Instances) != 2 {
			t.Errorf("trial %d: figures of %d instances", tr.Number, len(tr.Instances))
		}
	}
	if len(trials) != 8 {
		t.Errorf("%d trials after the resume, want 8", len(trials))
	}
}

// TestRunInstancesUncoveredShapesGetClasses: the shapes' best configurations
// agree (the test worker's time grows with the block alone), so without
// statistics one configuration serves all; when the statistics show a shape
// no instance has, every covered shape gets its class, so the uncovered one
// keeps the application's code, and the run says which shape that is.
func TestRunInstancesUncoveredShapesGetClasses(t *testing.T) {
	for _, uncovered := range []bool{false, true} {
		dbDir, _, _ := instancesDB(t)
		ro, _, stderr := runOptions(t)
		ro.Options.DB, ro.Options.Instance = dbDir, ""
		ro.AnalyzeGeometry = agnostic
		shapes := []ShapeStats{
			{Grid: mneme.Dim3{X: 4, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 10},
			{Grid: mneme.Dim3{X: 16, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 1}}
		if uncovered {
			shapes = append(shapes, ShapeStats{Grid: mneme.Dim3{X: 64, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Launches: 500})
		}
		ro.Stats = func(string, *db.Kernel) (*KernelStats, error) {
			return &KernelStats{Launches: 511, Shapes: shapes}, nil
		}
		io := InstancesOptions{RunOptions: ro, Kernel: "_Z6vecaddPfPKfif"}
		if err := RunInstances(context.Background(), io); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var tuned map[string]TunedKernel
		readJSON(t, filepath.Join(ro.Options.Output, MnemeTunedFile), &tuned)
		tk := tuned["_Z6vecaddPfPKfif"]
		if tk.Config.Block.X != 32 {
			t.Errorf("uncovered %v: tuned block %s, want 32", uncovered, tk.Config.Block)
		}
		if (len(tk.Classes) == 2) != uncovered || (!uncovered && len(tk.Classes) != 0) {
			t.Errorf("uncovered %v: %d classes", uncovered, len(tk.Classes))
		}
		note := "shapes without an instance, which keep the application's own code: grid 64,1,1 block 256,1,1 shared 0 (500 launches)"
		if strings.Contains(stderr.String(), note) != uncovered || !strings.Contains(stderr.String(), "the instances stand for 11 of the run's 511 launches") {
			t.Errorf("uncovered %v: the coverage is not said:\n%s", uncovered, stderr)
		}
	}
}
