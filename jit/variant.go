package jit

import (
	"fmt"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/deploy"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/llvm"
)

// CompileVariant compiles one deployment variant of a kernel embedded in an
// executable for the GPU of ctx (arch its sm_XX): what the in-application
// runtime asks for when a tuned kernel is first launched with new
// specialized values, and what `mneme deploy precompile` fills the cache
// with.
func CompileVariant(req deploy.CompileRequest, ctx *cuda.Context, arch string) (*deploy.CompileResponse, error) {
	start := time.Now()
	data, err := safefile.ReadFile(req.Executable, safefile.MaxIR)
	if err != nil {
		return nil, err
	}
	mod, bitcode, err := parseIRFile(req.Executable, data, req.Kernel)
	if err != nil {
		return nil, err
	}
	defer mod.Dispose()
	params, err := mod.KernelParams(req.Kernel)
	if err != nil {
		return nil, err
	}
	resp := &deploy.CompileResponse{ArgSizes: make([]int, len(params)), Arch: arch}
	for i, p := range params {
		resp.ArgSizes[i] = p.Bytes()
	}
	cfg := req.Config
	resp.Scalars = foldable(params, mneme.Config{Specialize: true})
	if cfg.Specialize {
		resp.Folded = foldable(params, cfg)
		if len(resp.Folded) == 0 {
			cfg.Specialize, cfg.SpecializeArgs = false, nil
		} else {
			cfg.SpecializeArgs = resp.Folded
		}
	}
	if len(resp.Folded) > 0 && len(req.Args) != len(params) {
		return nil, fmt.Errorf("kernel %s takes %d arguments, %d given", req.Kernel, len(params), len(req.Args))
	}
	for _, i := range resp.Folded {
		if len(req.Args[i]) != params[i].Bytes() {
			return nil, fmt.Errorf("kernel %s argument %d: %d bytes given, the parameter has %d", req.Kernel, i, len(req.Args[i]), params[i].Bytes())
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kernelOnly, err := mod.ExtractKernel(req.Kernel)
	if err != nil {
		return nil, err
	}
	for _, g := range kernelOnly.GlobalVars() {
		resp.Globals = append(resp.Globals, deploy.Global{Name: g.Name, AddressSpace: g.AddressSpace, ReadOnly: g.ReadOnly})
	}
	kernelOnly.Dispose()
	keep := make([]string, len(resp.Globals))
	for i, g := range resp.Globals {
		keep[i] = g.Name
	}
	comp := NewCompiler(Options{Context: ctx, Arch: arch})
	out, err := comp.Compile(&Request{Name: req.Executable, IR: bitcode, Kernel: req.Kernel, Config: cfg, Args: req.Args, Keep: keep})
	if err != nil {
		return nil, err
	}
	if out.Cubin == nil {
		return nil, fmt.Errorf("kernel %s: no cubin was linked (a GPU context is needed)", req.Kernel)
	}
	resp.Cubin, resp.Registers = out.Cubin, out.Registers
	resp.CompileSeconds = time.Since(start).Seconds()
	return resp, nil
}

// foldable lists the arguments cfg specializes that the compiler can fold:
// scalars, and pointers only when named explicitly, as rewrite folds them.
func foldable(params []llvm.Param, cfg mneme.Config) []int {
	explicit := len(cfg.SpecializeArgs) > 0
	var out []int
	for i, p := range params {
		if !cfg.Specializes(i) || p.Kind == llvm.ParamOther || p.ByVal || (p.Kind == llvm.ParamPointer && !explicit) {
			continue
		}
		out = append(out, i)
	}
	return out
}

// OpenGPU retains the primary context of the GPU with the given ordinal,
// for compiles that link a cubin; release it with Context.Release.
func OpenGPU(ordinal int) (*cuda.Context, cuda.DeviceProps, error) {
	if err := cuda.Init(); err != nil {
		return nil, cuda.DeviceProps{}, err
	}
	dev, err := cuda.GetDevice(ordinal)
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

// ExecutableKernels lists the kernels of an executable's embedded IR and
// each translation unit's bitcode, in order: what deploy.IRHash identifies
// the IR by, as the in-application runtime does from the same section.
func ExecutableKernels(path string) (kernels []string, bitcodes [][]byte, err error) {
	entries, err := appabi.ExecutableIR(path)
	if err != nil {
		return nil, nil, err
	}
	if entries == nil {
		return nil, nil, fmt.Errorf("%s: an ELF file without device IR (no %s section): was it built with `mneme config cxx`?", path, appabi.IRSection)
	}
	for _, e := range entries {
		m, err := llvm.ParseBitcode(e.Bitcode, path+":"+e.Name)
		if err != nil {
			return nil, nil, err
		}
		kernels = append(kernels, m.Kernels()...)
		m.Dispose()
		bitcodes = append(bitcodes, e.Bitcode)
	}
	return kernels, bitcodes, nil
}
