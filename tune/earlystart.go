package tune

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"
)

// earlyExecutor starts a run's workers before its space is known. With
// Python proposing, the proposer's start-up and its open then overlap the
// workers' (a process and a CUDA context each) instead of coming before
// them. The workers need no space (OpenParams names the recording, not the
// points), and create nothing in the results directory when they open; their
// log is held until the run's log file exists.
type earlyExecutor struct {
	ex     *Executor
	log    *laterWriter
	done   chan error // Start's outcome; nil once taken or abandoned
	cancel context.CancelFunc
}

func startEarly(ctx context.Context, ro RunOptions, opts Options, t *target, trialTimeout time.Duration) *earlyExecutor {
	ctx, cancel := context.WithCancel(ctx)
	log := &laterWriter{}
	e := &earlyExecutor{ex: newExecutor(ro, opts, t, trialTimeout, log), log: log, done: make(chan error, 1), cancel: cancel}
	go func() { e.done <- e.ex.Start(ctx) }()
	return e
}

// take waits until the workers have opened and hands the executor over, its
// log going to w from now on (what it logged so far first). The error is
// Start's: the executor is then closed.
func (e *earlyExecutor) take(w io.Writer) (*Executor, error) {
	err := <-e.done
	e.done = nil
	e.log.attach(w)
	return e.ex, err
}

// abandon stops the workers of a run that ended before taking them, and
// releases the context of one that did (after its Close).
func (e *earlyExecutor) abandon() {
	e.cancel()
	if e.done == nil {
		return
	}
	if err := <-e.done; err == nil {
		e.ex.Close()
	}
	e.done = nil
}

// laterWriter holds what is written until attach names the writer.
type laterWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	w   io.Writer
}

func (l *laterWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		return l.w.Write(p)
	}
	return l.buf.Write(p)
}

func (l *laterWriter) attach(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = w.Write(l.buf.Bytes())
	l.buf = bytes.Buffer{}
	l.w = w
}
