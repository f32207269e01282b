package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/jit"
)

type compileFlags struct {
	ir, kernel, out, emit               string
	args                                []string
	block, grid                         string
	specializeDims                      bool
	passes                              string
	codegenOpt                          int
	launchBounds                        string
	arch                                string
	ptxVersion                          int
	ptxasOpt, maxRegisters              int
	noPrune, internalize, noInternalize bool
	jsonOut, noGPU                      bool
	cacheDir                            string
}

func init() {
	var f compileFlags
	cmd := &cobra.Command{
		Use:         "compile --ir FILE.bc [--kernel NAME] [flags]",
		Annotations: map[string]string{rawStdoutAnnotation: "yes"},
		Short:       "Compile one kernel's IR under a configuration to PTX (and a cubin with a GPU)",
		Long: `compile specializes, optimizes and generates code for one kernel of an LLVM
bitcode file, the way replay and tuning do, and prints the result and the time
of each stage. With a CUDA driver and GPU it also runs ptxas through the driver
JIT and reports registers, spills and the object size.

Arguments given with --arg are folded into the code as constants; --block and
--grid with --specialize-dims fold the launch dimensions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			job, err := compileJob(&f)
			if err != nil {
				return withExit(exitUsage, err)
			}
			return jit.CompileFile(job, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd.Flags())
	rootCmd.AddCommand(cmd)
}

// register defines the flags of mneme compile on fl.
func (f *compileFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.ir, "ir", "", "LLVM bitcode, .ll text IR, or an object/executable built with the mneme wrapper (required)")
	fl.StringVar(&f.kernel, "kernel", "", "mangled kernel name (default: the module's only kernel)")
	fl.StringArrayVar(&f.args, "arg", nil, "fold argument I (0-based) as a constant: I=VALUE (repeatable)")
	fl.StringVar(&f.block, mneme.KeyBlock, "", "block dimensions X[,Y,Z]")
	fl.StringVar(&f.grid, mneme.KeyGrid, "", "grid dimensions X[,Y,Z]")
	fl.BoolVar(&f.specializeDims, "specialize-dims", false, "fold --block and --grid into the code")
	fl.StringVar(&f.passes, mneme.KeyPasses, mneme.DefaultPipeline, "new-pass-manager pipeline text")
	fl.IntVar(&f.codegenOpt, "codegen-opt", 3, "NVPTX code generation level 0..3")
	fl.StringVar(&f.launchBounds, "launch-bounds", "", "MAX[,MINBLOCKS]: max threads per block and min blocks per SM")
	fl.StringVar(&f.arch, mneme.KeyArch, "", "target sm_XX (default: the GPU's, or "+jit.DefaultArch+")")
	fl.IntVar(&f.ptxVersion, "ptx-version", 0, "PTX ISA version x10, e.g. 80 (default: LLVM's for the arch)")
	fl.IntVar(&f.ptxasOpt, "ptxas-opt", 0, "ptxas optimization level 1..4 (0: driver default)")
	fl.IntVar(&f.maxRegisters, "max-registers", 0, "ptxas register cap per thread (0: none)")
	fl.BoolVar(&f.noPrune, "no-prune", false, "keep the whole module instead of the kernel's closure")
	fl.BoolVar(&f.internalize, mneme.KeyInternalize, false, "give non-kernel symbols internal linkage before optimizing (the application's compile did not: off reproduces its code)")
	fl.BoolVar(&f.noInternalize, "no-internalize", false, "keep non-kernel symbols external (the default)")
	_ = fl.MarkDeprecated("no-internalize", "non-kernel symbols stay external unless --internalize is given")
	fl.StringVar(&f.emit, "emit", "ptx", "what to write: ptx, ll (optimized IR) or cubin (needs a GPU)")
	fl.StringVarP(&f.out, "output", "o", "-", "output file ('-' for stdout)")
	fl.BoolVar(&f.jsonOut, "json", false, "print a JSON report (stage times, resources) instead of the code")
	fl.BoolVar(&f.noGPU, "no-gpu", false, "do not use a GPU even when one is present")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "directory of the on-disk compile cache (default: none)")
}

// compileJob is the job the flags describe. The flags' own syntax is
// checked here; what depends on the kernel (--arg) is checked with its IR.
func compileJob(f *compileFlags) (jit.FileJob, error) {
	job := jit.FileJob{IR: f.ir, Kernel: f.kernel, Args: f.args, Emit: f.emit, Output: f.out,
		JSON: f.jsonOut, NoGPU: f.noGPU, CacheDir: f.cacheDir}
	if f.ir == "" {
		return job, errors.New("--ir: an LLVM bitcode file is required")
	}
	if f.internalize && f.noInternalize {
		return job, errors.New("--internalize and --no-internalize disagree: give one")
	}
	cfg := mneme.Config{Passes: f.passes, CodegenOpt: f.codegenOpt, SpecializeDims: f.specializeDims,
		Prune: !f.noPrune, Internalize: f.internalize, Arch: f.arch, PTXVersion: f.ptxVersion,
		PtxasOpt: f.ptxasOpt, MaxRegisters: f.maxRegisters}
	var err error
	if f.arch != "" {
		// Checked here, without a GPU: LLVM would only fail to make a target.
		if _, err := cuda.ParseArch(f.arch); err != nil {
			return job, fmt.Errorf("--%s: %w", mneme.KeyArch, err)
		}
	}
	if f.block != "" {
		if cfg.Block, err = mneme.ParseDim3(f.block); err != nil {
			return job, fmt.Errorf("--block: %w", err)
		}
	}
	if f.grid != "" {
		if cfg.Grid, err = mneme.ParseDim3(f.grid); err != nil {
			return job, fmt.Errorf("--grid: %w", err)
		}
	}
	if f.specializeDims && (cfg.Block.IsZero() || cfg.Grid.IsZero()) {
		return job, errors.New("--specialize-dims needs --block and --grid")
	}
	if f.launchBounds != "" {
		if cfg.MaxThreads, cfg.MinBlocksPerSM, err = parseLaunchBounds(f.launchBounds); err != nil {
			return job, fmt.Errorf("--launch-bounds: %w", err)
		}
		cfg.SetLaunchBounds = true
	}
	job.Config = cfg
	return job, nil
}

func parseLaunchBounds(s string) (maxThreads, minBlocks int, err error) {
	a, b, hasMin := strings.Cut(s, ",")
	if maxThreads, err = strconv.Atoi(strings.TrimSpace(a)); err != nil || maxThreads <= 0 || maxThreads > 1024 {
		return 0, 0, fmt.Errorf("%q: MAX must be 1..1024 threads", s)
	}
	if hasMin {
		if minBlocks, err = strconv.Atoi(strings.TrimSpace(b)); err != nil || minBlocks < 0 {
			return 0, 0, fmt.Errorf("%q: MINBLOCKS must be a non-negative integer", s)
		}
	}
	return maxThreads, minBlocks, nil
}
