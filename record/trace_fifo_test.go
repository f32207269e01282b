package record

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO named as the trace file is not opened for writing: that would
// wait for a reader, holding up the traced process.
func TestTraceFIFOIsNotOpened(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "trace")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here: ", err)
	}
	done := make(chan bool, 1)
	go func() { done <- openTrace(fifo) == nil }()
	select {
	case refused := <-done:
		if !refused {
			t.Error("the FIFO was opened as the trace file")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a FIFO as the trace blocked")
	}
	if f := openTrace(filepath.Join(t.TempDir(), "trace.log")); f == nil {
		t.Error("a regular trace file was refused")
	} else {
		f.Close()
	}
}
