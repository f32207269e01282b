package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"gopkg.in/yaml.v3"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/spec"
	"github.com/mneme-gpu/mneme/tune"
)

// tuneFlags are the flags of mneme tune besides the Options they fill.
type tuneFlags struct {
	opts           tune.Options
	gpus           string
	configFile     string
	resume         bool
	printSpace     bool
	dryRun         bool
	baselineOnly   bool
	dumpConfig     bool
	compileWorkers int
	tolerance      float64
}

// defaultTrialsInfinite is the budget for a space with a continuous parameter
// when --trials is not given.
const defaultTrialsInfinite = 100

func init() {
	var f tuneFlags
	cmd := &cobra.Command{
		Use:   "tune -rdb DB [-rid ID] [flags]",
		Short: "Search a recorded kernel's configurations for the fastest one that verifies",
		Long: `tune replays one recorded kernel instance under many configurations on
worker processes ("mneme worker", one or more per GPU) and keeps the fastest
configuration whose output still matches the recording.

The space is a built-in preset (--preset quick|standard|launch|compiler|full,
see tune/SPACES.md) or a YAML file (--space). Samplers: exhaustive (= grid),
random, tpe. --trials 0 (the default) tries the whole space when it is finite,
and 100 configurations otherwise.

Results go to --output: config.json, search_space.json, baseline.json,
trials.jsonl (one line per trial, synced as it is written), best.json,
summary.json, logs/tune.log, proteus_tuned_kernels.json and
mneme_tuned_kernels.json. --resume continues a run in the same directory,
skipping finished configurations; it refuses changed key options.

--config FILE.yaml reads the options (as --dump-config prints them); flags
given on the command line win. --print-space and --dry-run need no GPU.

Exit codes: 0 done, 2 bad input, 6 no GPU, 1 other failures.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if helped, err := parseMnemeFlags(cmd, args, "rdb", "rid"); helped || err != nil {
				return err
			}
			fl := cmd.Flags()
			if fl.NArg() > 0 {
				return withExit(exitUsage, fmt.Errorf("tune: unexpected arguments %q", fl.Args()))
			}
			return runTune(cmd.OutOrStdout(), cmd.ErrOrStderr(), fl, &f)
		},
	}
	fl := cmd.Flags()
	o := &f.opts
	fl.StringVar(&o.DB, "rdb", "", "recording database: a directory or one kernel's JSON file (required)")
	fl.StringVar(&o.Instance, "rid", "", "instance id (dynamic hash, unique prefix or SH/DH); optional with one instance")
	fl.StringVar(&o.Sampler, "sampler", "exhaustive", "exhaustive (= grid), random or tpe")
	fl.StringVar(&o.Preset, "preset", "standard", "built-in space: "+strings.Join(tune.PresetNames, ", "))
	fl.StringVar(&o.SpaceFile, "space", "", "declarative space FILE.yaml (instead of --preset)")
	fl.IntVar(&o.Trials, "trials", 0, "trials in all, resumed ones included (0: the whole finite space, else 100)")
	fl.IntVar(&o.Workers, "workers", 1, "worker processes per GPU")
	fl.StringVar(&f.gpus, "gpus", "0", "CUDA devices to use, e.g. 0,1")
	fl.IntVar(&f.compileWorkers, "compile-workers", -1, "compile-only workers that compile ahead on CPU cores (-1: about half the cores, at most 8)")
	fl.IntVar(&o.Iterations, "iterations", 7, "timed launches per trial")
	fl.IntVar(&o.Warmup, "warmup", 1, "untimed launches before the timed ones")
	fl.StringVar(&o.Metric, "metric", "median", "statistic of the timed launches: mean, median, min or max")
	fl.StringVar(&o.Objective, "objective", "speedup", "reported value: time (ns) or speedup over the baseline")
	fl.Uint64Var(&o.Seed, "seed", 0, "seed of the random and tpe samplers")
	fl.StringVar(&o.TrialTimeout, "trial-timeout", "", "per-trial limit, e.g. 30s (default: 10x the baseline trial's time plus 30s for compiling)")
	fl.StringVar(&o.Output, "output", "", "results directory (default: tune-<kernel hash>-<instance hash>)")
	fl.StringVar(&o.CacheDir, "cache-dir", "", "compile cache shared by the workers (default: OUTPUT/jit-cache)")
	fl.StringVar(&o.Verify.Mode, "verify", "bitwise", "output check: bitwise, tolerance or none")
	fl.Float64Var(&f.tolerance, "tolerance", 0, "absolute and relative tolerance for --verify tolerance")
	fl.StringVar(&f.configFile, "config", "", "read options from FILE.yaml; flags given explicitly win")
	fl.BoolVar(&f.resume, "resume", false, "continue the run in --output, skipping finished configurations")
	fl.BoolVar(&f.printSpace, "print-space", false, "print the search space as JSON and exit (no GPU needed)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show what would run (space, sampler, budget, first configurations) and exit (no GPU needed)")
	fl.BoolVar(&f.baselineOnly, "baseline-only", false, "replay the recorded configuration only, write baseline.json and exit")
	fl.BoolVar(&f.dumpConfig, "dump-config", false, "print the effective options as YAML (for --config) and exit")
	fl.BoolP("help", "h", false, "help for tune")
	rootCmd.AddCommand(cmd)
}

// optionFlags are the flags that set a field of Options: the field's YAML key
// in a --config file, and how to copy the field.
var optionFlags = []struct {
	flag, key string
	copy      func(dst *tune.Options, src tune.Options)
}{
	{"rdb", "db", func(d *tune.Options, s tune.Options) { d.DB = s.DB }},
	{"rid", "instance", func(d *tune.Options, s tune.Options) { d.Instance = s.Instance }},
	{"sampler", "sampler", func(d *tune.Options, s tune.Options) { d.Sampler = s.Sampler }},
	{"preset", "preset", func(d *tune.Options, s tune.Options) { d.Preset = s.Preset }},
	{"space", "space_file", func(d *tune.Options, s tune.Options) { d.SpaceFile = s.SpaceFile }},
	{"trials", "trials", func(d *tune.Options, s tune.Options) { d.Trials = s.Trials }},
	{"workers", "workers", func(d *tune.Options, s tune.Options) { d.Workers = s.Workers }},
	{"gpus", "gpus", func(d *tune.Options, s tune.Options) { d.GPUs = s.GPUs }},
	{"iterations", "iterations", func(d *tune.Options, s tune.Options) { d.Iterations = s.Iterations }},
	{"warmup", "warmup", func(d *tune.Options, s tune.Options) { d.Warmup = s.Warmup }},
	{"metric", "metric", func(d *tune.Options, s tune.Options) { d.Metric = s.Metric }},
	{"objective", "objective", func(d *tune.Options, s tune.Options) { d.Objective = s.Objective }},
	{"seed", "seed", func(d *tune.Options, s tune.Options) { d.Seed = s.Seed }},
	{"trial-timeout", "trial_timeout", func(d *tune.Options, s tune.Options) { d.TrialTimeout = s.TrialTimeout }},
	{"output", "output", func(d *tune.Options, s tune.Options) { d.Output = s.Output }},
	{"cache-dir", "cache_dir", func(d *tune.Options, s tune.Options) { d.CacheDir = s.CacheDir }},
	{"verify", "verify", func(d *tune.Options, s tune.Options) { d.Verify.Mode = s.Verify.Mode }},
}

// effectiveOptions layers the flags' defaults, the --config file and the
// flags given explicitly.
func effectiveOptions(fl *pflag.FlagSet, f *tuneFlags) (tune.Options, error) {
	opts := f.opts
	gpus, err := parseGPUs(f.gpus)
	if err != nil {
		return opts, err
	}
	opts.GPUs = gpus
	if fl.Changed("tolerance") {
		opts.Verify.ATol, opts.Verify.RTol = f.tolerance, f.tolerance
	}
	if f.configFile != "" {
		data, err := os.ReadFile(f.configFile)
		if err != nil {
			return opts, fmt.Errorf("--config: %w", err)
		}
		var fromFile tune.Options
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&fromFile); err != nil && !errors.Is(err, io.EOF) {
			return opts, fmt.Errorf("--config %s: %v", f.configFile, err)
		}
		// Start from the file; a key it lacks takes the flag's default, and
		// every flag given explicitly wins.
		merged := fromFile
		var raw map[string]any
		_ = yaml.Unmarshal(data, &raw)
		for _, o := range optionFlags {
			if _, inFile := raw[o.key]; !inFile || fl.Changed(o.flag) {
				o.copy(&merged, opts)
			}
		}
		if fl.Changed("tolerance") {
			merged.Verify.ATol, merged.Verify.RTol = opts.Verify.ATol, opts.Verify.RTol
		}
		opts = merged
	}
	if opts.SpaceFile != "" && fl.Changed("preset") && f.configFile == "" {
		return opts, errors.New("--space and --preset: give one")
	}
	if opts.SpaceFile != "" {
		opts.Preset = ""
	}
	return opts, opts.Validate()
}

func parseGPUs(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--gpus %q: want device ordinals like 0,1", s)
		}
		if seen[n] {
			return nil, fmt.Errorf("--gpus %q: device %d appears twice", s, n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

// tuneTarget is the recorded instance being tuned and the space built for it.
type tuneTarget struct {
	kernel *db.Kernel
	inst   *db.Instance
	launch tune.Launch
	limits tune.Limits
	space  *tune.Space
}

func loadTarget(opts *tune.Options) (*tuneTarget, error) {
	if opts.DB == "" {
		return nil, withExit(exitUsage, errors.New("-rdb: a recording database (directory or kernel .json) is required"))
	}
	d, err := db.Open(opts.DB)
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	k, inst, err := d.Find(opts.Instance)
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	t := &tuneTarget{kernel: k, inst: inst}
	t.launch = tune.Launch{Kernel: k.KernelName, Grid: inst.GridDims, Block: inst.BlockDims, SharedMem: inst.SharedMem, NumArgs: len(k.ArgKinds)}
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
	t.limits = tune.Limits{SMCount: k.Device.SMCount}.WithDefaults()
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

func (t *tuneTarget) buildSpace(opts *tune.Options) error {
	var err error
	if opts.SpaceFile != "" {
		t.space, err = tune.LoadSpaceFile(opts.SpaceFile, t.launch, t.limits)
	} else {
		t.space, err = tune.Preset(opts.Preset, t.launch, t.limits)
	}
	if err != nil {
		return withExit(exitUsage, err)
	}
	opts.SpaceHash = t.space.Hash()
	return nil
}

func runTune(stdout, stderr io.Writer, fl *pflag.FlagSet, f *tuneFlags) error {
	opts, err := effectiveOptions(fl, f)
	if err != nil {
		return withExit(exitUsage, err)
	}
	if f.dumpConfig {
		out, _ := yaml.Marshal(opts)
		_, err := stdout.Write(out)
		return err
	}
	target, err := loadTarget(&opts)
	if err != nil {
		return err
	}
	// Describing a finite space enumerates it to count the feasible points:
	// do it once for the printouts, search_space.json and the budget.
	desc := target.space.Describe()
	size, finite := desc.Size, desc.Finite
	if opts.Trials == 0 && !finite {
		opts.Trials = defaultTrialsInfinite
	}
	sampler, err := tune.NewSampler(opts.Sampler, target.space, opts.Seed)
	if err != nil {
		return withExit(exitUsage, err)
	}
	if f.printSpace {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // pipelines are written default<O3>
		return enc.Encode(desc)
	}
	if f.dryRun {
		return printDryRun(stdout, opts, target, sampler, desc)
	}
	var trialTimeout time.Duration
	if opts.TrialTimeout != "" {
		if trialTimeout, err = time.ParseDuration(opts.TrialTimeout); err != nil || trialTimeout <= 0 {
			return withExit(exitUsage, fmt.Errorf("--trial-timeout %q: want a positive duration like 30s", opts.TrialTimeout))
		}
	}

	// Results directory.
	var res *tune.Results
	var prior []tune.Trial
	if f.resume {
		res, prior, err = tune.ResumeResults(opts.Output, opts)
	} else {
		res, err = tune.CreateResults(opts.Output, opts)
	}
	if err != nil {
		return withExit(exitUsage, err)
	}
	defer res.Close()
	if err := res.WriteJSON(tune.SearchSpaceFile, desc); err != nil {
		return withExit(exitFailure, err)
	}
	logFile, err := os.OpenFile(filepath.Join(opts.Output, tune.LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return withExit(exitFailure, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "%s mneme tune: %s, %s space %q (%d points), sampler %s, trials %d\n",
		time.Now().Format(time.RFC3339), opts.Instance, spaceKind(opts), target.space.Name, size, opts.Sampler, opts.Trials)

	self, err := workerBinary()
	if err != nil {
		return withExit(exitFailure, fmt.Errorf("finding the mneme binary for its workers: %w", err))
	}
	cw := f.compileWorkers
	if cw < 0 {
		cw = min(max(runtime.NumCPU()/2, 1), 8)
	}
	if f.baselineOnly {
		cw = 0
	}
	ex := &tune.Executor{
		Factory: tune.ExecWorkerFactory{Path: self, Args: []string{"worker"}},
		Open: tune.OpenParams{DB: opts.DB, Kernel: target.kernel.StaticHash, Instance: target.inst.DynamicHash,
			Iterations: opts.Iterations, Warmup: opts.Warmup, Verify: opts.Verify, CacheDir: opts.CacheDir},
		GPUs: opts.GPUs, WorkersPerGPU: opts.Workers, CompileWorkers: cw,
		TrialTimeout: trialTimeout, Log: logFile,
	}
	if trialTimeout == 0 {
		ex.TrialTimeout = 10 * time.Minute // the baseline's; trials get the derived default
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := ex.Start(ctx); err != nil {
		if !f.resume {
			// Nothing ran: leave no empty run behind that would refuse a retry.
			res.Close()
			os.Remove(filepath.Join(opts.Output, tune.TrialsFile))
		}
		if errors.Is(err, tune.ErrNoGPU) {
			return withExit(exitNoGPU, fmt.Errorf("tune needs a GPU: %w", err))
		}
		return withExit(exitFailure, err)
	}
	defer ex.Close()
	study := &tune.Study{Space: target.space, Sampler: sampler, Exec: ex, Results: res, Opts: opts, Prior: prior}
	base, err := study.RunBaseline(ctx)
	if err != nil {
		return withExit(exitFailure, err)
	}
	dev, _ := ex.Device()
	gpuName := ""
	if dev != nil {
		gpuName = dev.Name
	}
	fmt.Fprintf(stderr, "baseline: %s on %s: %s (%s of %d launches)\n", target.kernel.Name(), gpuName, fmtNS(base.TimeNS), opts.Metric, opts.Iterations)
	if f.baselineOnly {
		return nil
	}
	budget := opts.Trials
	if budget == 0 {
		budget = int(desc.Feasible)
	}
	var bar *progressbar.ProgressBar
	if fd, ok := stderr.(*os.File); ok && term.IsTerminal(int(fd.Fd())) {
		bar = progressbar.NewOptions(budget, progressbar.OptionSetWriter(stderr), progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	study.Progress = func(p tune.Progress) {
		if bar != nil {
			bar.Describe(fmt.Sprintf("trials (%d failed, best %.3fx)", p.Failures, p.BestSpeedup))
			_ = bar.Set(p.Done)
		}
	}
	runErr := study.Run(ctx)
	if bar != nil {
		_ = bar.Finish()
	}
	sum, err := study.Finish(target.kernel.KernelName, target.kernel.StaticHash, gpuName, size, len(prior))
	if err != nil {
		return withExit(exitFailure, err)
	}
	printBestTable(stdout, study.Trials(), base, sum, opts)
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return withExit(exitFailure, fmt.Errorf("interrupted after %d trials; continue with --resume", sum.Trials))
		}
		return withExit(exitFailure, runErr)
	}
	return nil
}

// workerBinary is the mneme binary that runs `mneme worker`: the command as
// invoked when that is mneme (so a link or wrapper named mneme is honoured),
// else this executable.
func workerBinary() (string, error) {
	if filepath.Base(os.Args[0]) == "mneme" {
		if p, err := exec.LookPath(os.Args[0]); err == nil {
			return filepath.Abs(p)
		}
	}
	return os.Executable()
}

func spaceKind(o tune.Options) string {
	if o.SpaceFile != "" {
		return "file"
	}
	return "preset"
}

func printDryRun(w io.Writer, opts tune.Options, t *tuneTarget, sampler tune.Sampler, d tune.Describe) error {
	fmt.Fprintf(w, "kernel:    %s (%s)\n", t.kernel.Name(), opts.Instance)
	fmt.Fprintf(w, "recorded:  grid %s block %s shared %d\n", t.inst.GridDims, t.inst.BlockDims, t.inst.SharedMem)
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

func bounds(c spec.Config) string {
	if !c.SetLaunchBounds {
		return "-"
	}
	return fmt.Sprintf("%d,%d", c.MaxThreads, c.MinBlocksPerSM)
}

func fmtNS(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.3f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f us", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

// printBestTable prints the best configurations and the run's totals.
func printBestTable(w io.Writer, trials []tune.Trial, base tune.Trial, sum tune.Summary, opts tune.Options) {
	best := tune.Best(trials)
	fmt.Fprintf(w, "%d trials (%d resumed) in %.1f s, %.1f configurations/s; statuses: %s\n",
		sum.Trials, sum.ResumedTrials, sum.ElapsedSeconds, sum.ConfigsPerSec, fmtStatuses(sum.Statuses))
	fmt.Fprintf(w, "baseline: %s\n", fmtNS(base.TimeNS))
	if len(best) == 0 {
		fmt.Fprintln(w, "no configuration verified")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rank\ttrial\ttime\tspeedup\tgrid\tblock\tpasses\tcodegen\tspec\tdims\tbounds\tregs\tptxas")
	for i, t := range best {
		if i == 10 {
			break
		}
		c := t.Config
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.3fx\t%s\t%s\t%s\t%d\t%v\t%v\t%s\t%d\t%d\n", i+1, t.Number, fmtNS(t.TimeNS),
			base.TimeNS/t.TimeNS, c.Grid, c.Block, c.Passes, c.CodegenOpt, c.Specialize, c.SpecializeDims, bounds(c), c.MaxRegisters, c.PtxasOpt)
	}
	tw.Flush()
	fmt.Fprintf(w, "results in %s (best.json, %s, %s)\n", opts.Output, tune.ProteusFile, tune.MnemeTunedFile)
}

func fmtStatuses(m map[string]int) string {
	var parts []string
	for _, s := range []string{spec.StatusVerified, spec.StatusFailedVerification, spec.StatusCompileError, spec.StatusInvalidLaunch,
		spec.StatusInvalidConfig, spec.StatusRuntimeError, spec.StatusTimeout, spec.StatusCrashed, spec.StatusInternalError} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, m[s]))
		}
	}
	return strings.Join(parts, ", ")
}
