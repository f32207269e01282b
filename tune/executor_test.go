package tune

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
)

var testWorkerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tune-testworker")
	if err != nil {
		panic(err)
	}
	testWorkerBin = filepath.Join(dir, "testworker")
	out, err := exec.Command("go", "build", "-o", testWorkerBin, "./internal/testworker").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		panic("building the test worker: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func newTestExecutor(t *testing.T, env ...string) (*Executor, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "events.log")
	e := &Executor{
		Factory:      ExecWorkerFactory{Path: testWorkerBin, Env: append([]string{"TESTWORKER_LOG=" + logPath}, env...)},
		Open:         OpenParams{DB: "testdb", Iterations: 3, Warmup: 1},
		TrialTimeout: 1500 * time.Millisecond,
		OpenTimeout:  10 * time.Second,
	}
	return e, logPath
}

func job(id int, passes string, block uint32) Job {
	return Job{ID: id, Config: mneme.Config{Passes: passes, Block: mneme.Dim3{X: block, Y: 1, Z: 1}, Grid: mneme.Dim3{X: 1, Y: 1, Z: 1}}}
}

func collectResults(t *testing.T, e *Executor, n int) map[int]JobResult {
	t.Helper()
	got := map[int]JobResult{}
	deadline := time.After(60 * time.Second)
	for len(got) < n {
		select {
		case r := <-e.Results():
			if _, dup := got[r.Job.ID]; dup {
				t.Fatalf("job %d has two results", r.Job.ID)
			}
			got[r.Job.ID] = r
		case <-deadline:
			t.Fatalf("only %d of %d results arrived", len(got), n)
		}
	}
	select {
	case r := <-e.Results():
		t.Fatalf("an extra result arrived: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	return got
}

func TestExecutorSurvivesCrashesHangsAndNoise(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits seconds on trial timeouts (the sampler pass of scripts/mutate.sh runs -short)")
	}
	t.Parallel() // waits on timeouts, not the CPU
	e, logPath := newTestExecutor(t)
	e.WorkersPerGPU = 2
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if d, k := e.Device(); d == nil || d.Name != "test GPU" || k != "_Z4testv" {
		t.Fatalf("device %+v kernel %q", d, k)
	}
	jobs := []Job{
		job(0, "default<O3>", 64), job(1, "crash", 64), job(2, "default<O2>", 128),
		job(3, "hang", 64), job(4, "noise", 256), job(5, "fault", 64),
		job(6, "hang-child", 64), job(7, "compile-error", 64), job(8, "default<O3>", 512),
		job(9, "crash", 32), job(10, "default<O1>", 1024),
	}
	want := map[int]mneme.Status{0: "verified", 1: "crashed", 2: "verified", 3: "timeout", 4: "verified",
		5: "runtime_error", 6: "timeout", 7: "compile_error", 8: "verified", 9: "crashed", 10: "verified"}
	for _, j := range jobs {
		e.Submit(j)
	}
	got := collectResults(t, e, len(jobs))
	for id, status := range want {
		r := got[id]
		if r.Status != status {
			t.Errorf("job %d (%s): status %q (%s), want %q", id, jobs[id].Config.Passes, r.Status, r.Error, status)
		}
		if status == "verified" {
			if len(r.Result.ExecTime) != 3 || r.Result.ExecTime[0] != float64(jobs[id].Config.Block.X) {
				t.Errorf("job %d: exec times %v", id, r.Result.ExecTime)
			}
		}
	}
	if got[3].End.Sub(got[3].Start) > 5*time.Second {
		t.Errorf("the hung job took %s to be declared timed out", got[3].End.Sub(got[3].Start))
	}
	// The child of the hung worker died with its process group.
	data, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[1] == "child" {
			pid, _ := strconv.Atoi(f[2])
			deadline := time.Now().Add(3 * time.Second)
			for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if syscall.Kill(pid, 0) == nil && !isZombie(pid) {
				t.Errorf("child %d of the killed worker is still alive", pid)
			}
		}
	}
	// 2 initial workers + one restart per crash or timeout (4) + one after the fault.
	// The last restart opens its session after the last result: wait for it.
	opens := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		data, _ = os.ReadFile(logPath)
		if opens = strings.Count(string(data), " open "); opens >= 7 || time.Now().After(deadline) {
			break
		}
	}
	if opens != 7 {
		t.Errorf("%d worker opens, want 7 (2 + 5 restarts)", opens)
	}
}

// A run that leaves the worker's context unusable is answered (closing) and
// the worker exits: the next job must go to a restarted worker and verify,
// not be charged with the dying worker's exit.
func TestExecutorRestartsAfterClosingAnswer(t *testing.T) {
	e, logPath := newTestExecutor(t)
	e.WorkersPerGPU = 1
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	jobs := []Job{job(0, "fault", 64), job(1, "default<O3>", 128), job(2, "fault", 64), job(3, "default<O2>", 256)}
	for _, j := range jobs {
		e.Submit(j)
	}
	got := collectResults(t, e, len(jobs))
	for id, want := range []mneme.Status{"runtime_error", "verified", "runtime_error", "verified"} {
		if got[id].Status != want {
			t.Errorf("job %d (%s): status %q (%s), want %q", id, jobs[id].Config.Passes, got[id].Status, got[id].Error, want)
		}
	}
	data, _ := os.ReadFile(logPath)
	if opens := strings.Count(string(data), " open "); opens != 3 {
		t.Errorf("%d worker opens, want 3 (1 + a restart after each fault)", opens)
	}
}

// A result without a status is an internal error, and its message says why.
func TestExecutorRejectsResultWithoutStatus(t *testing.T) {
	e, _ := newTestExecutor(t)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.Submit(job(0, "no-status", 64))
	r := collectResults(t, e, 1)[0]
	if r.Status != mneme.StatusInternalError || !strings.Contains(r.Error, "has no status") {
		t.Errorf("status %q, error %q; want internal_error saying the result has no status", r.Status, r.Error)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] == "Z"
}

func TestExecutorCompileWorkersCompileAhead(t *testing.T) {
	e, logPath := newTestExecutor(t)
	e.CompileWorkers = 2
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	jobs := []Job{job(0, "default<O3>", 64), job(1, "compile-error", 128), job(2, "default<O2>", 256), job(3, "fault", 512)}
	for _, j := range jobs {
		e.Submit(j)
	}
	got := collectResults(t, e, len(jobs))
	e.Close()
	if got[0].Status != "verified" || got[1].Status != "compile_error" || got[2].Status != "verified" || got[3].Status != "runtime_error" {
		t.Fatalf("statuses: %v %v %v %v", got[0].Status, got[1].Status, got[2].Status, got[3].Status)
	}
	data, _ := os.ReadFile(logPath)
	log := string(data)
	for _, j := range jobs {
		c := "compile " + j.Config.Passes + " " + strconv.Itoa(int(j.Config.Block.X))
		r := "run " + j.Config.Passes + " " + strconv.Itoa(int(j.Config.Block.X))
		ci := strings.Index(log, c)
		ri := strings.Index(log, r)
		if ci < 0 {
			t.Errorf("job %d was not compiled by a compile worker", j.ID)
		}
		if j.Config.Passes == "compile-error" {
			if ri >= 0 {
				t.Errorf("a job that failed to compile was run")
			}
		} else if ri < ci {
			t.Errorf("job %d ran before it was compiled", j.ID)
		}
	}
	if !strings.Contains(log, "compile_only=true") {
		t.Error("no compile-only worker was opened")
	}
}

func TestExecutorOpenFailureIsReported(t *testing.T) {
	e, _ := newTestExecutor(t, "TESTWORKER_FAIL_OPEN=1")
	e.MaxOpenFailures = 2
	err := e.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no CUDA driver") {
		t.Fatalf("Start: %v, want the worker's open error", err)
	}
	if !errors.Is(err, mneme.ErrNoGPU) {
		t.Errorf("Start: %v does not match mneme.ErrNoGPU across the protocol", err)
	}
	// Another open failure is not mistaken for a missing GPU.
	e, _ = newTestExecutor(t, "TESTWORKER_FAIL_OPEN=db")
	e.MaxOpenFailures = 1
	if err := e.Start(context.Background()); err == nil || errors.Is(err, mneme.ErrNoGPU) || !strings.Contains(err.Error(), "no such database") {
		t.Errorf("Start with a bad database: %v", err)
	}
}

func TestExecutorSpreadsOverGPUs(t *testing.T) {
	t.Parallel() // waits on timeouts, not the CPU
	e, _ := newTestExecutor(t)
	e.GPUs = []int{0, 1}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range 8 {
		e.Submit(job(i, "slow:50", 64))
	}
	got := collectResults(t, e, 8)
	used := map[int]int{}
	for _, r := range got {
		if r.Status != "verified" || r.Result.GPUID != r.GPU {
			t.Fatalf("job %d: %s on gpu %d, result gpu %d", r.Job.ID, r.Status, r.GPU, r.Result.GPUID)
		}
		used[r.GPU]++
	}
	if used[0] == 0 || used[1] == 0 {
		t.Fatalf("jobs per GPU: %v", used)
	}
}

// Each run worker has its own id, 0..n-1 in GPU order, and keeps its GPU:
// results can be told apart by worker in the trial log.
func TestExecutorWorkersHaveDistinctIDsPerGPU(t *testing.T) {
	t.Parallel() // waits on timeouts, not the CPU
	e, _ := newTestExecutor(t)
	e.GPUs, e.WorkersPerGPU = []int{0, 1}, 2
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range 24 {
		e.Submit(job(i, "slow:30", 64))
	}
	gpuOf := map[int]int{}
	for _, r := range collectResults(t, e, 24) {
		if r.Worker < 0 || r.Worker > 3 {
			t.Fatalf("job %d ran on worker %d, want 0..3", r.Job.ID, r.Worker)
		}
		if g, seen := gpuOf[r.Worker]; seen && g != r.GPU {
			t.Fatalf("worker %d ran on GPUs %d and %d", r.Worker, g, r.GPU)
		}
		gpuOf[r.Worker] = r.GPU
		if want := r.Worker / 2; r.GPU != want {
			t.Errorf("worker %d ran on GPU %d, want %d (workers are numbered GPU by GPU)", r.Worker, r.GPU, want)
		}
	}
}

// Unset limits get their defaults; set ones are kept.
func TestExecutorDefaults(t *testing.T) {
	e := &Executor{Factory: ExecWorkerFactory{Path: testWorkerBin}, Open: OpenParams{DB: "testdb", Iterations: 1}}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if e.OpenTimeout != 2*time.Minute || e.CompileTimeout != 5*time.Minute || e.TrialTimeout != 10*time.Minute ||
		e.MaxOpenFailures != 3 || e.WorkersPerGPU != 1 || len(e.GPUs) != 1 || e.GPUs[0] != 0 {
		t.Errorf("defaults: open %v, compile %v, trial %v, open failures %d, workers per GPU %d, GPUs %v",
			e.OpenTimeout, e.CompileTimeout, e.TrialTimeout, e.MaxOpenFailures, e.WorkersPerGPU, e.GPUs)
	}
	kept := &Executor{Factory: ExecWorkerFactory{Path: testWorkerBin}, Open: OpenParams{DB: "testdb", Iterations: 1},
		OpenTimeout: time.Second, CompileTimeout: 2 * time.Second, TrialTimeout: 3 * time.Second, MaxOpenFailures: 1, WorkersPerGPU: 2, GPUs: []int{1}}
	if err := kept.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	kept.Close()
	if kept.OpenTimeout != time.Second || kept.CompileTimeout != 2*time.Second || kept.TrialTimeout != 3*time.Second || kept.MaxOpenFailures != 1 || kept.WorkersPerGPU != 2 {
		t.Errorf("set limits were changed: %+v", kept)
	}
}

func TestExecutorIsBrokenOnlyWhenEveryRunWorkerIs(t *testing.T) {
	// GPU 1 cannot open: its workers give up, GPU 0's carry the study.
	e, _ := newTestExecutor(t, "TESTWORKER_FAIL_OPEN_GPU=1")
	e.GPUs, e.WorkersPerGPU, e.MaxOpenFailures = []int{0, 1}, 2, 1
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("Start with one usable GPU of two: %v", err)
	}
	if err := e.Err(); err != nil {
		t.Errorf("half the run workers gave up, and the executor says %v", err)
	}
	e.Close()
	// Every run worker gives up: the executor says so, for the study to stop.
	e, _ = newTestExecutor(t, "TESTWORKER_FAIL_OPEN=db")
	e.GPUs, e.WorkersPerGPU, e.MaxOpenFailures = []int{0, 1}, 2, 1
	if err := e.Start(context.Background()); err == nil {
		t.Fatal("Start with no usable worker succeeded")
	}
	if err := e.Err(); !allWorkersBroken(err) {
		t.Errorf("every run worker gave up, and the executor says %v", err)
	}
}

func TestExecutorCapacityCountsEveryWorker(t *testing.T) {
	e := &Executor{GPUs: []int{0, 1, 2}, WorkersPerGPU: 3, CompileWorkers: 2}
	if got := e.Capacity(); got != 11 {
		t.Errorf("3 GPUs x 3 workers + 2 compile workers: capacity %d, want 11", got)
	}
}
