package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
)

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	must(os.Symlink(secret, filepath.Join(dir, "out")))
	must(os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	must(os.Symlink(outside, filepath.Join(dir, "logs")))
	must(os.WriteFile(filepath.Join(dir, "big"), make([]byte, 100), 0o644))
	must(os.WriteFile(filepath.Join(dir, "ok"), []byte("fine"), 0o644))

	cases := []struct {
		name string
		run  func() error
		want error
	}{
		{"fifo", func() error { _, err := ReadFileIn(dir, "fifo", 0); return err }, ErrNotRegular},
		{"link outside", func() error { _, err := ReadFileIn(dir, "out", 0); return err }, ErrOutside},
		{"dev zero", func() error { _, err := ReadFile(filepath.Join(dir, "zero"), 1<<20); return err }, ErrNotRegular},
		{"too large", func() error { _, err := ReadFile(filepath.Join(dir, "big"), 10); return err }, ErrTooLarge},
		{"write through link", func() error { _, err := CreateIn(dir, "out", os.O_WRONLY|os.O_TRUNC, 0o644); return err }, ErrNotRegular},
		{"write through folder link", func() error {
			_, err := CreateIn(dir, "logs/tune.log", os.O_CREATE|os.O_WRONLY, 0o644)
			return err
		}, ErrOutside},
		{"mkdir over link", func() error { return MkdirIn(dir, "logs") }, ErrOutside},
		// A FIFO where a folder belongs: refused, not opened (os.OpenRoot
		// would wait for a writer).
		{"read in a FIFO folder", func() error { _, err := ReadFileIn(filepath.Join(dir, "fifo"), "x", 0); return err }, ErrNotDir},
		{"write in a FIFO folder", func() error {
			_, err := CreateIn(filepath.Join(dir, "fifo"), "x", os.O_CREATE|os.O_WRONLY, 0o644)
			return err
		}, ErrNotDir},
		{"mkdir in a FIFO folder", func() error { return MkdirIn(filepath.Join(dir, "fifo"), "x") }, ErrNotDir},
		{"a file as a folder", func() error { _, err := OpenRoot(filepath.Join(dir, "ok")); return err }, ErrNotDir},
	}
	for _, c := range cases {
		done := make(chan error, 1)
		go func() { done <- c.run() }()
		select {
		case err := <-done:
			var in *mneme.InputError
			if !errors.Is(err, c.want) || !errors.As(err, &in) {
				t.Errorf("%s: got %v, want %v as bad input", c.name, err, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: blocked", c.name)
		}
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != "keep" {
		t.Errorf("the file outside changed: %q, %v", data, err)
	}
	data, err := ReadFileIn(dir, "ok", 4)
	if err != nil || string(data) != "fine" {
		t.Errorf("ReadFileIn(ok) = %q, %v", data, err)
	}
}
