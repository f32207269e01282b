package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
)

// script writes an executable shell script, the stand-in for an application
// built with the mneme compilers: it writes what the runtime library would.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// options record into a fresh directory with a runtime library that the
// stand-in applications never load.
func options(t *testing.T, command ...string) Options {
	return Options{DB: filepath.Join(t.TempDir(), "rdb"), VASS: "4", Compress: true, Command: command,
		RuntimeLib: "/nonexistent/libmneme_rt.so", Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
}

// writeStatus is the status file the runtime would leave.
func writeStatus(t *testing.T, dir string, s record.Status) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteStatus(dir, &s); err != nil {
		t.Fatal(err)
	}
}

// writeRecording writes one recorded instance with the real writers, as the
// runtime leaves it in the database directory.
func writeRecording(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const arena = 0x153940000000
	k := &db.Kernel{KernelName: "_Z4fillPfi", DemangledName: "fill(float*, int)", ArgNames: []string{"y", "n"},
		Specializations: []bool{false, true}, ArgSizes: []uint64{8, 4}, ArgKinds: []mneme.ArgKind{mneme.ArgPtr, mneme.ArgI32}, FormatVersion: db.FormatVersion}
	ir := []byte("placeholder bitcode")
	k.StaticHash = db.StaticHash(k.KernelName, ir)
	k.VAddr, k.VASize, k.Modules = db.FormatVAddr(arena), 1<<30, []string{db.IRFileName(k.StaticHash)}
	if err := db.WriteFileAtomic(filepath.Join(dir, k.Modules[0]), ir); err != nil {
		t.Fatal(err)
	}
	grid, block := mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 32, Y: 1, Z: 1}
	args := [][]byte{binary.LittleEndian.AppendUint64(nil, arena), binary.LittleEndian.AppendUint32(nil, 32)}
	dh := db.DynamicHash(grid, block, 0, args)
	inst := &db.Instance{DynamicHash: dh, Prologue: db.PrologueFileName(k.StaticHash, dh), Epilogue: db.EpilogueFileName(k.StaticHash, dh),
		GridDims: grid, BlockDims: block, Args: db.EncodeArgs(args), Occurrences: 1}
	snap := &db.Snapshot{Blobs: []db.Blob{{Addr: arena, Size: 128, Data: make([]byte, 128)}}, Args: args}
	for _, name := range []string{inst.Prologue, inst.Epilogue} {
		if _, err := db.WriteSnapshot(filepath.Join(dir, name), snap, db.SnapshotOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k.Instances = map[string]*db.Instance{dh: inst}
	if err := db.WriteKernel(dir, k); err != nil {
		t.Fatal(err)
	}
}

func isInput(err error) bool {
	var ie *mneme.InputError
	return errors.As(err, &ie)
}

func TestRecordRejectsBadInputBeforeStarting(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "notexec")
	plain := filepath.Join(t.TempDir(), "plainfile")
	for _, f := range []string{notExec, plain} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, want string
		edit       func(*Options)
	}{
		{"no application", "no application given", func(o *Options) { o.Command = nil }},
		{"missing application", "application /nonexistent: does not exist", func(o *Options) { o.Command = []string{"/nonexistent"} }},
		{"application not in PATH", `application "no-such-program-anywhere": not found in PATH`, func(o *Options) { o.Command = []string{"no-such-program-anywhere"} }},
		{"not executable", "not executable", func(o *Options) { o.Command = []string{notExec} }},
		{"arena size", `-vass "0"`, func(o *Options) { o.VASS = "0" }},
		{"kernel pattern", `--kernels "("`, func(o *Options) { o.Kernels = "(" }},
		{"recordings", "--max-recordings -1", func(o *Options) { o.MaxRecordings = -1 }},
		{"skip", "--skip -2", func(o *Options) { o.Skip = -2 }},
		{"database directory", "cannot create the database directory: not a directory", func(o *Options) { o.DB = plain + "/sub" }},
	} {
		o := options(t, "/bin/true")
		c.edit(&o)
		err := Record(o, &bytes.Buffer{})
		if !isInput(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an InputError saying %q", c.name, err, c.want)
		}
		if _, err := os.Stat(o.DB); c.name != "database directory" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the database directory was created (%v)", c.name, err)
		}
	}
}

func TestRecordRefusesToMixRecordingsUnlessOverwriting(t *testing.T) {
	o := options(t, "/bin/true")
	writeRecording(t, o.DB)
	if err := Record(o, &bytes.Buffer{}); !isInput(err) || !strings.Contains(err.Error(), "already holds a recording (4 files)") {
		t.Fatalf("recording into a used directory: %v", err)
	}
	o.Overwrite = true
	var f *Failure
	if err := Record(o, &bytes.Buffer{}); !errors.As(err, &f) || !strings.Contains(err.Error(), "no kernels were registered") || !strings.Contains(err.Error(), "was left as it was") {
		t.Fatalf("overwriting: %v", err)
	}
	// A recording that failed replaces nothing and leaves nothing behind.
	if m := recordingFiles(o.DB); len(m) != 4 {
		t.Fatalf("the old recording lost files: %v", m)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(o.DB), ".*.recording-*")); len(m) != 0 {
		t.Fatalf("staging directories left behind: %v", m)
	}
}

// TestOverwriteSwapsInACompleteRecording checks the swap itself: the new
// recording replaces the old one whole, and other files of the directory stay.
func TestOverwriteSwapsInACompleteRecording(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rdb")
	writeRecording(t, dir)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	d, err := prepareDatabaseDir(dir, true)
	if err != nil || d.Staging == "" {
		t.Fatalf("prepare: %+v, %v", d, err)
	}
	if len(recordingFiles(dir)) != 4 {
		t.Fatal("the old recording changed before the new one was complete")
	}
	os.WriteFile(filepath.Join(d.Staging, "new.json"), []byte("{}"), 0o644)
	if err := d.commit(); err != nil {
		t.Fatal(err)
	}
	files := recordingFiles(dir)
	if len(files) != 1 || filepath.Base(files[0]) != "new.json" {
		t.Fatalf("after the swap: %v", files)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(data) != "mine" {
		t.Fatal("a file that is no recording's was lost")
	}
	if _, err := os.Stat(d.Staging); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old recording was not removed: %v", err)
	}
}

func TestRecordFailureCarriesTheApplicationsExitCode(t *testing.T) {
	var stdout bytes.Buffer
	o := options(t, "/bin/sh", "-c", "echo app-output; exit 7")
	o.Stdout = &stdout
	err := Record(o, &bytes.Buffer{})
	var f *Failure
	if !errors.As(err, &f) || f.ExitCode != 7 || !strings.Contains(err.Error(), "no kernels were registered") || !strings.Contains(err.Error(), "exited with status 7") {
		t.Fatalf("Record: %v, want a Failure with the application's exit code 7", err)
	}
	if stdout.String() != "app-output\n" {
		t.Fatalf("the application's output did not pass through: %q", stdout.String())
	}
	// The application succeeded, the recording did not: exit code 1.
	if err := Record(options(t, "/bin/true"), &bytes.Buffer{}); !errors.As(err, &f) || f.ExitCode != 1 {
		t.Fatalf("Record: %v, want a Failure with exit code 1", err)
	}
}

func TestRecordPassesTheOptionsToTheRuntime(t *testing.T) {
	o := options(t, script(t, `env | grep '^MNEME_' | sort > "$MNEME_RDB/env.txt"`))
	o.Kernels, o.MaxRecordings, o.Skip, o.VASS, o.Compress = "^fill", 3, 2, "0.5", false
	_ = Record(o, &bytes.Buffer{}) // no kernels registered: only the environment matters here
	env, err := os.ReadFile(filepath.Join(o.DB, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(o.DB)
	for _, want := range []string{record.EnvRecord + "=1", record.EnvDB + "=" + abs, record.EnvVASS + "=0.5", record.EnvKernels + "=^fill",
		record.EnvMaxRecordings + "=3", record.EnvSkip + "=2", record.EnvCompress + "=0", record.EnvRuntimeLib + "=" + o.RuntimeLib,
		record.EnvRecordTuned + "=0"} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("the application's environment lacks %s:\n%s", want, env)
		}
	}
	// --with-tuned-kernels, and only it, lets the recorded process deploy
	// tuned kernels (a MNEME_RECORD_TUNED=1 inherited from the user's
	// environment is overridden above).
	t.Setenv(record.EnvRecordTuned, "1")
	o.Overwrite = true
	_ = Record(o, &bytes.Buffer{})
	if env, _ = os.ReadFile(filepath.Join(o.DB, "env.txt")); !strings.Contains(string(env), record.EnvRecordTuned+"=0\n") {
		t.Errorf("an inherited %s=1 reached the application:\n%s", record.EnvRecordTuned, env)
	}
	o.WithTunedKernels = true
	_ = Record(o, &bytes.Buffer{})
	if env, _ = os.ReadFile(filepath.Join(o.DB, "env.txt")); !strings.Contains(string(env), record.EnvRecordTuned+"=1\n") {
		t.Errorf("--with-tuned-kernels did not reach the application:\n%s", env)
	}
}

func TestRecordReadsTheRecordingBack(t *testing.T) {
	src := t.TempDir()
	writeRecording(t, src)
	writeStatus(t, src, record.Status{KernelsRegistered: 2, InstancesRecorded: 1, LaunchesSelected: 1, LaunchesSeen: 5,
		SnapshotBytes: 1 << 20, SnapshotRawBytes: 3 << 20, SnapshotSeconds: 0.5, BackgroundSeconds: 0.25,
		CopiedBytes: 3 << 20, CopyTransferSeconds: 0.0015, LargestCopyBytes: 2 << 20, LargestCopySeconds: 0.0005, ChunksCopied: 2, ChunksZero: 3, ChunksReferenced: 1, FingerprintSeconds: 0.002})
	o := options(t, script(t, `cp "`+src+`"/* "`+src+`"/.mneme-record.status "$MNEME_RDB"/`))
	var log bytes.Buffer
	if err := Record(o, &log); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(o.DB)
	want := "mneme record: 1 instance(s) of 1 kernel(s) recorded in " + abs + " (1 of 5 launches selected); snapshots: 3.0 MiB of device data stored as 1.0 MiB, holding the application 0.500s (0.250s of writing beside it); " +
		"copied 3.0 MiB from the device at 2.1 GB/s, the largest snapshot's 2.0 MiB at 4.2 GB/s (2 of 6 chunks; 3 zero, 1 already stored; fingerprints 0.002s)\n"
	if !strings.HasPrefix(log.String(), want) || !regexp.MustCompile(`\nmneme record: time spent recording: loading the runtime [0-9.]+s`).MatchString(log.String()) {
		t.Fatalf("summary:\n%s\nwant it to start with\n%s", log.String(), want)
	}
}

func TestRecordReportsWhatWentWrong(t *testing.T) {
	for _, c := range []struct {
		name   string
		status record.Status
		want   string
	}{
		{"nothing selected", record.Status{KernelsRegistered: 1, LaunchesSeen: 3}, "nothing was recorded: 0 instance(s) of 0 kernel(s)"},
		{"arena too small", record.Status{KernelsRegistered: 1, ArenaError: "4 GiB exhausted"}, "ran out of recording arena: 4 GiB exhausted"},
		{"errors while recording", record.Status{KernelsRegistered: 1, Errors: []string{"snapshot failed"}, ErrorsDropped: 2}, "3 error(s) while recording, first: snapshot failed"},
	} {
		src := t.TempDir()
		writeStatus(t, src, c.status)
		err := Record(options(t, script(t, `cp "`+src+`"/.mneme-record.status "$MNEME_RDB"/`)), &bytes.Buffer{})
		var f *Failure
		if !errors.As(err, &f) || f.ExitCode != 1 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a Failure saying %q", c.name, err, c.want)
		}
	}
}

// TestRecordRefusesLinkedDatabaseDirectories: -rdb, and a rank's folder in
// it, must be directories of their own: a link would send the recording (and
// --overwrite's swap, which moves the folder's other files) to its target.
func TestRecordRefusesLinkedDatabaseDirectories(t *testing.T) {
	target := filepath.Join(t.TempDir(), "elsewhere")
	writeRecording(t, target)
	os.WriteFile(filepath.Join(target, "notes.txt"), []byte("theirs"), 0o644)
	before := recordingFiles(target)
	check := func(name string, o Options, want string) {
		t.Helper()
		err := Record(o, &bytes.Buffer{})
		var in *mneme.InputError
		if !errors.As(err, &in) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "is a symbolic link") {
			t.Errorf("%s: %v", name, err)
		}
		if got := recordingFiles(target); len(got) != len(before) {
			t.Errorf("%s: the link's target changed: %v", name, got)
		}
		if data, _ := os.ReadFile(filepath.Join(target, "notes.txt")); string(data) != "theirs" {
			t.Errorf("%s: the target's other files moved", name)
		}
	}
	for _, overwrite := range []bool{false, true} {
		o := options(t, "/bin/true")
		if err := os.Symlink(target, o.DB); err != nil {
			t.Fatal(err)
		}
		o.Overwrite = overwrite
		check(fmt.Sprintf("-rdb a link, --overwrite=%v", overwrite), o, o.DB)
	}
	// Several ranks record, each into -rdb/rank-N: a link there is refused,
	// and so is a linked -rdb.
	o := options(t, "/bin/true")
	o.RecordRanks, o.Getenv = "all", func(v string) string { return map[string]string{"OMPI_COMM_WORLD_RANK": "1"}[v] }
	if err := os.MkdirAll(o.DB, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(o.DB, "rank-1")); err != nil {
		t.Fatal(err)
	}
	check("a rank's folder a link", o, "rank-1")
	linked := options(t, "/bin/true")
	linked.RecordRanks, linked.Getenv = o.RecordRanks, o.Getenv
	if err := os.Symlink(o.DB, linked.DB); err != nil {
		t.Fatal(err)
	}
	check("-rdb of ranks a link", linked, linked.DB)
}

// TestStaleStagingIsRemovedByTheNextRecord: a record killed while it
// recorded into a staging directory leaves it; the next record into the
// same -rdb removes it, but never one a running record holds.
func TestStaleStagingIsRemovedByTheNextRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rdb")
	writeRecording(t, dir)
	stale := filepath.Join(filepath.Dir(dir), ".rdb.recording-123")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stale, "half.json"), []byte("{"), 0o644)
	// Another -rdb's staging beside it is not this one's.
	other := filepath.Join(filepath.Dir(dir), ".rdb2.recording-1")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	live, err := prepareDatabaseDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale staging directory is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another database's staging directory was removed: %v", err)
	}
	// A second record while the first runs leaves the first's staging alone.
	second, err := prepareDatabaseDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live.Staging); err != nil {
		t.Errorf("a running record's staging directory was removed: %v", err)
	}
	second.discard()
	live.discard()
	if m, _ := filepath.Glob(stagingPattern(dir)); len(m) != 0 {
		t.Errorf("staging left: %v", m)
	}
}
