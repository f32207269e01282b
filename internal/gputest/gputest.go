// Package gputest decides, for the tests of the GPU packages, when a test
// may skip. A test skips only because the machine lacks what it names (a
// CUDA driver, a GPU, CUPTI, a compiler); any other error while setting up
// the GPU fails it. When the GPU entry point (scripts/gpu-test.sh) runs the
// tests it sets MNEME_GPU_REQUIRED=1, and then a test that would skip fails
// instead: a GPU run cannot pass by skipping.
package gputest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// Env is the variable the GPU entry point sets to 1.
const Env = "MNEME_GPU_REQUIRED"

// Required reports whether the GPU tests must run on this machine.
func Required() bool {
	v := os.Getenv(Env)
	return v != "" && v != "0"
}

// Skip skips tb for reason, which names what the machine lacks; under
// MNEME_GPU_REQUIRED it fails tb instead.
func Skip(tb testing.TB, reason string) {
	tb.Helper()
	if Required() {
		tb.Fatalf("%s (%s=1: the GPU tests must run here)", reason, Env)
	}
	tb.Skip(reason)
}

// Skipf is Skip with a format.
func Skipf(tb testing.TB, format string, args ...any) {
	tb.Helper()
	Skip(tb, fmt.Sprintf(format, args...))
}

// Need handles err from setting up the GPU (initializing the driver,
// finding or opening device 0): nil returns; an error that means this
// machine has no CUDA driver or no device (mneme.ErrNoGPU) skips as Skip
// does; any other error fails tb.
func Need(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, mneme.ErrNoGPU) {
		Skipf(tb, "no CUDA driver or GPU: %v", err)
	}
	tb.Fatalf("setting up the GPU: %v", err)
}

// Tool handles err from finding or running a tool the GPU tests need (the
// compiler of their kernels): nil returns; a tool that is not installed
// (exec.ErrNotFound) skips as Skip does, naming it; any other error, a
// failing compile among them, fails tb.
func Tool(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, exec.ErrNotFound) {
		Skipf(tb, "not installed: %v", err)
	}
	tb.Fatal(err)
}
