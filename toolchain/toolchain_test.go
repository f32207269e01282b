package toolchain

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// machine describes a host for the discovery functions: environment,
// programs on PATH, files, directories and program outputs.
type machine struct {
	env     map[string]string
	path    map[string]string // program name -> absolute path
	files   map[string]bool
	dirs    map[string]bool
	outputs map[string]string // "prog arg..." -> stdout
}

func (m *machine) host() Host {
	return Host{
		Getenv: func(k string) string { return m.env[k] },
		LookPath: func(p string) (string, error) {
			if strings.Contains(p, "/") {
				if m.files[p] {
					return p, nil
				}
				return "", errors.New("not found")
			}
			if full, ok := m.path[p]; ok {
				return full, nil
			}
			return "", errors.New("not found")
		},
		IsFile: func(p string) bool { return m.files[p] },
		IsDir:  func(p string) bool { return m.dirs[p] },
		Output: func(name string, args ...string) ([]byte, error) {
			key := strings.Join(append([]string{name}, args...), " ")
			if out, ok := m.outputs[key]; ok {
				return []byte(out), nil
			}
			return nil, errors.New("failed")
		},
	}
}

func newMachine() *machine {
	return &machine{env: map[string]string{}, path: map[string]string{}, files: map[string]bool{},
		dirs: map[string]bool{}, outputs: map[string]string{}}
}

func TestFindClangOrder(t *testing.T) {
	m := newMachine()
	if _, err := FindClang(m.host(), true); err == nil || !strings.Contains(err.Error(), "MNEME_CLANGXX") {
		t.Fatalf("no clang: want an error naming MNEME_CLANGXX, got %v", err)
	}
	if _, err := FindClang(m.host(), false); err == nil || !strings.Contains(err.Error(), "MNEME_CLANG") {
		t.Fatalf("no clang: want an error naming MNEME_CLANG, got %v", err)
	}

	// A plain clang++ of another release is not taken; one of LLVM 22 is.
	m.path["clang++"] = "/opt/bin/clang++"
	m.outputs["/opt/bin/clang++ --version"] = "Ubuntu clang version 19.1.7\n"
	if _, err := FindClang(m.host(), true); err == nil {
		t.Fatal("clang++ 19 on PATH was accepted")
	}
	m.outputs["/opt/bin/clang++ --version"] = "clang version 22.1.8 (https://github.com/llvm/llvm-project)\n"
	if got, err := FindClang(m.host(), true); err != nil || got != "/opt/bin/clang++" {
		t.Fatalf("plain clang++ 22: got %q, %v", got, err)
	}

	m.files["/usr/lib/llvm-22/bin/clang++"] = true
	if got, _ := FindClang(m.host(), true); got != "/usr/lib/llvm-22/bin/clang++" {
		t.Fatalf("llvm-22 bin dir should win over plain clang++, got %q", got)
	}
	m.path["clang++-22"] = "/usr/bin/clang++-22"
	if got, _ := FindClang(m.host(), true); got != "/usr/bin/clang++-22" {
		t.Fatalf("clang++-22 on PATH should win, got %q", got)
	}
	m.files["/work/clang"] = true
	m.env["MNEME_CLANGXX"] = "/work/clang"
	if got, _ := FindClang(m.host(), true); got != "/work/clang" {
		t.Fatalf("MNEME_CLANGXX should win, got %q", got)
	}
	m.env["MNEME_CLANGXX"] = "/missing/clang"
	if _, err := FindClang(m.host(), true); err == nil || !strings.Contains(err.Error(), "MNEME_CLANGXX=/missing/clang") {
		t.Fatalf("bad MNEME_CLANGXX: got %v", err)
	}
	// The C driver is looked up under its own names.
	m.path["clang-22"] = "/usr/bin/clang-22"
	if got, _ := FindClang(m.host(), false); got != "/usr/bin/clang-22" {
		t.Fatalf("C driver: got %q", got)
	}
}

func TestFindCUDA(t *testing.T) {
	m := newMachine()
	_, err := FindCUDA(m.host())
	if !errors.Is(err, ErrNoCUDA) || !strings.Contains(err.Error(), "CUDA_PATH") {
		t.Fatalf("no CUDA: got %v", err)
	}
	m.files["/usr/local/cuda/include/cuda_runtime.h"] = true
	if got, _ := FindCUDA(m.host()); got != "/usr/local/cuda" {
		t.Fatalf("default: got %q", got)
	}
	m.env["CUDA_HOME"] = "/opt/cuda-home"
	m.files["/opt/cuda-home/include/cuda_runtime.h"] = true
	if got, _ := FindCUDA(m.host()); got != "/opt/cuda-home" {
		t.Fatalf("CUDA_HOME: got %q", got)
	}
	m.env["CUDA_PATH"] = "/opt/cuda-path"
	if got, _ := FindCUDA(m.host()); got != "/opt/cuda-home" {
		t.Fatalf("CUDA_PATH without headers must be skipped, got %q", got)
	}
	m.files["/opt/cuda-path/include/cuda_runtime.h"] = true
	if got, _ := FindCUDA(m.host()); got != "/opt/cuda-path" {
		t.Fatalf("CUDA_PATH: got %q", got)
	}
}

func TestCUDALibDir(t *testing.T) {
	m := newMachine()
	m.dirs["/c/lib"] = true
	if got := CUDALibDir(m.host(), "/c"); got != "/c/lib" {
		t.Fatalf("wheel layout: got %q", got)
	}
	m.dirs["/c/lib64"] = true
	if got := CUDALibDir(m.host(), "/c"); got != "/c/lib64" {
		t.Fatalf("installer layout: got %q", got)
	}
}

func TestGPUArch(t *testing.T) {
	m := newMachine()
	if got := GPUArch(m.host(), nil); got != DefaultArch {
		t.Fatalf("nothing known: got %q", got)
	}
	m.path["nvidia-smi"] = "/usr/bin/nvidia-smi"
	m.outputs["/usr/bin/nvidia-smi --query-gpu=compute_cap --format=csv,noheader"] = "12.0\n9.0\n"
	if got := GPUArch(m.host(), nil); got != "sm_120" {
		t.Fatalf("detected: got %q", got)
	}
	m.env["MNEME_CUDA_ARCH"] = "sm_80"
	if got := GPUArch(m.host(), nil); got != "sm_80" {
		t.Fatalf("env: got %q", got)
	}
	for _, args := range [][]string{
		{"-c", "--cuda-gpu-arch=sm_86", "x.cu"},
		{"--offload-arch=sm_86"},
		{"-arch=sm_86"},
		{"-arch", "sm_86"},
	} {
		if got := GPUArch(m.host(), args); got != "sm_86" {
			t.Errorf("%v: got %q", args, got)
		}
	}
	m.outputs["/usr/bin/nvidia-smi --query-gpu=compute_cap --format=csv,noheader"] = "No devices were found\n"
	delete(m.env, "MNEME_CUDA_ARCH")
	if got := GPUArch(m.host(), nil); got != DefaultArch {
		t.Fatalf("nvidia-smi without GPU: got %q", got)
	}
}

func TestPrefixFromExecutable(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "prefix", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "prefix", "bin", "mneme")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "mneme-link")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	m := newMachine()
	l, err := PrefixFromExecutable(m.host(), link)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(dir, "prefix"))
	if l.Prefix != want {
		t.Fatalf("prefix %q, want %q", l.Prefix, want)
	}
	if l.CXXWrapper() != filepath.Join(want, "bin", "mneme-cxx") || l.CCWrapper() != filepath.Join(want, "bin", "mneme-cc") ||
		l.ShimArchive() != filepath.Join(want, "lib", "libmneme_shim.a") || l.CMakeDir() != filepath.Join(want, "lib", "cmake", "mneme") {
		t.Fatalf("layout paths: %+v", l)
	}
	m.env["MNEME_PREFIX"] = "/opt/mneme/"
	if l, _ := PrefixFromExecutable(m.host(), link); l.Prefix != "/opt/mneme" {
		t.Fatalf("MNEME_PREFIX: got %q", l.Prefix)
	}
}

func TestLLVMDir(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "llvm-22", "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "clang++"), nil, 0o755)
	os.Symlink(filepath.Join(bin, "clang++"), filepath.Join(dir, "clang++-22"))
	want, _ := filepath.EvalSymlinks(filepath.Join(dir, "llvm-22"))
	if got := LLVMDir(filepath.Join(dir, "clang++-22")); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
