package jit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/gputest"
)

// TestBaselineIsClangsPTX checks that the recorded configuration compiles a
// kernel to the PTX clang emitted for the application, instruction for
// instruction, on a kernel with the traits that once made them differ:
// indices read through inline (linkonce_odr) helpers as CUDA's threadIdx
// is, a static shared tile and double-precision math. Internalizing those
// helpers first changes the optimizer's loop structure (the n-body example
// ran 9% slower for it), so the same compile with Internalize must differ:
// that is why the baseline leaves it off.
func TestBaselineIsClangsPTX(t *testing.T) {
	clang, err := exec.LookPath("clang++-22")
	if err != nil {
		clang, err = exec.LookPath("clang++")
	}
	gputest.Tool(t, err)
	dir := t.TempDir()
	src := filepath.Join("testdata", "tiled_nbody.cu")
	appPTX, bc := filepath.Join(dir, "app.ptx"), filepath.Join(dir, "app.bc")
	flags := []string{"-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib", "--cuda-gpu-arch=sm_90",
		"-Xclang", "-target-feature", "-Xclang", "+ptx80", "-O3"}
	for _, args := range [][]string{
		append(append([]string{}, flags...), "-S", src, "-o", appPTX),
		append(append([]string{}, flags...), "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", src, "-o", bc),
	} {
		if msg, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", clang, strings.Join(args, " "), err, msg)
		}
	}
	want, err := os.ReadFile(appPTX)
	if err != nil {
		t.Fatal(err)
	}
	ir, err := os.ReadFile(bc)
	if err != nil {
		t.Fatal(err)
	}
	const kernel = "_Z4kickPK4BodyPdid"
	c := NewCompiler(Options{})
	compile := func(cfg mneme.Config) string {
		out, err := c.Compile(&Request{Name: "app.bc", IR: ir, Kernel: kernel, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return codeOf(string(out.PTX))
	}
	base := mneme.Baseline(mneme.Dim3{X: 64, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0)
	if got := compile(base); got != codeOf(string(want)) {
		t.Errorf("the baseline's PTX differs from clang's\n--- ours\n%s\n--- clang\n%s", got, codeOf(string(want)))
	}
	internalized := base
	internalized.Internalize = true
	if compile(internalized) == codeOf(string(want)) {
		t.Errorf("internalizing no longer changes this kernel's PTX: the test lost its point")
	}
}

// codeOf is PTX without comments, trailing blanks and empty lines.
func codeOf(ptx string) string {
	var b strings.Builder
	for _, line := range strings.Split(ptx, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimRight(line, " \t"); line != "" {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
