package record

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// EnvTrace names a file to which `mneme record`, the runtime library and the
// shim append one line per step of a recording ("UNIX_NS PID SOURCE EVENT"):
// where a recording's time goes, seen from the outside. Unset, tracing costs
// one check per step.
const EnvTrace = "MNEME_TRACE"

var (
	traceOnce sync.Once
	traceFile *os.File
	traceMu   sync.Mutex
)

// openTrace opens the trace file for appending without blocking, and only
// when it is a regular file: a FIFO or a device named as the trace would
// otherwise hold up (or reach into) the process that traces.
func openTrace(path string) *os.File {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil
	}
	return f
}

// Trace appends event to the trace file when EnvTrace is set. Failures are
// ignored: tracing must never disturb a recording.
func Trace(source, format string, args ...any) {
	traceOnce.Do(func() {
		if p := os.Getenv(EnvTrace); p != "" {
			traceFile = openTrace(p)
		}
	})
	if traceFile == nil {
		return
	}
	line := fmt.Sprintf("%d %d %s %s\n", time.Now().UnixNano(), os.Getpid(), source, fmt.Sprintf(format, args...))
	traceMu.Lock()
	traceFile.WriteString(line)
	traceMu.Unlock()
}
