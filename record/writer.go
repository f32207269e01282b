package record

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/mneme-gpu/mneme/db"
)

// backgroundWriter writes shadowed snapshots (host- or device-side copies
// of the chunks a snapshot stores) while the application goes on: one goroutine,
// jobs in the order they were planned, so a file is always written after
// the files its references point into. The recorder adds an instance to its
// kernel file only once both its snapshots are written (collect), so the
// database is valid at every moment, whatever happens to the application.
type backgroundWriter struct {
	dir string

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*writeJob
	busy    bool // the goroutine holds a job
	started bool
	done    []*writeJob      // finished since the last collect
	failed  map[string]error // files that could not be written
	// freeing counts the shadows of written jobs still being freed: off
	// the writer's path, since freeing device memory waits for the device
	// to be idle (for the application's queued launches) and unmapping
	// gigabytes of host memory takes tens of milliseconds.
	freeing sync.WaitGroup
}

// writeJob is one snapshot to write: its chunks to store from a shadow
// copy, or none (zeros and references only, shadow nil).
type writeJob struct {
	plan   *snapshotPlan
	shadow Shadow
	opts   db.SnapshotOptions
	// Results, set by the writer.
	size    int64
	stats   CopyStats
	seconds float64
	err     error
}

func newBackgroundWriter(dir string) *backgroundWriter {
	w := &backgroundWriter{dir: dir, failed: map[string]error{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// add queues a job.
func (w *backgroundWriter) add(j *writeJob) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, j)
	if !w.started {
		w.started = true
		go w.run()
	}
	w.cond.Broadcast()
}

func (w *backgroundWriter) run() {
	// CUDA calls of the drain need a thread; keep one for the goroutine's life.
	runtime.LockOSThread()
	w.mu.Lock()
	for {
		for len(w.queue) == 0 {
			w.cond.Wait()
		}
		j := w.queue[0]
		w.queue = w.queue[1:]
		w.busy = true
		j.err = w.failedReferenceLocked(j.plan.refs)
		w.mu.Unlock()
		if j.err == nil {
			start := time.Now()
			stage := func() (Staging, error) {
				if j.shadow == nil {
					return nil, errors.New("a snapshot with chunks to copy was queued without a shadow copy")
				}
				return j.shadow.Stage()
			}
			Trace("runtime", "background %s begin", j.plan.name)
			j.size, j.stats, j.err = writePlan(stage, w.dir, j.plan, j.opts)
			j.seconds = time.Since(start).Seconds()
			Trace("runtime", "background %s end: %d bytes copied (%.3f s on the bus), %d written in %.3f s",
				j.plan.name, j.stats.Bytes, j.stats.TransferSeconds, j.size, j.seconds)
		}
		if j.shadow != nil {
			w.freeing.Add(1)
			go func(sh Shadow) {
				defer w.freeing.Done()
				// Device memory is freed from a thread bound to the
				// application's context, like the writer's.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				sh.Free()
			}(j.shadow)
		}
		w.mu.Lock()
		if j.err != nil {
			w.failed[j.plan.name] = j.err
		}
		w.done = append(w.done, j)
		w.busy = false
		w.cond.Broadcast()
	}
}

// failedReference says why a file referencing these files cannot be read:
// one of them could not be written.
func (w *backgroundWriter) failedReference(files map[string]bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failedReferenceLocked(files)
}

func (w *backgroundWriter) failedReferenceLocked(files map[string]bool) error {
	for f := range files {
		if err := w.failed[f]; err != nil {
			return fmt.Errorf("it references %s, which could not be written: %w", f, err)
		}
	}
	return nil
}

// idleLocked reports whether every job is written; w.mu is held.
func (w *backgroundWriter) idleLocked() bool { return len(w.queue) == 0 && !w.busy }

// wait blocks until every queued job is written and its shadow freed.
func (w *backgroundWriter) wait() {
	w.mu.Lock()
	for !w.idleLocked() {
		w.cond.Wait()
	}
	w.mu.Unlock()
	w.freeing.Wait()
}

// take returns the jobs finished since the last call.
func (w *backgroundWriter) take() []*writeJob {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.done
	w.done = nil
	return d
}
