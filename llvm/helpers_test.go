package llvm

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// clang is the compiler the tests build their CUDA inputs with.
const clang = "clang++-22"

var (
	bitcodeMu    sync.Mutex
	bitcodeCache = map[string][]byte{}
)

// cudaBitcode compiles testdata/NAME.cu to unoptimized device bitcode for
// sm_90 the way the project's compiler wrapper does, once per test process.
func cudaBitcode(tb testing.TB, name string) []byte {
	tb.Helper()
	bitcodeMu.Lock()
	defer bitcodeMu.Unlock()
	if bc, ok := bitcodeCache[name]; ok {
		return bc
	}
	if _, err := exec.LookPath(clang); err != nil {
		tb.Skipf("%s is not installed, so the CUDA test inputs cannot be built: %v", clang, err)
	}
	out := filepath.Join(tb.TempDir(), name+".bc")
	cmd := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
		"--cuda-gpu-arch=sm_90", "-Xclang", "-target-feature", "-Xclang", "+ptx80",
		"-O3", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
		filepath.Join("testdata", name+".cu"), "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("%s: %v\n%s", cmd, err, msg)
	}
	bc, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	bitcodeCache[name] = bc
	return bc
}

// parseCUDA parses the bitcode of testdata/NAME.cu; the test disposes of it.
func parseCUDA(tb testing.TB, name string) *Module {
	tb.Helper()
	m, err := ParseBitcode(cudaBitcode(tb, name), name+".bc")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(m.Dispose)
	return m
}

// newTarget makes a target machine the test disposes of.
func newTarget(tb testing.TB, arch string, ptx, opt int) *TargetMachine {
	tb.Helper()
	tm, err := NewTargetMachine(arch, ptx, opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(tm.Dispose)
	return tm
}

// optimizedPTX runs pipeline over a clone of m and returns its PTX for sm_90.
func optimizedPTX(tb testing.TB, m *Module, pipeline string) string {
	tb.Helper()
	c, err := m.Clone()
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Dispose()
	tm := newTarget(tb, "sm_90", 80, 3)
	if err := c.RunPasses(pipeline, tm); err != nil {
		tb.Fatal(err)
	}
	ptx, err := tm.EmitPTX(c)
	if err != nil {
		tb.Fatal(err)
	}
	return ptx
}
