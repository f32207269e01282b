package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"gopkg.in/yaml.v3"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/replay"
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
	dumpConfig     string
	dumpVocabulary bool
	quiet          bool
	compileWorkers int
	tolerance      float64
	// noAdaptiveInvalidBan is --no-adaptive-invalid-ban.
	noAdaptiveInvalidBan bool
	// mnemeSpelling is set when the command line is written in Mneme's
	// spelling, which brings Mneme's defaults.
	mnemeSpelling bool
	mneme         mnemeFlags
}

func init() {
	var f tuneFlags
	cmd := &cobra.Command{
		Use:   "tune -rdb DB [-rid ID | --kernel NAME | -rid ID -rid ID...] [flags]",
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

Trial 0 is the baseline: the application's own code when the recording
holds it, else the recompiled recorded configuration; when nothing beats it,
the result says so and best.json names the baseline (trial -1, as Mneme).

--launch-safety safe (the default; Mneme's conservative and balanced mean
the same) keeps the recorded grid and block of a kernel whose code depends on
its block shape, as the IR and a probe replay with another block decide, and
tunes the compiler knobs, launch bounds and specialization only; aggressive
searches block shapes anyway. --adaptive-invalid-ban (on by default; turn it
off with --no-adaptive-invalid-ban) takes a block shape out of the search
once a trial with it ends invalid_launch or runtime_error.

--kernel NAME (every recorded instance of that kernel) or -rid given
several times tunes across instances: each configuration is replayed and
verified on every instance, a failure on one fails the trial, and the
objective is the time the application would see, the sum of each
instance's time times the launches it stands for (by the recording's
launch statistics, else its occurrence counts). Arguments fold only where
the statistics show them invariant or few-valued; where the launch shapes'
best configurations differ, mneme_tuned_kernels.json carries one per shape.

--config FILE.yaml reads the options (as --dump-config prints them); flags
given on the command line win. --print-space and --dry-run need no GPU.

Mneme's spellings are read too and mean the same options (tune/SPACES.md,
"Mneme's spellings"): --record-database/--record-db/--record-id,
--space-preset, --results-dir, the space options --launch-dim, --passes,
--fixed-passes, --pipeline-file, --codegen-opt-range, --fixed-codegen-opt,
--specialize-space/--specialize-dims-space/--launch-bounds-space
fixed|on|off|on-off, --max-threads-policy, --max-threads-range,
--min-blocks-per-sm-range, and --fail-fast/--keep-going, --timeout,
--rerun-baseline, --dump-config PATH, --quiet, --proteus-output,
--no-proteus-output, and a Mneme config.yml (a nested search: mapping is
flattened). A command line in Mneme's spelling gets Mneme's defaults
(sampler random, iterations 5, warmup 2, metric mean, objective time,
results in mneme-tune-results/TIMESTAMP). --space-module <file>.py:Class (a
Python SearchSpace) and Optuna studies (--study-name, --optuna-storage,
--pruner) are proposed by Python and run by this engine (tune/PROTOCOL.md).

Exit codes: 0 done, 1 the baseline did not verify or another failure,
2 bad input, 6 no GPU (the README's table).`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.mnemeSpelling = isMnemeTuneCommandLine(args)
			args, sel, err := extractInstanceFlags(preprocessMnemeArgs(args))
			if err != nil {
				return err
			}
			if helped, err := parseMnemeFlags(cmd, args, "rdb", "rid"); helped || err != nil {
				return err
			}
			fl := cmd.Flags()
			if f.mnemeSpelling {
				if err := applyMnemeDefaults(fl); err != nil {
					return withExit(exitUsage, err)
				}
			}
			if fl.NArg() > 0 {
				return withExit(exitUsage, fmt.Errorf("tune: unexpected arguments %q", fl.Args()))
			}
			return runTune(cmd.OutOrStdout(), cmd.ErrOrStderr(), fl, &f, sel)
		},
	}
	f.register(cmd.Flags())
	rootCmd.AddCommand(cmd)
}

// register defines the flags of mneme tune on fl.
func (f *tuneFlags) register(fl *pflag.FlagSet) {
	o := &f.opts
	fl.StringVar(&o.DB, "rdb", "", "recording database: a directory or one kernel's JSON file (required)")
	fl.StringVar(&o.Instance, "rid", "", "instance id (dynamic hash, unique prefix or SH/DH); optional with one instance")
	fl.StringVar(&o.Sampler, "sampler", "exhaustive", "exhaustive (= grid), random or tpe")
	fl.StringVar(&o.Preset, "preset", "standard", "built-in space: "+strings.Join(tune.PresetNames, ", "))
	fl.StringVar(&o.SpaceFile, "space", "", "declarative space FILE.yaml (instead of --preset)")
	fl.IntVar(&o.Trials, "trials", 0, "trials in all, resumed ones included (0: the whole finite space, else 100)")
	fl.IntVar(&o.Workers, "workers", 1, "worker processes per GPU")
	fl.StringVar(&f.gpus, "gpus", "0", "CUDA devices to use, e.g. 0,1")
	fl.IntVar(&f.compileWorkers, "compile-workers", -1, "compile-only workers that compile ahead on CPU cores (-1: about half the cores, at most 8 per GPU)")
	fl.IntVar(&o.Iterations, "iterations", 7, "timed launches per trial")
	fl.IntVar(&o.Warmup, "warmup", 1, "untimed launches before the timed ones")
	fl.StringVar(&o.Metric, "metric", "median", "statistic of the timed launches: mean, median, min or max")
	fl.StringVar(&o.Objective, "objective", "speedup", "reported value: time (ns) or speedup over the baseline")
	fl.Uint64Var(&o.Seed, "seed", 0, "seed of the random and tpe samplers")
	fl.StringVar(&o.TrialTimeout, "trial-timeout", "", "per-trial limit, e.g. 30s (default: 10x the baseline trial's time plus 30s for compiling)")
	fl.StringVar(&o.Output, "output", "", "results directory (default: tune-<kernel hash>-<instance hash>)")
	fl.StringVar(&o.CacheDir, "cache-dir", "", "compile cache shared by the workers (default: OUTPUT/jit-cache)")
	fl.Float64Var(&o.VariantCostUS, "variant-cost-us", tune.VariantFirstLaunchNS/1000, "across instances: what each variant beyond one that a configuration compiles costs it (its first launch in the application), in microseconds; 0 counts none")
	fl.StringVar(&o.Timer, "timer", "", "kernel timer of every trial: auto (CUPTI if available, else events), cupti or events (deploy measure times the application's launches with events)")
	fl.BoolVar(&o.ColdL2, "cold-l2", false, "evict the L2 cache before every timed launch of every trial (inputs read from device memory, as after other work)")
	fl.StringVar(&o.Verify.Mode, "verify", mneme.VerifyAuto, "output check: auto (floats by the type the kernel writes, within per-type bounds; the rest bitwise), bitwise, \"ulp N\", tolerance or none")
	fl.Float64Var(&f.tolerance, "tolerance", 0, "absolute and relative tolerance for --verify tolerance")
	fl.StringVar(&f.configFile, "config", "", "read options from FILE.yaml; flags given explicitly win")
	fl.BoolVar(&f.resume, "resume", false, "continue the run in --output, skipping finished configurations")
	fl.BoolVar(&f.printSpace, "print-space", false, "print the search space as JSON and exit (no GPU needed)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show what would run (space, sampler, budget, first configurations) and exit (no GPU needed)")
	fl.BoolVar(&f.baselineOnly, "baseline-only", false, "replay the recorded configuration only, write baseline.json and exit")
	fl.StringVar(&o.LaunchSafety, "launch-safety", tune.LaunchSafe, "safe: a geometry-dependent kernel keeps its recorded launch; aggressive: block shapes are searched anyway (conservative and balanced mean safe)")
	fl.BoolVar(&o.AdaptiveInvalidBan, "adaptive-invalid-ban", true, "ban a block shape from further sampling once a trial with it ends invalid_launch or runtime_error")
	fl.BoolVar(&f.noAdaptiveInvalidBan, "no-adaptive-invalid-ban", false, "turn the adaptive invalid ban off")
	fl.StringVar(&f.dumpConfig, "dump-config", "", "print the effective options as YAML (for --config) and exit; --dump-config PATH writes them to PATH (JSON when it ends in .json)")
	fl.Lookup("dump-config").NoOptDefVal = "-"
	fl.BoolVar(&f.dumpVocabulary, "dump-vocabulary", false, "print the tuner's vocabulary as JSON (configuration keys, statuses, presets, option words; python/mneme/vocabulary.json) and exit")
	f.registerMneme(fl)
	registerInstanceFlags(fl)
	fl.BoolP("help", "h", false, "help for tune")
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
	{"cold-l2", "cold_l2", func(d *tune.Options, s tune.Options) { d.ColdL2 = s.ColdL2 }},
	{"timer", "timer", func(d *tune.Options, s tune.Options) { d.Timer = s.Timer }},
	{"variant-cost-us", "variant_cost_us", func(d *tune.Options, s tune.Options) { d.VariantCostUS = s.VariantCostUS }},
	{"verify", "verify", func(d *tune.Options, s tune.Options) { d.Verify.Mode, d.Verify.ULP = s.Verify.Mode, s.Verify.ULP }},
	{"launch-safety", "launch_safety", func(d *tune.Options, s tune.Options) { d.LaunchSafety = s.LaunchSafety }},
	{"adaptive-invalid-ban", "adaptive_invalid_ban", func(d *tune.Options, s tune.Options) { d.AdaptiveInvalidBan = s.AdaptiveInvalidBan }},
	{"launch-dim", "launch_dim", func(d *tune.Options, s tune.Options) { d.LaunchDim = s.LaunchDim }},
	{mneme.KeyPasses, mneme.KeyPasses, func(d *tune.Options, s tune.Options) { d.Passes = s.Passes }},
	{"fixed-passes", "fixed_passes", func(d *tune.Options, s tune.Options) { d.FixedPasses = s.FixedPasses }},
	{"pipeline-file", "pipeline_file", func(d *tune.Options, s tune.Options) { d.PipelineFile = s.PipelineFile }},
	{"codegen-opt-range", "codegen_opt_range", func(d *tune.Options, s tune.Options) { d.CodegenOptRange = s.CodegenOptRange }},
	{"fixed-codegen-opt", "fixed_codegen_opt", func(d *tune.Options, s tune.Options) { d.FixedCodegenOpt = s.FixedCodegenOpt }},
	{"specialize-space", "specialize_space", func(d *tune.Options, s tune.Options) { d.SpecializeSpace = s.SpecializeSpace }},
	{"specialize-dims-space", "specialize_dims_space", func(d *tune.Options, s tune.Options) { d.SpecializeDimsSpace = s.SpecializeDimsSpace }},
	{"launch-bounds-space", "launch_bounds_space", func(d *tune.Options, s tune.Options) { d.LaunchBoundsSpace = s.LaunchBoundsSpace }},
	{"max-threads-policy", "max_threads_policy", func(d *tune.Options, s tune.Options) { d.MaxThreadsPolicy = s.MaxThreadsPolicy }},
	{"max-threads-range", "max_threads_range", func(d *tune.Options, s tune.Options) { d.MaxThreadsRange = s.MaxThreadsRange }},
	{"min-blocks-per-sm-range", "min_blocks_per_sm_range", func(d *tune.Options, s tune.Options) { d.MinBlocksPerSMRange = s.MinBlocksPerSMRange }},
	{"fail-fast", "fail_fast", func(d *tune.Options, s tune.Options) { d.FailFast = s.FailFast }},
	{"timeout", "timeout", func(d *tune.Options, s tune.Options) { d.Timeout = s.Timeout }},
	{"proteus-output", "proteus_output", func(d *tune.Options, s tune.Options) { d.ProteusOutput = s.ProteusOutput }},
	{"no-proteus-output", "no_proteus_output", func(d *tune.Options, s tune.Options) { d.NoProteusOutput = s.NoProteusOutput }},
	{"space-module", "space_module", func(d *tune.Options, s tune.Options) { d.SpaceModule = s.SpaceModule }},
	{"space-arg", "space_arg", func(d *tune.Options, s tune.Options) { d.SpaceArgs = s.SpaceArgs }},
	{"study-name", "study_name", func(d *tune.Options, s tune.Options) { d.StudyName = s.StudyName }},
	{"optuna-storage", "optuna_storage", func(d *tune.Options, s tune.Options) { d.OptunaStorage = s.OptunaStorage }},
	{"pruner", "pruner", func(d *tune.Options, s tune.Options) { d.Pruner = s.Pruner }},
}

// explicitFlag reports whether the command line gave the flag, in either
// spelling.
func explicitFlag(fl *pflag.FlagSet, name string) bool {
	if fl.Changed(name) {
		return true
	}
	for alias, ours := range mnemeAliases {
		if ours == name && fl.Changed(alias) {
			return true
		}
	}
	switch name {
	case "adaptive-invalid-ban":
		return fl.Changed("no-adaptive-invalid-ban")
	case "fail-fast":
		return fl.Changed("keep-going")
	}
	return false
}

// decodeConfigYAML reads a --config file: the options it sets, strictly
// (unknown and repeated keys are errors), and its top-level keys.
// Both spellings are read: Mneme's keys are translated to ours first
// (translateConfigKeys), and run keys (quiet, rerun_baseline) come back apart.
func decodeConfigYAML(name string, data []byte) (tune.Options, map[string]any, map[string]any, error) {
	var fromFile tune.Options
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fromFile, nil, nil, fmt.Errorf("--config %s: %v", name, err)
	}
	raw, run, err := translateConfigKeys(name, doc)
	if err != nil {
		return fromFile, nil, nil, err
	}
	ours, err := yaml.Marshal(raw)
	if err != nil {
		return fromFile, nil, nil, fmt.Errorf("--config %s: %v", name, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(ours))
	dec.KnownFields(true)
	if err := dec.Decode(&fromFile); err != nil && !errors.Is(err, io.EOF) {
		return fromFile, nil, nil, fmt.Errorf("--config %s: %v", name, err)
	}
	return fromFile, raw, run, nil
}

// effectiveOptions layers the flags' defaults, the --config file and the
// flags given explicitly.
func effectiveOptions(fl *pflag.FlagSet, f *tuneFlags) (tune.Options, error) {
	opts := f.opts
	if err := mnemeFlagValues(fl, f, &opts); err != nil {
		return opts, err
	}
	if f.noAdaptiveInvalidBan {
		if fl.Changed("adaptive-invalid-ban") && opts.AdaptiveInvalidBan {
			return opts, errors.New("--adaptive-invalid-ban and --no-adaptive-invalid-ban: give one")
		}
		opts.AdaptiveInvalidBan = false
	}
	gpus, err := parseGPUs(f.gpus)
	if err != nil {
		return opts, err
	}
	opts.GPUs = gpus
	if fl.Changed("tolerance") {
		opts.Verify.ATol, opts.Verify.RTol = f.tolerance, f.tolerance
	}
	if f.configFile != "" {
		data, err := safefile.ReadFile(f.configFile, safefile.MaxConfig)
		if err != nil {
			return opts, fmt.Errorf("--config: %w", err)
		}
		fromFile, raw, run, err := decodeConfigYAML(f.configFile, data)
		if err != nil {
			return opts, err
		}
		if q, ok := run["quiet"].(bool); ok && !fl.Changed("quiet") {
			f.quiet = q
		}
		// Start from the file; a key it lacks takes the flag's default, and
		// every flag given explicitly wins.
		merged := fromFile
		for _, o := range optionFlags {
			explicit := explicitFlag(fl, o.flag)
			if _, inFile := raw[o.key]; !inFile || explicit {
				o.copy(&merged, opts)
			}
		}
		if fl.Changed("tolerance") {
			merged.Verify.ATol, merged.Verify.RTol = opts.Verify.ATol, opts.Verify.RTol
		}
		opts = merged
	}
	// "ulp N" (from the flag or the file) is mode ulp with bound N; a
	// plain "ulp" takes its bound from verify.ulp.
	if opts.Verify.Mode != mneme.VerifyULP {
		mode, ulp, err := mneme.ParseVerifyMode(opts.Verify.Mode)
		if err != nil {
			return opts, fmt.Errorf("--verify %w", err)
		}
		opts.Verify.Mode, opts.Verify.ULP = mode, ulp
	}
	if opts.LaunchSafety, err = tune.ParseLaunchSafety(opts.LaunchSafety); err != nil {
		return opts, err
	}
	if err := tune.ValidateVerify(opts.Verify); err != nil {
		return opts, fmt.Errorf("--verify: %w", err)
	}
	if opts.SpaceFile != "" && explicitFlag(fl, "preset") && f.configFile == "" {
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

func runTune(stdout, stderr io.Writer, fl *pflag.FlagSet, f *tuneFlags, sel instanceSelection) error {
	if f.dumpVocabulary {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(tune.TheVocabulary())
	}
	opts, err := effectiveOptions(fl, f)
	if err != nil {
		return withExit(exitUsage, err)
	}
	if f.mnemeSpelling && opts.Output == "" {
		opts.Output = defaultMnemeResultsDir(time.Now())
	}
	if f.dumpConfig != "" {
		return dumpConfig(stdout, f.dumpConfig, opts)
	}
	self, err := workerBinary()
	if err != nil {
		return fmt.Errorf("finding the mneme binary for its workers: %w", err)
	}
	var proposer tune.ProposerFactory
	if opts.UsesPython() {
		py, err := mnemePython()
		if err != nil {
			return withExit(exitUsage, fmt.Errorf("tune: %w", err))
		}
		proposer = tune.ExecProposer{Python: py, Stderr: stderr}
	}
	ctx, stop := signalContext()
	defer stop()
	ro := tune.RunOptions{
		Proposer: proposer,
		Options:  opts, Resume: f.resume, PrintSpace: f.printSpace, DryRun: f.dryRun, BaselineOnly: f.baselineOnly,
		CompileWorkers: f.compileWorkers, Factory: tune.ExecWorkerFactory{Path: self, Args: []string{"worker"}},
		AnalyzeGeometry: analyzeGeometry, Stats: tune.DBStats, CheckPipeline: replay.ValidatePipeline,
		Progress: func(budget int) tune.ProgressDisplay {
			if f.quiet {
				return nil
			}
			return newProgressBar(stderr, budget)
		},
		Stdout: stdout, Stderr: stderr,
	}
	if sel.active() {
		return runTuneInstances(ctx, ro, sel)
	}
	return tune.Run(ctx, ro)
}

// progressBar shows a study's progress on a terminal.
type progressBar struct{ bar *progressbar.ProgressBar }

// newProgressBar is a bar on stderr when stderr is a terminal, else nil.
func newProgressBar(stderr io.Writer, budget int) tune.ProgressDisplay {
	// The bar draws with carriage returns of its own, which the escaping
	// writer of messages would show: it writes to the terminal itself.
	fd, ok := rawFile(stderr)
	if !ok || !term.IsTerminal(int(fd.Fd())) {
		return nil
	}
	return progressBar{progressbar.NewOptions(budget, progressbar.OptionSetWriter(fd), progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())}
}

func (p progressBar) Update(pr tune.Progress) {
	p.bar.Describe(fmt.Sprintf("trials (%d failed, best %.3fx)", pr.Failures, pr.BestSpeedup))
	_ = p.bar.Set(pr.Done)
}

func (p progressBar) Finish() { _ = p.bar.Finish() }

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
