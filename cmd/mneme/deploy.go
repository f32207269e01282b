package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/deploy"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/jit"
	"github.com/mneme-gpu/mneme/nvbin"
	"github.com/mneme-gpu/mneme/replay"
)

type deployFlags struct {
	tuned, proteus, cacheDir, rdb string
	device                        int
}

func (f *deployFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.tuned, "tuned", os.Getenv("MNEME_TUNED_KERNELS"), "mneme_tuned_kernels.json (default $MNEME_TUNED_KERNELS)")
	cmd.Flags().StringVar(&f.proteus, "proteus", os.Getenv("PROTEUS_TUNED_KERNELS"), "a Proteus tuned-kernels file (default $PROTEUS_TUNED_KERNELS)")
}

func (f *deployFlags) plans() (deploy.Plans, error) {
	if f.tuned == "" && f.proteus == "" {
		return nil, withExit(exitUsage, errors.New("--tuned or --proteus: name a tuned-kernels file"))
	}
	plans, errs := deploy.Load(f.tuned, f.proteus)
	if len(errs) > 0 {
		return nil, withExit(exitUsage, errors.Join(errs...))
	}
	return plans, nil
}

func init() {
	deployCmd := &cobra.Command{
		Use:   "deploy",
		Short: "Run tuned kernels in the application: check a tuned file, pre-compile the cache",
		Long: `An application built with the mneme compilers runs its tuned kernels when
MNEME_TUNED_KERNELS (mneme_tuned_kernels.json from mneme tune) or
PROTEUS_TUNED_KERNELS (Proteus's format) names a file: the first launch of a
listed kernel JIT-compiles its embedded IR under the tuned configuration and
every later launch runs the result, cached in memory and in MNEME_CACHE_DIR
(default .mneme-cache). MNEME_JIT=off turns it off.

deploy check tells which kernels of a tuned file the executable has; deploy
precompile fills the cache for this GPU so production runs compile nothing.

An application built without the wrapper (nvcc) runs the tuned kernels it was
recorded with through the driver when CUDA_INJECTION64_PATH also names
libmneme_inject.so: their tuned blocks and assembler knobs, nothing that needs
IR; deploy check says so for each entry.`,
	}

	var cf deployFlags
	check := &cobra.Command{
		Use:   "check EXECUTABLE",
		Short: "Which kernels of the tuned files the executable has, and where they were tuned",
		Args:  exactArgs("deploy check", "an executable (built with the mneme compilers, or with nvcc)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			plans, err := cf.plans()
			if err != nil {
				return err
			}
			gpu := ""
			if ctx, props, err := jit.OpenGPU(0); err == nil {
				gpu = props.Name
				ctx.Release()
			}
			var rep deploy.CheckReport
			if machine, err := machineCodeKernels(args[0]); err != nil {
				return withExit(exitUsage, err)
			} else if machine != nil {
				// Built without the wrapper: deployed through the
				// injection library, machine code only.
				rep = deploy.CheckMachineCode(plans, machine, gpu)
				printDeployCheck(cmd.OutOrStdout(), rep)
				fmt.Fprintf(cmd.OutOrStdout(), "built without mneme's wrapper: run it with CUDA_INJECTION64_PATH naming libmneme_inject.so and MNEME_TUNED_KERNELS the tuned file\n")
			} else {
				kernels, _, err := jit.ExecutableKernels(args[0])
				if err != nil {
					return withExit(exitUsage, err)
				}
				// A pipeline LLVM does not parse compiles nothing at run
				// time: reported, not counted as deployed.
				rep = deploy.CheckWith(plans, kernels, gpu, func(p *deploy.Plan) error {
					return replay.ValidatePipeline(p.Config.Passes)
				})
				printDeployCheck(cmd.OutOrStdout(), rep)
			}
			if rep.Matched == 0 {
				return withExit(exitFailure, fmt.Errorf("deploy check: %s has none of the %d tuned kernels", args[0], len(plans)))
			}
			return nil
		},
	}
	cf.register(check)
	deployCmd.AddCommand(check)

	var pf deployFlags
	precompile := &cobra.Command{
		Use:   "precompile EXECUTABLE",
		Short: "Compile the tuned kernels for this GPU into the cache a run reads",
		Long: `precompile compiles every tuned kernel of the executable for this GPU into
the deployment cache (--cache-dir, default $MNEME_CACHE_DIR or .mneme-cache),
keyed exactly as the application's runtime keys its launches. A kernel whose
tuned configuration folds argument values or launch dimensions has a variant
per value set: with --rdb, one per recorded instance of it.`,
		Args: exactArgs("deploy precompile", "an executable built with the mneme compilers"),
		RunE: func(cmd *cobra.Command, args []string) error {
			plans, err := pf.plans()
			if err != nil {
				return err
			}
			return runPrecompile(cmd.OutOrStdout(), args[0], plans, pf)
		},
	}
	pf.register(precompile)
	precompile.Flags().StringVar(&pf.cacheDir, "cache-dir", deploy.DefaultCacheDir(), "the deployment cache")
	precompile.Flags().StringVar(&pf.rdb, "rdb", "", "a recording database of the executable: variants for its recorded launches")
	precompile.Flags().IntVar(&pf.device, "device", 0, "CUDA device ordinal")
	deployCmd.AddCommand(precompile)

	var device int
	variant := &cobra.Command{
		Use:         "compile-variant",
		Annotations: map[string]string{rawStdoutAnnotation: "yes"},
		Short:       "Compile one variant for the in-application runtime (JSON request on stdin, JSON on stdout)",
		Hidden:      true,
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if device < 0 {
				return withExit(exitUsage, fmt.Errorf("--device %d: a CUDA device ordinal is not negative", device))
			}
			var req deploy.CompileRequest
			data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), safefile.MaxJSON))
			if err != nil {
				return withExit(exitUsage, err)
			}
			if err := json.Unmarshal(data, &req); err != nil {
				return withExit(exitUsage, fmt.Errorf("compile-variant: the request on stdin: %v", err))
			}
			ctx, props, err := jit.OpenGPU(device)
			if err != nil {
				return err
			}
			defer ctx.Release()
			resp, err := jit.CompileVariant(req, ctx, props.Arch())
			if err != nil {
				return withExit(exitFailure, err)
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(resp)
		},
	}
	variant.Flags().IntVar(&device, "device", 0, "CUDA device ordinal")
	deployCmd.AddCommand(variant)
	rootCmd.AddCommand(deployCmd)
}

func exactArgs(cmd, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return withExit(exitUsage, fmt.Errorf("%s: want one argument, %s; got %d", cmd, what, len(args)))
		}
		return nil
	}
}

func printDeployCheck(w io.Writer, rep deploy.CheckReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tSTATUS\tFROM\tNOTE")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(r.Kernel), cell(string(r.Status)), cell(r.Source), cell(r.Note))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d tuned kernels are in the executable\n", rep.Matched, len(rep.Rows))
}

// machineCodeKernels lists the kernels of an executable that carries no IR
// from mneme's wrapper but fat binaries (an nvcc build); nil for one that
// carries IR, or no device code at all.
func machineCodeKernels(exe string) ([]string, error) {
	ir, err := appabi.ExecutableIR(exe)
	if err != nil || ir != nil {
		return nil, err
	}
	return nvbin.ExecutableKernels(exe)
}

// runPrecompile compiles each tuned kernel's variants into the cache.
func runPrecompile(w io.Writer, exe string, plans deploy.Plans, f deployFlags) error {
	if f.device < 0 {
		return withExit(exitUsage, fmt.Errorf("--device %d: a CUDA device ordinal is not negative", f.device))
	}
	kernels, bitcodes, err := jit.ExecutableKernels(exe)
	if err != nil {
		return withExit(exitUsage, err)
	}
	var rdb *db.DB
	if f.rdb != "" {
		if rdb, err = db.Open(f.rdb); err != nil {
			return withExit(exitUsage, err)
		}
	}
	ctx, props, err := jit.OpenGPU(f.device)
	if err != nil {
		return err
	}
	defer ctx.Release()
	driver, _ := cuda.DriverVersion()
	cache := deploy.NewCache(f.cacheDir)
	irHash := deploy.IRHash(bitcodes)
	jobs := deploy.PrecompileJobs(plans, kernels, launchesOf(rdb))
	compiled, failed := 0, 0
	for _, job := range jobs {
		req := deploy.CompileRequest{Executable: exe, Kernel: job.Kernel, Config: job.Config, Args: job.Args}
		resp, err := jit.CompileVariant(req, ctx, props.Arch())
		if err != nil {
			failed++
			fmt.Fprintf(w, "%s: %v (at run time the application's own code runs)\n", job.Kernel, err)
			continue
		}
		facts := resp.Facts()
		if err := cache.PutFacts(irHash, job.Kernel, &facts); err != nil {
			return err
		}
		key := deploy.VariantKey(irHash, job.Kernel, job.Config, facts, job.Args, props.Arch(), driver, os.Getenv("MNEME_PTXAS"))
		if err := cache.Put(key, resp.Cubin); err != nil {
			return err
		}
		compiled++
		fmt.Fprintf(w, "%s: %s, %d registers, %.0f ms\n", job.Kernel, job.Label, resp.Registers, resp.CompileSeconds*1e3)
	}
	fmt.Fprintf(w, "precompiled %d variants for %s into %s", compiled, props.Arch(), f.cacheDir)
	if failed > 0 {
		fmt.Fprintf(w, "; %d failed", failed)
	}
	fmt.Fprintln(w)
	if failed > 0 && compiled == 0 {
		return withExit(exitFailure, errors.New("deploy precompile: nothing compiled"))
	}
	return nil
}

// launchesOf lists a recording's launches per kernel, for variants keyed on
// recorded values.
func launchesOf(d *db.DB) map[string][]deploy.Launch {
	if d == nil {
		return nil
	}
	out := map[string][]deploy.Launch{}
	for _, ref := range d.All() {
		args, err := d.ArgBytes(ref.Instance)
		if err != nil {
			continue
		}
		out[ref.Kernel.KernelName] = append(out[ref.Kernel.KernelName], deploy.Launch{
			Grid: ref.Instance.GridDims, Block: ref.Instance.BlockDims, SharedMem: ref.Instance.SharedMem, Args: args})
	}
	return out
}
