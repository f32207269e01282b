package toolchain

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme/appabi"
)

// cudaMachine has clang-22, a CUDA 13 toolkit at /cuda and mneme at /p.
func cudaMachine() *machine {
	m := newMachine()
	m.path["clang++-22"] = "/usr/bin/clang++-22"
	m.path["clang-22"] = "/usr/bin/clang-22"
	m.files["/cuda/include/cuda_runtime.h"] = true
	m.dirs["/cuda/include/cccl"] = true
	m.dirs["/cuda/lib64"] = true
	m.files["/p/lib/libmneme_shim.a"] = true
	m.env["CUDA_PATH"] = "/cuda"
	m.env["MNEME_CUDA_ARCH"] = "sm_90"
	return m
}

func plan(t *testing.T, m *machine, cxx bool, args ...string) *Plan {
	t.Helper()
	p, err := NewWrapper(m.host(), cxx, Layout{Prefix: "/p"}, "/tmp/T").Plan(args)
	if err != nil {
		t.Fatalf("Plan(%q): %v", args, err)
	}
	return p
}

func runSteps(p *Plan) [][]string {
	var out [][]string
	for _, s := range p.Steps {
		if s.Kind == RunStep {
			out = append(out, s.Argv)
		}
	}
	return out
}

// containsSeq reports whether want occurs in argv as a contiguous run.
func containsSeq(argv []string, want ...string) bool {
	for i := 0; i+len(want) <= len(argv); i++ {
		if slices.Equal(argv[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

var cudaAdditions = []string{"--cuda-path=/cuda", "--cuda-gpu-arch=sm_90", "-I/cuda/include/cccl", "--no-offload-new-driver"}

func TestPlanPassThrough(t *testing.T) {
	m := cudaMachine()
	for _, args := range [][]string{
		{"--version"},
		{"-v"},
		{"-###", "-x", "cuda", "k.cu"},
		{"-dumpmachine"},
		{"-O2", "-c", "a.c", "-o", "a.o", "-MD", "-MF", "a.d", "-Wfoo-unknown"},
		{"-E", "a.cpp"},
		{"-S", "a.cpp"},
	} {
		p := plan(t, m, true, args...)
		want := append([]string{"/usr/bin/clang++-22"}, args...)
		if len(p.Steps) != 1 || !slices.Equal(p.Steps[0].Argv, want) {
			t.Errorf("%q: got %v, want exactly %q", args, p.Steps, want)
		}
	}
	// The C driver for C sources.
	p := plan(t, m, false, "-c", "a.c")
	if len(p.Steps) != 1 || p.Steps[0].Argv[0] != "/usr/bin/clang-22" {
		t.Fatalf("mneme cc: %v", p.Steps)
	}
}

func TestPlanCUDACompile(t *testing.T) {
	m := cudaMachine()
	p := plan(t, m, true, "-O2", "-DN=4", "-I", "inc", "-std=c++17", "-MD", "-MF", "k.d", "-g", "-c", "src/k.cu", "-o", "obj/k.o")
	steps := runSteps(p)
	if len(p.Steps) != 6 || len(steps) != 4 {
		t.Fatalf("want compile, IR compile, write, assemble, merge, rename; got %v", p.Steps)
	}
	main := steps[0]
	if !slices.Equal(main[:15], []string{"/usr/bin/clang++-22", "-O2", "-DN=4", "-I", "inc", "-std=c++17", "-MD", "-MF", "k.d", "-g", "-c", "src/k.cu", "-o", "obj/k.o", "--cuda-path=/cuda"}) {
		t.Fatalf("main compile must keep the user's arguments in order: %q", main)
	}
	for _, f := range cudaAdditions {
		if !slices.Contains(main, f) {
			t.Errorf("main compile lacks %s: %q", f, main)
		}
	}

	ir := steps[1]
	for _, want := range [][]string{{"-DN=4"}, {"-I", "inc"}, {"-std=c++17"}, {"--cuda-path=/cuda"}, {"-I/cuda/include/cccl"},
		{"--cuda-gpu-arch=sm_90"}, {"--cuda-device-only", "-emit-llvm", "-c", "-O3", "-Xclang", "-disable-llvm-passes"},
		{"-x", "cuda", "src/k.cu", "-o", "/tmp/T/ir0.bc"}} {
		if !containsSeq(ir, want...) {
			t.Errorf("IR compile lacks %q: %q", want, ir)
		}
	}
	for _, bad := range []string{"-O2", "-MD", "-MF", "k.d", "obj/k.o", "-g"} {
		if slices.Contains(ir, bad) {
			t.Errorf("IR compile must not have %s: %q", bad, ir)
		}
	}
	w := p.Steps[2]
	if w.Kind != WriteIRStep || w.Source != "src/k.cu" || w.Bitcode != "/tmp/T/ir0.bc" {
		t.Fatalf("write step: %+v", w)
	}
	if !slices.Equal(steps[2], []string{"/usr/bin/clang++-22", "-c", "/tmp/T/ir0.s", "-o", "/tmp/T/ir0.o"}) {
		t.Fatalf("assemble: %q", steps[2])
	}
	if !slices.Equal(steps[3], []string{"/usr/bin/clang++-22", "-r", "-nostdlib", "obj/k.o", "/tmp/T/ir0.o", "-o", "obj/k.o.mneme-tmp"}) {
		t.Fatalf("merge: %q", steps[3])
	}
	if r := p.Steps[5]; r.Kind != RenameStep || r.From != "obj/k.o.mneme-tmp" || r.To != "obj/k.o" {
		t.Fatalf("rename: %+v", r)
	}
}

func TestPlanCUDACompileVariants(t *testing.T) {
	m := cudaMachine()
	// -x cuda on a .cpp file; no -o: the object is named after the source, in the current directory.
	p := plan(t, m, true, "-x", "cuda", "-c", "dir/k.cpp")
	if s := runSteps(p); len(s) != 4 || !containsSeq(s[3], "k.o", "/tmp/T/ir0.o", "-o", "k.o.mneme-tmp") {
		t.Fatalf("-x cuda: %v", p.Steps)
	}
	// Two sources: one embedding each, into its own object.
	p = plan(t, m, true, "-c", "a.cu", "b.cu")
	if s := runSteps(p); len(s) != 7 || !containsSeq(s[3], "a.o", "/tmp/T/ir0.o") || !containsSeq(s[6], "b.o", "/tmp/T/ir1.o") {
		t.Fatalf("two sources: %v", p.Steps)
	}
	// A flag's arch wins and is not repeated; nvcc's -arch= is rewritten for clang.
	p = plan(t, m, true, "-arch=sm_80", "-c", "k.cu")
	s := runSteps(p)
	if !slices.Contains(s[0], "--cuda-gpu-arch=sm_80") || slices.Contains(s[0], "-arch=sm_80") || slices.Contains(s[0], "--cuda-gpu-arch=sm_90") {
		t.Fatalf("arch flag: %q", s[0])
	}
	if !slices.Contains(s[1], "--cuda-gpu-arch=sm_80") {
		t.Fatalf("IR compile must use the flag's arch: %q", s[1])
	}
	// A user's --cuda-path is kept, not doubled.
	p = plan(t, m, true, "--cuda-path=/other", "-c", "k.cu")
	for _, argv := range runSteps(p)[:2] {
		if slices.Contains(argv, "--cuda-path=/cuda") || !slices.Contains(argv, "--cuda-path=/other") {
			t.Fatalf("user --cuda-path: %q", argv)
		}
	}
	// Preprocessing, device-only and IR outputs get the CUDA flags but no embedding.
	for _, args := range [][]string{{"-E", "k.cu"}, {"--cuda-device-only", "-c", "k.cu"}, {"-emit-llvm", "-c", "k.cu"}, {"-fsyntax-only", "k.cu"}, {"-M", "k.cu"}} {
		p := plan(t, m, true, args...)
		if len(p.Steps) != 1 || !slices.Contains(p.Steps[0].Argv, "--no-offload-new-driver") {
			t.Errorf("%q: %v", args, p.Steps)
		}
	}
}

// The architecture is detected once per command, not once per CUDA source:
// each detection runs nvidia-smi.
func TestPlanDetectsArchOnce(t *testing.T) {
	m := cudaMachine()
	delete(m.env, "MNEME_CUDA_ARCH")
	m.path["nvidia-smi"] = "/usr/bin/nvidia-smi"
	m.outputs["/usr/bin/nvidia-smi --query-gpu=compute_cap --format=csv,noheader"] = "8.6\n"
	h := m.host()
	smiRuns := 0
	output := h.Output
	h.Output = func(name string, args ...string) ([]byte, error) {
		if name == "/usr/bin/nvidia-smi" {
			smiRuns++
		}
		return output(name, args...)
	}
	for _, c := range []struct {
		args    []string
		sources int
	}{{[]string{"-c", "a.cu", "b.cu", "c.cu"}, 3}, {[]string{"a.cu", "b.cu", "main.cpp", "-o", "app"}, 2}} {
		args := c.args
		smiRuns = 0
		p, err := NewWrapper(h, true, Layout{Prefix: "/p"}, "/tmp/T").Plan(args)
		if err != nil {
			t.Fatalf("Plan(%q): %v", args, err)
		}
		irCompiles := 0
		for _, argv := range runSteps(p) {
			if slices.Contains(argv, "--cuda-device-only") {
				irCompiles++
				if !slices.Contains(argv, "--cuda-gpu-arch=sm_86") {
					t.Errorf("%q: IR compile without the detected arch: %q", args, argv)
				}
			}
		}
		if irCompiles != c.sources {
			t.Fatalf("%q: %d IR compiles, want %d: %v", args, irCompiles, c.sources, p.Steps)
		}
		if smiRuns != 1 {
			t.Errorf("%q: nvidia-smi ran %d times, want once", args, smiRuns)
		}
	}
}

func TestPlanLink(t *testing.T) {
	m := cudaMachine()
	p := plan(t, m, true, "main.o", "k.o", "-o", "app", "-lm")
	if len(p.Steps) != 1 {
		t.Fatalf("pure link: %v", p.Steps)
	}
	link := p.Steps[0].Argv
	if !slices.Equal(link[:5], []string{"/usr/bin/clang++-22", "-Wl,--whole-archive", "/p/lib/libmneme_shim.a", "-Wl,--no-whole-archive", appabi.WrapLinkFlag()}) {
		t.Fatalf("the shim and --wrap must come first: %q", link)
	}
	if !containsSeq(link, "main.o", "k.o", "-o", "app", "-lm", "-L/cuda/lib64", "-lcudart", "-ldl", "-lpthread", "-Wl,-rpath,/cuda/lib64") {
		t.Fatalf("link: %q", link)
	}
	for _, own := range [][]string{{"-lcudart_static"}, {"-l", "cudart"}, {"/cuda/lib64/libcudart_static.a"}, {"-Wl,-lcudart"}} {
		p := plan(t, m, true, append([]string{"main.o", "-o", "app"}, own...)...)
		if slices.Contains(p.Steps[0].Argv[1+4+3+len(own):], "-lcudart") { // after the front additions and the user's arguments
			t.Errorf("%q links cudart itself; the wrapper added -lcudart: %q", own, p.Steps[0].Argv)
		}
	}
	// Already instrumented (by the CMake package): nothing added twice.
	p = plan(t, m, true, "-Wl,--whole-archive", "/p/lib/libmneme_shim.a", "-Wl,--no-whole-archive", "main.o", "-o", "app")
	if len(p.Steps[0].Argv) != 7 {
		t.Fatalf("instrumented link was changed: %q", p.Steps[0].Argv)
	}
	// Missing shim: a clear error naming the file.
	delete(m.files, "/p/lib/libmneme_shim.a")
	if _, err := NewWrapper(m.host(), true, Layout{Prefix: "/p"}, "/tmp/T").Plan([]string{"main.o", "-o", "app"}); err == nil ||
		!strings.Contains(err.Error(), "/p/lib/libmneme_shim.a") {
		t.Fatalf("missing shim: %v", err)
	}
}

func TestPlanCompileAndLink(t *testing.T) {
	m := cudaMachine()
	p := plan(t, m, true, "-O3", "-DX=1", "-x", "cuda", "k.cu", "-x", "none", "main.cpp", "-o", "app", "-L/opt/lib", "-lfoo", "-Wl,--as-needed")
	steps := runSteps(p)
	if len(steps) != 5 {
		t.Fatalf("want compile, IR, assemble, merge, link: %v", p.Steps)
	}
	compile := steps[0]
	if !containsSeq(compile, "-x", "cuda", "-c", "k.cu", "-o", "/tmp/T/cu0.o") || !slices.Contains(compile, "-O3") || !slices.Contains(compile, "-DX=1") {
		t.Fatalf("compile: %q", compile)
	}
	for _, bad := range []string{"main.cpp", "app", "-lfoo", "-L/opt/lib", "-Wl,--as-needed", "none"} {
		if slices.Contains(compile, bad) {
			t.Errorf("compile step has link-only or foreign argument %s: %q", bad, compile)
		}
	}
	link := steps[4]
	if !containsSeq(link, "-O3", "-DX=1", "-x", "cuda", "-x", "none", "/tmp/T/cu0.o", "-x", "cuda", "-x", "none", "main.cpp", "-o", "app") {
		t.Fatalf("the object must replace the CUDA source in the link: %q", link)
	}
	if slices.Contains(link, "k.cu") {
		t.Fatalf("link still compiles k.cu: %q", link)
	}
}

func TestPlanLauncherAndErrors(t *testing.T) {
	m := cudaMachine()
	p := plan(t, m, true, "/opt/llvm/bin/clang++", "-c", "k.cu")
	if p.Steps[0].Argv[0] != "/opt/llvm/bin/clang++" || runSteps(p)[1][0] != "/opt/llvm/bin/clang++" {
		t.Fatalf("launcher clang must be used: %v", p.Steps)
	}
	p = plan(t, m, true, "/p/bin/mneme-cxx", "-c", "k.cu")
	if p.Steps[0].Argv[0] != "/usr/bin/clang++-22" || slices.Contains(p.Steps[0].Argv, "/p/bin/mneme-cxx") {
		t.Fatalf("wrapper as launcher of itself: %v", p.Steps)
	}
	if _, err := NewWrapper(m.host(), true, Layout{Prefix: "/p"}, "/t").Plan([]string{"/usr/local/cuda/bin/nvcc", "-c", "k.cu"}); err == nil ||
		!strings.Contains(err.Error(), "nvcc") {
		t.Fatalf("nvcc launcher: %v", err)
	}
	// -nocudainc -nocudalib opt out of the toolkit even where there is one.
	p = plan(t, m, true, "-nocudainc", "-nocudalib", "-c", "k.cu")
	if slices.Contains(p.Steps[0].Argv, "--cuda-path=/cuda") {
		t.Fatalf("-nocudainc with a toolkit present: %q", p.Steps[0].Argv)
	}
	delete(m.env, "CUDA_PATH")
	if _, err := NewWrapper(m.host(), true, Layout{Prefix: "/p"}, "/t").Plan([]string{"-c", "k.cu"}); err == nil ||
		!strings.Contains(err.Error(), "CUDA_PATH") {
		t.Fatalf("no CUDA: %v", err)
	}
	// Without a toolkit, -nocudainc -nocudalib compiles still go ahead.
	p = plan(t, m, true, "-nocudainc", "-nocudalib", "-c", "k.cu")
	if s := runSteps(p); len(s) != 4 || slices.Contains(s[0], "--cuda-path=/cuda") || !containsSeq(s[1], "-nocudainc", "-nocudalib") {
		t.Fatalf("-nocudainc: %v", p.Steps)
	}
}

func TestResponseFiles(t *testing.T) {
	dir := t.TempDir()
	inner := filepath.Join(dir, "inner.rsp")
	os.WriteFile(inner, []byte(`-DQ="a b" 'c d.cu'`), 0o644)
	outer := filepath.Join(dir, "outer.rsp")
	os.WriteFile(outer, []byte("-c\n-I inc\\ dir\n@"+inner+"\n"), 0o644)
	cl, err := ParseCommandLine([]string{"@" + outer, "-o", "x.o", "@missing.rsp"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-c", "-I", "inc dir", "-DQ=a b", "c d.cu", "-o", "x.o", "@missing.rsp"}
	if !slices.Equal(cl.Args, want) {
		t.Fatalf("expanded %q, want %q", cl.Args, want)
	}
	if len(cl.Inputs) != 2 || !cl.Inputs[0].IsCUDA() || cl.Output != "x.o" || !cl.CompileOnly {
		t.Fatalf("classification: %+v", cl)
	}
	os.WriteFile(outer, []byte(`-c "unterminated`), 0o644)
	if _, err := ParseCommandLine([]string{"@" + outer}); err == nil || !strings.Contains(err.Error(), outer) {
		t.Fatalf("bad response file: %v", err)
	}
	// A response file that holds a CUDA compile gets the embedding too.
	os.WriteFile(outer, []byte("-c k.cu -o k.o"), 0o644)
	p := plan(t, cudaMachine(), true, "@"+outer)
	if s := runSteps(p); len(s) != 4 || s[0][1] != "@"+outer || !containsSeq(s[3], "k.o", "/tmp/T/ir0.o") {
		t.Fatalf("response-file compile: %v", p.Steps)
	}
}

func FuzzSplitResponseFile(f *testing.F) {
	for _, s := range []string{"", "-c a.cu", `"a b" 'c' d\ e`, "'x", "\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitResponseFile(s)
		if err != nil {
			return
		}
		// Quoting every word and splitting again gives the same words.
		var b strings.Builder
		for _, w := range words {
			b.WriteString("'" + strings.ReplaceAll(w, "'", `'\''`) + "' ")
		}
		again, err := SplitResponseFile(b.String())
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("round trip of %q: %q -> %q (%v)", s, words, again, err)
		}
	})
}

func FuzzParseCommandLine(f *testing.F) {
	f.Add("-c\x00k.cu\x00-o\x00k.o")
	f.Add("-x\x00cuda\x00-o")
	f.Add("-arch\x00-MF")
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		for i, a := range args {
			if strings.HasPrefix(a, "@") { // keep the fuzzer off the file system
				args[i] = "x" + a
			}
		}
		cl, err := ParseCommandLine(args)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range cl.Inputs {
			if in.Pos < 0 || in.Pos >= len(cl.Args) || cl.Args[in.Pos] != in.Path {
				t.Fatalf("input %+v does not point into %q", in, cl.Args)
			}
		}
		flags := compileOnlyFlags(cl)
		for i := 0; i < len(cl.Args); {
			_, span := irFlag(cl.Args, i)
			if span < 1 {
				t.Fatalf("irFlag span %d at %d", span, i)
			}
			i += span
		}
		_ = flags
	})
}
