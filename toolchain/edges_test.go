package toolchain

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResponseFileNestingLimit: a chain of response files 20 deep expands;
// one more level, or a file that names itself, is an error, not a hang.
func TestResponseFileNestingLimit(t *testing.T) {
	dir := t.TempDir()
	chain := func(depth int) string { // returns the first file of a chain ending in "-c"
		for i := depth; i >= 1; i-- {
			body := "-c"
			if i < depth {
				body = "@" + filepath.Join(dir, fmt.Sprintf("%d-%d.rsp", depth, i+1))
			}
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d-%d.rsp", depth, i)), []byte(body), 0o644)
		}
		return "@" + filepath.Join(dir, fmt.Sprintf("%d-1.rsp", depth))
	}
	if got, err := ExpandResponseFiles([]string{chain(20)}); err != nil || !slices.Equal(got, []string{"-c"}) {
		t.Errorf("20 deep: %q, %v", got, err)
	}
	if _, err := ExpandResponseFiles([]string{chain(21)}); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("21 deep: %v", err)
	}
	self := filepath.Join(dir, "self.rsp")
	os.WriteFile(self, []byte("-c @"+self), 0o644)
	if _, err := ExpandResponseFiles([]string{"@" + self}); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("a file naming itself: %v", err)
	}
}

// TestSplitResponseFileBackslashes: a backslash escapes inside double quotes
// and outside quotes and is literal inside single quotes; one that ends an
// unterminated quote is an error, not a read past the end.
func TestSplitResponseFileBackslashes(t *testing.T) {
	for in, want := range map[string][]string{
		`"a\"b" c`: {`a"b`, "c"},
		`'a\b' c`:  {`a\b`, "c"},
		`a\ b`:     {"a b"},
		`"x\\y"`:   {`x\y`},
	} {
		got, err := SplitResponseFile(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitResponseFile(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := SplitResponseFile(`"abc\`); err == nil {
		t.Errorf("an unterminated quote ending in a backslash was accepted")
	}
}

// TestArchFromArgsEdges: a flag with its value missing names nothing, and
// only nvcc-style -arch needs an sm_ value (other spellings name any target).
func TestArchFromArgsEdges(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--offload-arch"}, ""},
		{[]string{"-arch"}, ""},
		{[]string{"-c", "--cuda-gpu-arch"}, ""},
		{[]string{"--offload-arch", "gfx90a"}, "gfx90a"},
		{[]string{"-arch", "compute_80", "--cuda-gpu-arch", "sm_89"}, "sm_89"},
		{[]string{"-arch", "sm_75"}, "sm_75"},
	} {
		if got := ArchFromArgs(c.args); got != c.want {
			t.Errorf("ArchFromArgs(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// TestDetectArchDigits: compute capabilities with a 9 and a 0 are digits;
// anything else is no answer.
func TestDetectArchDigits(t *testing.T) {
	m := newMachine()
	m.path["nvidia-smi"] = "/usr/bin/nvidia-smi"
	for out, want := range map[string]string{"8.9\n": "sm_89", "9.0\n": "sm_90", "10.0\n": "sm_100", "8.x\n": "", "8:9\n": "", "/.0\n": ""} {
		m.outputs["/usr/bin/nvidia-smi --query-gpu=compute_cap --format=csv,noheader"] = out
		if got := DetectArch(m.host()); got != want {
			t.Errorf("nvidia-smi says %q: got %q, want %q", out, got, want)
		}
	}
}

// TestTranslateNVCCArch: nvcc's -arch sm_XY becomes --cuda-gpu-arch; what
// clang understands otherwise (or a dangling -arch) is left alone.
func TestTranslateNVCCArch(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"-arch", "sm_80", "-c", "k.cu"}, []string{"--cuda-gpu-arch=sm_80", "-c", "k.cu"}},
		{[]string{"-c", "-arch=sm_70"}, []string{"-c", "--cuda-gpu-arch=sm_70"}},
		{[]string{"-c", "k.cu", "-arch"}, []string{"-c", "k.cu", "-arch"}},
		{[]string{"-arch", "x86_64", "-c"}, []string{"-arch", "x86_64", "-c"}},
		{[]string{"-march", "sm_80"}, []string{"-march", "sm_80"}},
	} {
		if got := translateNVCCArch(c.in); !slices.Equal(got, c.want) {
			t.Errorf("translateNVCCArch(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPlanOfNothing: the wrapper with no arguments runs the compiler with none.
func TestPlanOfNothing(t *testing.T) {
	p := plan(t, cudaMachine(), true)
	if len(p.Steps) != 1 || !slices.Equal(p.Steps[0].Argv, []string{"/usr/bin/clang++-22"}) {
		t.Errorf("no arguments: %v", p.Steps)
	}
}

// TestPlanCWithoutCUDA: a C compile needs no CUDA toolkit.
func TestPlanCWithoutCUDA(t *testing.T) {
	m := newMachine()
	m.path["clang-22"] = "/usr/bin/clang-22"
	p := plan(t, m, false, "-c", "a.c", "-o", "a.o")
	if len(p.Steps) != 1 || !slices.Equal(p.Steps[0].Argv, []string{"/usr/bin/clang-22", "-c", "a.c", "-o", "a.o"}) {
		t.Errorf("C compile: %v", p.Steps)
	}
}

// TestPlanLinkWithCUDALinksObjects: a link that compiles a CUDA source links
// the object compiled from it, not the source.
func TestPlanLinkWithCUDALinksObjects(t *testing.T) {
	steps := runSteps(plan(t, cudaMachine(), true, "k.cu", "main.o", "-o", "app"))
	link := steps[len(steps)-1]
	if slices.Contains(link, "k.cu") || !slices.Contains(link, "/tmp/T/cu0.o") || !slices.Contains(link, "main.o") {
		t.Errorf("link step: %q", link)
	}
}

// TestExecuteReportsTheExitCode: a failing step's exit status is kept.
func TestExecuteReportsTheExitCode(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	p := &Plan{Steps: []Step{{Kind: RunStep, Argv: []string{sh, "-c", "exit 3"}}}}
	err = Execute(p, nil, nil, nil, false)
	var se *StepError
	if !errors.As(err, &se) || se.ExitCode != 3 {
		t.Errorf("exit 3: %v", err)
	}
}

// TestWriteIRAssemblyTakesBareBitcodeMagic: the check is for the bitcode
// magic, so four bytes of it are accepted and three are not.
func TestWriteIRAssemblyTakesBareBitcodeMagic(t *testing.T) {
	dir := t.TempDir()
	bc := filepath.Join(dir, "k.bc")
	for magic, ok := range map[string]bool{"BC\xc0\xde": true, "BC\xc0": false, "BC\xc0\xdf": false} {
		os.WriteFile(bc, []byte(magic), 0o644)
		err := WriteIRAssembly("k.cu", bc, filepath.Join(dir, "k.entry"), filepath.Join(dir, "k.s"))
		if (err == nil) != ok {
			t.Errorf("%q: %v", magic, err)
		}
	}
}

// TestPlanWithoutInputsIsNoLink: flags without any input are passed through
// unchanged, so the compiler itself reports what is missing.
func TestPlanWithoutInputsIsNoLink(t *testing.T) {
	p := plan(t, cudaMachine(), true, "-o", "app", "-lm")
	if len(p.Steps) != 1 || !slices.Equal(p.Steps[0].Argv, []string{"/usr/bin/clang++-22", "-o", "app", "-lm"}) {
		t.Errorf("no inputs: %v", p.Steps)
	}
}

// TestPlanCUDALinkFromResponseFile: a link whose CUDA source comes from a
// response file links the compiled object, not the response file again.
func TestPlanCUDALinkFromResponseFile(t *testing.T) {
	rsp := filepath.Join(t.TempDir(), "link.rsp")
	os.WriteFile(rsp, []byte("k.cu main.o -o app"), 0o644)
	steps := runSteps(plan(t, cudaMachine(), true, "@"+rsp))
	link := steps[len(steps)-1]
	if slices.Contains(link, "@"+rsp) || slices.Contains(link, "k.cu") || !slices.Contains(link, "/tmp/T/cu0.o") {
		t.Errorf("link step: %q", link)
	}
}
