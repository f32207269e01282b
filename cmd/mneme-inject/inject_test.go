package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme/record"
)

// The library must load where the driver loads it, late, with dlopen: a Go
// c-shared library is marked STATIC_TLS, and thread-local arrays of a few
// KiB in its C half made that fail ("cannot allocate memory in static TLS
// block") while a test program linked against it worked. Without CUPTI it
// lets the application run (InitializeInjection answers 1) and leaves the
// reason in the status file, for `mneme record` to report.
func TestLoadsLikeTheDriverLoadsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the library")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: ", err)
	}
	dir := t.TempDir()
	lib, loader := filepath.Join(dir, "libmneme_inject.so"), filepath.Join(dir, "loader")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: ", err)
	}
	for _, c := range [][]string{
		{gobin, "build", "-buildmode=c-shared", "-o", lib, "."},
		{cc, "-o", loader, "testdata/loader.c", "-ldl"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	rdb := filepath.Join(dir, "rdb")
	cmd := exec.Command(loader, lib)
	cmd.Env = append(os.Environ(), record.EnvDB+"="+rdb, "MNEME_CUPTI_LIB=/nonexistent/libcupti.so")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "InitializeInjection returned 1") {
		t.Fatalf("loading the library: %v\n%s", err, out)
	}
	st, err := record.ReadStatus(rdb)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "MNEME_CUPTI_LIB=/nonexistent/libcupti.so") || st.KernelsRegistered != 0 {
		t.Errorf("status errors %q: want the missing CUPTI named", st.Errors)
	}

	// Deploying (a tuned file, no recording): without CUPTI the application
	// runs its own code, told once; a tuned file that cannot be read is
	// named, and the application runs too.
	tuned := filepath.Join(dir, "tuned.json")
	if err := os.WriteFile(tuned, []byte(`{"_Z6vecaddPKfS0_Pfi": {"config": {"block": {"x": 128}}, "launch_searched": true, "recorded_block": {"x": 256}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		file, want string
	}{
		"no CUPTI":        {tuned, "MNEME_CUPTI_LIB=/nonexistent/libcupti.so: "},
		"unreadable file": {filepath.Join(dir, "missing.json"), "missing.json"},
	} {
		cmd := exec.Command(loader, lib)
		cmd.Env = append(os.Environ(), envTunedKernels+"="+c.file, "MNEME_CUPTI_LIB=/nonexistent/libcupti.so")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "InitializeInjection returned 1") {
			t.Fatalf("%s: loading the library: %v\n%s", name, err, out)
		}
		if !strings.Contains(string(out), "mneme deploy: ") || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: the library said %q, want a warning naming %q", name, out, c.want)
		}
	}
}
