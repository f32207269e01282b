package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mneme-gpu/mneme/measure"
	"github.com/mneme-gpu/mneme/optimize"
	"github.com/mneme-gpu/mneme/report"
	"github.com/mneme-gpu/mneme/tune"
)

type optimizeFlags struct {
	rdb, output, budget, gpus, minShare, sampler, preset string
	optunaStorage, outputFilter, ownTimer, timer         string
	top, runs, trials                                    int
	deployCostMS                                         float64
	checkOutput, coldL2                                  bool
}

func init() {
	var f optimizeFlags
	cmd := &cobra.Command{
		Use:   "optimize [-rdb DIR] [--output DIR] [--budget 10m] [--gpus 0,1] [--min-share 5%|--top N] [--check-output [--output-filter REGEX]] [--own-timer REGEX] -- APP ARGS",
		Short: "From an application to a faster application: record, tune what matters, keep what helps, report",
		Long: `optimize runs an application built with the mneme compilers through every
step: it records it (with launch statistics), ranks its kernels by their share
of the GPU time, tunes those at or above --min-share (or the --top N) with the
budget split by share on every GPU of --gpus, measures the application
untuned and tuned (interleaved runs; exit codes, and with --check-output the
output, compared; --output-filter leaves out lines that differ from run to
run, such as the application's own timings), and keeps only the kernels that
help in the application: each not slower there per launch, together saving
more GPU time than deploying costs (--deploy-cost-ms), and the application
not slower end to end when run once more as deployed, without launch
statistics, by wall time or by --own-timer (more runs while noisy).

It writes OUTPUT/mneme_tuned_kernels.json and proteus_tuned_kernels.json (the
kernels kept), report.html (one page with the figures) and report.json, and
prints a summary. Interrupted (Ctrl-C), the same command resumes; run again
after a code change, it tunes again only the kernels whose IR, GPU, driver,
toolchain or launch statistics changed, and reuses the rest.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return withExit(exitUsage, errors.New("optimize: give the application after --, as in: mneme optimize -- ./app args"))
			}
			o, err := f.options(args, cmd.ErrOrStderr())
			if err != nil {
				return withExit(exitUsage, err)
			}
			filter, err := outputFilter(f.outputFilter, f.checkOutput)
			if err != nil {
				return withExit(exitUsage, err)
			}
			timer, err := ownTimer(f.ownTimer)
			if err != nil {
				return withExit(exitUsage, err)
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tools := &commandTools{mneme: self, sampler: f.sampler, preset: f.preset, trials: f.trials, optunaStorage: f.optunaStorage,
				timer: f.timer, coldL2: f.coldL2, log: cmd.ErrOrStderr()}
			runner := &measure.ExecRunner{App: args[0], Args: args[1:], StatsDir: filepath.Join(o.Output, "work"), ReadStats: readKernelTimes, Stderr: io.Discard, OutputFilter: filter, OwnTimer: timer}
			rep, err := optimize.Run(ctx, tools, runner, o)
			if err != nil {
				return err
			}
			report.WriteSummary(cmd.OutOrStdout(), rep, func(s string) string { return termSafe(s, false) })
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s, %s and %s\n", termSafe(filepath.Join(o.Output, optimize.TunedFile), false),
				termSafe(filepath.Join(o.Output, report.FileHTML), false), termSafe(filepath.Join(o.Output, report.FileJSON), false))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.rdb, "rdb", "", "the recording database (default OUTPUT/rdb)")
	fl.StringVar(&f.output, "output", "mneme-optimized", "the output folder")
	fl.StringVar(&f.budget, "budget", "10m", "time for tuning, split among the kernels by their share")
	fl.StringVar(&f.gpus, "gpus", "0", "CUDA devices to tune on, e.g. 0,1")
	fl.StringVar(&f.minShare, "min-share", "5%", "tune kernels with at least this share of the GPU time")
	fl.IntVar(&f.top, "top", 0, "tune the N kernels with the largest shares instead of --min-share")
	fl.BoolVar(&f.checkOutput, "check-output", false, "require the tuned application to print what the untuned one prints")
	fl.StringVar(&f.outputFilter, "output-filter", "", "with --check-output, leave out of the comparison the output lines this regular expression matches (e.g. the application's own timings)")
	fl.StringVar(&f.ownTimer, "own-timer", "", "a regular expression whose first group matches the time the application prints (stdout or stderr), e.g. 'wall time: ([0-9.]+) ms': the end-to-end check compares it too, so a kernel that makes the application slower by its own timer is not kept")
	fl.StringVar(&f.timer, "timer", "events", "how tuning times the trials: events (the default: the in-application measurement is by events, so replay's prediction and the application's figure are taken alike), auto (CUPTI if available, else events) or cupti")
	fl.BoolVar(&f.coldL2, "cold-l2", false, "tune with the L2 cache evicted before every timed launch (inputs read from device memory, as after the application's other work)")
	fl.IntVar(&f.runs, "runs", 5, "interleaved runs of the application, untuned and tuned each")
	fl.Float64Var(&f.deployCostMS, "deploy-cost-ms", defaultDeployCostMS, "what deploying costs the application beyond its kernels' time, in ms (the runtime library loaded beside it and unloaded at exit): kernels that together save less are not kept (0: not weighed)")
	fl.StringVar(&f.sampler, "sampler", "tpe", "the tuner's sampler")
	fl.StringVar(&f.preset, "preset", "standard", "the tuner's preset space")
	fl.StringVar(&f.optunaStorage, "optuna-storage", "", "tune each kernel as an Optuna study in this storage (e.g. sqlite:///optimize.db), which optuna-dashboard shows")
	fl.IntVar(&f.trials, "trials", 200, "at most this many trials per kernel (the budget usually ends tuning first)")
	rootCmd.AddCommand(cmd)

	reportCmd := &cobra.Command{
		Use:   "report DIR",
		Short: "Render DIR/report.html again from DIR/report.json and print the summary",
		Args:  exactArgs("report", "an optimize output folder"),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := report.Read(filepath.Join(args[0], report.FileJSON))
			if err != nil {
				return withExit(exitUsage, err)
			}
			page, err := report.HTML(rep)
			if err != nil {
				return withExit(exitUsage, err)
			}
			if err := report.WriteIn(args[0], report.FileHTML, page); err != nil {
				return err
			}
			report.WriteSummary(cmd.OutOrStdout(), rep, func(s string) string { return termSafe(s, false) })
			return nil
		},
	}
	rootCmd.AddCommand(reportCmd)
}

// options checks the flags and makes optimize's options.
func (f *optimizeFlags) options(app []string, log io.Writer) (optimize.Options, error) {
	budget, err := time.ParseDuration(f.budget)
	if err != nil || budget <= 0 {
		return optimize.Options{}, fmt.Errorf("--budget %q: want a positive duration like 10m", f.budget)
	}
	share, err := parseShare(f.minShare)
	if err != nil {
		return optimize.Options{}, err
	}
	if f.top < 0 {
		return optimize.Options{}, fmt.Errorf("--top %d: want a positive count", f.top)
	}
	if f.runs < 2 {
		return optimize.Options{}, fmt.Errorf("--runs %d: at least 2 runs of each are needed to see noise", f.runs)
	}
	if _, err := parseGPUList(f.gpus); err != nil {
		return optimize.Options{}, err
	}
	if !slices.Contains(tune.TimerNames, f.timer) {
		return optimize.Options{}, fmt.Errorf("--timer %q: want auto, cupti or events", f.timer)
	}
	cost, err := deployCost(f.deployCostMS)
	if err != nil {
		return optimize.Options{}, err
	}
	return optimize.Options{App: app, Output: f.output, DB: f.rdb, Budget: budget, GPUs: f.gpus, MinShare: share,
		Top: f.top, CheckOutput: f.checkOutput, OutputFilter: f.outputFilter, OwnTimer: f.ownTimer, Runs: f.runs, OptunaStorage: f.optunaStorage, Log: log,
		TuneConditions: tuneConditions(f.timer, f.coldL2), DeployCost: cost}, nil
}

// outputFilter compiles --output-filter, which only --check-output uses.
func outputFilter(expr string, checkOutput bool) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	if !checkOutput {
		return nil, errors.New("--output-filter: it only narrows --check-output's comparison; add --check-output")
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("--output-filter %q: not a regular expression: %v", expr, err)
	}
	return re, nil
}

// defaultDeployCostMS is what deploying was measured to cost a short
// application beyond its kernels (H100, withcublas and oneshot, 14 runs
// each): its exit took 7-14 ms longer with the runtime library loaded,
// tuned kernels or none, and the library's 5-6 ms load runs beside it.
const defaultDeployCostMS = 10

// deployCost checks --deploy-cost-ms.
func deployCost(ms float64) (time.Duration, error) {
	if math.IsNaN(ms) || ms < 0 || ms > 3.6e6 {
		return 0, fmt.Errorf("--deploy-cost-ms %v: want a cost in milliseconds, 0 or more (0: not weighed)", ms)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// tuneConditions names how the trials are timed, for the result key: ""
// for tune's own default (CUPTI where it loads, a warm L2), the key results
// had before optimize timed its trials with events by default.
func tuneConditions(timer string, coldL2 bool) string {
	var parts []string
	if timer != "" && timer != "auto" {
		parts = append(parts, "timer="+timer)
	}
	if coldL2 {
		parts = append(parts, "cold_l2")
	}
	return strings.Join(parts, ",")
}

// ownTimer compiles --own-timer: a regular expression whose first group
// matches the number the application prints as its own time (nil when
// not given).
func ownTimer(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("--own-timer %q: not a regular expression: %v", expr, err)
	}
	if re.NumSubexp() < 1 {
		return nil, fmt.Errorf("--own-timer %q: give a group around the number, as in 'wall time: ([0-9.]+) ms'", expr)
	}
	return re, nil
}

// parseShare reads "5%" or "0.05".
func parseShare(s string) (float64, error) {
	v, pct := s, false
	if len(v) > 0 && v[len(v)-1] == '%' {
		v, pct = v[:len(v)-1], true
	}
	x, err := strconv.ParseFloat(v, 64)
	if pct {
		x /= 100
	}
	if err != nil || x < 0 || x > 1 {
		return 0, fmt.Errorf("--min-share %q: want a share like 5%% or 0.05", s)
	}
	return x, nil
}

func parseGPUList(s string) ([]int, error) {
	var out []int
	for _, part := range splitComma(s) {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--gpus %q: want device numbers like 0,1", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--gpus %q: name at least one device", s)
	}
	return out, nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// recordedPerKernel bounds the instances recorded per kernel.
const recordedPerKernel = 4

// commandTools runs mneme's own commands as child processes, so a crash in
// one stage leaves the others' results in place.
type commandTools struct {
	mneme, sampler, preset string
	optunaStorage          string
	trials                 int
	// timer and coldL2 are how tune times the trials (its --timer and
	// --cold-l2): matched to the application, they bring replay's
	// prediction closer to what the application measures.
	timer  string
	coldL2 bool
	log    io.Writer
}

func (t *commandTools) Record(ctx context.Context, dbDir string, app []string) error {
	// A few instances per kernel cover its launch shapes (record keeps the
	// shapes that take the most time once a kernel is full); tuning replays
	// every one of them per trial.
	args := append([]string{"record", "-rdb", dbDir, "--max-recordings", strconv.Itoa(recordedPerKernel), "--"}, app...)
	return t.run(ctx, args)
}

func (t *commandTools) Tune(ctx context.Context, job optimize.TuneJob) error {
	// Across every instance of the kernel, so the result holds for the
	// launches they stand for (a configuration per launch shape where the
	// shapes' best differ); one instance is the ordinary run.
	sel := []string{"--kernel", job.Kernel}
	if job.Instances <= 1 {
		sel = []string{"-rid", job.Instance}
	}
	args := append([]string{"tune", "-rdb", job.DB}, sel...)
	args = append(args, "--output", job.Output, "--gpus", job.GPUs, "--sampler", t.sampler, "--preset", t.preset, "--trials", strconv.Itoa(t.trials))
	if job.Resume {
		args = append(args, "--resume")
	}
	if job.Study != "" {
		args = append(args, "--optuna-storage", t.optunaStorage, "--study-name", job.Study)
	}
	if t.timer != "" {
		args = append(args, "--timer", t.timer)
	}
	if t.coldL2 {
		args = append(args, "--cold-l2")
	}
	return t.run(ctx, args)
}

// run starts mneme with args; when ctx ends (the stage's budget, or Ctrl-C)
// it interrupts the child, which keeps what finished, and waits for it.
func (t *commandTools) run(ctx context.Context, args []string) error {
	cmd := exec.Command(t.mneme, args...)
	cmd.Stdout, cmd.Stderr = t.log, t.log
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%w (stopped: %v)", ctx.Err(), err)
			}
			return nil
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("mneme %s did not stop within a minute of its interrupt: %w", args[0], ctx.Err())
		}
	}
}
