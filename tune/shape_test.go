package tune

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

var shapeLaunch = Launch{Kernel: "vecadd", Grid: mneme.Dim3{X: 8, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, NumArgs: 4, ScalarArgs: []int{2, 3}}

func paramsOf(t *testing.T, sh SpaceShape, preset string) map[string]Param {
	t.Helper()
	s, err := ShapedPreset(preset, sh, shapeLaunch, mneme.DeviceLimits{})
	if err != nil {
		t.Fatalf("%+v: %v", sh, err)
	}
	out := map[string]Param{}
	for _, p := range s.Params {
		out[p.Name] = p
	}
	return out
}

// TestShapeEachOptionAlone changes one of Mneme's space options at a time
// and checks that it changes its parameter and nothing else.
func TestShapeEachOptionAlone(t *testing.T) {
	base := paramsOf(t, SpaceShape{}, "standard")
	three := 3
	cases := []struct {
		name  string
		sh    SpaceShape
		param string
		want  func(p Param, ok bool) bool
	}{
		{"launch-dim none", SpaceShape{LaunchDim: "none"}, ParamBlockX, func(p Param, ok bool) bool { return !ok }},
		{"passes", SpaceShape{Passes: []string{"default<O1>", "default<O3>"}}, ParamPasses, func(p Param, ok bool) bool { return p.Cardinality() == 2 }},
		{"fixed-passes", SpaceShape{FixedPasses: "default<O1>"}, ParamPasses, func(p Param, ok bool) bool { return p.Kind == KindFixed && p.Choices[0] == "default<O1>" }},
		{"codegen-opt-range", SpaceShape{CodegenOptRange: "1:3"}, ParamCodegenOpt, func(p Param, ok bool) bool { return p.Kind == KindInt && p.Cardinality() == 3 }},
		{"fixed-codegen-opt", SpaceShape{FixedCodegenOpt: &three}, ParamCodegenOpt, func(p Param, ok bool) bool { return p.Kind == KindFixed && p.Choices[0] == 3 }},
		{"specialize-space off", SpaceShape{SpecializeSpace: "off"}, ParamSpecialize, func(p Param, ok bool) bool { return p.Kind == KindFixed && p.Choices[0] == false }},
		{"specialize-space on", SpaceShape{SpecializeSpace: "on"}, ParamSpecialize, func(p Param, ok bool) bool { return p.Kind == KindFixed && p.Choices[0] == true }},
		{"specialize-dims-space fixed", SpaceShape{SpecializeDimsSpace: "fixed"}, ParamSpecializeDims, func(p Param, ok bool) bool { return p.Kind == KindFixed && p.Choices[0] == false }},
		{"launch-bounds-space on-off", SpaceShape{LaunchBoundsSpace: "on-off"}, ParamLaunchBounds, func(p Param, ok bool) bool { return ok && p.Kind == KindBool }},
	}
	for _, c := range cases {
		got := paramsOf(t, c.sh, "standard")
		p, ok := got[c.param]
		if !c.want(p, ok) {
			t.Errorf("%s: parameter %s is %+v (present %v)", c.name, c.param, p, ok)
		}
		for name, bp := range base {
			if name == c.param {
				continue
			}
			if gp, ok := got[name]; !ok || fmt.Sprint(gp) != fmt.Sprint(bp) {
				t.Errorf("%s: changed parameter %s too: %+v -> %+v", c.name, name, bp, gp)
			}
		}
	}
}

// TestShapeLaunchBoundsPolicies checks max_threads under each policy and a
// searched max_threads range, with launch bounds on.
func TestShapeLaunchBoundsPolicies(t *testing.T) {
	derive := func(sh SpaceShape) mneme.Config {
		t.Helper()
		sh.LaunchBoundsSpace, sh.FixedPasses = "on", "default<O3>"
		s, err := ShapedPreset("quick", sh, shapeLaunch, mneme.DeviceLimits{})
		if err != nil {
			t.Fatal(err)
		}
		pt := Point{ParamBlockX: 128, ParamPasses: "default<O3>", ParamSpecialize: false, ParamLaunchBounds: true, ParamMinBlocks: 1}
		if _, ok := s.Param(ParamMaxThreads); ok {
			pt[ParamMaxThreads] = 512
		}
		c, err := s.Evaluate(pt)
		if err != nil {
			t.Fatalf("%+v: %v", sh, err)
		}
		return c
	}
	for policy, want := range map[string]int{"": 128, "block-threads": 128, "recorded": 256, "hardware": 1024} {
		if c := derive(SpaceShape{MaxThreadsPolicy: policy}); c.MaxThreads != want || !c.SetLaunchBounds {
			t.Errorf("policy %q: max_threads %d, want %d", policy, c.MaxThreads, want)
		}
	}
	if c := derive(SpaceShape{MaxThreadsRange: "128:1024:128"}); c.MaxThreads != 512 {
		t.Errorf("max-threads-range: max_threads %d, want the point's 512", c.MaxThreads)
	}
	// A searched max_threads below the block is infeasible.
	s, _ := ShapedPreset("quick", SpaceShape{LaunchBoundsSpace: "on", FixedPasses: "default<O3>", MaxThreadsRange: "32:64:32"}, shapeLaunch, mneme.DeviceLimits{})
	if _, err := s.Evaluate(Point{ParamBlockX: 128, ParamPasses: "default<O3>", ParamSpecialize: false, ParamLaunchBounds: true, ParamMinBlocks: 1, ParamMaxThreads: 64}); err == nil {
		t.Error("max_threads 64 below a block of 128 was accepted")
	}
}

func TestParseIntRange(t *testing.T) {
	for _, c := range []struct {
		in   string
		want *IntRangeSpec
		err  string
	}{
		{"", nil, ""},
		{"2:3", &IntRangeSpec{2, 3, 1}, ""},
		{"0-3", &IntRangeSpec{0, 3, 1}, ""},
		{"1:3:2", &IntRangeSpec{1, 3, 2}, ""},
		{"2", &IntRangeSpec{2, 2, 1}, ""},
		{"3:1", nil, "LO is above HI"},
		{"0:1000000000", nil, "within 0..3"},
		{"1:2:0", nil, "step must be at least 1"},
		{"a:b", nil, "want LO:HI"},
		{"1:2:3:4", nil, "want LO:HI"},
	} {
		got, err := ParseIntRange("codegen-opt-range", c.in, 0, 3)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "--codegen-opt-range") {
				t.Errorf("%q: error %v, want one naming the flag and saying %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
	}
	if _, err := ParseIntRange("max-threads-range", "1:1024:0", 1, 1024); err == nil {
		t.Error("a zero step was accepted")
	}
	if _, err := ParseIntRange("max-threads-range", "1:1000000", 1, 10_000_000); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a million values: %v", err)
	}
}

func TestStudyFailFastAndTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the test worker")
	}
	opts := studyOptions(t.TempDir())
	opts.Workers = 1
	opts.FailFast = true
	st := runStudy(t, opts, nil, nil, 0)
	failed := 0
	for _, tr := range st.Trials() {
		if !tr.OK() {
			failed++
		}
	}
	if st.stopped != StopFailFast || failed != 1 || len(st.Trials()) >= 40 {
		t.Errorf("fail-fast: stopped %q after %d trials with %d failures", st.stopped, len(st.Trials()), failed)
	}
	sum, _ := st.Finish("_Z4testv", "sh", "gpu", 40, 0)
	if sum.Status != StopFailFast || sum.NumTrialsCompleted != len(st.Trials())-1 {
		t.Errorf("summary: status %q, %d completed", sum.Status, sum.NumTrialsCompleted)
	}

	opts = studyOptions(t.TempDir())
	opts.Timeout = 1e-9
	st = runStudy(t, opts, nil, nil, 0)
	if st.stopped != StopTimeout || len(st.Trials()) != 1 {
		t.Errorf("timeout: stopped %q after %d trials (want the baseline only)", st.stopped, len(st.Trials()))
	}
}

// fakeProposer speaks the proposer's side of the protocol in Go: a space of
// three points with their configurations; it records the tells.
type fakeProposer struct {
	// batch makes the open answer carry every point, as the Python proposer
	// does for exhaustive and random sampling.
	batch bool
	mu    sync.Mutex
	tells []proposeRequest
	asks  int
}

// fakePoint is the fake's proposal number n (1-based): block 64·n.
func fakePoint(n int) map[string]any {
	bx := 64 * n
	cfg := mneme.Baseline(mneme.Dim3{X: 8, Y: 1, Z: 1}, mneme.Dim3{X: uint32(bx), Y: 1, Z: 1}, 0)
	return map[string]any{"id": n, "params": map[string]any{"bx": bx}, "config": cfg}
}

func (f *fakeProposer) StartProposer(ctx context.Context) (*ProposerConn, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		defer outW.Close()
		sc := bufio.NewScanner(inR)
		enc := json.NewEncoder(outW)
		next := 0
		for sc.Scan() {
			var req proposeRequest
			if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
				enc.Encode(map[string]any{"ok": false, "error": err.Error()})
				continue
			}
			switch req.Op {
			case "open":
				a := map[string]any{"ok": true, "space": map[string]any{
					"name": "fake", "size": 3, "feasible": 3,
					"params": []Param{IntRange("bx", 64, 192, 64)}}}
				if f.batch {
					a["points"] = []map[string]any{fakePoint(1), fakePoint(2), fakePoint(3)}
				}
				enc.Encode(a)
			case "ask":
				f.mu.Lock()
				f.asks++
				f.mu.Unlock()
				if next == 3 {
					enc.Encode(map[string]any{"ok": true, "done": true})
					continue
				}
				next++
				a := fakePoint(next)
				a["ok"] = true
				enc.Encode(a)
			case "tell":
				f.mu.Lock()
				f.tells = append(f.tells, req)
				f.mu.Unlock()
				enc.Encode(map[string]any{"ok": true})
			}
		}
	}()
	return &ProposerConn{In: inW, Out: outR, Close: func() error { inW.Close(); return nil }}, nil
}

// TestProposerSamplerRunsTheProposedConfigurations runs a study whose
// points and configurations come from the proposer: each becomes one trial,
// and each outcome is told back under its id. Proposals the open answer
// carries all at once run the same trials with no ask or tell.
func TestProposerSamplerRunsTheProposedConfigurations(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the test worker")
	}
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { testProposerSampler(t, batch) })
	}
}

func testProposerSampler(t *testing.T, batch bool) {
	fp := &fakeProposer{batch: batch}
	// The recorded launch (block 256) is none of the proposed ones, which
	// would otherwise be the baseline's trial, reused.
	base := mneme.Baseline(mneme.Dim3{X: 4, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0)
	goSpace := &Space{Name: "preset", Baseline: base, Params: []Param{Bool("x")}, Derive: func(Point) (mneme.Config, error) { return base, nil }}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{Sampler: "exhaustive", SpaceModule: "fake.py:Fake", Workers: 1, Iterations: 3, Metric: "median", Objective: "speedup"}
	conn, err := fp.StartProposer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ps, space, closeFn, err := openProposer(conn, opts, &target{dbDir: dir, kernel: &db.Kernel{StaticHash: "k"}, inst: &db.Instance{DynamicHash: "i"}}, goSpace)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if d := space.Describe(); d.Name != "fake" || d.Feasible != 3 || !d.Finite {
		t.Fatalf("described %+v", d)
	}
	e, _ := newTestExecutor(t)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	st := &Study{Space: space, Sampler: ps, Exec: e, Opts: opts}
	if _, err := st.RunBaseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := st.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ps.Err() != nil {
		t.Fatal(ps.Err())
	}
	blocks := map[uint32]bool{}
	for _, tr := range st.Trials() {
		if !tr.IsBaseline() {
			blocks[tr.Config.Block.X] = true
		}
	}
	if len(blocks) != 3 || !blocks[64] || !blocks[128] || !blocks[192] {
		t.Errorf("trials ran blocks %v, want the proposed 64, 128, 192", blocks)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if batch {
		if fp.asks != 0 || len(fp.tells) != 0 {
			t.Errorf("batched proposals: %d asks and %d tells, want none", fp.asks, len(fp.tells))
		}
		return
	}
	ids := map[int]bool{}
	for _, tl := range fp.tells {
		ids[tl.ID] = true
		if tl.Status == string(mneme.StatusVerified) && (tl.Loss == nil || *tl.Loss <= 0) {
			t.Errorf("tell %d: verified without a loss", tl.ID)
		}
	}
	if len(ids) != 3 {
		t.Errorf("told ids %v, want 1, 2, 3", ids)
	}
}

// TestKeyChangesEachAlone changes one key option at a time: each is
// reported by its name, and options that may change on resume are not.
func TestKeyChangesEachAlone(t *testing.T) {
	base := Options{Sampler: "tpe", Preset: "quick", SpaceHash: "h", Seed: 1, Metric: "median", Objective: "time",
		Iterations: 5, Instance: "a/b", Kernel: "k", LaunchSafety: "safe", SpaceModule: "s.py:S", SpaceArgs: []string{"n=1"}}
	for name, change := range map[string]func(*Options){
		"sampler":       func(o *Options) { o.Sampler = "random" },
		"preset":        func(o *Options) { o.Preset = "full" },
		"space":         func(o *Options) { o.SpaceHash = "other" },
		"seed":          func(o *Options) { o.Seed = 2 },
		"metric":        func(o *Options) { o.Metric = "mean" },
		"objective":     func(o *Options) { o.Objective = "speedup" },
		"iterations":    func(o *Options) { o.Iterations = 7 },
		"instance":      func(o *Options) { o.Instance = "a/c" },
		"kernel":        func(o *Options) { o.Kernel = "j" },
		"launch_safety": func(o *Options) { o.LaunchSafety = "aggressive" },
		"space_module":  func(o *Options) { o.SpaceModule = "t.py:T" },
		"space_arg":     func(o *Options) { o.SpaceArgs = []string{"n=2"} },
	} {
		cur := base
		change(&cur)
		ch := KeyChanges(base, cur)
		if len(ch) != 1 || !strings.HasPrefix(ch[0], name+":") {
			t.Errorf("changing %s: %v", name, ch)
		}
	}
	cur := base
	cur.FailFast, cur.Timeout, cur.Workers, cur.ProteusOutput = true, 9, 4, "p.json"
	cur.LaunchSafety = "conservative" // Mneme's word for safe
	if ch := KeyChanges(base, cur); len(ch) != 0 {
		t.Errorf("options free to change on resume reported: %v", ch)
	}
}

// TestSummaryCountsEachStatus adds one trial of each status alone to a
// baseline and checks the Mneme count it lands in; the baseline is never
// counted.
func TestSummaryCountsEachStatus(t *testing.T) {
	count := func(sum Summary) map[string]int {
		return map[string]int{"verified": sum.NumVerified, "failed_verification": sum.NumFailedVerification,
			"invalid_launch": sum.NumInvalidLaunch, "compile_error": sum.NumCompileError, "runtime_error": sum.NumRuntimeError,
			"invalid_config": sum.NumInvalidConfig, "internal_error": sum.NumInternalError}
	}
	want := map[mneme.Status]string{mneme.StatusTimeout: "runtime_error", mneme.StatusCrashed: "runtime_error"}
	base := Trial{Number: 0, Params: BaselineParams(), Status: mneme.StatusVerified, TimeNS: 1}
	for _, st := range mneme.Statuses() {
		var sum Summary
		sum.mnemeCounts([]Trial{base, {Number: 1, Params: Point{"x": 1}, Status: st}}, 0, "")
		into, ok := want[st]
		if !ok {
			into = string(st)
		}
		for k, n := range count(sum) {
			if (k == into) != (n == 1) || n > 1 {
				t.Errorf("status %s: %s = %d (want it counted under %s only)", st, k, n, into)
			}
		}
		if sum.NumTrialsCompleted != 1 || sum.Status != "ok" || sum.NumTrialsRequested != nil {
			t.Errorf("status %s: completed %d, status %q, requested %v", st, sum.NumTrialsCompleted, sum.Status, sum.NumTrialsRequested)
		}
	}
	var sum Summary
	sum.mnemeCounts(nil, 40, StopTimeout)
	if sum.Status != StopTimeout || sum.NumTrialsRequested == nil || *sum.NumTrialsRequested != 40 {
		t.Errorf("a run stopped by --timeout with 40 requested: %+v", sum)
	}
}
