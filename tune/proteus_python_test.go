package tune

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// The Python package's Proteus entry (python/mneme/convert.py, which Mneme's
// published scripts call as mneme.convert.convert_to_json) is the one this
// package exports: the same JSON for the baseline and for each field that
// enters the entry changed alone.
func TestPythonProteusEntryIsProteusEntry(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	pkg, err := filepath.Abs("../python")
	if err != nil {
		t.Fatal(err)
	}
	base := mneme.Baseline(mneme.Dim3{X: 4096, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0)
	variants := map[string]func(*mneme.Config){
		"baseline":        func(*mneme.Config) {},
		"O2 pipeline":     func(c *mneme.Config) { c.Passes = "default<O2>" },
		"Oz pipeline":     func(c *mneme.Config) { c.Passes = "default<Oz>" },
		"custom pipeline": func(c *mneme.Config) { c.Passes = "function(instcombine,gvn)" },
		"specialize":      func(c *mneme.Config) { c.Specialize = true },
		"specialize dims": func(c *mneme.Config) { c.SpecializeDims = true },
		"launch bounds":   func(c *mneme.Config) { c.SetLaunchBounds, c.MaxThreads = true, 512 },
		"max threads without bounds": func(c *mneme.Config) {
			c.MaxThreads = 512
		},
		"min blocks":  func(c *mneme.Config) { c.MinBlocksPerSM = 4 },
		"codegen opt": func(c *mneme.Config) { c.CodegenOpt = 1 },
	}
	var names []string
	var configs []mneme.Config
	for name, change := range variants {
		c := base
		change(&c)
		names = append(names, name)
		configs = append(configs, c)
	}
	in, err := json.Marshal(configs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", `import json, sys
from mneme.mneme_types import ExperimentConfiguration
from mneme.convert import proteus_entry
print(json.dumps([proteus_entry(ExperimentConfiguration.from_dict(c)) for c in json.load(sys.stdin)]))`)
	cmd.Env = append(cmd.Environ(), "PYTHONPATH="+pkg)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var got []json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(configs) {
		t.Fatalf("python printed %d entries (%v): %s", len(got), err, out)
	}
	for i, c := range configs {
		// Every key of Proteus's schema with its type, and no other.
		var entry ProteusKernel
		dec := json.NewDecoder(bytes.NewReader(got[i]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&entry); err != nil {
			t.Errorf("%s: Python's entry %s: %v", names[i], got[i], err)
			continue
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(got[i], &keys); err != nil || len(keys) != reflect.TypeOf(entry).NumField() {
			t.Errorf("%s: Python's entry has %d keys, Proteus's schema %d: %s", names[i], len(keys), reflect.TypeOf(entry).NumField(), got[i])
		}
		if want := ProteusEntry(c); entry != want {
			t.Errorf("%s: Python's entry\n %+v\nGo's\n %+v", names[i], entry, want)
		}
	}
}
