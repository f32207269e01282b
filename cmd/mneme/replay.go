package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/replay"
)

type replayFlags struct {
	rdb, rid, kernel                    string
	grid, block                         string
	sharedMem                           uint32
	specialize                          bool
	specializeArgs                      string
	specializeDims                      bool
	launchBounds                        string
	passes                              string
	codegenOpt                          int
	noPrune, internalize, noInternalize bool
	ptxasOpt, maxRegisters              int
	iterations, warmup, device          int
	emitIR, saveOutput                  string
	verify, dtype, timer                string
	tolerance                           float64
	jsonOut, fullReset, coldL2          bool
	cacheDir                            string
	original                            bool
	fpContract                          string
}

func init() {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay -rdb DB.json|DIR [-rid ID] [PIPELINE] [flags]",
		Short: "Re-execute one recorded kernel launch under a configuration, time it and verify it",
		Long: `replay restores the recorded device memory of one kernel launch at its
recorded addresses, recompiles the kernel under the configuration given by the
flags (by default the recorded launch with the default<O3> pipeline), runs it
once and verifies the output against the recording on the GPU, then times
--iterations launches, each from the recorded state. It prints
{"Replay-config": ..., "Result": ...}.

PIPELINE, if given, is the new-pass-manager pipeline (same as --passes).
-rid may be omitted when the database holds one instance; it accepts a unique
prefix or <static-hash>/<dynamic-hash>.

Exit codes: 0 verified, 2 bad input, 3 verification failed, 4 kernel fault or
invalid launch, 5 compile error, 6 no GPU, 1 other failures.`,
		// -rdb and -rid are single-dash long flags as in Mneme, which pflag
		// would read as shorthand clusters; flags are parsed in runReplay
		// after normalizing them.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if helped, err := parseMnemeFlags(cmd, args, "rdb", "rid"); helped || err != nil {
				return err
			}
			fl := cmd.Flags()
			return runReplay(cmd.OutOrStdout(), fl.Changed, fl.Args(), &f)
		},
	}
	f.register(cmd.Flags())
	rootCmd.AddCommand(cmd)
}

// register defines the flags of mneme replay on fl.
func (f *replayFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.rdb, "rdb", "", "recording database: a directory or one kernel's JSON file (required)")
	fl.StringVar(&f.rid, "rid", "", "instance id (dynamic hash, unique prefix or SH/DH); optional with one instance")
	fl.StringVar(&f.kernel, "kernel", "", "kernel static hash or name, when the database holds several kernels")
	fl.StringVar(&f.grid, mneme.KeyGrid, "", "grid dimensions X[,Y,Z] (default: recorded)")
	fl.StringVar(&f.block, mneme.KeyBlock, "", "block dimensions X[,Y,Z] (default: recorded)")
	fl.Uint32Var(&f.sharedMem, "shared-mem", 0, "dynamic shared memory in bytes (default: recorded)")
	fl.BoolVar(&f.specialize, mneme.KeySpecialize, false, "fold the scalar arguments into the code as constants")
	fl.StringVar(&f.specializeArgs, "specialize-args", "", "fold only these 0-based arguments, e.g. 0,3 (implies --specialize)")
	fl.BoolVar(&f.specializeDims, "specialize-dims", false, "fold the block and grid dimensions into the code")
	fl.StringVar(&f.launchBounds, "launch-bounds", "", "MAX[,MINBLOCKS]: max threads per block and min blocks per SM")
	fl.StringVar(&f.passes, mneme.KeyPasses, mneme.DefaultPipeline, "new-pass-manager pipeline text")
	fl.IntVar(&f.codegenOpt, "codegen-opt", 3, "NVPTX code generation level 0..3")
	fl.BoolVar(&f.noPrune, "no-prune", false, "compile the whole module instead of the kernel's closure")
	fl.BoolVar(&f.internalize, mneme.KeyInternalize, false, "give non-kernel symbols internal linkage before optimizing (the application's compile did not: off reproduces its code)")
	fl.BoolVar(&f.noInternalize, "no-internalize", false, "keep non-kernel symbols external (the default)")
	_ = fl.MarkDeprecated("no-internalize", "non-kernel symbols stay external unless --internalize is given")
	fl.IntVar(&f.ptxasOpt, "ptxas-opt", 0, "ptxas optimization level 1..4 (0: driver default)")
	fl.IntVar(&f.maxRegisters, "max-registers", 0, "ptxas register cap per thread (0: none)")
	fl.IntVar(&f.iterations, "iterations", replay.DefaultIterations, "timed launches")
	fl.IntVar(&f.warmup, "warmup", 1, "untimed launches before the timed ones")
	fl.IntVar(&f.device, "device", 0, "CUDA device ordinal")
	fl.StringVar(&f.emitIR, "emit-ir", "", "write the kernel's IR after extraction and specialization (before optimization) to FILE")
	fl.StringVar(&f.saveOutput, "save-output", "", "write the memory the replay produced as a snapshot file into DIR")
	fl.StringVar(&f.verify, "verify", "", "auto (default: floats by the type the kernel writes, within per-type bounds; the rest bitwise), bitwise, \"ulp N\", tolerance, abs, rel or none; --tolerance alone means abs")
	fl.Float64Var(&f.tolerance, "tolerance", 0, "float tolerance for --verify abs or rel, or both tolerances of --verify tolerance")
	fl.StringVar(&f.dtype, "dtype", "f32", "element type of tolerance comparisons: f32 or f64")
	fl.StringVar(&f.timer, "timer", replay.TimerAuto, "kernel timer: auto (CUPTI if available, else events), cupti or events")
	fl.BoolVar(&f.jsonOut, "json", false, "print the document on one line (the default output is the same document, indented)")
	fl.BoolVar(&f.fullReset, "full-reset", false, "restore all recorded memory before every launch, not only what the kernel changes")
	fl.BoolVar(&f.coldL2, "cold-l2", false, "evict the L2 cache before every timed launch, so the kernel reads its inputs from device memory")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "directory of the on-disk compile cache (default: memory only)")
	fl.BoolVar(&f.original, mneme.KeyOriginal, false, "run the application's own device code as recorded (its fat binary) instead of recompiling the IR")
	fl.StringVar(&f.fpContract, "fp-contract", "", "multiply-add fusion in code generation: fast, on or off (default: as the application was compiled)")
	fl.BoolP("help", "h", false, "help for replay")
}

// parseMnemeFlags parses the flags of a command that accepts Mneme's
// single-dash long flags (names), which pflag would read as shorthand
// clusters, so such commands set DisableFlagParsing and call this. It
// reports whether --help was asked (and printed).
func parseMnemeFlags(cmd *cobra.Command, args []string, names ...string) (helped bool, err error) {
	fl := cmd.Flags()
	if err := fl.Parse(normalizeSingleDash(args, names...)); err != nil {
		return false, withExit(exitUsage, err)
	}
	if help, _ := fl.GetBool("help"); help {
		return true, cmd.Help()
	}
	return false, nil
}

// normalizeSingleDash rewrites Mneme's single-dash long flags (-rdb X,
// -rdb=X) to the double-dash form pflag reads. It stops at "--".
func normalizeSingleDash(args []string, names ...string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		for _, n := range names {
			if a == "-"+n || strings.HasPrefix(a, "-"+n+"=") {
				a = "-" + a
				break
			}
		}
		out = append(out, a)
	}
	return out
}

// replayConfig builds the configuration from the flags: the recorded launch
// (resolved by the session) with every flag applied.
func replayConfig(f *replayFlags, changed func(string) bool, positional []string) (mneme.Config, error) {
	cfg := mneme.Config{Passes: f.passes, CodegenOpt: f.codegenOpt, Prune: !f.noPrune, Internalize: f.internalize,
		SharedMem: f.sharedMem, Specialize: f.specialize, SpecializeDims: f.specializeDims,
		PtxasOpt: f.ptxasOpt, MaxRegisters: f.maxRegisters, FPContract: f.fpContract}
	if f.internalize && f.noInternalize {
		return cfg, errors.New("--internalize and --no-internalize disagree: give one")
	}
	if !changed(mneme.KeyPasses) && !changed("codegen-opt") && len(positional) == 0 {
		cfg.Passes = "" // the application's own -O level, resolved against the recording
	}
	if f.original {
		// The application's code: compile knobs left at their defaults do
		// not apply; ones the user set are refused by Validate.
		cfg = mneme.Config{Original: true, Passes: mneme.DefaultPipeline, CodegenOpt: 3, Prune: true, Internalize: true, SharedMem: f.sharedMem, Specialize: f.specialize,
			SpecializeDims: f.specializeDims, PtxasOpt: f.ptxasOpt, MaxRegisters: f.maxRegisters, FPContract: f.fpContract}
		if changed(mneme.KeyPasses) || changed("codegen-opt") || len(positional) > 0 {
			return cfg, fmt.Errorf("--original runs the application's own code: --passes, --codegen-opt and PIPELINE do not apply")
		}
	}
	switch len(positional) {
	case 0:
	case 1:
		if changed(mneme.KeyPasses) && positional[0] != f.passes {
			return cfg, fmt.Errorf("PIPELINE %q and --passes %q disagree: give one", positional[0], f.passes)
		}
		cfg.Passes = positional[0]
	default:
		return cfg, fmt.Errorf("unexpected arguments %q: the only positional argument is the PIPELINE", positional[1:])
	}
	var err error
	if f.grid != "" {
		if cfg.Grid, err = mneme.ParseDim3(f.grid); err != nil {
			return cfg, fmt.Errorf("--grid: %w", err)
		}
	}
	if f.block != "" {
		if cfg.Block, err = mneme.ParseDim3(f.block); err != nil {
			return cfg, fmt.Errorf("--block: %w", err)
		}
	}
	if f.specializeArgs != "" {
		for _, p := range strings.Split(f.specializeArgs, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil || i < 0 {
				return cfg, fmt.Errorf("--specialize-args %q: want 0-based argument indices, e.g. 0,3", f.specializeArgs)
			}
			cfg.SpecializeArgs = append(cfg.SpecializeArgs, i)
		}
		cfg.Specialize = true
	}
	if f.launchBounds != "" {
		if cfg.MaxThreads, cfg.MinBlocksPerSM, err = parseLaunchBounds(f.launchBounds); err != nil {
			return cfg, fmt.Errorf("--launch-bounds: %w", err)
		}
		cfg.SetLaunchBounds = true
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func replayVerify(f *replayFlags, changed func(string) bool) (mneme.VerifyOptions, error) {
	mode, ulp, err := mneme.ParseVerifyMode(f.verify)
	if err != nil {
		return mneme.VerifyOptions{}, fmt.Errorf("--verify %w", err)
	}
	v := mneme.VerifyOptions{Mode: mode, Tolerance: f.tolerance, ULP: ulp, DType: f.dtype}
	if v.Mode == "" {
		v.Mode = mneme.VerifyAuto
		if changed("tolerance") {
			v.Mode = mneme.VerifyAbs
		}
	}
	switch v.Mode {
	case mneme.VerifyAuto, mneme.VerifyBitwise, mneme.VerifyULP, mneme.VerifyNone, mneme.VerifyAbs, mneme.VerifyRel:
	case mneme.VerifyTolerance:
		v.ATol, v.RTol = f.tolerance, f.tolerance
	default:
		return v, fmt.Errorf("--verify %q: want auto, bitwise, \"ulp N\", tolerance, abs, rel or none", f.verify)
	}
	if changed("tolerance") && (v.Mode == mneme.VerifyAuto || v.Mode == mneme.VerifyBitwise || v.Mode == mneme.VerifyULP || v.Mode == mneme.VerifyNone) {
		return v, fmt.Errorf("--tolerance needs --verify abs or rel (or tolerance), not %s", v.Mode)
	}
	if changed("dtype") && (v.Mode == mneme.VerifyAuto || v.Mode == mneme.VerifyBitwise || v.Mode == mneme.VerifyNone) {
		// Auto reads the element type from the kernel; the others compare no floats.
		return v, fmt.Errorf("--dtype %s applies to --verify ulp, abs, rel or tolerance, not %s", f.dtype, v.Mode)
	}
	if f.dtype != mneme.VerifyF32 && f.dtype != mneme.VerifyF64 {
		return v, fmt.Errorf("--dtype %q: want f32 or f64", f.dtype)
	}
	if !(f.tolerance >= 0) || math.IsInf(f.tolerance, 1) {
		return v, fmt.Errorf("--tolerance %g: want a finite number, not negative", f.tolerance)
	}
	return v, nil
}

func runReplay(stdout io.Writer, changed func(string) bool, positional []string, f *replayFlags) error {
	job, err := replayJob(f, changed, positional)
	if err != nil {
		return withExit(exitUsage, err)
	}
	rep, err := replay.RunJob(job)
	if rep == nil && errors.Is(err, replay.ErrRangeHeldByThisProcess) && os.Getenv(envReplayRespawned) == "" {
		respawn(err)
	}
	if rep != nil {
		enc := json.NewEncoder(stdout)
		if !f.jsonOut {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	if cuda.IsNoGPU(err) {
		return fmt.Errorf("replay needs a CUDA driver and GPU: %w", err)
	}
	return err
}

// replayJob is the job the flags describe.
// envReplayRespawned marks a replay started again by respawn.
const envReplayRespawned = "MNEME_REPLAY_RESPAWNED"

// respawn starts this replay again, once, in place of this process: the
// recorded range is held by this process's own mappings (err), which a
// fresh process, laid out anew by address-space randomization, is unlikely
// to have there. It returns only when that cannot be done; the replay then
// fails with err (exit 7).
func respawn(err error) {
	self, e := os.Executable()
	if e != nil {
		return
	}
	fmt.Fprintf(os.Stderr, "mneme replay: %v; starting again in a fresh process\n", err)
	_ = syscall.Exec(self, os.Args, append(os.Environ(), envReplayRespawned+"=1"))
}

func replayJob(f *replayFlags, changed func(string) bool, positional []string) (replay.Job, error) {
	if f.rdb == "" {
		return replay.Job{}, errors.New("-rdb: a recording database (directory or kernel .json) is required")
	}
	cfg, err := replayConfig(f, changed, positional)
	if err != nil {
		return replay.Job{}, err
	}
	verify, err := replayVerify(f, changed)
	if err != nil {
		return replay.Job{}, err
	}
	if f.iterations < 1 {
		return replay.Job{}, fmt.Errorf("--iterations %d: must be at least 1", f.iterations)
	}
	return replay.Job{
		Options: replay.Options{DB: f.rdb, Kernel: f.kernel, Instance: f.rid, Device: f.device,
			Iterations: f.iterations, Warmup: f.warmup, Verify: verify, CacheDir: f.cacheDir, Timer: f.timer, FullReset: f.fullReset, ColdL2: f.coldL2},
		Config: cfg, EmitIR: f.emitIR, SaveOutput: f.saveOutput,
	}, nil
}
