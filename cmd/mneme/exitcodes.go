package main

import (
	"errors"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/jit"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/record/session"
	"github.com/mneme-gpu/mneme/replay"
)

// Exit codes shared by every subcommand; the README documents them.
const (
	exitFailure      = 1 // an operation failed (I/O, CUDA, internal)
	exitUsage        = 2 // bad flags, arguments or input files
	exitVerification = 3 // the replayed kernel ran but its output differs from the recording
	exitKernelFault  = 4 // the kernel faulted, trapped or could not be launched
	exitCompile      = 5 // the kernel could not be compiled under the configuration
	exitNoGPU        = 6 // the command needs a CUDA driver and GPU and found none
	exitResources    = 7 // the machine lacks the host or device memory the work needs
)

// exitCode maps a command's error to its exit code. The packages behind the
// commands return errors of a few kinds; this is the one place that numbers
// them, so a kind means the same code in every command.
func exitCode(err error) int {
	var (
		explicit *exitError
		app      *session.Failure
		status   *replay.StatusError
		input    *mneme.InputError
		compile  *jit.CompileError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &explicit):
		return explicit.code
	case cuda.IsNoGPU(err):
		return exitNoGPU
	case errors.Is(err, mneme.ErrOutOfResources), cuda.IsOutOfMemory(err):
		return exitResources
	case errors.As(err, &app):
		return app.ExitCode
	case errors.As(err, &status):
		return statusExit(status.Result.Status)
	case errors.As(err, &input), errors.Is(err, llvm.ErrInvalidPipeline):
		return exitUsage
	case errors.As(err, &compile):
		if compile.Stage == "parse" {
			return exitUsage // the IR given is not IR
		}
		return exitCompile
	}
	return exitFailure
}

// statusExit maps a replay's status to its exit code.
func statusExit(status mneme.Status) int {
	switch status {
	case mneme.StatusFailedVerification:
		return exitVerification
	case mneme.StatusRuntimeError, mneme.StatusInvalidLaunch:
		return exitKernelFault
	case mneme.StatusCompileError:
		return exitCompile
	case mneme.StatusInvalidConfig:
		return exitUsage
	}
	return exitFailure
}
