package tune

import (
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/keytest"
)

func hashSpace() *Space {
	return &Space{Name: "s",
		Params: []Param{IntRange("block", 32, 256, 32), Categorical("passes", "default<O2>", "default<O3>"),
			{Name: "r", Kind: KindReal, Low: 0.5, High: 2, Log: true}},
		Constraints: []Constraint{{Name: "block <= 128"}, {Name: "passes != ''"}},
		Baseline:    mneme.Baseline(mneme.Dim3{X: 8, Y: 1, Z: 1}, mneme.Dim3{X: 128, Y: 1, Z: 1}, 0),
		Vars:        map[string]any{"N": 4096},
		Limits:      mneme.DeviceLimits{Name: "H100", SMCount: 132, MaxThreadsPerBlock: 1024},
	}
}

// A space's hash (what --resume compares) changes with each member of each
// parameter, each constraint and each baseline field, alone; it keeps with
// the space's name, its recorded values and the device's limits, which do
// not change which trials it holds.
func TestSpaceHashEachInputAlone(t *testing.T) {
	base := hashSpace().Hash()
	if hashSpace().Hash() != base {
		t.Fatal("equal spaces gave two hashes")
	}
	changed := map[string]*Space{}
	for i := range hashSpace().Params {
		for _, v := range keytest.EachLeaf(hashSpace().Params[i]) {
			s := hashSpace()
			s.Params[i] = v.Value
			changed["param "+s.Params[i].Name+" "+v.Path] = s
		}
	}
	for i := range hashSpace().Constraints {
		s := hashSpace()
		s.Constraints[i].Name += "x"
		changed["constraint "+s.Constraints[i].Name] = s
	}
	for _, v := range keytest.EachLeaf(hashSpace().Baseline) {
		s := hashSpace()
		s.Baseline = v.Value
		changed["baseline "+v.Path] = s
	}
	swapped := hashSpace()
	swapped.Params[0], swapped.Params[1] = swapped.Params[1], swapped.Params[0]
	changed["parameter order"] = swapped
	fewer := hashSpace()
	fewer.Constraints = fewer.Constraints[:1]
	changed["one constraint fewer"] = fewer
	for name, s := range changed {
		if s.Hash() == base {
			t.Errorf("changing the %s alone keeps the space's hash", name)
		}
	}
	kept := map[string]*Space{}
	for _, v := range keytest.EachLeaf(hashSpace().Limits) {
		s := hashSpace()
		s.Limits = v.Value
		kept["limits "+v.Path] = s
	}
	named := hashSpace()
	named.Name = "other"
	kept["name"] = named
	vars := hashSpace()
	vars.Vars["N"] = 8192
	kept["recorded values"] = vars
	for name, s := range kept {
		if s.Hash() != base {
			t.Errorf("changing the %s alone changes the space's hash", name)
		}
	}
}

// The trial key of a configuration (two points deriving one configuration
// are one trial) changes with every field alone, and keeps with equal ones.
func TestTrialConfigKeyEachFieldAlone(t *testing.T) {
	base := mneme.Baseline(mneme.Dim3{X: 8, Y: 2, Z: 1}, mneme.Dim3{X: 128, Y: 1, Z: 1}, 64)
	base.Specialize, base.SetLaunchBounds, base.MaxThreads = true, true, 128
	bk := ConfigKey(base)
	if ConfigKey(base) != bk {
		t.Fatal("equal configurations gave two keys")
	}
	seen := map[string]string{bk: "base"}
	for _, v := range keytest.EachLeaf(base) {
		k := ConfigKey(v.Value)
		if prev, ok := seen[k]; ok {
			t.Errorf("changing %s alone gives the key of %s", v.Path, prev)
		}
		seen[k] = v.Path
	}
}

// A point's key (how samplers recognize repeats) changes with each name and
// each value alone and with a value's kind, and keeps with a number's type.
func TestPointKeyEachMemberAlone(t *testing.T) {
	base := Point{"block": 128, "passes": "default<O3>", "specialize": true}
	bk := base.Key()
	for name, pt := range map[string]Point{
		"a number":                {"block": 256, "passes": "default<O3>", "specialize": true},
		"a string":                {"block": 128, "passes": "default<O2>", "specialize": true},
		"a boolean":               {"block": 128, "passes": "default<O3>", "specialize": false},
		"a name":                  {"blocks": 128, "passes": "default<O3>", "specialize": true},
		"a name fewer":            {"block": 128, "passes": "default<O3>"},
		"a name more":             {"block": 128, "passes": "default<O3>", "specialize": true, "x": 1},
		"a boolean as its text":   {"block": 128, "passes": "default<O3>", "specialize": "true"},
		"a number as its text":    {"block": "128", "passes": "default<O3>", "specialize": true},
		"values of names swapped": {"block": "default<O3>", "passes": 128, "specialize": true},
	} {
		if pt.Key() == bk {
			t.Errorf("changing %s alone keeps the point's key", name)
		}
	}
	for name, pt := range map[string]Point{
		"a float64 (JSON's number)": {"block": 128.0, "passes": "default<O3>", "specialize": true},
		"an int64":                  {"block": int64(128), "passes": "default<O3>", "specialize": true},
	} {
		if pt.Key() != bk {
			t.Errorf("%s changes the point's key: %s vs %s", name, pt.Key(), bk)
		}
	}
}
