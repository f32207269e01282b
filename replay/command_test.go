package replay

import (
	"errors"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
)

func TestRunJobRejectsBadInputBeforeAnyGPUWork(t *testing.T) {
	dir, _ := hostDB(t, vecaddLaunch(1000), vecaddHost)
	o3 := mneme.Config{Passes: mneme.DefaultPipeline}
	for _, c := range []struct {
		name string
		job  Job
	}{
		{"invalid pipeline", Job{Options: Options{DB: dir}, Config: mneme.Config{Passes: "default<O7>"}}},
		{"missing database", Job{Options: Options{DB: dir + "/nonexistent.json"}, Config: o3}},
		{"unknown instance", Job{Options: Options{DB: dir, Instance: "0123abc"}, Config: o3}},
		{"bad timer", Job{Options: Options{DB: dir, Timer: "sundial"}, Config: o3}},
	} {
		rep, err := RunJob(c.job)
		var ie *InputError
		if !errors.As(err, &ie) || rep != nil {
			t.Errorf("%s: got report %v, error %v; want no report and an InputError", c.name, rep, err)
		}
	}
}

func TestRunJobWithoutGPUMatchesErrNoGPU(t *testing.T) {
	if cuda.Init() == nil {
		t.Skip("a CUDA driver is present; this test covers machines without a usable GPU")
	}
	dir, _ := hostDB(t, vecaddLaunch(1000), vecaddHost)
	rep, err := RunJob(Job{Options: Options{DB: dir}, Config: mneme.Config{Passes: mneme.DefaultPipeline}})
	if rep != nil || !errors.Is(err, mneme.ErrNoGPU) || !cuda.IsNoGPU(err) {
		t.Fatalf("got report %v, error %v; want no report and a no-GPU error", rep, err)
	}
}

func TestStatusErrorSaysWhy(t *testing.T) {
	for _, c := range []struct {
		res  mneme.Result
		want string
	}{
		{mneme.Result{Status: mneme.StatusFailedVerification, Mismatch: "3 of 1000 floats differ"}, "verification failed: 3 of 1000 floats differ"},
		{mneme.Result{Status: mneme.StatusCompileError, Error: "optimize: unknown pass"}, "optimize: unknown pass"},
		{mneme.Result{Status: mneme.StatusRuntimeError, Error: "CUDA_ERROR_ILLEGAL_ADDRESS"}, "runtime_error: CUDA_ERROR_ILLEGAL_ADDRESS"},
	} {
		if got := (&StatusError{Result: &c.res}).Error(); got != c.want {
			t.Errorf("%s: %q, want %q", c.res.Status, got, c.want)
		}
	}
}
