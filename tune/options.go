package tune

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mneme-gpu/mneme"
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
	// ColdL2 times every trial with the L2 cache evicted before each
	// launch (replay.Options.ColdL2).
	ColdL2 bool `json:"cold_l2,omitempty" yaml:"cold_l2,omitempty"`
	// Timer times the trials' launches: auto (CUPTI when it loads, else
	// events; the default when empty), cupti or events (replay's --timer).
	// The application's own in-application timing (deploy measure) is by
	// events, so events make replay's figures comparable to it.
	Timer string `json:"timer,omitempty" yaml:"timer,omitempty"`
	// VariantCostUS is what each variant beyond one costs a configuration
	// across instances (its first launch in the application), in
	// microseconds; the command line's default is VariantFirstLaunchNS.
	VariantCostUS float64 `json:"variant_cost_us,omitempty" yaml:"variant_cost_us,omitempty"`
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

// UsesPython reports whether the run's proposals come from Python: a user's
// SearchSpace class or an Optuna study.
func (o Options) UsesPython() bool {
	return o.SpaceModule != "" || o.StudyName != "" || o.OptunaStorage != "" || (o.Pruner != "" && o.Pruner != "none")
}

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
	if !slices.Contains(TimerNames, o.Timer) {
		return fmt.Errorf("timer %q: want auto, cupti or events", o.Timer)
	}
	if o.VariantCostUS < 0 || math.IsNaN(o.VariantCostUS) || math.IsInf(o.VariantCostUS, 0) {
		return fmt.Errorf("variant-cost-us %v: want a duration in microseconds, 0 or more", o.VariantCostUS)
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
	cmp("cold_l2", old.ColdL2, cur.ColdL2) // times of a warm and a cold L2 do not rank together
	cmp("variant_cost_us", old.VariantCostUS, cur.VariantCostUS)
	cmp("timer", canonicalTimer(old.Timer), canonicalTimer(cur.Timer)) // times by two timers do not rank together
	cmp("instance", old.Instance, cur.Instance)
	cmp("kernel", old.Kernel, cur.Kernel)
	oldSafety, _ := ParseLaunchSafety(old.LaunchSafety)
	curSafety, _ := ParseLaunchSafety(cur.LaunchSafety)
	cmp("launch_safety", oldSafety, curSafety)
	return out
}

// TimerNames are the values of Options.Timer ("" is auto).
var TimerNames = []string{"", "auto", "cupti", "events"}

func canonicalTimer(t string) string {
	if t == "" {
		return "auto"
	}
	return t
}

func canonicalSampler(s string) string {
	if s == "grid" {
		return "exhaustive"
	}
	return s
}

// PrunerNames are the Optuna pruners --pruner names.
var PrunerNames = []string{"none", "median", "percentile", "hyperband", "successive-halving", "threshold"}

// Launch safety levels.
const (
	LaunchSafe       = "safe"
	LaunchAggressive = "aggressive"
)

// LaunchSafetyNames are the accepted --launch-safety values: ours, and
// Mneme's spellings of them.
var LaunchSafetyNames = []string{LaunchSafe, LaunchAggressive, "conservative", "balanced"}

// Metric names and objectives.
var (
	MetricNames    = []string{"mean", "median", "min", "max"}
	ObjectiveNames = []string{"time", "speedup"}
)
