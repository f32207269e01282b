package deploy

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// encodeFields lays out key fields as Key.encode does, so a test can give
// one field a wrong size.
func encodeFields(fields [][]byte) []byte {
	var b []byte
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// A stored key whose block, grid or driver field alone has the wrong size
// is refused; the same key with every size right reads back.
func TestDecodeKeyRefusesEachFixedFieldAlone(t *testing.T) {
	k := testKey()
	fields := [][]byte{[]byte(keyFormat), []byte(k.IRHash), []byte(k.Kernel), []byte(k.Config), k.Values,
		make([]byte, 12), make([]byte, 12), []byte(k.Arch), make([]byte, 8), []byte(k.Ptxas)}
	if _, _, err := decodeKey(encodeFields(fields)); err != nil {
		t.Fatalf("well-formed fields: %v", err)
	}
	for _, i := range []int{5, 6, 8} {
		for _, n := range []int{len(fields[i]) - 1, len(fields[i]) + 1} {
			bad := append([][]byte(nil), fields...)
			bad[i] = make([]byte, n)
			if _, _, err := decodeKey(encodeFields(bad)); err == nil {
				t.Errorf("field %d of %d bytes accepted", i, n)
			}
		}
	}
}

// Lists in the compile configuration keep their boundaries and order:
// arguments 1 and 2 are neither argument 12 nor 2 and 1.
func TestConfigKeyKeepsListBoundaries(t *testing.T) {
	base := mneme.Baseline(mneme.Dim3{}, mneme.Dim3{}, 0)
	base.Specialize = true
	seen := map[string]string{}
	for _, args := range [][]int{nil, {1}, {12}, {1, 2}, {2, 1}, {1, 2, 3}, {12, 3}, {1, 23}} {
		c := base
		c.SpecializeArgs = args
		k := ConfigKey(c)
		if prev, ok := seen[k]; ok {
			t.Errorf("specialize_args %v gives the key of %s", args, prev)
		}
		seen[k] = fmt.Sprint(args)
	}
}

// The tuned-on-another-GPU note needs both GPUs known and different: each
// side unknown alone, or both equal, gives no note.
func TestCheckGPUNoteNeedsBothSides(t *testing.T) {
	for _, c := range []struct {
		tuned, here string
		note        bool
	}{{"NVIDIA H100", "NVIDIA H200", true}, {"", "NVIDIA H200", false}, {"NVIDIA H100", "", false},
		{"NVIDIA H100", "NVIDIA H100", false}, {"", "", false}} {
		plans := Plans{"_Z1kv": {Kernel: "_Z1kv", Source: "t.json", Config: mneme.Config{Passes: "default<O3>", CodegenOpt: 3}, TunedGPU: c.tuned}}
		rep := Check(plans, []string{"_Z1kv"}, c.here)
		if got := strings.Contains(rep.Rows[0].Note, "tuned on"); got != c.note {
			t.Errorf("tuned on %q, here %q: note %q, want one: %v", c.tuned, c.here, rep.Rows[0].Note, c.note)
		}
	}
}

// Facts at the edges of their checks: a zero-byte argument is one (an
// empty struct), a scalar index is one of the arguments, the last included.
func TestFactsEdges(t *testing.T) {
	c := NewCache(t.TempDir())
	for _, f := range []*KernelFacts{{ArgSizes: []int{0}}, {ScalarArgs: []int{2}, ArgSizes: []int{8, 8, 4}}} {
		if err := c.PutFacts("ir", "_Z1kv", f); err != nil {
			t.Errorf("facts %+v refused: %v", f, err)
		}
	}
	for _, f := range []*KernelFacts{{ArgSizes: []int{-1}}, {ScalarArgs: []int{3}, ArgSizes: []int{8, 8, 4}}, {ScalarArgs: []int{-1}, ArgSizes: []int{8}}} {
		if err := c.PutFacts("ir", "_Z1kv", f); err == nil {
			t.Errorf("facts %+v accepted", f)
		}
	}
}

// A derived grid dimension exactly at CUDA's limit is within it.
func TestGeometryDerivedDimensionAtTheLimit(t *testing.T) {
	rec := dim(1, 5, 1)
	p := &Plan{TunedBlock: dim(1, 1, 1), RecordedBlock: rec}
	grid := dim(1, maxGridYZ/5, 1) // 13107 blocks of 5: 65535 threads in y
	if g, b := p.Geometry(grid, rec); b != dim(1, 1, 1) || g != dim(1, maxGridYZ, 1) {
		t.Errorf("grid %s block %s, want 1,%d,1 and the tuned block", g, b, maxGridYZ)
	}
}

// Proteus entries whose fields are present but say nothing: an empty
// OptLevel is the default level, a minimum of blocks of 0 or less is none.
func TestReadProteusTunedEmptyValues(t *testing.T) {
	path := writeFile(t, "empty.json", `{"a": {"OptLevel": ""}, "b": {"TunedMaxThreads": 128, "MinBlocksPerSM": -1},
		"c": {"TunedMaxThreads": 128, "MinBlocksPerSM": 0}}`)
	plans, err := ReadProteusTuned(path)
	if err != nil {
		t.Fatal(err)
	}
	if p := plans["a"]; p == nil || p.Config.Passes != "default<O3>" {
		t.Errorf("empty OptLevel: %+v", p)
	}
	for _, k := range []string{"b", "c"} {
		if p := plans[k]; p == nil || !p.Config.SetLaunchBounds || p.Config.MaxThreads != 128 || p.Config.MinBlocksPerSM != 0 {
			t.Errorf("%s: %+v, want launch bounds 128 with no minimum", k, p)
		}
	}
}

// A folded argument's label carries its name only when that argument has
// one: an unnamed folded argument and an argument not folded are numbers.
func TestFoldedLabelNamesOnlyItsOwnArgument(t *testing.T) {
	p := &Plan{Folded: []FoldedValues{{Arg: 0}, {Arg: 2, Name: "n"}}}
	for i, want := range []string{"0", "1", "2 (n)", "3"} {
		if got := p.foldedLabel(i); got != want {
			t.Errorf("foldedLabel(%d) = %q, want %q", i, got, want)
		}
	}
}

// A class that folds its launch dimensions and no recorded launch of its
// shape still compiles, for its own recorded shape; one that also folds
// argument values compiles nothing (the values are unknown); one that
// folds values alone with no launch compiles nothing either.
func TestPrecompileClassesWithoutLaunches(t *testing.T) {
	for _, c := range []struct {
		name       string
		dims, vals bool
		jobs       int
	}{{"dimensions", true, false, 1}, {"dimensions and values", true, true, 0}, {"values", false, true, 0}, {"nothing", false, false, 1}} {
		p := classedPlan()
		p.Classes = p.Classes[:1]
		p.Classes[0].Config.SpecializeDims, p.Classes[0].Config.Specialize = c.dims, c.vals
		jobs := PrecompileJobs(Plans{"k": p}, []string{"k"}, nil)
		if len(jobs) != c.jobs {
			t.Errorf("%s: %d jobs %+v, want %d", c.name, len(jobs), jobs, c.jobs)
			continue
		}
		if c.dims && c.jobs == 1 && (jobs[0].Config.Grid != dim(4, 1, 1) || jobs[0].Config.Block != dim(256, 1, 1)) {
			t.Errorf("%s: job for grid %s block %s, want the class's recorded 4,1,1 and 256,1,1", c.name, jobs[0].Config.Grid, jobs[0].Config.Block)
		}
	}
}
