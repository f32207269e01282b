package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/jit"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/record/session"
	"github.com/mneme-gpu/mneme/replay"
)

func TestExitCodeOfEveryKind(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, 0},
		{"flag error", withExit(exitUsage, errors.New("--grid: bad")), exitUsage},
		{"no GPU, as the cuda package or a worker reports it", fmt.Errorf("tune needs a GPU: %w", mneme.ErrNoGPU), exitNoGPU},
		{"bad input", fmt.Errorf("loading: %w", mneme.BadInput(errors.New("no such instance"))), exitUsage},
		{"invalid pipeline", fmt.Errorf("optimize: %w", llvm.ErrInvalidPipeline), exitUsage},
		{"IR that is not IR", &jit.CompileError{Stage: "parse", Err: errors.New("not LLVM bitcode")}, exitUsage},
		{"compile failure", &jit.CompileError{Stage: "codegen", Err: errors.New("cannot select")}, exitCompile},
		{"verification", &replay.StatusError{Result: &mneme.Result{Status: mneme.StatusFailedVerification}}, exitVerification},
		{"kernel fault", &replay.StatusError{Result: &mneme.Result{Status: mneme.StatusRuntimeError}}, exitKernelFault},
		{"invalid launch", &replay.StatusError{Result: &mneme.Result{Status: mneme.StatusInvalidLaunch}}, exitKernelFault},
		{"compile error in a replay", &replay.StatusError{Result: &mneme.Result{Status: mneme.StatusCompileError}}, exitCompile},
		{"invalid configuration", &replay.StatusError{Result: &mneme.Result{Status: mneme.StatusInvalidConfig}}, exitUsage},
		{"the application's own exit code", &session.Failure{ExitCode: 7, Msg: "the application exited with status 7"}, 7},
		{"out of host memory", fmt.Errorf("snapshot: %w", mneme.ErrOutOfResources), exitResources},
		{"out of host memory, reading bad input", mneme.BadInput(fmt.Errorf("snapshot: %w", mneme.ErrOutOfResources)), exitResources},
		{"anything else", errors.New("disk full"), exitFailure},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", c.name, c.err, got, c.want)
		}
	}
}
