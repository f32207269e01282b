package main

import (
	"bytes"
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
	dumpConfig     bool
	compileWorkers int
	tolerance      float64
	// noAdaptiveInvalidBan is --no-adaptive-invalid-ban.
	noAdaptiveInvalidBan bool
}

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

--config FILE.yaml reads the options (as --dump-config prints them); flags
given on the command line win. --print-space and --dry-run need no GPU.

Exit codes: 0 done, 2 bad input, 6 no GPU, 1 other failures.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if isMnemeTuneCommandLine(args) {
				return execMnemeTune(args)
			}
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
	fl.IntVar(&f.compileWorkers, "compile-workers", -1, "compile-only workers that compile ahead on CPU cores (-1: about half the cores, at most 8)")
	fl.IntVar(&o.Iterations, "iterations", 7, "timed launches per trial")
	fl.IntVar(&o.Warmup, "warmup", 1, "untimed launches before the timed ones")
	fl.StringVar(&o.Metric, "metric", "median", "statistic of the timed launches: mean, median, min or max")
	fl.StringVar(&o.Objective, "objective", "speedup", "reported value: time (ns) or speedup over the baseline")
	fl.Uint64Var(&o.Seed, "seed", 0, "seed of the random and tpe samplers")
	fl.StringVar(&o.TrialTimeout, "trial-timeout", "", "per-trial limit, e.g. 30s (default: 10x the baseline trial's time plus 30s for compiling)")
	fl.StringVar(&o.Output, "output", "", "results directory (default: tune-<kernel hash>-<instance hash>)")
	fl.StringVar(&o.CacheDir, "cache-dir", "", "compile cache shared by the workers (default: OUTPUT/jit-cache)")
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
	fl.BoolVar(&f.dumpConfig, "dump-config", false, "print the effective options as YAML (for --config) and exit")
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
	{"verify", "verify", func(d *tune.Options, s tune.Options) { d.Verify.Mode, d.Verify.ULP = s.Verify.Mode, s.Verify.ULP }},
	{"launch-safety", "launch_safety", func(d *tune.Options, s tune.Options) { d.LaunchSafety = s.LaunchSafety }},
	{"adaptive-invalid-ban", "adaptive_invalid_ban", func(d *tune.Options, s tune.Options) { d.AdaptiveInvalidBan = s.AdaptiveInvalidBan }},
}

// decodeConfigYAML reads a --config file: the options it sets, strictly
// (unknown and repeated keys are errors), and its top-level keys.
func decodeConfigYAML(name string, data []byte) (tune.Options, map[string]any, error) {
	var fromFile tune.Options
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fromFile); err != nil && !errors.Is(err, io.EOF) {
		return fromFile, nil, fmt.Errorf("--config %s: %v", name, err)
	}
	var raw map[string]any
	_ = yaml.Unmarshal(data, &raw)
	return fromFile, raw, nil
}

// effectiveOptions layers the flags' defaults, the --config file and the
// flags given explicitly.
func effectiveOptions(fl *pflag.FlagSet, f *tuneFlags) (tune.Options, error) {
	opts := f.opts
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
		fromFile, raw, err := decodeConfigYAML(f.configFile, data)
		if err != nil {
			return opts, err
		}
		// Start from the file; a key it lacks takes the flag's default, and
		// every flag given explicitly wins.
		merged := fromFile
		for _, o := range optionFlags {
			explicit := fl.Changed(o.flag) || (o.flag == "adaptive-invalid-ban" && fl.Changed("no-adaptive-invalid-ban"))
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
	self, err := workerBinary()
	if err != nil {
		return fmt.Errorf("finding the mneme binary for its workers: %w", err)
	}
	ctx, stop := signalContext()
	defer stop()
	return tune.Run(ctx, tune.RunOptions{
		Options: opts, Resume: f.resume, PrintSpace: f.printSpace, DryRun: f.dryRun, BaselineOnly: f.baselineOnly,
		CompileWorkers: f.compileWorkers, Factory: tune.ExecWorkerFactory{Path: self, Args: []string{"worker"}},
		AnalyzeGeometry: analyzeGeometry,
		CheckPipeline:   replay.ValidatePipeline,
		Progress:        func(budget int) tune.ProgressDisplay { return newProgressBar(stderr, budget) },
		Stdout:          stdout, Stderr: stderr,
	})
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
