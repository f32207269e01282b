package replay

import (
	"errors"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/replay/internal/fixture"
)

// scaleGlobalLaunch is scale_global (reads g_scale and g_count) recorded
// with only g_scale in its snapshots: the recorder leaves a __managed__
// g_count out.
func scaleGlobalLaunch() *fixture.Launch {
	return &fixture.Launch{
		Kernel: "scale_global", Grid: dim(4), Block: dim(128),
		Args:    []fixture.Arg{fixture.Ptr("y", 0), fixture.I32("n", 512)},
		Buffers: [][]byte{f32buf(512, func(i int) float32 { return float32(i) })},
		Globals: []fixture.Global{{Name: "g_scale", Data: make([]byte, 4)}},
	}
}

// markedManagedIR is testIR with g_count marked managed in
// !nvvm.annotations, as NVVM IR marks a __managed__ variable (clang-22
// ignores __managed__ in CUDA mode).
func markedManagedIR(t *testing.T) []byte {
	t.Helper()
	m, err := llvm.ParseBitcode(testIR(t), "kernels.bc")
	if err != nil {
		t.Fatal(err)
	}
	text := m.String()
	m.Dispose()
	if strings.Contains(text, "!nvvm.annotations") {
		t.Fatal("the test module already has !nvvm.annotations")
	}
	text += "\n!nvvm.annotations = !{!900}\n!900 = !{ptr addrspace(1) @g_count, !\"managed\", i32 1}\n"
	marked, err := llvm.ParseIR(text, "kernels.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer marked.Dispose()
	return marked.Bitcode()
}

// TestLoadRefusesKernelsReadingManagedVariables: an instance whose kernel
// reads a __managed__ variable, known from the recording's list or from
// the IR's mark, is refused before any GPU is touched, naming the kernel
// and the variable; each input changed alone lets it through. Compiling it
// still works.
func TestLoadRefusesKernelsReadingManagedVariables(t *testing.T) {
	counter := db.ManagedVariable{Name: "g_count", Size: 4, Addr: "0x7e0000000040"}
	for _, c := range []struct {
		name   string
		marked bool // the IR marks g_count managed
		launch *fixture.Launch
		list   db.ManagedList
		want   string // "" accepted
	}{
		{"listed and read", false, scaleGlobalLaunch(), db.ManagedList{Variables: []db.ManagedVariable{counter}},
			"reads the __managed__ variable(s) g_count (4 bytes at 0x7e0000000040)"},
		{"listed without address", false, scaleGlobalLaunch(), db.ManagedList{Variables: []db.ManagedVariable{{Name: "g_count", Size: 4}}},
			"reads the __managed__ variable(s) g_count (4 bytes)"},
		{"listed, another kernel", false, vecaddLaunch(512), db.ManagedList{Variables: []db.ManagedVariable{counter}}, ""},
		{"another variable listed", false, scaleGlobalLaunch(), db.ManagedList{Variables: []db.ManagedVariable{{Name: "g_other", Size: 4}}}, ""},
		{"nothing listed", false, scaleGlobalLaunch(), db.ManagedList{}, ""},
		{"marked in the IR", true, scaleGlobalLaunch(), db.ManagedList{}, "g_count (marked managed in the IR)"},
		{"marked, another kernel", true, vecaddLaunch(512), db.ManagedList{}, ""},
		{"list incomplete, global not in the snapshot", false, scaleGlobalLaunch(), db.ManagedList{DroppedVariables: 1},
			"g_count (perhaps: 1 __managed__ variable(s) went unlisted)"},
	} {
		ir := testIR(t)
		if c.marked {
			ir = markedManagedIR(t)
		}
		dir := t.TempDir()
		if _, err := fixture.WriteHost(dir, ir, c.launch, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.WriteManaged(dir, &c.list); err != nil {
			t.Fatal(err)
		}
		rec, err := Load(dir, "", "")
		if rec != nil {
			rec.Close()
		}
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var in *InputError
		if !errors.As(err, &in) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "kernel scale_global") {
			t.Errorf("%s: %v, want bad input naming the kernel and %q", c.name, err, c.want)
		}
		if c.list.DroppedVariables > 0 && strings.Contains(err.Error(), "g_scale") {
			t.Errorf("%s: names g_scale, which the snapshot holds: %v", c.name, err)
		}
		if rec, err := LoadForCompile(dir, "", ""); err != nil {
			t.Errorf("%s: compiling it: %v", c.name, err)
		} else {
			rec.Close()
		}
	}
}

// TestCheckManagedWithoutIR: a kernel recorded without IR cannot be
// checked for __managed__ reads, so a recording listing any refuses it,
// saying why; with none listed it passes.
func TestCheckManagedWithoutIR(t *testing.T) {
	dir := t.TempDir()
	d := &db.DB{Dir: dir}
	k := &db.Kernel{KernelName: "_Z4vaddPKfS0_Pfif", Code: db.CodeMachine}
	inst := &db.Instance{DynamicHash: "abc"}
	if err := checkManaged(d, k, inst, nil); err != nil {
		t.Fatalf("no managed variables: %v", err)
	}
	if err := db.WriteManaged(dir, &db.ManagedList{Variables: []db.ManagedVariable{{Name: "tally", Size: 8}}}); err != nil {
		t.Fatal(err)
	}
	err := checkManaged(d, k, inst, nil)
	var in *InputError
	if !errors.As(err, &in) || !strings.Contains(err.Error(), "tally") || !strings.Contains(err.Error(), "without IR") || !strings.Contains(err.Error(), "instance abc") {
		t.Errorf("%v, want bad input naming the variable and why", err)
	}
	k.Code = ""
	if err := checkManaged(d, k, inst, nil); err != nil {
		t.Errorf("a kernel with IR that reads no global: %v", err)
	}
}
