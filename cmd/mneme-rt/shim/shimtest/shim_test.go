package shimtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme/appabi"
)

// benchDir holds the C benchmarks of the shim (the repository's bench/
// folder, with every other benchmark and measurement script); the
// benchmarks below build and run them.
const benchDir = "../../../../bench"

// build compiles the stand-in runtime as a shared library (as libcudart.so
// is) and links a program from srcs with or without the shim.
type build struct {
	t       testing.TB
	dir     string
	cc      string
	standin string
}

func newBuild(t testing.TB) *build {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: ", err)
	}
	// The C compiler reads the sources, not this process: open them here so
	// that go test's cache sees them as inputs and reruns after a change.
	shimSrcs, err := filepath.Glob("../*.c")
	if err != nil || len(shimSrcs) == 0 {
		t.Fatalf("no shim sources in ..: %v", err)
	}
	headers, _ := filepath.Glob("../*.h")
	inputs := append(append(slices.Clone(shimSrcs), headers...), "testdata/cudart_standin.c", "testdata/cuda_api.h", "testdata/app.c", "testdata/memo_app.c", "testdata/throttle_app.c", "testdata/stats_app.c", "testdata/deploy_bg_app.c", "testdata/classes_app.c", "testdata/rt_standin.c", benchDir+"/forward_bench.c", benchDir+"/stats_bench.c", benchDir+"/stats_update_bench.c")
	for _, src := range inputs {
		if _, err := os.ReadFile(src); err != nil {
			t.Fatal(err)
		}
	}
	b := &build{t: t, dir: t.TempDir(), cc: cc}
	b.standin = filepath.Join(b.dir, "libcudart_standin.so")
	b.run(cc, "-O2", "-fPIC", "-shared", "-o", b.standin, "testdata/cudart_standin.c")
	// Archived as the Makefile archives libmneme_shim.a.
	objs := []string{"rcs", filepath.Join(b.dir, "libmneme_shim.a")}
	for _, src := range shimSrcs {
		obj := filepath.Join(b.dir, strings.TrimSuffix(filepath.Base(src), ".c")+".o")
		b.run(cc, "-O2", "-fPIC", "-Wall", "-Werror", "-c", src, "-o", obj)
		objs = append(objs, obj)
	}
	b.run("ar", objs...)
	return b
}

func (b *build) run(name string, args ...string) string {
	b.t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		b.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// standinLibrary builds the stand-in runtime library (testdata/rt_standin.c)
// with warnings as errors and returns its path.
func (b *build) standinLibrary() string {
	lib := filepath.Join(b.dir, "librt_standin.so")
	b.run(b.cc, "-O2", "-fPIC", "-shared", "-Wall", "-Werror", "-o", lib, "testdata/rt_standin.c")
	return lib
}

// link builds src into a program, with the shim and the wrap flags when
// wrapped, the way the compiler wrapper links applications.
func (b *build) link(out, src string, wrapped bool) string {
	exe := filepath.Join(b.dir, out)
	args := []string{"-O2", "-o", exe, src}
	if wrapped {
		args = append(args, "-Wl,--whole-archive", filepath.Join(b.dir, "libmneme_shim.a"), "-Wl,--no-whole-archive", appabi.WrapLinkFlag())
	}
	args = append(args, b.standin, "-Wl,-rpath,"+b.dir, "-ldl", "-lpthread")
	b.run(b.cc, args...)
	return exe
}

func runProgram(t *testing.T, exe string, env ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", exe, err, o.String(), e.String())
	}
	return o.String(), e.String()
}

// TestForwardingIsTransparent: a program linked with the shim prints exactly
// what it prints without it, so every argument and return value (launch
// geometry, arguments, streams, error codes, pointers, pitches) passed
// through unchanged, and the shim writes nothing.
func TestForwardingIsTransparent(t *testing.T) {
	b := newBuild(t)
	plain := b.link("app_plain", "testdata/app.c", false)
	wrapped := b.link("app_wrapped", "testdata/app.c", true)
	want, _ := runProgram(t, plain)
	got, stderr := runProgram(t, wrapped, "MNEME_RECORD=")
	if got != want {
		t.Fatalf("output differs with the shim:\n--- plain\n%s--- wrapped\n%s", want, got)
	}
	if stderr != "" {
		t.Errorf("the shim wrote to stderr while not recording: %q", stderr)
	}
	for _, line := range []string{"grid=9,2,1 block=128,1,1 arg0=42 shared=64 stream=0x5", "ret 2", "launch_ptsz", "malloc big 2", "pitch 0 ", " 256\n", "free 0 1 1 3"} {
		if !strings.Contains(want, line) {
			t.Errorf("the stand-in output lacks %q; the test no longer checks what it claims:\n%s", line, want)
		}
	}
	// The wrapper must really be in the path: its symbols are linked in.
	nm, err := exec.LookPath("nm")
	if err == nil {
		syms := b.run(nm, wrapped)
		for _, s := range appabi.WrappedSymbols {
			if !strings.Contains(syms, "__wrap_"+s+"\n") {
				t.Errorf("__wrap_%s not linked into the program", s)
			}
		}
	}
}

// TestRecordingWithoutDriver loads the real runtime library into a wrapped
// program on a machine without a CUDA driver: the program must still behave
// identically, and the status file must report the registrations and why
// nothing could be recorded.
func TestRecordingWithoutDriver(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libcuda.so.1"); err == nil {
		t.Skip("a CUDA driver is installed; the GPU tests cover recording")
	}
	b := newBuild(t)
	lib := realLibrary(t)
	plain := b.link("app_plain", "testdata/app.c", false)
	wrapped := b.link("app_wrapped", "testdata/app.c", true)
	want, _ := runProgram(t, plain)
	rdb := filepath.Join(b.dir, "rdb")
	got, stderr := runProgram(t, wrapped, "MNEME_RECORD=1", "MNEME_RDB="+rdb, "MNEME_RT_LIB="+lib)
	if got != want {
		t.Fatalf("output differs while recording without a driver:\n--- plain\n%s--- recording\n%s", want, got)
	}
	if !strings.Contains(stderr, "recording disabled") {
		t.Errorf("stderr does not say recording is disabled: %q", stderr)
	}
	data, err := os.ReadFile(filepath.Join(rdb, ".mneme-record.status"))
	if err != nil {
		t.Fatalf("no status file: %v (stderr %q)", err, stderr)
	}
	var st struct {
		Fatbinaries       int      `json:"fatbinaries"`
		KernelsRegistered int      `json:"kernels_registered"`
		GlobalsRegistered int      `json:"globals_registered"`
		Errors            []string `json:"errors"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	// The library must not drag LLVM into applications.
	if ldd, err := exec.LookPath("ldd"); err == nil {
		if deps := b.run(ldd, lib); strings.Contains(deps, "LLVM") {
			t.Errorf("the runtime library links LLVM:\n%s", deps)
		}
	}
	if st.Fatbinaries != 1 || st.KernelsRegistered != 2 || st.GlobalsRegistered != 1 {
		t.Errorf("registrations %+v, want 1 fat binary, 2 kernels, 1 global", st)
	}
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "no kernel can be recorded") {
		t.Errorf("status errors %q", st.Errors)
	}
}

var (
	realLibOnce sync.Once
	realLibDir  string
	realLibErr  error
)

// realLibrary builds the runtime library (cmd/mneme-rt) once per test
// binary and returns its path.
func realLibrary(t testing.TB) string {
	t.Helper()
	realLibOnce.Do(func() {
		if realLibDir, realLibErr = os.MkdirTemp("", "mneme-rt-lib"); realLibErr != nil {
			return
		}
		lib := filepath.Join(realLibDir, "libmneme_rt.so")
		if out, err := exec.Command("go", "build", "-buildmode=c-shared", "-o", lib, "../..").CombinedOutput(); err != nil {
			realLibErr = fmt.Errorf("building the runtime library: %v\n%s", err, out)
			return
		}
		realLibErr = readLibrarySources()
	})
	if realLibErr != nil {
		t.Fatal(realLibErr)
	}
	return filepath.Join(realLibDir, "libmneme_rt.so")
}

// readLibrarySources reads every source file of the module's packages the
// runtime library is built from: go test's cache then sees them as the
// tests' inputs and runs the tests again after any of them changed, which
// it cannot know of a build made in a subprocess.
func readLibrarySources() error {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "../..").Output()
	if err != nil {
		return fmt.Errorf("listing the runtime library's packages: %v", err)
	}
	root, err := filepath.Abs("../../../..")
	if err != nil {
		return err
	}
	for _, dir := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dir, root+string(filepath.Separator)) && dir != root {
			continue // a module of the module cache: never changes
		}
		for _, pattern := range []string{"*.go", "*.c", "*.h"} {
			files, _ := filepath.Glob(filepath.Join(dir, pattern))
			for _, f := range files {
				if _, err := os.ReadFile(f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if realLibDir != "" {
		os.RemoveAll(realLibDir)
	}
	os.Exit(code)
}

var nsPerLaunch = regexp.MustCompile(`([0-9.]+) ns/launch`)

// BenchmarkForwardedLaunch reports what the shim adds to one launch when
// not recording: the same loop of launches linked with and without it,
// against a runtime whose launch does nothing. The wrapped-minus-plain
// figure is the shim's cost (target: well under 1 µs).
func BenchmarkForwardedLaunch(b *testing.B) {
	bd := newBuild(b)
	plain := bd.link("bench_plain", benchDir+"/forward_bench.c", false)
	wrapped := bd.link("bench_wrapped", benchDir+"/forward_bench.c", true)
	n := max(b.N, 1000000)
	b.ResetTimer()
	p := measure(b, plain, n)
	w := measure(b, wrapped, n)
	b.ReportMetric(p, "ns/plain-launch")
	b.ReportMetric(w, "ns/wrapped-launch")
	b.ReportMetric(w-p, "ns/added")
}

// BenchmarkRecordingLaunchStats reports what the shim adds to a launch
// while recording that it forwards in C and counts in the launch
// statistics (shape, four argument values, the timing sample with
// stand-in events), against the same program linked without it: the
// statistics' target is at most 100 ns a launch, and this figure holds the
// whole of the shim's recording path around them.
func BenchmarkRecordingLaunchStats(b *testing.B) {
	bd := newBuild(b)
	lib := bd.standinLibrary()
	plain := bd.link("stats_plain", benchDir+"/stats_bench.c", false)
	wrapped := bd.link("stats_wrapped", benchDir+"/stats_bench.c", true)
	n := max(b.N, 1000000)
	b.ResetTimer()
	p := measure(b, plain, n)
	w := measure(b, wrapped, n, "MNEME_RECORD=1", "MNEME_RT_LIB="+lib, "MNEME_TEST_STATS=1")
	b.ReportMetric(p, "ns/plain-launch")
	b.ReportMetric(w, "ns/recording-launch")
	b.ReportMetric(w-p, "ns/added")
}

// BenchmarkCountedLaunchStats reports what the shim adds to a launch
// outside a recording with MNEME_LAUNCH_STATS set (`mneme deploy
// measure`'s runs): the count by shape and the gated timing sample with
// stand-in events and gates, against the same program linked without it.
// Target: at most 100 ns a launch.
func BenchmarkCountedLaunchStats(b *testing.B) {
	bd := newBuild(b)
	lib := bd.standinLibrary()
	plain := bd.link("stats_plain", benchDir+"/stats_bench.c", false)
	wrapped := bd.link("stats_wrapped", benchDir+"/stats_bench.c", true)
	n := max(b.N, 1000000)
	b.ResetTimer()
	p := measure(b, plain, n)
	w := measure(b, wrapped, n, "MNEME_LAUNCH_STATS="+filepath.Join(bd.dir, "stats"), "MNEME_RT_LIB="+lib, "MNEME_TEST_STATS=1")
	b.ReportMetric(p, "ns/plain-launch")
	b.ReportMetric(w, "ns/counted-launch")
	b.ReportMetric(w-p, "ns/added")
}

// BenchmarkLaunchStatsUpdate reports the launch statistics' own cost per
// launch: the shim's inline update (shape, four argument values, the
// timing decision) called in a loop, without the table lock the launch
// path takes anyway. Target: at most 100 ns.
func BenchmarkLaunchStatsUpdate(b *testing.B) {
	bd := newBuild(b)
	exe := filepath.Join(bd.dir, "stats_update")
	bd.run(bd.cc, "-O2", "-Wall", "-Werror", "-o", exe, benchDir+"/stats_update_bench.c",
		filepath.Join(bd.dir, "libmneme_shim.a"), appabi.WrapLinkFlag(), bd.standin, "-Wl,-rpath,"+bd.dir, "-ldl", "-lpthread")
	n := max(b.N, 1000000)
	b.ResetTimer()
	out, err := exec.Command(exe, strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v\n%s", exe, err, out)
	}
	m := nsPerUpdate.FindStringSubmatch(string(out))
	if m == nil {
		b.Fatalf("%s printed %q", exe, out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	b.ReportMetric(v, "ns/update")
}

var nsPerUpdate = regexp.MustCompile(`([0-9.]+) ns/update`)

func measure(b *testing.B, exe string, n int, env ...string) float64 {
	cmd := exec.Command(exe, strconv.Itoa(n))
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v\n%s", exe, err, out)
	}
	m := nsPerLaunch.FindStringSubmatch(string(out))
	if m == nil {
		b.Fatalf("%s printed %q", exe, out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestLaunchMemo checks the shim's launch memo against a stand-in runtime
// library that decides like the recorder with --max-recordings 3: the shim
// asks the library only about launches it cannot decide itself (the first
// of each kernel, and new arguments until the kernel is capped), forwards
// every launch to CUDA exactly once, and hands the library exact counts of
// what it decided alone.
func TestLaunchMemo(t *testing.T) {
	b := newBuild(t)
	lib := b.standinLibrary()
	app := b.link("memo_app", "testdata/memo_app.c", true)
	out, stderr := runProgram(t, app, "MNEME_RECORD=1", "MNEME_RT_LIB="+lib)
	var asked, counted []string
	launches, finishes, drains := 0, 0, 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case line == "finish":
			finishes++
		case line == "drain":
			drains++
		case strings.HasPrefix(line, "asked "):
			asked = append(asked, strings.TrimPrefix(line, "asked "))
		case strings.HasPrefix(line, "counted "):
			counted = append(counted, strings.TrimPrefix(line, "counted "))
		case strings.HasPrefix(line, "launch "):
			launches++
		}
	}
	// Finished once: by the exit handler (before the CUDA runtime's own),
	// not again by the library's destructor.
	if finishes != 1 {
		t.Errorf("the runtime was finished %d times, want once", finishes)
	}
	// The application's cudaDeviceReset first lets the recorder finish
	// the snapshots it holds in device memory.
	if drains != 1 {
		t.Errorf("the runtime was drained %d times before the device reset, want once", drains)
	}
	wantAsked := []string{
		"_Z6kernelPfi grid=1 arg0=0", "_Z6kernelPfi grid=1 arg0=1", "_Z6kernelPfi grid=1 arg0=2",
		"_Z5otherv grid=1 arg0=0", "_Z3big5Large grid=1 arg0=9", "_Z3big5Large grid=1 arg0=10",
		"_Z3big5Large grid=1 arg0=9",
	}
	if strings.Join(asked, "\n") != strings.Join(wantAsked, "\n") {
		t.Errorf("the library was asked about:\n%s\nwant:\n%s", strings.Join(asked, "\n"), strings.Join(wantAsked, "\n"))
	}
	// Argument 0 repeats 3 times after it was recorded, 1 and 2 once each;
	// 5, 5, 6 and the other geometry come after the cap; _Z5otherv is
	// forwarded 4 times after the first; of the large argument's three keys
	// (two values, two shared sizes) the first repeats twice, the last once.
	wantCounted := []string{
		"_Z3big5Large repeat=10 launches=1",
		"_Z3big5Large repeat=10 launches=2",
		"_Z5otherv repeat=0 launches=4",
		"_Z6kernelPfi repeat=0 launches=4",
		"_Z6kernelPfi repeat=1 launches=3",
		"_Z6kernelPfi repeat=2 launches=1",
		"_Z6kernelPfi repeat=3 launches=1",
	}
	sort.Strings(counted)
	if strings.Join(counted, "\n") != strings.Join(wantCounted, "\n") {
		t.Errorf("the shim counted:\n%s\nwant:\n%s", strings.Join(counted, "\n"), strings.Join(wantCounted, "\n"))
	}
	if launches != 23 {
		t.Errorf("%d launches reached CUDA, want all 23\n%s", launches, out)
	}
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}
}

// TestLaunchThrottle checks the shim's side of the launch throttle against
// the stand-in library, which turns it on with every = 4 and stand-ins for
// the driver's calls: every 4th launch the shim forwards records the next
// of the 32 events on the launch's stream (the per-thread default stream
// for a per-thread launch on stream 0), waiting first for that event's
// previous record once all 32 were used; launches on a stream being
// captured are left alone; every call is made in relaxed capture mode,
// restored after; an unusable throttle is refused; and once the library
// turns it off the launches make no event calls.
func TestLaunchThrottle(t *testing.T) {
	b := newBuild(t)
	lib := b.standinLibrary()
	app := b.link("throttle_app", "testdata/throttle_app.c", true)
	out, stderr := runProgram(t, app, "MNEME_RECORD=1", "MNEME_RT_LIB="+lib, "MNEME_TEST_THROTTLE=1")
	var events, modes []string
	launches, launchesAfterOff := 0, 0
	refused, on, off := false, false, false
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case line == "throttle refused every=0":
			refused = true
		case line == "throttle on":
			on = true
		case line == "throttle off":
			off = true
		case strings.HasPrefix(line, "throttle mode "):
			modes = append(modes, strings.TrimPrefix(line, "throttle mode "))
		case strings.HasPrefix(line, "throttle "):
			if off {
				t.Errorf("after the throttle was turned off: %s", line)
			}
			events = append(events, strings.TrimPrefix(line, "throttle "))
		case strings.HasPrefix(line, "launch"):
			launches++
			if off {
				launchesAfterOff++
			}
		}
	}
	if !refused || !on || !off {
		t.Errorf("refused every=0: %v, turned on: %v, turned off: %v; want all", refused, on, off)
	}
	// 200 launches on 0x10: marks 0..49 (events 1..32, then 1..18 again,
	// each waited for first); 8 per-thread launches: marks 50 and 51; 8 on
	// the captured stream: marks 52 and 53, no event call.
	var want []string
	for mark := 0; mark < 52; mark++ {
		ev := mark%32 + 1
		stream := "0x10"
		if mark >= 50 {
			stream = "0x2"
		}
		if mark >= 32 {
			want = append(want, fmt.Sprintf("sync ev=%d", ev))
		}
		want = append(want, fmt.Sprintf("record ev=%d stream=%s", ev, stream))
	}
	if strings.Join(events, "\n") != strings.Join(want, "\n") {
		t.Errorf("event calls:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}
	if len(modes) != 2*54 {
		t.Errorf("%d capture-mode exchanges, want %d (two per mark)", len(modes), 2*54)
	}
	for i, m := range modes {
		if want := []string{"2", "0"}[i%2]; m != want {
			t.Fatalf("capture-mode exchange %d set mode %s, want %s (relaxed, then the thread's own back)", i, m, want)
		}
	}
	if launches != 225 || launchesAfterOff != 9 {
		t.Errorf("%d launches reached CUDA (%d after the throttle was off), want 225 (9)", launches, launchesAfterOff)
	}
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}
}

// TestDeployFastPath checks the shim's side of running tuned kernels
// against the stand-in library: a kernel the library gives a fast path is
// asked about once and then launched by the shim straight through the
// driver's entry point with the tuned block and a grid that still covers
// the launch's threads; an untuned kernel is asked once and then forwarded;
// a kernel specialized per value is asked once per value (and when a launch
// needs more shared memory than its variant was opened up for) and its
// repeats run in the shim; and MNEME_JIT=off leaves every launch to CUDA
// without loading the library.
func TestDeployFastPath(t *testing.T) {
	b := newBuild(t)
	lib := b.standinLibrary()
	app := b.link("memo_app", "testdata/memo_app.c", true)
	out, stderr := runProgram(t, app, "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB="+lib)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	count := func(prefix string) int {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				n++
			}
		}
		return n
	}
	if count("init deploy") != 1 {
		t.Errorf("the library was not started in deployment mode:\n%s", out)
	}
	if n := count("asked deploy _Z6kernelPfi"); n != 1 {
		t.Errorf("the fast-path kernel was asked about %d times, want once:\n%s", n, out)
	}
	// 11 launches with grid 1 x block 32 and one with grid 2, block 16 now.
	if n := count("jit launch tuned_kernel grid=2 block=16"); n != 11 {
		t.Errorf("%d tuned launches with grid 2 block 16, want 11:\n%s", n, out)
	}
	if n := count("jit launch tuned_kernel grid=4 block=16 arg0=0"); n != 1 {
		t.Errorf("%d tuned launches with grid 4 block 16, want 1:\n%s", n, out)
	}
	if n := count("asked deploy _Z5otherv"); n != 1 {
		t.Errorf("the untuned kernel was asked about %d times, want once", n)
	}
	// Told before its first launch that no tuned file lists it, the untuned
	// kernel is never asked about, and its launches still run (the
	// application's code); the tuned kernel is unaffected.
	fwd, _ := runProgram(t, app, "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB="+lib, "MNEME_TEST_FORWARD=_Z5otherv")
	if !strings.Contains(fwd, "forwarded _Z5otherv taken=1 again=0") || strings.Contains(fwd, "asked deploy _Z5otherv") {
		t.Errorf("an unlisted kernel marked before its launches:\n%s", fwd)
	}
	if strings.Count(fwd, "launch f=kernel_b") != strings.Count(out, "launch f=kernel_b") || strings.Count(fwd, "asked deploy _Z6kernelPfi") != 1 {
		t.Errorf("marking the unlisted kernel changed the launches:\n%s\nbefore:\n%s", fwd, out)
	}
	var askedBig []string
	for _, l := range lines {
		if strings.HasPrefix(l, "asked deploy _Z3big5Large") {
			askedBig = append(askedBig, strings.TrimPrefix(l, "asked deploy _Z3big5Large "))
		}
	}
	wantBig := []string{"grid=1 arg0=9 shared=0", "grid=1 arg0=10 shared=0", "grid=1 arg0=9 shared=65536"}
	if strings.Join(askedBig, "\n") != strings.Join(wantBig, "\n") {
		t.Errorf("the specialized kernel was asked about:\n%s\nwant:\n%s", strings.Join(askedBig, "\n"), strings.Join(wantBig, "\n"))
	}
	// Six launches run the variant: three by the library, three remembered.
	if n := count("jit launch specialized grid=1 block=32 arg0=9 shared=0"); n != 3 {
		t.Errorf("%d launches of value 9 without shared memory, want 3:\n%s", n, out)
	}
	if n := count("jit launch specialized grid=1 block=32 arg0=10"); n != 1 {
		t.Errorf("%d launches of value 10, want 1:\n%s", n, out)
	}
	if n := count("jit launch specialized grid=1 block=32 arg0=9 shared=65536"); n != 2 {
		t.Errorf("%d launches of value 9 with 64 KiB of shared memory, want 2:\n%s", n, out)
	}
	// Only the untuned kernel's 5 launches reach CUDA.
	if n := count("launch f=kernel_b"); n != 5 || count("launch ") != 5 {
		t.Errorf("%d launches reached CUDA, want the untuned kernel's 5:\n%s", count("launch "), out)
	}
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}

	// A recording records the application's own code: tuned files are ignored.
	rec, _ := runProgram(t, app, "MNEME_RECORD=1", "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB="+lib)
	if strings.Contains(rec, "deploy") || !strings.Contains(rec, "asked _Z6kernelPfi") {
		t.Errorf("recording with a tuned file set must record, not deploy:\n%s", rec)
	}

	// Asked to (mneme record --with-tuned-kernels), a recording runs the
	// tuned code for the launches it does not record: the three new
	// instances of _Z6kernelPfi are launched by the recorder with the
	// application's code, its 9 other launches and the specialized
	// kernel's 6 run tuned code, and the untuned kernel's 5 reach CUDA.
	both, stderr := runProgram(t, app, "MNEME_RECORD=1", "MNEME_RECORD_TUNED=1", "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB="+lib)
	for prefix, want := range map[string]int{"launch f=kernel_a": 3, "jit launch tuned_kernel": 9, "jit launch specialized": 6,
		"launch f=kernel_b": 5, "asked _Z6kernelPfi": 3, "asked deploy _Z6kernelPfi": 1} {
		if n := strings.Count("\n"+both, "\n"+prefix); n != want {
			t.Errorf("recording with tuned kernels: %d lines %q, want %d:\n%s", n, prefix, want, both)
		}
	}
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}

	// Counted and deploying (`mneme deploy measure`'s tuned runs): every
	// launch is counted and the sample timed behind gates, whichever code
	// runs it (the tuned fast path, a remembered variant, the library's
	// answer or the application's own), and each runs the code it runs
	// uncounted.
	counted, stderr := runProgram(t, app, "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB="+lib,
		"MNEME_LAUNCH_STATS="+filepath.Join(b.dir, "deploy-stats"), "MNEME_TEST_STATS=1")
	for prefix, want := range map[string]int{"jit launch tuned_kernel grid=2 block=16": 11, "jit launch specialized": 6, "launch f=kernel_b": 5, "launch ": 5} {
		if n := strings.Count("\n"+counted, "\n"+prefix); n != want {
			t.Errorf("counted: %d lines %q, want %d:\n%s", n, prefix, want, counted)
		}
	}
	var stats []string
	for _, l := range strings.Split(counted, "\n") {
		if strings.HasPrefix(l, "stats _Z") || strings.HasPrefix(l, "stats gates") {
			stats = append(stats, strings.TrimPrefix(l, "stats "))
		}
	}
	wantStats := []string{
		// 8 + 4 + 3 + 1 launches of the sample (a shape's 2nd to 9th);
		// the untuned kernel's reach the stand-in runtime, which fails
		// grid 1: no second event, and no time.
		// Five first launches, timed without a gate.
		"gates 16 ungated=5 held=12 early=0 gave_up=0 captured=0",
		"_Z6kernelPfi launches=12 other=0 params=-1",
		"_Z6kernelPfi shape grid=1 block=32 shared=0 launches=11 timed=8 ns=16000 first=2000 covered=0",
		// A shape launched once has its first launch's time only.
		"_Z6kernelPfi shape grid=2 block=32 shared=0 launches=1 timed=0 ns=0 first=2000 covered=0",
		"_Z5otherv launches=5 other=0 params=-1",
		"_Z5otherv shape grid=1 block=32 shared=0 launches=5 timed=0 ns=0 first=0 covered=0",
		"_Z3big5Large launches=6 other=0 params=-1",
		"_Z3big5Large shape grid=1 block=32 shared=0 launches=4 timed=3 ns=6000 first=2000 covered=0",
		"_Z3big5Large shape grid=1 block=32 shared=65536 launches=2 timed=1 ns=2000 first=2000 covered=0",
	}
	if strings.Join(stats, "\n") != strings.Join(wantStats, "\n") {
		t.Errorf("counted while deploying:\n%s\nwant:\n%s", strings.Join(stats, "\n"), strings.Join(wantStats, "\n"))
	}
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}

	off, stderr := runProgram(t, app, "MNEME_TUNED_KERNELS=tuned.json", "MNEME_JIT=off", "MNEME_RT_LIB="+lib)
	if strings.Contains(off, "deploy") || strings.Count(off, "launch ") != 23 || stderr != "" {
		t.Errorf("with MNEME_JIT=off every launch must reach CUDA untouched:\n%s\nstderr: %s", off, stderr)
	}
}

// TestDeployClasses checks the shim's side of a kernel tuned per launch
// shape against the stand-in library: each shape and folded value is asked
// about once; the repeats of a class's launches run its code in the shim
// with that class's block rule (class A's tuned block, class B's own); a
// shape no class covers, a value never measured and a covered grid and
// block with other shared memory run the application's own code, and
// their repeats reach CUDA without asking the library.
func TestDeployClasses(t *testing.T) {
	b := newBuild(t)
	lib := b.standinLibrary()
	app := b.link("classes_app", "testdata/classes_app.c", true)
	out, stderr := runProgram(t, app, "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB="+lib)
	var asked []string
	counts := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(l, "asked deploy "):
			asked = append(asked, strings.TrimPrefix(l, "asked deploy _Z5triadPfi "))
		case strings.HasPrefix(l, "jit launch "), strings.HasPrefix(l, "launch "):
			if i := strings.Index(l, " stream="); i > 0 {
				l = l[:i]
			}
			counts[l]++
		}
	}
	wantAsked := []string{"grid=4 arg0=1 shared=0", "grid=16 arg0=1 shared=0", "grid=64 arg0=1 shared=0",
		"grid=4 arg0=3 shared=0", "grid=16 arg0=1 shared=128", "grid=16 arg0=2 shared=0"}
	if strings.Join(asked, "\n") != strings.Join(wantAsked, "\n") {
		t.Errorf("the library was asked about:\n%s\nwant each shape and value once:\n%s", strings.Join(asked, "\n"), strings.Join(wantAsked, "\n"))
	}
	want := map[string]int{
		"jit launch class_a grid=8 block=128 arg0=1 shared=0":           3,
		"jit launch class_b grid=16 block=256 arg0=1 shared=0":          3,
		"jit launch class_b grid=16 block=256 arg0=2 shared=0":          3,
		"launch f=kernel_t grid=64,1,1 block=256,1,1 arg0=1 shared=0":   3,
		"launch f=kernel_t grid=4,1,1 block=256,1,1 arg0=3 shared=0":    3,
		"launch f=kernel_t grid=16,1,1 block=256,1,1 arg0=1 shared=128": 3,
	}
	for l, n := range want {
		if counts[l] != n {
			t.Errorf("%d launches %q, want %d", counts[l], l, n)
		}
	}
	if len(counts) != len(want) {
		t.Errorf("launches %v, want only %v", counts, want)
	}
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}
}

// TestDeployFindsTheRuntimeOfAMovedInstallation: an application deploying
// tuned kernels without MNEME_RT_LIB loads the runtime library of the prefix
// the shim was built in; when that prefix has moved (an installation
// unpacked elsewhere), the one of the prefix of the `mneme` on PATH (through
// a link, as /usr/local/bin/mneme may be); with neither, none, and the
// application's own code runs.
func TestDeployFindsTheRuntimeOfAMovedInstallation(t *testing.T) {
	b := newBuild(t)
	// The shim as the Makefile builds it, naming a build prefix that is
	// no longer there.
	built := filepath.Join(b.dir, "build-prefix", "lib", "libmneme_rt.so")
	srcs, _ := filepath.Glob("../*.c")
	objs := []string{"rcs", filepath.Join(b.dir, "libmneme_shim.a")}
	for _, src := range srcs {
		obj := filepath.Join(b.dir, "prefixed-"+strings.TrimSuffix(filepath.Base(src), ".c")+".o")
		b.run(b.cc, "-O2", "-fPIC", "-Wall", "-Werror", `-DMNEME_DEFAULT_RT_LIB="`+built+`"`, "-c", src, "-o", obj)
		objs = append(objs, obj)
	}
	os.Remove(objs[1])
	b.run("ar", objs...)
	app := b.link("memo_app_prefixed", "testdata/memo_app.c", true)

	// The moved installation: PREFIX/bin/mneme and PREFIX/lib/libmneme_rt.so,
	// reached through a link in another folder on PATH.
	moved := filepath.Join(b.dir, "moved")
	for _, d := range []string{"bin", "lib"} {
		if err := os.MkdirAll(filepath.Join(moved, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b.run(b.cc, "-O2", "-fPIC", "-shared", "-o", filepath.Join(moved, "lib", "libmneme_rt.so"), "testdata/rt_standin.c")
	if err := os.WriteFile(filepath.Join(moved, "bin", "mneme"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	onPath := filepath.Join(b.dir, "path")
	os.MkdirAll(onPath, 0o755)
	if err := os.Symlink(filepath.Join(moved, "bin", "mneme"), filepath.Join(onPath, "mneme")); err != nil {
		t.Fatal(err)
	}
	deploy := func(path string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(app)
		cmd.Env = append(os.Environ(), "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB=", "PATH="+path)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s\n%s", err, o.String(), e.String())
		}
		return o.String(), e.String()
	}
	empty := filepath.Join(b.dir, "empty")
	os.MkdirAll(empty, 0o755)
	if out, stderr := deploy(empty + ":" + onPath); !strings.Contains(out, "init deploy") {
		t.Errorf("the moved installation's library was not loaded:\n%s\n%s", out, stderr)
	}
	if out, stderr := deploy(empty); strings.Contains(out, "init deploy") || !strings.Contains(stderr, "no runtime library") {
		t.Errorf("with no mneme on PATH: stdout\n%s\nstderr\n%s", out, stderr)
	}
	// The build prefix's library, when it is there, comes first.
	if err := os.MkdirAll(filepath.Dir(built), 0o755); err != nil {
		t.Fatal(err)
	}
	b.run(b.cc, "-O2", "-fPIC", "-shared", "-o", built, "testdata/rt_standin.c")
	if out, stderr := deploy(empty); !strings.Contains(out, "init deploy") {
		t.Errorf("the build prefix's library was not loaded:\n%s\n%s", out, stderr)
	}
}

// TestLaunchStatistics checks the shim's launch statistics against the
// stand-in library (MNEME_TEST_STATS): every launch of every kernel is
// counted by shape and argument value, selected or not; the library is
// asked once per shape of a kernel whose shapes it covers; a shape's
// launches 2 to 9 and every 256th are timed with a pair of events, except on
// a stream being captured, each behind a gate enqueued just before its
// first event and still holding when its second is recorded (none on the
// captured stream; a failed launch opens its gate at once and is not
// timed); the launches the library recorded carry the time it measured;
// and a step counter fills the value table, then stops being watched.
func TestLaunchStatistics(t *testing.T) {
	b := newBuild(t)
	lib := b.standinLibrary()
	app := b.link("stats_app", "testdata/stats_app.c", true)
	out, stderr := runProgram(t, app, "MNEME_RECORD=1", "MNEME_RT_LIB="+lib, "MNEME_TEST_STATS=1")
	var asked, stats []string
	launches := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(line, "asked "):
			asked = append(asked, strings.TrimPrefix(line, "asked "))
		case strings.HasPrefix(line, "stats "):
			stats = append(stats, strings.TrimPrefix(line, "stats "))
		case strings.HasPrefix(line, "launch "):
			launches++
		}
	}
	// The launches on the captured stream are never shown to the library:
	// recording one would synchronize inside the capture.
	wantAsked := []string{
		"_Z4stepPfii grid=7 step=0", "_Z4stepPfii grid=14 step=1",
		"_Z5otherv grid=7 arg0=0",
	}
	if strings.Join(asked, "\n") != strings.Join(wantAsked, "\n") {
		t.Errorf("the library was asked about:\n%s\nwant:\n%s", strings.Join(asked, "\n"), strings.Join(wantAsked, "\n"))
	}
	if launches != 621 {
		t.Errorf("%d launches reached CUDA, want all 621", launches)
	}
	steps := ""
	for i := range 16 {
		steps += fmt.Sprintf(" %x:1", i)
	}
	want := []string{
		"timer refused without elapsed",
		"timer on",
		// 18 sampled launches of the step kernel and 8 of the other (4
		// of them failed: no second event, their gates opened at once);
		// the other kernel's first launches of its two shapes, ungated.
		"gates 27 ungated=2 held=22 early=0 gave_up=0 captured=0",
		// The 23 that launched are waiting for their events, then collected.
		"in flight 23",
		"in flight 0",
		"records 52",
		"_Z4stepPfii launches=610 other=0 params=3",
		// The library's own launch (1 us) and launches 2-9 and 256 (2 us).
		"_Z4stepPfii shape grid=7 block=128 shared=0 launches=300 timed=10 ns=19000 first=0 covered=1",
		"_Z4stepPfii shape grid=14 block=128 shared=0 launches=300 timed=10 ns=19000 first=0 covered=1",
		// Captured: counted, none timed, none shown to the library.
		"_Z4stepPfii shape grid=21 block=128 shared=256 launches=10 timed=0 ns=0 first=0 covered=0",
		"_Z4stepPfii arg 0 size=8 tracked=1 more=0 values=1 7f0000001000:610",
		"_Z4stepPfii arg 1 size=4 tracked=1 more=1 values=16" + steps,
		"_Z4stepPfii arg 2 size=4 tracked=1 more=0 values=3 380:300 700:300 a80:10",
		"_Z5otherv launches=11 other=0 params=1",
		"_Z5otherv shape grid=7 block=128 shared=0 launches=5 timed=4 ns=8000 first=2000 covered=0",
		"_Z5otherv shape grid=8 block=128 shared=0 launches=6 timed=0 ns=0 first=0 covered=0",
		"_Z5otherv arg 0 size=4 tracked=1 more=0 values=1 0:11",
	}
	if strings.Join(stats, "\n") != strings.Join(want, "\n") {
		t.Errorf("statistics:\n%s\nwant:\n%s", strings.Join(stats, "\n"), strings.Join(want, "\n"))
	}
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}
}

// TestDeployStartsInTheBackground: deploying, the application's choice of
// device (cudaSetDevice) or its first
// allocation starts the runtime library on a thread of its own (and tells
// it so), so the tuned kernels' cached code can load before their first
// launch; a launch that comes while it loads runs the application's own
// code instead of waiting. Without a preload the next launch asks the
// library and the one after runs the tuned code from the shim; with the
// code preloaded and handed to the shim, for every launch or for the
// launch's key (with the folded argument's value; an answer folding an
// argument without its values is declined), no launch
// asks: the first after the start runs the tuned code from the shim. Either way a launch asking for more dynamic shared
// memory than the code accepts asks the library, which opens it up.
func TestDeployStartsInTheBackground(t *testing.T) {
	b := newBuild(t)
	lib := b.standinLibrary()
	app := b.link("deploy_bg_app", "testdata/deploy_bg_app.c", true)
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"asked at the first launch", nil, []string{"init deploy thread=background background=1", "launch f=kernel_a",
			"asked deploy _Z6kernelPfi", "jit launch tuned_kernel", "jit launch tuned_kernel",
			"asked deploy _Z6kernelPfi", "jit launch tuned_kernel"}},
		{"preloaded", []string{"MNEME_TEST_PRELOAD=all"}, []string{"init deploy thread=background background=1", "launch f=kernel_a",
			"preloaded folded taken=0", "preloaded _Z6kernelPfi all taken=1", "jit launch tuned_kernel", "jit launch tuned_kernel",
			"asked deploy _Z6kernelPfi", "jit launch tuned_kernel"}},
		{"preloaded for its recorded launch", []string{"MNEME_TEST_PRELOAD=keyed"}, []string{"init deploy thread=background background=1", "launch f=kernel_a",
			"preloaded folded taken=0", "preloaded _Z6kernelPfi keyed taken=1", "jit launch tuned_kernel", "jit launch tuned_kernel",
			"asked deploy _Z6kernelPfi", "jit launch tuned_kernel"}},
		{"started by the choice of device", []string{"MNEME_TEST_PRELOAD=all", "MNEME_TEST_SET_DEVICE=1"}, []string{"init deploy thread=background background=1",
			"preloaded folded taken=0", "preloaded _Z6kernelPfi all taken=1", "jit launch tuned_kernel", "jit launch tuned_kernel", "jit launch tuned_kernel",
			"asked deploy _Z6kernelPfi", "jit launch tuned_kernel"}},
		{"preloaded for its folded value", []string{"MNEME_TEST_PRELOAD=folded"}, []string{"init deploy thread=background background=1", "launch f=kernel_a",
			"preloaded folded taken=0", "preloaded _Z6kernelPfi folded taken=1", "preloaded _Z6kernelPfi folded other value taken=1",
			"jit launch tuned_kernel", "jit launch tuned_kernel", "asked deploy _Z6kernelPfi", "jit launch tuned_kernel"}},
	} {
		gate := filepath.Join(t.TempDir(), "gate")
		env := append([]string{"MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB=" + lib, "MNEME_TEST_GATE=" + gate}, tc.env...)
		out, stderr := runProgram(t, app, env...)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if i := strings.Index(l, " grid="); i > 0 {
				l = l[:i]
			}
			got = append(got, l)
		}
		// The library's start and the first launch run side by side: either
		// may print first.
		if len(got) >= 2 && got[0] > got[1] {
			got[0], got[1] = got[1], got[0]
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: the program's calls:\n%s\nwant:\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
		// The tuned launches keep the block rule: grid 1 x block 32 becomes
		// grid 2 x block 16, whoever launches.
		// The first launch runs the application's code while the library
		// loads, unless the library started (and finished) before it.
		wantTuned := 3
		if slices.Contains(tc.env, "MNEME_TEST_SET_DEVICE=1") {
			wantTuned = 4
		}
		if n := strings.Count(out, "jit launch tuned_kernel grid=2 block=16"); n != wantTuned {
			t.Errorf("%s: %d tuned launches with grid 2 block 16, want %d:\n%s", tc.name, n, wantTuned, out)
		}
		if stderr != "" {
			t.Errorf("%s: stderr: %q", tc.name, stderr)
		}
	}
	// Counted too (`mneme deploy measure`'s tuned runs), the launch made
	// while the library loads waits for it: all four launches are counted,
	// run the tuned code and are timed, the first one apart.
	counted, stderr := runProgram(t, app, "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB="+lib,
		"MNEME_LAUNCH_STATS="+filepath.Join(b.dir, "bg-stats"), "MNEME_TEST_STATS=1")
	if !strings.Contains(counted, "stats _Z6kernelPfi launches=4 ") || strings.Count(counted, "jit launch tuned_kernel") != 4 ||
		strings.Count(counted, "launch f=kernel_a") != 0 || !strings.Contains(counted, " first=2000 ") || stderr != "" {
		t.Errorf("deploying and counted, with the library loading in the background:\n%s\nstderr: %s", counted, stderr)
	}
	// Counted while the library is held loading: the launch made meanwhile
	// waits for it and is counted as early (a run without counting would
	// have run the application's code for it); the later ones are not.
	early, stderr := runProgram(t, app, "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB="+lib,
		"MNEME_TEST_GATE="+filepath.Join(t.TempDir(), "gate-early"), "MNEME_TEST_GATE_AFTER_MS=100",
		"MNEME_LAUNCH_STATS="+filepath.Join(b.dir, "early-stats"), "MNEME_TEST_STATS=1")
	if !strings.Contains(early, "stats _Z6kernelPfi launches=4 other=0 params=-1 early=1\n") || strings.Count(early, "jit launch tuned_kernel") != 4 || stderr != "" {
		t.Errorf("counted, one launch made while the library loads:\n%s\nstderr: %s", early, stderr)
	}
	// Two launches right behind the one that waited fall in the early
	// window (its wait after the library became ready): uncounted, they
	// too would have run the application's code. The ones 200 ms later
	// do not.
	burst, stderr := runProgram(t, app, "MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB="+lib,
		"MNEME_TEST_GATE="+filepath.Join(t.TempDir(), "gate-burst"), "MNEME_TEST_GATE_AFTER_MS=100", "MNEME_TEST_BURST=1",
		"MNEME_LAUNCH_STATS="+filepath.Join(b.dir, "burst-stats"), "MNEME_TEST_STATS=1")
	if !strings.Contains(burst, "stats _Z6kernelPfi launches=6 other=0 params=-1 early=3\n") || strings.Count(burst, "jit launch tuned_kernel") != 6 || stderr != "" {
		t.Errorf("counted, a burst of launches behind the one that waited:\n%s\nstderr: %s", burst, stderr)
	}
	// Counting only (deploy measure's untuned runs), the choice of device
	// starts the library in the background too: the launches then find it
	// ready, are counted and run the application's code.
	countOnly, stderr := runProgram(t, app, "MNEME_RT_LIB="+lib, "MNEME_TEST_GATE="+filepath.Join(t.TempDir(), "gate-count"),
		"MNEME_TEST_SET_DEVICE=1", "MNEME_LAUNCH_STATS="+filepath.Join(b.dir, "count-stats"), "MNEME_TEST_STATS=1")
	if !strings.Contains(countOnly, "init deploy thread=background background=1") || !strings.Contains(countOnly, "stats _Z6kernelPfi launches=4 ") ||
		strings.Count(countOnly, "launch f=kernel_a") != 4 || stderr != "" {
		t.Errorf("counting, the library started by the choice of device:\n%s\nstderr: %s", countOnly, stderr)
	}
	// Not deploying, the allocation starts nothing.
	plain, _ := runProgram(t, app, "MNEME_RT_LIB="+lib)
	if strings.Contains(plain, "init") || strings.Count(plain, "launch f=kernel_a") != 4 {
		t.Errorf("without a tuned file the library was started or a launch changed:\n%s", plain)
	}
	// A tuned file that lists nothing (an empty object or array, what
	// optimize writes when nothing helped) is not deployed either; one
	// that holds anything else is.
	for _, tc := range []struct {
		env, text string
		deploys   bool
	}{
		{"MNEME_TUNED_KERNELS", "{}\n", false},
		{"PROTEUS_TUNED_KERNELS", " [ ]\n", false},
		{"MNEME_TUNED_KERNELS", "{}}", true},
		{"MNEME_TUNED_KERNELS", "{\"k\": 1}", true},
		{"PROTEUS_TUNED_KERNELS", "[1]", true},
	} {
		file := filepath.Join(t.TempDir(), "tuned.json")
		if err := os.WriteFile(file, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := runProgram(t, app, tc.env+"="+file, "MNEME_RT_LIB="+lib)
		if strings.Contains(out, "init deploy") != tc.deploys {
			t.Errorf("%s holding %q: library started %v, want %v:\n%s", tc.env, tc.text, !tc.deploys, tc.deploys, out)
		}
	}
}

// TestDeployFirstLaunchTrace: with MNEME_TRACE set, the first launch of a
// tuned kernel is traced step by step, with timestamps in order: its entry
// into the shim, the decision and the driver's launch. A kernel whose code
// was preloaded and handed to the shim is decided there, never asking the
// library; one launched while the library loads runs the application's
// code, and says so.
func TestDeployFirstLaunchTrace(t *testing.T) {
	b := newBuild(t)
	lib := b.standinLibrary()
	app := b.link("deploy_bg_app", "testdata/deploy_bg_app.c", true)
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"preloaded", []string{"MNEME_TEST_PRELOAD=all", "MNEME_TEST_WAIT_FIRST=1"}, []string{
			"deploy: first launch of _Z6kernelPfi: entered the shim (its tuned code is known)",
			"deploy: first launch of _Z6kernelPfi runs its tuned code, preloaded, from the shim",
			"deploy: first launch of _Z6kernelPfi: driver launch returned 0"}},
		{"preloaded for its recorded launch", []string{"MNEME_TEST_PRELOAD=keyed", "MNEME_TEST_WAIT_FIRST=1"}, []string{
			"deploy: first launch of _Z6kernelPfi: entered the shim (its tuned code is known)",
			"deploy: first launch of _Z6kernelPfi runs its tuned code, preloaded, from the shim",
			"deploy: first launch of _Z6kernelPfi: driver launch returned 0"}},
		{"asked", []string{"MNEME_TEST_WAIT_FIRST=1"}, []string{
			"deploy: first launch of _Z6kernelPfi: entered the shim (asking the library)",
			"deploy: first launch of _Z6kernelPfi: the library answered (it launched the tuned code)"}},
		{"while the library loads", []string{"MNEME_TEST_PRELOAD=all"}, []string{
			"deploy: first launch of _Z6kernelPfi: entered the shim (asking the library)",
			"deploy: a launch ran the application's code while the library loads",
			"deploy: first launch of _Z6kernelPfi: runtime launch returned 1"}},
	} {
		dir := t.TempDir()
		trace := filepath.Join(dir, "trace")
		env := append([]string{"MNEME_TUNED_KERNELS=tuned.json", "MNEME_RT_LIB=" + lib, "MNEME_TEST_GATE=" + filepath.Join(dir, "gate"), "MNEME_TRACE=" + trace}, tc.env...)
		out, _ := runProgram(t, app, env...)
		text, err := os.ReadFile(trace)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		last := int64(0)
		laterAsks := 0
		for _, l := range strings.Split(strings.TrimSpace(string(text)), "\n") {
			f := strings.SplitN(l, " ", 4)
			if len(f) != 4 || f[2] != "shim" || !strings.Contains(f[3], "launch") {
				continue
			}
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || ns < last {
				t.Errorf("%s: trace line without a timestamp in order: %q", tc.name, l)
			}
			last = ns
			// A later launch that asks the library is traced too: here the
			// one with more shared memory than the code accepts.
			if strings.HasPrefix(f[3], "deploy: a launch of _Z6kernelPfi: the library answered") {
				laterAsks++
				continue
			}
			got = append(got, f[3])
		}
		if laterAsks != 1 {
			t.Errorf("%s: %d later launches traced asking the library, want 1 (the one with 64 KiB of shared memory):\n%s", tc.name, laterAsks, text)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: traced:\n%s\nwant:\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
		if asked := strings.Contains(out, "asked deploy _Z6kernelPfi grid=1 arg0=3 shared=0"); asked != (tc.name == "asked") {
			t.Errorf("%s: the library was asked about a launch without shared memory: %v\n%s", tc.name, asked, out)
		}
	}
}

// TestDeployWithTheRealLibrary runs the deployment cases of
// TestDeployFastPath and TestDeployStartsInTheBackground against the real
// runtime library instead of the stand-in, on a machine without a CUDA
// driver: a valid tuned file starts deployment, which cannot run, so the
// library says so once and every launch runs the application's own code,
// exactly as without the shim; a malformed file is named in one warning;
// MNEME_JIT=off never loads the library. The GPU side of the same cases
// is scripts/gpu-deploy.sh's.
func TestDeployWithTheRealLibrary(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libcuda.so.1"); err == nil {
		t.Skip("a CUDA driver is installed; scripts/gpu-deploy.sh covers deployment on the GPU")
	}
	b := newBuild(t)
	lib := realLibrary(t)
	dir := t.TempDir()
	tuned := filepath.Join(dir, "mneme_tuned_kernels.json")
	if err := os.WriteFile(tuned, []byte(`{"_Z6kernelPfi": {"config": {"passes": "default<O2>", "specialize": true}, "instance": "1"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	malformed := filepath.Join(dir, "malformed.json")
	if err := os.WriteFile(malformed, []byte(`{"_Z6kernelPfi": {"config": `), 0o644); err != nil {
		t.Fatal(err)
	}
	// Tuned per launch shape, and three entries that contradict themselves
	// (each must be named, file and kernel, in one warning).
	const cfg = `"config": {"passes": "default<O2>", "specialize": true, "specialize_args": [1]}`
	class := func(gx int) string {
		return fmt.Sprintf(`{"grid": {"x": %d}, "block": {"x": 256}, "config": {"passes": "default<O1>"}}`, gx)
	}
	classed := writeTuned(t, dir, "classed.json", `{"_Z5triadPfi": {`+cfg+`, "statistics": "run", "folded": [{"arg": 1, "distinct": 2, "values": ["01000000", "02000000"]}], "classes": [`+class(4)+`, `+class(16)+`]}}`)
	overlap := writeTuned(t, dir, "overlap.json", `{"_Z5triadPfi": {`+cfg+`, "classes": [`+class(4)+`, `+class(4)+`]}}`)
	contradicts := writeTuned(t, dir, "contradicts.json", `{"_Z5triadPfi": {`+cfg+`, "statistics": "run", "folded": [{"arg": 1, "invariant": true, "distinct": 1, "values": ["01000000", "02000000"]}]}}`)
	noStats := writeTuned(t, dir, "nostats.json", `{"_Z5triadPfi": {`+cfg+`, "statistics": "none"}}`)
	for _, prog := range []string{"memo_app", "deploy_bg_app", "classes_app"} {
		plain := b.link(prog+"_plain", "testdata/"+prog+".c", false)
		wrapped := b.link(prog, "testdata/"+prog+".c", true)
		want, _ := runProgram(t, plain)
		for _, tc := range []struct {
			name string
			env  []string
			warn string // the one warning, "" for none
		}{
			{"tuned file", []string{"MNEME_TUNED_KERNELS=" + tuned}, "mneme: tuned kernels disabled: no CUDA driver found"},
			{"malformed file", []string{"MNEME_TUNED_KERNELS=" + malformed}, "mneme: " + malformed + ": "},
			{"Proteus file, JIT off", []string{"PROTEUS_TUNED_KERNELS=" + tuned, "MNEME_JIT=off"}, ""},
			{"classes", []string{"MNEME_TUNED_KERNELS=" + classed}, "mneme: tuned kernels disabled: no CUDA driver found"},
			{"overlapping classes", []string{"MNEME_TUNED_KERNELS=" + overlap}, "mneme: " + overlap + `: kernel "_Z5triadPfi": classes[0] and classes[1] overlap`},
			{"folded values that contradict the run", []string{"MNEME_TUNED_KERNELS=" + contradicts}, "mneme: " + contradicts + `: kernel "_Z5triadPfi": folded[0]: argument 1 held one value`},
			{"statistics the database lacks", []string{"MNEME_TUNED_KERNELS=" + noStats}, "mneme: " + noStats + `: kernel "_Z5triadPfi": statistics none`},
		} {
			env := append([]string{"MNEME_RT_LIB=" + lib, "MNEME_CACHE_DIR=" + filepath.Join(dir, "cache")}, tc.env...)
			got, stderr := runProgram(t, wrapped, env...)
			if got != want {
				t.Errorf("%s, %s: output differs from the plain build's:\n--- plain\n%s--- deployed\n%s", prog, tc.name, want, got)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			switch {
			case tc.warn == "" && stderr != "":
				t.Errorf("%s, %s: stderr %q, want nothing", prog, tc.name, stderr)
			case tc.warn != "" && (len(lines) != 1 || !strings.HasPrefix(lines[0], tc.warn)):
				t.Errorf("%s, %s: stderr %q, want one line starting %q", prog, tc.name, stderr, tc.warn)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cache")); err == nil {
		t.Error("a run that could not deploy wrote a cache")
	}
	// Nothing was written beside the tuned files either.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "classed.json contradicts.json malformed.json mneme_tuned_kernels.json nostats.json overlap.json" {
		t.Errorf("the tuned files' folder holds %s", got)
	}
}

func writeTuned(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLaunchStatisticsOutsideRecording: with MNEME_LAUNCH_STATS set and no
// recording (`mneme deploy measure`'s runs), the shim loads the library,
// counts every launch by shape without asking it anything, times the same
// sample behind gates (never a launch on a stream being captured, never a
// failed one), and finishes the library at exit so it can write the file;
// the launches run as they would uncounted. Where every gate gives up
// before its launch is enqueued (the stand-in's timeout mode), the program
// still runs through and no sample is kept: their events would hold the
// host's latency.
func TestLaunchStatisticsOutsideRecording(t *testing.T) {
	b := newBuild(t)
	lib := b.standinLibrary()
	app := b.link("stats_app", "testdata/stats_app.c", true)
	for _, tc := range []struct {
		mode        string
		gates       string
		timed, ns   [2]int // the step kernel's two sizes; the other kernel
		otherTimed  int
		otherTimeNs int
		first       int // each timed first launch's time (three shapes have one)
	}{
		// The first launches have no gate: a gate that gives up drops
		// none of them.
		{"1", "gates 27 ungated=4 held=22 early=0 gave_up=0 captured=0", [2]int{9, 9}, [2]int{18000, 18000}, 4, 8000, 2000},
		{"timeout", "gates 27 ungated=4 held=0 early=22 gave_up=27 captured=0", [2]int{0, 0}, [2]int{0, 0}, 0, 0, 2000},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			trace := filepath.Join(t.TempDir(), "trace")
			out, stderr := runProgram(t, app, "MNEME_LAUNCH_STATS="+filepath.Join(b.dir, "stats"), "MNEME_RT_LIB="+lib, "MNEME_TEST_STATS="+tc.mode, "MNEME_TRACE="+trace)
			// Each sample dropped because its gate gave up is traced.
			traced, _ := os.ReadFile(trace)
			if n, want := strings.Count(string(traced), "gate gave up; sample dropped"), 22-tc.timed[0]-tc.timed[1]-tc.otherTimed; n != want {
				t.Errorf("%d samples traced as dropped for their gate, want %d", n, want)
			}
			var stats []string
			launches, asked, finishes := 0, 0, 0
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				switch {
				case strings.HasPrefix(line, "asked"):
					asked++
				case line == "finish":
					finishes++
				case strings.HasPrefix(line, "stats "):
					stats = append(stats, strings.TrimPrefix(line, "stats "))
				case strings.HasPrefix(line, "launch "):
					launches++
				}
			}
			if asked != 0 || launches != 621 || finishes != 1 {
				t.Errorf("the library was asked %d times (want 0), %d launches reached CUDA (want 621), finished %d times (want 1)", asked, launches, finishes)
			}
			want := []string{
				"timer refused without elapsed",
				"timer on",
				tc.gates,
				"in flight 25",
				"in flight 0",
				"records 56",
				// The parameters are not learnt outside a recording.
				"_Z4stepPfii launches=610 other=0 params=-1",
				fmt.Sprintf("_Z4stepPfii shape grid=7 block=128 shared=0 launches=300 timed=%d ns=%d first=%d covered=0", tc.timed[0], tc.ns[0], tc.first),
				fmt.Sprintf("_Z4stepPfii shape grid=14 block=128 shared=0 launches=300 timed=%d ns=%d first=%d covered=0", tc.timed[1], tc.ns[1], tc.first),
				"_Z4stepPfii shape grid=21 block=128 shared=256 launches=10 timed=0 ns=0 first=0 covered=0",
				"_Z5otherv launches=11 other=0 params=-1",
				fmt.Sprintf("_Z5otherv shape grid=7 block=128 shared=0 launches=5 timed=%d ns=%d first=%d covered=0", tc.otherTimed, tc.otherTimeNs, tc.first),
				"_Z5otherv shape grid=8 block=128 shared=0 launches=6 timed=0 ns=0 first=0 covered=0",
			}
			if strings.Join(stats, "\n") != strings.Join(want, "\n") {
				t.Errorf("statistics:\n%s\nwant:\n%s", strings.Join(stats, "\n"), strings.Join(want, "\n"))
			}
			if stderr != "" {
				t.Errorf("stderr: %q", stderr)
			}
		})
	}
	// Without the variable nothing is counted: the library is not loaded.
	out, _ := runProgram(t, app, "MNEME_RT_LIB="+lib, "MNEME_TEST_STATS=1")
	if strings.Contains(out, "stats ") || strings.Contains(out, "finish") {
		t.Errorf("without MNEME_LAUNCH_STATS the library was loaded:\n%s", out)
	}
}
