// Package measure answers whether tuned kernels make an application faster
// where it counts: in the application, by its own runs. It runs the
// application untuned and tuned several times, interleaved (so drift in the
// machine's clocks or load falls on both alike), checks every run's exit
// code and, on request, that the output is the same, reads each kernel's
// in-application time per launch from the launch statistics the runtime
// writes, and keeps only the kernels that are not slower there. When the
// tuned application fails, each kernel is tried alone to find the ones
// responsible.
//
// The package runs processes through the Runner interface and reads
// statistics through a function, so its decisions are tested without a GPU.
package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"time"
)

// EnvLaunchStats names the file the in-application runtime writes its
// launch statistics to when the process exits (see db/FORMAT.md).
const EnvLaunchStats = "MNEME_LAUNCH_STATS"

// EnvTunedKernels is the runtime's tuned-kernels file variable.
const EnvTunedKernels = "MNEME_TUNED_KERNELS"

// KernelTime is one kernel's launches and timed launches in one run.
type KernelTime struct {
	Launches      int64   // every launch of the run
	TimedLaunches int64   // the launches timed with events (a bounded sample)
	TimedNS       float64 // their summed GPU time
	// FirstNS is the mean GPU time of its shapes' first launches, timed
	// apart from the sample; 0 when none was timed.
	FirstNS float64
	// EarlyLaunches were made while the runtime library loaded beside the
	// application: the run waited for it, a deployed run without counting
	// runs the application's own code for them.
	EarlyLaunches int64
}

// PerLaunchNS is the mean time of a timed launch: of the sample, or of the
// first launches when nothing else was timed (a kernel launched once);
// 0 when none was timed.
func (k KernelTime) PerLaunchNS() float64 {
	if k.TimedLaunches <= 0 {
		return k.FirstNS
	}
	return k.TimedNS / float64(k.TimedLaunches)
}

// Outcome of one process.
type Outcome struct {
	Seconds  float64
	ExitCode int
	// OutputHash identifies the standard output; Output holds its start, for
	// a message when it differs.
	OutputHash uint64
	Output     []byte
	// OwnTime is the application's own timer, read from its output with
	// the runner's own-timer expression; 0 when none is given or it printed
	// none.
	OwnTime float64
	Kernels map[string]KernelTime // by mangled name; nil without statistics
}

// Runner runs the application once with extra environment variables.
type Runner interface {
	Run(ctx context.Context, env []string) (Outcome, error)
}

// Options of a measurement.
type Options struct {
	// Tuned is the tuned-kernels file; Kernels its kernels (mangled names).
	Tuned   string
	Kernels []string
	// Runs is the number of untuned and of tuned runs (at least 2).
	Runs        int
	CheckOutput bool
	// Predicted is replay's speedup per kernel, for the table (optional).
	Predicted map[string]float64
	// Subset writes a tuned file holding only the named kernels and returns
	// its path (used to try kernels alone when the tuned run fails).
	Subset func(kernels []string) (string, error)
	Log    io.Writer // progress lines; nil for none
	// Confirm measures the kept set end to end once more as the
	// application will run it (Confirmation): its runs give the end-to-end
	// figures, and a kept set slower there is dropped. MaxPairs (0: 4 x
	// Runs), Precision (0: 2%) and ConfirmFor (0: 2 minutes) bound its
	// extra pairs.
	Confirm    bool
	MaxPairs   int
	Precision  float64
	ConfirmFor time.Duration
	// DeployCost is what deploying costs the application beyond its
	// kernels' time: loading the runtime library beside it and unloading it
	// at exit. A kept set whose kernels save less GPU time in the
	// application than this is expected to make it slower, and is dropped
	// (0: not weighed).
	DeployCost time.Duration
}

// Verdict is one tuned kernel's judgement.
type Verdict struct {
	Name             string
	Launches         int64
	UntunedNS        []float64 // per run, mean time per timed launch
	TunedNS          []float64
	Speedup          float64 // median untuned / median tuned; 0 when not measured
	PredictedSpeedup float64
	Kept             bool
	Reason           string // why it was dropped, or a remark when kept
}

// Result is a whole measurement.
type Result struct {
	Untuned, Tuned []Outcome
	Verdicts       []Verdict
	// OutputSame is true when the tuned runs printed what the untuned ones
	// did (only meaningful with CheckOutput).
	OutputSame bool
	// Kept are the kernels a tuned file should keep.
	Kept []string
	// Confirmed is the kept set's confirmation (Options.Confirm); nil when
	// not asked or nothing was kept before it. A set it dropped keeps its
	// untuned runs, not its tuned ones.
	Confirmed *Confirmation
}

// EndToEnd are the runs that give a result's end-to-end figures: the
// confirmation's where there is one, else the last round's.
func (r *Result) EndToEnd() (untuned, tuned []Outcome) {
	if r.Confirmed != nil {
		return r.Confirmed.Untuned, r.Confirmed.Tuned
	}
	return r.Untuned, r.Tuned
}

// ErrUntunedFails means the application fails without any tuned kernel:
// nothing can be judged.
var ErrUntunedFails = errors.New("the application fails untuned")

// maxRounds bounds the re-measurements of a shrinking kept set.
const maxRounds = 3

// Measure runs the application opts.Runs times untuned and tuned,
// alternating which goes first, and judges every tuned kernel. When some
// kernels are dropped, the kernels kept are measured again on their own
// (their tuned file is what the application will run), until the kept set
// holds; the last round's end-to-end times (wall time, and the
// application's own timer where the runner reads one) then decide whether
// the kept set helps the application as a whole: tuned slower than untuned
// beyond the noise of the untuned runs keeps only what helps alone
// (keepWhatHelpsAlone), so a deployment is a measured win or a no-op.
func Measure(ctx context.Context, r Runner, opts Options) (*Result, error) {
	if opts.Runs < 2 {
		return nil, fmt.Errorf("measure: %d runs; at least 2 of each are needed to see noise", opts.Runs)
	}
	verdicts := map[string]Verdict{}
	kernels := append([]string(nil), opts.Kernels...)
	round := opts
	var res *Result
	for n := 1; ; n++ {
		var err error
		if res, err = measureRound(ctx, r, round); err != nil {
			return nil, err
		}
		for _, v := range res.Verdicts {
			verdicts[v.Name] = v
		}
		if len(res.Kept) == 0 || len(res.Kept) == len(round.Kernels) || n == maxRounds {
			break
		}
		logf(opts.Log, "measure: %d of %d kernel(s) kept; measuring them on their own", len(res.Kept), len(round.Kernels))
		file, err := opts.Subset(res.Kept)
		if err != nil {
			return nil, err
		}
		round.Tuned, round.Kernels = file, res.Kept
	}
	kept := res.Kept
	if len(kept) > 0 {
		if why := slowerEndToEnd(res); why != "" {
			var err error
			if kept, res, err = keepWhatHelpsAlone(ctx, r, round, res, why, verdicts); err != nil {
				return nil, err
			}
		}
	}
	if len(kept) > 0 && opts.DeployCost > 0 {
		if saved := Saved(verdicts, kept); saved < opts.DeployCost.Seconds() {
			why := fmt.Sprintf("its launches save %s of GPU time in the application, less than deploying costs it (%s: the runtime library loaded beside it and unloaded at exit)",
				fmtDuration(saved), fmtDuration(opts.DeployCost.Seconds()))
			logf(opts.Log, "measure: the kept kernel(s) together: %s; no kernel is kept", why)
			drop(verdicts, kept, why)
			kept = nil
		}
	}
	if len(kept) > 0 && opts.Confirm {
		var err error
		if kept, err = confirmKept(ctx, r, opts, res, kept, verdicts); err != nil {
			return nil, err
		}
	}
	if len(kept) == 0 && len(res.Tuned) > 0 {
		// What stays deployed is nothing: the application as it is.
		res.Tuned = nil
	}
	res.Kept = kept
	res.Verdicts = res.Verdicts[:0]
	for _, k := range kernels {
		res.Verdicts = append(res.Verdicts, verdicts[k])
	}
	sort.SliceStable(res.Verdicts, func(i, j int) bool { return res.Verdicts[i].Name < res.Verdicts[j].Name })
	return res, nil
}

// drop marks the kernels ks not kept, for why.
func drop(verdicts map[string]Verdict, ks []string, why string) {
	for _, k := range ks {
		v := verdicts[k]
		v.Kept, v.Reason = false, why
		verdicts[k] = v
	}
}

// Saved is the GPU time the kept kernels save the application in one run,
// in seconds: each one's launches times the difference of its median
// in-application times per launch untuned and tuned (none where a kernel
// was not timed both ways).
func Saved(verdicts map[string]Verdict, kept []string) float64 {
	saved := 0.0
	for _, k := range kept {
		v := verdicts[k]
		if len(v.UntunedNS) == 0 || len(v.TunedNS) == 0 {
			continue
		}
		saved += float64(v.Launches) * (median(v.UntunedNS) - median(v.TunedNS)) / 1e9
	}
	return saved
}

// fmtDuration prints seconds in the unit that reads best.
func fmtDuration(s float64) string {
	switch a := math.Abs(s); {
	case a >= 1:
		return fmt.Sprintf("%.2f s", s)
	case a >= 1e-3:
		return fmt.Sprintf("%.2f ms", s*1e3)
	default:
		return fmt.Sprintf("%.1f us", s*1e6)
	}
}

// confirmKept confirms the kept set end to end (res.Confirmed) and returns
// what stays kept: all of it, or nothing when the application fails,
// prints differently or runs slower with it there (each kernel's verdict
// then says so, and the confirmation keeps no tuned runs: what stays
// deployed is the application as it is).
func confirmKept(ctx context.Context, r Runner, opts Options, res *Result, kept []string, verdicts map[string]Verdict) ([]string, error) {
	file := opts.Tuned
	if !slices.Equal(slices.Sorted(slices.Values(kept)), slices.Sorted(slices.Values(opts.Kernels))) {
		if opts.Subset == nil {
			return nil, errors.New("measure: no way to write the kept kernels' tuned file")
		}
		var err error
		if file, err = opts.Subset(kept); err != nil {
			return nil, err
		}
	}
	logf(opts.Log, "measure: confirming %d kept kernel(s) end to end, without launch statistics", len(kept))
	c, why, err := confirm(ctx, r, file, opts)
	if err != nil {
		return nil, err
	}
	res.Confirmed = c
	if why == "" {
		why = c.slower()
	}
	if why == "" {
		logf(opts.Log, "measure: confirmed over %d runs each (noise %.1f%%)", len(c.Tuned), 100*c.Noise)
		return kept, nil
	}
	logf(opts.Log, "measure: %s; no kernel is kept", why)
	drop(verdicts, kept, why)
	c.Tuned = nil
	return nil, nil
}

// maxAlone bounds the kernels of a kept set that is slower end to end
// which are measured one by one before the whole set is dropped.
const maxAlone = 4

// keepWhatHelpsAlone handles a kept set whose application ran slower end to
// end (why): every kernel of a set of 2 to maxAlone is measured alone, the
// ones not slower alone are measured together, and what holds is kept (the
// kernels that helped alone together, else the one the application gained
// most with alone); the others are dropped, saying why. With one kernel, or
// nothing that helps alone, nothing is kept. It returns the kernels kept
// and the round that decided (its runs are the end-to-end figures).
func keepWhatHelpsAlone(ctx context.Context, r Runner, round Options, res *Result, why string, verdicts map[string]Verdict) ([]string, *Result, error) {
	set := res.Kept
	if len(set) < 2 || len(set) > maxAlone {
		logf(round.Log, "measure: %s; no kernel is kept", why)
		drop(verdicts, set, why)
		return nil, res, nil
	}
	logf(round.Log, "measure: %s with %d kernels together; measuring each alone", why, len(set))
	var helped []string
	alone := map[string]*Result{}
	for _, k := range set {
		file, err := round.Subset([]string{k})
		if err != nil {
			return nil, nil, err
		}
		one := round
		one.Tuned, one.Kernels = file, []string{k}
		r1, err := measureRound(ctx, r, one)
		if err != nil {
			return nil, nil, err
		}
		alone[k] = r1
		if w := slowerEndToEnd(r1); w != "" || len(r1.Kept) != 1 {
			if w == "" {
				w = r1.Verdicts[0].Reason
			}
			drop(verdicts, []string{k}, w+" (measured alone, after the kept kernels together ran slower)")
			continue
		}
		helped = append(helped, k)
	}
	switch len(helped) {
	case 0:
		return nil, res, nil
	case 1:
		return helped, alone[helped[0]], nil
	}
	file, err := round.Subset(helped)
	if err != nil {
		return nil, nil, err
	}
	together := round
	together.Tuned, together.Kernels = file, helped
	rt, err := measureRound(ctx, r, together)
	if err != nil {
		return nil, nil, err
	}
	if slowerEndToEnd(rt) == "" && len(rt.Kept) == len(helped) {
		return helped, rt, nil
	}
	// Together they still cost the application: the one that helped most
	// alone stays, by the application's own timer where it has one, else
	// by wall time (the untuned median over the tuned, each alone round's).
	gain := func(r *Result) float64 {
		u, t := OwnTimes(r.Untuned), OwnTimes(r.Tuned)
		if len(u) == 0 || len(t) == 0 {
			u, t = Seconds(r.Untuned), Seconds(r.Tuned)
		}
		if mt := median(t); mt > 0 {
			return median(u) / mt
		}
		return 0
	}
	best := helped[0]
	for _, k := range helped[1:] {
		if gain(alone[k]) > gain(alone[best]) {
			best = k
		}
	}
	drop(verdicts, without(helped, map[string]string{best: ""}), "each helped alone, but not together with "+best)
	return []string{best}, alone[best], nil
}

// slowerEndToEnd says why the tuned runs of a round count as slower than
// the untuned ones: their median wall time, or the application's own timer
// where every run printed it, above the untuned median by more than the
// untuned runs' own spread (at least 2%); "" when not. The own timer sees
// what the wall time of a short program drowns: a kernel whose tuned code
// is as fast on the GPU but costs the application more around it.
func slowerEndToEnd(res *Result) string {
	if mt, mu, tol, slower := slowerBy(Seconds(res.Untuned), Seconds(res.Tuned)); slower {
		return fmt.Sprintf("the application ran slower tuned end to end (%.3f s against %.3f s untuned, noise %.1f%%)", mt, mu, 100*tol)
	}
	if mt, mu, tol, slower := slowerBy(OwnTimes(res.Untuned), OwnTimes(res.Tuned)); slower {
		return fmt.Sprintf("the application's own timer says it ran slower tuned (%.4g against %.4g untuned, in its units; noise %.1f%%)", mt, mu, 100*tol)
	}
	return ""
}

// slowerBy compares tuned with untuned times (lower is better): the
// medians and the tolerance, and whether the tuned median exceeds the
// untuned one by more than the untuned runs' spread (at least 2%).
func slowerBy(u, t []float64) (mt, mu, tol float64, slower bool) {
	if len(u) == 0 || len(t) == 0 {
		return 0, 0, 0, false
	}
	mu, mt = median(u), median(t)
	tol = math.Max(0.02, spread(u))
	return mt, mu, tol, mt > mu*(1+tol)
}

// OwnTimes lists the runs' own timers; nil unless every run printed one.
func OwnTimes(runs []Outcome) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		if r.OwnTime <= 0 {
			return nil
		}
		out[i] = r.OwnTime
	}
	return out
}

// measureRound runs one interleaved measurement of opts.Kernels and judges
// them. A warm-up run of each comes first and is not counted: the first
// tuned run fills the deployment cache, which every later run reads.
func measureRound(ctx context.Context, r Runner, opts Options) (*Result, error) {
	res := &Result{OutputSame: true}
	failed := map[string]string{} // kernel → why the tuned application failed with it
	tunedFile := opts.Tuned
	active := append([]string(nil), opts.Kernels...)
	if _, err := r.Run(ctx, []string{EnvTunedKernels + "=" + tunedFile}); err != nil {
		return nil, err
	}
	for i := 0; i < opts.Runs; i++ {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, tuned := range order {
			if tuned && len(active) == 0 {
				continue
			}
			env := []string{EnvTunedKernels + "="}
			if tuned {
				env = []string{EnvTunedKernels + "=" + tunedFile}
			}
			out, err := r.Run(ctx, env)
			if err != nil {
				return nil, err
			}
			if !tuned {
				if out.ExitCode != 0 {
					return nil, fmt.Errorf("%w (exit code %d)", ErrUntunedFails, out.ExitCode)
				}
				res.Untuned = append(res.Untuned, out)
				continue
			}
			if why := differs(out, res.Untuned, opts.CheckOutput); why != "" {
				// Find the kernels responsible, drop them, and measure the rest
				// from here on.
				culprits, err := blame(ctx, r, opts, active, res.Untuned)
				if err != nil {
					return nil, err
				}
				if len(culprits) == 0 {
					// Only all together fail: drop them all rather than ship a tuned
					// file that breaks the run.
					for _, k := range active {
						culprits[k] = "the application " + why + " with the tuned kernels together"
					}
				}
				for k, w := range culprits {
					failed[k] = w
				}
				active = without(active, culprits)
				res.Tuned = nil // earlier tuned runs included the culprits
				if len(active) == 0 {
					break
				}
				if tunedFile, err = opts.Subset(active); err != nil {
					return nil, err
				}
				logf(opts.Log, "measure: dropped %d kernel(s) that break the application; measuring the other %d again", len(culprits), len(active))
				i = -1 // start the interleaved repeats over
				res.Untuned = res.Untuned[:0]
				break
			}
			res.Tuned = append(res.Tuned, out)
		}
	}
	res.Verdicts = judge(opts, res, failed)
	for _, v := range res.Verdicts {
		if v.Kept {
			res.Kept = append(res.Kept, v.Name)
		}
	}
	if opts.CheckOutput {
		// The tuned file that stays (culprits dropped) prints what the
		// application prints untuned.
		for _, o := range res.Tuned {
			if len(res.Untuned) > 0 && o.OutputHash != res.Untuned[0].OutputHash {
				res.OutputSame = false
			}
		}
	}
	return res, nil
}

// differs says how a tuned run differs from the untuned runs: its exit
// code, or (with checkOutput) its output; "" when it does not.
func differs(out Outcome, untuned []Outcome, checkOutput bool) string {
	if out.ExitCode != 0 {
		return fmt.Sprintf("exits with code %d", out.ExitCode)
	}
	if checkOutput && len(untuned) > 0 && out.OutputHash != untuned[0].OutputHash {
		return "prints a different output"
	}
	return ""
}

// blame runs the application with each kernel alone and returns those with
// which it fails, and how.
func blame(ctx context.Context, r Runner, opts Options, kernels []string, untuned []Outcome) (map[string]string, error) {
	culprits := map[string]string{}
	for _, k := range kernels {
		file, err := opts.Subset([]string{k})
		if err != nil {
			return nil, err
		}
		out, err := r.Run(ctx, []string{EnvTunedKernels + "=" + file})
		if err != nil {
			return nil, err
		}
		if why := differs(out, untuned, opts.CheckOutput); why != "" {
			culprits[k] = "the application " + why + " with this kernel tuned"
			logf(opts.Log, "measure: %s: %s", k, culprits[k])
		}
	}
	return culprits, nil
}

func without(ks []string, drop map[string]string) []string {
	var out []string
	for _, k := range ks {
		if _, ok := drop[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// judge compares each kernel's in-application time per launch untuned and
// tuned. A kernel is kept when its median tuned time is no larger than its
// median untuned time: the target is that no kept kernel is slower in the
// application, so a tie within noise is dropped rather than risked.
func judge(opts Options, res *Result, failed map[string]string) []Verdict {
	var out []Verdict
	for _, name := range opts.Kernels {
		v := Verdict{Name: name, PredictedSpeedup: opts.Predicted[name]}
		for _, o := range res.Untuned {
			if kt, ok := o.Kernels[name]; ok {
				v.Launches = max(v.Launches, kt.Launches)
				if ns := kt.PerLaunchNS(); ns > 0 {
					v.UntunedNS = append(v.UntunedNS, ns)
				}
			}
		}
		allEarly := len(res.Tuned) > 0
		for _, o := range res.Tuned {
			kt := o.Kernels[name]
			if ns := kt.PerLaunchNS(); ns > 0 {
				v.TunedNS = append(v.TunedNS, ns)
			}
			allEarly = allEarly && kt.Launches > 0 && kt.EarlyLaunches >= kt.Launches
		}
		switch {
		case failed[name] != "":
			v.Reason = failed[name]
		case v.Launches == 0:
			v.Reason = "not launched in the measured runs"
		case allEarly:
			// Measured, its tuned code ran (the run waited for the library);
			// deployed, none of its launches would.
			v.Reason = "every launch of it comes before the runtime library is ready: deployed, they run the application's own code"
		case len(v.UntunedNS) > 0 && len(v.TunedNS) == 0:
			// The untuned runs timed it: its tuned launches were not (they ran
			// before the runtime library was ready, say).
			v.Reason = "no launch of it was timed in the tuned runs, though the untuned runs timed it"
		case len(v.UntunedNS) == 0 || len(v.TunedNS) == 0:
			v.Reason = "no in-application timing (launch statistics missing)"
		default:
			v.Speedup = median(v.UntunedNS) / median(v.TunedNS)
			noise := spread(v.UntunedNS)
			if v.Speedup >= 1 {
				v.Kept = true
				if v.Speedup < 1+noise {
					v.Reason = fmt.Sprintf("within noise (%.1f%%)", 100*noise)
				}
			} else {
				v.Reason = fmt.Sprintf("slower in the application (%.2fx, noise %.1f%%)", v.Speedup, 100*noise)
			}
			if v.PredictedSpeedup > 0 && v.Kept && v.Speedup < 0.95*v.PredictedSpeedup && v.Reason == "" {
				v.Reason = fmt.Sprintf("below replay's prediction %.2fx", v.PredictedSpeedup)
			}
		}
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is (max - min) / median: how far repeats of one measurement stray.
func spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return (hi - lo) / median(xs)
}

func logf(w io.Writer, format string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", a...)
	}
}

// Seconds lists the wall times of runs.
func Seconds(runs []Outcome) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		out[i] = r.Seconds
	}
	return out
}
