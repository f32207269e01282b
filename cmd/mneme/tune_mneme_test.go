package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestProposerScripts runs `mneme tune --space-module` through the real
// Python proposer (python/mneme/propose.py) where python3 is installed:
// --print-space and --dry-run need no GPU, so the whole conversation runs.
func TestProposerScripts(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	pkg, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{Dir: "testdata/propose", Setup: func(e *testscript.Env) error {
		e.Setenv("MNEME_PYTHON", py)
		e.Setenv("PYTHONPATH", pkg)
		e.Setenv("REPO", filepath.Dir(pkg))
		return nil
	}})
}

// TestMnemeSpellingExitCodes runs the same requests in both spellings: the
// exit codes are the README's table in either (Mneme's 3 and 4 for bad
// configurations and recordings are 2 here).
func TestMnemeSpellingExitCodes(t *testing.T) {
	h := newHostileEnv(t)
	id := h.instance(h.Stencil).DynamicHash
	for _, c := range []struct {
		name        string
		ours, mneme []string
		want        int
	}{
		{"no database", []string{"tune", "-rdb", "nowhere", "--print-space"},
			[]string{"tune", "--record-database", "nowhere", "--print-space"}, exitUsage},
		{"no such instance", []string{"tune", "-rdb", "db", "-rid", "0000", "--print-space"},
			[]string{"tune", "--record-db", "db", "--record-id", "0000", "--print-space"}, exitUsage},
		{"bad sampler", []string{"tune", "-rdb", "db", "-rid", id, "--sampler", "nope", "--print-space"},
			[]string{"tune", "--record-db", "db", "--record-id", id, "--sampler", "nope", "--print-space"}, exitUsage},
		{"unknown config key", []string{"tune", "--config", "bad.yml", "--print-space"},
			[]string{"tune", "--config", "bad-mneme.yml", "--print-space"}, exitUsage},
		{"no GPU", []string{"tune", "-rdb", "db", "-rid", id, "--preset", "quick", "--output", "o1", "--compile-workers", "0"},
			[]string{"tune", "--record-db", "db", "--record-id", id, "--space-preset", "quick", "--results-dir", "o2", "--compile-workers", "0"}, exitNoGPU},
	} {
		h.write("bad.yml", []byte("db: db\nbogus: 1\n"))
		h.write("bad-mneme.yml", []byte("record_database: db\nsearch:\n  bogus: 1\n"))
		for _, args := range [][]string{c.ours, c.mneme} {
			if code, _, stderr := h.run(args, ""); code != c.want {
				t.Errorf("%s: mneme %v: exit %d, want %d\n%s", c.name, args, code, c.want, stderr)
			}
		}
	}
}
