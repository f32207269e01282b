package tune

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/mneme-gpu/mneme"
)

// WorkerFactory makes the command of one worker process. The executor starts
// it in its own process group with stdin and stdout as the protocol pipes.
type WorkerFactory interface {
	Command(gpu int, compileOnly bool) (*exec.Cmd, error)
}

// ExecWorkerFactory runs `Path Args...` — for mneme, the binary itself with
// "worker". The GPU and the compile-only role travel in the open request.
type ExecWorkerFactory struct {
	Path string
	Args []string
	Env  []string // added to the current environment
}

// Command implements WorkerFactory.
func (f ExecWorkerFactory) Command(gpu int, compileOnly bool) (*exec.Cmd, error) {
	if f.Path == "" {
		return nil, errors.New("worker factory: no executable")
	}
	cmd := exec.Command(f.Path, f.Args...)
	if len(f.Env) > 0 {
		cmd.Env = append(cmd.Environ(), f.Env...)
	}
	return cmd, nil
}

// Job is one configuration to compile and run.
type Job struct {
	ID     int
	Config mneme.Config
}

// JobResult is what became of a job. Status is the result's status, or
// crashed / timeout when the worker died or was killed.
type JobResult struct {
	Job     Job
	Result  mneme.Result
	Status  mneme.Status
	Error   string
	Worker  int
	GPU     int
	Start   time.Time
	End     time.Time
	Crashes int // worker restarts this job caused
	// Instances are the figures of each instance, for a job run across
	// several (instanceExec).
	Instances []InstanceFigure
	// VariantCostNS is what the configuration's variants beyond one add to
	// the total across instances (their first launches); 0 otherwise.
	VariantCostNS float64
}

// Executor runs jobs on worker processes: run workers (WorkersPerGPU for
// each GPU) and, optionally, compile-only workers that compile upcoming jobs
// into the shared JIT cache while the GPUs run earlier ones.
type Executor struct {
	Factory        WorkerFactory
	Open           OpenParams // GPU and CompileOnly are set per worker
	GPUs           []int
	WorkersPerGPU  int
	CompileWorkers int
	// TrialTimeout bounds one run request; CompileTimeout one compile
	// request; OpenTimeout the open of a (re)started worker.
	TrialTimeout   time.Duration
	CompileTimeout time.Duration
	OpenTimeout    time.Duration
	// MaxOpenFailures in a row make a worker give up (default 3).
	MaxOpenFailures int
	// Log receives the workers' stderr and the executor's notes.
	Log io.Writer

	mu       sync.Mutex
	logMu    sync.Mutex
	runQ     chan Job
	compileQ chan Job
	results  chan JobResult
	wg       sync.WaitGroup
	cancel   context.CancelFunc
	fatal    error
	// brokenRun counts run workers that could not be restarted.
	brokenRun int
	fatalMu   sync.Mutex
	devices   *mneme.DeviceLimits
	kernel    string
}

// Start launches and opens every worker. It fails when no run worker can
// open (the first error is returned); workers that open later keep going.
func (e *Executor) Start(ctx context.Context) error {
	if e.Factory == nil {
		return errors.New("executor: no worker factory")
	}
	if len(e.GPUs) == 0 {
		e.GPUs = []int{0}
	}
	if e.WorkersPerGPU < 1 {
		e.WorkersPerGPU = 1
	}
	if e.OpenTimeout <= 0 {
		e.OpenTimeout = 2 * time.Minute
	}
	if e.CompileTimeout <= 0 {
		e.CompileTimeout = 5 * time.Minute
	}
	if e.TrialTimeout <= 0 {
		e.TrialTimeout = 10 * time.Minute
	}
	if e.MaxOpenFailures <= 0 {
		e.MaxOpenFailures = 3
	}
	if e.Log == nil {
		e.Log = io.Discard
	}
	ctx, e.cancel = context.WithCancel(ctx)
	n := len(e.GPUs) * e.WorkersPerGPU
	e.runQ = make(chan Job, 1<<16)
	e.compileQ = make(chan Job, 1<<16)
	e.results = make(chan JobResult, 1<<16)
	opened := make(chan openOutcome, n+e.CompileWorkers)
	id := 0
	for _, gpu := range e.GPUs {
		for range e.WorkersPerGPU {
			w := &worker{ex: e, id: id, gpu: gpu}
			id++
			e.wg.Add(1)
			go w.loop(ctx, e.runQ, opened)
		}
	}
	for i := range e.CompileWorkers {
		w := &worker{ex: e, id: id, gpu: e.GPUs[i%len(e.GPUs)], compileOnly: true}
		id++
		e.wg.Add(1)
		go w.loop(ctx, e.compileQ, opened)
	}
	// Compile workers need no GPU; without one open run worker nothing can run.
	var runErr error
	runOK := 0
	for range n + e.CompileWorkers {
		o := <-opened
		switch {
		case o.err != nil && !o.compileOnly && runErr == nil:
			runErr = o.err
		case o.err == nil && !o.compileOnly:
			runOK++
		}
	}
	if runOK == 0 {
		e.Close()
		return runErr
	}
	return nil
}

// Device is what the first worker reported of its GPU (nil before Start or
// with compile-only workers alone).
func (e *Executor) Device() (*mneme.DeviceLimits, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.devices, e.kernel
}

// Capacity is how many jobs should be in flight to keep every worker busy:
// one per run worker plus one per compile worker ahead of them.
func (e *Executor) Capacity() int {
	return len(e.GPUs)*e.WorkersPerGPU + e.CompileWorkers
}

// Submit queues a job; its result comes on Results.
func (e *Executor) Submit(j Job) {
	if e.CompileWorkers > 0 {
		e.compileQ <- j
	} else {
		e.runQ <- j
	}
}

// Results delivers one JobResult per submitted job.
func (e *Executor) Results() <-chan JobResult { return e.results }

// Err is the error that stopped every worker, if any.
func (e *Executor) Err() error {
	e.fatalMu.Lock()
	defer e.fatalMu.Unlock()
	return e.fatal
}

// Close stops the workers (close request, then kill) and waits for them.
func (e *Executor) Close() {
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
}

func (e *Executor) logf(format string, a ...any) {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	fmt.Fprintf(e.Log, time.Now().Format("15:04:05.000")+" "+format+"\n", a...)
}

type openOutcome struct {
	err         error
	compileOnly bool
}

// worker is one process slot: it (re)starts its process as needed.
type worker struct {
	ex          *Executor
	id, gpu     int
	compileOnly bool

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	done   chan struct{} // closed when the process has exited
	nextID int64
}

func (w *worker) role() string {
	if w.compileOnly {
		return "compile worker"
	}
	return "worker"
}

// loop serves jobs from q until ctx ends. A worker that cannot open after
// MaxOpenFailures attempts answers its remaining jobs with internal_error
// rather than dropping them.
func (w *worker) loop(ctx context.Context, q chan Job, opened chan<- openOutcome) {
	defer w.ex.wg.Done()
	defer w.stop()
	err := w.startOpen(ctx)
	opened <- openOutcome{err: err, compileOnly: w.compileOnly}
	broken := err
	if err != nil {
		w.markBroken(err)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-q:
			if broken != nil {
				if w.compileOnly {
					w.ex.runQ <- j // let the run workers compile it themselves
					continue
				}
				now := time.Now()
				w.ex.results <- JobResult{Job: j, Status: mneme.StatusInternalError, Error: broken.Error(), Worker: w.id, GPU: w.gpu, Start: now, End: now}
				continue
			}
			res, forward := w.do(ctx, j)
			if forward {
				w.ex.runQ <- j
			} else {
				w.ex.results <- res
			}
			if w.cmd == nil && ctx.Err() == nil {
				// The process died with this job: restart it for the next one.
				if err := w.startOpen(ctx); err != nil {
					broken = err
					w.markBroken(err)
				}
			}
		}
	}
}

// markBroken records a worker that gave up; when every run worker has, the
// executor's Err says so and the study stops.
func (w *worker) markBroken(err error) {
	w.ex.logf("%s %d (gpu %d) gave up: %v", w.role(), w.id, w.gpu, err)
	if w.compileOnly {
		return
	}
	w.ex.fatalMu.Lock()
	defer w.ex.fatalMu.Unlock()
	w.ex.brokenRun++
	if w.ex.brokenRun == len(w.ex.GPUs)*w.ex.WorkersPerGPU {
		w.ex.fatal = fmt.Errorf("%w: %v", errAllBroken, err)
	}
}

// do runs one job; forward reports a compile that succeeded and now needs a
// run worker.
func (w *worker) do(ctx context.Context, j Job) (JobResult, bool) {
	res := JobResult{Job: j, Worker: w.id, GPU: w.gpu, Start: time.Now()}
	op, timeout := OpRun, w.ex.TrialTimeout
	if w.compileOnly {
		op, timeout = OpCompile, w.ex.CompileTimeout
	}
	cfg := j.Config
	resp, err := w.call(ctx, Request{Op: op, Config: &cfg}, timeout)
	res.End = time.Now()
	switch {
	case errors.Is(err, errTimeout):
		res.Status, res.Error = mneme.StatusTimeout, fmt.Sprintf("%s did not answer within %s; killed", op, timeout)
		res.Crashes = 1
	case err != nil:
		res.Status, res.Error = mneme.StatusCrashed, fmt.Sprintf("%s: %v", op, err)
		res.Crashes = 1
	case !resp.OK || resp.Result == nil:
		res.Status, res.Error = mneme.StatusInternalError, fmt.Sprintf("%s: %s", op, resp.Error)
	default:
		if resp.Closing {
			// The worker exits after this answer: let it go now so the next
			// job goes to a restarted worker, not to a dying one.
			w.stop()
		}
		res.Result = *resp.Result
		res.Status, res.Error = resp.Result.Status, resp.Result.Error
		if res.Status == "" {
			res.Status = mneme.StatusInternalError
			res.Error = op + ": the worker's result has no status"
		}
	}
	if res.Crashes > 0 {
		w.ex.logf("%s %d (gpu %d): job %d: %s", w.role(), w.id, w.gpu, j.ID, res.Error)
	}
	if w.compileOnly && res.Status == mneme.StatusVerified {
		return res, true
	}
	return res, false
}

var errTimeout = errors.New("timeout")

// startOpen starts the process and opens the session, retrying up to
// MaxOpenFailures times.
func (w *worker) startOpen(ctx context.Context) error {
	var last error
	for attempt := 1; attempt <= w.ex.MaxOpenFailures; attempt++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		last = w.tryStartOpen(ctx)
		if last == nil {
			return nil
		}
		w.ex.logf("%s %d (gpu %d): start attempt %d: %v", w.role(), w.id, w.gpu, attempt, last)
		w.stop()
	}
	return fmt.Errorf("%s %d (gpu %d) could not start: %w", w.role(), w.id, w.gpu, last)
}

func (w *worker) tryStartOpen(ctx context.Context) error {
	cmd, err := w.ex.Factory.Command(w.gpu, w.compileOnly)
	if err != nil {
		return err
	}
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = &prefixWriter{ex: w.ex, prefix: fmt.Sprintf("%s %d: ", w.role(), w.id)}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	w.cmd, w.stdin = cmd, stdin
	w.lines = make(chan []byte, 4)
	w.done = make(chan struct{})
	lines, done := w.lines, w.done
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), maxLine)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(lines)
		_ = cmd.Wait()
		close(done)
	}()
	p := w.ex.Open
	p.GPU, p.CompileOnly = w.gpu, w.compileOnly
	resp, err := w.call(ctx, Request{Op: OpOpen, Open: &p}, w.ex.OpenTimeout)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if !resp.OK {
		if resp.NoGPU {
			return fmt.Errorf("%w: %s", mneme.ErrNoGPU, resp.Error)
		}
		return fmt.Errorf("%s", resp.Error)
	}
	if !w.compileOnly {
		w.ex.mu.Lock()
		if w.ex.devices == nil {
			w.ex.devices, w.ex.kernel = resp.Device, resp.Kernel
		}
		w.ex.mu.Unlock()
	}
	return nil
}

// call sends one request and waits for its response. On timeout, a dead
// process or a broken pipe the process group is killed and w.cmd cleared.
func (w *worker) call(ctx context.Context, req Request, timeout time.Duration) (Response, error) {
	if w.cmd == nil {
		return Response{}, errors.New("worker is not running")
	}
	w.nextID++
	req.ID = w.nextID
	b, _ := json.Marshal(req)
	if _, err := w.stdin.Write(append(b, '\n')); err != nil {
		w.stop()
		return Response{}, fmt.Errorf("worker exited (%v)", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			w.stop()
			return Response{}, ctx.Err()
		case <-timer.C:
			w.stop()
			return Response{}, errTimeout
		case line, ok := <-w.lines:
			if !ok {
				status := w.exitStatus()
				w.stop()
				return Response{}, fmt.Errorf("worker exited (%s)", status)
			}
			var resp Response
			if err := json.Unmarshal(line, &resp); err != nil {
				w.ex.logf("%s %d: not a protocol line, ignored: %.200s", w.role(), w.id, line)
				continue
			}
			if resp.ID != req.ID {
				w.ex.logf("%s %d: answer to request %d while waiting for %d, ignored", w.role(), w.id, resp.ID, req.ID)
				continue
			}
			return resp, nil
		}
	}
}

func (w *worker) exitStatus() string {
	select {
	case <-w.done:
		if st := w.cmd.ProcessState; st != nil {
			return st.String()
		}
	case <-time.After(2 * time.Second):
	}
	return "stdout closed"
}

// stop ends the process: a polite close when it is healthy, then SIGKILL to
// its whole process group (a kernel hung in a child dies with it).
func (w *worker) stop() {
	if w.cmd == nil {
		return
	}
	select {
	case <-w.done:
	default:
		_ = w.stdin.Close()
		select {
		case <-w.done:
		case <-time.After(200 * time.Millisecond):
		}
	}
	killProcessGroup(w.cmd)
	<-w.done
	w.cmd = nil
}

// prefixWriter copies a worker's stderr into the log, line by line.
type prefixWriter struct {
	ex     *Executor
	prefix string
	buf    []byte
	mu     sync.Mutex
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.ex.logf("%s%s", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
