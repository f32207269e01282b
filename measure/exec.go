package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	runs      int
}

// Run starts the application once with env added and waits for it.
func (e *ExecRunner) Run(ctx context.Context, env []string) (Outcome, error) {
	e.runs++
	stats := filepath.Join(e.StatsDir, "launch-stats-"+strconv.Itoa(e.runs)+".json")
	os.Remove(stats)
	cmd := exec.CommandContext(ctx, e.App, e.Args...)
	base := e.Env
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = append(append(append([]string(nil), base...), env...), EnvLaunchStats+"="+stats)
	out := &hashingWriter{h: xxh3.New()}
	cmd.Stdout = out
	cmd.Stderr = e.Stderr
	start := time.Now()
	err := cmd.Run()
	o := Outcome{Seconds: time.Since(start).Seconds(), OutputHash: out.h.Sum64(), Output: out.kept.Bytes()}
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
	if e.ReadStats != nil {
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

type hashingWriter struct {
	h    *xxh3.Hasher
	kept bytes.Buffer
}

func (w *hashingWriter) Write(p []byte) (int, error) {
	w.h.Write(p)
	if room := keptOutput - w.kept.Len(); room > 0 {
		w.kept.Write(p[:min(room, len(p))])
	}
	return len(p), nil
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
