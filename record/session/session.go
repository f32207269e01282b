// Package session runs one recording, the host side of `mneme record`: it
// checks the request, prepares the database directory, starts the
// application with the runtime library that records inside it, analyzes the
// recorded kernels' IR while and after it runs, and reads the database back
// to report what was recorded. Package record is the side inside the
// application; this package only starts processes and reads what they wrote.
package session

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/llvmir"
)

// Options are one recording, as `mneme record` asks for it.
type Options struct {
	DB            string // database directory, created if missing
	VASS          string // size of the recording arena in GiB, as record.ParseVASS reads it
	Kernels       string // record only kernels whose name matches this regular expression; empty: all
	MaxRecordings int    // distinct launches to record per kernel; 0: no limit
	Skip          int    // matching launches to let pass before recording
	Overwrite     bool   // replace a recording already in DB
	Compress      bool   // zstd-compress snapshot chunks where that pays
	// WithTunedKernels lets the launches the recorder does not record run
	// the tuned kernels the environment names (MNEME_TUNED_KERNELS,
	// PROTEUS_TUNED_KERNELS); recorded launches run the application's own
	// code. Off, the recorded process ignores tuned files.
	WithTunedKernels bool
	// RecordRanks is --record-ranks: in an MPI job (a launcher's rank
	// variable is set) the ranks that record, "all" or a list; "" is rank 0.
	// Other ranks run the application untouched; when several may record,
	// each records into DB/rank-N.
	RecordRanks string
	Command     []string // the application and its arguments
	// Getenv reads the environment (the launcher's rank variables); nil:
	// os.Getenv.
	Getenv func(string) string
	// RuntimeLib is the runtime library to load into the application; empty:
	// $MNEME_RT_LIB, else the one of the install prefix of this executable.
	RuntimeLib string
	// The application's standard streams; nil: this process's own.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Failure is a recording that went wrong once the application had run.
// ExitCode is what `mneme record` exits with: the application's own exit
// code when it failed, else 1.
type Failure struct {
	ExitCode int
	Msg      string
}

func (e *Failure) Error() string { return e.Msg }

// noKernelsMsg is the diagnosis when the runtime never saw a registration.
const noKernelsMsg = "no kernels were registered: was it built with `mneme config cxx`?"

// noDriverMsg is the diagnosis when an application recorded through the
// driver never initialized CUDA.
const noDriverMsg = "no kernels were registered: the application never initialized the CUDA driver (is it a CUDA program?)"

// Record runs the application under the recorder and writes the summary of
// what it recorded, and where the time went, to log. Bad options, a missing
// application or an unusable database directory are a *mneme.InputError,
// found before the application starts; a recording that failed once it ran
// is a *Failure.
func Record(o Options, log io.Writer) error {
	record.Trace("mneme", "record begin")
	defer record.Trace("mneme", "record end")
	rankEnv, untouched, err := selectRank(&o, log)
	if err != nil || untouched {
		return err
	}
	app, dbDir, lib, err := prepare(o)
	if err != nil {
		return err
	}
	rdb := dbDir.Dir()
	// An application built without mneme's compiler wrapper (no embedded
	// IR: an nvcc build, a script) is recorded through the driver: the
	// driver loads the injection library, which sees its calls through
	// CUPTI (docs/design.md, "Recording through the driver").
	how := howToRecord(app)
	viaDriver := how == viaDriverOnly
	set := map[string]string{
		record.EnvRecord:        "1",
		record.EnvDB:            rdb,
		record.EnvVASS:          o.VASS,
		record.EnvKernels:       o.Kernels,
		record.EnvMaxRecordings: strconv.Itoa(o.MaxRecordings),
		record.EnvSkip:          strconv.Itoa(o.Skip),
		record.EnvCompress:      map[bool]string{false: "0", true: "1"}[o.Compress],
		record.EnvRuntimeLib:    lib,
		record.EnvRank:          rankEnv,
		record.EnvRecordTuned:   map[bool]string{false: "0", true: "1"}[o.WithTunedKernels],
	}
	var injectErr error
	if how != viaShim {
		// A launcher or script may run programs built with the wrapper,
		// which their shim records (the injection library stands aside in
		// a process that carries the shim): a missing injection library is
		// reported only if nothing was recorded.
		var inj string
		if inj, injectErr = injectLibrary(lib); injectErr == nil {
			set[EnvCUDAInjection] = inj
		}
	}
	env := recordEnv(os.Environ(), set)
	// The kernels' IR is analyzed while the application runs: the
	// translation units the runtime writes are those embedded in the
	// executable, so little LLVM work is left for after it exits. Starting
	// only once the application has started keeps the llvm package's
	// forked bitcode checks away from the application's own fork and exec.
	var prefetch *llvmir.Prefetched
	record.Trace("mneme", "application start")
	appExit, appDesc := runApplication(app, o.Command[1:], env, streams(o), func() {
		if !viaDriver {
			prefetch = llvmir.Prefetch(func() ([]appabi.IREntry, error) { return appabi.ExecutableIR(app) })
		}
	})
	record.Trace("mneme", "application exited")
	r := &readBack{rdb: rdb, appExit: appExit, appDesc: appDesc, irTools: llvmir.Tools{}, viaDriver: viaDriver, injectErr: injectErr,
		embeddedIR: func() ([]appabi.IREntry, error) { return appabi.ExecutableIR(app) }}
	if prefetch != nil {
		defer prefetch.Close()
		r.irTools, r.embeddedIR = prefetch, prefetch.Entries
	}
	status, summary, err := r.finish()
	if err != nil {
		if dbDir.Staging != "" {
			dbDir.discard()
			return withNote(err, fmt.Sprintf("the recording in %s was left as it was", dbDir.Final))
		}
		return err
	}
	if dbDir.Staging != "" {
		if err := dbDir.commit(); err != nil {
			return err
		}
		summary = strings.ReplaceAll(summary, dbDir.Staging, dbDir.Final)
	}
	fmt.Fprintln(log, "mneme record:", summary)
	fmt.Fprintf(log, "mneme record: time spent recording: loading the runtime %.3fs, arena %.3fs, IR (after the run) %.3fs, device-to-host copies %.3fs, snapshots (holding the application) %.3fs, kernel files %.3fs\n",
		status.LoadSeconds, status.ArenaSeconds, status.IRSeconds, status.CopySeconds, status.SnapshotSeconds, status.DBWriteSeconds)
	if prefetch != nil {
		s := prefetch.Stats()
		fmt.Fprintf(log, "mneme record: IR analyzed alongside the run: %d of %d embedded translation unit(s) in %.3fs; %d of %d kernel lookup(s) answered from them\n",
			s.Analyzed, s.Units, s.Busy.Seconds(), s.Hits, s.Hits+s.Computed)
	}
	return nil
}

// selectRank applies --record-ranks inside an MPI job: a rank that does not
// record runs the application untouched here (untouched is true and err is
// the application's failure, if any); one that records among several gets a
// folder of its own. rankEnv is the rank for the recorder ("" outside a
// job).
func selectRank(o *Options, log io.Writer) (rankEnv string, untouched bool, err error) {
	sel, err := ParseRankSelection(o.RecordRanks)
	if err != nil {
		return "", false, mneme.BadInput(err)
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	rank, variable, inJob, err := Rank(getenv)
	if err != nil {
		return "", false, mneme.BadInput(err)
	}
	if !inJob {
		return "", false, nil
	}
	if !sel.Has(rank) {
		if len(o.Command) == 0 {
			return "", true, mneme.BadInput(errors.New("no application given: mneme record [flags] -- APP [ARGS...]"))
		}
		app, err := findApplication(o.Command[0])
		if err != nil {
			return "", true, mneme.BadInput(err)
		}
		fmt.Fprintf(log, "mneme record: rank %d (%s) does not record (--record-ranks %s); the application runs untouched\n", rank, variable, rankList(o.RecordRanks))
		code, desc := runApplication(app, o.Command[1:], os.Environ(), streams(*o), nil)
		if code != 0 {
			return "", true, &Failure{ExitCode: code, Msg: fmt.Sprintf("the application (rank %d, not recorded) %s", rank, desc)}
		}
		return "", true, nil
	}
	if sel.Several() {
		// The ranks' folders go inside -rdb: it must not lead elsewhere
		// either (each rank's own folder is checked as -rdb is).
		if abs, err := filepath.Abs(o.DB); err == nil {
			if err := refuseLink(abs); err != nil {
				return "", false, mneme.BadInput(err)
			}
		}
		o.DB = filepath.Join(o.DB, RankDir(rank))
	}
	return strconv.Itoa(rank), false, nil
}

func rankList(s string) string {
	if strings.TrimSpace(s) == "" {
		return "0"
	}
	return s
}

// prepare checks the options before anything runs and returns the
// application's path, the database directory (absolute, ready) and the
// runtime library.
func prepare(o Options) (app string, rdb databaseDir, lib string, err error) {
	if len(o.Command) == 0 {
		return "", databaseDir{}, "", mneme.BadInput(errors.New("no application given: mneme record [flags] -- APP [ARGS...]"))
	}
	if app, err = findApplication(o.Command[0]); err != nil {
		return "", databaseDir{}, "", mneme.BadInput(err)
	}
	if _, err := record.ParseVASS(o.VASS); err != nil {
		return "", databaseDir{}, "", mneme.BadInput(err)
	}
	if o.Kernels != "" {
		if _, err := regexp.Compile(o.Kernels); err != nil {
			return "", databaseDir{}, "", mneme.BadInput(fmt.Errorf("--kernels %q: %v", o.Kernels, err))
		}
	}
	if o.MaxRecordings < 0 {
		return "", databaseDir{}, "", mneme.BadInput(fmt.Errorf("--max-recordings %d: must be 0 (no limit) or positive", o.MaxRecordings))
	}
	if o.Skip < 0 {
		return "", databaseDir{}, "", mneme.BadInput(fmt.Errorf("--skip %d: must be 0 or positive", o.Skip))
	}
	if rdb, err = prepareDatabaseDir(o.DB, o.Overwrite); err != nil {
		return "", databaseDir{}, "", mneme.BadInput(err)
	}
	lib = o.RuntimeLib
	if lib == "" {
		if lib, err = runtimeLibrary(); err != nil {
			rdb.discard()
			return "", databaseDir{}, "", err
		}
	}
	return app, rdb, lib, nil
}

// withNote adds a sentence to a Failure's message (other errors are wrapped).
func withNote(err error, note string) error {
	var f *Failure
	if errors.As(err, &f) {
		return &Failure{ExitCode: f.ExitCode, Msg: f.Msg + "; " + note}
	}
	return fmt.Errorf("%w; %s", err, note)
}

// readBack is what is known once the application exited: how it ended and
// how to analyze the IR it recorded.
type readBack struct {
	rdb        string
	appExit    int
	appDesc    string
	irTools    record.IRTools
	embeddedIR func() ([]appabi.IREntry, error)
	viaDriver  bool  // recorded through the driver (CUDA_INJECTION64_PATH)
	injectErr  error // why the injection library could not be set up
}

// fail is a Failure with the application's exit code, or 1 when it succeeded.
func (r *readBack) fail(msg string) error {
	code := 1
	if r.appExit != 0 {
		code = r.appExit
	}
	return &Failure{ExitCode: code, Msg: msg}
}

// finish reads the runtime's status, analyzes the recorded kernels and reads
// the database back: the summary of a good recording, else a Failure saying
// what went wrong.
func (r *readBack) finish() (*record.Status, string, error) {
	status, statusErr := record.ReadStatus(r.rdb)
	if r.viaDriver && statusErr == nil && status.KernelsRegistered == 0 && len(status.Errors) > 0 {
		// What stopped the injection library (no CUPTI, say), said once.
		return nil, "", r.fail(status.Errors[0])
	}
	if errors.Is(statusErr, record.ErrNoStatus) || (statusErr == nil && status.KernelsRegistered == 0) {
		msg := noKernelsMsg
		if r.viaDriver {
			msg = noDriverMsg
			if statusErr == nil {
				msg = "no kernels were registered: the application launched no kernel"
			}
		}
		if r.injectErr != nil {
			msg += "; " + r.injectErr.Error()
		}
		if r.appExit != 0 {
			msg += " (the application " + r.appDesc + ")"
		}
		return nil, "", r.fail(msg)
	}
	if statusErr != nil {
		return nil, "", r.fail(fmt.Sprintf("reading the recording status: %v", statusErr))
	}
	summary, finalizeErrs, err := r.summarize(status)
	if err != nil {
		return nil, "", err
	}
	switch {
	case status.ArenaError != "":
		return nil, "", r.fail(fmt.Sprintf("%s\nthe application ran out of recording arena: %s", summary, status.ArenaError))
	case r.appExit != 0:
		return nil, "", r.fail(fmt.Sprintf("the application %s; %s", r.appDesc, summary))
	case len(finalizeErrs) > 0:
		return nil, "", r.fail(fmt.Sprintf("%s; the IR of %d kernel(s) could not be analyzed (their arguments stay raw bytes), first: %s", summary, len(finalizeErrs), finalizeErrs[0]))
	case len(status.Errors) > 0:
		return nil, "", r.fail(fmt.Sprintf("%s; %d error(s) while recording, first: %s", summary, len(status.Errors)+status.ErrorsDropped, status.Errors[0]))
	case status.InstancesRecorded == 0:
		return nil, "", r.fail(fmt.Sprintf("nothing was recorded: %s (does --kernels match a launched kernel?)", summary))
	}
	return status, summary, nil
}

// summarize analyzes the recorded kernels' IR, reads the database back and
// describes the recording; it returns the errors of the IR analysis.
func (r *readBack) summarize(status *record.Status) (summary string, finalizeErrs []string, err error) {
	rdb := r.rdb
	summary = fmt.Sprintf("%d instance(s) of %d kernel(s) recorded in %s (%d of %d launches selected)",
		status.InstancesRecorded, status.KernelsRecorded, rdb, status.LaunchesSelected, status.LaunchesSeen)
	if status.KernelsRecorded > 0 {
		// The application wrote each kernel's translation unit; extract and
		// analyze the kernels here, where LLVM is loaded anyway (from the
		// prefetch's results where it already analyzed that unit).
		start := time.Now()
		for _, res := range record.Finalize(rdb, r.irTools, r.embeddedIR) {
			if res.Err != nil {
				finalizeErrs = append(finalizeErrs, res.Err.Error())
			}
		}
		if err := demangleMachineKernels(rdb); err != nil {
			finalizeErrs = append(finalizeErrs, err.Error())
		}
		status.IRSeconds += time.Since(start).Seconds()
		record.Trace("mneme", "finalized")
	}
	if status.InstancesRecorded > 0 {
		// What was recorded must read back, whatever happened afterwards.
		d, err := db.Open(rdb)
		if err != nil {
			return "", nil, r.fail(fmt.Sprintf("%s, but the database does not read back: %v", summary, err))
		}
		summary = fmt.Sprintf("%d instance(s) of %d kernel(s) recorded in %s (%d of %d launches selected)",
			d.NumInstances(), len(d.Kernels), rdb, status.LaunchesSelected, status.LaunchesSeen)
		record.Trace("mneme", "read back")
	}
	if status.InstancesReplaced > 0 {
		summary += fmt.Sprintf("; %d instance(s) gave their place to new launch shapes (--max-recordings)", status.InstancesReplaced)
	}
	if status.StatsKernels > 0 {
		summary += fmt.Sprintf("; launch statistics of %d kernel(s) in %s (mneme inspect shows them)", status.StatsKernels, db.LaunchStatsFileName)
	}
	if status.SnapshotSeconds > 0 {
		// No rate: chunks already stored or all zero count as device data
		// but cost nothing, and the background writing overlaps the run.
		summary += fmt.Sprintf("; snapshots: %s of device data stored as %s, holding the application %.3fs",
			db.FormatSize(uint64(status.SnapshotRawBytes)), db.FormatSize(uint64(status.SnapshotBytes)), status.SnapshotSeconds)
		if status.BackgroundSeconds > 0 {
			summary += fmt.Sprintf(" (%.3fs of writing beside it)", status.BackgroundSeconds)
		}
		summary += copySummary(status)
	}
	if status.ManagedAllocations > 0 {
		summary += fmt.Sprintf("; %d managed allocation(s) not replayable", status.ManagedAllocations)
	}
	return summary, finalizeErrs, nil
}

// copySummary says what the snapshots copied from the device: the bytes,
// the transfer rate (over all of them, and for the largest alone), and the
// chunks that fingerprints spared.
func copySummary(s *record.Status) string {
	out := fmt.Sprintf("; copied %s from the device", db.FormatSize(uint64(s.CopiedBytes)))
	if s.CopyTransferSeconds > 0 {
		out += fmt.Sprintf(" at %.1f GB/s", float64(s.CopiedBytes)/1e9/s.CopyTransferSeconds)
	}
	if s.LargestCopySeconds > 0 && s.LargestCopyBytes < s.CopiedBytes {
		out += fmt.Sprintf(", the largest snapshot's %s at %.1f GB/s", db.FormatSize(uint64(s.LargestCopyBytes)), float64(s.LargestCopyBytes)/1e9/s.LargestCopySeconds)
	}
	if n := s.ChunksCopied + s.ChunksZero + s.ChunksReferenced; n > 0 {
		out += fmt.Sprintf(" (%d of %d chunks; %d zero, %d already stored; fingerprints %.3fs)",
			s.ChunksCopied, n, s.ChunksZero, s.ChunksReferenced, s.FingerprintSeconds)
	}
	return out
}

// demangleMachineKernels gives the kernels recorded through the driver
// their demangled names: the application, which does not load LLVM, wrote
// the mangled name in both fields.
func demangleMachineKernels(rdb string) error {
	files, _ := filepath.Glob(filepath.Join(rdb, "*.json"))
	for _, f := range files {
		k, err := db.ReadKernel(f)
		if err != nil || !k.MachineCodeOnly() || k.DemangledName != k.KernelName {
			continue // Finalize reports unreadable files
		}
		if d := llvm.Demangle(k.KernelName); d != k.KernelName {
			k.DemangledName = d
			if err := db.WriteKernel(rdb, k); err != nil {
				return fmt.Errorf("kernel %s: %w", k.KernelName, err)
			}
		}
	}
	return demangleStats(rdb)
}

// demangleStats gives each kernel of the launch statistics that lacks one
// its demangled name: the injection library writes them without LLVM.
func demangleStats(rdb string) error {
	st, err := db.ReadLaunchStats(rdb)
	if err != nil {
		return nil // none; an unreadable file is inspect's to report
	}
	changed := false
	for i := range st.Kernels {
		k := &st.Kernels[i]
		if k.DemangledName != "" {
			continue
		}
		if d := llvm.Demangle(k.KernelName); d != k.KernelName {
			k.DemangledName, changed = d, true
		}
	}
	if !changed {
		return nil
	}
	if err := db.WriteLaunchStats(rdb, st); err != nil {
		return fmt.Errorf("launch statistics: %w", err)
	}
	return nil
}
