package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// Mneme's own `mneme tune` is a Python program with its own flag names
// (python/mneme/cli/tune.py implements it over our Python API). A command
// line written for it is handed to that implementation unchanged; the Go
// tuner keeps its own spellings.

// mnemeOnlyTuneFlags are the flags of Mneme's `mneme tune` that the Go
// tuner does not define. --launch-safety and --adaptive-invalid-ban are
// absent on purpose: the Go tuner reads them too.
var mnemeOnlyTuneFlags = map[string]bool{
	"record-database": true, "record-db": true, "record-id": true,
	"space-module": true, "space-arg": true, "space-preset": true, "launch-dim": true,
	// Mneme's --passes (several pipelines to choose from) is our knob's name.
	mneme.KeyPasses: true, "fixed-passes": true, "pipeline-file": true,
	"codegen-opt-range": true, "fixed-codegen-opt": true,
	"specialize-space": true, "specialize-dims-space": true, "launch-bounds-space": true,
	"max-threads-policy": true, "max-threads-range": true, "min-blocks-per-sm-range": true,
	"fail-fast": true, "keep-going": true, "timeout": true,
	"results-dir": true, "rerun-baseline": true, "quiet": true,
	"study-name": true, "optuna-storage": true, "pruner": true,
	"proteus-output": true, "no-proteus-output": true,
}

// mnemeOnlyTuneKeys are the config-file keys of Mneme's `mneme tune` that a
// Go --config file does not have (plus its nested `search:` mapping).
var mnemeOnlyTuneKeys = func() map[string]bool {
	keys := map[string]bool{"search": true}
	for f := range mnemeOnlyTuneFlags {
		keys[strings.ReplaceAll(f, "-", "_")] = true
	}
	return keys
}()

func init() {
	for _, c := range rootCmd.Commands() {
		if c.Name() == "tune" {
			c.Long += `

Mneme's spellings (--record-database, --record-id, --space-module,
--results-dir, --optuna-storage, ... or a --config file with Mneme's keys)
run Mneme's tune command as implemented by the Python package
(python -m mneme.cli.tune), found through $MNEME_PYTHON, the .venv of this
installation, or python3 on PATH; see its --help.`
		}
	}
}

// isMnemeTuneCommandLine reports whether args (after "tune") are written
// for Mneme's `mneme tune` rather than ours.
func isMnemeTuneCommandLine(args []string) bool {
	for i, a := range args {
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		switch {
		case mnemeOnlyTuneFlags[name]:
			return true
		case name == "dump-config":
			// Ours is a switch; Mneme's takes the PATH to write.
			if hasValue {
				if _, isBool := boolWords[strings.ToLower(value)]; !isBool {
					return true
				}
			} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				return true
			}
		case name == "config":
			file := value
			if !hasValue && i+1 < len(args) {
				file = args[i+1]
			}
			if configHasMnemeKeys(file) {
				return true
			}
		}
	}
	return false
}

var boolWords = map[string]struct{}{"true": {}, "false": {}, "1": {}, "0": {}, "t": {}, "f": {}}

// configHasMnemeKeys reports whether the JSON or YAML file holds a key only
// Mneme's tune reads. An unreadable file (or one that is not a regular file
// of a sane size) is left to our own --config, which reports it.
func configHasMnemeKeys(file string) bool {
	data, err := safefile.ReadFile(file, safefile.MaxConfig)
	if err != nil {
		return false
	}
	var doc map[string]any
	if yaml.Unmarshal(data, &doc) != nil {
		return false
	}
	for k := range doc {
		if mnemeOnlyTuneKeys[k] || mnemeOnlyTuneKeys[strings.ReplaceAll(k, "-", "_")] {
			return true
		}
	}
	return false
}

// mnemePython finds the Python that has the mneme package: $MNEME_PYTHON,
// else the .venv of the tree the binary was built in (PREFIX/bin/mneme or
// PREFIX/build/bin/mneme), else python3 on PATH.
func mnemePython() (string, error) {
	if p := os.Getenv("MNEME_PYTHON"); p != "" {
		return p, nil
	}
	if exe, err := workerBinary(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			bin := filepath.Dir(exe)
			for _, prefix := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin))} {
				p := filepath.Join(prefix, ".venv", "bin", "python")
				if st, err := os.Stat(p); err == nil && !st.IsDir() {
					return p, nil
				}
			}
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("these are the options of Mneme's tune, which needs Python with the mneme package: set MNEME_PYTHON, " +
			"or run ./scripts/setup.sh (it makes .venv), or put python3 with `pip install ./python` on PATH")
	}
	return p, nil
}

// execMnemeTune replaces this process with `PYTHON -m mneme.cli.tune args`,
// so the exit code and output are the Python program's own.
func execMnemeTune(args []string) error {
	py, err := mnemePython()
	if err != nil {
		return withExit(exitUsage, fmt.Errorf("tune: %w", err))
	}
	var out bytes.Buffer
	check := exec.Command(py, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('mneme.cli.tune') is None)")
	check.Stdout, check.Stderr = &out, &out
	if err := check.Run(); err != nil {
		return withExit(exitUsage, fmt.Errorf("tune: Mneme's tune options need the mneme Python package, "+
			"which %s cannot import (%v; install it with `pip install ./python` or set MNEME_PYTHON)%s",
			py, err, indentOutput(out.String())))
	}
	env := os.Environ()
	if os.Getenv("MNEME_BIN") == "" {
		if exe, err := workerBinary(); err == nil {
			env = append(env, "MNEME_BIN="+exe)
		}
	}
	argv := append([]string{py, "-m", "mneme.cli.tune"}, args...)
	path, err := exec.LookPath(py)
	if err != nil {
		return withExit(exitUsage, fmt.Errorf("tune: %s: %w", py, err))
	}
	return syscall.Exec(path, argv, env)
}

func indentOutput(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return ":\n  " + strings.ReplaceAll(s, "\n", "\n  ")
}
