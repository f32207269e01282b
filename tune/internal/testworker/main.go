// Command testworker is a real worker process for the executor's tests: it
// speaks the worker protocol through tune.Serve and, depending on the
// configuration's pipeline text, answers, fails, crashes or hangs, so the
// executor's process management is exercised without a GPU.
//
// Pipeline texts: "crash" exits mid-request; "hang" never answers; "hang-child"
// starts a child process and never answers (the kill must reach the child);
// "noise" writes a non-protocol line before answering; "fault" answers
// runtime_error marked closing, then exits 4 (a sticky CUDA error);
// "compile-error" fails compile and run with compile_error; "slow:MS" sleeps
// MS milliseconds then answers; "no-status" answers a result without a
// status. Anything else verifies with exec times of block.x nanoseconds.
//
// The application's own code (Config.Original) runs half a nanosecond faster
// than any recompiled configuration of the same block.
//
// Environment: TESTWORKER_LOG appends one line per event (open, compile, run)
// to that file; TESTWORKER_FAIL_OPEN=1 makes every open fail;
// TESTWORKER_FAIL_OPEN_GPU=N makes the run workers' opens on GPU N fail;
// TESTWORKER_INVALID_BLOCK=N makes runs with block.x N end invalid_launch;
// TESTWORKER_ONLY_BLOCK=N makes runs with another block.x fail verification,
// as a kernel written for one block shape does; TESTWORKER_THREADS=N makes
// runs of more than N threads in x end runtime_error, as a kernel with an
// unguarded index does; TESTWORKER_SHAPE_TIMES=1 times a launch by how far
// its block.x is from 128 (launches of up to 1024 threads) or 512 (larger
// ones); TESTWORKER_LARGE_FAILS_BLOCK=N makes runs with block.x N of more
// than 1024 threads end runtime_error.
package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/tune"
)

type session struct {
	params tune.OpenParams
	broken bool // a "fault" run left the (pretend) CUDA context unusable
}

// Unusable is true after a fault, as for the replay worker: Serve marks the
// answer closing and the process exits 4.
func (s *session) Unusable() bool { return s.broken }

func logEvent(format string, a ...any) {
	path := os.Getenv("TESTWORKER_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%d %s\n", os.Getpid(), fmt.Sprintf(format, a...))
}

func (s *session) Open(p tune.OpenParams) (tune.OpenInfo, error) {
	if g, err := strconv.Atoi(os.Getenv("TESTWORKER_FAIL_OPEN_GPU")); err == nil && p.GPU == g && !p.CompileOnly {
		return tune.OpenInfo{}, fmt.Errorf("GPU %d is unusable (test worker told to fail)", g)
	}
	switch os.Getenv("TESTWORKER_FAIL_OPEN") {
	case "1":
		return tune.OpenInfo{}, fmt.Errorf("%w: no CUDA driver found (test worker told to fail)", mneme.ErrNoGPU)
	case "db":
		return tune.OpenInfo{}, fmt.Errorf("open %s: no such database (test worker told to fail)", p.DB)
	}
	s.params = p
	logEvent("open gpu=%d compile_only=%v", p.GPU, p.CompileOnly)
	info := tune.OpenInfo{Kernel: "_Z4testv"}
	if !p.CompileOnly {
		info.Device = &mneme.DeviceLimits{Name: "test GPU", Arch: "sm_90", SMCount: 4, MaxThreadsPerBlock: 1024, MaxSharedMemPerBlock: 48 << 10, RegsPerSM: 65536, WarpSize: 32}
	}
	return info, nil
}

func (s *session) behave(c mneme.Config, op string) (mneme.Result, bool) {
	switch {
	case c.Passes == "crash":
		os.Exit(3)
	case c.Passes == "hang":
		time.Sleep(time.Hour) // a blocked select would be a Go deadlock exit, not a hang
	case c.Passes == "hang-child":
		child := exec.Command("sleep", "1000")
		if err := child.Start(); err == nil {
			logEvent("child %d", child.Process.Pid)
		}
		time.Sleep(time.Hour) // a blocked select would be a Go deadlock exit, not a hang
	case c.Passes == "noise":
		fmt.Println("this line is not part of the protocol")
	case c.Passes == "fault":
		if op == tune.OpRun {
			s.broken = true
			return mneme.Result{Status: mneme.StatusRuntimeError, Failed: true, Error: "CUDA_ERROR_ILLEGAL_ADDRESS"}, true
		}
	case c.Passes == "compile-error":
		return mneme.Result{Status: mneme.StatusCompileError, Failed: true, Error: "invalid pipeline"}, true
	case c.Passes == "no-status":
		return mneme.Result{Error: "the answer lacks a status"}, true
	case strings.HasPrefix(c.Passes, "slow:"):
		ms, _ := strconv.Atoi(strings.TrimPrefix(c.Passes, "slow:"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	return mneme.Result{}, false
}

func (s *session) Compile(c mneme.Config) mneme.Result {
	logEvent("compile %s %d", c.Passes, c.Block.X)
	if r, done := s.behave(c, tune.OpCompile); done {
		return r
	}
	return mneme.Result{Status: mneme.StatusVerified, GPUID: s.params.GPU}
}

func (s *session) Run(c mneme.Config) mneme.Result {
	logEvent("run %s %d gpu=%d", c.Passes, c.Block.X, s.params.GPU)
	if r, done := s.behave(c, tune.OpRun); done {
		return r
	}
	if n, err := strconv.Atoi(os.Getenv("TESTWORKER_INVALID_BLOCK")); err == nil && c.Block.X == uint32(n) {
		return mneme.Result{Status: mneme.StatusInvalidLaunch, Failed: true, Error: "CUDA_ERROR_INVALID_VALUE (test worker told to fail this block)"}
	}
	if n, err := strconv.Atoi(os.Getenv("TESTWORKER_THREADS")); err == nil && uint64(c.Grid.X)*uint64(c.Block.X) > uint64(n) {
		// A kernel with an unguarded index: threads past the data fault.
		return mneme.Result{Status: mneme.StatusRuntimeError, Failed: true, Error: "CUDA_ERROR_ILLEGAL_ADDRESS (test worker: more threads than the data)"}
	}
	if n, err := strconv.Atoi(os.Getenv("TESTWORKER_ONLY_BLOCK")); err == nil && c.Block.X != uint32(n) {
		return mneme.Result{Status: mneme.StatusFailedVerification, Executed: true, Failed: true, Error: "output differs (test worker verifies one block only)"}
	}
	threads := uint64(c.Grid.X) * uint64(c.Block.X)
	if n, err := strconv.Atoi(os.Getenv("TESTWORKER_LARGE_FAILS_BLOCK")); err == nil && c.Block.X == uint32(n) && threads > 1024 {
		return mneme.Result{Status: mneme.StatusRuntimeError, Failed: true, Error: "CUDA_ERROR_ILLEGAL_ADDRESS (test worker: this block fails on large launches)"}
	}
	times := make([]float64, s.params.Iterations)
	for i := range times {
		times[i] = float64(c.Block.X) + float64(i)
		if os.Getenv("TESTWORKER_SHAPE_TIMES") != "" {
			// Small launches run best with 128-thread blocks, large ones
			// with 512.
			best := 128.0
			if threads > 1024 {
				best = 512
			}
			times[i] = math.Abs(float64(c.Block.X)-best) + 10 + float64(i)
		}
		if c.Original {
			times[i] -= 0.5
		}
	}
	return mneme.Result{Status: mneme.StatusVerified, Verified: true, Executed: true, ExecTime: times, GPUID: s.params.GPU, GPUName: "test GPU"}
}

func (s *session) Close() error { logEvent("close"); return nil }

func main() {
	err := tune.Serve(os.Stdin, os.Stdout, &session{})
	if errors.Is(err, tune.ErrSessionUnusable) {
		os.Exit(4)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testworker:", err)
		os.Exit(1)
	}
}
