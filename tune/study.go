package tune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/mneme-gpu/mneme"
)

// Progress is reported after every finished trial.
type Progress struct {
	Done, Budget, Failures int
	BestSpeedup            float64
}

// Study is one tuning run: it asks the sampler for points, derives their
// configurations, runs each new configuration exactly once on the executor,
// records it and tells the sampler.
type Study struct {
	Space    *Space
	Sampler  Sampler
	Exec     JobRunner
	Results  *Results
	Opts     Options
	Prior    []Trial // finished trials read back by --resume
	Progress func(Progress)
	// CompileBudget is the compile allowance of the default per-trial
	// timeout (DefaultTrialTimeout; 30 s when zero).
	CompileBudget time.Duration
	// BaselineConfigs are the baseline candidates, best first: the
	// application's own code when the recording holds it, then the
	// recompiled recorded configuration. The first that verifies is the
	// baseline; empty means Space.Baseline alone.
	BaselineConfigs []mneme.Config
	// Geometry, when set, is the run's launch-safety report for the summary.
	Geometry *GeometryReport
	// Log, when set, receives the baseline fallbacks and the bans.
	Log io.Writer

	baseline Trial
	trials   []Trial
	started  time.Time
	// banned maps a block shape (Dim3.String) to the status that banned it.
	banned      map[string]mneme.Status
	bannedSkips int
	// stopped says why the search stopped early (StopTimeout,
	// StopFailFast); empty when it ran its course.
	stopped string
}

// Why a search stopped before its budget, as summary.json's status says.
const (
	StopTimeout  = "timeout"
	StopFailFast = "stopped_fail_fast"
)

// stopping reports whether the search must submit no more trials: the
// run's --timeout passed, or --fail-fast saw a failure.
func (s *Study) stopping() bool {
	if s.stopped == "" && s.Opts.Timeout > 0 && time.Since(s.started).Seconds() > s.Opts.Timeout {
		s.stopped = StopTimeout
		s.logf("--timeout %gs passed: no more trials are submitted", s.Opts.Timeout)
	}
	return s.stopped != ""
}

// BaselineParams are the params of the baseline trial (trial 0), as Mneme
// marks the baseline in best.json.
func BaselineParams() Point { return Point{baselineParam: true} }

// baselineParam is the one param of the baseline trial; no space may use it.
const baselineParam = "baseline"

// IsBaseline reports whether the trial is a run's baseline: trial 0 in
// trials.jsonl, or trial -1 as best.json names it.
func (t Trial) IsBaseline() bool {
	b, _ := t.Params[baselineParam].(bool)
	return b && len(t.Params) == 1 && t.Number <= 0
}

// Trials are all finished trials, resumed ones included.
func (s *Study) Trials() []Trial { return s.trials }

// Baseline is the baseline trial of this run.
func (s *Study) Baseline() Trial { return s.baseline }

// RunBaseline replays the baseline candidates (BaselineConfigs) until one
// verifies, writes baseline.json and records the baseline as trial 0 of the
// run, unless the run is resumed (trial 0 is then among the prior trials).
// A baseline that does not verify stops the run: nothing could be compared.
func (s *Study) RunBaseline(ctx context.Context) (Trial, error) {
	s.started = time.Now()
	candidates := s.BaselineConfigs
	if len(candidates) == 0 {
		candidates = []mneme.Config{s.Space.Baseline}
	}
	var t Trial
	var r JobResult
	for i, cfg := range candidates {
		s.Exec.Submit(Job{ID: 0, Config: cfg})
		select {
		case r = <-s.Exec.Results():
		case <-ctx.Done():
			return Trial{}, ctx.Err()
		}
		t = s.trialOf(0, BaselineParams(), r)
		if t.OK() {
			break
		}
		if i+1 < len(candidates) {
			s.logf("baseline: %s did not verify (%s %s); trying %s", baselineKind(cfg), t.Status, t.Error, baselineKind(candidates[i+1]))
		}
	}
	if t.OK() {
		t.Speedup, t.Value = 1, s.value(t.TimeNS, t.TimeNS)
	}
	s.baseline = t
	if s.Results != nil {
		if err := s.Results.WriteJSON(BaselineFile, t); err != nil {
			return t, err
		}
	}
	if !t.OK() {
		return t, fmt.Errorf("the baseline (%s) did not verify: %s %s", baselineKind(t.Config), t.Status, t.Error)
	}
	if s.recordsBaseline() {
		if s.Results != nil {
			if err := s.Results.AppendTrial(t); err != nil {
				return t, err
			}
		}
		s.trials = append(s.trials, t)
	}
	if s.Opts.TrialTimeout == "" {
		s.Exec.SetTrialTimeout(DefaultTrialTimeout(r.End.Sub(r.Start), s.CompileBudget))
	}
	return t, nil
}

// recordsBaseline reports whether the baseline becomes trial 0 now: not when
// a resumed run already has it, nor in a run begun before baselines were
// trials (its trial 0 is another configuration).
func (s *Study) recordsBaseline() bool {
	for _, t := range s.Prior {
		if t.IsBaseline() || t.Number == 0 {
			return false
		}
	}
	return true
}

// deploysBlock says whether deployment may apply the tuned block. A block
// searched only under aggressive launch safety verified on the recorded
// data alone: deployment keeps the application's block for a kernel whose
// IR shows (or cannot rule out) that it depends on its block shape. A
// kernel recorded as machine code has no IR to show anything; its verified
// block is deployed (GeometryReport.MachineCode).
func (s *Study) deploysBlock(sum Summary) bool {
	if !sum.LaunchSearched {
		return false
	}
	return !sum.GeometryDependent || (s.Geometry != nil && s.Geometry.MachineCode)
}

// baselineKind says what a baseline configuration runs.
func baselineKind(c mneme.Config) string {
	if c.Original {
		return "the application's own code"
	}
	return "the recompiled recorded configuration"
}

func (s *Study) logf(format string, a ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, "%s %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, a...))
	}
}

// DefaultTrialTimeout is ten times the baseline trial's wall time (its
// launches, reset and verification) plus a compile budget (30 s unless
// given), and at least 10 s.
func DefaultTrialTimeout(baselineWall, compileBudget time.Duration) time.Duration {
	if compileBudget <= 0 {
		compileBudget = 30 * time.Second
	}
	d := 10*baselineWall + compileBudget
	return max(d, 10*time.Second)
}

func (s *Study) value(timeNS, baseNS float64) float64 {
	if s.Opts.Objective == "speedup" {
		return baseNS / timeNS
	}
	return timeNS
}

func (s *Study) trialOf(number int, pt Point, r JobResult) Trial {
	t := Trial{Number: number, Params: pt, Config: r.Job.Config, ConfigKey: ConfigKey(r.Job.Config),
		Status: r.Status, Worker: r.Worker, GPU: r.GPU, Error: r.Error,
		Start: r.Start.UTC().Format(time.RFC3339Nano), End: r.End.UTC().Format(time.RFC3339Nano),
		Seconds: r.End.Sub(r.Start).Seconds(), Instances: r.Instances, VariantCostNS: r.VariantCostNS}
	res := r.Result
	t.Result = &res
	if t.Status == mneme.StatusVerified {
		if m := MetricOf(s.Opts.Metric, res.ExecTime); m > 0 && !math.IsNaN(m) {
			t.TimeNS = m
		} else {
			t.Status, t.Error = mneme.StatusInternalError, "verified result without execution times"
		}
	}
	if t.OK() && s.baseline.TimeNS > 0 {
		t.Speedup = s.baseline.TimeNS / t.TimeNS
		t.Value = s.value(t.TimeNS, s.baseline.TimeNS)
	}
	return t
}

// maxSkips bounds consecutive proposals of already-finished configurations
// before the sampler counts as exhausted.
const maxSkips = 10000

// Run tunes until the budget (Opts.Trials, counting resumed trials; 0 means
// until the sampler has nothing left) is spent. Every configuration becomes
// exactly one trial; resumed configurations are told to the sampler and not
// run again.
func (s *Study) Run(ctx context.Context) error {
	if s.started.IsZero() {
		s.started = time.Now()
	}
	s.banned = map[string]mneme.Status{}
	r := &studyRun{s: s, done: map[string]Trial{}, inflight: map[int]pendingTrial{}, inflightKeys: map[string]bool{},
		number: 1, budget: s.Opts.Trials} // trial 0 is the baseline
	if err := r.restore(); err != nil {
		return err
	}
	r.report()
	for {
		r.submit(ctx)
		if len(r.inflight) == 0 {
			return nil
		}
		var jr JobResult
		select {
		case jr = <-s.Exec.Results():
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := r.finish(jr); err != nil {
			return err
		}
		if err := s.Exec.Err(); err != nil && allWorkersBroken(err) {
			return err
		}
	}
}

// studyRun is the state of one Study.Run: the configurations finished and in
// flight, the next trial number, and the figures the progress display shows.
type studyRun struct {
	s            *Study
	done         map[string]Trial // by configuration key
	inflight     map[int]pendingTrial
	inflightKeys map[string]bool
	number       int
	budget       int
	exhausted    bool
	skips        int
	failures     int
	best         float64
}

// pendingTrial is a submitted trial's point and configuration key.
type pendingTrial struct {
	pt  Point
	key string
}

// restore counts the baseline just run and the resumed trials as done, and
// tells the sampler the resumed ones.
func (r *studyRun) restore() error {
	s := r.s
	for _, t := range s.trials { // the baseline, run just now
		r.done[t.ConfigKey] = t
	}
	for _, t := range s.Prior {
		if t.IsBaseline() {
			r.done[t.ConfigKey] = t
			s.trials = append(s.trials, t)
			r.number = max(r.number, t.Number+1)
			continue
		}
		s.noteBan(t)
		pt, err := s.Space.Normalize(t.Params)
		if err != nil {
			return fmt.Errorf("--resume: trial %d: %v", t.Number, err)
		}
		t.Params = pt
		r.done[t.ConfigKey] = t
		s.trials = append(s.trials, t)
		s.Sampler.Tell(pt, t.Loss(), t.Status)
		r.number = max(r.number, t.Number+1)
	}
	for _, t := range s.trials {
		if !t.OK() {
			r.failures++
		}
		r.best = math.Max(r.best, t.Speedup)
	}
	return nil
}

func (r *studyRun) report() {
	if r.s.Progress != nil {
		r.s.Progress(Progress{Done: len(r.s.trials), Budget: r.budget, Failures: r.failures, BestSpeedup: r.best})
	}
}

// submit asks the sampler for points and submits their configurations until
// every worker has one, the budget is spent or the sampler has none left.
// A configuration already run or in flight is not run again; a banned block
// shape is not run at all.
func (r *studyRun) submit(ctx context.Context) {
	s := r.s
	for !r.exhausted && !s.stopping() && len(r.inflight) < s.Exec.Capacity() && (r.budget == 0 || len(s.trials)+len(r.inflight) < r.budget) {
		if ctx.Err() != nil {
			return
		}
		pt, ok := s.Sampler.Ask()
		if !ok {
			r.exhausted = true
			return
		}
		cfg, err := s.Space.Evaluate(pt)
		if err != nil { // samplers return feasible points; be safe anyway
			s.Sampler.Tell(pt, math.Inf(1), mneme.StatusInvalidConfig)
			continue
		}
		key := ConfigKey(cfg)
		if t, ok := r.done[key]; ok || r.inflightKeys[key] {
			// Another point derives a configuration already tried: reuse it.
			if ok {
				s.Sampler.Tell(pt, t.Loss(), t.Status)
			}
			r.skip()
			continue
		}
		if st, ok := s.banned[cfg.Block.String()]; ok {
			// A banned block shape is not run; the sampler learns it as
			// a failure of the status that banned it.
			s.Sampler.Tell(pt, math.Inf(1), st)
			s.bannedSkips++
			r.skip()
			continue
		}
		r.skips = 0
		r.inflight[r.number] = pendingTrial{pt: pt, key: key}
		r.inflightKeys[key] = true
		s.Exec.Submit(Job{ID: r.number, Config: cfg})
		r.number++
	}
}

// skip counts a proposal not run; too many in a row exhaust the sampler.
func (r *studyRun) skip() {
	if r.skips++; r.skips > maxSkips {
		r.exhausted = true
	}
}

// finish records a finished job as its trial and tells the sampler.
func (r *studyRun) finish(jr JobResult) error {
	s := r.s
	p, ok := r.inflight[jr.Job.ID]
	if !ok {
		return fmt.Errorf("internal error: result for unknown trial %d", jr.Job.ID)
	}
	delete(r.inflight, jr.Job.ID)
	delete(r.inflightKeys, p.key)
	t := s.trialOf(jr.Job.ID, p.pt, jr)
	if s.Results != nil {
		if err := s.Results.AppendTrial(t); err != nil {
			return err
		}
	}
	r.done[p.key] = t
	s.trials = append(s.trials, t)
	s.noteBan(t)
	s.Sampler.Tell(p.pt, t.Loss(), t.Status)
	if !t.OK() {
		r.failures++
		if s.Opts.FailFast && s.stopped == "" {
			s.stopped = StopFailFast
			s.logf("--fail-fast: trial %d ended %s; no more trials are submitted", t.Number, t.Status)
		}
	}
	r.best = math.Max(r.best, t.Speedup)
	r.report()
	return nil
}

// noteBan bans the block shape of a trial that ended invalid_launch or
// runtime_error, when the adaptive ban is on. The baseline's block is never
// banned: the baseline verified with it, so the failure lies elsewhere.
func (s *Study) noteBan(t Trial) {
	if !s.Opts.AdaptiveInvalidBan || !bannableStatus(t.Status) || t.Config.Block == s.baseline.Config.Block {
		return
	}
	key := t.Config.Block.String()
	if _, ok := s.banned[key]; ok {
		return
	}
	s.banned[key] = t.Status
	s.logf("adaptive invalid ban: block %s banned from further sampling after trial %d ended %s", key, t.Number, t.Status)
}

// BannedBlocks lists the banned block shapes, sorted.
func (s *Study) BannedBlocks() []string {
	out := make([]string, 0, len(s.banned))
	for k := range s.banned {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func allWorkersBroken(err error) bool { return errors.Is(err, errAllBroken) }

var errAllBroken = errors.New("every worker failed to restart")

// Finish writes best.json, summary.json and, when a configuration beat the
// baseline, the Proteus and mneme tuned-kernel files. kernel is the mangled
// name. When nothing beat the baseline, best.json holds the baseline as
// Mneme writes it (trial -1, params {"baseline": true}), the summary says so
// with speedup 1, and the tuned-kernel files are left alone: the application
// should keep running what it runs.
func (s *Study) Finish(kernel, staticHash, gpuName string, spaceSize int64, resumed int) (Summary, error) {
	sum := Summary{Kernel: kernel, Trials: len(s.trials), Statuses: map[mneme.Status]int{},
		BaselineTimeNS: s.baseline.TimeNS, BestTrial: -1, Sampler: s.Sampler.Name(), Metric: s.Opts.Metric,
		Objective: s.Opts.Objective, SpaceSize: spaceSize, ResumedTrials: resumed, InstanceTunedOn: s.Opts.Instance,
		Baseline: baselineKind(s.baseline.Config), BannedBlocks: s.BannedBlocks(), BannedSkips: s.bannedSkips}
	if s.Geometry != nil {
		sum.LaunchSafety, sum.GeometryDependent, sum.LaunchSearched, sum.Geometry = s.Geometry.LaunchSafety, s.Geometry.Dependent, s.Geometry.LaunchSearched, s.Geometry.Note
		sum.BlockRule = s.Geometry.BlockRule
	}
	for _, t := range s.trials {
		sum.Statuses[t.Status]++
	}
	sum.mnemeCounts(s.trials, s.Opts.Trials, s.stopped)
	sum.FailurePattern = FailurePattern(s.trials)
	sum.BaselineMetric = s.baseline.TimeNS
	elapsed := time.Since(s.started).Seconds()
	sum.ElapsedSeconds = elapsed
	if elapsed > 0 {
		sum.ConfigsPerSec = float64(len(s.trials)-resumed) / elapsed
	}
	best := BestTuned(s.trials)
	if len(best) > 0 && best[0].TimeNS < s.baseline.TimeNS {
		b := best[0]
		if s.baseline.TimeNS > 0 {
			b.Speedup = s.baseline.TimeNS / b.TimeNS
		}
		sum.BestTimeNS, sum.BestSpeedup, sum.BestTrial = b.TimeNS, b.Speedup, b.Number
		sum.BestMetric = b.TimeNS
		if s.Results == nil {
			return sum, nil
		}
		if err := s.Results.WriteJSON(BestFile, map[string]any{"best": b, "baseline": s.baseline}); err != nil {
			return sum, err
		}
		if err := s.writeProteus(kernel, ProteusEntry(b.Config)); err != nil {
			return sum, err
		}
		tk := TunedKernel{Config: b.Config, Instance: s.Opts.Instance, StaticHash: staticHash, GPU: gpuName,
			Speedup: b.Speedup, TimeNS: b.TimeNS, BaselineTimeNS: s.baseline.TimeNS, Metric: s.Opts.Metric,
			TunedAt:        time.Now().UTC().Format(time.RFC3339),
			LaunchSearched: s.deploysBlock(sum)}
		tk.RecordedGrid, tk.RecordedBlock = s.recordedLaunch()
		if err := s.Results.MergeJSONMap(MnemeTunedFile, kernel, tk); err != nil {
			return sum, err
		}
		return sum, s.Results.WriteJSON(SummaryFile, sum)
	}
	sum.BaselineIsBest = true
	sum.BestTimeNS, sum.BestSpeedup = s.baseline.TimeNS, 1
	sum.BestMetric = s.baseline.TimeNS
	if s.Results == nil {
		return sum, nil
	}
	b := s.baseline
	b.Number, b.Params, b.Speedup = -1, BaselineParams(), 1
	if err := s.Results.WriteJSON(BestFile, map[string]any{"best": b, "baseline": s.baseline,
		"note": "no configuration beat the baseline (" + sum.Baseline + ")"}); err != nil {
		return sum, err
	}
	return sum, s.Results.WriteJSON(SummaryFile, sum)
}

// recordedLaunch is the recorded launch's grid and block the search started
// from: the space's baseline, or the baseline trial's where a space leaves
// it unset.
func (s *Study) recordedLaunch() (grid, block mneme.Dim3) {
	if s.Space != nil && !s.Space.Baseline.Block.IsZero() {
		return s.Space.Baseline.Grid, s.Space.Baseline.Block
	}
	return s.baseline.Config.Grid, s.baseline.Config.Block
}

// BestTuned is Best without the baseline trial: the tuned configurations
// that verified, fastest first.
func BestTuned(trials []Trial) []Trial {
	var tuned []Trial
	for _, t := range trials {
		if !t.IsBaseline() {
			tuned = append(tuned, t)
		}
	}
	return Best(tuned)
}
