package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/llvmir"
	mnemert "github.com/mneme-gpu/mneme/runtime"
	"github.com/mneme-gpu/mneme/toolchain"
)

type recordFlags struct {
	rdb           string
	vass          string
	kernels       string
	maxRecordings int
	skip          int
	overwrite     bool
	compress      bool
}

// noKernelsMsg is the diagnosis when the runtime never saw a registration.
const noKernelsMsg = "no kernels were registered: was it built with `mneme config cxx`?"

func init() {
	var f recordFlags
	cmd := &cobra.Command{
		Use:   "record [-rdb DIR] [-vass GiB] [--kernels REGEX] [--max-recordings N] [--skip N] -- APP [ARGS...]",
		Short: "Run an application built with the mneme compilers and record its kernel launches",
		Long: `record runs APP with ARGS (stdin, stdout and stderr pass through) and records
its kernel launches into the database directory -rdb: for each selected launch,
the device memory before and after it, the kernel's IR, its geometry and
argument values. The application must have been built with the compilers that
` + "`mneme config cc`/`mneme config cxx`" + ` print.

While recording, device allocations come from one virtual range of -vass GiB
at a fixed device address, so every launch can later be replayed at the same
addresses. A launch is selected when --kernels (a regular expression) matches
the kernel's mangled or demangled name; the first --skip matching launches are
let through, and at most --max-recordings distinct launches (geometry, shared
memory and argument values) are recorded per kernel; repeats only count.

mneme record exits with the application's exit code; when the application
succeeded but nothing could be recorded (no kernels registered, arena too
small, errors while recording) it exits 1. The database stays valid even if
the application crashes: every recorded launch is complete on disk.`,
		// -rdb and -vass are single-dash long flags as in Mneme, which pflag
		// would read as shorthand clusters; they are normalized first.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if helped, err := parseMnemeFlags(cmd, args, "rdb", "vass", "kernels", "max-recordings", "skip"); helped || err != nil {
				return err
			}
			return runRecord(cmd.ErrOrStderr(), cmd.Flags().Args(), &f)
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false) // everything from APP on belongs to the application
	fl.StringVar(&f.rdb, "rdb", "mneme-rdb", "recording database directory (created if missing)")
	fl.StringVar(&f.vass, "vass", strconv.Itoa(record.DefaultVASSGiB), "size of the recording arena in GiB (fractions allowed)")
	fl.StringVar(&f.kernels, "kernels", "", "record only kernels whose mangled or demangled name matches this regular expression")
	fl.IntVar(&f.maxRecordings, "max-recordings", 0, "distinct launches to record per kernel (0: no limit)")
	fl.IntVar(&f.skip, "skip", 0, "let this many matching launches pass before recording")
	fl.BoolVar(&f.overwrite, "overwrite", false, "replace a recording already in -rdb")
	fl.BoolVar(&f.compress, "zstd", true, "zstd-compress snapshot chunks where that saves at least 1/8 of them (--zstd=false stores them raw)")
	fl.BoolP("help", "h", false, "help for record")
	rootCmd.AddCommand(cmd)
}

func runRecord(stderr io.Writer, args []string, f *recordFlags) error {
	record.Trace("mneme", "record begin")
	defer record.Trace("mneme", "record end")
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return withExit(exitUsage, errors.New("no application given: mneme record [flags] -- APP [ARGS...]"))
	}
	app, err := findApplication(args[0])
	if err != nil {
		return withExit(exitUsage, err)
	}
	if _, err := record.ParseVASS(f.vass); err != nil {
		return withExit(exitUsage, err)
	}
	if f.kernels != "" {
		if _, err := regexp.Compile(f.kernels); err != nil {
			return withExit(exitUsage, fmt.Errorf("--kernels %q: %v", f.kernels, err))
		}
	}
	if f.maxRecordings < 0 {
		return withExit(exitUsage, fmt.Errorf("--max-recordings %d: must be 0 (no limit) or positive", f.maxRecordings))
	}
	if f.skip < 0 {
		return withExit(exitUsage, fmt.Errorf("--skip %d: must be 0 or positive", f.skip))
	}
	rdb, err := prepareDatabaseDir(f.rdb, f.overwrite)
	if err != nil {
		return withExit(exitUsage, err)
	}
	lib, err := runtimeLibrary()
	if err != nil {
		return withExit(exitFailure, err)
	}

	env := recordEnv(os.Environ(), map[string]string{
		record.EnvRecord:        "1",
		record.EnvDB:            rdb,
		record.EnvVASS:          f.vass,
		record.EnvKernels:       f.kernels,
		record.EnvMaxRecordings: strconv.Itoa(f.maxRecordings),
		record.EnvSkip:          strconv.Itoa(f.skip),
		record.EnvCompress:      map[bool]string{false: "0", true: "1"}[f.compress],
		record.EnvRuntimeLib:    lib,
	})
	// The kernels' IR is analyzed while the application runs: the
	// translation units the runtime writes are those embedded in the
	// executable, so little LLVM work is left for after it exits. Starting
	// only once the application has started keeps the llvm package's
	// forked bitcode checks away from the application's own fork and exec.
	var prefetch *llvmir.Prefetched
	record.Trace("mneme", "application start")
	appExit, appDesc := runApplication(app, args[1:], env, func() {
		prefetch = llvmir.Prefetch(func() ([]mnemert.IREntry, error) { return mnemert.ExecutableIR(app) })
	})
	record.Trace("mneme", "application exited")
	var irTools record.IRTools = llvmir.Tools{}
	embeddedIR := func() ([]mnemert.IREntry, error) { return mnemert.ExecutableIR(app) }
	if prefetch != nil {
		defer prefetch.Close()
		irTools, embeddedIR = prefetch, prefetch.Entries
	}

	status, statusErr := record.ReadStatus(rdb)
	fail := func(msg string) error {
		code := exitFailure
		if appExit != 0 {
			code = appExit
		}
		return withExit(code, errors.New(msg))
	}
	if errors.Is(statusErr, record.ErrNoStatus) || (statusErr == nil && status.KernelsRegistered == 0) {
		msg := noKernelsMsg
		if appExit != 0 {
			msg += " (the application " + appDesc + ")"
		}
		return fail(msg)
	}
	if statusErr != nil {
		return fail(fmt.Sprintf("reading the recording status: %v", statusErr))
	}
	summary := fmt.Sprintf("%d instance(s) of %d kernel(s) recorded in %s (%d of %d launches selected)",
		status.InstancesRecorded, status.KernelsRecorded, rdb, status.LaunchesSelected, status.LaunchesSeen)
	var finalizeErrs []string
	if status.KernelsRecorded > 0 {
		// The application wrote each kernel's translation unit; extract and
		// analyze the kernels here, where LLVM is loaded anyway (from the
		// prefetch's results where it already analyzed that unit).
		start := time.Now()
		for _, r := range record.Finalize(rdb, irTools, embeddedIR) {
			if r.Err != nil {
				finalizeErrs = append(finalizeErrs, r.Err.Error())
			}
		}
		status.IRSeconds += time.Since(start).Seconds()
		record.Trace("mneme", "finalized")
	}
	if status.InstancesRecorded > 0 {
		// What was recorded must read back, whatever happened afterwards.
		d, err := db.Open(rdb)
		if err != nil {
			return fail(fmt.Sprintf("%s, but the database does not read back: %v", summary, err))
		}
		summary = fmt.Sprintf("%d instance(s) of %d kernel(s) recorded in %s (%d of %d launches selected)",
			d.NumInstances(), len(d.Kernels), rdb, status.LaunchesSelected, status.LaunchesSeen)
		record.Trace("mneme", "read back")
	}
	if status.SnapshotSeconds > 0 {
		summary += fmt.Sprintf("; snapshots: %s of device data written as %s at %.0f MiB/s",
			humanBytes(uint64(status.SnapshotRawBytes)), humanBytes(uint64(status.SnapshotBytes)), float64(status.SnapshotRawBytes)/(1<<20)/status.SnapshotSeconds)
	}
	if status.ManagedAllocations > 0 {
		summary += fmt.Sprintf("; %d managed allocation(s) not replayable", status.ManagedAllocations)
	}
	switch {
	case status.ArenaError != "":
		return fail(fmt.Sprintf("%s\nthe application ran out of recording arena: %s", summary, status.ArenaError))
	case appExit != 0:
		return fail(fmt.Sprintf("the application %s; %s", appDesc, summary))
	case len(finalizeErrs) > 0:
		return fail(fmt.Sprintf("%s; the IR of %d kernel(s) could not be analyzed (their arguments stay raw bytes), first: %s", summary, len(finalizeErrs), finalizeErrs[0]))
	case len(status.Errors) > 0:
		return fail(fmt.Sprintf("%s; %d error(s) while recording, first: %s", summary, len(status.Errors)+status.ErrorsDropped, status.Errors[0]))
	case status.InstancesRecorded == 0:
		return fail(fmt.Sprintf("nothing was recorded: %s (does --kernels match a launched kernel?)", summary))
	}
	fmt.Fprintln(stderr, "mneme record:", summary)
	fmt.Fprintf(stderr, "mneme record: time spent recording: loading the runtime %.3fs, arena %.3fs, IR (after the run) %.3fs, device-to-host copies %.3fs, snapshot writes %.3fs, kernel files %.3fs\n",
		status.LoadSeconds, status.ArenaSeconds, status.IRSeconds, status.CopySeconds, status.SnapshotSeconds, status.DBWriteSeconds)
	if prefetch != nil {
		s := prefetch.Stats()
		fmt.Fprintf(stderr, "mneme record: IR analyzed alongside the run: %d of %d embedded translation unit(s) in %.3fs; %d of %d kernel lookup(s) answered from them\n",
			s.Analyzed, s.Units, s.Busy.Seconds(), s.Hits, s.Hits+s.Computed)
	}
	return nil
}

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

// prepareDatabaseDir creates dir, proves it writable and refuses to mix a
// new recording into an old one unless asked to replace it. The stale status
// file of an earlier run is removed so it cannot be mistaken for this one's.
func prepareDatabaseDir(dir string, overwrite bool) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("-rdb %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("-rdb %s: cannot create the database directory: %v", dir, unwrapPathError(err))
	}
	probe, err := os.CreateTemp(abs, ".mneme-write-test-*")
	if err != nil {
		return "", fmt.Errorf("-rdb %s: the database directory is not writable: %v", dir, unwrapPathError(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	var old []string
	for _, pattern := range []string{"*.json", "RecordedIR_*.bc", "DeviceState.*.mneme"} {
		m, _ := filepath.Glob(filepath.Join(abs, pattern))
		old = append(old, m...)
	}
	if len(old) > 0 && !overwrite {
		return "", fmt.Errorf("-rdb %s already holds a recording (%d files); choose another directory or pass --overwrite", dir, len(old))
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return "", fmt.Errorf("-rdb %s: removing the old recording: %v", dir, err)
		}
	}
	if err := os.Remove(filepath.Join(abs, record.StatusFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("-rdb %s: %v", dir, err)
	}
	return abs, nil
}

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
func runApplication(app string, args, env []string, started func()) (int, string) {
	c := exec.Command(app, args...)
	c.Env = env
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
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
	return exitFailure, fmt.Sprintf("could not be started: %v", err)
}
