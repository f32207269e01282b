package tune

import (
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme/internal/keytest"
)

// What --resume compares: each option that decides which trials a run
// holds or how they rank, changed alone, is refused with its name; each
// option that only says how the remaining trials run may change.
func TestResumeKeyEachOptionAlone(t *testing.T) {
	base := Options{DB: "db", Instance: "1234", Kernel: "k", Sampler: "random", Preset: "quick", SpaceFile: "s.yaml",
		SpaceHash: "abcd", Trials: 10, Workers: 1, GPUs: []int{0}, Iterations: 5, Warmup: 2, Metric: "mean",
		Objective: "time", Seed: 1, TrialTimeout: "10s", Output: "out", CacheDir: "c", LaunchSafety: LaunchSafe,
		AdaptiveInvalidBan: true}
	refused := map[string]string{"Sampler": "sampler", "Preset": "preset", "SpaceHash": "space", "Seed": "seed",
		"Metric": "metric", "Objective": "objective", "Iterations": "iterations", "ColdL2": "cold_l2", "VariantCostUS": "variant_cost_us", "Timer": "timer", "Instance": "instance",
		"Kernel": "kernel", "LaunchSafety": "launch_safety", "SpaceModule": "space_module", "SpaceArgs": "space_arg"}
	if ch := KeyChanges(base, base); len(ch) != 0 {
		t.Fatalf("equal options: %v", ch)
	}
	for _, v := range keytest.EachLeaf(base) {
		ch := KeyChanges(base, v.Value)
		name, want := refused[v.Path]
		switch {
		case want && (len(ch) != 1 || !strings.HasPrefix(ch[0], name+": ")):
			t.Errorf("changing %s alone: changes %v, want one naming %s", v.Path, ch, name)
		case !want && len(ch) != 0:
			t.Errorf("changing %s alone: refused as %v", v.Path, ch)
		}
		// Both ways: the change back is refused alike.
		if back := KeyChanges(v.Value, base); len(back) != len(ch) {
			t.Errorf("changing %s back: %v, forth: %v", v.Path, back, ch)
		}
	}
	// Spellings of one choice are one choice.
	for _, pair := range [][2]Options{
		{{LaunchSafety: ""}, {LaunchSafety: "conservative"}},
		{{LaunchSafety: "balanced"}, {LaunchSafety: LaunchSafe}},
	} {
		if ch := KeyChanges(pair[0], pair[1]); len(ch) != 0 {
			t.Errorf("%q and %q: %v", pair[0].LaunchSafety, pair[1].LaunchSafety, ch)
		}
	}
	if ch := KeyChanges(Options{LaunchSafety: LaunchSafe}, Options{LaunchSafety: LaunchAggressive}); len(ch) != 1 {
		t.Errorf("safe to aggressive: %v", ch)
	}
}

// Every --launch-safety spelling, Mneme's included, maps to its level; any
// other is refused with the flag's name.
func TestParseLaunchSafetyEveryRow(t *testing.T) {
	for in, want := range map[string]string{"": LaunchSafe, "safe": LaunchSafe, "conservative": LaunchSafe,
		"balanced": LaunchSafe, "aggressive": LaunchAggressive, " Aggressive ": LaunchAggressive, "SAFE": LaunchSafe} {
		if got, err := ParseLaunchSafety(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, name := range LaunchSafetyNames {
		if _, err := ParseLaunchSafety(name); err != nil {
			t.Errorf("listed name %q refused: %v", name, err)
		}
	}
	if _, err := ParseLaunchSafety("reckless"); err == nil || !strings.Contains(err.Error(), "--launch-safety") {
		t.Errorf("an unknown level: %v", err)
	}
}
