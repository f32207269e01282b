// Package safefile opens the files mneme reads from recordings and results
// folders that may come from elsewhere, and creates the files it writes into
// them. Reads accept regular files only (a FIFO would block, a device would
// never end), of a bounded size, and never through a link that leads outside
// the folder; writes never follow a link at the file itself and stay inside
// their folder. Every refusal is bad input (mneme.InputError) naming the file.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mneme-gpu/mneme"
)

// Limits on files mneme reads whole, far above what it writes itself.
const (
	MaxJSON   = 256 << 20 // a kernel file, config.json, a tuned-kernel file
	MaxConfig = 16 << 20  // a YAML or JSON configuration or search space
	MaxIR     = 2 << 30   // an LLVM IR or bitcode module, a fat binary
)

// ErrNotRegular, ErrTooLarge and ErrOutside are matched (errors.Is) by the
// refusals of this package.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
	ErrOutside    = errors.New("leads outside its folder")
)

// refusal is the bad-input error of a refused file.
func refusal(path string, kind error, detail string) error {
	if detail != "" {
		return mneme.BadInput(fmt.Errorf("%s: %w (%s)", path, kind, detail))
	}
	return mneme.BadInput(fmt.Errorf("%s: %w", path, kind))
}

// describeMode names a non-regular file type for an error message.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "type " + m.Type().String()
}

// readFlags opens without blocking on a FIFO and without handing the
// descriptor to child processes.
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// checkRegular refuses anything but a regular file of at most limit bytes
// (limit <= 0: any size).
func checkRegular(path string, f *os.File, limit int64) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, refusal(path, ErrNotRegular, describeMode(fi.Mode()))
	}
	if limit > 0 && fi.Size() > limit {
		return nil, refusal(path, ErrTooLarge, fmt.Sprintf("%d bytes, the limit is %d", fi.Size(), limit))
	}
	return fi, nil
}

// Open opens path for reading if it is a regular file of at most limit bytes
// (limit <= 0: any size). Links are followed: path is the user's own choice.
func Open(path string, limit int64) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, readFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := checkRegular(path, f, limit)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// OpenIn opens name inside dir for reading like Open, refusing a name or a
// link that leads outside dir.
func OpenIn(dir, name string, limit int64) (*os.File, fs.FileInfo, error) {
	path := filepath.Join(dir, name)
	root, err := OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(name, readFlags, 0)
	if err != nil {
		if isEscape(err) {
			return nil, nil, refusal(path, ErrOutside, "")
		}
		return nil, nil, err
	}
	fi, err := checkRegular(path, f, limit)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ErrNotDir is matched (errors.Is) by the refusal of a folder that is not
// one.
var ErrNotDir = errors.New("not a directory")

// OpenRoot opens the folder dir for os.Root's confined access, refusing
// anything but a directory first: os.OpenRoot would open a FIFO for
// reading and wait for a writer forever.
func OpenRoot(dir string) (*os.Root, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ENOTDIR) {
		kind := "not a directory"
		if fi, err := os.Stat(dir); err == nil {
			kind = describeMode(fi.Mode())
		}
		return nil, refusal(dir, ErrNotDir, kind+" where a folder belongs")
	}
	if err != nil {
		return nil, err
	}
	f.Close()
	return os.OpenRoot(dir)
}

// isEscape reports whether an os.Root refused a path for leaving its root;
// os exports no value to match that error with.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// ReadFile reads a regular file of at most limit bytes whole.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, fi, err := Open(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(path, f, fi.Size(), limit)
}

// ReadFileIn reads name inside dir whole, like OpenIn.
func ReadFileIn(dir, name string, limit int64) ([]byte, error) {
	f, fi, err := OpenIn(dir, name, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(filepath.Join(dir, name), f, fi.Size(), limit)
}

// readAll reads what the file holds, never more than limit bytes even if it
// grows while being read.
func readAll(path string, f *os.File, size, limit int64) ([]byte, error) {
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	buf := make([]byte, 0, size+1)
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
	if limit > 0 && int64(len(buf)) > limit {
		return nil, refusal(path, ErrTooLarge, fmt.Sprintf("more than the limit of %d bytes", limit))
	}
	return buf, nil
}

// CreateIn opens name inside dir for writing with flag (os.O_CREATE,
// os.O_APPEND, os.O_TRUNC, ...), never following a link at name itself nor
// one of its folders out of dir, and refusing anything but a regular file.
func CreateIn(dir, name string, flag int, perm fs.FileMode) (*os.File, error) {
	path := filepath.Join(dir, name)
	root, err := OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if fi, err := root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		return nil, refusal(path, ErrNotRegular, describeMode(fi.Mode()))
	} else if isEscape(err) {
		return nil, refusal(path, ErrOutside, "")
	}
	f, err := root.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if err != nil {
		if isEscape(err) || errors.Is(err, syscall.ELOOP) {
			return nil, refusal(path, ErrOutside, "")
		}
		return nil, err
	}
	if _, err := checkRegular(path, f, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// MkdirIn makes the folder name inside dir (and its parents), refusing a
// link that leads out of dir.
func MkdirIn(dir, name string) error {
	root, err := OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(name, 0o755); err != nil {
		if isEscape(err) {
			return refusal(filepath.Join(dir, name), ErrOutside, "")
		}
		return err
	}
	if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
		return refusal(filepath.Join(dir, name), ErrOutside, describeMode(fi.Mode())+" where a folder belongs")
	}
	return nil
}
