package toolchain

import (
	"slices"
	"strings"
	"testing"
)

// TestParseEverySpelling covers each flag spelling ParseCommandLine accepts:
// a spelling it drops is silent (the IR is merged into the wrong object, or
// a CUDA input is compiled without the embedding), so each one is asserted.
func TestParseEverySpelling(t *testing.T) {
	type want struct {
		output  string
		inputs  []string
		langs   []string
		set     string // flags expected true, by name
		cudart  bool
		objects []string // ObjectPath of each input
	}
	for _, c := range []struct {
		args string
		want want
	}{
		{"-c k.cu -o k.o", want{output: "k.o", inputs: []string{"k.cu"}, set: "CompileOnly", objects: []string{"k.o"}}},
		{"-c k.cu -ok.o", want{output: "k.o", inputs: []string{"k.cu"}, set: "CompileOnly", objects: []string{"k.o"}}},
		{"-c -obuild/k.o k.cu", want{output: "build/k.o", inputs: []string{"k.cu"}, set: "CompileOnly", objects: []string{"build/k.o"}}},
		{"-c a.cu b.cu -o x.o", want{output: "x.o", inputs: []string{"a.cu", "b.cu"}, set: "CompileOnly", objects: []string{"a.o", "b.o"}}},
		{"-c dir/a.cu", want{inputs: []string{"dir/a.cu"}, set: "CompileOnly", objects: []string{"a.o"}}},
		// -objc-arc is a flag, not the output "bjc-arc".
		{"-objc-arc -c m.cu", want{inputs: []string{"m.cu"}, set: "CompileOnly", objects: []string{"m.o"}}},
		{"-S k.cu", want{inputs: []string{"k.cu"}, set: "AssembleOnly"}},
		{"-E k.cu", want{inputs: []string{"k.cu"}, set: "PreprocessOnly"}},
		{"-M k.cu", want{inputs: []string{"k.cu"}, set: "PreprocessOnly"}},
		{"-MM k.cu", want{inputs: []string{"k.cu"}, set: "PreprocessOnly"}},
		{"-fsyntax-only k.cu", want{inputs: []string{"k.cu"}, set: "SyntaxOnly"}},
		{"-emit-llvm -c k.cu", want{inputs: []string{"k.cu"}, set: "CompileOnly EmitLLVM"}},
		{"--cuda-device-only k.cu", want{inputs: []string{"k.cu"}, set: "DeviceOnly"}},
		{"--offload-device-only k.cu", want{inputs: []string{"k.cu"}, set: "DeviceOnly"}},
		{"--version", want{set: "InfoOnly"}},
		{"-###", want{set: "InfoOnly"}},
		{"--help", want{set: "InfoOnly"}},
		{"-help", want{set: "InfoOnly"}},
		{"-dumpversion", want{set: "InfoOnly"}},
		{"-dumpmachine", want{set: "InfoOnly"}},
		{"-dumpfullversion", want{set: "InfoOnly"}},
		{"-print-resource-dir", want{set: "InfoOnly"}},
		{"--print-prog-name=ld", want{set: "InfoOnly"}},
		{"--cuda-path /c k.cu", want{inputs: []string{"/c", "k.cu"}, set: "HasCUDAPath"}},
		{"--cuda-path=/c k.cu", want{inputs: []string{"k.cu"}, set: "HasCUDAPath"}},
		{"-nocudainc k.cu", want{inputs: []string{"k.cu"}, set: "NoCUDAInc"}},
		{"-nogpuinc k.cu", want{inputs: []string{"k.cu"}, set: "NoCUDAInc"}},
		{"-nocudalib k.cu", want{inputs: []string{"k.cu"}, set: "NoCUDALib"}},
		{"-nogpulib k.cu", want{inputs: []string{"k.cu"}, set: "NoCUDALib"}},
		// -x applies to the inputs after it, until -x none.
		{"a.c -x cuda k.c -x none b.c", want{inputs: []string{"a.c", "k.c", "b.c"}, langs: []string{"", "cuda", ""}}},
		{"-xcuda k.c -xnone b.c", want{inputs: []string{"k.c", "b.c"}, langs: []string{"cuda", ""}}},
		{"-xc-header h.h", want{inputs: []string{"h.h"}, langs: []string{""}}},
		{"-xarch k.cu", want{inputs: []string{"k.cu"}, langs: []string{""}}},
		{"main.o -lcudart", want{inputs: []string{"main.o"}, cudart: true}},
		{"main.o -lcudart_static", want{inputs: []string{"main.o"}, cudart: true}},
		{"main.o -l cudart", want{inputs: []string{"main.o"}, cudart: true}},
		{"main.o -l:libcudart.so", want{inputs: []string{"main.o"}, cudart: true}},
		{"main.o -l:libcudart_static.a", want{inputs: []string{"main.o"}, cudart: true}},
		{"main.o -lm -l pthread", want{inputs: []string{"main.o"}}},
		{"main.o -Wl,--as-needed,-lcudart", want{inputs: []string{"main.o"}, cudart: true}},
		{"main.o -Wl,/cuda/lib64/libcudart.so.13", want{inputs: []string{"main.o"}, cudart: true}},
		{"main.o -Wl,-lm,--gc-sections", want{inputs: []string{"main.o"}}},
		{"main.o /cuda/lib64/libcudart.so.13", want{inputs: []string{"main.o", "/cuda/lib64/libcudart.so.13"}, cudart: true}},
		{"main.o /cuda/lib64/libcudart_static.a", want{inputs: []string{"main.o", "/cuda/lib64/libcudart_static.a"}, cudart: true}},
		{"- -c", want{inputs: []string{"-"}, set: "CompileOnly"}},
		// Options whose value is separate: the value is never an input.
		{"-I inc -D X=1 -include pre.h -MF dep.d -MT t -isystem sys -Xclang -v -mllvm -x1 -arch sm_90 -rpath /r k.cu",
			want{inputs: []string{"k.cu"}}},
		// A separate-value option at the end has no value to take.
		{"k.cu -o", want{inputs: []string{"k.cu"}}},
	} {
		args := strings.Fields(c.args)
		cl, err := ParseCommandLine(args)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		var inputs, langs []string
		for _, in := range cl.Inputs {
			inputs = append(inputs, in.Path)
			langs = append(langs, in.Lang)
			if args[in.Pos] != in.Path {
				t.Errorf("%q: input %+v: Pos points at %q", c.args, in, args[in.Pos])
			}
		}
		if cl.Output != c.want.output || !slices.Equal(inputs, c.want.inputs) {
			t.Errorf("%q: output %q inputs %q, want %q %q", c.args, cl.Output, inputs, c.want.output, c.want.inputs)
		}
		if c.want.langs != nil && !slices.Equal(langs, c.want.langs) {
			t.Errorf("%q: languages %q, want %q", c.args, langs, c.want.langs)
		}
		flags := map[string]bool{"CompileOnly": cl.CompileOnly, "AssembleOnly": cl.AssembleOnly,
			"PreprocessOnly": cl.PreprocessOnly, "SyntaxOnly": cl.SyntaxOnly, "EmitLLVM": cl.EmitLLVM,
			"DeviceOnly": cl.DeviceOnly, "InfoOnly": cl.InfoOnly, "HasCUDAPath": cl.HasCUDAPath,
			"NoCUDAInc": cl.NoCUDAInc, "NoCUDALib": cl.NoCUDALib}
		set := strings.Fields(c.want.set)
		for name, v := range flags {
			if v != slices.Contains(set, name) {
				t.Errorf("%q: %s = %v", c.args, name, v)
			}
		}
		if cl.LinksCUDART != c.want.cudart {
			t.Errorf("%q: LinksCUDART = %v", c.args, cl.LinksCUDART)
		}
		// Only a plain link of inputs links: any stop-early flag ends it sooner.
		links := len(inputs) > 0
		for _, stop := range []string{"CompileOnly", "AssembleOnly", "PreprocessOnly", "SyntaxOnly", "EmitLLVM", "DeviceOnly", "InfoOnly"} {
			links = links && !flags[stop]
		}
		if cl.Links() != links {
			t.Errorf("%q: Links() = %v, want %v", c.args, cl.Links(), links)
		}
		for i, o := range c.want.objects {
			if got := cl.ObjectPath(cl.Inputs[i]); got != o {
				t.Errorf("%q: ObjectPath(%s) = %q, want %q", c.args, cl.Inputs[i].Path, got, o)
			}
		}
	}
}

// TestInputKinds covers which inputs are compiled, and which as CUDA.
func TestInputKinds(t *testing.T) {
	for _, c := range []struct {
		in           Input
		source, cuda bool
	}{
		{Input{Path: "k.cu"}, true, true},
		{Input{Path: "K.CU"}, true, false},
		{Input{Path: "k.c", Lang: "cuda"}, true, true},
		{Input{Path: "k.cu", Lang: "c++"}, true, false},
		{Input{Path: "k.o", Lang: "c"}, true, false},
		{Input{Path: "k.o"}, false, false},
		{Input{Path: "libx.a"}, false, false},
		{Input{Path: "x.C"}, true, false},
		{Input{Path: "x.cpp"}, true, false},
		{Input{Path: "x.cxx"}, true, false},
		{Input{Path: "x.cc"}, true, false},
		{Input{Path: "x.cp"}, true, false},
		{Input{Path: "x.c++"}, true, false},
		{Input{Path: "x.i"}, true, false},
		{Input{Path: "x.ii"}, true, false},
		{Input{Path: "x.m"}, true, false},
		{Input{Path: "x.mm"}, true, false},
		{Input{Path: "x.s"}, true, false},
	} {
		if c.in.IsSource() != c.source || c.in.IsCUDA() != c.cuda {
			t.Errorf("%+v: IsSource %v IsCUDA %v, want %v %v", c.in, c.in.IsSource(), c.in.IsCUDA(), c.source, c.cuda)
		}
	}
	cl, err := ParseCommandLine([]string{"a.cu", "b.c", "-x", "cuda", "c.c"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range cl.CUDAInputs() {
		got = append(got, in.Path)
	}
	if !slices.Equal(got, []string{"a.cu", "c.c"}) {
		t.Errorf("CUDAInputs %q", got)
	}
}

func TestDeviceCodeFlags(t *testing.T) {
	args := []string{"-x", "cuda", "-O2", "-Iinc", "-Xcuda-ptxas", "-maxrregcount=64", "--ptxas-options=-v,--warn-on-spills",
		"-ffp-contract=off", "-fgpu-flush-denormals-to-zero", "-c", "a.cu", "-o", "a.o", "-Xptxas", "-O1"}
	want := []string{"-O2", "-Xcuda-ptxas", "-maxrregcount=64", "-Xcuda-ptxas", "-v", "-Xcuda-ptxas", "--warn-on-spills",
		"-ffp-contract=off", "-fgpu-flush-denormals-to-zero", "-Xcuda-ptxas", "-O1"}
	if got := DeviceCodeFlags(args); !slices.Equal(got, want) {
		t.Fatalf("DeviceCodeFlags = %q\nwant %q", got, want)
	}
	if got := DeviceCodeFlags([]string{"-Xcuda-ptxas"}); len(got) != 0 {
		t.Errorf("a dangling -Xcuda-ptxas gave %q", got)

	}
}
