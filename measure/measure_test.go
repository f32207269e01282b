package measure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeApp stands for an application with two tuned kernels: each kernel's
// time per launch depends on whether its tuned code runs, and a kernel can
// be made to crash the run or change its output when tuned.
type fakeApp struct {
	untunedNS, tunedNS map[string]float64
	crashes, misprints map[string]bool
	// together: the run fails only when all these kernels are tuned at once.
	together []string
	calls    []string // "untuned", or the tuned kernels joined by "+"
	// untimedTuned: these kernels' launches are not timed in tuned runs.
	untimedTuned map[string]bool
	// extraSeconds is added to a run's wall time per tuned kernel named.
	extraSeconds map[string]float64
	files        map[string][]string
}

func (a *fakeApp) Run(_ context.Context, env []string) (Outcome, error) {
	file := strings.TrimPrefix(env[0], EnvTunedKernels+"=")
	tuned := a.files[file]
	if file == "" {
		a.calls = append(a.calls, "untuned")
	} else {
		a.calls = append(a.calls, strings.Join(tuned, "+"))
	}
	o := Outcome{Seconds: 1, OutputHash: 7, Kernels: map[string]KernelTime{}}
	for k, ns := range a.untunedNS {
		if slices.Contains(tuned, k) {
			ns = a.tunedNS[k]
			if a.crashes[k] {
				o.ExitCode = 1
			}
			if a.misprints[k] {
				o.OutputHash = 8
			}
		}
		o.Kernels[k] = KernelTime{Launches: 10, TimedLaunches: 4, TimedNS: 4 * ns}
		if slices.Contains(tuned, k) && a.untimedTuned[k] {
			o.Kernels[k] = KernelTime{Launches: 10}
		}
		if slices.Contains(tuned, k) {
			o.Seconds += a.extraSeconds[k]
		}
	}
	if len(a.together) > 0 && len(tuned) == len(a.together) {
		o.ExitCode = 2
	}
	return o, nil
}

func (a *fakeApp) subset(ks []string) (string, error) {
	name := "subset-" + strings.Join(ks, "+")
	a.files[name] = append([]string(nil), ks...)
	return name, nil
}

func newApp() *fakeApp {
	a := &fakeApp{
		untunedNS: map[string]float64{"A": 1000, "B": 500},
		tunedNS:   map[string]float64{"A": 600, "B": 700},
		crashes:   map[string]bool{}, misprints: map[string]bool{},
		files: map[string][]string{"all.json": {"A", "B"}},
	}
	return a
}

func opts(a *fakeApp) Options {
	return Options{Tuned: "all.json", Kernels: []string{"A", "B"}, Runs: 3, CheckOutput: true, Subset: a.subset,
		Predicted: map[string]float64{"A": 1.7, "B": 1.2}}
}

func verdict(t *testing.T, r *Result, name string) Verdict {
	t.Helper()
	for _, v := range r.Verdicts {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no verdict for %s", name)
	return Verdict{}
}

func TestKeepsFasterKernelsAndDropsSlowerOnes(t *testing.T) {
	a := newApp()
	r, err := Measure(context.Background(), a, opts(a))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Kept, []string{"A"}) {
		t.Errorf("kept %v, want [A]", r.Kept)
	}
	if v := verdict(t, r, "A"); v.Speedup < 1.66 || v.Speedup > 1.67 || !v.Kept || v.PredictedSpeedup != 1.7 {
		t.Errorf("A: %+v, want kept at 1000/600", v)
	}
	if v := verdict(t, r, "B"); v.Kept || !strings.Contains(v.Reason, "slower in the application (0.71x") {
		t.Errorf("B: %+v, want dropped as slower", v)
	}
	if !r.OutputSame || len(r.Untuned) != 3 || len(r.Tuned) != 3 {
		t.Errorf("runs %d/%d, output same %v", len(r.Untuned), len(r.Tuned), r.OutputSame)
	}
}

func TestTheKeptSetIsMeasuredOnItsOwnAndMustHelpEndToEnd(t *testing.T) {
	// A is faster per launch, but loading its code costs the application
	// more than it saves: the kept set makes the run slower as a whole.
	a := newApp()
	a.extraSeconds = map[string]float64{"A": 0.2}
	r, err := Measure(context.Background(), a, opts(a))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kept) != 0 {
		t.Errorf("kept %v although the application ran slower tuned", r.Kept)
	}
	if v := verdict(t, r, "A"); v.Kept || !strings.Contains(v.Reason, "slower tuned end to end (1.200 s against 1.000 s") {
		t.Errorf("A: %+v", v)
	}
	if v := verdict(t, r, "B"); !strings.Contains(v.Reason, "slower in the application") {
		t.Errorf("B keeps its own reason: %+v", v)
	}
	if len(r.Tuned) != 0 {
		t.Error("nothing is deployed, yet tuned runs are reported as what the application runs")
	}
	// Within the untuned runs' noise (2%) the kept set stays.
	a = newApp()
	a.extraSeconds = map[string]float64{"A": 0.015}
	if r, err = Measure(context.Background(), a, opts(a)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Kept, []string{"A"}) {
		t.Errorf("kept %v within noise, want [A]", r.Kept)
	}
	// The tuned runs reported are those of the kept set alone.
	for _, o := range r.Tuned {
		if o.Seconds != 1.015 {
			t.Errorf("a tuned run of %v s: not of the kept set alone", o.Seconds)
		}
	}
}

func TestRunsAreInterleavedAlternatingWhichGoesFirst(t *testing.T) {
	a := newApp()
	if _, err := Measure(context.Background(), a, opts(a)); err != nil {
		t.Fatal(err)
	}
	// A warm-up of the tuned file (not counted), three interleaved pairs;
	// B is dropped, so A is measured again on its own the same way.
	want := []string{"A+B", "untuned", "A+B", "A+B", "untuned", "untuned", "A+B",
		"A", "untuned", "A", "A", "untuned", "untuned", "A"}
	if !slices.Equal(a.calls, want) {
		t.Errorf("runs %v, want %v", a.calls, want)
	}
}

func TestAKernelThatCrashesTheApplicationIsDroppedAndTheOthersMeasured(t *testing.T) {
	a := newApp()
	a.tunedNS["B"] = 100 // B would be fast, but the application fails with it
	a.crashes["B"] = true
	r, err := Measure(context.Background(), a, opts(a))
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, r, "B"); v.Kept || !strings.Contains(v.Reason, "exits with code 1 with this kernel tuned") {
		t.Errorf("B: %+v", v)
	}
	if !slices.Equal(r.Kept, []string{"A"}) {
		t.Errorf("kept %v, want [A]", r.Kept)
	}
	// After the failure every tuned run uses the file without B.
	for _, o := range r.Tuned {
		if o.ExitCode != 0 {
			t.Error("a failed tuned run counted as a measurement")
		}
	}
	if !slices.Contains(a.calls, "A") {
		t.Errorf("A was not measured alone after B was dropped: %v", a.calls)
	}
}

func TestAKernelThatChangesTheOutputIsDroppedOnlyWhenOutputIsChecked(t *testing.T) {
	a := newApp()
	a.misprints["A"] = true
	r, err := Measure(context.Background(), a, opts(a))
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, r, "A"); v.Kept || !strings.Contains(v.Reason, "prints a different output") {
		t.Errorf("A: %+v", v)
	}
	a = newApp()
	a.misprints["A"] = true
	o := opts(a)
	o.CheckOutput = false
	if r, err = Measure(context.Background(), a, o); err != nil {
		t.Fatal(err)
	}
	if !verdict(t, r, "A").Kept {
		t.Error("without --check-output the output is not judged")
	}
}

func TestKernelsThatFailOnlyTogetherAreAllDropped(t *testing.T) {
	a := newApp()
	a.together = []string{"A", "B"}
	r, err := Measure(context.Background(), a, opts(a))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kept) != 0 {
		t.Errorf("kept %v from a tuned file that breaks the run", r.Kept)
	}
	if v := verdict(t, r, "A"); !strings.Contains(v.Reason, "with the tuned kernels together") {
		t.Errorf("A: %q", v.Reason)
	}
}

func TestAnApplicationFailingUntunedIsAnError(t *testing.T) {
	a := newApp()
	a.crashes["A"] = true
	a.files[""] = []string{"A"} // the "untuned" run already has A tuned: it fails
	if _, err := Measure(context.Background(), a, opts(a)); !errors.Is(err, ErrUntunedFails) {
		t.Errorf("err = %v, want ErrUntunedFails", err)
	}
	if _, err := Measure(context.Background(), a, Options{Runs: 1}); err == nil {
		t.Error("one run of each accepted: noise cannot be seen")
	}
}

func TestKernelsWithoutTimingAreNotKept(t *testing.T) {
	a := newApp()
	o := opts(a)
	o.Kernels = append(o.Kernels, "C") // tuned but never launched
	r, err := Measure(context.Background(), a, o)
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, r, "C"); v.Kept || v.Reason != "not launched in the measured runs" {
		t.Errorf("C: %+v", v)
	}
}

func TestAKernelUntimedOnlyInTunedRunsIsDroppedSayingSo(t *testing.T) {
	a := newApp()
	a.untimedTuned = map[string]bool{"A": true}
	r, err := Measure(context.Background(), a, opts(a))
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, r, "A"); v.Kept || v.Reason != "no launch of it was timed in the tuned runs, though the untuned runs timed it" {
		t.Errorf("A: %+v", v)
	}
	// Untimed in every run: the statistics lack it altogether.
	a = newApp()
	a.untunedNS["C"], a.tunedNS["C"] = 0, 0
	o := opts(a)
	o.Kernels = append(o.Kernels, "C")
	if r, err = Measure(context.Background(), a, o); err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, r, "C"); v.Kept || v.Reason != "no in-application timing (launch statistics missing)" {
		t.Errorf("C: %+v", v)
	}
}

func TestSubsetWriterKeepsEntriesAsTheyStand(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "tuned.json")
	os.WriteFile(src, []byte(`{"A": {"config": {"passes": "default<O3>"}, "future_field": [1,2]}, "B": {"config": {}}}`), 0o644)
	s := &SubsetWriter{Source: src, Dir: dir}
	path, err := s.Write([]string{"A"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadTunedEntries(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(string(got["A"]), "future_field") {
		t.Errorf("subset %v", got)
	}
	if _, err := s.Write([]string{"Z"}); err == nil || !strings.Contains(err.Error(), `no kernel "Z"`) {
		t.Errorf("unknown kernel: %v", err)
	}
}

// A kernel launched once has no sampled launch: its first launch's time
// stands for it; where a sample exists, the first launch is set aside.
func TestPerLaunchTimeFallsBackToTheFirstLaunch(t *testing.T) {
	for _, tc := range []struct {
		k    KernelTime
		want float64
	}{
		{KernelTime{Launches: 1, FirstNS: 700}, 700},
		{KernelTime{Launches: 1}, 0},
		{KernelTime{Launches: 5, TimedLaunches: 2, TimedNS: 400, FirstNS: 700}, 200},
		{KernelTime{Launches: 5, TimedLaunches: 2, TimedNS: 400}, 200},
	} {
		if got := tc.k.PerLaunchNS(); got != tc.want {
			t.Errorf("%+v: %v per launch, want %v", tc.k, got, tc.want)
		}
	}
}

// A one-shot kernel (first launches timed only) is judged like the others.
func TestAOneShotKernelIsJudgedByItsFirstLaunch(t *testing.T) {
	a := newApp()
	o := opts(a)
	r, err := Measure(context.Background(), oneShot{a}, o)
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, r, "A"); !v.Kept {
		t.Errorf("A, faster at its only launch, was dropped: %+v", v)
	}
	if v := verdict(t, r, "B"); v.Kept {
		t.Errorf("B, slower at its only launch, was kept: %+v", v)
	}
}

// oneShot is fakeApp whose kernels are each launched once: only their
// first launch is timed.
type oneShot struct{ *fakeApp }

func (o oneShot) Run(ctx context.Context, env []string) (Outcome, error) {
	out, err := o.fakeApp.Run(ctx, env)
	for k, kt := range out.Kernels {
		out.Kernels[k] = KernelTime{Launches: 1, FirstNS: kt.PerLaunchNS()}
	}
	return out, err
}

// A kernel as fast on the GPU tuned but costing the application more around
// it shows only in the application's own timer: the kept set is dropped
// when every run printed that timer and the tuned median is slower beyond
// noise, and kept when the timer agrees or some run printed none.
func TestTheOwnTimerJudgesTheKeptSetToo(t *testing.T) {
	for _, tc := range []struct {
		name             string
		untunedOwn, own  float64
		missing, dropped bool
	}{
		{"own timer slower", 100, 110, false, true},
		{"own timer within noise", 100, 101, false, false},
		{"own timer faster", 100, 90, false, false},
		{"a run printed none", 100, 110, true, false},
	} {
		a := newApp()
		r, err := Measure(context.Background(), &ownTimed{fakeApp: a, untunedOwn: tc.untunedOwn, own: tc.own, missing: tc.missing}, opts(a))
		if err != nil {
			t.Fatal(err)
		}
		if v := verdict(t, r, "A"); v.Kept == tc.dropped {
			t.Errorf("%s: A kept %v, want %v: %+v", tc.name, v.Kept, !tc.dropped, v)
		} else if tc.dropped && !strings.Contains(v.Reason, "own timer") {
			t.Errorf("%s: reason %q does not name the own timer", tc.name, v.Reason)
		}
	}
}

// ownTimed is fakeApp printing an own timer: untuned runs untunedOwn,
// tuned ones own; with missing, every other tuned run prints none.
type ownTimed struct {
	*fakeApp
	untunedOwn, own float64
	missing         bool
	tuned           int
}

func (o *ownTimed) Run(ctx context.Context, env []string) (Outcome, error) {
	out, err := o.fakeApp.Run(ctx, env)
	if strings.TrimPrefix(env[0], EnvTunedKernels+"=") == "" {
		out.OwnTime = o.untunedOwn
	} else {
		o.tuned++
		out.OwnTime = o.own
		if o.missing && o.tuned%2 == 0 {
			out.OwnTime = 0
		}
	}
	return out, err
}

// When kernels kept together make the application slower end to end, each
// is measured alone: the one that costs the application (A) is dropped,
// saying so, and the one that helps alone (B) stays, with its own runs as
// the end-to-end figures. When both help alone but not together, the one
// whose application ran fastest alone stays; when neither helps alone,
// nothing does.
func TestASlowerKeptSetKeepsTheKernelsThatHelpAlone(t *testing.T) {
	faster := func() *fakeApp {
		a := newApp()
		a.tunedNS["B"] = 400 // both faster per launch
		return a
	}
	a := faster()
	a.extraSeconds = map[string]float64{"A": 0.2}
	r, err := Measure(context.Background(), a, opts(a))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Kept, []string{"B"}) {
		t.Fatalf("kept %v, want [B]", r.Kept)
	}
	if v := verdict(t, r, "A"); v.Kept || !strings.Contains(v.Reason, "measured alone") || !strings.Contains(v.Reason, "slower tuned end to end") {
		t.Errorf("A: %+v", v)
	}
	for _, o := range r.Tuned {
		if o.Seconds != 1 {
			t.Errorf("a tuned run of %v s: not of B alone", o.Seconds)
		}
	}

	// Each costs a little, within noise alone, beyond it together.
	a = faster()
	a.extraSeconds = map[string]float64{"A": 0.015, "B": 0.012}
	if r, err = Measure(context.Background(), a, opts(a)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Kept, []string{"B"}) {
		t.Errorf("kept %v, want [B] (the one that costs the application less alone)", r.Kept)
	}
	if v := verdict(t, r, "A"); v.Kept || !strings.Contains(v.Reason, "not together with B") {
		t.Errorf("A: %+v", v)
	}

	// Neither helps alone.
	a = faster()
	a.extraSeconds = map[string]float64{"A": 0.2, "B": 0.2}
	if r, err = Measure(context.Background(), a, opts(a)); err != nil {
		t.Fatal(err)
	}
	if len(r.Kept) != 0 || len(r.Tuned) != 0 {
		t.Errorf("kept %v (tuned runs %d), want nothing", r.Kept, len(r.Tuned))
	}
}

// A kernel whose every tuned launch came while the runtime library loaded
// is not kept: measured, the run waited and its tuned code ran, but
// deployed, the application's own code runs them all. One with some early
// launches is judged by its time as usual.
func TestAKernelLaunchedOnlyBeforeTheLibraryIsReadyIsNotKept(t *testing.T) {
	for _, tc := range []struct {
		early int64
		kept  bool
	}{{10, false}, {9, true}, {0, true}} {
		a := newApp()
		r, err := Measure(context.Background(), &earlyApp{a, tc.early}, opts(a))
		if err != nil {
			t.Fatal(err)
		}
		v := verdict(t, r, "A")
		if v.Kept != tc.kept {
			t.Errorf("%d of 10 launches early: kept %v, want %v (%s)", tc.early, v.Kept, tc.kept, v.Reason)
		}
		if !tc.kept && !strings.Contains(v.Reason, "before the runtime library is ready") {
			t.Errorf("%d early: reason %q", tc.early, v.Reason)
		}
	}
}

// earlyApp is fakeApp whose tuned runs made early launches of A.
type earlyApp struct {
	*fakeApp
	early int64
}

func (e *earlyApp) Run(ctx context.Context, env []string) (Outcome, error) {
	out, err := e.fakeApp.Run(ctx, env)
	if strings.TrimPrefix(env[0], EnvTunedKernels+"=") != "" {
		kt := out.Kernels["A"]
		kt.EarlyLaunches = e.early
		out.Kernels["A"] = kt
	}
	return out, err
}
