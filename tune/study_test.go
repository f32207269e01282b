package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
)

// faultySpace mixes configurations that verify, crash, hang and fault.
func faultySpace() *Space {
	base := mneme.Baseline(mneme.Dim3{X: 8, Y: 1, Z: 1}, mneme.Dim3{X: 128, Y: 1, Z: 1}, 0)
	return &Space{Name: "faulty", Baseline: base,
		Params: []Param{IntRange("block_x", 32, 256, 32), Categorical("passes", "default<O3>", "crash", "hang", "fault", "default<O2>")},
		Derive: func(pt Point) (mneme.Config, error) {
			c := base
			c.Block.X = uint32(pt["block_x"].(int))
			c.Passes = pt["passes"].(string)
			return c, nil
		}}
}

func studyOptions(dir string) Options {
	return Options{DB: "testdb", Instance: "abc", Sampler: "exhaustive", Preset: "custom", Workers: 2, Iterations: 3,
		Metric: "median", Objective: "speedup", Seed: 1, TrialTimeout: "700ms", Output: dir}
}

func runStudy(t *testing.T, opts Options, res *Results, prior []Trial, stopAfter int) *Study {
	t.Helper()
	sp := faultySpace()
	sampler, err := NewSampler(opts.Sampler, sp, opts.Seed)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newTestExecutor(t)
	e.WorkersPerGPU = opts.Workers
	e.TrialTimeout = 700 * time.Millisecond
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	st := &Study{Space: sp, Sampler: sampler, Exec: e, Results: res, Opts: opts, Prior: prior}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if stopAfter > 0 {
		st.Progress = func(p Progress) {
			if p.Done >= stopAfter {
				cancel()
			}
		}
	}
	if _, err := st.RunBaseline(ctx); err != nil {
		t.Fatal(err)
	}
	err = st.Run(ctx)
	if stopAfter == 0 && err != nil {
		t.Fatal(err)
	}
	if stopAfter == 0 {
		if _, err := st.Finish("_Z4testv", "sh", "test GPU", 40, len(prior)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestStudyEveryConfigurationOneTrialAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits seconds on trial timeouts (the sampler pass of scripts/mutate.sh runs -short)")
	}
	t.Parallel() // waits on timeouts, not the CPU
	dir := t.TempDir()
	opts := studyOptions(dir)
	res, err := CreateResults(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Interrupt after 12 trials, as a kill would.
	runStudy(t, opts, res, nil, 12)
	res.Close()
	path := filepath.Join(dir, TrialsFile)
	// Tear the last line the way a crash in the middle of a write does.
	data, _ := os.ReadFile(path)
	torn := append(data, []byte(`{"number":99,"params":{"block_x":32,`)...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	before, _, err := ReadTrials(path)
	if err != nil || len(before) < 12 {
		t.Fatalf("read back %d trials (%v)", len(before), err)
	}
	// Changed key options are refused, naming them.
	bad := opts
	bad.Seed, bad.Metric = 2, "min"
	if _, _, err := ResumeResults(dir, bad); err == nil || !strings.Contains(err.Error(), "seed: 1 -> 2") || !strings.Contains(err.Error(), "metric: median -> min") {
		t.Fatalf("resume with changed options: %v", err)
	}
	res2, prior, err := ResumeResults(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(prior) != len(before) {
		t.Fatalf("resume read %d trials, want %d", len(prior), len(before))
	}
	st := runStudy(t, opts, res2, prior, 0)
	res2.Close()
	all, _, err := ReadTrials(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 40 || len(st.Trials()) != 40 {
		t.Fatalf("%d trials on disk, %d in the study; the space has 40 configurations", len(all), len(st.Trials()))
	}
	keys := map[string]bool{}
	for _, tr := range all {
		if keys[tr.ConfigKey] {
			t.Fatalf("configuration %s has two trials", tr.ConfigKey)
		}
		keys[tr.ConfigKey] = true
		want := map[string]mneme.Status{"default<O3>": "verified", "default<O2>": "verified", "crash": "crashed", "hang": "timeout", "fault": "runtime_error"}[tr.Config.Passes]
		if tr.Status != want {
			t.Errorf("trial %d (%s): status %s, want %s", tr.Number, tr.Config.Passes, tr.Status, want)
		}
	}
	// The test worker times iteration i as block.x+i ns: medians 33 (block 32) and 129 (baseline).
	var best struct{ Best, Baseline Trial }
	b, _ := os.ReadFile(filepath.Join(dir, BestFile))
	if err := json.Unmarshal(b, &best); err != nil {
		t.Fatal(err)
	}
	if best.Best.Config.Block.X != 32 || math.Abs(best.Best.Speedup-129.0/33) > 1e-12 || best.Baseline.TimeNS != 129 {
		t.Fatalf("best: block %d speedup %v baseline %v", best.Best.Config.Block.X, best.Best.Speedup, best.Baseline.TimeNS)
	}
	var proteus map[string]ProteusKernel
	b, _ = os.ReadFile(filepath.Join(dir, ProteusFile))
	if err := json.Unmarshal(b, &proteus); err != nil || proteus["_Z4testv"].Pipeline == "" {
		t.Fatalf("proteus file: %s (%v)", b, err)
	}
	var tuned map[string]TunedKernel
	b, _ = os.ReadFile(filepath.Join(dir, MnemeTunedFile))
	if err := json.Unmarshal(b, &tuned); err != nil || tuned["_Z4testv"].Config.Block.X != 32 || tuned["_Z4testv"].Instance != "abc" {
		t.Fatalf("mneme tuned file: %s (%v)", b, err)
	}
	// The recorded launch tuning started from; without a geometry decision
	// the tuned block is not to be applied.
	if tk := tuned["_Z4testv"]; tk.RecordedBlock != (mneme.Dim3{X: 128, Y: 1, Z: 1}) || tk.RecordedGrid != (mneme.Dim3{X: 8, Y: 1, Z: 1}) || tk.LaunchSearched {
		t.Fatalf("mneme tuned file: recorded block %s grid %s, launch_searched %v", tk.RecordedBlock, tk.RecordedGrid, tk.LaunchSearched)
	}
	var sum Summary
	b, _ = os.ReadFile(filepath.Join(dir, SummaryFile))
	if err := json.Unmarshal(b, &sum); err != nil || sum.Trials != 40 || sum.Statuses["timeout"] != 8 || sum.Statuses["crashed"] != 8 {
		t.Fatalf("summary: %s (%v)", b, err)
	}
}

func TestReadTrialsRejectsCorruptMiddleLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), TrialsFile)
	os.WriteFile(path, []byte("{\"number\":0}\nnot json\n{\"number\":2}\n"), 0o644)
	if _, _, err := ReadTrials(path); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Fatalf("corrupt middle line: %v", err)
	}
	os.WriteFile(path, []byte("{\"number\":0}\n{\"number\":1}\n{\"numb"), 0o644)
	tr, good, err := ReadTrials(path)
	if err != nil || len(tr) != 2 || good != int64(len("{\"number\":0}\n{\"number\":1}\n")) {
		t.Fatalf("torn last line: %d trials, good %d, %v", len(tr), good, err)
	}
	// A complete last trial without its newline is kept, not dropped.
	whole := "{\"number\":0}\n{\"number\":1}\n{\"number\":2}"
	os.WriteFile(path, []byte(whole), 0o644)
	tr, good, err = ReadTrials(path)
	if err != nil || len(tr) != 3 || tr[2].Number != 2 || good != int64(len(whole)) {
		t.Fatalf("complete last line without newline: %d trials, good %d, %v", len(tr), good, err)
	}
}

// TestResumeKeepsACompleteUnterminatedLastTrial: resume keeps the trial and
// ends its line, so the next trial appended is a line of its own.
func TestResumeKeepsACompleteUnterminatedLastTrial(t *testing.T) {
	dir := t.TempDir()
	opts := studyOptions(dir)
	res, err := CreateResults(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := res.AppendTrial(Trial{Number: i}); err != nil {
			t.Fatal(err)
		}
	}
	res.Close()
	path := filepath.Join(dir, TrialsFile)
	data, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.TrimSuffix(data, []byte("\n")), 0o644)
	res, prior, err := ResumeResults(dir, opts)
	if err != nil || len(prior) != 2 {
		t.Fatalf("resume: %d trials, %v", len(prior), err)
	}
	if err := res.AppendTrial(Trial{Number: 2}); err != nil {
		t.Fatal(err)
	}
	res.Close()
	all, _, err := ReadTrials(path)
	if err != nil || len(all) != 3 || all[1].Number != 1 || all[2].Number != 2 {
		t.Fatalf("after resume: %+v, %v", all, err)
	}
}

func TestCreateResultsRefusesExistingRun(t *testing.T) {
	dir := t.TempDir()
	r, err := CreateResults(dir, studyOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := CreateResults(dir, studyOptions(dir)); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("second create: %v", err)
	}
}

func FuzzReadTrials(f *testing.F) {
	f.Add([]byte("{\"number\":0,\"status\":\"verified\"}\n{\"num"))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), TrialsFile)
		os.WriteFile(path, data, 0o644)
		trials, good, err := ReadTrials(path)
		if err == nil && (good < 0 || good > int64(len(data))) {
			t.Fatalf("good prefix %d of %d bytes", good, len(data))
		}
		_ = trials
	})
}

func TestProteusEntry(t *testing.T) {
	c := mneme.Config{Passes: "default<Os>", CodegenOpt: 2, Specialize: true, SpecializeDims: true, SetLaunchBounds: true, MaxThreads: 256, MinBlocksPerSM: 2}
	p := ProteusEntry(c)
	if p.OptLevel != "s" || p.CodeGenOptLevel != 2 || !p.SpecializeArgs || !p.SpecializeDimsRange || !p.LaunchBounds || p.TunedMaxThreads != 256 || p.MinBlocksPerSM != 2 || p.Pipeline != "default<Os>" {
		t.Fatalf("%+v", p)
	}
	if q := ProteusEntry(mneme.Config{Passes: "instcombine"}); q.OptLevel != "3" || q.TunedMaxThreads != -1 {
		t.Fatalf("%+v", q)
	}
}
