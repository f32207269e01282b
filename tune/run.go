package tune

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/geometry"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// RunOptions are one tuning run as `mneme tune` starts it: the options, what
// to do with them, and where the workers come from.
type RunOptions struct {
	Options        Options // effective options; Instance, Kernel, Output, CacheDir and SpaceHash are filled in
	Resume         bool    // continue the run in Options.Output, skipping finished configurations
	PrintSpace     bool    // print the search space as JSON and stop (no GPU needed)
	DryRun         bool    // show what would run and stop (no GPU needed)
	BaselineOnly   bool    // replay the recorded configuration only, write baseline.json and stop
	CompileWorkers int     // compile-only workers; negative: about half the cores, at most 8 per GPU
	// Factory starts the worker processes (for mneme, `mneme worker`).
	Factory WorkerFactory
	// AnalyzeGeometry reads the kernel's launch-geometry facts from its IR;
	// without it every kernel counts as geometry-dependent.
	AnalyzeGeometry GeometryAnalyzer
	// CheckPipeline, when set, checks a pipeline text (LLVM parses it): a
	// pipeline choice of the space that fails is bad input at load, not a
	// point counted feasible that every trial of fails.
	CheckPipeline func(string) error
	// Stats, when set, gives the kernel's launch statistics, and what may be
	// folded follows them (DecideFold, within MaxVariants, by default
	// deploy.DefaultMaxVariants); unset, folding is as the space says.
	Stats       StatsSource
	MaxVariants int
	// Proposer, when set, starts the Python side that proposes points for
	// a --space-module class or an Optuna study (PROTOCOL.md).
	Proposer ProposerFactory
	// Progress, when set, makes a display for a study of budget trials; it
	// may return nil for none.
	Progress func(budget int) ProgressDisplay
	Stdout   io.Writer // the space, the dry run, the table of the best configurations
	Stderr   io.Writer // the baseline and the progress
}

// ProgressDisplay shows a running study's progress, as a terminal progress
// bar does.
type ProgressDisplay interface {
	Update(Progress)
	Finish()
}

// defaultTrialsInfinite is the budget for a space with a continuous parameter
// when no trial count is given.
const defaultTrialsInfinite = 100

// Run tunes the recorded instance the options name: it builds the space and
// the sampler, opens (or, with Resume, continues) the results directory,
// starts the workers, replays the baseline and runs the study, and prints the
// best configurations. Cancelling ctx stops the study; what finished stays
// in the results directory for Resume.
//
// Bad options, database or space are a *mneme.InputError; a machine without
// a GPU matches mneme.ErrNoGPU.
func Run(ctx context.Context, ro RunOptions) error {
	opts := ro.Options
	if opts.UsesPython() && ro.Proposer == nil {
		return mneme.BadInput(errors.New("--space-module and Optuna studies need the Python proposer (PROTOCOL.md), which this caller does not start"))
	}
	if err := CheckWorkers(opts.Workers, len(opts.GPUs), ro.CompileWorkers); err != nil {
		return err
	}
	// Python starts while the recording loads, and the workers while it
	// opens the space (earlyExecutor): its start-up is most of what
	// proposing from Python costs.
	var conn *ProposerConn
	if opts.UsesPython() {
		var err error
		if conn, err = ro.Proposer.StartProposer(ctx); err != nil {
			return err
		}
		defer conn.Close()
	}
	target, err := loadTarget(&opts)
	if err != nil {
		return err
	}
	trialTimeout, timeoutErr := parseTrialTimeout(opts)
	var early *earlyExecutor
	if opts.UsesPython() && !ro.PrintSpace && !ro.DryRun && !ro.Resume && ro.Factory != nil && timeoutErr == nil {
		early = startEarly(ctx, ro, opts, target, trialTimeout)
		defer early.abandon()
	}
	var sampler Sampler
	propose := func() error {
		ps, space, _, err := openProposer(conn, opts, target, target.space)
		if err != nil {
			return err
		}
		target.space, target.proposing, sampler = space, true, ps
		opts.SpaceHash = space.Hash()
		return nil
	}
	// A Python class is the space itself; Optuna proposes points of the
	// space as launch safety leaves it.
	if opts.SpaceModule != "" {
		if err := propose(); err != nil {
			return err
		}
	}
	if err := checkPipelines(target.space, ro.CheckPipeline); err != nil {
		return err
	}
	geo, err := target.applyLaunchSafety(&opts, ro.AnalyzeGeometry, target.dbDir, ro.Resume)
	if err != nil {
		return err
	}
	if err := target.useStats(&opts, ro.Stats, ro.MaxVariants); err != nil {
		return err
	}
	if opts.UsesPython() && opts.SpaceModule == "" {
		if err := propose(); err != nil {
			return err
		}
	}
	// Describing a finite space enumerates it to count the feasible points:
	// do it once for the printouts, search_space.json and the budget.
	desc := target.space.Describe()
	if opts.Trials == 0 && !desc.Finite {
		opts.Trials = defaultTrialsInfinite
	}
	if sampler == nil {
		if sampler, err = NewSampler(opts.Sampler, target.space, opts.Seed); err != nil {
			return mneme.BadInput(err)
		}
	}
	if ro.PrintSpace {
		enc := json.NewEncoder(ro.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // pipelines are written default<O3>
		return enc.Encode(desc)
	}
	if ro.DryRun {
		return printDryRun(ro.Stdout, opts, target, sampler, desc, geo)
	}
	if timeoutErr != nil {
		return timeoutErr
	}
	res, prior, logFile, err := openRun(opts, ro.Resume, desc)
	if err != nil {
		return err
	}
	defer res.Close()
	defer logFile.Close()
	fmt.Fprintf(logFile, "%s mneme tune: %s, %s space %q (%d points), sampler %s, trials %d, adaptive invalid ban %v\n",
		time.Now().Format(time.RFC3339), opts.Instance, spaceKind(opts), target.space.Name, desc.Size, opts.Sampler, opts.Trials, opts.AdaptiveInvalidBan)
	fmt.Fprintf(logFile, "%s %s\n", time.Now().Format(time.RFC3339), geo.Note)

	var ex *Executor
	if early != nil {
		ex, err = early.take(logFile)
	} else {
		ex = newExecutor(ro, opts, target, trialTimeout, logFile)
		err = ex.Start(ctx)
	}
	if err != nil {
		if !ro.Resume {
			// Nothing ran: leave no empty run behind that would refuse a retry.
			res.Close()
			os.Remove(filepath.Join(opts.Output, TrialsFile))
		}
		if errors.Is(err, mneme.ErrNoGPU) {
			return fmt.Errorf("tune needs a GPU: %w", err)
		}
		return err
	}
	defer ex.Close()
	study := &Study{Space: target.space, Sampler: sampler, Exec: ex, Results: res, Opts: opts, Prior: prior,
		BaselineConfigs: target.baselines(), Geometry: &geo, Log: logFile}
	return runTrials(ctx, ro, study, target, desc)
}

// parseTrialTimeout reads --trial-timeout; zero when not given.
func parseTrialTimeout(opts Options) (time.Duration, error) {
	if opts.TrialTimeout == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(opts.TrialTimeout)
	if err != nil || d <= 0 {
		return 0, mneme.BadInput(fmt.Errorf("--trial-timeout %q: want a positive duration like 30s", opts.TrialTimeout))
	}
	return d, nil
}

// openRun creates (or, resuming, reopens) the results directory, writes
// the space's description into it and opens its log for appending.
func openRun(opts Options, resume bool, desc Describe) (*Results, []Trial, *os.File, error) {
	res, prior, err := createOrResume(opts, resume)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := res.WriteJSON(SearchSpaceFile, desc); err != nil {
		res.Close()
		return nil, nil, nil, err
	}
	logFile, err := safefile.CreateIn(opts.Output, LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		res.Close()
		return nil, nil, nil, err
	}
	return res, prior, logFile, nil
}

// trialBudget is the number of trials a study runs: the options' count, or
// every feasible point of a finite space.
func trialBudget(opts Options, desc Describe) int {
	if opts.Trials == 0 {
		return int(desc.Feasible)
	}
	return opts.Trials
}

// runWithProgress runs the study, with a progress display for budget
// trials when progress makes one; an error the Python proposer met counts
// as the run's.
func runWithProgress(ctx context.Context, study *Study, budget int, progress func(int) ProgressDisplay) error {
	var display ProgressDisplay
	if progress != nil {
		display = progress(budget)
	}
	if display != nil {
		study.Progress = display.Update
	}
	err := study.Run(ctx)
	if ps, ok := study.Sampler.(*ProposerSampler); ok && err == nil {
		err = ps.Err()
	}
	if display != nil {
		display.Finish()
	}
	return err
}

// probe replays one block shape other than the recorded one, before the
// search, when the IR calls the kernel geometry-agnostic and safe launch
// safety would otherwise let block shapes be searched. A probe that does not
// verify makes the kernel dependent: the space is rebuilt with the recorded
// launch, and config.json and search_space.json are rewritten. It returns
// the (possibly new) space description.
func probe(ctx context.Context, study *Study, t *target, desc Describe) (Describe, error) {
	geo := study.Geometry
	if len(study.Prior) > 0 || geo.Probed || geo.Dependent || !geo.LaunchSearched || geo.LaunchSafety != LaunchSafe || t.proposing {
		return desc, nil
	}
	base := study.Space.Baseline
	cfg, ok := probeConfigWhere(base, t.limits, func(c mneme.Config) bool {
		return !study.Space.exactCover() || geometry.CoversExactly(c.Grid, c.Block, base.Grid, base.Block)
	})
	if !ok {
		return desc, nil
	}
	study.Exec.Submit(Job{ID: -1, Config: cfg})
	var r JobResult
	select {
	case r = <-study.Exec.Results():
	case <-ctx.Done():
		return desc, ctx.Err()
	}
	geo.Probed, geo.ProbeBlock, geo.ProbeStatus = true, cfg.Block, r.Status
	if r.Status == mneme.StatusVerified {
		geo.Reasons = append(geo.Reasons, fmt.Sprintf("a probe replay with block %s verified", cfg.Block))
		geo.describe(study.Space)
		study.logf("geometry probe: block %s (grid %s) verified; block shapes are searched", cfg.Block, cfg.Grid)
		return desc, writeGeometry(study.Results, geo)
	}
	geo.Dependent = true
	geo.Reasons = append(geo.Reasons, fmt.Sprintf("but a probe replay with block %s ended %s, so it is treated as dependent", cfg.Block, r.Status))
	study.logf("geometry probe: block %s (grid %s) ended %s %s; the kernel is treated as geometry-dependent and keeps its recorded launch", cfg.Block, cfg.Grid, r.Status, r.Error)
	if err := t.fixLaunch(&study.Opts); err != nil {
		return desc, err
	}
	sampler, err := NewSampler(study.Opts.Sampler, t.space, study.Opts.Seed)
	if err != nil {
		return desc, mneme.BadInput(err)
	}
	study.Space, study.Sampler = t.space, sampler
	geo.describe(t.space)
	desc = t.space.Describe()
	if study.Results != nil {
		if err := study.Results.WriteJSON(ConfigFile, study.Opts); err != nil {
			return desc, err
		}
		if err := study.Results.WriteJSON(SearchSpaceFile, desc); err != nil {
			return desc, err
		}
	}
	return desc, writeGeometry(study.Results, geo)
}

func writeGeometry(res *Results, geo *GeometryReport) error {
	if res == nil {
		return nil
	}
	return res.WriteJSON(GeometryFile, geo)
}

// baselines are the baseline candidates: the application's own code when the
// recording holds it, then the recompiled recorded configuration.
func (t *target) baselines() []mneme.Config {
	recompiled := t.space.Baseline
	if t.kernel.DeviceCode == "" {
		return []mneme.Config{recompiled}
	}
	if _, err := os.Stat(filepath.Join(t.dbDir, t.kernel.DeviceCode)); err != nil {
		return []mneme.Config{recompiled}
	}
	original := mneme.Baseline(recompiled.Grid, recompiled.Block, recompiled.SharedMem)
	original.Original = true
	return []mneme.Config{original, recompiled}
}

// createOrResume creates the results directory, or reopens it to resume.
func createOrResume(opts Options, resume bool) (*Results, []Trial, error) {
	var res *Results
	var prior []Trial
	var err error
	if resume {
		res, prior, err = ResumeResults(opts.Output, opts)
	} else {
		res, err = CreateResults(opts.Output, opts)
	}
	return res, prior, mneme.BadInput(err)
}

// newExecutor sets up the workers: run workers on every GPU and, unless only
// the baseline runs, compile-only workers that compile ahead.
func newExecutor(ro RunOptions, opts Options, t *target, trialTimeout time.Duration, log io.Writer) *Executor {
	cw := ro.CompileWorkers
	if cw < 0 {
		// Compiling a trial (LLVM on a core) takes longer than timing a
		// short kernel: each GPU's run workers need about 8 compiling
		// ahead, so a second GPU gets its own 8 where the cores allow.
		cw = min(max(runtime.NumCPU()/2, 1), 8*max(len(opts.GPUs), 1))
	}
	if ro.BaselineOnly {
		cw = 0
	}
	ex := &Executor{
		Factory: ro.Factory,
		Open: OpenParams{DB: opts.DB, Kernel: t.kernel.StaticHash, Instance: t.inst.DynamicHash,
			Iterations: opts.Iterations, Warmup: opts.Warmup, Verify: opts.Verify, CacheDir: opts.CacheDir, ColdL2: opts.ColdL2, Timer: opts.Timer},
		GPUs: opts.GPUs, WorkersPerGPU: opts.Workers, CompileWorkers: cw,
		TrialTimeout: trialTimeout, Log: log,
	}
	if trialTimeout == 0 {
		ex.TrialTimeout = 10 * time.Minute // the baseline's; trials get the derived default
	}
	return ex
}

// runTrials replays the baseline, runs the trials with the progress display
// and prints the best configurations.
func runTrials(ctx context.Context, ro RunOptions, study *Study, t *target, desc Describe) error {
	base, err := study.RunBaseline(ctx)
	if err != nil {
		return err
	}
	if !ro.BaselineOnly {
		if desc, err = probe(ctx, study, t, desc); err != nil {
			return err
		}
	}
	if err := writeGeometry(study.Results, study.Geometry); err != nil {
		return err
	}
	opts := study.Opts
	dev, _ := study.Exec.Device()
	gpuName := ""
	if dev != nil {
		gpuName = dev.Name
	}
	fmt.Fprintf(ro.Stderr, "baseline: %s on %s: %s (%s of %d launches; trial 0, %s)\n", t.kernel.Name(), gpuName, fmtNS(base.TimeNS), opts.Metric, opts.Iterations, baselineKind(base.Config))
	fmt.Fprintln(ro.Stderr, study.Geometry.Note)
	if t.fold != nil {
		fmt.Fprintln(ro.Stderr, t.fold)
		fmt.Fprintln(ro.Stderr, t.coverage())
	}
	if ro.BaselineOnly {
		return nil
	}
	runErr := runWithProgress(ctx, study, trialBudget(opts, desc), ro.Progress)
	sum, err := study.Finish(t.kernel.KernelName, t.kernel.StaticHash, gpuName, desc.Size, len(study.Prior))
	if err != nil {
		return err
	}
	if err := t.noteFolding(study, sum); err != nil {
		return err
	}
	printBestTable(ro.Stdout, study.Trials(), base, sum, opts)
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return fmt.Errorf("interrupted after %d trials; continue with --resume", sum.Trials)
		}
		return runErr
	}
	return nil
}

// target is the recorded instance being tuned and the space built for it.
type target struct {
	dbDir  string // the directory the recording's files live in
	kernel *db.Kernel
	inst   *db.Instance
	launch Launch
	limits mneme.DeviceLimits
	space  *Space
	// fold and stats are the folding the run's statistics allowed, when a
	// statistics source was given (useStats).
	fold  *FoldPolicy
	stats *KernelStats
	// proposing is set when the Python proposer chooses the points.
	proposing bool
}

// loadTarget finds the instance in the database and builds its space; it
// fills in the options that follow from the instance.
func loadTarget(opts *Options) (*target, error) {
	if opts.DB == "" {
		return nil, mneme.BadInput(errors.New("-rdb: a recording database (directory or kernel .json) is required"))
	}
	d, err := db.Open(opts.DB)
	if err != nil {
		return nil, mneme.BadInput(err)
	}
	k, inst, err := d.Find(opts.Instance)
	if err != nil {
		return nil, mneme.BadInput(err)
	}
	t := &target{dbDir: d.Dir, kernel: k, inst: inst}
	t.launch = Launch{Kernel: k.KernelName, Grid: inst.GridDims, Block: inst.BlockDims, SharedMem: inst.SharedMem, NumArgs: len(k.ArgKinds), MachineCode: k.MachineCodeOnly()}
	if t.launch.MachineCode {
		t.launch.EmbeddedPTX = embedsPTX(filepath.Join(t.dbDir, k.DeviceCode), k.Device.Arch)
	}
	if len(k.Specializations) > t.launch.NumArgs {
		t.launch.NumArgs = len(k.Specializations)
	}
	for i, scalar := range k.Specializations {
		if scalar {
			t.launch.ScalarArgs = append(t.launch.ScalarArgs, i)
		}
	}
	// The database knows the SM count; the other limits are the same on
	// every current NVIDIA GPU, and workers report the real ones.
	t.limits = mneme.DeviceLimits{SMCount: k.Device.SMCount}.WithDefaults()
	if err := t.buildSpace(opts); err != nil {
		return nil, err
	}
	opts.Instance = k.StaticHash + "/" + inst.DynamicHash
	opts.Kernel = k.KernelName
	if opts.Output == "" {
		opts.Output = fmt.Sprintf("tune-%.8s-%.8s", k.StaticHash, inst.DynamicHash)
	}
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(opts.Output, "jit-cache")
	}
	return t, nil
}

// checkPipelines checks every pipeline choice of the space with check (nil:
// none checked).
func checkPipelines(space *Space, check func(string) error) error {
	if check == nil {
		return nil
	}
	for _, p := range space.Params {
		if p.Kind != KindPipeline {
			continue
		}
		for _, c := range p.Choices {
			if text, ok := c.(string); ok {
				if err := check(text); err != nil {
					return mneme.BadInput(fmt.Errorf("space %s: parameter %q: pipeline %q: %v", space.Name, p.Name, text, err))
				}
			}
		}
	}
	return nil
}

// buildSpace builds the preset or the space file the options name.
func (t *target) buildSpace(opts *Options) error {
	var err error
	if opts.SpaceFile != "" {
		t.space, err = LoadSpaceFile(opts.SpaceFile, t.launch, t.limits)
	} else {
		t.space, err = ShapedPreset(opts.Preset, opts.SpaceShape, t.launch, t.limits)
	}
	if err != nil {
		return mneme.BadInput(err)
	}
	opts.SpaceHash = t.space.Hash()
	return nil
}

// spaceKind says, for the log, where the space came from.
func spaceKind(o Options) string {
	if o.SpaceFile != "" {
		return "file"
	}
	return "preset"
}

// printDryRun shows what a run would do: the instance, the space, the
// sampler's budget and its first configurations.
func printDryRun(w io.Writer, opts Options, t *target, sampler Sampler, d Describe, geo GeometryReport) error {
	fmt.Fprintf(w, "kernel:    %s (%s)\n", t.kernel.Name(), opts.Instance)
	fmt.Fprintf(w, "recorded:  grid %s block %s shared %d\n", t.inst.GridDims, t.inst.BlockDims, t.inst.SharedMem)
	fmt.Fprintf(w, "baseline:  trial 0, %s\n", baselineKind(t.baselines()[0]))
	fmt.Fprintf(w, "launch:    %s\n", geo.Note)
	fmt.Fprintf(w, "ban:       adaptive invalid ban %v\n", opts.AdaptiveInvalidBan)
	if t.fold != nil {
		fmt.Fprintf(w, "folding:   %s\n", t.fold)
		fmt.Fprintf(w, "shapes:    %s\n", t.coverage())
	}
	fmt.Fprintf(w, "space:     %s, %d parameters", d.Name, len(d.Params))
	if d.Finite {
		fmt.Fprintf(w, ", %d points, %d feasible", d.Size, d.Feasible)
	} else {
		fmt.Fprintf(w, ", continuous")
	}
	fmt.Fprintln(w)
	trials := opts.Trials
	if trials == 0 {
		trials = int(d.Feasible)
	}
	fmt.Fprintf(w, "sampler:   %s (seed %d), %d trials, %d workers on GPUs %v, %d+%d launches each\n",
		sampler.Name(), opts.Seed, trials, opts.Workers*len(opts.GPUs), opts.GPUs, opts.Warmup, opts.Iterations)
	fmt.Fprintf(w, "output:    %s\n", opts.Output)
	fmt.Fprintln(w, "first configurations:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tgrid\tblock\tpasses\tcodegen\tspec\tdims\tbounds\tregs\tptxas")
	shown := 0
	for shown < 10 {
		pt, ok := sampler.Ask()
		if !ok {
			break
		}
		c, err := t.space.Evaluate(pt)
		if err != nil {
			continue
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%v\t%v\t%s\t%d\t%d\n", shown, c.Grid, c.Block, c.Passes, c.CodegenOpt, c.Specialize, c.SpecializeDims, bounds(c), c.MaxRegisters, c.PtxasOpt)
		shown++
	}
	return tw.Flush()
}

// bounds shows a configuration's launch bounds for the tables.
func bounds(c mneme.Config) string {
	if !c.SetLaunchBounds {
		return "-"
	}
	return fmt.Sprintf("%d,%d", c.MaxThreads, c.MinBlocksPerSM)
}

// fmtNS shows a kernel time in a readable unit.
func fmtNS(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.3f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f us", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

// printBestTable prints the best configurations and the run's totals, and
// says plainly when nothing beat the baseline.
func printBestTable(w io.Writer, trials []Trial, base Trial, sum Summary, opts Options) {
	best := Best(trials)
	fmt.Fprintf(w, "%d trials (%d resumed) in %.1f s, %.1f configurations/s; statuses: %s\n",
		sum.Trials, sum.ResumedTrials, sum.ElapsedSeconds, sum.ConfigsPerSec, fmtStatuses(sum.Statuses))
	if sum.FailurePattern != "" {
		fmt.Fprintln(w, "failed trials:", sum.FailurePattern)
	}
	fmt.Fprintf(w, "baseline: %s (trial 0, %s)\n", fmtNS(base.TimeNS), sum.Baseline)
	if sum.Geometry != "" {
		fmt.Fprintln(w, sum.Geometry)
	}
	if len(sum.BannedBlocks) > 0 {
		fmt.Fprintf(w, "adaptive invalid ban: blocks %s banned, %d proposals skipped\n", strings.Join(sum.BannedBlocks, " "), sum.BannedSkips)
	}
	if sum.BaselineIsBest {
		line := "nothing beat the baseline: best is the baseline (" + sum.Baseline + "), speedup 1.00x"
		if tuned := BestTuned(trials); len(tuned) > 0 {
			line += fmt.Sprintf("; the fastest other configuration, trial %d, reached %.3fx", tuned[0].Number, base.TimeNS/tuned[0].TimeNS)
		} else {
			line += "; no other configuration verified"
		}
		fmt.Fprintln(w, line)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rank\ttrial\ttime\tspeedup\tgrid\tblock\tpasses\tcodegen\tspec\tdims\tbounds\tregs\tptxas")
	for i, t := range best {
		if i == 10 {
			break
		}
		c := t.Config
		number := strconv.Itoa(t.Number)
		if t.IsBaseline() {
			number += " (baseline)"
		}
		passes := c.Passes
		if c.Original {
			passes = "(application's code)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.3fx\t%s\t%s\t%s\t%d\t%v\t%v\t%s\t%d\t%d\n", i+1, number, fmtNS(t.TimeNS),
			base.TimeNS/t.TimeNS, c.Grid, c.Block, passes, c.CodegenOpt, c.Specialize, c.SpecializeDims, bounds(c), c.MaxRegisters, c.PtxasOpt)
	}
	tw.Flush()
	if sum.BaselineIsBest {
		fmt.Fprintf(w, "results in %s (best.json names the baseline; the tuned-kernel files were not changed)\n", opts.Output)
		return
	}
	fmt.Fprintf(w, "results in %s (best.json, %s, %s)\n", opts.Output, ProteusFile, MnemeTunedFile)
}

// fmtStatuses lists the trial counts of every status that occurred.
func fmtStatuses(m map[mneme.Status]int) string {
	var parts []string
	for _, s := range []mneme.Status{mneme.StatusVerified, mneme.StatusFailedVerification, mneme.StatusCompileError, mneme.StatusInvalidLaunch,
		mneme.StatusInvalidConfig, mneme.StatusRuntimeError, mneme.StatusTimeout, mneme.StatusCrashed, mneme.StatusInternalError} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, m[s]))
		}
	}
	return strings.Join(parts, ", ")
}
