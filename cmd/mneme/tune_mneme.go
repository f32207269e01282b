package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/tune"
)

// Mneme's own `mneme tune` has other flag names and config.yml keys than
// ours. Both are read here and become the same tune.Options: one engine,
// two spellings. The words both spell alike mean one thing (tune/SPACES.md,
// "Mneme's spellings").

// mnemeFlags are the values of Mneme's flags that are not Options fields.
type mnemeFlags struct {
	keepGoing       bool
	fixedCodegenOpt int
	rerunBaseline   bool
}

// mnemeAliases maps Mneme's flag names that mean one of our flags to ours.
var mnemeAliases = map[string]string{
	"record-database": "rdb", "record-db": "rdb", "record-id": "rid",
	"space-preset": "preset", "results-dir": "output",
}

// registerMneme defines Mneme's flags on fl, bound to the same options.
func (f *tuneFlags) registerMneme(fl *pflag.FlagSet) {
	o := &f.opts
	fl.StringVar(&o.DB, "record-database", "", "Mneme's -rdb")
	fl.StringVar(&o.DB, "record-db", "", "Mneme's -rdb")
	fl.StringVar(&o.Instance, "record-id", "", "Mneme's -rid")
	fl.StringVar(&o.Preset, "space-preset", "standard", "Mneme's --preset (the same built-in spaces)")
	fl.StringVar(&o.Output, "results-dir", "", "Mneme's --output (default with Mneme's spellings: mneme-tune-results/TIMESTAMP)")
	fl.StringVar(&o.LaunchDim, "launch-dim", "", "block axes the preset searches: none, auto, x, xy or xyz (z stays as recorded)")
	fl.StringArrayVar(&o.Passes, mneme.KeyPasses, nil, "pipelines to choose from (Mneme's --passes P1 P2 ...; repeatable)")
	fl.StringVar(&o.FixedPasses, "fixed-passes", "", "one pipeline for every trial")
	fl.StringVar(&o.PipelineFile, "pipeline-file", "", "pipelines to choose from, one a line (# comments)")
	fl.StringVar(&o.CodegenOptRange, "codegen-opt-range", "", "codegen levels to search, LO:HI[:STEP] within 0..3")
	fl.IntVar(&f.mneme.fixedCodegenOpt, "fixed-codegen-opt", 3, "one codegen level 0..3 for every trial")
	fl.StringVar(&o.SpecializeSpace, "specialize-space", "", "argument specialization: fixed, on, off or on-off (searched)")
	fl.StringVar(&o.SpecializeDimsSpace, "specialize-dims-space", "", "launch-dimension specialization: fixed, on, off or on-off")
	fl.StringVar(&o.LaunchBoundsSpace, "launch-bounds-space", "", "launch bounds: fixed, on, off or on-off")
	fl.StringVar(&o.MaxThreadsPolicy, "max-threads-policy", "", "max_threads with launch bounds: block-threads, recorded, hardware or powers-of-two")
	fl.StringVar(&o.MaxThreadsRange, "max-threads-range", "", "max_threads values to search with launch bounds, LO:HI[:STEP]")
	fl.StringVar(&o.MinBlocksPerSMRange, "min-blocks-per-sm-range", "", "min_blocks_per_sm values to search with launch bounds, LO:HI[:STEP]")
	fl.BoolVar(&o.FailFast, "fail-fast", false, "stop at the first trial that does not verify")
	fl.BoolVar(&f.mneme.keepGoing, "keep-going", false, "go on past trials that fail (the default)")
	fl.Float64Var(&o.Timeout, "timeout", 0, "stop submitting trials after this many seconds (0: no limit)")
	fl.BoolVar(&f.mneme.rerunBaseline, "rerun-baseline", false, "with --resume, replay the baseline again (every run does)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fl.StringVar(&o.SpaceModule, "space-module", "", "a Python SearchSpace class, <file>.py:Class or module:Class (run by Python; see tune/PROTOCOL.md)")
	fl.StringArrayVar(&o.SpaceArgs, "space-arg", nil, "KEY=VALUE keyword argument of the --space-module class (VALUE read as JSON when it parses); repeatable")
	fl.StringVar(&o.StudyName, "study-name", "", "Optuna study name (--sampler tpe through Optuna)")
	fl.StringVar(&o.OptunaStorage, "optuna-storage", "", "Optuna storage URL, e.g. sqlite:///study.db (--sampler tpe through Optuna)")
	fl.StringVar(&o.Pruner, "pruner", "", "Optuna pruner: "+strings.Join(tune.PrunerNames, ", "))
	fl.StringVar(&o.ProteusOutput, "proteus-output", "", "also write the Proteus tuned-kernels file there")
	fl.BoolVar(&o.NoProteusOutput, "no-proteus-output", false, "write no Proteus tuned-kernels file")
}

// mnemeOnlyTuneFlags are the flags only Mneme's spelling has; any of them
// makes the command line Mneme's, which picks Mneme's defaults.
var mnemeOnlyTuneFlags = map[string]bool{
	"record-database": true, "record-db": true, "record-id": true,
	"space-module": true, "space-arg": true, "space-preset": true, "launch-dim": true,
	mneme.KeyPasses: true, "fixed-passes": true, "pipeline-file": true,
	"codegen-opt-range": true, "fixed-codegen-opt": true,
	"specialize-space": true, "specialize-dims-space": true, "launch-bounds-space": true,
	"max-threads-policy": true, "max-threads-range": true, "min-blocks-per-sm-range": true,
	"fail-fast": true, "keep-going": true, "timeout": true,
	"results-dir": true, "rerun-baseline": true, "quiet": true,
	"study-name": true, "optuna-storage": true, "pruner": true,
	"proteus-output": true, "no-proteus-output": true,
}

// mnemeDefaults are Mneme's defaults where they differ from ours; a command
// line or config file in Mneme's spelling gets them.
var mnemeDefaults = map[string]string{
	"sampler": "random", "iterations": "5", "warmup": "2", "metric": "mean", "objective": "time",
}

// mnemeConfigKeys maps Mneme's config.yml keys to ours where they differ.
var mnemeConfigKeys = map[string]string{
	"record_database": "db", "record_db": "db", "record_id": "instance",
	"space_preset": "preset", "results_dir": "output",
}

// preprocessMnemeArgs rewrites Mneme's argparse forms to pflag's: --passes
// takes every following word that is not a flag (nargs="+"), and
// --dump-config PATH takes its path. It stops at "--".
func preprocessMnemeArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case a == "--passes":
			n := 0
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				n++
				out = append(out, "--passes="+args[i])
			}
			if n == 0 {
				out = append(out, a) // pflag reports the missing value
			}
		case a == "--dump-config" && i+1 < len(args) && (args[i+1] == "-" || !strings.HasPrefix(args[i+1], "-")):
			i++
			out = append(out, "--dump-config="+args[i])
		default:
			out = append(out, a)
		}
	}
	return out
}

// isMnemeTuneCommandLine reports whether args (after "tune") are written
// in Mneme's spelling: a flag only Mneme has, --dump-config with a path,
// or a --config file with one of Mneme's keys.
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
			if hasValue && value != "-" || !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
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

// configHasMnemeKeys reports whether the JSON or YAML file holds a key only
// Mneme's spelling has. An unreadable file is left to --config to report.
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
		k = strings.ReplaceAll(k, "-", "_")
		if k == "search" || mnemeOnlyTuneFlags[strings.ReplaceAll(k, "_", "-")] {
			return true
		}
	}
	return false
}

// applyMnemeDefaults sets Mneme's defaults on the flags the command line
// did not give.
func applyMnemeDefaults(fl *pflag.FlagSet) error {
	for name, v := range mnemeDefaults {
		if fl.Changed(name) {
			continue
		}
		if err := fl.Set(name, v); err != nil {
			return err
		}
		// Set marks the flag given; it is a default still, which the
		// config file may override.
		fl.Lookup(name).Changed = false
	}
	return nil
}

// mnemeFlagValues folds Mneme's flags that are not Options fields into opts.
func mnemeFlagValues(fl *pflag.FlagSet, f *tuneFlags, opts *tune.Options) error {
	if fl.Changed("keep-going") && f.mneme.keepGoing {
		if fl.Changed("fail-fast") && opts.FailFast {
			return fmt.Errorf("--fail-fast and --keep-going: give one")
		}
		opts.FailFast = false
	}
	if fl.Changed("fixed-codegen-opt") {
		n := f.mneme.fixedCodegenOpt
		opts.FixedCodegenOpt = &n
	}
	return nil
}

// translateConfigKeys rewrites a config file's keys to ours: a nested
// `search:` mapping is flattened, dashes become underscores, Mneme's names
// become ours, keep_going becomes fail_fast, and Mneme's value forms
// (a pipeline or a range as one scalar, space_arg as a mapping) become the
// options' types. quiet and rerun_baseline act on the run and are returned
// apart.
func translateConfigKeys(file string, doc map[string]any) (map[string]any, map[string]any, error) {
	flat := map[string]any{}
	for k, v := range doc {
		if k == "search" {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, nil, fmt.Errorf("--config %s: search: want a mapping of option to value", file)
			}
			for sk, sv := range m {
				flat[sk] = sv
			}
			continue
		}
		flat[k] = v
	}
	out, run := map[string]any{}, map[string]any{}
	for k, v := range flat {
		k = strings.ReplaceAll(k, "-", "_")
		if ours, ok := mnemeConfigKeys[k]; ok {
			k = ours
		}
		switch k {
		case "keep_going":
			b, ok := v.(bool)
			if !ok {
				return nil, nil, fmt.Errorf("--config %s: keep_going: want true or false, got %v", file, v)
			}
			k, v = "fail_fast", !b
		case "quiet", "rerun_baseline":
			run[k] = v
			continue
		case mneme.KeyPasses, "space_arg":
			switch x := v.(type) {
			case string:
				v = []any{x}
			case map[string]any:
				var items []any
				for mk, mv := range x {
					b, _ := json.Marshal(mv)
					items = append(items, mk+"="+string(b))
				}
				v = items
			}
		case "codegen_opt_range", "max_threads_range", "min_blocks_per_sm_range":
			switch x := v.(type) {
			case int, float64:
				v = fmt.Sprint(x)
			}
		}
		if _, dup := out[k]; dup {
			return nil, nil, fmt.Errorf("--config %s: %s is given twice (in two spellings)", file, k)
		}
		out[k] = v
	}
	return out, run, nil
}

// defaultMnemeResultsDir is Mneme's default results folder.
func defaultMnemeResultsDir(now time.Time) string {
	return filepath.Join("mneme-tune-results", now.UTC().Format("20060102-150405"))
}

// dumpConfig writes the effective options to path ("-": stdout) as YAML,
// or as JSON when path ends in .json. It refuses to write through a link
// or into anything but a regular file.
func dumpConfig(stdout io.Writer, path string, opts tune.Options) error {
	var data []byte
	var err error
	if strings.HasSuffix(path, ".json") {
		data, err = json.MarshalIndent(opts, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(opts)
	}
	if err != nil {
		return err
	}
	if path == "-" || path == "" {
		_, err = stdout.Write(data)
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return withExit(exitUsage, fmt.Errorf("--dump-config %s: %w", path, err))
	}
	f, err := safefile.CreateIn(filepath.Dir(abs), filepath.Base(abs), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return withExit(exitUsage, fmt.Errorf("--dump-config: %w", err))
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("--dump-config %s: %w", path, err)
	}
	return f.Close()
}

// mnemePython finds the Python that has the mneme package, for a
// --space-module class or an Optuna study: $MNEME_PYTHON, else the .venv of
// the tree the binary was built in (PREFIX/bin/mneme or
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
		return "", fmt.Errorf("--space-module and Optuna studies need Python with the mneme package: set MNEME_PYTHON, " +
			"or run ./scripts/setup.sh (it makes .venv), or put python3 with `pip install ./python` on PATH")
	}
	return p, nil
}
