package toolchain

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mneme-gpu/mneme/appabi"
)

// StepKind says what a plan step does.
type StepKind int

const (
	// RunStep runs Argv as a program.
	RunStep StepKind = iota
	// WriteIRStep wraps the bitcode file Bitcode as one appabi.IREntry named
	// Source, writes it to Entry and writes Asm, an assembly source that places
	// Entry's bytes in the allocatable, retained mneme_ir section.
	WriteIRStep
	// RenameStep moves From over To.
	RenameStep
)

// Step is one action of a wrapper plan.
type Step struct {
	Kind StepKind
	Argv []string

	Source, Bitcode, Entry, Asm string   // WriteIRStep
	Flags                       []string // WriteIRStep: the compile's device-code flags
	From, To                    string   // RenameStep
}

func (s Step) String() string {
	switch s.Kind {
	case WriteIRStep:
		return fmt.Sprintf("embed %s (IR of %s) via %s", s.Bitcode, s.Source, s.Asm)
	case RenameStep:
		return fmt.Sprintf("mv %s %s", s.From, s.To)
	}
	return strings.Join(s.Argv, " ")
}

// Plan is the sequence of steps that carries out one wrapped compiler command.
type Plan struct {
	Steps []Step
}

// Wrapper turns compiler command lines into plans. Its fields describe the
// machine; NewWrapper fills them from the real one.
type Wrapper struct {
	Host   Host
	CXX    bool   // C++ driver (mneme cxx) rather than C (mneme cc)
	Layout Layout // where the runtime shim lives
	// TempDir receives intermediate files (device bitcode, IR section objects).
	TempDir string

	deviceFlags []string // of the command being planned, for its IR entries
}

// NewWrapper describes this machine for the C (cxx=false) or C++/CUDA wrapper.
func NewWrapper(h Host, cxx bool, layout Layout, tempDir string) *Wrapper {
	return &Wrapper{Host: h, CXX: cxx, Layout: layout, TempDir: tempDir}
}

// isLauncherCompiler reports whether the first argument is a compiler that a
// build system (CMake's <LANG>_COMPILER_LAUNCHER) put before the real command line.
func isLauncherCompiler(arg string) bool {
	if strings.HasPrefix(arg, "-") || strings.HasPrefix(arg, "@") {
		return false
	}
	base := filepath.Base(arg)
	for _, name := range []string{"clang", "nvcc", "mneme-cc", "mneme-cxx", "gcc", "g++", "c++", "cc"} {
		if base == name || strings.HasPrefix(base, name+"-") || strings.HasPrefix(base, name+"+") {
			return true
		}
	}
	return false
}

// Plan computes the steps for the compiler arguments raw (without the
// program name). A first argument naming a compiler (launcher use) selects
// that compiler when it is clang, and is replaced by clang-22 otherwise.
func (w *Wrapper) Plan(raw []string) (*Plan, error) {
	compiler := ""
	if len(raw) > 0 && isLauncherCompiler(raw[0]) {
		base := filepath.Base(raw[0])
		if strings.Contains(base, "nvcc") {
			return nil, fmt.Errorf("mneme cannot embed IR with nvcc (%s): use clang-%d as the CUDA compiler (CMAKE_CUDA_COMPILER=$(mneme config cxx))", raw[0], LLVMMajor)
		}
		if strings.HasPrefix(base, "clang") {
			compiler = raw[0]
		}
		raw = raw[1:]
	}
	if compiler == "" {
		c, err := FindClang(w.Host, w.CXX)
		if err != nil {
			return nil, err
		}
		compiler = c
	}
	raw = translateNVCCArch(raw)
	cl, err := ParseCommandLine(raw)
	if err != nil {
		return nil, err
	}
	plan := &Plan{}
	run := func(argv ...string) { plan.Steps = append(plan.Steps, Step{Kind: RunStep, Argv: argv}) }

	cuda := cl.CUDAInputs()
	if cl.InfoOnly || len(cl.Inputs) == 0 {
		run(append([]string{compiler}, raw...)...)
		return plan, nil
	}
	var cudaFlags, irCompile []string
	cudaRoot := ""
	if len(cuda) > 0 || cl.Links() {
		cudaRoot, err = w.cudaRoot(cl, len(cuda) > 0)
		if err != nil {
			return nil, err
		}
	}
	if len(cuda) > 0 {
		// Once per command: without an architecture flag or MNEME_CUDA_ARCH
		// this runs nvidia-smi.
		arch := GPUArch(w.Host, cl.Args)
		cudaFlags = w.cudaFlags(cl, cudaRoot, arch)
		irCompile = deviceIRCompile(compiler, cl, cudaFlags, arch)
		w.deviceFlags = DeviceCodeFlags(cl.Args)
	}
	embed := len(cuda) > 0 && !cl.DeviceOnly && !cl.EmitLLVM && !cl.AssembleOnly && !cl.PreprocessOnly && !cl.SyntaxOnly

	if !cl.Links() {
		run(concat([]string{compiler}, raw, cudaFlags)...)
		if embed && cl.CompileOnly {
			for k, in := range cuda {
				w.embedSteps(plan, compiler, irCompile, in, cl.ObjectPath(in), k)
			}
		}
		return plan, nil
	}

	// Link, possibly compiling too: CUDA sources are compiled (and embedded)
	// one by one into temporary objects that take their place in the link.
	linkArgs := append([]string(nil), cl.Args...)
	if len(cuda) == 0 {
		linkArgs = raw // nothing replaced: keep response files as the user wrote them
	}
	compileFlags := compileOnlyFlags(cl)
	objects := make([]string, len(cuda))
	for k, in := range cuda {
		objects[k] = filepath.Join(w.TempDir, fmt.Sprintf("cu%d.o", k))
		run(concat([]string{compiler}, compileFlags, cudaFlags, []string{"-x", "cuda", "-c", in.Path, "-o", objects[k]})...)
		w.embedSteps(plan, compiler, irCompile, in, objects[k], k)
	}
	for k := len(cuda) - 1; k >= 0; k-- { // from the back so earlier positions stay valid
		in := cuda[k]
		repl := []string{"-x", "none", objects[k]}
		if in.Lang != "" {
			repl = append(repl, "-x", in.Lang)
		}
		linkArgs = concat(linkArgs[:in.Pos], repl, linkArgs[in.Pos+1:])
	}
	link, err := w.linkFlags(cl, cudaRoot)
	if err != nil {
		return nil, err
	}
	run(concat([]string{compiler}, link.front, linkArgs, link.back)...)
	return plan, nil
}

// translateNVCCArch rewrites nvcc's -arch=sm_XX / -arch sm_XX, which clang
// does not accept, into --cuda-gpu-arch=sm_XX.
func translateNVCCArch(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if v, ok := strings.CutPrefix(a, "-arch="); ok && smRE.MatchString(v) {
			out = append(out, "--cuda-gpu-arch="+v)
			continue
		}
		if a == "-arch" && i+1 < len(args) && smRE.MatchString(args[i+1]) {
			out = append(out, "--cuda-gpu-arch="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// cudaRoot finds the CUDA toolkit. A CUDA compile may go without one when
// the user builds with -nocudainc -nocudalib or names --cuda-path; a link
// then still needs nothing from it if it links cudart itself.
func (w *Wrapper) cudaRoot(cl *CommandLine, compiling bool) (string, error) {
	if compiling && !cl.Links() && cl.NoCUDAInc && cl.NoCUDALib {
		return "", nil // the user builds without the toolkit on purpose
	}
	root, err := FindCUDA(w.Host)
	if err == nil {
		return root, nil
	}
	if compiling && !cl.Links() && (cl.HasCUDAPath || (cl.NoCUDAInc && cl.NoCUDALib)) {
		return "", nil
	}
	return "", err
}

// cudaFlags are added to every CUDA compile: CompileFlags less what the
// command line already gives (toolkit, architecture).
func (w *Wrapper) cudaFlags(cl *CommandLine, root, arch string) []string {
	cudaPath := root
	if cl.HasCUDAPath {
		cudaPath = ""
	}
	if ArchFromArgs(cl.Args) != "" {
		arch = ""
	}
	// clang-22 knows CUDA up to 12.9 and warns about newer toolkits; the
	// warning is harmless and would break -Werror builds.
	return append(cudaCompileFlags(w.Host, cudaPath, arch, root), "-Wno-unknown-cuda-version")
}

// deviceIRCompile is the command that compiles a CUDA source's device IR for
// arch, less the source and output: the user's flags that shape device code
// (irFlag) and the CUDA flags, for one architecture, unoptimized.
func deviceIRCompile(compiler string, cl *CommandLine, cudaFlags []string, arch string) []string {
	var flags []string
	for i := 0; i < len(cl.Args); {
		keep, span := irFlag(cl.Args, i)
		if span > len(cl.Args)-i {
			span = len(cl.Args) - i
		}
		if keep {
			flags = append(flags, cl.Args[i:i+span]...)
		}
		i += span
	}
	var extra []string
	for _, f := range cudaFlags {
		if !strings.HasPrefix(f, "--cuda-gpu-arch=") {
			extra = append(extra, f)
		}
	}
	return concat([]string{compiler}, flags, extra, []string{
		"--cuda-gpu-arch=" + arch, "--cuda-device-only", "-emit-llvm", "-c",
		"-O3", "-Xclang", "-disable-llvm-passes", "-w", "-x", "cuda"})
}

// embedSteps appends the steps that compile in's device IR (with irCompile,
// from deviceIRCompile) and merge it into obj.
func (w *Wrapper) embedSteps(plan *Plan, compiler string, irCompile []string, in Input, obj string, k int) {
	base := filepath.Join(w.TempDir, fmt.Sprintf("ir%d", k))
	ir := concat(irCompile, []string{in.Path, "-o", base + ".bc"})
	plan.Steps = append(plan.Steps,
		Step{Kind: RunStep, Argv: ir},
		Step{Kind: WriteIRStep, Source: in.Path, Bitcode: base + ".bc", Entry: base + ".entry", Asm: base + ".s", Flags: w.deviceFlags},
		Step{Kind: RunStep, Argv: []string{compiler, "-c", base + ".s", "-o", base + ".o"}},
		Step{Kind: RunStep, Argv: []string{compiler, "-r", "-nostdlib", obj, base + ".o", "-o", obj + ".mneme-tmp"}},
		Step{Kind: RenameStep, From: obj + ".mneme-tmp", To: obj},
	)
}

// compileOnlyFlags are the user's flags minus inputs, outputs, languages and
// link-only options: what compiling one source of a compile-and-link command takes.
func compileOnlyFlags(cl *CommandLine) []string {
	isInput := map[int]bool{}
	for _, in := range cl.Inputs {
		isInput[in.Pos] = true
	}
	var out []string
	args := cl.Args
	for i := 0; i < len(args); i++ {
		a := args[i]
		if isInput[i] {
			continue
		}
		switch {
		case a == "-o" || a == "-x" || a == "-l" || a == "-L" || a == "-Xlinker" || a == "-MF" || a == "-MT" || a == "-MQ" ||
			a == "-u" || a == "-z" || a == "-T" || a == "-e" || a == "-rpath" || a == "-Xoffload-linker":
			i++
		case strings.HasPrefix(a, "-o") && !strings.HasPrefix(a, "-objc"), strings.HasPrefix(a, "-x") && !strings.HasPrefix(a, "-xc-"),
			strings.HasPrefix(a, "-l"), strings.HasPrefix(a, "-L"), strings.HasPrefix(a, "-Wl,"), strings.HasPrefix(a, "-M"),
			strings.HasPrefix(a, "-fuse-ld="), a == "-shared", a == "-static", a == "-rdynamic", a == "-pie", a == "-no-pie",
			a == "-c", a == "-v":
		default:
			out = append(out, a)
		}
	}
	return out
}

type linkAdditions struct{ front, back []string }

// linkFlags are added to a link: the shim first (so its references to the
// real CUDA functions are resolved by a cudart that comes later on the line,
// static archives included), the --wrap options, and the libraries.
func (w *Wrapper) linkFlags(cl *CommandLine, cudaRoot string) (linkAdditions, error) {
	shim := w.Layout.ShimArchive()
	for _, a := range cl.Args {
		if a == shim || strings.HasSuffix(a, "/libmneme_shim.a") {
			return linkAdditions{}, nil // already instrumented (e.g. by add_mneme)
		}
	}
	if !w.Host.IsFile(shim) {
		return linkAdditions{}, fmt.Errorf("mneme runtime shim %s not found: build it (make runtime) or set MNEME_PREFIX to mneme's install prefix", shim)
	}
	all := LinkFlags(w.Host, w.Layout, cudaRoot)
	l := linkAdditions{front: all[:4]}
	for _, f := range all[4:] {
		if f != "-lcudart" || !cl.LinksCUDART {
			l.back = append(l.back, f)
		}
	}
	return l, nil
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// StepError is a failed step; ExitCode is the program's exit status (or 1).
type StepError struct {
	Step     Step
	ExitCode int
	Err      error
}

func (e *StepError) Error() string {
	if len(e.Step.Argv) > 0 {
		return fmt.Sprintf("%s failed (exit %d)", filepath.Base(e.Step.Argv[0]), e.ExitCode)
	}
	return fmt.Sprintf("%s: %v", e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Execute runs a plan's steps in order, the programs with the given standard
// streams; verbose prints each step to stderr first. It stops at the first
// failure and removes a merge output it left half written.
func Execute(p *Plan, stdin *os.File, stdout, stderr *os.File, verbose bool) error {
	for _, s := range p.Steps {
		if verbose {
			fmt.Fprintln(stderr, "mneme:", s)
		}
		switch s.Kind {
		case RunStep:
			cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
			if err := cmd.Run(); err != nil {
				code := 1
				var ee *exec.ExitError
				if errors.As(err, &ee) && ee.ExitCode() > 0 {
					code = ee.ExitCode()
				}
				return &StepError{Step: s, ExitCode: code, Err: err}
			}
		case WriteIRStep:
			if err := WriteIRAssembly(s.Source, s.Bitcode, s.Entry, s.Asm, s.Flags...); err != nil {
				return &StepError{Step: s, ExitCode: 1, Err: err}
			}
		case RenameStep:
			if err := os.Rename(s.From, s.To); err != nil {
				os.Remove(s.From)
				return &StepError{Step: s, ExitCode: 1, Err: err}
			}
		}
	}
	return nil
}

// JITAnnotationsOf reads a translation unit's annotate("jit") kernels from
// its device bitcode; set by the mneme command, which links LLVM (this
// package does not). Nil: no annotations are embedded.
var JITAnnotationsOf func(bitcode []byte, source string) ([]appabi.JITAnnotation, error)

// WriteIRAssembly reads the device bitcode of source, writes it as one
// encoded appabi.IREntry to entryPath, and writes asmPath: an assembly file
// whose section mneme_ir is allocatable ("a", so the loaded program can read
// it between __start_mneme_ir and __stop_mneme_ir) and retained ("R",
// SHF_GNU_RETAIN, so --gc-sections keeps it), and, when the unit annotates
// kernels for run-time specialization, their list in section mneme_jit.
func WriteIRAssembly(source, bitcodePath, entryPath, asmPath string, flags ...string) error {
	bc, err := os.ReadFile(bitcodePath)
	if err != nil {
		return fmt.Errorf("reading device IR of %s: %w", source, err)
	}
	if len(bc) < 4 || string(bc[:4]) != "BC\xc0\xde" {
		return fmt.Errorf("device IR of %s (%s) is not LLVM bitcode", source, bitcodePath)
	}
	if err := os.WriteFile(entryPath, appabi.EncodeIREntry(appabi.IREntry{Name: source, Bitcode: bc, Flags: flags}), 0o644); err != nil {
		return fmt.Errorf("writing IR entry of %s: %w", source, err)
	}
	// The empty .note.GNU-stack keeps the merged object from asking for an executable stack.
	asm := fmt.Sprintf("\t.section %s,\"aR\",@progbits\n\t.balign 8\n\t.incbin %s\n",
		appabi.IRSection, strconv.Quote(entryPath))
	if JITAnnotationsOf != nil {
		anns, err := JITAnnotationsOf(bc, source)
		if err != nil {
			return err
		}
		if len(anns) > 0 {
			var sec []byte
			for _, a := range anns {
				sec = append(sec, appabi.EncodeJITAnnotation(a)...)
			}
			asm += fmt.Sprintf("\t.section %s,\"aR\",@progbits\n\t.ascii %s\n", appabi.JITSection, strconv.Quote(string(sec)))
		}
	}
	asm += "\t.section .note.GNU-stack,\"\",@progbits\n"
	if err := os.WriteFile(asmPath, []byte(asm), 0o644); err != nil {
		return fmt.Errorf("writing IR section source of %s: %w", source, err)
	}
	return nil
}
