package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/mneme-gpu/mneme/internal/safefile"
)

// keptOutput is how much of a run's standard output is kept for messages;
// the whole output is hashed.
const keptOutput = 64 << 10

// ExecRunner runs the application as a child process.
type ExecRunner struct {
	App  string
	Args []string
	// Env is the environment every run starts from (os.Environ() if nil).
	Env []string
	// StatsDir receives each run's launch-statistics file.
	StatsDir string
	// ReadStats reads a launch-statistics file into per-kernel times.
	ReadStats func(path string) (map[string]KernelTime, error)
	Stderr    io.Writer // the application's standard error (discarded if nil)
	// OutputFilter, when set, leaves the lines of standard output it matches
	// out of OutputHash: lines a program prints that change from run to run
	// (its own timings) would otherwise make every tuned run differ.
	OutputFilter *regexp.Regexp
	// OwnTimer, when set, reads the application's own timer from its output
	// (standard output and error): the number its first group matches, in
	// the last line it matches (Outcome.OwnTime).
	OwnTimer *regexp.Regexp
	runs     int
}

// keptStderr is how much of the end of a run's standard error is searched
// for its own timer.
const keptStderr = 64 << 10

// tailWriter keeps the last keptStderr bytes written to it.
type tailWriter struct{ buf []byte }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - keptStderr; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

// ownTime is the number timer's first group matches in the last line of
// outputs that it matches; 0 when none does or it is not a positive number.
func ownTime(timer *regexp.Regexp, outputs ...[]byte) float64 {
	found := 0.0
	for _, out := range outputs {
		for _, line := range bytes.Split(out, []byte{'\n'}) {
			m := timer.FindSubmatch(line)
			if len(m) < 2 {
				continue
			}
			if v, err := strconv.ParseFloat(string(m[1]), 64); err == nil && v > 0 && v < math.Inf(1) {
				found = v
			}
		}
	}
	return found
}

// Run starts the application once with env added and waits for it.
func (e *ExecRunner) Run(ctx context.Context, env []string) (Outcome, error) {
	e.runs++
	stats := filepath.Join(e.StatsDir, "launch-stats-"+strconv.Itoa(e.runs)+".json")
	cmd := exec.CommandContext(ctx, e.App, e.Args...)
	base := e.Env
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = append(append([]string(nil), base...), env...)
	// A run whose env sets the statistics file itself (empty: none, as the
	// application runs deployed) keeps that.
	if slices.ContainsFunc(env, func(v string) bool { return strings.HasPrefix(v, EnvLaunchStats+"=") }) {
		stats = ""
	} else {
		os.Remove(stats)
		cmd.Env = append(cmd.Env, EnvLaunchStats+"="+stats)
	}
	out := &hashingWriter{h: xxh3.New(), filter: e.OutputFilter}
	cmd.Stdout = out
	cmd.Stderr = e.Stderr
	var stderr tailWriter
	if e.OwnTimer != nil {
		if e.Stderr != nil {
			cmd.Stderr = io.MultiWriter(e.Stderr, &stderr)
		} else {
			cmd.Stderr = &stderr
		}
	}
	start := time.Now()
	err := cmd.Run()
	o := Outcome{Seconds: time.Since(start).Seconds(), OutputHash: out.Sum64(), Output: out.kept.Bytes()}
	if e.OwnTimer != nil {
		o.OwnTime = ownTime(e.OwnTimer, o.Output, stderr.buf)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		o.ExitCode = exit.ExitCode()
		if o.ExitCode < 0 {
			o.ExitCode = 128 // killed by a signal
		}
	case ctx.Err() != nil:
		return o, ctx.Err()
	default:
		return o, fmt.Errorf("running %s: %w", e.App, err)
	}
	if e.ReadStats != nil && stats != "" {
		if _, statErr := os.Lstat(stats); statErr == nil {
			k, err := e.ReadStats(stats)
			if err != nil {
				return o, fmt.Errorf("launch statistics of run %d: %w", e.runs, err)
			}
			o.Kernels = k
		}
	}
	return o, nil
}

// maxFilteredLine bounds the line a filtering hashingWriter holds while it
// waits for the line's end; a longer line is hashed whole, unfiltered (no
// timing line is that long).
const maxFilteredLine = 64 << 10

// hashingWriter hashes what is written to it and keeps its start. With a
// filter, it hashes line by line and skips the lines the filter matches,
// wherever the writes split them.
type hashingWriter struct {
	h      *xxh3.Hasher
	kept   bytes.Buffer
	filter *regexp.Regexp
	line   []byte // the current line's start, with a filter
	long   bool   // the current line outgrew maxFilteredLine: hashed as it comes
}

func (w *hashingWriter) Write(p []byte) (int, error) {
	if room := keptOutput - w.kept.Len(); room > 0 {
		w.kept.Write(p[:min(room, len(p))])
	}
	if w.filter == nil {
		w.h.Write(p)
		return len(p), nil
	}
	for rest := p; len(rest) > 0; {
		end := bytes.IndexByte(rest, '\n')
		chunk := rest
		if end >= 0 {
			chunk = rest[:end+1]
		}
		rest = rest[len(chunk):]
		switch {
		case w.long:
			w.h.Write(chunk)
		case len(w.line)+len(chunk) > maxFilteredLine:
			w.h.Write(w.line)
			w.h.Write(chunk)
			w.line, w.long = w.line[:0], true
		default:
			w.line = append(w.line, chunk...)
		}
		if end >= 0 {
			w.endLine()
		}
	}
	return len(p), nil
}

// endLine hashes the line held (unless the filter matches it) and starts
// the next one.
func (w *hashingWriter) endLine() {
	if !w.long && !w.filter.Match(bytes.TrimSuffix(w.line, []byte{'\n'})) {
		w.h.Write(w.line)
	}
	w.line, w.long = w.line[:0], false
}

// Sum64 is the hash of everything written, a last line without its newline
// included.
func (w *hashingWriter) Sum64() uint64 {
	if w.filter != nil && (len(w.line) > 0 || w.long) {
		w.endLine()
	}
	return w.h.Sum64()
}

// maxTunedFile bounds the tuned-kernels file read for subsets (the
// runtime's own limit).
const maxTunedFile = 256 << 20

// SubsetWriter writes tuned files holding some kernels of one tuned file,
// each entry as it stands there (fields this mneme does not know kept).
type SubsetWriter struct {
	Source string
	Dir    string
	n      int
}

// Write writes a tuned file with only kernels and returns its path.
func (s *SubsetWriter) Write(kernels []string) (string, error) {
	entries, err := ReadTunedEntries(s.Source)
	if err != nil {
		return "", err
	}
	keep := map[string]json.RawMessage{}
	for _, k := range kernels {
		e, ok := entries[k]
		if !ok {
			return "", fmt.Errorf("%s: no kernel %q", s.Source, k)
		}
		keep[k] = e
	}
	s.n++
	name := "tuned-subset-" + strconv.Itoa(s.n) + ".json"
	if err := WriteTunedEntries(s.Dir, name, keep); err != nil {
		return "", err
	}
	return filepath.Join(s.Dir, name), nil
}

// ReadTunedEntries reads a tuned-kernels file as its raw entries by kernel.
func ReadTunedEntries(path string) (map[string]json.RawMessage, error) {
	data, err := safefile.ReadFile(path, maxTunedFile)
	if err != nil {
		return nil, err
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("%s: not a tuned-kernels file (a JSON object keyed by kernel): %w", path, err)
	}
	return entries, nil
}

// WriteTunedEntries writes entries as dir/name, never through a link.
func WriteTunedEntries(dir, name string, entries map[string]json.RawMessage) error {
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	f, err := safefile.CreateIn(dir, name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
