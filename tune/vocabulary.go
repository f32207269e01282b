package tune

import (
	"github.com/mneme-gpu/mneme"
)

// VocabularyField is one configuration key as other languages read it.
type VocabularyField struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"`
	Tunable bool   `json:"tunable"`
	Doc     string `json:"doc"`
}

// Vocabulary is every word of the tuner that another language spells: the
// configuration's keys, the trial statuses, the presets and the option
// vocabularies, and Mneme's summary keys. `mneme tune --dump-vocabulary`
// prints it; python/mneme/vocabulary.json is it, checked by a test.
type Vocabulary struct {
	Config             []VocabularyField `json:"config"`
	Statuses           []string          `json:"statuses"`
	Presets            []string          `json:"presets"`
	Samplers           []string          `json:"samplers"`
	Metrics            []string          `json:"metrics"`
	Objectives         []string          `json:"objectives"`
	LaunchSafety       []string          `json:"launch_safety"`
	LaunchDims         []string          `json:"launch_dims"`
	BoolModes          []string          `json:"bool_modes"`
	MaxThreadsPolicies []string          `json:"max_threads_policies"`
	Pruners            []string          `json:"pruners"`
	SummaryKeys        []string          `json:"summary_keys"`
}

// MnemeSummaryKeys are the keys of Mneme's summary.json, all present in ours.
var MnemeSummaryKeys = []string{"status", "num_trials_requested", "num_trials_completed", "num_verified",
	"num_failed_verification", "num_invalid_launch", "num_compile_error", "num_runtime_error", "num_invalid_config",
	"num_internal_error", "baseline_metric", "best_metric", "best_speedup", "best_trial"}

// TheVocabulary builds the vocabulary from the Go tables.
func TheVocabulary() Vocabulary {
	v := Vocabulary{Presets: PresetNames, Samplers: SamplerNames, Metrics: MetricNames, Objectives: ObjectiveNames,
		LaunchSafety: LaunchSafetyNames, LaunchDims: LaunchDimNames, BoolModes: BoolModeNames,
		MaxThreadsPolicies: MaxThreadsPolicyNames, Pruners: PrunerNames, SummaryKeys: MnemeSummaryKeys}
	for _, f := range mneme.ConfigFields() {
		v.Config = append(v.Config, VocabularyField{Key: f.Key, Kind: f.Kind.String(), Tunable: f.Tunable, Doc: f.Doc})
	}
	for _, s := range mneme.Statuses() {
		v.Statuses = append(v.Statuses, string(s))
	}
	return v
}
