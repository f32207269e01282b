package mneme

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// tagKey is the name a struct tag gives a field in the encoding tagName.
func tagKey(f reflect.StructField, tagName string) string {
	name, _, _ := strings.Cut(f.Tag.Get(tagName), ",")
	return name
}

func TestEveryConfigFieldHasOneTableEntry(t *testing.T) {
	typ := reflect.TypeOf(Config{})
	var c Config
	base := reflect.ValueOf(&c).Elem()
	seen := map[string]bool{}
	for _, f := range ConfigFields() {
		if seen[f.Key] {
			t.Errorf("key %q has two entries", f.Key)
		}
		seen[f.Key] = true
	}
	for i := range typ.NumField() {
		sf := typ.Field(i)
		addr := base.Field(i).Addr().Pointer()
		var entries []ConfigField
		for _, f := range ConfigFields() {
			if reflect.ValueOf(f.field(&c)).Pointer() == addr {
				entries = append(entries, f)
			}
		}
		if len(entries) != 1 {
			t.Errorf("field %s has %d table entries, want 1", sf.Name, len(entries))
			continue
		}
		e := entries[0]
		if j, y := tagKey(sf, "json"), tagKey(sf, "yaml"); e.Key != j || e.Key != y {
			t.Errorf("field %s: table key %q, json tag %q, yaml tag %q", sf.Name, e.Key, j, y)
		}
		if e.GoType() != sf.Type {
			t.Errorf("field %s: GoType %v, want %v", sf.Name, e.GoType(), sf.Type)
		}
		if e.Doc == "" {
			t.Errorf("field %s has no Doc", sf.Name)
		}
	}
	if n := len(ConfigFields()); n != typ.NumField() {
		t.Errorf("table has %d entries, Config %d fields", n, typ.NumField())
	}
}

// sampleValues are a value (not the zero value) for each kind, as a search
// space would give it, and what the field then holds.
var sampleValues = map[ValueKind][2]any{
	ValueDim3:   {"4,2", Dim3{4, 2, 1}},
	ValueUint:   {float64(96), uint32(96)},
	ValueInt:    {float64(2), 2},
	ValueBool:   {true, true},
	ValueString: {"sm_80", "sm_80"},
	ValueInts:   {[]any{1, 3.0}, []int{1, 3}},
}

func TestConfigFieldSetGetRoundTrip(t *testing.T) {
	for _, f := range ConfigFields() {
		var c Config
		in := sampleValues[f.Kind]
		if err := f.Set(&c, in[0]); err != nil {
			t.Errorf("%s: Set(%v): %v", f.Key, in[0], err)
			continue
		}
		if got := f.Get(c); !reflect.DeepEqual(got, in[1]) {
			t.Errorf("%s: Get after Set(%v) = %#v, want %#v", f.Key, in[0], got, in[1])
		}
		// Setting what Get returns changes nothing.
		before := c
		before.SpecializeArgs = slices.Clone(c.SpecializeArgs)
		if err := c.Set(f.Key, f.Get(c)); err != nil || !reflect.DeepEqual(c, before) {
			t.Errorf("%s: Set(Get()) gave %v, config %+v, want %+v", f.Key, err, c, before)
		}
	}
}

func TestConfigSetComponents(t *testing.T) {
	c := Baseline(Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0)
	for key, v := range map[string]any{"grid.x": 7.0, "grid.z": 2, "block.y": uint32(4)} {
		if err := c.Set(key, v); err != nil {
			t.Fatalf("Set(%s, %v): %v", key, v, err)
		}
	}
	if c.Grid != (Dim3{7, 1, 2}) || c.Block != (Dim3{1, 4, 1}) {
		t.Fatalf("grid %s block %s", c.Grid, c.Block)
	}
}

func TestConfigSetBadValuesNameTheKey(t *testing.T) {
	cases := []struct {
		key  string
		v    any
		want string
	}{
		{KeyMaxThreads, "many", "want a number"},
		{KeyMaxThreads, 1.5, "want an integer"},
		{KeyMaxThreads, -1, "out of range"},
		{KeySharedMem, 1e12, "out of range"},
		{KeySpecialize, 1, "want true or false"},
		{KeyPasses, 3, "want a pipeline text"},
		{KeyPasses, "  ", "want a pipeline text"},
		{KeyArch, false, "want a target"},
		{KeySpecializeArgs, 2, "want a list"},
		{KeySpecializeArgs, []any{1, -2}, "not a non-negative integer"},
		{KeyGrid, "0,1", "positive integer"},
		{KeyBlock, []any{1, 2, 3, 4}, "want 1 to 3"},
		{KeyBlock, 32, "want X[,Y[,Z]]"},
		{"block.x", 0, "want at least 1"},
		{"block.w", 1, "unknown component"},
		{"no_such_field", 1, "unknown configuration field"},
	}
	for _, tc := range cases {
		c := Baseline(Dim3{8, 1, 1}, Dim3{32, 1, 1}, 0)
		before := c
		err := c.Set(tc.key, tc.v)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Key != tc.key {
			t.Errorf("Set(%s, %v): error %v, want a FieldError naming the key", tc.key, tc.v, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Set(%s, %v): error %q, want %q after the key", tc.key, tc.v, err, tc.want)
		}
		if !reflect.DeepEqual(c, before) {
			t.Errorf("Set(%s, %v) failed but changed the config", tc.key, tc.v)
		}
	}
}

func TestTunableKeys(t *testing.T) {
	want := []string{"grid.x", "grid.y", "grid.z", "block.x", "block.y", "block.z",
		KeySharedMem, KeySpecialize, KeySpecializeArgs, KeySpecializeDims, KeySetLaunchBounds,
		KeyMaxThreads, KeyMinBlocksPerSM, KeyPasses, KeyCodegenOpt, KeyPrune, KeyInternalize,
		KeyPtxasOpt, KeyMaxRegisters, KeyFPContract}
	if got := TunableKeys(); !slices.Equal(got, want) {
		t.Fatalf("TunableKeys() = %v, want %v", got, want)
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	cases := []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.CodegenOpt = 4 }, "codegen_opt 4: must be 0..3"},
		{func(c *Config) { c.PtxasOpt = 5 }, "ptxas_opt 5: must be 1..4 (0 = driver default)"},
		{func(c *Config) { c.MaxRegisters = 256 }, "max_registers 256: must be 0..255"},
		{func(c *Config) { c.Block = Dim3{64, 32, 1} }, "block 64,32,1: 2048 threads exceed the CUDA limit of 1024"},
		{func(c *Config) { c.SetLaunchBounds = true }, "max_threads 0: launch bounds need a positive thread count"},
		{func(c *Config) { c.MinBlocksPerSM = -1 }, "min_blocks_per_sm -1: must not be negative"},
		{func(c *Config) { c.SpecializeArgs = []int{0, -1} }, "specialize_args: index -1 is negative"},
	}
	for _, tc := range cases {
		c := Baseline(Dim3{8, 1, 1}, Dim3{32, 1, 1}, 0)
		if err := c.Validate(); err != nil {
			t.Fatalf("baseline: %v", err)
		}
		tc.edit(&c)
		if err := c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
}

// The JSON form is Mneme's; the table must not change it.
func TestConfigJSONUnchanged(t *testing.T) {
	c := Baseline(Dim3{8, 1, 1}, Dim3{32, 1, 1}, 16)
	c.SpecializeArgs = []int{1}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"grid":{"x":8,"y":1,"z":1},"block":{"x":32,"y":1,"z":1},"shared_mem":16,"specialize":false,"specialize_args":[1],"specialize_dims":false,"set_launch_bounds":false,"max_threads":0,"min_blocks_per_sm":0,"passes":"default\u003cO3\u003e","codegen_opt":3,"prune":true,"internalize":false}`
	if string(b) != want {
		t.Fatalf("JSON\n%s\nwant\n%s", b, want)
	}
}

func TestOriginalRefusesCompileKnobs(t *testing.T) {
	base := Baseline(Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0)
	base.Original = true
	if err := base.Validate(); err != nil {
		t.Fatalf("original baseline: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"specialize":      func(c *Config) { c.Specialize = true },
		"specialize_dims": func(c *Config) { c.SpecializeDims = true },
		"launch bounds":   func(c *Config) { c.SetLaunchBounds, c.MaxThreads = true, 64 },
		"max_registers":   func(c *Config) { c.MaxRegisters = 32 },
		"fp_contract":     func(c *Config) { c.FPContract = "off" },
	} {
		c := base
		mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "original") {
			t.Errorf("%s with original: %v, want an error naming original", name, err)
		}
	}
	if err := (Config{FPContract: "fastest"}).Validate(); err == nil || !strings.Contains(err.Error(), "fp_contract") {
		t.Errorf("fp_contract fastest: %v", err)
	}
}

// TestDim3JSON: an unset shape stays unset, a partial one is completed with
// 1s, and a component given as 0 stays 0 for Validate to refuse (it was read
// as 1, so a compile of block.x = 0 ran block.x = 1 and passed).
func TestDim3JSON(t *testing.T) {
	for in, want := range map[string]Dim3{
		`{}`:                   {},
		`null`:                 {},
		`{"x":0,"y":0,"z":0}`:  {},
		`{"x":128}`:            {128, 1, 1},
		`{"y":2}`:              {1, 2, 1},
		`{"x":0,"y":1,"z":1}`:  {0, 1, 1},
		`{"x":4,"y":0}`:        {4, 0, 1},
		`{"x":32,"y":4,"z":2}`: {32, 4, 2},
		`{"X":32,"Y":4,"Z":2}`: {32, 4, 2},
	} {
		var d Dim3
		if err := json.Unmarshal([]byte(in), &d); err != nil || d != want {
			t.Errorf("%s: %v %v, want %v", in, d, err, want)
		}
	}
	var d Dim3
	if err := json.Unmarshal([]byte(`{"x":-1}`), &d); err == nil {
		t.Error("a negative component was read")
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Block: Dim3{0, 1, 1}}, "block 0,1,1: every dimension must be at least 1"},
		{Config{Block: Dim3{32, 1, 0}}, "block 32,1,0"},
		{Config{Grid: Dim3{1, 0, 1}}, "grid 1,0,1"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	for _, ok := range []Config{{}, {Block: Dim3{32, 1, 1}, Grid: Dim3{4, 1, 1}}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}
