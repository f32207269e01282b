package tune

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/geometry"
)

// agnostic is an IR analysis that finds nothing tying the kernel to its block.
func agnostic(string, string) (geometry.Facts, error) {
	return geometry.Facts{ThreadIDDims: [3]bool{true}}, nil
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestParseLaunchSafety(t *testing.T) {
	for in, want := range map[string]string{"": LaunchSafe, "safe": LaunchSafe, "conservative": LaunchSafe, "Balanced": LaunchSafe, "aggressive": LaunchAggressive} {
		if got, err := ParseLaunchSafety(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseLaunchSafety("reckless"); err == nil || !strings.Contains(err.Error(), "--launch-safety") {
		t.Errorf("bad value: %v", err)
	}
}

func TestRunSafeKeepsTheLaunchOfADependentKernel(t *testing.T) {
	ro, stdout, stderr := runOptions(t)
	ro.Options.Preset = "standard"
	ro.AnalyzeGeometry = func(string, string) (geometry.Facts, error) {
		return geometry.Facts{NonCanonicalDimUses: []string{"ntid.x in lshr"}}, nil
	}
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var d Describe
	readJSON(t, filepath.Join(ro.Options.Output, SearchSpaceFile), &d)
	for _, p := range d.Params {
		if p.Name == ParamBlockX || p.Name == ParamBlockY {
			t.Errorf("the space of a dependent kernel under safe searches %s", p.Name)
		}
	}
	trials, _, _ := ReadTrials(filepath.Join(ro.Options.Output, TrialsFile))
	for _, tr := range trials {
		if tr.Config.Block.X != 256 || tr.Config.Grid.X != 4 {
			t.Errorf("trial %d launched grid %s block %s, want the recorded 4 and 256", tr.Number, tr.Config.Grid, tr.Config.Block)
		}
	}
	var sum Summary
	readJSON(t, filepath.Join(ro.Options.Output, SummaryFile), &sum)
	if !sum.GeometryDependent || sum.LaunchSearched || sum.LaunchSafety != LaunchSafe || !strings.Contains(sum.Geometry, "ntid.x in lshr") {
		t.Errorf("summary: %+v", sum)
	}
	if !strings.Contains(stdout.String(), "the recorded grid and block are kept") {
		t.Errorf("the printed result does not say the launch was kept:\n%s", stdout)
	}
}

func TestRunAggressiveSearchesBlocksOfADependentKernel(t *testing.T) {
	ro, _, stderr := runOptions(t)
	ro.Options.LaunchSafety = "aggressive"
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var sum Summary
	readJSON(t, filepath.Join(ro.Options.Output, SummaryFile), &sum)
	if !sum.GeometryDependent || !sum.LaunchSearched || sum.BestTrial < 1 {
		t.Errorf("summary: %+v", sum)
	}
	// Deployment must keep the application's block of a dependent kernel.
	var tuned map[string]TunedKernel
	readJSON(t, filepath.Join(ro.Options.Output, MnemeTunedFile), &tuned)
	for k, tk := range tuned {
		if tk.LaunchSearched || tk.RecordedBlock.X != 256 || tk.RecordedGrid.X != 4 {
			t.Errorf("tuned kernel %s of a dependent kernel: launch_searched %v, recorded block %s grid %s", k, tk.LaunchSearched, tk.RecordedBlock, tk.RecordedGrid)
		}
	}
}

func TestRunProbeDecidesForAnAgnosticKernel(t *testing.T) {
	// The IR says agnostic, but the kernel verifies with its own block only:
	// the probe catches it and the launch is kept.
	ro, _, stderr := runOptions(t, "TESTWORKER_ONLY_BLOCK=256")
	ro.AnalyzeGeometry = agnostic
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var geo GeometryReport
	readJSON(t, filepath.Join(ro.Options.Output, GeometryFile), &geo)
	if !geo.Probed || !geo.Dependent || geo.ProbeStatus != mneme.StatusFailedVerification || geo.LaunchSearched {
		t.Errorf("geometry report after a failed probe: %+v", geo)
	}
	trials, _, _ := ReadTrials(filepath.Join(ro.Options.Output, TrialsFile))
	for _, tr := range trials {
		if tr.Config.Block.X != 256 || tr.Status != mneme.StatusVerified {
			t.Errorf("trial %d: block %s, %s", tr.Number, tr.Config.Block, tr.Status)
		}
	}
	log, _ := os.ReadFile(filepath.Join(ro.Options.Output, LogFile))
	if !strings.Contains(string(log), "geometry probe: block 128,1,1") || !strings.Contains(string(log), "treated as geometry-dependent") {
		t.Errorf("the log does not report the probe:\n%s", log)
	}
	// A resumed run keeps the probe's decision and so the space.
	ro.Resume, ro.Options.Trials = true, len(trials)+1
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("resume: %v", err)
	}

	// With a kernel that verifies with any block the probe passes and
	// block shapes are searched.
	ro2, _, stderr2 := runOptions(t)
	ro2.AnalyzeGeometry = agnostic
	if err := Run(context.Background(), ro2); err != nil {
		t.Fatalf("%v\n%s", err, stderr2)
	}
	var geo2 GeometryReport
	readJSON(t, filepath.Join(ro2.Options.Output, GeometryFile), &geo2)
	if !geo2.Probed || geo2.Dependent || !geo2.LaunchSearched {
		t.Errorf("geometry report after a verified probe: %+v", geo2)
	}
	var tuned map[string]TunedKernel
	readJSON(t, filepath.Join(ro2.Options.Output, MnemeTunedFile), &tuned)
	if len(tuned) != 1 {
		t.Fatalf("tuned kernels: %+v", tuned)
	}
	for k, tk := range tuned {
		if !tk.LaunchSearched || tk.RecordedBlock != (mneme.Dim3{X: 256, Y: 1, Z: 1}) || tk.RecordedGrid != (mneme.Dim3{X: 4, Y: 1, Z: 1}) || tk.Config.Block == tk.RecordedBlock {
			t.Errorf("tuned kernel %s of an agnostic kernel: launch_searched %v, recorded block %s grid %s, tuned block %s", k, tk.LaunchSearched, tk.RecordedBlock, tk.RecordedGrid, tk.Config.Block)
		}
	}
}

func TestRunOriginalBaselineNothingBeatsIt(t *testing.T) {
	dbDir, id := writeRunDB(t, func(dir string, k *db.Kernel) {
		k.DeviceCode = db.DeviceCodeFileName([]byte("fatbin"))
		if err := os.WriteFile(filepath.Join(dir, k.DeviceCode), []byte("fatbin"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	ro, stdout, stderr := runOptions(t)
	ro.Options.DB, ro.Options.Instance = dbDir, id
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	out := ro.Options.Output
	trials, _, _ := ReadTrials(filepath.Join(out, TrialsFile))
	if len(trials) == 0 || !trials[0].IsBaseline() || !trials[0].Config.Original || trials[0].Number != 0 {
		t.Fatalf("trial 0: %+v", trials)
	}
	var sum Summary
	readJSON(t, filepath.Join(out, SummaryFile), &sum)
	if !sum.BaselineIsBest || sum.BestTrial != -1 || sum.BestSpeedup != 1 || sum.Trials != len(trials) || sum.Baseline != "the application's own code" {
		t.Errorf("summary: %+v", sum)
	}
	var best struct{ Best Trial }
	readJSON(t, filepath.Join(out, BestFile), &best)
	if best.Best.Number != -1 || !best.Best.IsBaseline() || best.Best.Speedup != 1 {
		t.Errorf("best.json: %+v", best.Best)
	}
	if !strings.Contains(stdout.String(), "nothing beat the baseline: best is the baseline (the application's own code), speedup 1.00x") {
		t.Errorf("the printed result does not say nothing beat the baseline:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(out, MnemeTunedFile)); err == nil {
		t.Errorf("%s written although nothing beat the baseline", MnemeTunedFile)
	}
}

// blockSpace is 8 block widths times 3 pipelines, recorded with block 256.
func blockSpace() *Space {
	base := mneme.Baseline(mneme.Dim3{X: 4, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0)
	return &Space{Name: "blocks", Baseline: base,
		Params: []Param{IntRange(ParamBlockX, 32, 256, 32), Pipeline(ParamPasses, "default<O1>", "default<O2>", "default<O3>")},
		Derive: func(pt Point) (mneme.Config, error) {
			c := base
			c.Block.X = uint32(pt[ParamBlockX].(int))
			c.Passes = pt[ParamPasses].(string)
			return c, nil
		}}
}

// runBlockStudy runs the block space with block 64 failing invalid_launch.
func runBlockStudy(t *testing.T, sampler string, ban bool, trials int) *Study {
	t.Helper()
	sp := blockSpace()
	opts := studyOptions(t.TempDir())
	opts.Sampler, opts.AdaptiveInvalidBan, opts.Trials, opts.Workers = sampler, ban, trials, 1
	s, err := NewSampler(sampler, sp, 3)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newTestExecutor(t, "TESTWORKER_INVALID_BLOCK=64")
	e.TrialTimeout = 5 * time.Second
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	st := &Study{Space: sp, Sampler: s, Exec: e, Opts: opts}
	if _, err := st.RunBaseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := st.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

func countBlock(trials []Trial, x uint32) int {
	n := 0
	for _, tr := range trials {
		if tr.Config.Block.X == x {
			n++
		}
	}
	return n
}

func TestStudyAdaptiveInvalidBanSkipsTheBlock(t *testing.T) {
	for _, sampler := range []string{"exhaustive", "random", "tpe"} {
		st := runBlockStudy(t, sampler, true, 0)
		if n := countBlock(st.Trials(), 64); n != 1 {
			t.Errorf("%s: %d trials with the banned block 64, want 1", sampler, n)
		}
		if b := st.BannedBlocks(); len(b) != 1 || b[0] != "64,1,1" {
			t.Errorf("%s: banned %v", sampler, b)
		}
		if st.bannedSkips == 0 {
			t.Errorf("%s: no proposal was skipped", sampler)
		}
	}
	st := runBlockStudy(t, "exhaustive", false, 0)
	if n := countBlock(st.Trials(), 64); n != 3 {
		t.Errorf("without the ban: %d trials with block 64, want all 3", n)
	}
	if len(st.Trials()) != 24 {
		t.Errorf("without the ban: %d trials, want the 24 configurations", len(st.Trials()))
	}
}

func TestStudyBaselineIsTrialZero(t *testing.T) {
	st := runBlockStudy(t, "exhaustive", true, 5)
	trials := st.Trials()
	if len(trials) != 5 || !trials[0].IsBaseline() || trials[0].Number != 0 || trials[0].Speedup != 1 {
		t.Fatalf("trials: %d, first %+v", len(trials), trials[0])
	}
	for _, tr := range trials[1:] {
		if tr.Number < 1 || tr.IsBaseline() {
			t.Errorf("trial %d after the baseline", tr.Number)
		}
	}
	if math.IsNaN(trials[0].TimeNS) || trials[0].TimeNS != st.Baseline().TimeNS {
		t.Errorf("trial 0 time %v, baseline %v", trials[0].TimeNS, st.Baseline().TimeNS)
	}
}

// TestRunExactCoverKeepsBlocksThatDivide tunes a kernel whose global index is
// unguarded on a worker that faults, as such a kernel does, when a launch
// runs more threads than the recorded 1024: the search keeps to blocks that
// divide them, no trial is wasted, and the summary names the rule. The same
// run with the index bounded searches every block and wastes trials.
func TestRunExactCoverKeepsBlocksThatDivide(t *testing.T) {
	run := func(bounded bool) (Summary, []Trial) {
		ro, _, stderr := runOptions(t, "TESTWORKER_THREADS=1024")
		ro.Options.Preset = "standard"
		ro.AnalyzeGeometry = func(string, string) (geometry.Facts, error) {
			return geometry.Facts{ThreadIDDims: [3]bool{true}, GlobalIndexAccess: true, IndexBounded: bounded}, nil
		}
		if err := Run(context.Background(), ro); err != nil {
			t.Fatalf("bounded %v: %v\n%s", bounded, err, stderr)
		}
		var sum Summary
		readJSON(t, filepath.Join(ro.Options.Output, SummaryFile), &sum)
		trials, _, _ := ReadTrials(filepath.Join(ro.Options.Output, TrialsFile))
		return sum, trials
	}
	sum, trials := run(false)
	blocks := map[uint32]bool{}
	for _, tr := range trials {
		blocks[tr.Config.Block.X] = true
		if 1024%tr.Config.Block.X != 0 || tr.Config.Grid.X*tr.Config.Block.X != 1024 || tr.Status != mneme.StatusVerified {
			t.Errorf("unguarded index: trial %d ran grid %s block %s: %s", tr.Number, tr.Config.Grid, tr.Config.Block, tr.Status)
		}
	}
	if len(blocks) != 5 { // 64, 128, 256, 512, 1024 of the standard preset's multiples of 64
		t.Errorf("unguarded index: blocks tried %v, want the five that divide 1024", blocks)
	}
	if !sum.LaunchSearched || sum.GeometryDependent || !strings.Contains(sum.BlockRule, "divide the recorded 1024 x 1 x 1 threads") ||
		!strings.Contains(sum.Geometry, sum.BlockRule) || sum.Statuses[mneme.StatusRuntimeError] != 0 {
		t.Errorf("unguarded index: summary %+v", sum)
	}

	sum, _ = run(true)
	if sum.BlockRule != "" || sum.Statuses[mneme.StatusRuntimeError] == 0 {
		t.Errorf("bounded index: block rule %q, %d runtime errors; want no rule and the faults the rule avoids", sum.BlockRule, sum.Statuses[mneme.StatusRuntimeError])
	}
}

// A tuned block is deployable when block shapes were searched and the
// kernel is shown agnostic, or was recorded as machine code (nothing to
// show, every shape verified); each input changed alone.
func TestDeploysBlock(t *testing.T) {
	for _, c := range []struct {
		searched, dependent, machine, report bool
		want                                 bool
	}{
		{true, false, false, true, true},
		{false, false, false, true, false},
		{true, true, false, true, false},
		{true, true, true, true, true},
		{false, true, true, true, false},
		{true, true, true, false, false},
		{true, false, false, false, true},
	} {
		s := &Study{}
		if c.report {
			s.Geometry = &GeometryReport{MachineCode: c.machine}
		}
		if got := s.deploysBlock(Summary{LaunchSearched: c.searched, GeometryDependent: c.dependent}); got != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
}

// A kernel's own launch bound keeps the search to blocks within it, whatever
// the launch safety, and the summary says which rule limited them; without
// one larger blocks are tried.
func TestRunLaunchBoundKeepsBlocksWithin(t *testing.T) {
	run := func(bound int, safety string) (Summary, []Trial) {
		ro, _, stderr := runOptions(t, "TESTWORKER_THREADS=1024")
		ro.Options.Preset = "standard"
		ro.Options.LaunchSafety = safety
		ro.AnalyzeGeometry = func(string, string) (geometry.Facts, error) {
			return geometry.Facts{ThreadIDDims: [3]bool{true}, MaxThreads: bound}, nil
		}
		if err := Run(context.Background(), ro); err != nil {
			t.Fatalf("bound %d: %v\n%s", bound, err, stderr)
		}
		var sum Summary
		readJSON(t, filepath.Join(ro.Options.Output, SummaryFile), &sum)
		trials, _, _ := ReadTrials(filepath.Join(ro.Options.Output, TrialsFile))
		return sum, trials
	}
	for _, safety := range []string{LaunchSafe, LaunchAggressive} {
		sum, trials := run(128, safety)
		smaller := false
		for _, tr := range trials {
			if tr.Number == 0 {
				continue // the recorded launch (the test's recording has block 256)
			}
			if n := normDim(tr.Config.Block).Count(); n > 128 {
				t.Errorf("%s, bound 128: trial %d ran block %s", safety, tr.Number, tr.Config.Block)
			} else if n < 128 {
				smaller = true
			}
		}
		if !smaller || !sum.LaunchSearched || !strings.Contains(sum.BlockRule, "at most 128 threads") || !strings.Contains(sum.Geometry, sum.BlockRule) {
			t.Errorf("%s, bound 128: smaller blocks tried %v, summary %+v", safety, smaller, sum)
		}
	}
	sum, trials := run(0, LaunchSafe)
	larger := false
	for _, tr := range trials {
		larger = larger || (tr.Number > 0 && normDim(tr.Config.Block).Count() > 128)
	}
	if !larger || sum.BlockRule != "" {
		t.Errorf("no bound: blocks over 128 tried %v, block rule %q", larger, sum.BlockRule)
	}
}
