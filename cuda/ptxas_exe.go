package cuda

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The toolkit's ptxas program, run as the application's compiler ran it
// (clang: ptxas -m64 -O3 --gpu-name sm_XX). Measured on an H100 with CUDA
// 13.0: a tiled matrix multiply with static shared tiles ran 26% slower from
// the same PTX compiled through libnvJitLink (and through the driver's JIT)
// than from the cubin the application's build got from this program, so
// replay and deployment prefer it when it is there.

// EnvPtxasBinary names the ptxas program explicitly; otherwise it is looked
// for in $CUDA_PATH/bin, $CUDA_HOME/bin, /usr/local/cuda/bin and on PATH.
const EnvPtxasBinary = "MNEME_PTXAS_BIN"

var (
	ptxasExeOnce    sync.Once
	ptxasExePath    string
	ptxasExeVersion string
	ptxasExeErr     error
)

var rePtxasRelease = regexp.MustCompile(`release (\d+\.\d+)`)

func ptxasCandidates() []string {
	if p := os.Getenv(EnvPtxasBinary); p != "" {
		return []string{p}
	}
	var out []string
	for _, root := range []string{os.Getenv("CUDA_PATH"), os.Getenv("CUDA_HOME"), "/usr/local/cuda"} {
		if root != "" {
			out = append(out, filepath.Join(root, "bin", "ptxas"))
		}
	}
	if p, err := exec.LookPath("ptxas"); err == nil {
		out = append(out, p)
	}
	return out
}

// PtxasProgram finds the toolkit's ptxas once and reports its path and
// release ("13.0").
func PtxasProgram() (path, version string, err error) {
	ptxasExeOnce.Do(func() {
		tried := ptxasCandidates()
		for _, p := range tried {
			out, err := exec.Command(p, "--version").CombinedOutput()
			if err != nil {
				continue
			}
			m := rePtxasRelease.FindSubmatch(out)
			if m == nil {
				continue
			}
			ptxasExePath, ptxasExeVersion = p, string(m[1])
			return
		}
		ptxasExeErr = fmt.Errorf("no ptxas program of a CUDA toolkit found (tried %s; set %s)", strings.Join(tried, ", "), EnvPtxasBinary)
	})
	return ptxasExePath, ptxasExeVersion, ptxasExeErr
}

// PtxasAssemble compiles PTX to a cubin with the toolkit's ptxas program,
// whole-program as a compiler driver runs it, with -O3 unless opts says
// otherwise. It needs no GPU. opts.Arch is required.
func PtxasAssemble(ptx []byte, name string, opts JITOptions) (*LinkResult, error) {
	prog, _, err := PtxasProgram()
	if err != nil {
		return nil, err
	}
	arch, level, err := opts.toolkitTarget("ptxas")
	if err != nil {
		return nil, err
	}
	if len(ptx) == 0 {
		return nil, fmt.Errorf("ptxas %s: empty PTX", name)
	}
	options := []string{"-m64", fmt.Sprintf("-O%d", level), "--gpu-name", arch}
	if opts.MaxRegisters > 0 {
		options = append(options, fmt.Sprintf("--maxrregcount=%d", opts.MaxRegisters))
	}
	dir, err := os.MkdirTemp("", "mneme-ptxas-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "kernel.ptx"), filepath.Join(dir, "kernel.cubin")
	if err := os.WriteFile(in, ptx, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(prog, append(append([]string{}, options...), "-v", "--output-file", out, in)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	if runErr != nil {
		return nil, &LinkError{Err: fmt.Errorf("ptxas on %q: %v", name, runErr), Log: strings.TrimSpace(log.String())}
	}
	cubin, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("ptxas on %q: %w", name, err)
	}
	return &LinkResult{Cubin: cubin, InfoLog: strings.TrimSpace(log.String()), WallTime: wall,
		Options: append([]string{"ptxas"}, options...)}, nil
}
