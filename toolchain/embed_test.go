package toolchain

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme/appabi"
)

// shfGNURetain is SHF_GNU_RETAIN: the section survives --gc-sections.
const shfGNURetain = 0x200000

// kernelSource is a CUDA kernel that needs no CUDA headers (-nocudainc).
const kernelSource = `#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
__device__ int thread_x() { return __nvvm_read_ptx_sreg_tid_x(); }
__global__ void scale(float *x, float a, int n) {
  int i = thread_x();
  if (i < n) x[i] *= a;
}
`

func requireClang(t *testing.T) (clangxx, clang string) {
	t.Helper()
	h := SystemHost()
	cxx, err := FindClang(h, true)
	if err != nil {
		t.Skipf("no clang-22: %v", err)
	}
	c, err := FindClang(h, false)
	if err != nil {
		t.Skipf("no clang-22: %v", err)
	}
	return cxx, c
}

// irSection returns the mneme_ir section of an ELF object or executable.
func irSection(t *testing.T, path string) *elf.Section {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	sec := f.Section(appabi.IRSection)
	if sec == nil {
		t.Fatalf("%s has no %s section", path, appabi.IRSection)
	}
	return sec
}

func checkIREntries(t *testing.T, sec *elf.Section, wantNames ...string) []appabi.IREntry {
	t.Helper()
	if sec.Flags&elf.SHF_ALLOC == 0 || sec.Flags&shfGNURetain == 0 {
		t.Fatalf("section flags %v: want allocatable and retained", sec.Flags)
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := appabi.DecodeIRSection(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(wantNames) {
		t.Fatalf("%d IR entries, want %d", len(entries), len(wantNames))
	}
	for i, e := range entries {
		if e.Name != wantNames[i] {
			t.Errorf("entry %d named %q, want %q", i, e.Name, wantNames[i])
		}
		if !bytes.HasPrefix(e.Bitcode, []byte("BC\xc0\xde")) {
			t.Errorf("entry %d is not bitcode: % x", i, e.Bitcode[:min(8, len(e.Bitcode))])
		}
	}
	return entries
}

// TestEmbedWithoutCUDA builds a CUDA object through the wrapper on a machine
// with no CUDA toolkit (-nocudainc -nocudalib, host side only) and checks the
// embedded IR: present, allocatable, retained by --gc-sections, decodable,
// unoptimized but optimizable, and readable at run time between
// __start_mneme_ir and __stop_mneme_ir.
func TestEmbedWithoutCUDA(t *testing.T) {
	clangxx, clang := requireClang(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "k.cu")
	obj := filepath.Join(dir, "k.o")
	if err := os.WriteFile(src, []byte(kernelSource), 0o644); err != nil {
		t.Fatal(err)
	}
	w := NewWrapper(SystemHost(), true, Layout{Prefix: dir}, t.TempDir())
	p, err := w.Plan([]string{clangxx, "-nocudainc", "-nocudalib", "--cuda-host-only", "--cuda-gpu-arch=sm_90",
		"-Xclang", "-target-feature", "-Xclang", "+ptx80", "-ffunction-sections", "-DUNUSED=1", "-O2", "-c", src, "-o", obj})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if err := executeTo(p, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	entries := checkIREntries(t, irSection(t, obj), src)

	if dis, err := exec.LookPath("llvm-dis-22"); err == nil {
		bc := filepath.Join(dir, "k.bc")
		os.WriteFile(bc, entries[0].Bitcode, 0o644)
		out, err := exec.Command(dis, bc, "-o", "-").Output()
		if err != nil {
			t.Fatalf("llvm-dis: %v", err)
		}
		text := string(out)
		if !strings.Contains(text, "ptx_kernel void @_Z5scalePffi") || !strings.Contains(text, "@_Z8thread_xv") {
			t.Fatalf("the kernel and its callee are not in the IR:\n%s", text)
		}
		if strings.Contains(text, "optnone") {
			t.Fatal("embedded IR is optnone: it cannot be re-optimized")
		}
		if !strings.Contains(text, "call noundef i32 @_Z8thread_xv") {
			t.Fatal("the device call was inlined: the IR was optimized before embedding")
		}
	} else {
		t.Log("llvm-dis-22 not found: IR content not inspected")
	}

	// Link with --gc-sections and read the section from the running program.
	mainSrc := filepath.Join(dir, "main.c")
	os.WriteFile(mainSrc, []byte(`#include <stdio.h>
extern const char __start_mneme_ir[], __stop_mneme_ir[];
int main(void) { printf("%ld %.8s\n", (long)(__stop_mneme_ir - __start_mneme_ir), __start_mneme_ir); return 0; }
`), 0o644)
	exe := filepath.Join(dir, "app")
	if out, err := exec.Command(clang, "-Wl,--gc-sections", mainSrc, obj, "-o", exe).CombinedOutput(); err != nil {
		t.Fatalf("link: %v\n%s", err, out)
	}
	sec := irSection(t, exe)
	checkIREntries(t, sec, src)
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 || fields[0] != strconv.FormatUint(sec.Size, 10) || fields[1] != "MNEMEIR2" {
		t.Fatalf("the program read %q from its section; want %d bytes starting with MNEMEIR2", out, sec.Size)
	}
}

// TestEmbedFailsCleanly: a source that does not compile leaves no object
// behind and reports the compiler's exit status.
func TestEmbedFailsCleanly(t *testing.T) {
	clangxx, _ := requireClang(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "bad.cu")
	os.WriteFile(src, []byte("__global__ void k( {"), 0o644)
	obj := filepath.Join(dir, "bad.o")
	p, err := NewWrapper(SystemHost(), true, Layout{Prefix: dir}, t.TempDir()).Plan(
		[]string{clangxx, "-nocudainc", "-nocudalib", "--cuda-host-only", "-c", src, "-o", obj})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	err = executeTo(p, &stderr)
	se, ok := err.(*StepError)
	if !ok || se.ExitCode == 0 {
		t.Fatalf("want a StepError with the compiler's status, got %v", err)
	}
	if _, err := os.Stat(obj); !os.IsNotExist(err) {
		t.Fatalf("a failed compile left %s", obj)
	}
	if !strings.Contains(stderr.String(), "error") {
		t.Fatalf("the compiler's diagnostics were not passed on: %q", stderr.String())
	}
}

// executeTo runs a plan with the test's stderr captured.
func executeTo(p *Plan, stderr *bytes.Buffer) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { stderr.ReadFrom(r); close(done) }()
	err = Execute(p, nil, os.Stdout, w, false)
	w.Close()
	<-done
	return err
}

// TestCUDABuildAndLink compiles and links a real CUDA program through the
// wrapper: fatbinary and IR in the object, the shim and --wrap in the
// executable. It needs a CUDA toolkit (CUDA_PATH, e.g. the tree that
// toolchain/scripts/local-cuda.sh assembles) and builds the shim from
// cmd/mneme-rt/shim; running the program needs a GPU and is the GPU tests' job.
func TestCUDABuildAndLink(t *testing.T) {
	requireClang(t)
	h := SystemHost()
	if _, err := FindCUDA(h); err != nil {
		t.Skipf("no CUDA toolkit (%v); CUDA_PATH=$(toolchain/scripts/local-cuda.sh) provides one", err)
	}
	prefix := t.TempDir()
	os.MkdirAll(filepath.Join(prefix, "lib"), 0o755)
	// One object per shim file, archived as the Makefile archives them.
	// A missing C compiler skips; the project's shim failing to build fails.
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skipf("no C compiler to build the runtime shim: %v", err)
	}
	shimSrcs, err := filepath.Glob("../cmd/mneme-rt/shim/*.c")
	if err != nil || len(shimSrcs) == 0 {
		t.Fatalf("no shim sources in ../cmd/mneme-rt/shim: %v", err)
	}
	arArgs := []string{"rcs", Layout{Prefix: prefix}.ShimArchive()}
	objDir := t.TempDir()
	for _, src := range shimSrcs {
		obj := filepath.Join(objDir, strings.TrimSuffix(filepath.Base(src), ".c")+".o")
		if out, err := exec.Command(cc, "-O2", "-fPIC", "-c", src, "-o", obj).CombinedOutput(); err != nil {
			t.Fatalf("the runtime shim does not build: %v\n%s", err, out)
		}
		arArgs = append(arArgs, obj)
	}
	if out, err := exec.Command("ar", arArgs...).CombinedOutput(); err != nil {
		t.Fatalf("ar: %v\n%s", err, out)
	}
	src, _ := filepath.Abs("../examples/vecadd/vecadd.cu")
	dir := t.TempDir()
	obj, exe := filepath.Join(dir, "vecadd.o"), filepath.Join(dir, "vecadd")
	build := func(args ...string) {
		t.Helper()
		p, err := NewWrapper(h, true, Layout{Prefix: prefix}, t.TempDir()).Plan(args)
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		if err := executeTo(p, &stderr); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
	}
	build("-O3", "-c", src, "-o", obj)
	checkIREntries(t, irSection(t, obj), src)
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	if f.Section(".nv_fatbin") == nil {
		t.Fatal("no .nv_fatbin: the object was not built with the classic offload driver")
	}
	f.Close()

	build(obj, "-o", exe)
	checkIREntries(t, irSection(t, exe), src)
	f, err = elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.Symbols()
	dyn, _ := f.DynamicSymbols()
	defined, imported := map[string]bool{}, map[string]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF {
			defined[s.Name] = true
		}
	}
	for _, s := range dyn {
		if s.Section == elf.SHN_UNDEF {
			imported[s.Name] = true
		}
	}
	for _, s := range []string{"__wrap_cudaLaunchKernel", "__wrap___cudaRegisterFunction", "__wrap_cudaMalloc"} {
		if !defined[s] {
			t.Errorf("%s is not defined in the executable", s)
		}
	}
	for _, s := range []string{"cudaLaunchKernel", "__cudaRegisterFunction", "cudaMalloc"} {
		if !imported[s] {
			t.Errorf("%s is not imported from libcudart", s)
		}
	}
}
