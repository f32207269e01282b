package tune

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// writeRunDB writes a database of one vector-add instance (1000 elements,
// 256-thread blocks, n and a scalar) with the real writers, and returns its
// directory and the instance's id.
func writeRunDB(t *testing.T, edit ...func(dir string, k *db.Kernel)) (dir, id string) {
	t.Helper()
	dir = t.TempDir()
	const arena = 0x153940000000
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	k := &db.Kernel{KernelName: "_Z6vecaddPfPKfif", DemangledName: "vecadd(float*, float const*, int, float)",
		ArgNames: []string{"y", "x", "n", "a"}, Specializations: []bool{false, false, true, true},
		ArgSizes: []uint64{8, 8, 4, 4}, ArgKinds: []mneme.ArgKind{mneme.ArgPtr, mneme.ArgPtr, mneme.ArgI32, mneme.ArgF32},
		Device: db.DeviceInfo{Name: "test GPU", Arch: "sm_90", SMCount: 4}, FormatVersion: db.FormatVersion}
	ir := []byte("placeholder bitcode")
	k.StaticHash = db.StaticHash(k.KernelName, ir)
	k.VAddr, k.VASize = db.FormatVAddr(arena), 1<<30
	k.Modules = []string{db.IRFileName(k.StaticHash)}
	if err := db.WriteFileAtomic(filepath.Join(dir, k.Modules[0]), ir); err != nil {
		t.Fatal(err)
	}
	grid, block := mneme.Dim3{X: 4, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}
	args := [][]byte{u64(arena), u64(arena + 4096), u32(1000), u32(0x40200000)}
	dh := db.DynamicHash(grid, block, 0, args)
	inst := &db.Instance{DynamicHash: dh, Prologue: db.PrologueFileName(k.StaticHash, dh), Epilogue: db.EpilogueFileName(k.StaticHash, dh),
		GridDims: grid, BlockDims: block, Args: db.EncodeArgs(args), Occurrences: 1}
	snap := &db.Snapshot{Blobs: []db.Blob{{Addr: arena, Size: 8192, Data: make([]byte, 8192)}}, Args: args}
	for _, name := range []string{inst.Prologue, inst.Epilogue} {
		if _, err := db.WriteSnapshot(filepath.Join(dir, name), snap, db.SnapshotOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k.Instances = map[string]*db.Instance{dh: inst}
	for _, e := range edit {
		e(dir, k)
	}
	if err := db.WriteKernel(dir, k); err != nil {
		t.Fatal(err)
	}
	return dir, k.StaticHash + "/" + dh
}

// runOptions tune the test database's instance with the quick preset on the
// test worker.
func runOptions(t *testing.T, env ...string) (RunOptions, *bytes.Buffer, *bytes.Buffer) {
	dbDir, id := writeRunDB(t)
	var stdout, stderr bytes.Buffer
	return RunOptions{
		Options: Options{DB: dbDir, Instance: id, Sampler: "exhaustive", Preset: "quick", Workers: 1, GPUs: []int{0},
			Iterations: 3, Warmup: 1, Metric: "median", Objective: "speedup", Output: filepath.Join(t.TempDir(), "out")},
		Factory: ExecWorkerFactory{Path: testWorkerBin, Env: env},
		Stdout:  &stdout, Stderr: &stderr,
	}, &stdout, &stderr
}

func TestRunPrintsSpaceAndDryRunWithoutWorkers(t *testing.T) {
	ro, stdout, _ := runOptions(t)
	ro.Factory, ro.PrintSpace = nil, true
	if err := Run(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	var d Describe
	if err := json.Unmarshal(stdout.Bytes(), &d); err != nil || d.Name != "quick" || !d.Finite || d.Feasible == 0 {
		t.Fatalf("printed space %+v (%v):\n%s", d, err, stdout)
	}
	stdout.Reset()
	ro.PrintSpace, ro.DryRun = false, true
	if err := Run(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"space:     quick", "sampler:   exhaustive", "first configurations:"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(ro.Options.Output); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run created the results directory (%v)", err)
	}
}

func TestRunTunesOnWorkersAndResumes(t *testing.T) {
	ro, stdout, stderr := runOptions(t)
	ro.Options.Trials = 4
	ro.Options.LaunchSafety = LaunchAggressive
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr.String(), "baseline: vecadd(float*, float const*, int, float) on test GPU:") {
		t.Errorf("no baseline line:\n%s", stderr)
	}
	if !strings.Contains(stdout.String(), "4 trials (0 resumed)") || !strings.Contains(stdout.String(), "rank") {
		t.Errorf("no table of the best configurations:\n%s", stdout)
	}
	for _, f := range []string{BestFile, SummaryFile, SearchSpaceFile, LogFile} {
		if _, err := os.Stat(filepath.Join(ro.Options.Output, f)); err != nil {
			t.Errorf("results: %v", err)
		}
	}
	// A second run in the same directory is refused unless it resumes.
	if err := Run(context.Background(), ro); !isInput(err) {
		t.Fatalf("a second run into the same directory: %v, want an InputError", err)
	}
	stdout.Reset()
	ro.Resume, ro.Options.Trials = true, 6
	if err := Run(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "6 trials (4 resumed)") {
		t.Errorf("the resumed run does not count the earlier trials:\n%s", stdout)
	}
	// Trial 0 is the baseline, once; the resumed run did not add another.
	trials, _, err := ReadTrials(filepath.Join(ro.Options.Output, TrialsFile))
	if err != nil || len(trials) != 6 {
		t.Fatalf("%d trials on disk (%v), want 6", len(trials), err)
	}
	numbers := map[int]bool{}
	for i, tr := range trials {
		if tr.IsBaseline() != (i == 0) || numbers[tr.Number] {
			t.Errorf("trial %d at line %d: baseline %v (want only trial 0), or its number repeats", tr.Number, i+1, tr.IsBaseline())
		}
		numbers[tr.Number] = true
	}
	if trials[0].Number != 0 || trials[0].Config.Block.X != 256 || trials[0].Config.Original {
		t.Errorf("trial 0 is %+v, want the recompiled recorded configuration", trials[0].Config)
	}
}

func TestRunWithoutGPUMatchesErrNoGPUAndAllowsRetry(t *testing.T) {
	ro, _, _ := runOptions(t, "TESTWORKER_FAIL_OPEN=1")
	err := Run(context.Background(), ro)
	if !errors.Is(err, mneme.ErrNoGPU) || !strings.HasPrefix(err.Error(), "tune needs a GPU") {
		t.Fatalf("Run: %v, want a no-GPU error", err)
	}
	if _, err := os.Stat(filepath.Join(ro.Options.Output, TrialsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed run left %s behind (%v)", TrialsFile, err)
	}
	if err := Run(context.Background(), ro); !errors.Is(err, mneme.ErrNoGPU) {
		t.Fatalf("the retry: %v, want the same no-GPU error", err)
	}
}

func isInput(err error) bool {
	var ie *mneme.InputError
	return errors.As(err, &ie)
}

func TestRunRejectsBadInput(t *testing.T) {
	for name, edit := range map[string]func(*RunOptions){
		"no database":      func(r *RunOptions) { r.Options.DB = "" },
		"missing database": func(r *RunOptions) { r.Options.DB += "/nonexistent" },
		"unknown instance": func(r *RunOptions) { r.Options.Instance = "0123abc" },
		"unknown preset":   func(r *RunOptions) { r.Options.Preset = "huge" },
		"unknown sampler":  func(r *RunOptions) { r.Options.Sampler = "annealing" },
		"bad trial limit":  func(r *RunOptions) { r.Options.TrialTimeout = "soon" },
	} {
		ro, _, _ := runOptions(t)
		edit(&ro)
		if err := Run(context.Background(), ro); !isInput(err) {
			t.Errorf("%s: %v, want an InputError", name, err)
		}
	}
}
