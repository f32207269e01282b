package tune

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pythonRunOptions tune the test database's instance with the fake
// proposer's three-point class, its points sent all at once.
func pythonRunOptions(t *testing.T, env ...string) (RunOptions, *fakeProposer) {
	ro, _, _ := runOptions(t, env...)
	fp := &fakeProposer{batch: true}
	ro.Proposer = fp
	ro.Options.SpaceModule = "fake.py:Fake"
	ro.Options.LaunchSafety = LaunchAggressive
	return ro, fp
}

// TestRunWithPythonStartsWorkersBeforeTheSpace: with Python proposing, the
// workers start while the proposer opens; the run then tunes the proposed
// points as any other.
func TestRunWithPythonStartsWorkersBeforeTheSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the test worker")
	}
	ro, _ := pythonRunOptions(t)
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("%v\n%s", err, ro.Stderr)
	}
	trials, _, err := ReadTrials(filepath.Join(ro.Options.Output, TrialsFile))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[uint32]bool{}
	for _, tr := range trials[1:] {
		blocks[tr.Config.Block.X] = true
	}
	if len(trials) != 4 || !trials[0].IsBaseline() || !blocks[64] || !blocks[128] || !blocks[192] {
		t.Errorf("trials %d, blocks %v: want the baseline and the proposed 64, 128, 192", len(trials), blocks)
	}
}

// TestRunWithPythonKeepsTheEarlyWorkersLog: what the workers logged before
// the results directory existed lands in its log, and a run whose workers
// cannot open leaves no trials file behind.
func TestRunWithPythonKeepsTheEarlyWorkersLog(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the test worker")
	}
	ro, _ := pythonRunOptions(t, "TESTWORKER_FAIL_OPEN_GPU=0")
	if err := Run(context.Background(), ro); err == nil {
		t.Fatal("a run whose workers cannot open succeeded")
	}
	log, err := os.ReadFile(filepath.Join(ro.Options.Output, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "start attempt 1") {
		t.Errorf("the workers' open failures are not in %s:\n%s", LogFile, log)
	}
	if _, err := os.Stat(filepath.Join(ro.Options.Output, TrialsFile)); err == nil {
		t.Errorf("%s left behind by a run that ran nothing", TrialsFile)
	}
}

// TestRunWithPythonStopsEarlyWorkersOnBadInput: a run that fails before
// the workers are needed (here the results directory is not one) stops
// them and reports the input error.
func TestRunWithPythonStopsEarlyWorkersOnBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the test worker")
	}
	ro, _ := pythonRunOptions(t)
	if err := os.MkdirAll(ro.Options.Output, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro.Options.Output, "other"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), ro); !isInput(err) {
		t.Fatalf("run into a foreign directory: %v, want an InputError", err)
	}
	entries, _ := os.ReadDir(ro.Options.Output)
	if len(entries) != 1 {
		t.Errorf("the foreign directory now holds %d entries, want only its own", len(entries))
	}
}
