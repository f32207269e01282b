// Package optimize takes an application from its build to a faster build in
// one command: it records the application with launch statistics, ranks its
// kernels by their share of the GPU time, tunes those that matter within a
// time budget split by share, measures the application untuned and tuned
// (keeping only kernels that help in it), and writes the tuned files and a
// report. Every stage leaves its results in the output folder, so an
// interrupted run resumes where it stopped, and a run after a code change
// tunes again only the kernels whose IR, GPU, driver, toolchain or launch
// statistics changed.
//
// The stages run the mneme commands (record, tune) and the application
// through the Tools and measure.Runner interfaces, so the decisions here are
// tested without a GPU.
package optimize

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/measure"
	"github.com/mneme-gpu/mneme/report"
	"github.com/mneme-gpu/mneme/tune"
)

// Tools run the mneme commands a stage needs.
type Tools interface {
	// Record records the application into the database folder dbDir.
	Record(ctx context.Context, dbDir string, app []string) error
	// Tune tunes one recorded instance into outDir, continuing the run there
	// with resume; it stops when ctx ends (the budget), keeping what finished.
	Tune(ctx context.Context, job TuneJob) error
}

// TuneJob is one kernel's tuning: across every recorded instance of the
// kernel (each weighted by the launches it stands for), or of the one
// instance named.
type TuneJob struct {
	DB, Output string
	Kernel     string // mangled name
	Instance   string // SH/DH of the representative instance
	Instances  int    // how many instances the kernel has recorded
	Resume     bool
	GPUs       string
	// Study names the kernel's study in an Optuna storage (optuna-dashboard
	// shows it), when Options.OptunaStorage is set.
	Study string
}

// Options of an optimization.
type Options struct {
	App    []string
	Output string // the output folder (tuned files, report, state)
	DB     string // the recording database (default Output/rdb)
	Budget time.Duration
	GPUs   string
	// MinShare selects kernels with at least this share of the GPU time; Top,
	// when positive, the Top largest instead.
	MinShare    float64
	Top         int
	CheckOutput bool
	// OutputFilter is the expression the runner leaves matching output
	// lines out of the comparison with, for the report.
	OutputFilter string
	// OwnTimer is the expression that read the application's own timer
	// from its output (--own-timer); "" when none.
	OwnTimer string
	// TuneConditions names how tuning times the trials when not by default
	// (a timer, a cold L2): part of the result key, since figures taken
	// otherwise do not compare.
	TuneConditions string
	Runs           int // interleaved runs of each, untuned and tuned
	// DeployCost is what deploying costs the application beyond its
	// kernels' time (--deploy-cost-ms): a kept set saving less is dropped,
	// and the prediction adds it.
	DeployCost time.Duration
	// OptunaStorage, when set, has each kernel tuned by an Optuna study kept
	// there (one per kernel and result key), for optuna-dashboard.
	OptunaStorage string
	// Environment names the GPU, driver and toolchain results are keyed by
	// (filled from the recording when empty).
	GPU, Driver, Toolchain string
	Log                    io.Writer // stage lines
}

// Names in the output folder.
const (
	TunedFile    = "mneme_tuned_kernels.json"
	ProteusFile  = "proteus_tuned_kernels.json"
	tuneDir      = "tune"
	candidates   = "candidates.json"
	stateFile    = "optimize-state.json"
	workDir      = "work"
	defaultRuns  = 5
	minKernelRun = 5 * time.Second // below this a kernel's share of the budget tunes nothing useful
)

// state is what a resumed run needs to know of the last one.
type state struct {
	App      []string `json:"app"`
	Recorded bool     `json:"recorded"`
	// Tuned maps a kernel's result key to the tune folder that holds its
	// finished tuning.
	Tuned map[string]string `json:"tuned"`
}

// kernel is one kernel as the stages see it.
type kernel struct {
	stats    db.KernelStats
	rec      *db.Kernel
	instance string // SH/DH of the instance tuned
	key      string // what its tuning result is keyed by
	out      string // its tune folder
	budget   time.Duration
	reused   bool
	status   string
	reason   string
}

// Run optimizes the application: record, rank, tune, measure, report. It
// returns the report (also written to Output).
func Run(ctx context.Context, tools Tools, runner measure.Runner, o Options) (*report.Report, error) {
	if len(o.App) == 0 {
		return nil, errors.New("optimize: no application to run")
	}
	if o.Runs == 0 {
		o.Runs = defaultRuns
	}
	if o.DB == "" {
		o.DB = filepath.Join(o.Output, "rdb")
	}
	if err := os.MkdirAll(o.Output, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{tuneDir, workDir} {
		if err := safefile.MkdirIn(o.Output, d); err != nil {
			return nil, err
		}
	}
	st := readState(o.Output)
	if !equalArgs(st.App, o.App) {
		st = state{App: o.App, Tuned: st.Tuned} // another command line: record again, keep reusable results
	}
	if st.Tuned == nil {
		st.Tuned = map[string]string{}
	}
	rep := &report.Report{Application: o.App[0], Args: o.App[1:], Created: time.Now().UTC().Format(time.RFC3339),
		Budget: o.Budget.String(), GPUs: parseGPUs(o.GPUs)}

	// 1. Record, with launch statistics.
	if !st.Recorded {
		stage(o, "recording %s", strings.Join(o.App, " "))
		os.RemoveAll(o.DB)
		if err := tools.Record(ctx, o.DB, o.App); err != nil {
			return nil, fmt.Errorf("recording the application: %w", err)
		}
		st.Recorded = true
		if err := writeState(o.Output, st); err != nil {
			return nil, err
		}
	} else {
		stage(o, "recording: reusing %s", o.DB)
	}
	kernels, stats, err := rank(o)
	if err != nil {
		return nil, err
	}
	fillEnvironment(&o, kernels)
	rep.GPU, rep.Driver, rep.Toolchain = o.GPU, o.Driver, o.Toolchain

	// 2. Choose and key the kernels to tune, and split the budget by share.
	chosen := choose(kernels, o)
	splitBudget(chosen, o.Budget)
	for _, k := range chosen {
		k.key = resultKey(o, k)
		k.out = filepath.Join(o.Output, tuneDir, k.key)
		if dir, ok := st.Tuned[k.key]; ok && dir == k.out {
			k.reused = true
		}
	}

	// 3. Tune.
	start := time.Now()
	for i, k := range chosen {
		if k.reused {
			stage(o, "tuning %d/%d: %s: reusing the result for the same IR, GPU, driver, toolchain and launches", i+1, len(chosen), k.stats.Name())
			continue
		}
		if k.budget < minKernelRun {
			k.status, k.reason = report.StatusUntuned, fmt.Sprintf("its share of the budget (%s) is too small to tune", k.budget.Round(time.Second))
			continue
		}
		stage(o, "tuning %d/%d: %s (%.1f%% of the GPU time), %s (budget left %s)", i+1, len(chosen), k.stats.Name(), 100*k.stats.TimeShare,
			k.budget.Round(time.Second), budgetLeft(chosen[i:]).Round(time.Second))
		_, statErr := os.Lstat(filepath.Join(k.out, tune.TrialsFile))
		kctx, cancel := context.WithTimeout(ctx, k.budget)
		job := TuneJob{DB: o.DB, Kernel: k.stats.KernelName, Instance: k.instance, Instances: len(k.rec.Instances),
			Output: k.out, Resume: statErr == nil, GPUs: o.GPUs}
		if o.OptunaStorage != "" {
			job.Study = "mneme-optimize-" + k.key
		}
		err := tools.Tune(kctx, job)
		budgetOver := kctx.Err() != nil && ctx.Err() == nil
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted while tuning %s; run the same command again to resume: %w", k.stats.Name(), ctx.Err())
		}
		if err != nil && !budgetOver {
			k.status, k.reason = report.StatusNoResult, "tuning failed: "+firstLine(err.Error())
			continue
		}
		st.Tuned[k.key] = k.out
		if err := writeState(o.Output, st); err != nil {
			return nil, err
		}
	}
	rep.TuningSeconds = time.Since(start).Seconds()
	if tooSmall := countReason(chosen, "too small to tune"); tooSmall > 0 && tooSmall == len(chosen) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("The budget %s is too small for any kernel: each needs at least %s of tuning at its share; give a larger --budget.", o.Budget, minKernelRun))
	}

	// 4. Gather the tuned entries.
	entries := map[string]json.RawMessage{}
	proteus := map[string]json.RawMessage{}
	for _, k := range chosen {
		if k.status != "" {
			continue
		}
		e, err := measure.ReadTunedEntries(filepath.Join(k.out, tune.MnemeTunedFile))
		raw, ok := e[k.stats.KernelName]
		if err != nil || !ok {
			k.status, k.reason = report.StatusNoResult, "no configuration verified and beat the recorded one"
			continue
		}
		var tk struct {
			Speedup float64 `json:"speedup"`
		}
		if json.Unmarshal(raw, &tk) != nil || tk.Speedup <= 1 {
			k.status, k.reason = report.StatusNoResult, fmt.Sprintf("the best configuration did not beat the recorded one in replay (%.2fx)", tk.Speedup)
			continue
		}
		entries[k.stats.KernelName] = raw
		if p, err := measure.ReadTunedEntries(filepath.Join(k.out, tune.ProteusFile)); err == nil {
			if raw, ok := p[k.stats.KernelName]; ok {
				proteus[k.stats.KernelName] = raw
			}
		}
	}

	// 5. Measure in the application.
	work := filepath.Join(o.Output, workDir)
	var res *measure.Result
	if len(entries) > 0 {
		if err := measure.WriteTunedEntries(work, candidates, entries); err != nil {
			return nil, err
		}
		stage(o, "measuring the application untuned and tuned, %d runs each, interleaved", o.Runs)
		names := make([]string, 0, len(entries))
		for n := range entries {
			names = append(names, n)
		}
		sort.Strings(names)
		subsets := &measure.SubsetWriter{Source: filepath.Join(work, candidates), Dir: work}
		res, err = measure.Measure(ctx, runner, measure.Options{Tuned: filepath.Join(work, candidates), Kernels: names, Runs: o.Runs,
			CheckOutput: o.CheckOutput, Subset: subsets.Write, Log: o.Log, Confirm: true, DeployCost: o.DeployCost,
			ConfirmFor: confirmFor(o.Budget, time.Since(start))})
		if err != nil {
			return nil, fmt.Errorf("measuring the application: %w", err)
		}
	} else {
		stage(o, "measuring the application untuned, %d runs", o.Runs)
		res = &measure.Result{OutputSame: true}
		for i := 0; i < o.Runs; i++ {
			out, err := runner.Run(ctx, []string{measure.EnvTunedKernels + "="})
			if err != nil {
				return nil, err
			}
			res.Untuned = append(res.Untuned, out)
		}
		rep.Notes = append(rep.Notes, "No kernel was tuned to a configuration that beat its recorded one: the application runs as it is.")
	}

	// 6. The tuned files: only the kernels kept.
	kept := map[string]json.RawMessage{}
	keptProteus := map[string]json.RawMessage{}
	for _, n := range res.Kept {
		kept[n] = entries[n]
		if p, ok := proteus[n]; ok {
			keptProteus[n] = p
		}
	}
	if err := measure.WriteTunedEntries(o.Output, TunedFile, kept); err != nil {
		return nil, err
	}
	if err := measure.WriteTunedEntries(o.Output, ProteusFile, keptProteus); err != nil {
		return nil, err
	}

	// 7. The report.
	fillReport(rep, o, kernels, chosen, stats, res)
	if err := rep.Write(o.Output); err != nil {
		return nil, err
	}
	page, err := report.HTML(rep)
	if err != nil {
		return nil, err
	}
	if err := report.WriteIn(o.Output, report.FileHTML, page); err != nil {
		return nil, err
	}
	return rep, nil
}

// budgetLeft is the tuning time of the kernels still to tune.
func budgetLeft(ks []*kernel) time.Duration {
	var d time.Duration
	for _, k := range ks {
		if !k.reused && k.budget >= minKernelRun {
			d += k.budget
		}
	}
	return d
}

func countReason(ks []*kernel, part string) int {
	n := 0
	for _, k := range ks {
		if strings.Contains(k.reason, part) {
			n++
		}
	}
	return n
}

// rank reads the recording's kernels and launch statistics, largest share
// first.
func rank(o Options) ([]*kernel, *db.LaunchStats, error) {
	stats, err := db.ReadLaunchStats(o.DB)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%s has no launch statistics: was the application built with the mneme compilers? (%w)", o.DB, err)
		}
		return nil, nil, err
	}
	d, err := db.Open(o.DB)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	byName := map[string]*db.Kernel{}
	if d != nil {
		for _, k := range d.Kernels {
			byName[k.KernelName] = k
		}
	}
	var out []*kernel
	for _, ks := range stats.Kernels {
		k := &kernel{stats: ks, rec: byName[ks.KernelName]}
		if k.rec != nil {
			k.instance = representative(k.rec, ks)
		}
		out = append(out, k)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].stats.TimeShare > out[j].stats.TimeShare })
	return out, stats, nil
}

// representative picks the recorded instance that stands for most of the
// kernel's GPU time: the one whose shape took the most time, by the shape
// table; the most frequent instance when shapes do not tell.
func representative(k *db.Kernel, ks db.KernelStats) string {
	best, bestScore := "", -1.0
	ids := make([]string, 0, len(k.Instances))
	for id := range k.Instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		inst := k.Instances[id]
		score := float64(inst.Occurrences) * 1e-9
		if s := ks.ShapeOf(inst.GridDims, inst.BlockDims, inst.SharedMem); s != nil {
			score += float64(s.GPUTimeNs)
		}
		if score > bestScore {
			best, bestScore = k.StaticHash+"/"+id, score
		}
	}
	return best
}

// choose marks kernels below the share threshold (or beyond the top N) and
// those without a recorded instance as untuned, and returns the rest.
func choose(ks []*kernel, o Options) []*kernel {
	var chosen []*kernel
	for i, k := range ks {
		switch {
		case o.Top > 0 && i >= o.Top:
			k.status, k.reason = report.StatusUntuned, fmt.Sprintf("not among the top %d", o.Top)
		case o.Top <= 0 && k.stats.TimeShare < o.MinShare:
			k.status, k.reason = report.StatusUntuned, fmt.Sprintf("share %.1f%% below %.1f%%", 100*k.stats.TimeShare, 100*o.MinShare)
		case k.instance == "":
			k.status, k.reason = report.StatusUntuned, "no recorded launch (beyond the recording limits)"
		default:
			chosen = append(chosen, k)
		}
	}
	return chosen
}

// confirmFor is how long the end-to-end confirmation may spend on pairs
// beyond its first --runs: what tuning left of the budget, at most the
// measure package's own bound (so the command ends near its budget), and
// at least a nanosecond, which measure reads as "no extra pairs".
func confirmFor(budget, used time.Duration) time.Duration {
	return min(max(budget-used, time.Nanosecond), 2*time.Minute)
}

// splitBudget gives each chosen kernel the budget times its share of the
// chosen kernels' time.
func splitBudget(ks []*kernel, budget time.Duration) {
	total := 0.0
	for _, k := range ks {
		total += k.stats.TimeShare
	}
	for _, k := range ks {
		if total > 0 {
			k.budget = time.Duration(float64(budget) * k.stats.TimeShare / total)
		} else {
			k.budget = budget / time.Duration(max(1, len(ks)))
		}
	}
}

// resultKey keys a kernel's tuning result: its IR, the GPU, the driver, the
// toolchain, the compiler's revision, and the class of its launches (shapes and which arguments held
// still), so a result is reused only where it would be found again.
func resultKey(o Options, k *kernel) string {
	h := xxh3.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field(k.stats.KernelName)
	field(irHash(o.DB, k.rec))
	field(o.GPU)
	field(o.Driver)
	field(o.Toolchain)
	field(launchClass(k.stats))
	field(mneme.CompilerRevision) // results found with other code are found again
	if o.TuneConditions != "" {
		field(o.TuneConditions) // absent by default: earlier results keep their keys
	}
	sum := h.Sum128().Bytes()
	return hex.EncodeToString(sum[:8])
}

// irHash is the hash of the kernel's recorded IR module ("" when unreadable).
func irHash(dbDir string, k *db.Kernel) string {
	if k == nil || len(k.Modules) == 0 {
		return ""
	}
	data, err := safefile.ReadFileIn(dbDir, k.Modules[0], safefile.MaxIR)
	if err != nil {
		return ""
	}
	sum := xxh3.Hash128(data).Bytes()
	return hex.EncodeToString(sum[:])
}

// launchClass summarises a kernel's launches as tuning sees them: the shapes
// that took time and, per argument, invariant or not and how many values.
func launchClass(ks db.KernelStats) string {
	var parts []string
	for _, s := range ks.Shapes {
		parts = append(parts, fmt.Sprintf("%v/%v/%d", s.GridDims, s.BlockDims, s.SharedMem))
	}
	sort.Strings(parts)
	for _, a := range ks.Args {
		parts = append(parts, fmt.Sprintf("a%d:%v:%d:%v", a.Index, a.Invariant, a.Distinct, a.MoreValues))
	}
	return strings.Join(parts, ",")
}

// fillEnvironment takes the GPU, driver and toolchain from the recording
// where the options leave them empty.
func fillEnvironment(o *Options, ks []*kernel) {
	for _, k := range ks {
		if k.rec == nil {
			continue
		}
		if o.GPU == "" {
			o.GPU = k.rec.Device.Name
		}
		if o.Driver == "" && k.rec.Device.DriverVersion > 0 {
			o.Driver = fmt.Sprintf("%d.%d", k.rec.Device.DriverVersion/1000, k.rec.Device.DriverVersion%1000/10)
		}
		if o.Toolchain == "" {
			t := k.rec.Toolchain
			o.Toolchain = strings.TrimSpace(fmt.Sprintf("mneme %s, LLVM %s", t.Mneme, t.LLVM))
		}
		return
	}
}

// fillReport puts every kernel's figures and the end-to-end times into rep.
func fillReport(rep *report.Report, o Options, all, chosen []*kernel, stats *db.LaunchStats, res *measure.Result) {
	verdicts := map[string]measure.Verdict{}
	for _, v := range res.Verdicts {
		verdicts[v.Name] = v
	}
	// The end-to-end figures are the confirmation's runs, as the
	// application runs deployed; the kernels' GPU times come from the
	// counted rounds.
	untuned, tuned := res.EndToEnd()
	rep.EndToEnd.UntunedSeconds = measure.Seconds(untuned)
	rep.EndToEnd.TunedSeconds = measure.Seconds(tuned)
	rep.EndToEnd.OutputChecked = o.CheckOutput
	if o.CheckOutput {
		rep.EndToEnd.OutputFilter = o.OutputFilter
	}
	rep.EndToEnd.OutputSame = res.OutputSame
	if o.OwnTimer != "" {
		rep.EndToEnd.OwnTimer = o.OwnTimer
		rep.EndToEnd.UntunedOwn = measure.OwnTimes(untuned)
		rep.EndToEnd.TunedOwn = measure.OwnTimes(tuned)
	}
	if len(rep.EndToEnd.TunedSeconds) == 0 {
		// Nothing tuned: the application as it is, which is the untuned run.
		rep.EndToEnd.TunedSeconds = rep.EndToEnd.UntunedSeconds
	}
	gpuSeconds := inAppGPUSeconds(res.Untuned)
	for _, k := range all {
		rk := report.Kernel{Name: k.stats.KernelName, Demangled: k.stats.DemangledName, Share: k.stats.TimeShare,
			Launches: int64(k.stats.Launches), Status: k.status, Reason: k.reason, Reused: k.reused,
			GPUSeconds: float64(k.stats.GPUTimeNs) / 1e9}
		if s, ok := gpuSeconds[k.stats.KernelName]; ok {
			rk.GPUSeconds = s
		}
		if k.rec != nil {
			rk.IRHash = irHash(o.DB, k.rec)
		}
		if k.out != "" {
			addTuning(&rk, k)
		}
		if v, ok := verdicts[k.stats.KernelName]; ok {
			rk.MeasuredSpeedup = v.Speedup
			rk.InAppUntunedNS, rk.InAppTunedNS = v.UntunedNS, v.TunedNS
			if v.Kept {
				rk.Status = report.StatusKept
				rk.Reason = v.Reason
			} else {
				rk.Status, rk.Reason = report.StatusDropped, v.Reason
			}
		}
		if rk.Status == "" {
			rk.Status = report.StatusUntuned
		}
		rep.Kernels = append(rep.Kernels, rk)
	}
	report.SortByShare(rep.Kernels)
	rep.EndToEnd.DeployCostSeconds = o.DeployCost.Seconds()
	rep.EndToEnd.PredictedTunedSeconds = report.PredictTuned(report.Median(rep.EndToEnd.UntunedSeconds), rep.Kernels, rep.EndToEnd.DeployCostSeconds)
	reused := 0
	for _, k := range chosen {
		if k.reused {
			reused++
		}
	}
	if reused > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d kernel(s) reused their tuning from an earlier run: same IR, GPU, driver, toolchain and launches.", reused))
	}
	if len(res.Kept) == 0 && len(chosen) > 0 {
		rep.Notes = append(rep.Notes, "No tuned kernel helped in the application: the tuned file is empty; run the application as it is, without MNEME_TUNED_KERNELS.")
	}
	for _, rk := range rep.Kernels {
		if rk.FailedTrials != "" {
			name := rk.Demangled
			if name == "" {
				name = rk.Name
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: failed trials: %s.", name, rk.FailedTrials))
		}
	}
	if stats != nil && !stats.Complete {
		rep.Notes = append(rep.Notes, "The recording's launch statistics are incomplete: the recorded run did not finish.")
	}
}

// inAppGPUSeconds is each kernel's GPU time in the median untuned run, by
// its sampled time per launch times its launches.
func inAppGPUSeconds(runs []measure.Outcome) map[string]float64 {
	per := map[string][]float64{}
	for _, r := range runs {
		for name, kt := range r.Kernels {
			per[name] = append(per[name], kt.PerLaunchNS()*float64(kt.Launches)/1e9)
		}
	}
	out := map[string]float64{}
	for name, xs := range per {
		out[name] = report.Median(xs)
	}
	return out
}

// addTuning reads a kernel's tune folder into its report entry: replay's
// speedup, the configuration, the baseline and the tuning curve.
func addTuning(rk *report.Kernel, k *kernel) {
	if e, err := measure.ReadTunedEntries(filepath.Join(k.out, tune.MnemeTunedFile)); err == nil {
		type class struct {
			Grid, Block mneme.Dim3
			SharedMem   uint32         `json:"shared_mem"`
			Config      map[string]any `json:"config"`
		}
		var tk struct {
			Speedup        float64        `json:"speedup"`
			BaselineTimeNS float64        `json:"baseline_time_ns"`
			Config         map[string]any `json:"config"`
			RecordedGrid   mneme.Dim3     `json:"recorded_grid"`
			RecordedBlock  mneme.Dim3     `json:"recorded_block"`
			Classes        []class        `json:"classes"`
		}
		if raw, ok := e[k.stats.KernelName]; ok && json.Unmarshal(raw, &tk) == nil {
			rk.PredictedSpeedup = finite(tk.Speedup)
			rk.BaselineNS = finite(tk.BaselineTimeNS)
			if len(tk.Classes) == 0 {
				shape := fmt.Sprintf("every launch (recorded: grid %v block %v)", tk.RecordedGrid, tk.RecordedBlock)
				rk.Classes = append(rk.Classes, report.Class{Shape: shape, Config: tk.Config})
			}
			for _, c := range tk.Classes {
				shape := fmt.Sprintf("grid %v block %v shared %d", c.Grid, c.Block, c.SharedMem)
				rk.Classes = append(rk.Classes, report.Class{Shape: shape, Config: c.Config})
			}
		}
	}
	trials, _, err := tune.ReadTrials(filepath.Join(k.out, tune.TrialsFile))
	if err != nil {
		return
	}
	for _, t := range trials {
		rk.Trials = append(rk.Trials, report.Trial{Number: t.Number, TimeNS: finite(t.TimeNS), Status: string(t.Status), Params: t.Params})
	}
	rk.FailedTrials = tune.FailurePattern(trials)
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0
	}
	return v
}

func stage(o Options, format string, a ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "mneme optimize: "+format+"\n", a...)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func equalArgs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func parseGPUs(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d", &n); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func readState(dir string) state {
	var st state
	data, err := safefile.ReadFileIn(dir, stateFile, safefile.MaxJSON)
	if err == nil {
		json.Unmarshal(data, &st) // a damaged state starts over
	}
	return st
}

func writeState(dir string, st state) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return report.WriteIn(dir, stateFile, append(data, '\n'))
}
