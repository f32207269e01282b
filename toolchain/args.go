package toolchain

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/mneme-gpu/mneme/internal/safefile"
)

// separateValue lists the clang options whose value may follow as the next
// argument; knowing them keeps that value from being mistaken for an input.
var separateValue = map[string]bool{
	"-o": true, "-x": true, "-I": true, "-D": true, "-U": true, "-L": true, "-l": true,
	"-include": true, "-imacros": true, "-isystem": true, "-iquote": true, "-idirafter": true,
	"-iprefix": true, "-iwithprefix": true, "-iwithprefixbefore": true, "-isysroot": true,
	"-cxx-isystem": true, "-iframework": true, "-F": true, "-MF": true, "-MT": true, "-MQ": true, "-MJ": true,
	"-Xclang": true, "-Xlinker": true, "-Xassembler": true, "-Xpreprocessor": true,
	"-Xarch_device": true, "-Xarch_host": true, "-Xcuda-ptxas": true, "-Xcuda-fatbinary": true,
	"-Xopenmp-target": true, "-Xoffload-linker": true, "-mllvm": true, "-target": true,
	"-u": true, "-z": true, "-T": true, "-e": true, "--sysroot": true, "-working-directory": true,
	"-serialize-diagnostics": true, "-dependency-file": true, "-dependency-dot": true,
	"--param": true, "-arch": true, "-rpath": true, "-aux-triple": true,
}

// Input is one source or object file on a compiler command line.
type Input struct {
	Path string
	Lang string // the -x language in force ("" when the suffix decides)
	Pos  int    // index in the expanded argument list
}

// IsCUDA reports whether clang compiles this input as CUDA.
func (in Input) IsCUDA() bool {
	if in.Lang != "" {
		return in.Lang == "cuda"
	}
	return strings.HasSuffix(in.Path, ".cu")
}

// IsSource reports whether the input is compiled (as opposed to linked).
func (in Input) IsSource() bool {
	if in.Lang != "" {
		return true
	}
	switch strings.ToLower(filepath.Ext(in.Path)) {
	case ".c", ".cc", ".cp", ".cpp", ".cxx", ".c++", ".cu", ".i", ".ii", ".m", ".mm", ".s":
		return true
	}
	return false
}

// CommandLine is a compiler command line, response files expanded, with what
// the wrapper needs to know about it.
type CommandLine struct {
	Args   []string // expanded arguments (no program name)
	Inputs []Input
	Output string // the -o value, or ""

	CompileOnly    bool // -c
	AssembleOnly   bool // -S
	PreprocessOnly bool // -E, -M or -MM
	SyntaxOnly     bool // -fsyntax-only
	EmitLLVM       bool // -emit-llvm
	DeviceOnly     bool // --cuda-device-only
	InfoOnly       bool // --version, -###, -dumpversion, -print-*, --help
	HasCUDAPath    bool // --cuda-path given
	NoCUDAInc      bool // -nocudainc / -nogpuinc
	NoCUDALib      bool // -nocudalib / -nogpulib
	LinksCUDART    bool // -lcudart, -lcudart_static or a libcudart file
}

// ExpandResponseFiles replaces every @file argument by the arguments the file
// holds, recursively, as clang does (GNU quoting: whitespace separates,
// quotes and backslashes escape). An @file that does not exist stays as is.
func ExpandResponseFiles(args []string) ([]string, error) {
	return expandResponseFiles(args, 0)
}

func expandResponseFiles(args []string, depth int) ([]string, error) {
	if depth > 20 {
		return nil, fmt.Errorf("response files nested more than 20 deep")
	}
	var out []string
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "@")
		if !ok || name == "" {
			out = append(out, a)
			continue
		}
		data, err := safefile.ReadFile(name, safefile.MaxConfig)
		if errors.Is(err, fs.ErrNotExist) {
			out = append(out, a)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading response file %s: %w", name, err)
		}
		words, err := SplitResponseFile(string(data))
		if err != nil {
			return nil, fmt.Errorf("response file %s: %w", name, err)
		}
		sub, err := expandResponseFiles(words, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

// SplitResponseFile splits response-file text into arguments with GNU rules.
func SplitResponseFile(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
			} else {
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\':
			if i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
				inWord = true
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// ParseCommandLine expands response files and classifies a compiler command line.
func ParseCommandLine(raw []string) (*CommandLine, error) {
	args, err := ExpandResponseFiles(raw)
	if err != nil {
		return nil, err
	}
	cl := &CommandLine{Args: args}
	lang := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-" || !strings.HasPrefix(a, "-") {
			cl.Inputs = append(cl.Inputs, Input{Path: a, Lang: lang, Pos: i})
			if isCUDARuntimeLib(a) {
				cl.LinksCUDART = true
			}
			continue
		}
		value := ""
		if separateValue[a] && i+1 < len(args) {
			value = args[i+1]
		}
		switch {
		case a == "-c":
			cl.CompileOnly = true
		case a == "-S":
			cl.AssembleOnly = true
		case a == "-E", a == "-M", a == "-MM":
			cl.PreprocessOnly = true
		case a == "-fsyntax-only":
			cl.SyntaxOnly = true
		case a == "-emit-llvm":
			cl.EmitLLVM = true
		case a == "--cuda-device-only", a == "--offload-device-only":
			cl.DeviceOnly = true
		case a == "--version", a == "-###", a == "--help", a == "-help", a == "-dumpversion",
			a == "-dumpmachine", a == "-dumpfullversion", strings.HasPrefix(a, "-print-"), strings.HasPrefix(a, "--print-"):
			cl.InfoOnly = true
		case a == "--cuda-path" || strings.HasPrefix(a, "--cuda-path="):
			cl.HasCUDAPath = true
		case a == "-nocudainc" || a == "-nogpuinc":
			cl.NoCUDAInc = true
		case a == "-nocudalib" || a == "-nogpulib":
			cl.NoCUDALib = true
		case a == "-o":
			cl.Output = value
		case strings.HasPrefix(a, "-o") && len(a) > 2 && !strings.HasPrefix(a, "-objc"):
			cl.Output = a[2:]
		case a == "-x":
			lang = value
			if lang == "none" {
				lang = ""
			}
		case strings.HasPrefix(a, "-x") && len(a) > 2 && !strings.HasPrefix(a, "-xc-") && a != "-xarch":
			lang = a[2:]
			if lang == "none" {
				lang = ""
			}
		case a == "-l":
			cl.LinksCUDART = cl.LinksCUDART || isCUDARuntimeName(value)
		case strings.HasPrefix(a, "-l"):
			cl.LinksCUDART = cl.LinksCUDART || isCUDARuntimeName(a[2:])
		case strings.HasPrefix(a, "-Wl,"):
			for _, w := range strings.Split(a[4:], ",") {
				if isCUDARuntimeLib(w) || strings.HasPrefix(w, "-l") && isCUDARuntimeName(w[2:]) {
					cl.LinksCUDART = true
				}
			}
		}
		if value != "" {
			i++ // the option's value is not an input
		}
	}
	return cl, nil
}

func isCUDARuntimeName(n string) bool {
	return n == "cudart" || n == "cudart_static" || n == ":libcudart.so" || n == ":libcudart_static.a"
}

func isCUDARuntimeLib(path string) bool {
	b := filepath.Base(path)
	return strings.HasPrefix(b, "libcudart.so") || b == "libcudart_static.a"
}

// CUDAInputs are the inputs clang compiles as CUDA.
func (cl *CommandLine) CUDAInputs() []Input {
	var out []Input
	for _, in := range cl.Inputs {
		if in.IsCUDA() {
			out = append(out, in)
		}
	}
	return out
}

// Links reports whether the command ends in a link step.
func (cl *CommandLine) Links() bool {
	return len(cl.Inputs) > 0 && !cl.CompileOnly && !cl.AssembleOnly && !cl.PreprocessOnly &&
		!cl.SyntaxOnly && !cl.InfoOnly && !cl.DeviceOnly && !cl.EmitLLVM
}

// ObjectPath is where clang writes the object of input in a -c compile: the
// -o value when there is a single input, else the input's base name with .o.
func (cl *CommandLine) ObjectPath(in Input) string {
	if cl.Output != "" && len(cl.Inputs) == 1 {
		return cl.Output
	}
	base := filepath.Base(in.Path)
	return strings.TrimSuffix(base, filepath.Ext(base)) + ".o"
}

// irFlag reports whether a flag of the user's compile is kept in the device IR
// compile, and how many arguments it spans. The IR compile needs what changes
// the preprocessed source and the device code's meaning (macros, include
// paths, language standard, CUDA installation, relocatable device code, math
// modes) and nothing about outputs, dependencies, optimization or linking.
func irFlag(args []string, i int) (keep bool, span int) {
	a := args[i]
	withValue := func(opt string) (bool, bool) { // (matches, value is separate)
		if a == opt {
			return true, true
		}
		return strings.HasPrefix(a, opt), false
	}
	for _, opt := range []string{"-D", "-U", "-I", "-include", "-imacros", "-isystem", "-iquote",
		"-idirafter", "-iprefix", "-iwithprefix", "-iwithprefixbefore", "-isysroot", "-cxx-isystem", "--sysroot",
		"-Xclang", "-Xarch_device", "-std=", "--cuda-path=", "-target", "--target", "--gcc-toolchain", "--gcc-install-dir"} {
		if m, sep := withValue(opt); m {
			if sep {
				return i+1 < len(args), 2
			}
			return true, 1
		}
	}
	switch a {
	case "-nocudainc", "-nocudalib", "-nogpuinc", "-nogpulib", "-fgpu-rdc", "-fno-gpu-rdc", "-fcuda-rdc",
		"-ffast-math", "-fno-fast-math", "-fgpu-flush-denormals-to-zero", "-fno-gpu-flush-denormals-to-zero",
		"-fcuda-flush-denormals-to-zero", "-fcuda-approx-transcendentals", "-fgpu-approx-transcendentals",
		"-fno-gpu-approx-transcendentals", "-funsafe-math-optimizations", "-fno-exceptions", "-fno-rtti",
		"-ffinite-math-only", "-fno-finite-math-only", "-fopenmp", "-pthread", "-fgpu-default-stream=per-thread":
		return true, 1
	}
	if strings.HasPrefix(a, "-ffp-contract=") || strings.HasPrefix(a, "-fgpu-default-stream=") ||
		strings.HasPrefix(a, "--cuda-include-ptx=") || strings.HasPrefix(a, "-fopenmp=") {
		return true, 1
	}
	if separateValue[a] {
		return false, 2
	}
	return false, 1
}

// DeviceCodeFlags picks from a compile's arguments the options that change
// its device code but that the device IR the wrapper embeds cannot show:
// the IR is always compiled at -O3 without optimizing (so replay can
// optimize it under any pipeline), which hides the -O level, and ptxas
// options never reach the IR. Replay reads them back to rebuild the
// application's own baseline. Floating-point flags are kept too, for the
// record; their effect is in the IR already.
func DeviceCodeFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-O" || (strings.HasPrefix(a, "-O") && len(a) <= 3):
			out = append(out, a)
		case a == "-Xcuda-ptxas" || a == "-Xptxas":
			if i+1 < len(args) {
				out = append(out, "-Xcuda-ptxas", args[i+1])
				i++
			}
		case strings.HasPrefix(a, "--ptxas-options="):
			for _, o := range strings.Split(strings.TrimPrefix(a, "--ptxas-options="), ",") {
				out = append(out, "-Xcuda-ptxas", o)
			}
		case strings.HasPrefix(a, "-ffp-contract="), a == "-ffast-math", a == "-fno-fast-math",
			a == "-funsafe-math-optimizations", a == "-ffinite-math-only", a == "-fno-finite-math-only",
			strings.Contains(a, "flush-denormals-to-zero"), strings.Contains(a, "approx-transcendentals"):
			out = append(out, a)
		}
	}
	return out
}
