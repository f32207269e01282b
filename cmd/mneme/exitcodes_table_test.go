package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/replay"
)

// Every trial status a replay can end with has its exit code: the ones the
// README names get theirs, the rest (a timeout, a crash, an internal error)
// are failures, and success is never reached through a status error.
func TestStatusExitEveryRow(t *testing.T) {
	want := map[mneme.Status]int{
		mneme.StatusVerified:           exitFailure, // a status error never carries success
		mneme.StatusInvalidLaunch:      exitKernelFault,
		mneme.StatusInvalidConfig:      exitUsage,
		mneme.StatusCompileError:       exitCompile,
		mneme.StatusRuntimeError:       exitKernelFault,
		mneme.StatusFailedVerification: exitVerification,
		mneme.StatusInternalError:      exitFailure,
		mneme.StatusTimeout:            exitFailure,
		mneme.StatusCrashed:            exitFailure,
	}
	if len(want) != len(mneme.Statuses()) {
		t.Fatalf("%d statuses, this table has %d", len(mneme.Statuses()), len(want))
	}
	for _, s := range mneme.Statuses() {
		w, ok := want[s]
		if !ok {
			t.Errorf("status %s: no row here", s)
			continue
		}
		if got := statusExit(s); got != w {
			t.Errorf("statusExit(%s) = %d, want %d", s, got, w)
		}
		if got := exitCode(&replay.StatusError{Result: &mneme.Result{Status: s}}); got != w {
			t.Errorf("exitCode of a replay ending %s = %d, want %d", s, got, w)
		}
	}
}

// The README's exit-code table lists exactly the codes the commands use,
// each with the meaning the code's constant has.
func TestReadmeExitCodeTableEveryRow(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "### Exit codes")
	if !ok {
		t.Fatal("README.md has no exit-code section")
	}
	rows := map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \| (.*) \|$`).FindAllStringSubmatch(table, -1) {
		n, _ := strconv.Atoi(m[1])
		if _, dup := rows[n]; dup {
			break // the next table
		}
		rows[n] = m[2]
	}
	want := map[int]string{0: "success", exitFailure: "operation failed", exitUsage: "bad input",
		exitVerification: "differs from the recording", exitKernelFault: "faulted", exitCompile: "could not be compiled",
		exitNoGPU: "driver and GPU", exitResources: "out of resources"}
	if len(rows) != len(want) {
		t.Errorf("README lists codes %v, want %d codes", rows, len(want))
	}
	for code, phrase := range want {
		if !strings.Contains(rows[code], phrase) {
			t.Errorf("README's row for %d is %q, want it to say %q", code, rows[code], phrase)
		}
	}
}
