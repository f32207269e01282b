// Package toolchain is mneme's build integration: it finds clang-22, the CUDA
// toolkit, the target GPU architecture and mneme's own install prefix, and it
// turns a compiler command line into the commands that build a recordable
// object or executable (device IR embedded in each CUDA object, the runtime
// shim and the call interception added at link time). It is pure Go so the
// wrapper logic is testable without a compiler or GPU.
package toolchain

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mneme-gpu/mneme/appabi"
)

// LLVMMajor is the LLVM release mneme is built against and expects clang from.
const LLVMMajor = 22

// DefaultArch is used when neither a flag, MNEME_CUDA_ARCH nor nvidia-smi
// gives the GPU architecture (the H100/H200 generation).
const DefaultArch = "sm_90"

// Host is the process environment the discovery functions read; tests replace
// its fields to describe a machine without touching the real one.
type Host struct {
	Getenv   func(string) string
	LookPath func(string) (string, error)
	// IsFile reports whether path names an existing regular file (or a link to one).
	IsFile func(string) bool
	// IsDir reports whether path names an existing directory.
	IsDir func(string) bool
	// Output runs a program and returns its standard output.
	Output func(name string, args ...string) ([]byte, error)
}

// SystemHost is the real environment of this process.
func SystemHost() Host {
	return Host{
		Getenv:   os.Getenv,
		LookPath: exec.LookPath,
		IsFile: func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && st.Mode().IsRegular()
		},
		IsDir: func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && st.IsDir()
		},
		Output: func(name string, args ...string) ([]byte, error) {
			return exec.Command(name, args...).Output()
		},
	}
}

// llvmBinDir is where Debian and Ubuntu install clang-22 when it is not on PATH.
var llvmBinDir = fmt.Sprintf("/usr/lib/llvm-%d/bin", LLVMMajor)

var clangVersionRE = regexp.MustCompile(`clang version (\d+)\.`)

// FindClang returns the clang driver to compile with: clang++ when cxx is
// true, clang otherwise. Order: MNEME_CLANGXX / MNEME_CLANG, clang++-22 /
// clang-22 on PATH, /usr/lib/llvm-22/bin, then a plain clang++ / clang on
// PATH that reports version 22.
func FindClang(h Host, cxx bool) (string, error) {
	envVar, versioned, plain := "MNEME_CLANG", fmt.Sprintf("clang-%d", LLVMMajor), "clang"
	if cxx {
		envVar, versioned, plain = "MNEME_CLANGXX", fmt.Sprintf("clang++-%d", LLVMMajor), "clang++"
	}
	if p := h.Getenv(envVar); p != "" {
		if resolved, err := h.LookPath(p); err == nil {
			return resolved, nil
		}
		return "", fmt.Errorf("%s=%s is not an executable", envVar, p)
	}
	if p, err := h.LookPath(versioned); err == nil {
		return p, nil
	}
	if p := filepath.Join(llvmBinDir, plain); h.IsFile(p) {
		return p, nil
	}
	if p, err := h.LookPath(plain); err == nil {
		if out, err := h.Output(p, "--version"); err == nil {
			if m := clangVersionRE.FindSubmatch(out); m != nil && string(m[1]) == fmt.Sprint(LLVMMajor) {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("no clang %d found (looked for %s on PATH and in %s): install clang-%d or set %s", LLVMMajor, versioned, llvmBinDir, LLVMMajor, envVar)
}

// ErrNoCUDA reports that no CUDA toolkit was found.
var ErrNoCUDA = errors.New("no CUDA toolkit found")

// FindCUDA returns the CUDA toolkit root: CUDA_PATH, CUDA_HOME, then
// /usr/local/cuda, the first that holds include/cuda_runtime.h.
func FindCUDA(h Host) (string, error) {
	var tried []string
	for _, v := range []string{"CUDA_PATH", "CUDA_HOME"} {
		if p := h.Getenv(v); p != "" {
			if h.IsFile(filepath.Join(p, "include", "cuda_runtime.h")) {
				return p, nil
			}
			tried = append(tried, fmt.Sprintf("%s=%s", v, p))
		}
	}
	if p := "/usr/local/cuda"; h.IsFile(filepath.Join(p, "include", "cuda_runtime.h")) {
		return p, nil
	}
	tried = append(tried, "/usr/local/cuda")
	return "", fmt.Errorf("%w (no include/cuda_runtime.h in %s): set CUDA_PATH to the CUDA installation", ErrNoCUDA, strings.Join(tried, ", "))
}

// CUDALibDir is the directory holding libcudart under root: lib64 as in the
// NVIDIA installers, or lib as in the PyPI wheels.
func CUDALibDir(h Host, root string) string {
	lib64 := filepath.Join(root, "lib64")
	if h.IsDir(lib64) || !h.IsDir(filepath.Join(root, "lib")) {
		return lib64
	}
	return filepath.Join(root, "lib")
}

var smRE = regexp.MustCompile(`^sm_\d+[a-z]?$`)

// ArchFromArgs returns the first GPU architecture named in a compiler
// command line (--cuda-gpu-arch, --offload-arch, nvcc-style -arch), or "".
func ArchFromArgs(args []string) string {
	for i, a := range args {
		for _, f := range []string{"--cuda-gpu-arch", "--offload-arch", "-arch", "--gpu-architecture"} {
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v
			}
			if a == f && i+1 < len(args) && (f != "-arch" || smRE.MatchString(args[i+1])) {
				return args[i+1]
			}
		}
	}
	return ""
}

// DetectArch asks nvidia-smi for the compute capability of the first GPU and
// returns it as sm_XY, or "" when there is no nvidia-smi or GPU.
func DetectArch(h Host) string {
	smi, err := h.LookPath("nvidia-smi")
	if err != nil {
		return ""
	}
	out, err := h.Output(smi, "--query-gpu=compute_cap", "--format=csv,noheader")
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	major, minor, ok := strings.Cut(strings.TrimSpace(line), ".")
	if !ok || !isDigits(major) || !isDigits(minor) {
		return ""
	}
	return "sm_" + major + minor
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// GPUArch picks the architecture to compile for: a flag in args, else
// MNEME_CUDA_ARCH, else the detected GPU, else DefaultArch.
func GPUArch(h Host, args []string) string {
	if a := ArchFromArgs(args); a != "" {
		return a
	}
	if a := h.Getenv("MNEME_CUDA_ARCH"); a != "" {
		return a
	}
	if a := DetectArch(h); a != "" {
		return a
	}
	return DefaultArch
}

// Layout is mneme's install prefix (see the Makefile): bin/mneme and the
// wrapper scripts, lib/ with the runtime, lib/cmake/mneme with the CMake package.
type Layout struct {
	Prefix string
}

// PrefixFromExecutable returns the layout whose bin/ holds exe (symbolic
// links resolved). MNEME_PREFIX overrides it.
func PrefixFromExecutable(h Host, exe string) (Layout, error) {
	if p := h.Getenv("MNEME_PREFIX"); p != "" {
		return Layout{Prefix: filepath.Clean(p)}, nil
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	abs, err := filepath.Abs(exe)
	if err != nil {
		return Layout{}, fmt.Errorf("locating the mneme prefix from %s: %w", exe, err)
	}
	return Layout{Prefix: filepath.Dir(filepath.Dir(abs))}, nil
}

// BinDir holds mneme and the wrapper scripts.
func (l Layout) BinDir() string { return filepath.Join(l.Prefix, "bin") }

// LibDir holds the runtime libraries.
func (l Layout) LibDir() string { return filepath.Join(l.Prefix, "lib") }

// CCWrapper is the C compiler wrapper script (`mneme config cc`).
func (l Layout) CCWrapper() string { return filepath.Join(l.BinDir(), "mneme-cc") }

// CXXWrapper is the C++/CUDA compiler wrapper script (`mneme config cxx`).
func (l Layout) CXXWrapper() string { return filepath.Join(l.BinDir(), "mneme-cxx") }

// ShimArchive is the static C shim linked whole into every recordable program.
func (l Layout) ShimArchive() string { return filepath.Join(l.LibDir(), "libmneme_shim.a") }

// RuntimeLibrary is the Go runtime library the shim loads.
func (l Layout) RuntimeLibrary() string { return filepath.Join(l.LibDir(), "libmneme_rt.so") }

// CMakeDir holds mnemeConfig.cmake (`mneme_DIR`).
func (l Layout) CMakeDir() string { return filepath.Join(l.LibDir(), "cmake", "mneme") }

// CompileFlags are the clang flags of a CUDA compile for recording (what
// `mneme config cflags` prints): toolkit, architecture, CUDA 13's libcu++
// headers and the offload driver whose registration calls the shim intercepts.
func CompileFlags(h Host, cudaRoot, arch string) []string {
	return cudaCompileFlags(h, cudaRoot, arch, cudaRoot)
}

// cudaCompileFlags builds CompileFlags and the wrapper's additions to a CUDA
// compile, which leave out what the user's command line already gives:
// --cuda-path=cudaPath and --cuda-gpu-arch=arch unless empty, the libcu++
// headers of the toolkit at root (when there is one), and the offload driver
// whose objects register their fatbinaries through __cudaRegisterFatBinary.
func cudaCompileFlags(h Host, cudaPath, arch, root string) []string {
	var f []string
	if cudaPath != "" {
		f = append(f, "--cuda-path="+cudaPath)
	}
	if arch != "" {
		f = append(f, "--cuda-gpu-arch="+arch)
	}
	if root != "" {
		if cccl := filepath.Join(root, "include", "cccl"); h.IsDir(cccl) {
			f = append(f, "-I"+cccl)
		}
	}
	return append(f, "--no-offload-new-driver")
}

// LinkFlags are the flags that make a link recordable (what `mneme config
// ldflags` prints): the whole shim, the --wrap options and the libraries.
func LinkFlags(h Host, l Layout, cudaRoot string) []string {
	lib := CUDALibDir(h, cudaRoot)
	return []string{"-Wl,--whole-archive", l.ShimArchive(), "-Wl,--no-whole-archive", appabi.WrapLinkFlag(),
		"-L" + lib, "-lcudart", "-ldl", "-lpthread", "-Wl,-rpath," + lib}
}

// LLVMDir is the LLVM installation a clang driver belongs to (the directory
// above its real bin/), e.g. /usr/lib/llvm-22 for /usr/bin/clang++-22.
func LLVMDir(clang string) string {
	if resolved, err := filepath.EvalSymlinks(clang); err == nil {
		clang = resolved
	}
	return filepath.Dir(filepath.Dir(clang))
}
