package record

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme/record/arena"
)

// Every variable `mneme record` sets, alone: unset gives its default, a
// good value its field, a bad one an error naming the variable.
func TestConfigFromEnvEveryVariable(t *testing.T) {
	read := func(env map[string]string) (Config, error) {
		env[EnvDB] = "/tmp/rdb"
		return ConfigFromEnv(func(k string) string { return env[k] })
	}
	def, err := read(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if def.VABase != arena.DefaultBase || def.VABaseChosen || def.VASize != 0 || def.Kernels != nil || def.Rank != nil ||
		def.MaxRecordings != 0 || def.Skip != 0 || !def.Compress || def.FullCopies || def.NoBackground || def.Shadow != "" {
		t.Errorf("defaults %+v", def)
	}
	rows := []struct {
		name, good, bad string
		check           func(Config) bool
	}{
		{EnvVASS, "0.5", "-1", func(c Config) bool { return c.VASize == 1<<29 }},
		{EnvVABase, "0x7f0000000000", "0xzz", func(c Config) bool { return c.VABase == 0x7f0000000000 && c.VABaseChosen }},
		{EnvKernels, "^_Z4axpy", "(", func(c Config) bool { return c.Kernels != nil && c.Kernels.String() == "^_Z4axpy" }},
		{EnvRank, "3", "-3", func(c Config) bool { return c.Rank != nil && *c.Rank == 3 }},
		{EnvMaxRecordings, "4", "four", func(c Config) bool { return c.MaxRecordings == 4 }},
		{EnvSkip, "7", "-7", func(c Config) bool { return c.Skip == 7 }},
		{EnvCompress, "0", "yes", func(c Config) bool { return !c.Compress }},
		{EnvFullCopies, "1", "true", func(c Config) bool { return c.FullCopies }},
		{EnvBackground, "0", "no", func(c Config) bool { return c.NoBackground }},
		{EnvShadow, ShadowDevice, "gpu", func(c Config) bool { return c.Shadow == ShadowDevice }},
	}
	for _, r := range rows {
		c, err := read(map[string]string{r.name: r.good})
		if err != nil || !r.check(c) {
			t.Errorf("%s=%s: %+v, %v", r.name, r.good, c, err)
		}
		if _, err := read(map[string]string{r.name: r.bad}); err == nil || !strings.Contains(err.Error(), r.name) {
			t.Errorf("%s=%s: error %v, want one naming the variable", r.name, r.bad, err)
		}
	}
	// The switches' other value, each alone.
	for name, check := range map[string]func(Config) bool{
		EnvCompress:   func(c Config) bool { return c.Compress },
		EnvFullCopies: func(c Config) bool { return !c.FullCopies },
		EnvBackground: func(c Config) bool { return !c.NoBackground },
	} {
		v := map[string]string{EnvCompress: "1", EnvFullCopies: "0", EnvBackground: "1"}[name]
		if c, err := read(map[string]string{name: v}); err != nil || !check(c) {
			t.Errorf("%s=%s: %+v, %v", name, v, c, err)
		}
	}
	if _, err := ConfigFromEnv(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), EnvDB) {
		t.Errorf("no database: %v", err)
	}
}

// A kernel is selected by its mangled or its demangled name, each alone.
func TestSelectsEitherName(t *testing.T) {
	c := Config{Kernels: regexp.MustCompile(`^axpy\(`)}
	if !c.Selects("_Z4axpyPfS_f", "axpy(float*, float*, float)") {
		t.Error("the demangled name alone does not select")
	}
	c.Kernels = regexp.MustCompile(`^_Z4axpy`)
	if !c.Selects("_Z4axpyPfS_f", "axpy(float*, float*, float)") {
		t.Error("the mangled name alone does not select")
	}
	if c.Selects("_Z4scalPff", "scal(float*, float)") {
		t.Error("neither name matches, yet selected")
	}
	if !(Config{}).Selects("a", "b") {
		t.Error("no expression selects every kernel")
	}
}
