package tune

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/deploy"
	"github.com/mneme-gpu/mneme/internal/jsonfield"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"gonum.org/v1/gonum/stat"
)

// Options are a tuning run's settings: config.json of the results directory,
// the --config/--dump-config YAML, and what --resume compares.
type Options struct {
	DB           string              `json:"db" yaml:"db"`
	Instance     string              `json:"instance" yaml:"instance"`
	Kernel       string              `json:"kernel,omitempty" yaml:"kernel,omitempty"`
	Sampler      string              `json:"sampler" yaml:"sampler"`
	Preset       string              `json:"preset" yaml:"preset"`
	SpaceFile    string              `json:"space_file,omitempty" yaml:"space_file,omitempty"`
	SpaceHash    string              `json:"space_hash,omitempty" yaml:"-"`
	Trials       int                 `json:"trials" yaml:"trials"`
	Workers      int                 `json:"workers" yaml:"workers"`
	GPUs         []int               `json:"gpus" yaml:"gpus"`
	Iterations   int                 `json:"iterations" yaml:"iterations"`
	Warmup       int                 `json:"warmup" yaml:"warmup"`
	Metric       string              `json:"metric" yaml:"metric"`
	Objective    string              `json:"objective" yaml:"objective"`
	Seed         uint64              `json:"seed" yaml:"seed"`
	TrialTimeout string              `json:"trial_timeout,omitempty" yaml:"trial_timeout,omitempty"`
	Output       string              `json:"output" yaml:"output"`
	Verify       mneme.VerifyOptions `json:"verify" yaml:"verify"`
	CacheDir     string              `json:"cache_dir,omitempty" yaml:"cache_dir,omitempty"`
	// LaunchSafety is LaunchSafe (a geometry-dependent kernel keeps its
	// recorded launch) or LaunchAggressive (block shapes are searched
	// anyway); empty means safe.
	LaunchSafety string `json:"launch_safety" yaml:"launch_safety"`
	// AdaptiveInvalidBan bans a block shape from further sampling once a
	// trial with it ends invalid_launch or runtime_error.
	AdaptiveInvalidBan bool `json:"adaptive_invalid_ban" yaml:"adaptive_invalid_ban"`
	// SpaceShape reshapes the preset with Mneme's space options; its keys
	// sit at the top level, as in Mneme's config.yml.
	SpaceShape `yaml:",inline"`
	// FailFast stops the search at the first trial that does not verify;
	// Timeout (seconds, 0: none) stops submitting trials after that long.
	FailFast bool    `json:"fail_fast,omitempty" yaml:"fail_fast,omitempty"`
	Timeout  float64 `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// ProteusOutput also writes the Proteus tuned-kernels file there;
	// NoProteusOutput writes none, not even in the results directory.
	ProteusOutput   string `json:"proteus_output,omitempty" yaml:"proteus_output,omitempty"`
	NoProteusOutput bool   `json:"no_proteus_output,omitempty" yaml:"no_proteus_output,omitempty"`
	// SpaceModule (<file>.py:Class or module:Class, with SpaceArgs as
	// KEY=VALUE) is a user's Python SearchSpace; it and an Optuna study
	// (StudyName, OptunaStorage, Pruner) are proposed by the Python side
	// (PROTOCOL.md, "Proposals from Python").
	SpaceModule   string   `json:"space_module,omitempty" yaml:"space_module,omitempty"`
	SpaceArgs     []string `json:"space_arg,omitempty" yaml:"space_arg,omitempty"`
	StudyName     string   `json:"study_name,omitempty" yaml:"study_name,omitempty"`
	OptunaStorage string   `json:"optuna_storage,omitempty" yaml:"optuna_storage,omitempty"`
	Pruner        string   `json:"pruner,omitempty" yaml:"pruner,omitempty"`
}

// PrunerNames are the Optuna pruners --pruner names.
var PrunerNames = []string{"none", "median", "percentile", "hyperband", "successive-halving", "threshold"}

// UsesPython reports whether the run's proposals come from Python: a user's
// SearchSpace class or an Optuna study.
func (o Options) UsesPython() bool {
	return o.SpaceModule != "" || o.StudyName != "" || o.OptunaStorage != "" || (o.Pruner != "" && o.Pruner != "none")
}

// Launch safety levels.
const (
	LaunchSafe       = "safe"
	LaunchAggressive = "aggressive"
)

// LaunchSafetyNames are the accepted --launch-safety values: ours, and
// Mneme's spellings of them.
var LaunchSafetyNames = []string{LaunchSafe, LaunchAggressive, "conservative", "balanced"}

// ParseLaunchSafety maps a --launch-safety value to LaunchSafe or
// LaunchAggressive. Mneme's "conservative" and "balanced" both keep a
// geometry-dependent kernel's launch: "balanced" in Mneme still changes block
// shapes of kernels it cannot prove safe, which is what produced the invalid
// and unverified trials safe mode exists to avoid. Empty means safe.
func ParseLaunchSafety(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", LaunchSafe, "conservative", "balanced":
		return LaunchSafe, nil
	case LaunchAggressive:
		return LaunchAggressive, nil
	}
	return "", fmt.Errorf("--launch-safety %q: want safe or aggressive (Mneme's conservative and balanced mean safe)", s)
}

// Metric names and objectives.
var (
	MetricNames    = []string{"mean", "median", "min", "max"}
	ObjectiveNames = []string{"time", "speedup"}
)

// Validate checks the option values that have fixed vocabularies.
func (o Options) Validate() error {
	if !slices.Contains(MetricNames, o.Metric) {
		return fmt.Errorf("metric %q: want %s", o.Metric, strings.Join(MetricNames, ", "))
	}
	if !slices.Contains(ObjectiveNames, o.Objective) {
		return fmt.Errorf("objective %q: want %s", o.Objective, strings.Join(ObjectiveNames, ", "))
	}
	if !slices.Contains(SamplerNames, o.Sampler) {
		return fmt.Errorf("sampler %q: want %s", o.Sampler, strings.Join(SamplerNames, ", "))
	}
	if o.Iterations < 1 {
		return fmt.Errorf("iterations %d: must be at least 1", o.Iterations)
	}
	if o.Warmup < 0 {
		return fmt.Errorf("warmup %d: must not be negative", o.Warmup)
	}
	if o.Workers < 1 {
		return fmt.Errorf("workers %d: must be at least 1", o.Workers)
	}
	if o.Trials < 0 {
		return fmt.Errorf("trials %d: must not be negative (0: the whole space)", o.Trials)
	}
	if _, err := ParseLaunchSafety(o.LaunchSafety); err != nil {
		return err
	}
	if err := o.SpaceShape.Validate(); err != nil {
		return err
	}
	if !o.SpaceShape.IsZero() && (o.SpaceFile != "" || o.SpaceModule != "") {
		return fmt.Errorf("the space options of Mneme's spelling (--launch-dim, --passes, --*-space, ...) shape a preset; they do not apply with --space or --space-module")
	}
	if o.SpaceFile != "" && o.SpaceModule != "" {
		return fmt.Errorf("--space and --space-module: give one")
	}
	if o.Timeout < 0 {
		return fmt.Errorf("timeout %v: must not be negative", o.Timeout)
	}
	if o.Pruner != "" && !slices.Contains(PrunerNames, o.Pruner) {
		return fmt.Errorf("pruner %q: want %s", o.Pruner, strings.Join(PrunerNames, ", "))
	}
	if (o.StudyName != "" || o.OptunaStorage != "" || (o.Pruner != "" && o.Pruner != "none")) && o.Sampler != "tpe" {
		return fmt.Errorf("--study-name, --optuna-storage and --pruner need --sampler tpe (an Optuna study)")
	}
	if o.ProteusOutput != "" && o.NoProteusOutput {
		return fmt.Errorf("--proteus-output and --no-proteus-output exclude each other")
	}
	return nil
}

// KeyChanges lists the options that must not change between a run and its
// resumption, each as "name: old -> new".
func KeyChanges(old, cur Options) []string {
	var out []string
	cmp := func(name string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			out = append(out, fmt.Sprintf("%s: %v -> %v", name, a, b))
		}
	}
	cmp("sampler", canonicalSampler(old.Sampler), canonicalSampler(cur.Sampler))
	cmp("preset", old.Preset, cur.Preset)
	cmp("space", old.SpaceHash, cur.SpaceHash)
	cmp("space_module", old.SpaceModule, cur.SpaceModule)
	cmp("space_arg", strings.Join(old.SpaceArgs, " "), strings.Join(cur.SpaceArgs, " "))
	cmp("seed", old.Seed, cur.Seed)
	cmp("metric", old.Metric, cur.Metric)
	cmp("objective", old.Objective, cur.Objective)
	cmp("iterations", old.Iterations, cur.Iterations)
	cmp("instance", old.Instance, cur.Instance)
	cmp("kernel", old.Kernel, cur.Kernel)
	oldSafety, _ := ParseLaunchSafety(old.LaunchSafety)
	curSafety, _ := ParseLaunchSafety(cur.LaunchSafety)
	cmp("launch_safety", oldSafety, curSafety)
	return out
}

func canonicalSampler(s string) string {
	if s == "grid" {
		return "exhaustive"
	}
	return s
}

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

// ProteusKernel is one entry of Proteus's PROTEUS_TUNED_KERNELS file,
// defined in deploy, whose runtime reads it.
type ProteusKernel = deploy.ProteusKernel

var optLevelRE = regexp.MustCompile(`^default<O([0-3sz])>$`)

// ProteusEntry converts a configuration to Proteus's schema. Proteus's
// OptLevel is the level of the default pipeline; a custom pipeline keeps "3"
// and travels in Pipeline. TunedMaxThreads is -1 without launch bounds, as
// Proteus's default.
func ProteusEntry(c mneme.Config) ProteusKernel {
	p := ProteusKernel{Pipeline: c.Passes, CodeGen: "serial", SpecializeArgs: c.Specialize,
		LaunchBounds: c.SetLaunchBounds, SpecializeDims: c.SpecializeDims, SpecializeDimsRange: c.SpecializeDims,
		OptLevel: "3", CodeGenOptLevel: c.CodegenOpt, TunedMaxThreads: -1, MinBlocksPerSM: c.MinBlocksPerSM}
	if m := optLevelRE.FindStringSubmatch(c.Passes); m != nil {
		p.OptLevel = m[1]
	}
	if c.SetLaunchBounds {
		p.TunedMaxThreads = c.MaxThreads
	}
	return p
}

// writeProteus adds the kernel's entry to the results directory's Proteus
// file and to --proteus-output, unless --no-proteus-output.
func (s *Study) writeProteus(kernel string, e ProteusKernel) error {
	if s.Opts.NoProteusOutput {
		return nil
	}
	if err := s.Results.MergeJSONMap(ProteusFile, kernel, e); err != nil {
		return err
	}
	if s.Opts.ProteusOutput == "" {
		return nil
	}
	abs, err := filepath.Abs(s.Opts.ProteusOutput)
	if err != nil {
		return fmt.Errorf("--proteus-output %s: %w", s.Opts.ProteusOutput, err)
	}
	// The file's own folder bounds it: a link named like the file is
	// replaced, never written through.
	out := &Results{Dir: filepath.Dir(abs)}
	if err := out.MergeJSONMap(filepath.Base(abs), kernel, e); err != nil {
		return fmt.Errorf("--proteus-output: %w", err)
	}
	return nil
}

// TunedKernel is one entry of mneme_tuned_kernels.json, defined in deploy,
// whose runtime reads it.
type TunedKernel = deploy.TunedKernel

// MergeJSONMap reads name (a JSON object keyed by kernel) if present, sets
// key to v, and writes it back atomically, so several kernels tuned into the
// same directory accumulate.
func (r *Results) MergeJSONMap(name, key string, v any) error {
	m := map[string]json.RawMessage{}
	data, err := safefile.ReadFileIn(r.Dir, name, safefile.MaxJSON)
	switch {
	case err == nil:
		if err := jsonfield.Check(data); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(r.Dir, name), err)
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("%s: %v", filepath.Join(r.Dir, name), err)
		}
		if m == nil {
			return fmt.Errorf("%s: not a JSON object keyed by kernel", filepath.Join(r.Dir, name))
		}
		for k, v := range m {
			if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
				return fmt.Errorf("%s: %q: want an object (one kernel's entry)", filepath.Join(r.Dir, name), k)
			}
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m[key] = b
	return r.WriteJSON(name, m)
}
