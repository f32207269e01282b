package toolchain

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A response file that is a FIFO is refused at once, never read (a read
// would wait for a writer that never comes).
func TestResponseFileFIFOIsRefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "args")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here: ", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ExpandResponseFiles([]string{"-c", "@" + fifo})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), fifo) {
			t.Errorf("err = %v, want a refusal naming %s", err, fifo)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO response file blocked")
	}
}
