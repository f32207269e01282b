package session

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/toolchain"
)

// findApplication resolves APP like a shell would and checks that it can be
// executed.
func findApplication(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) && !strings.Contains(name, "/") {
			return "", fmt.Errorf("application %q: not found in PATH", name)
		}
		fi, statErr := os.Stat(name)
		switch {
		case statErr != nil:
			return "", fmt.Errorf("application %s: does not exist", name)
		case fi.IsDir():
			return "", fmt.Errorf("application %s: is a directory", name)
		default:
			return "", fmt.Errorf("application %s: not executable", name)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("application %s: %w", name, err)
	}
	return abs, nil
}

// recordingPatterns match the files of a recording in a database directory.
var recordingPatterns = []string{"*.json", "RecordedIR_*.bc", "DeviceState.*.mneme", "DeviceCode_*.fatbin", db.LaunchStatsFileName, record.StatusFileName}

// databaseDir is where a recording goes: Final is the -rdb directory;
// Staging, when --overwrite replaces a recording there, is the directory
// beside it that the application records into, swapped in only once the
// new recording is complete.
type databaseDir struct {
	Final   string
	Staging string
	// lock holds an exclusive flock on Staging while this process records
	// into it: a staging directory nobody holds is left from a record that
	// was killed, and the next record into Final removes it.
	lock *os.File
}

// Dir is the directory the application writes.
func (d databaseDir) Dir() string {
	if d.Staging != "" {
		return d.Staging
	}
	return d.Final
}

// prepareDatabaseDir creates dir, proves it writable and refuses to mix a
// new recording into an old one. With overwrite, an old recording stays
// untouched: the new one is made in a staging directory beside it, which
// commit swaps in. The stale status file of an earlier run is removed so it
// cannot be mistaken for this one's.
func prepareDatabaseDir(dir string, overwrite bool) (databaseDir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return databaseDir{}, fmt.Errorf("-rdb %s: %w", dir, err)
	}
	if err := refuseLink(abs); err != nil {
		return databaseDir{}, err
	}
	removeStaleStaging(abs)
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return databaseDir{}, fmt.Errorf("-rdb %s: cannot create the database directory: %v", dir, unwrapPathError(err))
	}
	probe, err := os.CreateTemp(abs, ".mneme-write-test-*")
	if err != nil {
		return databaseDir{}, fmt.Errorf("-rdb %s: the database directory is not writable: %v", dir, unwrapPathError(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	old := recordingFiles(abs)
	if len(old) > 0 && !overwrite {
		return databaseDir{}, fmt.Errorf("-rdb %s already holds a recording (%d files); choose another directory or pass --overwrite", dir, len(old))
	}
	if len(old) > 0 {
		staging, err := os.MkdirTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".recording-*")
		if err != nil {
			return databaseDir{}, fmt.Errorf("-rdb %s: making the directory the new recording goes to before it replaces the old: %v", dir, unwrapPathError(err))
		}
		os.Chmod(staging, 0o755)
		lock, err := lockDir(staging)
		if err != nil {
			os.RemoveAll(staging)
			return databaseDir{}, fmt.Errorf("-rdb %s: locking the directory the new recording goes to: %v", dir, err)
		}
		return databaseDir{Final: abs, Staging: staging, lock: lock}, nil
	}
	if err := os.Remove(filepath.Join(abs, record.StatusFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return databaseDir{}, fmt.Errorf("-rdb %s: %v", dir, err)
	}
	return databaseDir{Final: abs}, nil
}

// refuseLink refuses a database directory (-rdb, or a rank's folder in it)
// that is a symbolic link: the recording, and --overwrite's swap, would go
// to wherever it points. Links above it (a site's /scratch) are the user's
// own path and followed.
func refuseLink(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	target, _ := os.Readlink(dir)
	return fmt.Errorf("-rdb %s is a symbolic link (to %s): name the directory itself", dir, target)
}

// stagingPattern matches the staging directories of recordings into abs.
func stagingPattern(abs string) string {
	return filepath.Join(filepath.Dir(abs), "."+filepath.Base(abs)+".recording-*")
}

// lockDir takes an exclusive flock on dir, held until the file is closed
// (or the process ends, however it ends).
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// removeStaleStaging removes the staging directories of recordings into abs
// that no running record holds: left by a record that was killed before it
// could swap in or discard its staging directory.
func removeStaleStaging(abs string) {
	stale, _ := filepath.Glob(stagingPattern(abs))
	for _, dir := range stale {
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if lock, err := lockDir(dir); err == nil {
			os.RemoveAll(dir)
			lock.Close()
		}
	}
}

// recordingFiles lists the files of a recording in dir.
func recordingFiles(dir string) []string {
	var files []string
	for _, pattern := range recordingPatterns {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		files = append(files, m...)
	}
	return files
}

// commit swaps a complete staged recording in: the two directories are
// exchanged in one step, the files of the old one that are no recording's
// (notes, scripts) move over, and only then is the old recording removed.
func (d databaseDir) commit() error {
	if d.Staging == "" {
		return nil
	}
	if err := unix.Renameat2(unix.AT_FDCWD, d.Staging, unix.AT_FDCWD, d.Final, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("-rdb %s: swapping in the new recording from %s: %v (the old recording is untouched)", d.Final, d.Staging, err)
	}
	oldDir := d.Staging // after the exchange it holds the old recording
	isRecording := map[string]bool{}
	for _, f := range recordingFiles(oldDir) {
		isRecording[filepath.Base(f)] = true
	}
	entries, err := os.ReadDir(oldDir)
	if err != nil {
		return fmt.Errorf("-rdb %s: the new recording is in place; the old one is in %s: %v", d.Final, oldDir, err)
	}
	for _, e := range entries {
		if isRecording[e.Name()] {
			continue
		}
		if err := os.Rename(filepath.Join(oldDir, e.Name()), filepath.Join(d.Final, e.Name())); err != nil {
			return fmt.Errorf("-rdb %s: the new recording is in place; moving %s back from the old one in %s: %v", d.Final, e.Name(), oldDir, err)
		}
	}
	if err := os.RemoveAll(oldDir); err != nil {
		return fmt.Errorf("-rdb %s: the new recording is in place; removing the old one in %s: %v", d.Final, oldDir, err)
	}
	d.unlock()
	return nil
}

// unlock releases the staging directory's lock.
func (d databaseDir) unlock() {
	if d.lock != nil {
		d.lock.Close()
	}
}

// discard removes the staging directory of a recording that failed, which
// leaves the old recording as it was.
func (d databaseDir) discard() {
	if d.Staging != "" {
		os.RemoveAll(d.Staging)
	}
	d.unlock()
}

// unwrapPathError is the cause of a path error, for messages that name the path themselves.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// runtimeLibrary is <prefix>/lib/libmneme_rt.so next to this mneme, or
// MNEME_RT_LIB when set.
func runtimeLibrary() (string, error) {
	if p := os.Getenv(record.EnvRuntimeLib); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("runtime library %s (%s): %v", p, record.EnvRuntimeLib, unwrapPathError(err))
		}
		return filepath.Abs(p)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating the runtime library: %w", err)
	}
	layout, err := toolchain.PrefixFromExecutable(toolchain.SystemHost(), exe)
	if err != nil {
		return "", err
	}
	lib := layout.RuntimeLibrary()
	if _, err := os.Stat(lib); err != nil {
		return "", fmt.Errorf("runtime library %s not found (build the prefix with `make all`, or set %s)", lib, record.EnvRuntimeLib)
	}
	return lib, nil
}

// EnvCUDAInjection names the tool library the CUDA driver loads at
// initialization (the hook NVIDIA's profilers use).
const EnvCUDAInjection = "CUDA_INJECTION64_PATH"

// How an application is recorded.
type recordingPath int

const (
	// viaShim: the executable carries the IR mneme's compiler wrapper
	// embeds, and the shim that records it from inside.
	viaShim recordingPath = iota
	// viaDriverOnly: an executable without that IR (an nvcc build) is
	// recorded through the driver's injection hook.
	viaDriverOnly
	// viaEither: not an executable (a script); what it runs is recorded by
	// whichever applies.
	viaEither
)

func howToRecord(app string) recordingPath {
	f, err := elf.Open(app)
	if err != nil {
		return viaEither
	}
	defer f.Close()
	if sec := f.Section(appabi.IRSection); sec != nil && sec.Type != elf.SHT_NOBITS {
		return viaShim
	}
	return viaDriverOnly
}

// injectLibrary is libmneme_inject.so beside the runtime library rt, or
// MNEME_INJECT_LIB when set.
func injectLibrary(rt string) (string, error) {
	if p := os.Getenv(record.EnvInjectLib); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("injection library %s (%s): %v", p, record.EnvInjectLib, unwrapPathError(err))
		}
		return filepath.Abs(p)
	}
	lib := filepath.Join(filepath.Dir(rt), "libmneme_inject.so")
	if _, err := os.Stat(lib); err != nil {
		return "", fmt.Errorf("injection library %s not found, which records applications not built with `mneme config cxx` (build the prefix with `make all`, or set %s)", lib, record.EnvInjectLib)
	}
	return lib, nil
}

// recordEnv is base with the given variables set (replacing earlier values).
func recordEnv(base []string, set map[string]string) []string {
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := set[name]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

// runApplication runs the application in the foreground and returns its
// exit code (128+N when killed by signal N, as shells report it) and a
// description for messages. started, when not nil, is called once the
// application has started, before waiting for it. Interrupts reach the
// application through the terminal's process group; mneme itself waits for
// it, to report afterwards.
func runApplication(app string, args, env []string, std stdStreams, started func()) (int, string) {
	c := exec.Command(app, args...)
	c.Env = env
	c.Stdin, c.Stdout, c.Stderr = std.in, std.out, std.err
	// The terminal sends SIGINT and SIGQUIT to the application too; SIGTERM
	// is aimed at mneme alone and is passed on.
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sig)
	go func() {
		for s := range sig {
			if s == syscall.SIGTERM && c.Process != nil {
				c.Process.Signal(s)
			}
		}
	}()
	err := c.Start()
	if err == nil {
		if started != nil {
			started()
		}
		err = c.Wait()
	}
	if err == nil {
		return 0, "exited with status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
		}
		return ee.ExitCode(), fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	return 1, fmt.Sprintf("could not be started: %v", err)
}

// stdStreams are the application's standard streams.
type stdStreams struct {
	in       io.Reader
	out, err io.Writer
}

// streams are the options' streams, this process's own where unset.
func streams(o Options) stdStreams {
	s := stdStreams{in: o.Stdin, out: o.Stdout, err: o.Stderr}
	if s.in == nil {
		s.in = os.Stdin
	}
	if s.out == nil {
		s.out = os.Stdout
	}
	if s.err == nil {
		s.err = os.Stderr
	}
	return s
}
