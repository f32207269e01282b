package tune

import (
	"context"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
)

// passesSpace is block widths times pipelines, recorded with block 128;
// the test worker fails the pipelines named after failures.
func passesSpace(blocks []int, passes ...any) *Space {
	base := mneme.Baseline(mneme.Dim3{X: 8, Y: 1, Z: 1}, mneme.Dim3{X: 128, Y: 1, Z: 1}, 0)
	var bs []any
	for _, b := range blocks {
		bs = append(bs, b)
	}
	return &Space{Name: "passes", Baseline: base,
		Params: []Param{Categorical(ParamBlockX, bs...), Categorical(ParamPasses, passes...)},
		Derive: func(pt Point) (mneme.Config, error) {
			c := base
			c.Block.X = uint32(pt[ParamBlockX].(int))
			c.Passes = pt[ParamPasses].(string)
			return c, nil
		}}
}

// runPassesStudy runs sp exhaustively on one test worker after prior
// trials, with the adaptive ban as asked, and returns the study.
func runPassesStudy(t *testing.T, sp *Space, prior []Trial, ban bool, budget int, env ...string) *Study {
	t.Helper()
	opts := studyOptions(t.TempDir())
	opts.Workers, opts.AdaptiveInvalidBan, opts.Trials = 1, ban, budget
	sampler, err := NewSampler("exhaustive", sp, 1)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newTestExecutor(t, env...)
	e.TrialTimeout = 700 * time.Millisecond
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	st := &Study{Space: sp, Sampler: sampler, Exec: e, Opts: opts, Prior: prior}
	if _, err := st.RunBaseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := st.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

var passesStatus = map[string]mneme.Status{"default<O1>": "verified", "default<O2>": "verified", "default<O3>": "verified",
	"crash": "crashed", "fault": "runtime_error", "compile-error": "compile_error", "no-status": "internal_error", "hang": "timeout"}

// checkTrials requires one trial per configuration, numbered from 1 in
// order after the baseline (trial 0), each with its pipeline's status, and
// the verified ones timed.
func checkTrials(t *testing.T, st *Study, want int) {
	t.Helper()
	trials := st.Trials()
	if len(trials) != want+1 {
		t.Fatalf("%d trials, want the baseline and %d", len(trials), want)
	}
	numbers, keys := map[int]bool{}, map[string]bool{}
	for _, tr := range trials {
		if numbers[tr.Number] || keys[tr.ConfigKey] {
			t.Errorf("trial %d (%s): a number or configuration twice", tr.Number, tr.ConfigKey)
		}
		numbers[tr.Number], keys[tr.ConfigKey] = true, true
		if tr.IsBaseline() {
			continue
		}
		if w := passesStatus[tr.Config.Passes]; tr.Status != w {
			t.Errorf("trial %d (%s, block %d): %s (%s), want %s", tr.Number, tr.Config.Passes, tr.Config.Block.X, tr.Status, tr.Error, w)
		}
		if tr.Status == mneme.StatusVerified && (tr.TimeNS <= 0 || tr.Speedup <= 0) {
			t.Errorf("trial %d: verified without a time (%v) or speedup (%v)", tr.Number, tr.TimeNS, tr.Speedup)
		}
	}
	for n := 0; n <= want; n++ {
		if !numbers[n] {
			t.Errorf("no trial %d: trials are not numbered 0..%d", n, want)
		}
	}
}

// Every kind of failed trial (a crashed worker, a fault that leaves the
// worker unusable, a compile error, an answer without a status) is
// followed by more trials on a fresh or the same worker, which verify.
func TestStudyCarriesOnAfterFailedTrials(t *testing.T) {
	sp := passesSpace([]int{32, 64}, "crash", "default<O3>", "fault", "default<O2>", "compile-error", "no-status", "default<O1>")
	st := runPassesStudy(t, sp, nil, false, 0)
	checkTrials(t, st, 14)
}

// A trial that times out (the worker is killed) is followed by trials that
// verify.
func TestStudyCarriesOnAfterATimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits on trial timeouts (the sampler pass of scripts/mutate.sh runs -short)")
	}
	t.Parallel()
	st := runPassesStudy(t, passesSpace([]int{32, 64}, "hang", "default<O3>"), nil, false, 0)
	checkTrials(t, st, 4)
}

// A resumed run numbers its new trials after the highest old one (gaps
// included), runs none of the old configurations again, and rebuilds the
// adaptive bans from the old trials.
func TestResumedTrialsAreNumberedAfterTheOld(t *testing.T) {
	sp := passesSpace([]int{32, 64, 256}, "default<O3>", "default<O2>", "fault")
	priorTrial := func(n int, block int, passes string, status mneme.Status) Trial {
		pt := Point{ParamBlockX: block, ParamPasses: passes}
		cfg, err := sp.Evaluate(pt)
		if err != nil {
			t.Fatal(err)
		}
		tr := Trial{Number: n, Params: pt, Config: cfg, ConfigKey: ConfigKey(cfg), Status: status}
		if status == mneme.StatusVerified {
			tr.TimeNS, tr.Speedup = float64(block), 1
		}
		return tr
	}
	base := sp.Baseline
	prior := []Trial{
		{Number: 0, Params: BaselineParams(), Config: base, ConfigKey: ConfigKey(base), Status: mneme.StatusVerified, TimeNS: 129, Speedup: 1},
		priorTrial(1, 32, "default<O3>", mneme.StatusVerified),
		priorTrial(2, 64, "fault", mneme.StatusRuntimeError), // bans block 64
		priorTrial(7, 256, "default<O2>", mneme.StatusVerified),
	}
	st := runPassesStudy(t, sp, prior, true, 0)
	old := map[int]bool{0: true, 1: true, 2: true, 7: true}
	keys := map[string]int{}
	next := 8
	for _, tr := range st.Trials() {
		if prev, dup := keys[tr.ConfigKey]; dup {
			t.Errorf("trials %d and %d ran one configuration", prev, tr.Number)
		}
		keys[tr.ConfigKey] = tr.Number
		if old[tr.Number] {
			continue
		}
		if tr.Number != next {
			t.Errorf("a new trial numbered %d, want %d (new trials follow the old in order)", tr.Number, next)
		}
		next++
		if tr.Config.Block.X == 64 {
			t.Errorf("trial %d ran block 64, which an old trial banned", tr.Number)
		}
	}
	// Blocks 32 and 256 (3 pipelines each) less the 2 old trials.
	if got := len(st.Trials()) - len(prior); got != 4 {
		t.Errorf("%d new trials, want 4", got)
	}
}

// The adaptive ban spares the baseline's own block: the baseline verified
// with it, so a trial that faults with it says nothing about the shape.
// Other blocks that fault are banned.
func TestAdaptiveBanSparesTheBaselineBlock(t *testing.T) {
	sp := passesSpace([]int{64, 128}, "fault", "default<O1>", "default<O2>")
	st := runPassesStudy(t, sp, nil, true, 0)
	if n := countBlock(st.Trials(), 128); n != 4 { // the baseline and all three pipelines
		t.Errorf("%d trials with the baseline's block 128, want 4 (it must not be banned)", n)
	}
	if n := countBlock(st.Trials(), 64); n != 1 {
		t.Errorf("%d trials with block 64, want 1 (banned after its fault)", n)
	}
	if b := st.BannedBlocks(); len(b) != 1 || b[0] != "64,1,1" {
		t.Errorf("banned %v, want block 64 alone", b)
	}
	// A resumed run rebuilds the ban with the same exception.
	prior := []Trial{{Number: 0, Params: BaselineParams(), Config: sp.Baseline, ConfigKey: ConfigKey(sp.Baseline), Status: mneme.StatusVerified, TimeNS: 129, Speedup: 1}}
	for _, block := range []int{64, 128} {
		pt := Point{ParamBlockX: block, ParamPasses: "fault"}
		cfg, _ := sp.Evaluate(pt)
		prior = append(prior, Trial{Number: len(prior), Params: pt, Config: cfg, ConfigKey: ConfigKey(cfg), Status: mneme.StatusRuntimeError})
	}
	st = runPassesStudy(t, sp, prior, true, 0)
	if n := countBlock(st.Trials(), 128); n != 4 {
		t.Errorf("resumed: %d trials with block 128, want 4", n)
	}
	if n := countBlock(st.Trials(), 64); n != 1 {
		t.Errorf("resumed: %d trials with block 64, want 1", n)
	}
}
