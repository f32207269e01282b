package db

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that a reader sees either the
// old file or the complete new one: write a temporary file in the same
// directory, fsync it, rename it over path, fsync the directory.
func WriteFileAtomic(path string, data []byte) error {
	_, err := writeAtomic(path, true, writeAll(data))
	return err
}

// ReplaceFile replaces path with data like WriteFileAtomic but without the
// fsyncs: readers still see the old or the complete new file, and the file
// survives the death of the writing process, not of the machine. The
// recorder uses it because an fsync per file can cost more than a snapshot.
func ReplaceFile(path string, data []byte) error {
	_, err := writeAtomic(path, false, writeAll(data))
	return err
}

// writeAll is the fill of writeAtomic that writes data as it is.
func writeAll(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

// writeAtomic runs fill on a temporary file beside path and renames it into
// place; on any failure the temporary file is removed and path is untouched.
// It returns the number of bytes written.
func writeAtomic(path string, sync bool, fill func(io.Writer) error) (int64, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// A leading dot keeps temporary files out of Open's *.json listing.
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	cw := &countingWriter{w: tmp}
	if err := fill(cw); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	if sync {
		if err := tmp.Sync(); err != nil {
			return 0, fmt.Errorf("write %s: fsync: %w", path, err)
		}
	}
	// CreateTemp makes the file 0600; database files are shared like any output.
	if err := tmp.Chmod(0o644); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	ok = true
	if sync {
		// The rename is durable only once the directory entry is.
		if d, err := os.Open(dir); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
