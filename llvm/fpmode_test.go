package llvm

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fpBitcode compiles testdata/fpmath.cu as the compiler wrapper does, with
// extra clang flags.
func fpBitcode(t *testing.T, flags ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(clang); err != nil {
		t.Skipf("%s is not installed, so the CUDA test inputs cannot be built: %v", clang, err)
	}
	out := filepath.Join(t.TempDir(), "fpmath.bc")
	args := append([]string{"-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
		"--cuda-gpu-arch=sm_90", "-Xclang", "-target-feature", "-Xclang", "+ptx80",
		"-O3", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c"}, flags...)
	cmd := exec.Command(clang, append(args, filepath.Join("testdata", "fpmath.cu"), "-o", out)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, msg)
	}
	bc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return bc
}

func TestFPContractionReadFromIR(t *testing.T) {
	for _, c := range []struct {
		flag string
		want FPOpFusion
	}{{"-ffp-contract=fast", FuseFast}, {"-ffp-contract=on", FuseStandard}, {"-ffp-contract=off", FuseStrict}, {"", FuseFast}} {
		var flags []string
		if c.flag != "" {
			flags = append(flags, c.flag)
		}
		m, err := ParseBitcode(fpBitcode(t, flags...), "fpmath.bc")
		if err != nil {
			t.Fatal(err)
		}
		if got := m.FPContraction(); got != c.want {
			t.Errorf("%q: FPContraction = %v, want %v (CUDA's default is fast)", c.flag, got, c.want)
		}
		m.Dispose()
	}
}

func TestKernelPTXVersionFromTargetFeatures(t *testing.T) {
	m, err := ParseBitcode(fpBitcode(t, "-Xclang", "-target-feature", "-Xclang", "+ptx83"), "fpmath.bc")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	if got := m.KernelPTXVersion("_Z4axpbPfPKfffi"); got != 83 {
		t.Fatalf("KernelPTXVersion = %d, want 83", got)
	}
	if got := m.KernelPTXVersion("no_such_kernel"); got != 0 {
		t.Fatalf("KernelPTXVersion of a missing kernel = %d, want 0", got)
	}
}

// TestPTXAsClangEmitsIt checks that code generation under the fusion the IR
// records gives the PTX clang itself emits for the application: contraction
// decides whether ptxas may fuse (plain mul/add) or not (.rn), so any
// difference changes the bits of float results.
func TestPTXAsClangEmitsIt(t *testing.T) {
	for _, flag := range []string{"-ffp-contract=fast", "-ffp-contract=off"} {
		bc := fpBitcode(t, flag)
		appPTX := filepath.Join(t.TempDir(), "app.ptx")
		cmd := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib", "--cuda-gpu-arch=sm_90",
			"-Xclang", "-target-feature", "-Xclang", "+ptx80", "-O3", "-S", flag, filepath.Join("testdata", "fpmath.cu"), "-o", appPTX)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, msg)
		}
		want, err := os.ReadFile(appPTX)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseBitcode(bc, "fpmath.bc")
		if err != nil {
			t.Fatal(err)
		}
		tm := newTarget(t, "sm_90", m.KernelPTXVersion("_Z4axpbPfPKfffi"), 3)
		if err := tm.SetFPOpFusion(m.FPContraction()); err != nil {
			t.Fatal(err)
		}
		if err := m.RunPasses("default<O3>", tm); err != nil {
			t.Fatal(err)
		}
		got, err := tm.EmitPTX(m)
		m.Dispose()
		if err != nil {
			t.Fatal(err)
		}
		if stripPTXComments(got) != stripPTXComments(string(want)) {
			t.Errorf("%s: PTX differs from clang's\n--- ours\n%s\n--- clang\n%s", flag, got, want)
		}
		rounded := regexp.MustCompile(`\bmul\.rn\.f32`).MatchString(got)
		if wantRounded := flag == "-ffp-contract=off"; rounded != wantRounded {
			t.Errorf("%s: mul.rn.f32 present = %v, want %v", flag, rounded, wantRounded)
		}
	}
}

func stripPTXComments(ptx string) string {
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

func TestParseFPContract(t *testing.T) {
	for s, want := range map[string]FPOpFusion{"fast": FuseFast, "fast-honor-pragmas": FuseFast, "on": FuseStandard, "off": FuseStrict} {
		if got, err := ParseFPContract(s); err != nil || got != want {
			t.Errorf("ParseFPContract(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseFPContract("fastest"); err == nil || !strings.Contains(err.Error(), "fp_contract") {
		t.Errorf("ParseFPContract(fastest): %v, want an error naming fp_contract", err)
	}
}
