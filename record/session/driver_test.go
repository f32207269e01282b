package session

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
)

// An executable with the wrapper's IR is recorded by its shim, one without
// it through the driver, anything else (a script) by whichever applies.
func TestHowToRecord(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: ", err)
	}
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Skip("no objcopy: ", err)
	}
	dir := t.TempDir()
	plain, wrapped := filepath.Join(dir, "plain"), filepath.Join(dir, "wrapped")
	if err := os.WriteFile(filepath.Join(dir, "main.c"), []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sec"), []byte("ir"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{cc, "-o", plain, filepath.Join(dir, "main.c")},
		{objcopy, "--add-section", "mneme_ir=" + filepath.Join(dir, "sec"), plain, wrapped},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	for app, want := range map[string]recordingPath{
		wrapped: viaShim, plain: viaDriverOnly, script(t, "true"): viaEither, filepath.Join(dir, "missing"): viaEither,
	} {
		if got := howToRecord(app); got != want {
			t.Errorf("%s: %v, want %v", filepath.Base(app), got, want)
		}
	}
}

// The injection library is named to the driver when it exists (here for a
// script), from MNEME_INJECT_LIB or beside the runtime library.
func TestRecordNamesTheInjectionLibrary(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libmneme_inject.so")
	if err := os.WriteFile(lib, []byte("stand-in"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(record.EnvInjectLib, lib)
	o := options(t)
	o.Command = []string{script(t, `echo "$CUDA_INJECTION64_PATH" > "$MNEME_RDB/inject.txt"`)}
	_ = Record(o, &bytes.Buffer{})
	got, err := os.ReadFile(filepath.Join(o.DB, "inject.txt"))
	if err != nil || strings.TrimSpace(string(got)) != lib {
		t.Errorf("the application saw CUDA_INJECTION64_PATH=%q (%v), want %s", got, err, lib)
	}
	t.Setenv(record.EnvInjectLib, filepath.Join(t.TempDir(), "missing.so"))
	o = options(t)
	o.Command = []string{script(t, `echo "${CUDA_INJECTION64_PATH:-unset}" > "$MNEME_RDB/inject.txt"`)}
	err = Record(o, &bytes.Buffer{})
	got, _ = os.ReadFile(filepath.Join(o.DB, "inject.txt"))
	if strings.TrimSpace(string(got)) != "unset" {
		t.Errorf("a missing injection library was named: %q", got)
	}
	if err == nil || !strings.Contains(err.Error(), "missing.so") {
		t.Errorf("nothing recorded without the injection library: %v, want the reason named", err)
	}
}

// What stopped the injection library (here: no CUPTI) is the one error of
// a recording through the driver.
func TestRecordThroughTheDriverReportsWhyNothingWasRecorded(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip(err)
	}
	lib := filepath.Join(t.TempDir(), "libmneme_inject.so")
	if err := os.WriteFile(lib, []byte("stand-in"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(record.EnvInjectLib, lib)
	const why = "CUPTI (libcupti.so) was not found"
	status := `{"pid": 1, "errors": ["` + why + `"]}`
	o := options(t, "/bin/sh", "-c", `printf '%s' '`+status+`' > "$MNEME_RDB/.mneme-record.status"`)
	err := Record(o, &bytes.Buffer{})
	var f *Failure
	if !errors.As(err, &f) || f.ExitCode != 1 || !strings.HasPrefix(err.Error(), why) {
		t.Errorf("Record: %v, want a Failure saying %q", err, why)
	}
	o = options(t, "/bin/sh", "-c", "true")
	if err := Record(o, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "never initialized the CUDA driver") {
		t.Errorf("a program without CUDA: %v", err)
	}
}

// Kernels recorded through the driver get their demangled names once the
// application has exited; one with IR is left alone.
func TestMachineKernelsAreDemangled(t *testing.T) {
	dir := t.TempDir()
	write := func(name, code string) {
		k := &db.Kernel{KernelName: name, DemangledName: name, ArgNames: []string{}, Specializations: []bool{},
			ArgSizes: []uint64{}, ArgKinds: []mneme.ArgKind{}, FormatVersion: db.FormatVersion, Instances: map[string]*db.Instance{},
			VAddr: db.FormatVAddr(1 << 26), VASize: 1 << 26, Code: code}
		k.StaticHash = db.StaticHash(name, []byte(code))
		if code == db.CodeMachine {
			k.Modules, k.DeviceCode = []string{}, db.DeviceCodeFileName([]byte("cubin"))
		} else {
			k.Modules = []string{db.IRFileName(k.StaticHash)}
		}
		if err := db.WriteKernel(dir, k); err != nil {
			t.Fatal(err)
		}
	}
	write("_Z5scalePfi", db.CodeMachine)
	write("_Z4vaddPfi", db.CodeIR)
	stats := &db.LaunchStats{FormatVersion: db.LaunchStatsVersion, Limits: db.StatsLimits{MaxShapes: 1, MaxArgValues: 1, MaxArgBytes: 1, TimedEvery: 1},
		Kernels: []db.KernelStats{{KernelName: "_Z5scalePfi", Launches: 1, Shapes: []db.ShapeStats{}, Args: []db.ArgStats{}, OtherShapeLaunches: 1},
			{KernelName: "cutlass_gemm_kernel", Launches: 1, Shapes: []db.ShapeStats{}, Args: []db.ArgStats{}, OtherShapeLaunches: 1}}}
	stats.Finish()
	if err := db.WriteLaunchStats(dir, stats); err != nil {
		t.Fatal(err)
	}
	if err := demangleMachineKernels(dir); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		k, err := db.ReadKernel(f)
		if err != nil {
			t.Fatal(err)
		}
		got[k.KernelName] = k.DemangledName
	}
	if got["_Z5scalePfi"] != "scale(float*, int)" || got["_Z4vaddPfi"] != "_Z4vaddPfi" {
		t.Errorf("demangled names %v", got)
	}
	st, err := db.ReadLaunchStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range st.Kernels {
		want := map[string]string{"_Z5scalePfi": "scale(float*, int)", "cutlass_gemm_kernel": ""}[k.KernelName]
		if k.DemangledName != want {
			t.Errorf("statistics: %s demangled %q, want %q", k.KernelName, k.DemangledName, want)
		}
	}
}
