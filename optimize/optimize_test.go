package optimize

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/measure"
	"github.com/mneme-gpu/mneme/report"
	"github.com/mneme-gpu/mneme/tune"
)

// The fake application has three kernels: "big" (60% of the GPU time) whose
// tuned code is faster in the application, "mid" (35%) whose tuned code
// wins in replay but is slower in the application, and "tiny" (5%) below
// the share threshold.
var shares = map[string]uint64{"big": 600, "mid": 350, "tiny": 50}

type fakeTools struct {
	irVersion map[string]string // a kernel's IR, to make a code change
	records   int
	tuned     []TuneJob
	budgets   map[string]time.Duration
	cancelIn  string // cancel the parent context while tuning this kernel
	cancel    context.CancelFunc
}

func (f *fakeTools) Record(_ context.Context, dir string, app []string) error {
	f.records++
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	stats := &db.LaunchStats{FormatVersion: db.LaunchStatsVersion, Complete: true,
		Limits: db.StatsLimits{MaxShapes: 8, MaxArgValues: 16, MaxArgBytes: 8, TimedFirst: 2, TimedEvery: 1}}
	for _, name := range []string{"big", "mid", "tiny"} {
		sh := "sh" + name
		grid, block := mneme.Dim3{X: 64, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}
		stats.Kernels = append(stats.Kernels, db.KernelStats{KernelName: name, StaticHash: sh, Launches: 10, TimedLaunches: 10,
			TimedNs: shares[name] * 10, Shapes: []db.ShapeStats{{GridDims: grid, BlockDims: block, Launches: 10, TimedLaunches: 10, TimedNs: shares[name] * 10}}})
		ir := "ir of " + name + f.irVersion[name]
		if err := os.WriteFile(filepath.Join(dir, "RecordedIR_"+sh+".bc"), []byte(ir), 0o644); err != nil {
			return err
		}
		dh := db.DynamicHash(grid, block, 0, nil)
		k := &db.Kernel{StaticHash: sh, VAddr: "0x7f0000000000", KernelName: name, Modules: []string{"RecordedIR_" + sh + ".bc"},
			ArgNames: []string{}, Specializations: []bool{}, ArgSizes: []uint64{}, ArgKinds: []mneme.ArgKind{}, FormatVersion: db.FormatVersion,
			Device:    db.DeviceInfo{Name: "H100", DriverVersion: 13000},
			Instances: map[string]*db.Instance{dh: {DynamicHash: dh, Prologue: "p", Epilogue: "e", GridDims: grid, BlockDims: block, Args: []string{}, Occurrences: 10}}}
		if err := db.WriteKernel(dir, k); err != nil {
			return err
		}
	}
	stats.Finish()
	return db.WriteLaunchStats(dir, stats)
}

func (f *fakeTools) Tune(ctx context.Context, job TuneJob) error {
	f.tuned = append(f.tuned, job)
	if dl, ok := ctx.Deadline(); ok {
		f.budgets[job.Kernel] = time.Until(dl)
	}
	if job.Kernel == f.cancelIn {
		f.cancel()
		return ctx.Err()
	}
	if err := os.MkdirAll(job.Output, 0o755); err != nil {
		return err
	}
	e := map[string]any{"config": map[string]any{"passes": "default<O3>"}, "speedup": 1.5,
		"baseline_time_ns": 1000, "instance": job.Instance}
	if job.Kernel == "big" {
		// Two launch shapes whose best configurations differ.
		e["classes"] = []map[string]any{
			{"grid": map[string]int{"x": 64, "y": 1, "z": 1}, "block": map[string]int{"x": 256, "y": 1, "z": 1}, "shared_mem": 0, "config": map[string]any{"passes": "default<O2>"}},
			{"grid": map[string]int{"x": 4096, "y": 1, "z": 1}, "block": map[string]int{"x": 256, "y": 1, "z": 1}, "shared_mem": 0, "config": map[string]any{"passes": "default<O3>"}},
		}
	}
	entry := map[string]any{job.Kernel: e}
	data, _ := json.Marshal(entry)
	if err := os.WriteFile(filepath.Join(job.Output, tune.MnemeTunedFile), data, 0o644); err != nil {
		return err
	}
	trials := `{"number":0,"status":"verified","time_ns":1000}` + "\n" + `{"number":1,"status":"verified","time_ns":660}` + "\n"
	if job.Kernel == "mid" {
		// Every folded trial failed verification, none of the others.
		for i := 2; i < 8; i++ {
			st, ns := "verified", 900
			if i%2 == 0 {
				st, ns = "failed_verification", 0
			}
			trials += fmt.Sprintf(`{"number":%d,"status":%q,"time_ns":%d,"params":{"specialize":%v,"block_x":%d}}`+"\n", i, st, ns, i%2 == 0, 64*(1+i%3))
		}
	}
	return os.WriteFile(filepath.Join(job.Output, tune.TrialsFile), []byte(trials), 0o644)
}

// fakeRunner times each kernel per launch: big 2x faster tuned, mid slower.
type fakeRunner struct{ runs int }

func (r *fakeRunner) Run(_ context.Context, env []string) (measure.Outcome, error) {
	r.runs++
	file := strings.TrimPrefix(env[0], measure.EnvTunedKernels+"=")
	tuned := map[string]bool{}
	if file != "" {
		e, err := measure.ReadTunedEntries(file)
		if err != nil {
			return measure.Outcome{}, err
		}
		for k := range e {
			tuned[k] = true
		}
	}
	o := measure.Outcome{Seconds: 2, Kernels: map[string]measure.KernelTime{}}
	for k, ns := range shares {
		per := float64(ns)
		switch {
		case tuned[k] && k == "big":
			per /= 2
		case tuned[k] && k == "mid":
			per *= 1.2
		}
		o.Kernels[k] = measure.KernelTime{Launches: 10, TimedLaunches: 10, TimedNS: 10 * per}
		if tuned[k] && k == "big" {
			o.Seconds -= 1
		}
	}
	return o, nil
}

func options(dir string) Options {
	return Options{App: []string{"./app", "--n", "3"}, Output: dir, Budget: 100 * time.Second, GPUs: "0", MinShare: 0.10, Runs: 3}
}

func newTools() *fakeTools {
	return &fakeTools{irVersion: map[string]string{}, budgets: map[string]time.Duration{}}
}

func kernelOf(t *testing.T, r *report.Report, name string) report.Kernel {
	t.Helper()
	for _, k := range r.Kernels {
		if k.Name == name {
			return k
		}
	}
	t.Fatalf("report has no kernel %s", name)
	return report.Kernel{}
}

func TestOptimizeTunesWhatMattersAndKeepsWhatHelps(t *testing.T) {
	dir := t.TempDir()
	tools := newTools()
	rep, err := Run(context.Background(), tools, &fakeRunner{}, options(dir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range tools.tuned {
		names = append(names, j.Kernel)
	}
	if !slices.Equal(names, []string{"big", "mid"}) {
		t.Errorf("tuned %v, want big then mid (tiny is below 10%%)", names)
	}
	// The budget is split by share among the chosen: 600:350.
	if b := tools.budgets["big"]; b < 62*time.Second || b > 64*time.Second {
		t.Errorf("big's budget %v, want ~63s of 100s", b)
	}
	if b := tools.budgets["mid"]; b < 36*time.Second || b > 37*time.Second {
		t.Errorf("mid's budget %v, want ~37s", b)
	}
	kept, err := measure.ReadTunedEntries(filepath.Join(dir, TunedFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := kept["big"]; !ok || len(kept) != 1 {
		t.Errorf("tuned file keeps %v, want only big", kept)
	}
	if k := kernelOf(t, rep, "mid"); k.Status != report.StatusDropped || !strings.Contains(k.Reason, "slower in the application") {
		t.Errorf("mid: %s %q", k.Status, k.Reason)
	}
	if k := kernelOf(t, rep, "tiny"); k.Status != report.StatusUntuned || !strings.Contains(k.Reason, "below 10.0%") {
		t.Errorf("tiny: %s %q", k.Status, k.Reason)
	}
	big := kernelOf(t, rep, "big")
	if big.Status != report.StatusKept || big.MeasuredSpeedup != 2 || big.PredictedSpeedup != 1.5 || len(big.Trials) != 2 {
		t.Errorf("big: %+v", big)
	}
	if len(big.Classes) != 2 || big.Classes[1].Shape != "grid 4096,1,1 block 256,1,1 shared 0" || big.Classes[1].Config["passes"] != "default<O3>" {
		t.Errorf("big's configurations per launch shape: %+v", big.Classes)
	}
	if mid := kernelOf(t, rep, "mid"); len(mid.Classes) != 1 || !strings.HasPrefix(mid.Classes[0].Shape, "every launch") {
		t.Errorf("mid's one configuration: %+v", mid.Classes)
	}
	// The failed trials' shared value is named, per kernel and in a note;
	// big's trials all verified.
	const pattern = "every trial with specialize=true failed (3 of 3: failed_verification 3); with other values 0 of 3 failed"
	if mid := kernelOf(t, rep, "mid"); mid.FailedTrials != pattern || mid.Trials[2].Params["specialize"] != true {
		t.Errorf("mid's failed trials: %q, trial 2's params %v", mid.FailedTrials, mid.Trials[2].Params)
	}
	if notes := strings.Join(rep.Notes, "\n"); !strings.Contains(notes, "failed trials: "+pattern) || big.FailedTrials != "" {
		t.Errorf("notes %q; big's failed trials %q", notes, big.FailedTrials)
	}
	// Predicted: 2 s untuned less big's 6 µs of GPU time * (1 - 1/1.5).
	if p := rep.EndToEnd.PredictedTunedSeconds; p < 1.99 || p > 2 {
		t.Errorf("predicted %v", p)
	}
	for _, f := range []string{report.FileHTML, report.FileJSON, ProteusFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}

func TestAnOptunaStorageNamesOneStudyPerKernelResult(t *testing.T) {
	tools := newTools()
	o := options(t.TempDir())
	o.OptunaStorage = "sqlite:///studies.db"
	if _, err := Run(context.Background(), tools, &fakeRunner{}, o); err != nil {
		t.Fatal(err)
	}
	if len(tools.tuned) != 2 || tools.tuned[0].Study == "" || tools.tuned[0].Study == tools.tuned[1].Study {
		t.Errorf("studies %+v: want one named study per kernel", tools.tuned)
	}
	tools = newTools()
	if _, err := Run(context.Background(), tools, &fakeRunner{}, options(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	if tools.tuned[0].Study != "" {
		t.Error("a study was named without a storage")
	}
}

func TestARerunReusesResultsAndRetunesOnlyTheChangedKernel(t *testing.T) {
	dir := t.TempDir()
	tools := newTools()
	if _, err := Run(context.Background(), tools, &fakeRunner{}, options(dir)); err != nil {
		t.Fatal(err)
	}
	// The same command again: nothing is recorded or tuned again.
	tools.tuned = nil
	rep, err := Run(context.Background(), tools, &fakeRunner{}, options(dir))
	if err != nil {
		t.Fatal(err)
	}
	if tools.records != 1 || len(tools.tuned) != 0 {
		t.Errorf("second run recorded %d times in all and tuned %d kernels, want 1 and 0", tools.records, len(tools.tuned))
	}
	if !kernelOf(t, rep, "big").Reused || !strings.Contains(strings.Join(rep.Notes, " "), "2 kernel(s) reused") {
		t.Errorf("reuse not reported: %v", rep.Notes)
	}
	// A code change: mid's IR differs. A new command line records again;
	// only mid is tuned again.
	tools.irVersion["mid"] = " v2"
	o := options(dir)
	o.App = append(o.App, "--rebuilt")
	tools.tuned = nil
	rep, err = Run(context.Background(), tools, &fakeRunner{}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.tuned) != 1 || tools.tuned[0].Kernel != "mid" {
		t.Errorf("after mid's IR changed, tuned %v, want mid alone", tools.tuned)
	}
	if kernelOf(t, rep, "mid").Reused || !kernelOf(t, rep, "big").Reused {
		t.Error("reuse flags wrong after the change")
	}
}

func TestResultKeyChangesWithEachInputAlone(t *testing.T) {
	dir := t.TempDir()
	tools := newTools()
	if err := tools.Record(context.Background(), dir, nil); err != nil {
		t.Fatal(err)
	}
	o := Options{DB: dir, GPU: "H100", Driver: "13.0", Toolchain: "mneme 1"}
	ks, _, err := rank(o)
	if err != nil {
		t.Fatal(err)
	}
	k := ks[0]
	base := resultKey(o, k)
	if resultKey(o, k) != base {
		t.Fatal("the key is not stable")
	}
	edits := map[string]func(*Options, *kernel){
		"gpu":       func(o *Options, _ *kernel) { o.GPU = "H200" },
		"driver":    func(o *Options, _ *kernel) { o.Driver = "13.1" },
		"toolchain": func(o *Options, _ *kernel) { o.Toolchain = "mneme 2" },
		"shape":     func(_ *Options, k *kernel) { k.stats.Shapes[0].BlockDims.X = 128 },
		"args": func(_ *Options, k *kernel) {
			k.stats.Args = []db.ArgStats{{Index: 0, Invariant: true, Distinct: 1}}
		},
		"name":            func(_ *Options, k *kernel) { k.stats.KernelName = "other" },
		"tune conditions": func(o *Options, _ *kernel) { o.TuneConditions = "timer=events" },
		"ir": func(o *Options, k *kernel) {
			os.WriteFile(filepath.Join(o.DB, k.rec.Modules[0]), []byte("changed"), 0o644)
		},
	}
	for name, edit := range edits {
		o2 := o
		k2 := *k
		k2.stats.Shapes = slices.Clone(k.stats.Shapes)
		ir, _ := os.ReadFile(filepath.Join(dir, k.rec.Modules[0]))
		edit(&o2, &k2)
		if resultKey(o2, &k2) == base {
			t.Errorf("changing the %s alone kept the key", name)
		}
		os.WriteFile(filepath.Join(dir, k.rec.Modules[0]), ir, 0o644)
	}
}

func TestInterruptedTuningResumes(t *testing.T) {
	dir := t.TempDir()
	tools := newTools()
	ctx, cancel := context.WithCancel(context.Background())
	tools.cancelIn, tools.cancel = "mid", cancel
	if _, err := Run(ctx, tools, &fakeRunner{}, options(dir)); err == nil || !strings.Contains(err.Error(), "run the same command again to resume") {
		t.Fatalf("interrupted run: %v", err)
	}
	tools.cancelIn, tools.tuned = "", nil
	rep, err := Run(context.Background(), tools, &fakeRunner{}, options(dir))
	if err != nil {
		t.Fatal(err)
	}
	if tools.records != 1 {
		t.Errorf("recorded %d times, want once", tools.records)
	}
	if len(tools.tuned) != 1 || tools.tuned[0].Kernel != "mid" {
		t.Errorf("resumed run tuned %v, want mid alone (big finished before the interrupt)", tools.tuned)
	}
	if kernelOf(t, rep, "big").Status != report.StatusKept {
		t.Error("big lost its result across the interrupt")
	}
}

func TestBudgetTooSmallForAnythingStillReports(t *testing.T) {
	dir := t.TempDir()
	tools := newTools()
	o := options(dir)
	o.Budget = time.Second
	rep, err := Run(context.Background(), tools, &fakeRunner{}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.tuned) != 0 {
		t.Errorf("tuned %d kernels on a 1 s budget", len(tools.tuned))
	}
	if !strings.Contains(strings.Join(rep.Notes, " "), "too small for any kernel") {
		t.Errorf("no clear message for a budget too small: %v", rep.Notes)
	}
	if k := kernelOf(t, rep, "big"); !strings.Contains(k.Reason, "too small to tune") {
		t.Errorf("big: %q", k.Reason)
	}
	if len(rep.EndToEnd.UntunedSeconds) != 3 || !strings.Contains(fmt.Sprint(rep.Notes), "runs as it is") {
		t.Errorf("report of a run that tuned nothing: %+v", rep.EndToEnd)
	}
}

func TestTheReportNamesTheOutputFilterOnlyWhenOutputIsChecked(t *testing.T) {
	for _, check := range []bool{true, false} {
		o := options(t.TempDir())
		o.CheckOutput, o.OutputFilter = check, `^time =`
		rep, err := Run(context.Background(), newTools(), &fakeRunner{}, o)
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if check {
			want = `^time =`
		}
		if got := rep.EndToEnd.OutputFilter; got != want {
			t.Errorf("check-output %v: the report's output filter is %q, want %q", check, got, want)
		}
	}
}

// The confirmation's extra pairs get what tuning left of the budget, within
// two minutes; none when tuning used it all.
func TestConfirmForIsWhatTheBudgetLeaves(t *testing.T) {
	for _, tc := range []struct{ budget, used, want time.Duration }{
		{time.Minute, 20 * time.Second, 40 * time.Second},
		{time.Minute, 2 * time.Minute, time.Nanosecond},
		{time.Hour, time.Minute, 2 * time.Minute},
	} {
		if got := confirmFor(tc.budget, tc.used); got != tc.want {
			t.Errorf("budget %v, used %v: %v, want %v", tc.budget, tc.used, got, tc.want)
		}
	}
}
