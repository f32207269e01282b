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
