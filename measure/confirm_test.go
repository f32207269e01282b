package measure

import (
	"bytes"
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// deployed is fakeApp whose runs without launch statistics (as the
// application runs deployed) take deployedExtra seconds more when tuned,
// and whose wall times follow noise, one per run in turn (cycled).
type deployed struct {
	*fakeApp
	deployedExtra float64
	noise         []float64
	runs          int
	uncounted     int // runs whose env turned the statistics off
}

func (d *deployed) Run(ctx context.Context, env []string) (Outcome, error) {
	out, err := d.fakeApp.Run(ctx, env)
	if len(d.noise) > 0 {
		out.Seconds += d.noise[d.runs%len(d.noise)]
	}
	d.runs++
	if slices.Contains(env, EnvLaunchStats+"=") {
		d.uncounted++
		out.Kernels = nil // no statistics written
		if strings.TrimPrefix(env[0], EnvTunedKernels+"=") != "" {
			out.Seconds += d.deployedExtra
		}
	}
	return out, err
}

// The kept set is run once more as it will be deployed, without launch
// statistics, and those runs are the end-to-end figures; a quiet
// application needs no more pairs than Runs.
func TestTheKeptSetIsConfirmedWithoutStatistics(t *testing.T) {
	a := newApp()
	d := &deployed{fakeApp: a}
	o := opts(a)
	o.Confirm = true
	r, err := Measure(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Kept, []string{"A"}) || r.Confirmed == nil {
		t.Fatalf("kept %v, confirmation %+v; want A, confirmed", r.Kept, r.Confirmed)
	}
	if n := len(r.Confirmed.Tuned); n != o.Runs || len(r.Confirmed.Untuned) != o.Runs {
		t.Errorf("confirmed over %d tuned and %d untuned runs, want %d each (no noise)", n, len(r.Confirmed.Untuned), o.Runs)
	}
	if d.uncounted != 2*o.Runs {
		t.Errorf("%d runs without statistics, want %d", d.uncounted, 2*o.Runs)
	}
	u, tu := r.EndToEnd()
	if len(u) != o.Runs || len(tu) != o.Runs || tu[0].Kernels != nil {
		t.Errorf("end-to-end runs %d/%d are not the confirmation's", len(u), len(tu))
	}
	// Without Confirm the last round's runs are the figures.
	a2 := newApp()
	r2, err := Measure(context.Background(), a2, opts(a2))
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := r2.EndToEnd(); r2.Confirmed != nil || len(u) != 3 || u[0].Kernels == nil {
		t.Errorf("without Confirm: confirmation %+v, end-to-end runs %d", r2.Confirmed, len(u))
	}
}

// A kept set that costs the application only when deployed (a library it
// loads, say) is dropped by the confirmation, which says so; what stays
// deployed is nothing, so the end-to-end figures have no tuned runs.
func TestAKeptSetSlowerDeployedIsDropped(t *testing.T) {
	for _, tc := range []struct {
		extra   float64
		dropped bool
	}{{0.10, true}, {0.005, false}} {
		a := newApp()
		d := &deployed{fakeApp: a, deployedExtra: tc.extra}
		o := opts(a)
		o.Confirm = true
		r, err := Measure(context.Background(), d, o)
		if err != nil {
			t.Fatal(err)
		}
		v := verdict(t, r, "A")
		if v.Kept == tc.dropped {
			t.Errorf("extra %.3f s deployed: A kept %v, want %v (%s)", tc.extra, v.Kept, !tc.dropped, v.Reason)
		}
		if !tc.dropped {
			continue
		}
		if !strings.Contains(v.Reason, "without launch statistics") || len(r.Kept) != 0 {
			t.Errorf("reason %q, kept %v", v.Reason, r.Kept)
		}
		if _, tu := r.EndToEnd(); len(tu) != 0 {
			t.Errorf("%d tuned end-to-end runs kept for a set that is not deployed", len(tu))
		}
	}
}

// Noisy wall times bring more pairs, up to MaxPairs; a precise enough
// measurement stops at Runs; ConfirmFor bounds the extra pairs' time.
func TestTheConfirmationRunsMorePairsWhileNoisy(t *testing.T) {
	noisy := []float64{0, 0.3, 0.1, 0.25, 0.05, 0.2, 0.15}
	for _, tc := range []struct {
		name  string
		noise []float64
		for_  time.Duration
		pairs int
	}{
		{"quiet", nil, 0, 3},
		{"noisy", noisy, 0, 8},
		{"noisy, out of time", noisy, 5 * time.Second, 3},
	} {
		a := newApp()
		d := &deployed{fakeApp: a, noise: tc.noise}
		o := opts(a)
		o.Confirm, o.MaxPairs, o.ConfirmFor = true, 8, tc.for_
		r, err := Measure(context.Background(), d, o)
		if err != nil {
			t.Fatal(err)
		}
		if r.Confirmed == nil {
			t.Fatalf("%s: no confirmation (kept %v)", tc.name, r.Kept)
		}
		if n := len(r.Confirmed.Untuned); n != tc.pairs {
			t.Errorf("%s: %d pairs (noise %.3f), want %d", tc.name, n, r.Confirmed.Noise, tc.pairs)
		}
	}
}

// A tuned run that fails only when run without statistics drops the set.
func TestAKeptSetFailingDeployedIsDropped(t *testing.T) {
	a := newApp()
	f := &failsDeployed{fakeApp: a}
	o := opts(a)
	o.Confirm = true
	r, err := Measure(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, r, "A"); v.Kept || !strings.Contains(v.Reason, "exits with code 3") {
		t.Errorf("A kept %v: %q", v.Kept, v.Reason)
	}
}

type failsDeployed struct{ *fakeApp }

func (f *failsDeployed) Run(ctx context.Context, env []string) (Outcome, error) {
	out, err := f.fakeApp.Run(ctx, env)
	if slices.Contains(env, EnvLaunchStats+"=") && strings.TrimPrefix(env[0], EnvTunedKernels+"=") != "" {
		out.ExitCode = 3
	}
	return out, err
}

func TestMedianDifferenceNoise(t *testing.T) {
	if n := medianDifferenceNoise([]float64{1, 1, 1}, []float64{2, 2, 2}); n != 0 {
		t.Errorf("no spread: noise %v, want 0", n)
	}
	if n := medianDifferenceNoise([]float64{1}, []float64{1, 2}); n != 0 {
		t.Errorf("one run: noise %v, want 0", n)
	}
	// Deviations 0.1, 0, 0, 0.1 from median 1 (MAD 0.05) on both sides,
	// 4 runs each: 1.96 * sqrt(2) * 1.2533 * 1.4826 * 0.05 / 2.
	u := []float64{0.9, 1.0, 1.0, 1.1}
	want := 1.96 * math.Sqrt2 * 1.2533 * 1.4826 * 0.05 / 2
	if n := medianDifferenceNoise(u, u); math.Abs(n-want) > 1e-9 {
		t.Errorf("noise %v, want %v", n, want)
	}
	// Relative to the untuned median: the same runs scaled up read the same.
	u10 := []float64{9, 10, 10, 11}
	if n := medianDifferenceNoise(u10, u10); math.Abs(n-want) > 1e-9 {
		t.Errorf("scaled: noise %v, want %v", n, want)
	}
	// One wild run moves the MAD little.
	if n := medianDifferenceNoise([]float64{0.9, 1.0, 1.0, 1.1, 9}, u); n > 2*want {
		t.Errorf("an outlier: noise %v, want under %v", n, 2*want)
	}
}

// A run that names the statistics file itself (empty: none) keeps it: the
// runner sets no file of its own and reads none.
func TestExecRunnerLeavesStatisticsOffWhenAsked(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	read := 0
	r := &ExecRunner{App: sh, Args: []string{"-c", `echo "stats=[$` + EnvLaunchStats + `]"`}, StatsDir: dir,
		ReadStats: func(string) (map[string]KernelTime, error) { read++; return nil, nil }}
	o, err := r.Run(context.Background(), []string{EnvLaunchStats + "="})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(o.Output, []byte("stats=[]\n")) || read != 0 {
		t.Errorf("with the statistics off: output %q, statistics read %d times", o.Output, read)
	}
	o, err = r.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "stats=[" + filepath.Join(dir, "launch-stats-2.json") + "]\n"; string(o.Output) != want {
		t.Errorf("by default: output %q, want %q", o.Output, want)
	}
}

// A kept set whose kernels save the application less GPU time than
// deploying costs it is dropped, saying how much each side is; one that
// saves more stays. A (1000 -> 600 ns, 10 launches) saves 4 us a run.
func TestAKeptSetSavingLessThanDeployingCostsIsDropped(t *testing.T) {
	for _, tc := range []struct {
		cost    time.Duration
		dropped bool
	}{{time.Millisecond, true}, {3 * time.Microsecond, false}, {0, false}} {
		a := newApp()
		o := opts(a)
		o.DeployCost, o.Confirm = tc.cost, true
		r, err := Measure(context.Background(), a, o)
		if err != nil {
			t.Fatal(err)
		}
		v := verdict(t, r, "A")
		if v.Kept == tc.dropped {
			t.Errorf("cost %v: A kept %v, want %v (%s)", tc.cost, v.Kept, !tc.dropped, v.Reason)
			continue
		}
		if tc.dropped {
			if !strings.Contains(v.Reason, "save 4.0 us") || !strings.Contains(v.Reason, "1.00 ms") || r.Confirmed != nil || len(r.Kept) != 0 {
				t.Errorf("cost %v: reason %q, confirmation %+v, kept %v", tc.cost, v.Reason, r.Confirmed, r.Kept)
			}
		}
	}
	if s := Saved(map[string]Verdict{"A": {Launches: 10, UntunedNS: []float64{1000, 1100, 900}, TunedNS: []float64{600}}, "B": {Launches: 5}}, []string{"A", "B"}); math.Abs(s-4e-6) > 1e-12 {
		t.Errorf("saved %v s, want 4e-6 (B untimed counts nothing)", s)
	}
}
