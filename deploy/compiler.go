package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mneme-gpu/mneme"
)

// MnemeBinEnv names the mneme binary the runtime compiles with.
const MnemeBinEnv = "MNEME_BIN"

// MnemeBinary is the compiler the runtime runs: $MNEME_BIN, else the mneme
// of the prefix the runtime library was loaded from (libPath, PREFIX/lib/…),
// else mneme on PATH.
func MnemeBinary(libPath string) string {
	if b := os.Getenv(MnemeBinEnv); b != "" {
		return b
	}
	if libPath != "" {
		b := filepath.Join(filepath.Dir(filepath.Dir(libPath)), "bin", "mneme")
		if _, err := os.Stat(b); err == nil {
			return b
		}
	}
	return "mneme"
}

// CommandCompiler compiles variants by running `Bin deploy compile-variant`
// for the GPU Device: LLVM stays out of the application's process.
type CommandCompiler struct {
	Bin        string
	Executable string // the ELF file whose embedded IR holds the kernels
	Device     int
	// Trace, when set, logs each compile's time and registers.
	Trace func(format string, args ...any)
}

// Compile sends one CompileRequest and reads the CompileResponse; a failed
// command's error carries its standard error.
func (c *CommandCompiler) Compile(kernel string, cfg mneme.Config, args [][]byte) (*CompileResponse, error) {
	req, err := json.Marshal(CompileRequest{Executable: c.Executable, Kernel: kernel, Config: cfg, Args: args})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	cmd := exec.Command(c.Bin, "deploy", "compile-variant", "--device", strconv.Itoa(c.Device))
	cmd.Stdin = bytes.NewReader(req)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("compiling its tuned configuration (%s deploy compile-variant): %s", c.Bin, msg)
	}
	var resp CompileResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("compiling its tuned configuration: unreadable answer from %s: %v", c.Bin, err)
	}
	if c.Trace != nil {
		c.Trace("compiled %s in %.0f ms (%d registers)", kernel, time.Since(start).Seconds()*1e3, resp.Registers)
	}
	return &resp, nil
}
