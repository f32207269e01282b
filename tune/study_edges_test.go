package tune

import (
	"math"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
)

// The study's arithmetic: timeouts, speedups, objectives, trial numbering
// and the summary, checked by value.

func TestDefaultTrialTimeout(t *testing.T) {
	for _, c := range []struct {
		wall, budget, want time.Duration
	}{
		{2 * time.Second, 0, 50 * time.Second},               // 10 x 2 s + the 30 s default budget
		{2 * time.Second, 5 * time.Second, 25 * time.Second}, // 10 x 2 s + 5 s
		{time.Millisecond, time.Second, 10 * time.Second},    // at least 10 s
		{time.Second, -time.Second, 40 * time.Second},        // a negative budget is the default
	} {
		if got := DefaultTrialTimeout(c.wall, c.budget); got != c.want {
			t.Errorf("DefaultTrialTimeout(%v, %v) = %v, want %v", c.wall, c.budget, got, c.want)
		}
	}
}

func TestTrialOfComputesSpeedupAndValue(t *testing.T) {
	s := &Study{Opts: Options{Metric: "median", Objective: "speedup"}, baseline: Trial{TimeNS: 300}}
	job := JobResult{Job: Job{Config: mneme.Config{Passes: "default<O3>"}}, Status: mneme.StatusVerified,
		Result: mneme.Result{ExecTime: []float64{90, 100, 500}}, Start: time.Unix(10, 0), End: time.Unix(12, 0)}
	tr := s.trialOf(4, Point{"p": 1}, job)
	if tr.Number != 4 || tr.TimeNS != 100 || tr.Speedup != 3 || tr.Value != 3 || tr.Seconds != 2 || tr.ConfigKey != ConfigKey(job.Job.Config) {
		t.Errorf("speedup objective: %+v", tr)
	}
	s.Opts.Objective = "time"
	if tr := s.trialOf(5, Point{}, job); tr.Value != 100 || tr.Speedup != 3 {
		t.Errorf("time objective: value %v speedup %v, want 100 and 3", tr.Value, tr.Speedup)
	}
	// Verified without times is an internal error, not a fast trial.
	job.Result.ExecTime = nil
	if tr := s.trialOf(6, Point{}, job); tr.Status != mneme.StatusInternalError || tr.TimeNS != 0 || tr.Speedup != 0 {
		t.Errorf("verified without times: %+v", tr)
	}
	// Without a baseline time there is no speedup to state.
	s.baseline.TimeNS = 0
	job.Result.ExecTime = []float64{100}
	if tr := s.trialOf(7, Point{}, job); tr.TimeNS != 100 || tr.Speedup != 0 || tr.Value != 0 {
		t.Errorf("no baseline time: %+v", tr)
	}
}

func TestFinishSummarizesTheBestAgainstTheBaseline(t *testing.T) {
	base := Trial{Number: 0, Status: mneme.StatusVerified, TimeNS: 200, Params: Point{"baseline": true}}
	s := &Study{Sampler: NewRandom(smoothSpace(IntRange("n", 1, 4, 1)), 1), Opts: Options{Metric: "median", Objective: "speedup"},
		baseline: base, started: time.Now().Add(-2 * time.Second)}
	s.trials = []Trial{base,
		{Number: 1, Status: mneme.StatusVerified, TimeNS: 250},
		{Number: 2, Status: mneme.StatusVerified, TimeNS: 160},
		{Number: 3, Status: mneme.StatusRuntimeError},
		{Number: 4, Status: mneme.StatusVerified, TimeNS: 180},
	}
	sum, err := s.Finish("k", "hash", "gpu", 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if sum.BestTrial != 2 || sum.BestTimeNS != 160 || sum.BestSpeedup != 1.25 || sum.Trials != 5 || sum.Statuses[mneme.StatusVerified] != 4 || sum.Statuses[mneme.StatusRuntimeError] != 1 {
		t.Errorf("summary %+v", sum)
	}
	// Four trials ran here (one was resumed) in about two seconds.
	if sum.ConfigsPerSec < 1.5 || sum.ConfigsPerSec > 2.1 || math.Abs(sum.ElapsedSeconds-2) > 0.2 {
		t.Errorf("%v configurations/s over %v s, want about 4 in 2 s", sum.ConfigsPerSec, sum.ElapsedSeconds)
	}
	// Nothing faster than the baseline: the baseline stands, speedup 1.
	s.trials = []Trial{base, {Number: 1, Status: mneme.StatusVerified, TimeNS: 200}, {Number: 2, Status: mneme.StatusVerified, TimeNS: 260}}
	if sum, _ := s.Finish("k", "hash", "gpu", 4, 0); sum.BestTrial != -1 || sum.BestSpeedup != 1 {
		t.Errorf("nothing beat the baseline: best trial %d, speedup %v", sum.BestTrial, sum.BestSpeedup)
	}
}
