package jit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme/internal/gputest"
)

var (
	irOnce sync.Once
	irData []byte
	irErr  error
)

// clangCUDAFlags compile CUDA device code to unoptimized but optimizable IR
// with no CUDA installation, as the check prescribes.
var clangCUDAFlags = []string{"-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
	"--cuda-gpu-arch=sm_90", "-Xclang", "-target-feature", "-Xclang", "+ptx80", "-O3",
	"-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c"}

// testIR compiles testdata/kernels.cu once with clang-22.
func testIR(t testing.TB) []byte {
	t.Helper()
	irOnce.Do(func() {
		clang, err := exec.LookPath("clang++-22")
		if err != nil {
			if clang, err = exec.LookPath("clang++"); err != nil {
				irErr = err
				return
			}
		}
		dir, err := os.MkdirTemp("", "mneme-jit-test")
		if err != nil {
			irErr = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "kernels.bc")
		args := append(append([]string{}, clangCUDAFlags...), "testdata/kernels.cu", "-o", out)
		if msg, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
			irErr = fmt.Errorf("%s: %v\n%s", clang, err, msg)
			return
		}
		irData, irErr = os.ReadFile(out)
	})
	// A missing clang skips; a failing compile of the kernels fails.
	gputest.Tool(t, irErr)
	return irData
}
