package record

import (
	"fmt"
	"os"
	"sync"
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

// Trace appends event to the trace file when EnvTrace is set. Failures are
// ignored: tracing must never disturb a recording.
func Trace(source, format string, args ...any) {
	traceOnce.Do(func() {
		if p := os.Getenv(EnvTrace); p != "" {
			traceFile, _ = os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
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
