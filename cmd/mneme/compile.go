package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/jit"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/runtime"
	"github.com/mneme-gpu/mneme/spec"
)

type compileFlags struct {
	ir, kernel, out, emit  string
	args                   []string
	block, grid            string
	specializeDims         bool
	passes                 string
	codegenOpt             int
	launchBounds           string
	arch                   string
	ptxVersion             int
	ptxasOpt, maxRegisters int
	noPrune, noInternalize bool
	jsonOut, noGPU         bool
	cacheDir               string
}

func init() {
	var f compileFlags
	cmd := &cobra.Command{
		Use:   "compile --ir FILE.bc [--kernel NAME] [flags]",
		Short: "Compile one kernel's IR under a configuration to PTX (and a cubin with a GPU)",
		Long: `compile specializes, optimizes and generates code for one kernel of an LLVM
bitcode file, the way replay and tuning do, and prints the result and the time
of each stage. With a CUDA driver and GPU it also runs ptxas through the driver
JIT and reports registers, spills and the object size.

Arguments given with --arg are folded into the code as constants; --block and
--grid with --specialize-dims fold the launch dimensions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCompile(cmd.OutOrStdout(), &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.ir, "ir", "", "LLVM bitcode, .ll text IR, or an object/executable built with the mneme wrapper (required)")
	fl.StringVar(&f.kernel, "kernel", "", "mangled kernel name (default: the module's only kernel)")
	fl.StringArrayVar(&f.args, "arg", nil, "fold argument I (0-based) as a constant: I=VALUE (repeatable)")
	fl.StringVar(&f.block, "block", "", "block dimensions X[,Y,Z]")
	fl.StringVar(&f.grid, "grid", "", "grid dimensions X[,Y,Z]")
	fl.BoolVar(&f.specializeDims, "specialize-dims", false, "fold --block and --grid into the code")
	fl.StringVar(&f.passes, "passes", spec.DefaultPipeline, "new-pass-manager pipeline text")
	fl.IntVar(&f.codegenOpt, "codegen-opt", 3, "NVPTX code generation level 0..3")
	fl.StringVar(&f.launchBounds, "launch-bounds", "", "MAX[,MINBLOCKS]: max threads per block and min blocks per SM")
	fl.StringVar(&f.arch, "arch", "", "target sm_XX (default: the GPU's, or "+jit.DefaultArch+")")
	fl.IntVar(&f.ptxVersion, "ptx-version", 0, "PTX ISA version x10, e.g. 80 (default: LLVM's for the arch)")
	fl.IntVar(&f.ptxasOpt, "ptxas-opt", 0, "ptxas optimization level 1..4 (0: driver default)")
	fl.IntVar(&f.maxRegisters, "max-registers", 0, "ptxas register cap per thread (0: none)")
	fl.BoolVar(&f.noPrune, "no-prune", false, "keep the whole module instead of the kernel's closure")
	fl.BoolVar(&f.noInternalize, "no-internalize", false, "keep non-kernel symbols external")
	fl.StringVar(&f.emit, "emit", "ptx", "what to write: ptx, ll (optimized IR) or cubin (needs a GPU)")
	fl.StringVarP(&f.out, "output", "o", "-", "output file ('-' for stdout)")
	fl.BoolVar(&f.jsonOut, "json", false, "print a JSON report (stage times, resources) instead of the code")
	fl.BoolVar(&f.noGPU, "no-gpu", false, "do not use a GPU even when one is present")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "directory of the on-disk compile cache (default: none)")
	rootCmd.AddCommand(cmd)
}

// compileReport is the --json document.
type compileReport struct {
	Kernel   string      `json:"kernel"`
	Arch     string      `json:"arch"`
	Config   spec.Config `json:"config"`
	Times    jit.Times   `json:"times_ns"`
	Linked   bool        `json:"linked"`
	CacheHit string      `json:"cache_hit,omitempty"`
	PTXBytes int         `json:"ptx_bytes"`
	ObjSize  int         `json:"obj_size"`
	GPU      string      `json:"gpu,omitempty"`
	// Resource usage comes from ptxas, so only with a GPU.
	Registers   *int     `json:"registers,omitempty"`
	SpillStores *int     `json:"spill_stores,omitempty"`
	SpillLoads  *int     `json:"spill_loads,omitempty"`
	LocalBytes  *int     `json:"local_bytes,omitempty"`
	ConstBytes  *int     `json:"const_bytes,omitempty"`
	SharedBytes *int     `json:"shared_bytes,omitempty"`
	PtxasOpts   []string `json:"ptxas_options,omitempty"`
	Note        string   `json:"note,omitempty"`
}

func runCompile(stdout io.Writer, f *compileFlags) error {
	if f.ir == "" {
		return withExit(exitUsage, errors.New("--ir: an LLVM bitcode file is required"))
	}
	data, err := os.ReadFile(f.ir)
	if err != nil {
		return withExit(exitUsage, fmt.Errorf("--ir: %w", err))
	}
	mod, bitcode, err := parseIRFile(f.ir, data, f.kernel)
	if err != nil {
		return withExit(exitUsage, err)
	}
	kernel := f.kernel
	if kernel == "" {
		ks := mod.Kernels()
		if len(ks) != 1 {
			mod.Dispose()
			return withExit(exitUsage, fmt.Errorf("--kernel: %s holds %d kernels %v; name one", f.ir, len(ks), ks))
		}
		kernel = ks[0]
	}
	params, err := mod.KernelParams(kernel)
	mod.Dispose()
	if err != nil {
		return withExit(exitUsage, fmt.Errorf("--kernel: %w", err))
	}

	cfg := spec.Config{Passes: f.passes, CodegenOpt: f.codegenOpt, SpecializeDims: f.specializeDims,
		Prune: !f.noPrune, Internalize: !f.noInternalize, Arch: f.arch, PTXVersion: f.ptxVersion,
		PtxasOpt: f.ptxasOpt, MaxRegisters: f.maxRegisters}
	if f.block != "" {
		if cfg.Block, err = spec.ParseDim3(f.block); err != nil {
			return withExit(exitUsage, fmt.Errorf("--block: %w", err))
		}
	}
	if f.grid != "" {
		if cfg.Grid, err = spec.ParseDim3(f.grid); err != nil {
			return withExit(exitUsage, fmt.Errorf("--grid: %w", err))
		}
	}
	if f.specializeDims && (cfg.Block.IsZero() || cfg.Grid.IsZero()) {
		return withExit(exitUsage, errors.New("--specialize-dims needs --block and --grid"))
	}
	if f.launchBounds != "" {
		if cfg.MaxThreads, cfg.MinBlocksPerSM, err = parseLaunchBounds(f.launchBounds); err != nil {
			return withExit(exitUsage, fmt.Errorf("--launch-bounds: %w", err))
		}
		cfg.SetLaunchBounds = true
	}
	args := make([][]byte, len(params))
	for _, a := range f.args {
		i, val, ok := strings.Cut(a, "=")
		idx, err := strconv.Atoi(i)
		if !ok || err != nil {
			return withExit(exitUsage, fmt.Errorf("--arg %q: want I=VALUE with a 0-based argument index", a))
		}
		if idx < 0 || idx >= len(params) {
			return withExit(exitUsage, fmt.Errorf("--arg %q: the kernel has %d arguments", a, len(params)))
		}
		if args[idx], err = jit.EncodeArg(params[idx], val); err != nil {
			return withExit(exitUsage, fmt.Errorf("--arg %q: argument %d (%s): %w", a, idx, params[idx].Type, err))
		}
		cfg.Specialize = true
		cfg.SpecializeArgs = append(cfg.SpecializeArgs, idx)
	}
	if err := cfg.Validate(); err != nil {
		return withExit(exitUsage, err)
	}
	switch f.emit {
	case "ptx", "ll", "cubin":
	default:
		return withExit(exitUsage, fmt.Errorf("--emit %q: want ptx, ll or cubin", f.emit))
	}

	opts := jit.Options{CacheDir: f.cacheDir}
	var gpu, note string
	if !f.noGPU {
		ctx, props, err := openDefaultGPU()
		switch {
		case err == nil:
			defer ctx.Release()
			opts.Context, opts.Arch, gpu = ctx, props.Arch(), props.Name
		case errors.Is(err, cuda.ErrNoDriver):
			note = "no CUDA driver: PTX only (registers, spills and object size need a GPU)"
		default:
			note = "no usable GPU (" + err.Error() + "): PTX only"
		}
	}
	if f.emit == "cubin" && opts.Context == nil {
		return withExit(exitNoGPU, errors.New("--emit cubin needs a CUDA driver and GPU (ptxas runs through the driver JIT); "+note))
	}
	comp := jit.NewCompiler(opts)
	req := &jit.Request{Name: f.ir, IR: bitcode, Kernel: kernel, Config: cfg, Args: args}

	if f.emit == "ll" && !f.jsonOut {
		text, err := comp.OptimizedIR(req)
		if err != nil {
			return compileFailure(err)
		}
		return writeOutput(stdout, f.out, []byte(text))
	}
	out, err := comp.Compile(req)
	if err != nil {
		return compileFailure(err)
	}
	code := out.PTX
	switch f.emit {
	case "cubin":
		code = out.Cubin
	case "ll": // with --json: the report, and the optimized IR for -o
		text, err := comp.OptimizedIR(req)
		if err != nil {
			return compileFailure(err)
		}
		code = []byte(text)
	}
	if !f.jsonOut {
		fmt.Fprintln(os.Stderr, "mneme:", compileSummary(out, note))
		return writeOutput(stdout, f.out, code)
	}
	rep := compileReport{Kernel: out.Kernel, Arch: out.Arch, Config: cfg, Times: out.Times,
		Linked: out.Cubin != nil, CacheHit: out.CacheHit, PTXBytes: len(out.PTX), ObjSize: out.ObjSize, GPU: gpu, Note: note}
	if out.Cubin != nil {
		rep.Registers, rep.SpillStores, rep.SpillLoads = &out.Registers, &out.SpillStores, &out.SpillLoads
		rep.LocalBytes, rep.ConstBytes, rep.SharedBytes = &out.LocalBytes, &out.ConstBytes, &out.SharedBytes
		rep.PtxasOpts = out.PtxasOptions
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // pipelines read default<O3>, not default\u003cO3\u003e
	if f.out != "-" {
		if err := writeOutput(stdout, f.out, code); err != nil {
			return err
		}
	}
	return enc.Encode(rep)
}

// compileSummary is the one-line report printed beside the code: stage
// times and, when ptxas ran, the resources it reported.
func compileSummary(out *jit.Output, note string) string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
	s := fmt.Sprintf("%s for %s: preprocess %s, optimize %s, codegen %s", out.Kernel, out.Arch,
		ms(out.Times.Preprocess), ms(out.Times.Optimize), ms(out.Times.Codegen))
	if out.Cubin != nil {
		s += fmt.Sprintf(", ptxas %s; %d registers, %d B spill stores, %d B spill loads, %d B local, cubin %d B",
			ms(out.Times.Ptxas), out.Registers, out.SpillStores, out.SpillLoads, out.LocalBytes, out.ObjSize)
	}
	if out.CacheHit != "" {
		s += " (from the " + out.CacheHit + " cache)"
	}
	if note != "" {
		s += "; " + note
	}
	return s
}

// parseIRFile reads bitcode, textual IR (.ll), or an object file or
// executable built with the mneme wrapper, whose mneme_ir section holds each
// translation unit's device IR: then the unit defining the kernel is used.
// It returns the module and its bitcode: where the input is bitcode, the
// bytes as read, so the compiler keys its cache on the file's own bytes and
// does not pay the isolated first read again for a re-written copy.
func parseIRFile(path string, data []byte, kernel string) (*llvm.Module, []byte, error) {
	if strings.HasSuffix(path, ".ll") {
		m, err := llvm.ParseIR(string(data), path)
		if err != nil {
			return nil, nil, err
		}
		return m, m.Bitcode(), nil
	}
	if !bytes.HasPrefix(data, []byte("\x7fELF")) {
		m, err := llvm.ParseBitcode(data, path)
		return m, data, err
	}
	entries, err := runtime.ExecutableIR(path)
	if err != nil {
		return nil, nil, err
	}
	if entries == nil {
		return nil, nil, fmt.Errorf("%s: an ELF file without device IR (no %s section): was it built with `mneme config cxx`?", path, runtime.IRSection)
	}
	var found []*llvm.Module
	var foundBitcode [][]byte
	var names []string
	defer func() {
		for _, m := range found {
			m.Dispose() // those not handed back
		}
	}()
	for _, e := range entries {
		m, err := llvm.ParseBitcode(e.Bitcode, path+":"+e.Name)
		if err != nil {
			return nil, nil, err
		}
		ks := m.Kernels()
		if (kernel == "" && len(ks) > 0) || slices.Contains(ks, kernel) {
			found = append(found, m)
			foundBitcode = append(foundBitcode, e.Bitcode)
			names = append(names, e.Name)
			continue
		}
		m.Dispose()
	}
	switch {
	case len(found) == 1:
		m := found[0]
		found = nil
		return m, foundBitcode[0], nil
	case len(found) == 0 && kernel != "":
		return nil, nil, fmt.Errorf("%s: no translation unit defines kernel %q", path, kernel)
	case len(found) == 0:
		return nil, nil, fmt.Errorf("%s: its device IR holds no kernel", path)
	}
	return nil, nil, fmt.Errorf("--kernel: %s has kernels in several translation units %v; name one", path, names)
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

// compileFailure maps a compile error to its exit code; an invalid pipeline
// is bad input, anything else a compile failure.
func compileFailure(err error) error {
	var ce *jit.CompileError
	if (errors.As(err, &ce) && ce.Stage == "parse") || errors.Is(err, llvm.ErrInvalidPipeline) {
		return withExit(exitUsage, err)
	}
	return withExit(exitCompile, err)
}

func writeOutput(stdout io.Writer, path string, data []byte) error {
	if path == "-" || path == "" {
		_, err := stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return withExit(exitFailure, fmt.Errorf("-o: %w", err))
	}
	return nil
}

// openDefaultGPU retains device 0's primary context; the compiler makes it
// current where it links.
func openDefaultGPU() (*cuda.Context, cuda.DeviceProps, error) {
	if err := cuda.Init(); err != nil {
		return nil, cuda.DeviceProps{}, err
	}
	dev, err := cuda.GetDevice(0)
	if err != nil {
		return nil, cuda.DeviceProps{}, err
	}
	props, err := dev.Props()
	if err != nil {
		return nil, cuda.DeviceProps{}, err
	}
	ctx, err := dev.RetainPrimaryContext()
	if err != nil {
		return nil, cuda.DeviceProps{}, err
	}
	return ctx, props, nil
}
