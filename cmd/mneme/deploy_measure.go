package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/deploy"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/measure"
)

// measureFlags are `mneme deploy measure`'s options.
type measureFlags struct {
	tuned       string
	runs        int
	deployCost  float64
	checkOutput bool
	filter      string
	ownTimer    string
	output      string
	workDir     string
}

func init() {
	var f measureFlags
	cmd := &cobra.Command{
		Use:   "measure --tuned FILE [--runs N] [--check-output [--output-filter REGEX]] [--own-timer REGEX] [--output KEPT.json] -- APP ARGS",
		Short: "Run the application untuned and tuned, interleaved, and keep only the kernels that help in it",
		Long: `deploy measure runs the application (built with the mneme compilers) N times
untuned and N times with the tuned file, alternating which goes first, and
times every tuned kernel's launches inside the application with the runtime's
launch statistics (events on a sample of launches). It checks each run's exit
code and, with --check-output, that the tuned runs print what the untuned
ones print (--output-filter leaves out the lines it matches, such as the
application's own timings); a kernel with which the application fails or prints differently
is found by trying each kernel alone, and dropped.

It prints per kernel: launches, in-application time per launch untuned and
tuned (median and range over the runs), the speedup, and replay's prediction
(the speedup the tuned file records). Kernels that together save less GPU
time than deploying costs (--deploy-cost-ms) are dropped; the rest are run
once more as deployed (no launch statistics), in interleaved pairs, more
while the difference of the medians is noisy, and dropped if the application
is slower so by wall time or its own timer. --output writes a tuned file
holding only the kernels kept; the table says why each other kernel was
dropped.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return withExit(exitUsage, errors.New("deploy measure: give the application after --, as in: mneme deploy measure --tuned F -- ./app args"))
			}
			if f.tuned == "" {
				return withExit(exitUsage, errors.New("--tuned: name the tuned-kernels file to measure"))
			}
			if f.runs < 2 {
				return withExit(exitUsage, fmt.Errorf("--runs %d: at least 2 runs of each are needed to see noise", f.runs))
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := measureTuned(ctx, f, args, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			printMeasurement(cmd.OutOrStdout(), res)
			if f.output != "" {
				if err := writeKept(f.tuned, f.output, res.Kept); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s with %d of %d kernels\n", termSafe(f.output, false), len(res.Kept), len(res.Verdicts))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.tuned, "tuned", os.Getenv(measure.EnvTunedKernels), "the tuned-kernels file (default $MNEME_TUNED_KERNELS)")
	cmd.Flags().IntVar(&f.runs, "runs", 5, "runs of each, untuned and tuned")
	cmd.Flags().Float64Var(&f.deployCost, "deploy-cost-ms", defaultDeployCostMS, "what deploying costs the application beyond its kernels' time, in ms (the runtime library loaded beside it and unloaded at exit): kernels that together save less are not kept (0: not weighed)")
	cmd.Flags().BoolVar(&f.checkOutput, "check-output", false, "require the tuned runs to print what the untuned ones print")
	cmd.Flags().StringVar(&f.filter, "output-filter", "", "with --check-output, leave out of the comparison the output lines this regular expression matches")
	cmd.Flags().StringVar(&f.ownTimer, "own-timer", "", "a regular expression whose first group matches the time the application prints (e.g. 'wall time: ([0-9.]+) ms'): the end-to-end check compares it too")
	cmd.Flags().StringVar(&f.output, "output", "", "write the kernels kept to this tuned file")
	cmd.Flags().StringVar(&f.workDir, "work-dir", "", "folder for the runs' statistics and subset files (default: a temporary one)")
	for _, c := range rootCmd.Commands() {
		if c.Name() == "deploy" {
			c.AddCommand(cmd)
		}
	}
}

// measureTuned runs the measurement of one tuned file on the application.
func measureTuned(ctx context.Context, f measureFlags, app []string, log io.Writer) (*measure.Result, error) {
	filter, err := outputFilter(f.filter, f.checkOutput)
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	timer, err := ownTimer(f.ownTimer)
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	cost, err := deployCost(f.deployCost)
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	plans, err := deploy.ReadMnemeTuned(f.tuned)
	if err != nil && len(plans) == 0 {
		return nil, withExit(exitUsage, err)
	}
	entries, err := measure.ReadTunedEntries(f.tuned)
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	var kernels []string
	predicted := map[string]float64{}
	for name := range plans {
		kernels = append(kernels, name)
		if tk, err := readTunedKernel(entries[name]); err == nil {
			predicted[name] = tk.Speedup
		}
	}
	sort.Strings(kernels)
	dir := f.workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mneme-measure-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	runner := &measure.ExecRunner{App: app[0], Args: app[1:], StatsDir: dir, ReadStats: readKernelTimes, Stderr: log, OutputFilter: filter, OwnTimer: timer}
	subsets := &measure.SubsetWriter{Source: f.tuned, Dir: dir}
	return measure.Measure(ctx, runner, measure.Options{
		Tuned: f.tuned, Kernels: kernels, Runs: f.runs, CheckOutput: f.checkOutput,
		Predicted: predicted, Subset: subsets.Write, Log: log, Confirm: true, DeployCost: cost,
	})
}

// readKernelTimes reads the launch statistics a run left behind as the
// measurement's per-kernel times.
func readKernelTimes(path string) (map[string]measure.KernelTime, error) {
	data, err := safefile.ReadFile(path, safefile.MaxJSON)
	if err != nil {
		return nil, err
	}
	stats, err := db.ParseLaunchStats(path, data)
	if err != nil {
		return nil, err
	}
	out := map[string]measure.KernelTime{}
	for _, k := range stats.Kernels {
		kt := measure.KernelTime{Launches: int64(k.Launches), TimedLaunches: int64(k.TimedLaunches), TimedNS: float64(k.TimedNs),
			EarlyLaunches: int64(k.EarlyLaunches)}
		if k.TimedLaunches == 0 {
			kt.FirstNS = k.MeanLaunchNs() // a kernel launched once per shape
		}
		out[k.KernelName] = kt
	}
	return out, nil
}

// printMeasurement prints the verdict table.
func printMeasurement(w io.Writer, res *measure.Result) {
	untuned, tuned := res.EndToEnd()
	how := "median wall time of %d runs each"
	if res.Confirmed != nil {
		how = "median wall time of %d runs each, run as deployed: without launch statistics"
	}
	fmt.Fprintf(w, "application: %s untuned, %s tuned ("+how+")\n",
		fmtSeconds(measure.Seconds(untuned)), fmtSeconds(measure.Seconds(tuned)), len(untuned))
	if u, t := measure.OwnTimes(untuned), measure.OwnTimes(tuned); len(u) > 0 && len(t) > 0 {
		fmt.Fprintf(w, "by its own timer: %.4g untuned, %.4g tuned (median, in its units)\n", medianOf(u), medianOf(t))
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tLAUNCHES\tUNTUNED/LAUNCH\tTUNED/LAUNCH\tIN APP\tREPLAY\tKEPT\tWHY")
	for _, v := range res.Verdicts {
		kept := "no"
		if v.Kept {
			kept = "yes"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", termSafe(v.Name, false), v.Launches, spreadNS(v.UntunedNS), spreadNS(v.TunedNS),
			speedupOrDash(v.Speedup), speedupOrDash(v.PredictedSpeedup), kept, v.Reason)
	}
	tw.Flush()
}

func fmtSeconds(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f s", medianOf(xs))
}

func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func spreadNS(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.1fus [%.1f-%.1f]", medianOf(xs)/1e3, lo/1e3, hi/1e3)
}

func speedupOrDash(x float64) string {
	if x <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

// writeKept writes the tuned file's entries for the kept kernels to path.
func writeKept(source, path string, kept []string) error {
	entries, err := measure.ReadTunedEntries(source)
	if err != nil {
		return err
	}
	out := make(map[string]json.RawMessage, len(kept))
	for _, k := range kept {
		out[k] = entries[k]
	}
	return measure.WriteTunedEntries(filepath.Dir(path), filepath.Base(path), out)
}

// readTunedKernel decodes one entry of a tuned file.
func readTunedKernel(raw json.RawMessage) (deploy.TunedKernel, error) {
	var tk deploy.TunedKernel
	err := json.Unmarshal(raw, &tk)
	return tk, err
}
