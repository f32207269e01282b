package jit

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

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/llvm"
)

// FileJob is one compile of a kernel read from a file, as `mneme compile`
// asks for it.
type FileJob struct {
	IR       string       // LLVM bitcode, .ll text IR, or an object or executable built with the mneme wrapper
	Kernel   string       // mangled kernel name; empty: the file's only kernel
	Args     []string     // I=VALUE: fold argument I (0-based) into the code as a constant
	Config   mneme.Config // the configuration; Args add to its specialization
	Emit     string       // what to write: ptx, ll (optimized IR) or cubin
	Output   string       // file for the code; "-" or empty: the code goes to stdout
	JSON     bool         // print a FileReport on stdout instead of the code
	NoGPU    bool         // do not use a GPU even when one is present
	CacheDir string       // on-disk compile cache; empty: none
}

// FileReport is the JSON report of CompileFile.
type FileReport struct {
	Kernel   string       `json:"kernel"`
	Arch     string       `json:"arch"`
	Config   mneme.Config `json:"config"`
	Times    Times        `json:"times_ns"`
	Linked   bool         `json:"linked"`
	CacheHit string       `json:"cache_hit,omitempty"`
	PTXBytes int          `json:"ptx_bytes"`
	ObjSize  int          `json:"obj_size"`
	GPU      string       `json:"gpu,omitempty"`
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

// CompileFile compiles one kernel of a file under the job's configuration
// and writes the code (to job.Output or stdout) with a one-line summary of
// the stages on stderr, or the JSON report on stdout. With a CUDA driver and
// GPU (and not job.NoGPU) ptxas runs too, through the driver JIT.
//
// Bad input (a file that is not IR, an unknown kernel, a bad argument) is a
// *mneme.InputError; a failed compile a *CompileError; emitting a cubin on a
// machine without a GPU matches mneme.ErrNoGPU.
func CompileFile(job FileJob, stdout, stderr io.Writer) error {
	req, err := loadFileRequest(job)
	if err != nil {
		return err
	}
	switch job.Emit {
	case "ptx", "ll", "cubin":
	default:
		return mneme.BadInput(fmt.Errorf("--emit %q: want ptx, ll or cubin", job.Emit))
	}
	opts := Options{CacheDir: job.CacheDir}
	gpu, note, release, err := useDefaultGPU(&opts, job)
	if err != nil {
		return err
	}
	defer release()
	comp := NewCompiler(opts)
	if job.Emit == "ll" && !job.JSON {
		text, err := comp.OptimizedIR(req)
		if err != nil {
			return err
		}
		return writeOutput(stdout, job.Output, []byte(text))
	}
	out, err := comp.Compile(req)
	if err != nil {
		return err
	}
	code := out.PTX
	switch job.Emit {
	case "cubin":
		code = out.Cubin
	case "ll": // with --json: the report, and the optimized IR for -o
		text, err := comp.OptimizedIR(req)
		if err != nil {
			return err
		}
		code = []byte(text)
	}
	if !job.JSON {
		fmt.Fprintln(stderr, "mneme:", compileSummary(out, note))
		return writeOutput(stdout, job.Output, code)
	}
	if job.Output != "-" {
		if err := writeOutput(stdout, job.Output, code); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // pipelines read default<O3>, not default\u003cO3\u003e
	return enc.Encode(fileReport(out, req.Config, gpu, note))
}

// loadFileRequest reads the job's IR, resolves the kernel and folds the
// arguments the job names into the request's configuration.
func loadFileRequest(job FileJob) (*Request, error) {
	if job.IR == "" {
		return nil, mneme.BadInput(errors.New("--ir: an LLVM bitcode file is required"))
	}
	data, err := safefile.ReadFile(job.IR, safefile.MaxIR)
	if err != nil {
		return nil, mneme.BadInput(fmt.Errorf("--ir: %w", err))
	}
	mod, bitcode, err := parseIRFile(job.IR, data, job.Kernel)
	if err != nil {
		return nil, mneme.BadInput(err)
	}
	kernel := job.Kernel
	if kernel == "" {
		ks := mod.Kernels()
		if len(ks) != 1 {
			mod.Dispose()
			return nil, mneme.BadInput(fmt.Errorf("--kernel: %s holds %d kernels %v; name one", job.IR, len(ks), ks))
		}
		kernel = ks[0]
	}
	params, err := mod.KernelParams(kernel)
	mod.Dispose()
	if err != nil {
		return nil, mneme.BadInput(fmt.Errorf("--kernel: %w", err))
	}
	cfg := job.Config
	args, err := foldArgs(&cfg, params, job.Args)
	if err != nil {
		return nil, mneme.BadInput(err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, mneme.BadInput(err)
	}
	return &Request{Name: job.IR, IR: bitcode, Kernel: kernel, Config: cfg, Args: args}, nil
}

// foldArgs encodes the I=VALUE arguments for the kernel's parameters and
// marks them specialized in cfg.
func foldArgs(cfg *mneme.Config, params []llvm.Param, given []string) ([][]byte, error) {
	args := make([][]byte, len(params))
	for _, a := range given {
		i, val, ok := strings.Cut(a, "=")
		idx, err := strconv.Atoi(i)
		if !ok || err != nil {
			return nil, fmt.Errorf("--arg %q: want I=VALUE with a 0-based argument index", a)
		}
		if idx < 0 || idx >= len(params) {
			return nil, fmt.Errorf("--arg %q: the kernel has %d arguments", a, len(params))
		}
		if args[idx], err = EncodeArg(params[idx], val); err != nil {
			return nil, fmt.Errorf("--arg %q: argument %d (%s): %w", a, idx, params[idx].Type, err)
		}
		cfg.Specialize = true
		cfg.SpecializeArgs = append(cfg.SpecializeArgs, idx)
	}
	return args, nil
}

// useDefaultGPU gives opts device 0's context when the job may use a GPU and
// one is there. Without one the compile stops at PTX, and note says why; a
// cubin cannot be made then. release gives the context back.
func useDefaultGPU(opts *Options, job FileJob) (gpu, note string, release func(), err error) {
	release = func() {}
	var gpuErr error = fmt.Errorf("--no-gpu: %w", mneme.ErrNoGPU)
	if !job.NoGPU {
		ctx, props, err := openDefaultGPU()
		switch {
		case err == nil:
			opts.Context, opts.Arch, gpu = ctx, props.Arch(), props.Name
			return gpu, "", func() { ctx.Release() }, nil
		case cuda.IsNoGPU(err):
			note = "no CUDA driver or GPU: PTX only (registers, spills and object size need a GPU)"
		default:
			note = "no usable GPU (" + err.Error() + "): PTX only"
		}
		gpuErr = err
	}
	if job.Emit == "cubin" {
		return "", note, release, fmt.Errorf("--emit cubin needs a CUDA driver and GPU (ptxas runs through the driver JIT): %w", gpuErr)
	}
	return "", note, release, nil
}

func fileReport(out *Output, cfg mneme.Config, gpu, note string) FileReport {
	rep := FileReport{Kernel: out.Kernel, Arch: out.Arch, Config: cfg, Times: out.Times,
		Linked: out.Cubin != nil, CacheHit: out.CacheHit, PTXBytes: len(out.PTX), ObjSize: out.ObjSize, GPU: gpu, Note: note}
	if out.Cubin != nil {
		rep.Registers, rep.SpillStores, rep.SpillLoads = &out.Registers, &out.SpillStores, &out.SpillLoads
		rep.LocalBytes, rep.ConstBytes, rep.SharedBytes = &out.LocalBytes, &out.ConstBytes, &out.SharedBytes
		rep.PtxasOpts = out.PtxasOptions
	}
	return rep
}

// compileSummary is the one-line report printed beside the code: stage
// times and, when ptxas ran, the resources it reported.
func compileSummary(out *Output, note string) string {
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
	entries, err := appabi.ExecutableIR(path)
	if err != nil {
		return nil, nil, err
	}
	if entries == nil {
		return nil, nil, fmt.Errorf("%s: an ELF file without device IR (no %s section): was it built with `mneme config cxx`?", path, appabi.IRSection)
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

// writeOutput writes data to the file at path, or to stdout for "-" or "".
func writeOutput(stdout io.Writer, path string, data []byte) error {
	if path == "-" || path == "" {
		_, err := stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	return nil
}

// openDefaultGPU retains device 0's primary context; the compiler makes it
// current where it links.
func openDefaultGPU() (*cuda.Context, cuda.DeviceProps, error) { return OpenGPU(0) }
