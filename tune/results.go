package tune

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/internal/jsonfield"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"gonum.org/v1/gonum/stat"
)

// Trial is one line of trials.jsonl.
type Trial struct {
	Number    int           `json:"number"`
	Params    Point         `json:"params"`
	Config    mneme.Config  `json:"config"`
	ConfigKey string        `json:"config_key"`
	Status    mneme.Status  `json:"status"`
	Result    *mneme.Result `json:"result,omitempty"`
	// TimeNS is the metric over the timed iterations; Value is the
	// objective (time in ns, or speedup over the baseline). Both are 0 for
	// trials that did not verify.
	TimeNS  float64 `json:"time_ns"`
	Value   float64 `json:"value"`
	Speedup float64 `json:"speedup"`
	Worker  int     `json:"worker"`
	GPU     int     `json:"gpu"`
	Start   string  `json:"start_time"`
	End     string  `json:"end_time"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
	// Instances are the trial's figures on each instance of a run across
	// instances; TimeNS is then their total, each instance's time times the
	// launches it stands for.
	Instances []InstanceFigure `json:"instances,omitempty"`
	// VariantCostNS is the part of TimeNS that is the first launches of the
	// configuration's variants beyond one (across instances).
	VariantCostNS float64 `json:"variant_cost_ns,omitempty"`
}

// OK reports whether the trial produced a verified timing.
func (t Trial) OK() bool { return t.Status == mneme.StatusVerified && t.TimeNS > 0 }

// MetricOf applies a metric to per-iteration times; NaN when there are none.
func MetricOf(metric string, xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	switch metric {
	case "median":
		return stat.Quantile(0.5, stat.Empirical, s, nil)
	case "min":
		return s[0]
	case "max":
		return s[len(s)-1]
	default:
		return stat.Mean(s, nil)
	}
}

// Loss is what samplers minimize: the time for either objective (a speedup
// over a fixed baseline orders trials the same way), +Inf for failures.
func (t Trial) Loss() float64 {
	if !t.OK() {
		return math.Inf(1)
	}
	return t.TimeNS
}

// Results is an open results directory, one per tuning run: config.json
// (the run's settings), search_space.json, baseline.json, trials.jsonl (one
// line per finished trial, appended as they finish), best.json, summary.json,
// logs/tune.log and the tuned-kernel exports.
type Results struct {
	Dir    string
	mu     sync.Mutex
	trials *os.File
}

// Results directory file names.
const (
	ConfigFile        = "config.json"
	SearchSpaceFile   = "search_space.json"
	BaselineFile      = "baseline.json"
	TrialsFile        = "trials.jsonl"
	BestFile          = "best.json"
	SummaryFile       = "summary.json"
	LogFile           = "logs/tune.log"
	ProteusFile       = "proteus_tuned_kernels.json"
	MnemeTunedFile    = "mneme_tuned_kernels.json"
	GeometryFile      = "geometry.json"
	trialsPermissions = 0o644
)

// maxTrialsFile bounds trials.jsonl, read whole on resume: about a million
// trials.
const maxTrialsFile = 2 << 30

// CreateResults prepares dir for a new run. A directory that already holds
// trials is refused, so a finished run is never overwritten by accident, and
// so is a non-empty directory that is not a results directory (no
// config.json), so a run never writes over files of something else.
func CreateResults(dir string, opts Options) (*Results, error) {
	if _, err := os.Lstat(filepath.Join(dir, TrialsFile)); err == nil {
		return nil, fmt.Errorf("results directory %s already holds %s: use --resume to continue it, or choose another --output", dir, TrialsFile)
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("results directory %s: %w", dir, err)
	}
	if len(entries) > 0 {
		if _, err := readConfig(dir); err != nil {
			return nil, fmt.Errorf("--output %s is not empty and is not a results directory (%v): choose an empty or new directory", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("results directory %s: %w", dir, err)
	}
	return openResults(dir, opts)
}

// openResults makes the logs directory, writes config.json and opens
// trials.jsonl for appending, none of them through a link that leads out of
// dir.
func openResults(dir string, opts Options) (*Results, error) {
	if err := safefile.MkdirIn(dir, filepath.Dir(LogFile)); err != nil {
		return nil, fmt.Errorf("results directory %s: %w", dir, err)
	}
	r := &Results{Dir: dir}
	if err := r.WriteJSON(ConfigFile, opts); err != nil {
		return nil, err
	}
	f, err := safefile.CreateIn(dir, TrialsFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, trialsPermissions)
	if err != nil {
		return nil, fmt.Errorf("results directory %s: %w", dir, err)
	}
	r.trials = f
	return r, nil
}

// readConfig reads the config.json of a results directory.
func readConfig(dir string) (Options, error) {
	var old Options
	path := filepath.Join(dir, ConfigFile)
	data, err := safefile.ReadFileIn(dir, ConfigFile, safefile.MaxJSON)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return old, fmt.Errorf("no %s", ConfigFile)
		}
		return old, err
	}
	if err := jsonfield.Check(data); err != nil {
		return old, fmt.Errorf("%s: %w", path, err)
	}
	if err := json.Unmarshal(data, &old); err != nil {
		return old, fmt.Errorf("%s: %v", path, err)
	}
	return old, nil
}

// ResumeResults reopens dir: it refuses changed key options (listing them),
// reads the finished trials back (dropping a torn last line, which a crash
// mid-write leaves) and appends from there. It writes only files of the
// results directory, never through a link.
func ResumeResults(dir string, opts Options) (*Results, []Trial, error) {
	old, err := readConfig(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--resume: %w", err)
	}
	if ch := KeyChanges(old, opts); len(ch) > 0 {
		return nil, nil, fmt.Errorf("--resume: %s was tuned with other key options; changed: %s (start a new --output, or use the old values)", dir, strings.Join(ch, "; "))
	}
	data, err := safefile.ReadFileIn(dir, TrialsFile, maxTrialsFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("--resume: %w", err)
	}
	trials, good, unterminated, err := parseTrials(filepath.Join(dir, TrialsFile), data)
	if err != nil {
		return nil, nil, err
	}
	r, err := openResults(dir, opts)
	if err != nil {
		return nil, nil, err
	}
	// Cut a torn last line through the descriptor just opened, which is
	// the results directory's own regular file, not a link's target.
	if int64(len(data)) > good {
		if err := r.trials.Truncate(good); err != nil {
			r.Close()
			return nil, nil, fmt.Errorf("--resume: %s: %w", filepath.Join(dir, TrialsFile), err)
		}
	}
	// A complete last trial whose newline is missing (written by hand, or
	// by another tool) is kept: end its line before the next one.
	if unterminated {
		if _, err := r.trials.Write([]byte("\n")); err != nil {
			r.Close()
			return nil, nil, fmt.Errorf("--resume: %s: %w", filepath.Join(dir, TrialsFile), err)
		}
	}
	return r, trials, nil
}

// ReadTrials reads trials.jsonl. A last line without its newline that does
// not parse as a trial is a torn write (a crash mid-write) and is dropped;
// one that does is a whole trial and is kept. Any complete line that does
// not parse is an error naming the line. good is the byte length of the
// intact prefix.
func ReadTrials(path string) (trials []Trial, good int64, err error) {
	data, err := safefile.ReadFile(path, maxTrialsFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	trials, good, _, err = parseTrials(path, data)
	return trials, good, err
}

// parseTrials reads the lines of trials.jsonl; unterminated says the last
// one, kept, lacks its newline.
func parseTrials(path string, data []byte) (trials []Trial, good int64, unterminated bool, err error) {
	off := 0
	for line := 1; off < len(data); line++ {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			// No newline: a torn write, unless the line is a whole trial.
			var t Trial
			text := bytes.TrimSpace(data[off:])
			if len(text) > 0 && jsonfield.Check(text) == nil && json.Unmarshal(text, &t) == nil {
				return append(trials, t), int64(len(data)), true, nil
			}
			return trials, int64(off), false, nil
		}
		text := bytes.TrimSpace(data[off : off+end])
		if len(text) > 0 {
			var t Trial
			if err := jsonfield.Check(text); err != nil {
				return nil, 0, false, mneme.BadInput(fmt.Errorf("%s:%d: not a trial record: %v", path, line, err))
			}
			if err := json.Unmarshal(text, &t); err != nil {
				return nil, 0, false, mneme.BadInput(fmt.Errorf("%s:%d: not a trial record: %v", path, line, err))
			}
			trials = append(trials, t)
		}
		off += end + 1
	}
	return trials, int64(off), false, nil
}

// AppendTrial writes one trial line and syncs it to disk before returning, so
// a crash loses at most the trial being written.
func (r *Results) AppendTrial(t Trial) error {
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("trial %d: %w", t.Number, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.trials.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(r.Dir, TrialsFile), err)
	}
	return r.trials.Sync()
}

// Close closes the trials file.
func (r *Results) Close() error {
	if r.trials == nil {
		return nil
	}
	return r.trials.Close()
}

// WriteJSON writes name (relative to the directory) atomically.
func (r *Results) WriteJSON(name string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // pipelines are written default<O3>
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	// The file is replaced by a rename, which replaces a link rather than
	// writing through it; its folder must not lead out of the directory.
	if sub := filepath.Dir(name); sub != "." {
		if err := safefile.MkdirIn(r.Dir, sub); err != nil {
			return err
		}
	}
	return db.WriteFileAtomic(filepath.Join(r.Dir, name), buf.Bytes())
}

// Best returns the verified trials ordered fastest first.
func Best(trials []Trial) []Trial {
	var ok []Trial
	for _, t := range trials {
		if t.OK() {
			ok = append(ok, t)
		}
	}
	sort.SliceStable(ok, func(i, j int) bool { return ok[i].TimeNS < ok[j].TimeNS })
	return ok
}

// Summary is summary.json.
type Summary struct {
	Kernel          string               `json:"kernel"`
	Trials          int                  `json:"trials"`
	Statuses        map[mneme.Status]int `json:"statuses"`
	BaselineTimeNS  float64              `json:"baseline_time_ns"`
	BestTimeNS      float64              `json:"best_time_ns,omitempty"`
	BestSpeedup     float64              `json:"best_speedup"`
	BestTrial       int                  `json:"best_trial"`
	ElapsedSeconds  float64              `json:"elapsed_seconds"`
	ConfigsPerSec   float64              `json:"configs_per_second"`
	SpaceSize       int64                `json:"space_size,omitempty"`
	Sampler         string               `json:"sampler"`
	Metric          string               `json:"metric"`
	Objective       string               `json:"objective"`
	ResumedTrials   int                  `json:"resumed_trials,omitempty"`
	InstanceTunedOn string               `json:"instance"`
	// Baseline says what trial 0 ran: the application's own code or the
	// recompiled recorded configuration.
	Baseline string `json:"baseline"`
	// BaselineIsBest is true when no configuration beat the baseline; the
	// best figures are then the baseline's (speedup 1, best_trial -1).
	BaselineIsBest bool `json:"baseline_is_best"`
	// LaunchSafety, GeometryDependent, LaunchSearched and Geometry (one
	// line) say whether block shapes were searched, and why.
	LaunchSafety      string `json:"launch_safety,omitempty"`
	GeometryDependent bool   `json:"geometry_dependent"`
	LaunchSearched    bool   `json:"launch_searched"`
	Geometry          string `json:"geometry,omitempty"`
	// BlockRule says which rule limited the block shapes searched (see
	// GeometryReport.BlockRule).
	BlockRule string `json:"block_rule,omitempty"`
	// Folding says what the run might fold and what that rested on (the
	// run's launch statistics, or none), when it was decided from them.
	Folding string `json:"folding,omitempty"`
	// BannedBlocks are the block shapes the adaptive invalid ban took out of
	// the search; BannedSkips counts the proposals skipped for them.
	BannedBlocks []string `json:"banned_blocks,omitempty"`
	BannedSkips  int      `json:"banned_skips,omitempty"`
	// FailurePattern names the parameter value the failed trials share,
	// when one does (FailurePattern).
	FailurePattern string `json:"failure_pattern,omitempty"`

	// Mneme's summary keys. Status is ok, timeout or stopped_fail_fast; the
	// counts are of the tuned trials (the baseline, trial 0, is not one of
	// them; timeout and crashed count as runtime errors, as Mneme counts
	// them); the metrics are times in ns by --metric.
	Status                string  `json:"status"`
	NumTrialsRequested    *int    `json:"num_trials_requested"`
	NumTrialsCompleted    int     `json:"num_trials_completed"`
	NumVerified           int     `json:"num_verified"`
	NumFailedVerification int     `json:"num_failed_verification"`
	NumInvalidLaunch      int     `json:"num_invalid_launch"`
	NumCompileError       int     `json:"num_compile_error"`
	NumRuntimeError       int     `json:"num_runtime_error"`
	NumInvalidConfig      int     `json:"num_invalid_config"`
	NumInternalError      int     `json:"num_internal_error"`
	BaselineMetric        float64 `json:"baseline_metric"`
	BestMetric            float64 `json:"best_metric"`
}

// mnemeCounts fills Mneme's summary keys from the trials.
func (sum *Summary) mnemeCounts(trials []Trial, requested int, stopped string) {
	sum.Status = "ok"
	if stopped != "" {
		sum.Status = stopped
	}
	if requested > 0 {
		sum.NumTrialsRequested = &requested
	}
	for _, t := range trials {
		if t.IsBaseline() {
			continue
		}
		sum.NumTrialsCompleted++
		switch t.Status {
		case mneme.StatusVerified:
			sum.NumVerified++
		case mneme.StatusFailedVerification:
			sum.NumFailedVerification++
		case mneme.StatusInvalidLaunch:
			sum.NumInvalidLaunch++
		case mneme.StatusCompileError:
			sum.NumCompileError++
		case mneme.StatusRuntimeError, mneme.StatusTimeout, mneme.StatusCrashed:
			sum.NumRuntimeError++
		case mneme.StatusInvalidConfig:
			sum.NumInvalidConfig++
		default:
			sum.NumInternalError++
		}
	}
}
