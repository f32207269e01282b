package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

func writeFile(t testing.TB, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func dim(x, y, z uint32) mneme.Dim3 { return mneme.Dim3{X: x, Y: y, Z: z} }

// goodMneme is what tune writes for two kernels: one whose tuned block may
// be applied, one tuned with its launch held.
func goodMneme(t *testing.T) string {
	t.Helper()
	searched := mneme.Baseline(dim(64, 1, 1), dim(128, 1, 1), 0)
	searched.Passes, searched.CodegenOpt, searched.Specialize = "default<O2>", 2, true
	searched.SetLaunchBounds, searched.MaxThreads, searched.MinBlocksPerSM = true, 128, 4
	searched.PtxasOpt, searched.MaxRegisters, searched.Arch = 3, 64, "sm_90"
	held := mneme.Baseline(dim(32, 1, 1), dim(256, 1, 1), 0)
	held.SpecializeDims = true
	m := map[string]TunedKernel{
		"_Z6searchPf": {Config: searched, Instance: "ab", GPU: "NVIDIA H200", RecordedBlock: dim(256, 1, 1), RecordedGrid: dim(32, 1, 1), LaunchSearched: true},
		"_Z4heldPf":   {Config: held, Instance: "cd", RecordedBlock: dim(256, 1, 1), RecordedGrid: dim(32, 1, 1)},
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "mneme_tuned_kernels.json", string(b))
}

func TestReadMnemeTunedGoodFile(t *testing.T) {
	path := goodMneme(t)
	plans, err := ReadMnemeTuned(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 {
		t.Fatalf("plans: %+v", plans)
	}
	p := plans["_Z6searchPf"]
	c := p.Config
	if p.Kernel != "_Z6searchPf" || p.Source != path || p.Proteus || p.Original || p.TunedGPU != "NVIDIA H200" {
		t.Errorf("plan: %+v", p)
	}
	if c.Passes != "default<O2>" || c.CodegenOpt != 2 || !c.Specialize || !c.SetLaunchBounds || c.MaxThreads != 128 ||
		c.MinBlocksPerSM != 4 || c.PtxasOpt != 3 || c.MaxRegisters != 64 || !c.Prune || c.Internalize {
		t.Errorf("compile knobs: %+v", c)
	}
	// Knobs the entry leaves out keep the baseline's values: prune, and
	// no internalizing (as the application compiled the kernel).
	// Geometry and target belong to the launch and the device.
	if !c.Block.IsZero() || !c.Grid.IsZero() || c.Arch != "" {
		t.Errorf("the plan's config carries launch or target fields: %+v", c)
	}
	if p.TunedBlock != dim(128, 1, 1) || p.RecordedBlock != dim(256, 1, 1) || p.RecordedGrid != dim(32, 1, 1) {
		t.Errorf("geometry: tuned %s recorded %s/%s", p.TunedBlock, p.RecordedGrid, p.RecordedBlock)
	}
	// Not searched: the config's block is the recorded one and never applies.
	if h := plans["_Z4heldPf"]; !h.TunedBlock.IsZero() || !h.Config.SpecializeDims {
		t.Errorf("held plan: %+v", h)
	}
}

func TestReadMnemeTunedBlockRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry string
		want  mneme.Dim3
	}{
		{"not searched", `{"config":{"block":{"x":64,"y":1,"z":1}},"recorded_block":{"x":256,"y":1,"z":1}}`, mneme.Dim3{}},
		{"searched, same as recorded", `{"config":{"block":{"x":256,"y":1,"z":1}},"recorded_block":{"x":256,"y":1,"z":1},"launch_searched":true}`, mneme.Dim3{}},
		{"searched, zero block", `{"config":{},"recorded_block":{"x":256,"y":1,"z":1},"launch_searched":true}`, mneme.Dim3{}},
		{"searched, zero components are 1", `{"config":{"block":{"x":256}},"recorded_block":{"x":256,"y":1,"z":1},"launch_searched":true}`, mneme.Dim3{}},
		{"searched, differs", `{"config":{"block":{"x":64,"y":2,"z":1}},"recorded_block":{"x":256,"y":1,"z":1},"launch_searched":true}`, dim(64, 2, 1)},
	} {
		plans, err := ReadMnemeTuned(writeFile(t, "t.json", `{"k":`+tc.entry+`}`))
		if err != nil || plans["k"] == nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := plans["k"].TunedBlock; got != tc.want {
			t.Errorf("%s: tuned block %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestReadMnemeTunedDefaultsAndOriginal(t *testing.T) {
	// Fields an entry leaves out are the baseline's, not Go's zero values.
	plans, err := ReadMnemeTuned(writeFile(t, "t.json", `{"k":{"config":{"specialize":true}},"o":{"config":{"original":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := plans["k"].Config; c.CodegenOpt != 3 || c.Passes != mneme.DefaultPipeline || !c.Specialize || !c.Prune {
		t.Errorf("defaults: %+v", c)
	}
	if o := plans["o"]; !o.Original || o.Config.Original {
		t.Errorf("original: %+v", o)
	}
}

func TestReadMnemeTunedInvalidEntriesDropOnlyThatKernel(t *testing.T) {
	path := writeFile(t, "mneme_tuned_kernels.json", `{
		"good": {"config": {"passes": "default<O3>", "codegen_opt": 3}},
		"codegen": {"config": {"codegen_opt": 7}},
		"negative": {"config": {"min_blocks_per_sm": -1}},
		"bounds": {"config": {"set_launch_bounds": true, "max_threads": 0}},
		"huge": {"config": {"set_launch_bounds": true, "max_threads": 4096}},
		"wrongtype": {"config": {"codegen_opt": "three"}},
		"noconfig": {"instance": "ab"},
		"notobject": [1, 2],
		"": {"config": {}}
	}`)
	plans, err := ReadMnemeTuned(path)
	if len(plans) != 1 || plans["good"] == nil {
		t.Fatalf("plans: %+v", plans)
	}
	if err == nil {
		t.Fatal("no error for the invalid entries")
	}
	var in *mneme.InputError
	if !errors.As(err, &in) {
		t.Errorf("not bad input: %T", err)
	}
	for _, want := range []string{`kernel "codegen": config: codegen_opt`, `kernel "negative": config: min_blocks_per_sm`,
		`kernel "bounds": config: max_threads`, `kernel "huge": config: max_threads 4096`, `kernel "wrongtype"`, `codegen_opt`,
		`kernel "noconfig": config`, `kernel "notobject": want an object`, "empty kernel name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, path+": ") {
			t.Errorf("error line does not name the file: %q", line)
		}
	}
}

func TestReadersRefuseBadFiles(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"not JSON", `{"k": `, "not a JSON object"},
		{"array", `[{"config":{}}]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"number", `3`, "not a JSON object"},
		{"empty", ``, "not a JSON object"},
		{"duplicate kernel", `{"k":{"config":{}},"k":{"config":{}}}`, "k"},
		{"trailing data", `{} {}`, "not a JSON object"},
	} {
		for _, read := range []func(string) (map[string]*Plan, error){ReadMnemeTuned, ReadProteusTuned} {
			path := writeFile(t, "tuned.json", tc.text)
			plans, err := read(path)
			if err == nil || len(plans) != 0 || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: plans %v, error %v", tc.name, plans, err)
			}
		}
	}
	missing := filepath.Join(t.TempDir(), "nope.json")
	if _, err := ReadMnemeTuned(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadProteusTuned(t.TempDir()); err == nil {
		t.Error("a directory was read as a tuned file")
	}
}

// TestTunedFileEntriesAreBounded: a file of MaxTunedKernels entries is read,
// one more is refused before any plan is made (every application process
// loads the file: a file under the size limit must not exhaust memory).
func TestTunedFileEntriesAreBounded(t *testing.T) {
	file := func(n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"k%d":{"config":{}}`, i)
		}
		b.WriteString("}")
		return writeFile(t, "tuned.json", b.String())
	}
	path := file(MaxTunedKernels + 1)
	plans, err := ReadMnemeTuned(path)
	if err == nil || len(plans) != 0 || !strings.Contains(err.Error(), path+": more than 65536 kernels") {
		t.Errorf("%d entries: %d plans, %v", MaxTunedKernels+1, len(plans), err)
	}
	if plans, err := ReadMnemeTuned(file(MaxTunedKernels)); err != nil || len(plans) != MaxTunedKernels {
		t.Errorf("%d entries: %d plans, %v", MaxTunedKernels, len(plans), err)
	}
}

func TestReadProteusTunedAsProteusDoes(t *testing.T) {
	path := writeFile(t, "proteus.json", `{
		"_Z1av": {"Pipeline": "", "OptLevel": "2", "CodeGenOptLevel": 1, "SpecializeArgs": false, "LaunchBounds": true,
		          "SpecializeDims": false, "TunedMaxThreads": 256, "MinBlocksPerSM": 2, "CodeGen": "serial", "Unknown": [1]},
		"_Z1bv": {"OptLevel": 2},
		"_Z1cv": {},
		"_Z1dv": {"Pipeline": "function(instcombine)", "OptLevel": "zebra"},
		"_Z1ev": {"OptLevel": "s-ish", "CodeGenOptLevel": "2", "SpecializeArgs": "no", "LaunchBounds": 1,
		          "SpecializeDims": null, "TunedMaxThreads": "512", "MinBlocksPerSM": 3},
		"_Z1fv": {"LaunchBounds": false, "TunedMaxThreads": 128, "MinBlocksPerSM": 2},
		"_Z1gv": {"TunedMaxThreads": 128.0, "MinBlocksPerSM": 2.5, "CodeGenOptLevel": 2.0},
		"_Z1hv": {"TunedMaxThreads": -1, "MinBlocksPerSM": 4}
	}`)
	plans, err := ReadProteusTuned(path)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		passes                string
		cg                    int
		spec, dims, lb        bool
		maxThreads, minBlocks int
	}
	for kernel, w := range map[string]want{
		"_Z1av": {"default<O2>", 1, false, false, true, 256, 2},
		// An integer OptLevel is ignored: "3".
		"_Z1bv": {"default<O3>", 3, true, true, false, 0, 0},
		// Absent bools are true; no TunedMaxThreads, no launch bounds.
		"_Z1cv": {"default<O3>", 3, true, true, false, 0, 0},
		// A pipeline wins; OptLevel is then not read.
		"_Z1dv": {"function(instcombine)", 3, true, true, false, 0, 0},
		// First character only; every field of the wrong type is absent.
		"_Z1ev": {"default<Os>", 3, true, true, false, 0, 0},
		"_Z1fv": {"default<O3>", 3, true, true, false, 0, 0},
		// Integral floats are integers, as LLVM's getAsInteger reads them.
		"_Z1gv": {"default<O3>", 2, true, true, true, 128, 0},
		"_Z1hv": {"default<O3>", 3, true, true, false, 0, 0},
	} {
		p := plans[kernel]
		if p == nil {
			t.Errorf("%s: no plan", kernel)
			continue
		}
		c := p.Config
		got := want{c.Passes, c.CodegenOpt, c.Specialize, c.SpecializeDims, c.SetLaunchBounds, c.MaxThreads, c.MinBlocksPerSM}
		if got != w {
			t.Errorf("%s: got %+v, want %+v", kernel, got, w)
		}
		if !p.Proteus || p.Source != path || !p.TunedBlock.IsZero() || p.Original || !c.Prune || !c.Internalize {
			t.Errorf("%s: plan %+v", kernel, p)
		}
	}
}

func TestReadProteusTunedOutOfRangeDropsTheKernel(t *testing.T) {
	path := writeFile(t, "proteus.json", `{"ok": {}, "lvl": {"OptLevel": "x"}, "cg": {"CodeGenOptLevel": 9},
		"mt": {"TunedMaxThreads": 2048}, "arr": [], "num": 5}`)
	plans, err := ReadProteusTuned(path)
	if len(plans) != 1 || plans["ok"] == nil || err == nil {
		t.Fatalf("plans %v, error %v", plans, err)
	}
	for _, want := range []string{`kernel "lvl": OptLevel "x"`, `kernel "cg": CodeGenOptLevel 9`, `kernel "mt": TunedMaxThreads 2048`,
		`kernel "arr": want an object`, `kernel "num": want an object`} {
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestLoadMergesAndKeepsGoing(t *testing.T) {
	mn := writeFile(t, "m.json", `{"both": {"config": {"passes": "default<O1>"}}, "bad": {"config": {"codegen_opt": 9}}}`)
	pr := writeFile(t, "p.json", `{"both": {"OptLevel": "2"}, "bad": {"OptLevel": "0"}, "proteus": {}}`)
	plans, errs := Load(mn, pr)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), mn) {
		t.Errorf("errors: %v", errs)
	}
	if p := plans["both"]; p == nil || p.Proteus || p.Config.Passes != "default<O1>" {
		t.Errorf("a kernel in both files: %+v", p)
	}
	// The mneme entry was dropped: the Proteus one stands.
	if p := plans["bad"]; p == nil || !p.Proteus || p.Config.Passes != "default<O0>" {
		t.Errorf("a kernel dropped from the mneme file: %+v", p)
	}
	if plans["proteus"] == nil || len(plans) != 3 {
		t.Errorf("plans: %v", plans)
	}
	// A file that cannot be read costs only its own kernels.
	plans, errs = Load(filepath.Join(t.TempDir(), "missing.json"), pr)
	if len(errs) != 1 || len(plans) != 3 {
		t.Errorf("missing mneme file: %v, %v", plans, errs)
	}
	plans, errs = Load("", "")
	if len(plans) != 0 || len(errs) != 0 {
		t.Errorf("nothing asked: %v %v", plans, errs)
	}
}

func TestConfigForLaunchBounds(t *testing.T) {
	lb := mneme.Config{Passes: "default<O3>", CodegenOpt: 3, SetLaunchBounds: true, MaxThreads: 256, MinBlocksPerSM: 2, SpecializeArgs: []int{1}}
	for _, tc := range []struct {
		name       string
		proteus    bool
		block      mneme.Dim3
		lb         bool
		max, minSM int
	}{
		{"proteus, exact", true, dim(256, 1, 1), true, 256, 2},
		{"proteus, exact 2D", true, dim(16, 16, 1), true, 256, 2},
		{"proteus, fewer threads: no minimum", true, dim(128, 1, 1), true, 256, 0},
		{"proteus, more threads: no bounds", true, dim(512, 1, 1), false, 0, 0},
		{"mneme, exact", false, dim(256, 1, 1), true, 256, 2},
		{"mneme, fewer threads keeps the minimum", false, dim(64, 1, 1), true, 256, 2},
		{"mneme, more threads: no bounds", false, dim(32, 32, 1), false, 0, 0},
	} {
		p := &Plan{Config: lb, Proteus: tc.proteus}
		c := p.ConfigFor(tc.block)
		if c.SetLaunchBounds != tc.lb || c.MaxThreads != tc.max || c.MinBlocksPerSM != tc.minSM {
			t.Errorf("%s: launch bounds %v %d,%d", tc.name, c.SetLaunchBounds, c.MaxThreads, c.MinBlocksPerSM)
		}
		if c.Passes != lb.Passes || c.CodegenOpt != 3 {
			t.Errorf("%s: other knobs changed: %+v", tc.name, c)
		}
		// The result shares nothing with the plan.
		c.SpecializeArgs[0] = 9
		if p.Config.SpecializeArgs[0] != 1 {
			t.Fatalf("%s: ConfigFor shares the plan's slice", tc.name)
		}
	}
	noLB := &Plan{Config: mneme.Config{Passes: "default<O3>"}}
	if c := noLB.ConfigFor(dim(1024, 1, 1)); c.SetLaunchBounds || c.MaxThreads != 0 {
		t.Errorf("no launch bounds: %+v", c)
	}
}

func TestGeometry(t *testing.T) {
	rec := dim(256, 1, 1)
	for _, tc := range []struct {
		name                string
		tuned, recorded     mneme.Dim3
		grid, block         mneme.Dim3
		wantGrid, wantBlock mneme.Dim3
	}{
		{"no tuned block", mneme.Dim3{}, rec, dim(32, 1, 1), rec, dim(32, 1, 1), rec},
		{"smaller block, exact", dim(128, 1, 1), rec, dim(32, 1, 1), rec, dim(64, 1, 1), dim(128, 1, 1)},
		{"larger block rounds up", dim(1024, 1, 1), rec, dim(5, 1, 1), rec, dim(2, 1, 1), dim(1024, 1, 1)},
		{"not a multiple", dim(96, 1, 1), rec, dim(3, 1, 1), rec, dim(8, 1, 1), dim(96, 1, 1)},
		{"2D: x and y", dim(32, 8, 1), dim(16, 16, 1), dim(10, 10, 1), dim(16, 16, 1), dim(5, 20, 1), dim(32, 8, 1)},
		{"z differs too", dim(8, 8, 4), dim(8, 8, 2), dim(4, 4, 7), dim(8, 8, 2), dim(4, 4, 4), dim(8, 8, 4)},
		{"z kept", dim(16, 4, 2), dim(8, 8, 2), dim(4, 4, 7), dim(8, 8, 2), dim(2, 8, 7), dim(16, 4, 2)},
		{"one thread block", dim(1024, 1, 1), rec, dim(1, 1, 1), rec, dim(1, 1, 1), dim(1024, 1, 1)},
		{"unknown recorded block", dim(128, 1, 1), mneme.Dim3{}, dim(3, 1, 1), dim(64, 1, 1), dim(2, 1, 1), dim(128, 1, 1)},
		// Tuned for the recorded launch only.
		{"other block than recorded", dim(128, 1, 1), rec, dim(32, 1, 1), dim(512, 1, 1), dim(32, 1, 1), dim(512, 1, 1)},
		{"zero grid dim", dim(128, 1, 1), rec, dim(0, 1, 1), rec, dim(0, 1, 1), rec},
		{"grid overflow", dim(32, 1, 1), rec, dim(1<<30, 1, 1), rec, dim(1<<30, 1, 1), rec},
		{"grid y overflow", dim(256, 1, 1), dim(256, 8, 1), dim(1, 60000, 1), dim(256, 8, 1), dim(1, 60000, 1), dim(256, 8, 1)},
		{"tuned block over the limit", dim(2048, 1, 1), rec, dim(32, 1, 1), rec, dim(32, 1, 1), rec},
	} {
		p := &Plan{TunedBlock: tc.tuned, RecordedBlock: tc.recorded}
		g, b := p.Geometry(tc.grid, tc.block)
		if g != tc.wantGrid || b != tc.wantBlock {
			t.Errorf("%s: grid %s block %s, want %s %s", tc.name, g, b, tc.wantGrid, tc.wantBlock)
		}
		if !hasZeroDim(tc.grid) && !hasZeroDim(tc.block) {
			if hasZeroDim(g) || hasZeroDim(b) {
				t.Errorf("%s: a zero dimension from a valid launch", tc.name)
			}
			if g.Count()*b.Count() < tc.grid.Count()*tc.block.Count() {
				t.Errorf("%s: %d threads do not cover the launch's %d", tc.name, g.Count()*b.Count(), tc.grid.Count()*tc.block.Count())
			}
		}
	}
}

// checkPlans is what a fuzzed reader's plans must satisfy: whatever the
// input, an accepted plan is one the runtime can compile and launch.
func checkPlans(t *testing.T, path string, plans map[string]*Plan, proteus bool) {
	for k, p := range plans {
		if p == nil || k == "" || p.Kernel != k || p.Source != path || p.Proteus != proteus {
			t.Fatalf("plan %q: %+v", k, p)
		}
		if err := p.Config.Validate(); err != nil {
			t.Fatalf("plan %q: invalid config: %v", k, err)
		}
		c := p.Config
		if !p.Original && c.Passes == "" {
			t.Fatalf("plan %q: no pipeline", k)
		}
		if c.SetLaunchBounds && (c.MaxThreads <= 0 || c.MaxThreads > 1024) {
			t.Fatalf("plan %q: launch bounds %d", k, c.MaxThreads)
		}
		if !p.TunedBlock.IsZero() && (hasZeroDim(p.TunedBlock) || p.TunedBlock.Count() > 1024 || proteus) {
			t.Fatalf("plan %q: tuned block %s", k, p.TunedBlock)
		}
		for _, block := range []mneme.Dim3{dim(1, 1, 1), dim(1024, 1, 1), p.RecordedBlock, p.TunedBlock} {
			cf := p.ConfigFor(block)
			if cf.SetLaunchBounds && uint64(cf.MaxThreads) < block.Count() {
				t.Fatalf("plan %q: launch bounds %d below the block's %d threads", k, cf.MaxThreads, block.Count())
			}
			if g, b := p.Geometry(dim(7, 3, 2), block); !hasZeroDim(block) && (hasZeroDim(g) || hasZeroDim(b)) {
				t.Fatalf("plan %q: geometry %s %s", k, g, b)
			}
		}
	}
}

func FuzzReadProteusTuned(f *testing.F) {
	f.Add([]byte(`{"_Z1av":{"Pipeline":"","OptLevel":"2","CodeGenOptLevel":1,"SpecializeArgs":false,"LaunchBounds":true,"TunedMaxThreads":256,"MinBlocksPerSM":2}}`))
	f.Add([]byte(`{"k":{"OptLevel":3,"TunedMaxThreads":1e3,"MinBlocksPerSM":-1}}`))
	f.Add([]byte(`{"k":[],"":{},"x":{"OptLevel":"\u00e9"}}`))
	f.Add([]byte(`[1]`))
	// One file per fuzzing process, rewritten for each input: a folder
	// per input would cost more than the reader.
	path := filepath.Join(f.TempDir(), "proteus.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		plans, err := ReadProteusTuned(path)
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("error does not name the file: %v", err)
		}
		checkPlans(t, path, plans, true)
	})
}

func FuzzReadMnemeTuned(f *testing.F) {
	f.Add([]byte(`{"_Z1kv":{"config":{"passes":"default<O3>","codegen_opt":3,"block":{"x":64,"y":1,"z":1},"set_launch_bounds":true,"max_threads":64},"recorded_block":{"x":128,"y":1,"z":1},"launch_searched":true}}`))
	f.Add([]byte(`{"k":{"config":{"original":true,"block":{"x":0,"y":5}},"launch_searched":true}}`))
	f.Add([]byte(`{"k":{"config":null},"j":{"config":{"codegen_opt":-1}}}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"k":{"config":{"specialize":true,"specialize_args":[1]},"statistics":"run","folded":[{"arg":1,"values":["0a"]}],"classes":[{"grid":{"x":4},"block":{"x":64},"config":{"codegen_opt":2}},{"grid":{"x":4},"block":{"x":64},"config":{}}]}}`))
	// One file per fuzzing process, rewritten for each input: a folder
	// per input would cost more than the reader.
	path := filepath.Join(f.TempDir(), "mneme_tuned_kernels.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		plans, err := ReadMnemeTuned(path)
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("error does not name the file: %v", err)
		}
		checkPlans(t, path, plans, false)
	})
}

// The edges of each bound a Proteus entry is checked against: the last
// value accepted and the first refused.
func TestReadProteusTunedBoundaries(t *testing.T) {
	path := writeFile(t, "edges.json", `{
		"cg0": {"CodeGenOptLevel": 0}, "cg3": {"CodeGenOptLevel": 3}, "cgneg": {"CodeGenOptLevel": -1},
		"mt1024": {"TunedMaxThreads": 1024, "MinBlocksPerSM": 1}, "mt1025": {"TunedMaxThreads": 1025},
		"mt0": {"TunedMaxThreads": 0, "MinBlocksPerSM": 4}, "mb0": {"TunedMaxThreads": 64, "MinBlocksPerSM": 0}}`)
	plans, err := ReadProteusTuned(path)
	if err == nil || !strings.Contains(err.Error(), `"cgneg"`) || !strings.Contains(err.Error(), `"mt1025"`) {
		t.Fatalf("error %v, want cgneg and mt1025 refused", err)
	}
	if plans["cg0"] == nil || plans["cg0"].Config.CodegenOpt != 0 || plans["cg3"] == nil || plans["cg3"].Config.CodegenOpt != 3 {
		t.Errorf("codegen levels 0 and 3 must be kept: %+v %+v", plans["cg0"], plans["cg3"])
	}
	if p := plans["mt1024"]; p == nil || !p.Config.SetLaunchBounds || p.Config.MaxThreads != 1024 || p.Config.MinBlocksPerSM != 1 {
		t.Errorf("TunedMaxThreads 1024: %+v", p)
	}
	if p := plans["mt0"]; p == nil || p.Config.SetLaunchBounds || p.Config.MinBlocksPerSM != 0 {
		t.Errorf("TunedMaxThreads 0 gives no launch bounds: %+v", p)
	}
	if p := plans["mb0"]; p == nil || !p.Config.SetLaunchBounds || p.Config.MinBlocksPerSM != 0 {
		t.Errorf("MinBlocksPerSM 0 gives no minimum: %+v", p)
	}
}

func TestMaxVariantsFromEnvBounds(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		bad   bool
	}{{"1", 1, false}, {"0", DefaultMaxVariants, true}, {"-3", DefaultMaxVariants, true}, {"x", DefaultMaxVariants, true}, {"", DefaultMaxVariants, false}} {
		t.Setenv(MaxVariantsEnv, tc.value)
		n, err := MaxVariantsFromEnv()
		if n != tc.want || (err != nil) != tc.bad {
			t.Errorf("%s=%q: %d, %v; want %d, error %v", MaxVariantsEnv, tc.value, n, err, tc.want, tc.bad)
		}
		if err != nil && !strings.Contains(err.Error(), MaxVariantsEnv) {
			t.Errorf("the error does not name the variable: %v", err)
		}
	}
}
