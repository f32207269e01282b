package gputest

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// outcome records what a helper asked its test to do; Skip and Fatal stop
// the helper with a panic that run recovers, as the real ones stop the test.
type outcome struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (o *outcome) Helper() {}
func (o *outcome) Skip(args ...any) {
	o.skipped, o.msg = true, fmt.Sprint(args...)
	panic(o)
}
func (o *outcome) Fatal(args ...any) {
	o.failed, o.msg = true, fmt.Sprint(args...)
	panic(o)
}
func (o *outcome) Fatalf(format string, args ...any) {
	o.failed, o.msg = true, fmt.Sprintf(format, args...)
	panic(o)
}

func run(f func(tb testing.TB)) (o *outcome) {
	o = &outcome{}
	defer func() {
		if r := recover(); r != nil && r != o {
			panic(r)
		}
	}()
	f(o)
	return o
}

func TestSkipOnlyForWhatIsMissing(t *testing.T) {
	noDriver := fmt.Errorf("load libcuda.so.1: %w", mneme.ErrNoGPU)
	notFound := &exec.Error{Name: "clang++-22", Err: exec.ErrNotFound}
	compileFailed := errors.New("clang++-22: exit status 1: kernels.cu:3: error")
	for _, required := range []bool{false, true} {
		t.Run(fmt.Sprint("required=", required), func(t *testing.T) {
			t.Setenv(Env, map[bool]string{false: "", true: "1"}[required])
			for _, c := range []struct {
				name   string
				f      func(testing.TB)
				skips  bool // without MNEME_GPU_REQUIRED
				fails  bool // always
				reason string
			}{
				{"no error", func(tb testing.TB) { Need(tb, nil); Tool(tb, nil) }, false, false, ""},
				{"no driver", func(tb testing.TB) { Need(tb, noDriver) }, true, false, "no CUDA driver or GPU"},
				{"other CUDA error", func(tb testing.TB) { Need(tb, errors.New("CUDA_ERROR_OUT_OF_MEMORY")) }, false, true, "CUDA_ERROR_OUT_OF_MEMORY"},
				{"tool not installed", func(tb testing.TB) { Tool(tb, notFound) }, true, false, "clang++-22"},
				{"tool failed", func(tb testing.TB) { Tool(tb, compileFailed) }, false, true, "exit status 1"},
				{"named skip", func(tb testing.TB) { Skip(tb, "no CUPTI") }, true, false, "no CUPTI"},
			} {
				o := run(c.f)
				wantSkip := c.skips && !required
				wantFail := c.fails || c.skips && required
				if o.skipped != wantSkip || o.failed != wantFail || !strings.Contains(o.msg, c.reason) {
					t.Errorf("%s: skipped %v failed %v (%q), want skipped %v failed %v naming %q", c.name, o.skipped, o.failed, o.msg, wantSkip, wantFail, c.reason)
				}
				if required && c.skips && !strings.Contains(o.msg, Env) {
					t.Errorf("%s: failure %q does not say why a skip fails", c.name, o.msg)
				}
			}
		})
	}
}

func TestRequired(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "yes": true} {
		t.Setenv(Env, v)
		if Required() != want {
			t.Errorf("%s=%q: Required() = %v", Env, v, !want)
		}
	}
}
