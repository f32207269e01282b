package tune

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mneme-gpu/mneme/spec"
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
	Exec     *Executor
	Results  *Results
	Opts     Options
	Prior    []Trial // finished trials read back by --resume
	Progress func(Progress)
	// CompileBudget is the compile allowance of the default per-trial
	// timeout (DefaultTrialTimeout; 30 s when zero).
	CompileBudget time.Duration

	baseline Trial
	trials   []Trial
	started  time.Time
}

// Trials are all finished trials, resumed ones included.
func (s *Study) Trials() []Trial { return s.trials }

// Baseline is the baseline trial of this run.
func (s *Study) Baseline() Trial { return s.baseline }

// RunBaseline replays the recorded configuration and writes baseline.json.
// A baseline that does not verify stops the run: nothing could be compared.
func (s *Study) RunBaseline(ctx context.Context) (Trial, error) {
	s.started = time.Now()
	s.Exec.Submit(Job{ID: -1, Config: s.Space.Baseline})
	var r JobResult
	select {
	case r = <-s.Exec.Results():
	case <-ctx.Done():
		return Trial{}, ctx.Err()
	}
	t := s.trialOf(-1, nil, r)
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
		return t, fmt.Errorf("the baseline (recorded configuration) did not verify: %s %s", t.Status, t.Error)
	}
	if s.Opts.TrialTimeout == "" {
		s.Exec.TrialTimeout = DefaultTrialTimeout(r.End.Sub(r.Start), s.CompileBudget)
	}
	return t, nil
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
		Seconds: r.End.Sub(r.Start).Seconds()}
	res := r.Result
	t.Result = &res
	if t.Status == spec.StatusVerified {
		if m := MetricOf(s.Opts.Metric, res.ExecTime); m > 0 && !math.IsNaN(m) {
			t.TimeNS = m
		} else {
			t.Status, t.Error = spec.StatusInternalError, "verified result without execution times"
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
	done := map[string]Trial{}
	number := 0
	for _, t := range s.Prior {
		pt, err := s.Space.Normalize(t.Params)
		if err != nil {
			return fmt.Errorf("--resume: trial %d: %v", t.Number, err)
		}
		t.Params = pt
		done[t.ConfigKey] = t
		s.trials = append(s.trials, t)
		s.Sampler.Tell(pt, t.Loss(), t.Status)
		number = max(number, t.Number+1)
	}
	budget := s.Opts.Trials
	type pending struct {
		pt  Point
		key string
	}
	inflight := map[int]pending{}
	inflightKeys := map[string]bool{}
	exhausted := false
	failures := 0
	best := 0.0
	for _, t := range s.trials {
		if !t.OK() {
			failures++
		}
		best = math.Max(best, t.Speedup)
	}
	report := func() {
		if s.Progress != nil {
			s.Progress(Progress{Done: len(s.trials), Budget: budget, Failures: failures, BestSpeedup: best})
		}
	}
	report()
	skips := 0
	for {
		for !exhausted && len(inflight) < s.Exec.Capacity() && (budget == 0 || len(s.trials)+len(inflight) < budget) {
			if ctx.Err() != nil {
				break
			}
			pt, ok := s.Sampler.Ask()
			if !ok {
				exhausted = true
				break
			}
			cfg, err := s.Space.Evaluate(pt)
			if err != nil { // samplers return feasible points; be safe anyway
				s.Sampler.Tell(pt, math.Inf(1), spec.StatusInvalidConfig)
				continue
			}
			key := ConfigKey(cfg)
			if t, ok := done[key]; ok || inflightKeys[key] {
				// Another point derives a configuration already tried: reuse it.
				if ok {
					s.Sampler.Tell(pt, t.Loss(), t.Status)
				}
				if skips++; skips > maxSkips {
					exhausted = true
				}
				continue
			}
			skips = 0
			inflight[number] = pending{pt: pt, key: key}
			inflightKeys[key] = true
			s.Exec.Submit(Job{ID: number, Config: cfg})
			number++
		}
		if len(inflight) == 0 {
			break
		}
		var r JobResult
		select {
		case r = <-s.Exec.Results():
		case <-ctx.Done():
			return ctx.Err()
		}
		p, ok := inflight[r.Job.ID]
		if !ok {
			return fmt.Errorf("internal error: result for unknown trial %d", r.Job.ID)
		}
		delete(inflight, r.Job.ID)
		delete(inflightKeys, p.key)
		t := s.trialOf(r.Job.ID, p.pt, r)
		if s.Results != nil {
			if err := s.Results.AppendTrial(t); err != nil {
				return err
			}
		}
		done[p.key] = t
		s.trials = append(s.trials, t)
		s.Sampler.Tell(p.pt, t.Loss(), t.Status)
		if !t.OK() {
			failures++
		}
		best = math.Max(best, t.Speedup)
		report()
		if err := s.Exec.Err(); err != nil && allWorkersBroken(err) {
			return err
		}
	}
	return nil
}

func allWorkersBroken(err error) bool { return errors.Is(err, errAllBroken) }

var errAllBroken = errors.New("every worker failed to restart")

// Finish writes best.json, summary.json and, when a configuration verified,
// the Proteus and mneme tuned-kernel files. kernel is the mangled name.
func (s *Study) Finish(kernel, staticHash, gpuName string, spaceSize int64, resumed int) (Summary, error) {
	sum := Summary{Kernel: kernel, Trials: len(s.trials), Statuses: map[string]int{},
		BaselineTimeNS: s.baseline.TimeNS, BestTrial: -1, Sampler: s.Sampler.Name(), Metric: s.Opts.Metric,
		Objective: s.Opts.Objective, SpaceSize: spaceSize, ResumedTrials: resumed, InstanceTunedOn: s.Opts.Instance}
	for _, t := range s.trials {
		sum.Statuses[t.Status]++
	}
	elapsed := time.Since(s.started).Seconds()
	sum.ElapsedSeconds = elapsed
	if elapsed > 0 {
		sum.ConfigsPerSec = float64(len(s.trials)-resumed) / elapsed
	}
	best := Best(s.trials)
	if s.Results == nil {
		return sum, nil
	}
	if len(best) > 0 {
		b := best[0]
		if s.baseline.TimeNS > 0 {
			b.Speedup = s.baseline.TimeNS / b.TimeNS
		}
		sum.BestTimeNS, sum.BestSpeedup, sum.BestTrial = b.TimeNS, b.Speedup, b.Number
		if err := s.Results.WriteJSON(BestFile, map[string]any{"best": b, "baseline": s.baseline}); err != nil {
			return sum, err
		}
		if err := s.Results.MergeJSONMap(ProteusFile, kernel, ProteusEntry(b.Config)); err != nil {
			return sum, err
		}
		tk := TunedKernel{Config: b.Config, Instance: s.Opts.Instance, StaticHash: staticHash, GPU: gpuName,
			Speedup: b.Speedup, TimeNS: b.TimeNS, BaselineTimeNS: s.baseline.TimeNS, Metric: s.Opts.Metric,
			TunedAt: time.Now().UTC().Format(time.RFC3339)}
		if err := s.Results.MergeJSONMap(MnemeTunedFile, kernel, tk); err != nil {
			return sum, err
		}
	}
	return sum, s.Results.WriteJSON(SummaryFile, sum)
}
