package deploy

import (
	"strconv"
	"strings"
	"testing"
)

// TestReadMnemeTunedClassesAndFolding reads entries written by tuning across
// instances: a good one is accepted; each bad one (classes that overlap, a
// class without a shape or with a bad configuration, a folded argument the
// configuration does not fold, folding without statistics, a bad value, an
// unknown statistics word) drops its kernel with an error naming the file,
// the kernel and the field, while the good kernel stays.
func TestReadMnemeTunedClassesAndFolding(t *testing.T) {
	const cfg = `"config":{"passes":"default<O3>","codegen_opt":3,"specialize":true,"specialize_args":[2]}`
	class := func(gx int, shared int) string {
		return `{"grid":{"x":` + strconv.Itoa(gx) + `,"y":1,"z":1},"block":{"x":256,"y":1,"z":1},"shared_mem":` + strconv.Itoa(shared) + `,"config":{"passes":"default<O2>","codegen_opt":3}}`
	}
	good := `{` + cfg + `,"statistics":"run","folded":[{"arg":2,"invariant":true,"distinct":1,"values":["e8030000"]}],"classes":[` + class(4, 0) + `,` + class(16, 0) + `,` + class(4, 64) + `]}`
	for _, tc := range []struct {
		name, entry, want string
	}{
		{"overlapping classes", `{` + cfg + `,"classes":[` + class(4, 0) + `,` + class(16, 0) + `,` + class(4, 0) + `]}`, "classes[0] and classes[2] overlap"},
		{"a class without a shape", `{` + cfg + `,"classes":[{"grid":{"x":0},"block":{"x":256},"config":{"passes":"default<O3>","codegen_opt":3}}]}`, "classes[0]: grid"},
		{"a class with a bad configuration", `{` + cfg + `,"classes":[{"grid":{"x":4},"block":{"x":256},"config":{"passes":"default<O3>","codegen_opt":7}}]}`, "classes[0].config"},
		{"a folded argument not folded", `{` + cfg + `,"folded":[{"arg":3}]}`, "folded[0]: argument 3"},
		{"folding without statistics", `{` + cfg + `,"statistics":"none","folded":[{"arg":2}]}`, "no statistics"},
		{"a value that is not hex", `{` + cfg + `,"folded":[{"arg":2,"values":["zz"]}]}`, `folded[0]: value "zz"`},
		{"an unknown statistics word", `{` + cfg + `,"statistics":"some"}`, `statistics "some"`},
		{"statistics none, values folded", `{` + cfg + `,"statistics":"none"}`, "statistics none: a configuration folds"},
		{"statistics none, a class folds", `{"config":{"passes":"default<O3>","codegen_opt":3},"statistics":"none","classes":[{"grid":{"x":4},"block":{"x":256},"config":{"passes":"default<O3>","codegen_opt":3,"specialize":true,"specialize_args":[1]}}]}`, "statistics none: a configuration folds"},
		{"statistics of the run, a fold without them", `{` + cfg + `,"statistics":"run","folded":[]}`, "folded: argument 2 is folded but has no statistics"},
		{"statistics of the run, a class's fold without them", `{` + cfg + `,"statistics":"run","folded":[{"arg":2}],"classes":[{"grid":{"x":4},"block":{"x":256},"config":{"passes":"default<O3>","codegen_opt":3,"specialize":true,"specialize_args":[1]}}]}`, "folded: argument 1 is folded but has no statistics"},
		{"an invariant argument with two values", `{` + cfg + `,"statistics":"run","folded":[{"arg":2,"invariant":true,"distinct":1,"values":["01000000","02000000"]}]}`, "folded[0]: argument 2 held one value over the run but lists 2"},
		{"more values than the run gave", `{` + cfg + `,"statistics":"run","folded":[{"arg":2,"distinct":2,"values":["01000000","02000000","03000000"]}]}`, "folded[0]: argument 2 took 2 values over the run but lists 3"},
		{"a negative count of values", `{` + cfg + `,"statistics":"run","folded":[{"arg":2,"distinct":-1}]}`, "folded[0]: distinct -1"},
	} {
		path := writeFile(t, "t.json", `{"good":`+good+`,"bad":`+tc.entry+`}`)
		plans, err := ReadMnemeTuned(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"bad"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming the file, the kernel and %q", tc.name, err, tc.want)
		}
		if plans["good"] == nil || plans["bad"] != nil {
			t.Errorf("%s: plans %v; want the good kernel alone", tc.name, plans)
		}
	}
	// The counterparts that hold: an argument only a class folds, described;
	// as many values as the run gave; an older file without statistics.
	for _, entry := range []string{
		`{"config":{"passes":"default<O3>","codegen_opt":3},"statistics":"run","folded":[{"arg":1,"distinct":2,"values":["01000000","02000000"]}],"classes":[{"grid":{"x":4},"block":{"x":256},"config":{"passes":"default<O3>","codegen_opt":3,"specialize":true,"specialize_args":[1]}}]}`,
		`{` + cfg + `}`,
	} {
		path := writeFile(t, "t.json", `{"ok":`+entry+`}`)
		if plans, err := ReadMnemeTuned(path); err != nil || plans["ok"] == nil {
			t.Errorf("%s: %v; want it accepted", entry, err)
		}
	}
}
