package record

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme/db"
)

// blockingShadow is a Shadow whose Free waits until release is closed, as
// freeing device memory waits for the device to be idle.
type blockingShadow struct {
	release chan struct{}
	freed   chan struct{}
}

func (s *blockingShadow) Stage() (Staging, error) { return HeldStaging(nil, CopyStats{}), nil }
func (s *blockingShadow) Free() {
	<-s.release
	close(s.freed)
}

// The writer goes on to the next job while a written job's shadow is still
// being freed, and wait returns only once every shadow is freed: a failed
// allocation waits for the writer and then expects the shadows' memory back.
func TestWriterFreesShadowsOffItsPathAndWaitWaitsForThem(t *testing.T) {
	dir := t.TempDir()
	w := newBackgroundWriter(dir)
	sh := &blockingShadow{release: make(chan struct{}), freed: make(chan struct{})}
	plan := func(name string) *snapshotPlan {
		return &snapshotPlan{name: name, skel: &db.Snapshot{}, refs: map[string]bool{}}
	}
	w.add(&writeJob{plan: plan("first.mneme"), shadow: sh, opts: db.SnapshotOptions{NoSync: true}})
	w.add(&writeJob{plan: plan("second.mneme"), opts: db.SnapshotOptions{NoSync: true}})
	// The second file is written while the first job's shadow is still held.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "second.mneme")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer did not go on to the next job while a shadow was being freed")
		}
		time.Sleep(time.Millisecond)
	}
	waited := make(chan struct{})
	go func() {
		w.wait()
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("wait returned while a shadow was still being freed")
	case <-time.After(50 * time.Millisecond):
	}
	close(sh.release)
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("wait did not return once the shadow was freed")
	}
	select {
	case <-sh.freed:
	default:
		t.Error("wait returned before Free finished")
	}
	if got := len(w.take()); got != 2 {
		t.Errorf("%d jobs finished, want 2", got)
	}
}
