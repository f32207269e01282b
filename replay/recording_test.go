package replay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/replay/internal/fixture"
)

func hostDB(t *testing.T, l *fixture.Launch, compute func([][]byte)) (string, *db.Kernel) {
	t.Helper()
	dir := t.TempDir()
	k, err := fixture.WriteHost(dir, testIR(t), l, compute)
	if err != nil {
		t.Fatal(err)
	}
	return dir, k
}

func TestLoadResolvesTheOnlyInstanceAndItsBaseline(t *testing.T) {
	l := vecaddLaunch(1000)
	dir, k := hostDB(t, l, vecaddHost)
	rec, err := Load(dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Kernel.StaticHash != k.StaticHash || len(rec.Args) != 4 || len(rec.Prologue.Blobs) != 3 {
		t.Fatalf("loaded %s with %d args and %d blobs", rec.Kernel.StaticHash, len(rec.Args), len(rec.Prologue.Blobs))
	}
	b := rec.Baseline()
	if b.Grid != l.Grid || b.Block != l.Block || b.Passes != mneme.DefaultPipeline {
		t.Fatalf("baseline %+v", b)
	}
	r := rec.Resolve(mneme.Config{Block: mneme.Dim3{X: 128, Y: 1, Z: 1}})
	if r.Block != dim(128) || r.Grid != l.Grid || r.Passes != mneme.DefaultPipeline {
		t.Fatalf("resolved %+v", r)
	}
	// Selecting by kernel name and by static-hash prefix finds it too.
	for _, sel := range []string{"vecadd", k.StaticHash[:6]} {
		if _, err := Load(dir, sel, ""); err != nil {
			t.Errorf("kernel %q: %v", sel, err)
		}
	}
}

func TestLoadRejectsBadInputNamingIt(t *testing.T) {
	l := vecaddLaunch(1000)
	dir, k := hostDB(t, l, vecaddHost)
	var inst *db.Instance
	for _, i := range k.Instances {
		inst = i
	}
	cases := []struct {
		name    string
		break_  func(dir string)
		kernel  string
		id      string
		message string
	}{
		{"unknown instance", nil, "", "fff", `no such instance "fff"`},
		{"unknown kernel", nil, "nope", "", `kernel "nope"`},
		{"missing IR", func(d string) { os.Remove(filepath.Join(d, k.Modules[0])) }, "", "", "does not exist"},
		{"IR without the kernel", func(d string) {
			other, err := fixture.CompileCUDA(writeFile(t, "other.cu", "#define __global__ __attribute__((global))\nextern \"C\" __global__ void other(int *p) { *p = 1; }\n"))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(d, k.Modules[0]), other, 0o644)
		}, "", "", "holds no kernel named vecadd"},
		{"truncated epilogue", func(d string) {
			p := filepath.Join(d, inst.Epilogue)
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)/2], 0o644)
		}, "", "", inst.Epilogue},
		{"epilogue of other memory", func(d string) {
			s, err := db.ReadSnapshot(filepath.Join(d, inst.Epilogue))
			if err != nil {
				t.Fatal(err)
			}
			s.Blobs = s.Blobs[:2]
			if _, err := db.WriteSnapshot(filepath.Join(d, inst.Epilogue), s, db.SnapshotOptions{NoSync: true}); err != nil {
				t.Fatal(err)
			}
		}, "", "", "do not belong together"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := copyDir(t, dir)
			if c.break_ != nil {
				c.break_(d)
			}
			_, err := Load(d, c.kernel, c.id)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.message) {
				t.Fatalf("got %v, want an input error mentioning %q", err, c.message)
			}
		})
	}
}

func TestCompileOnlySessionCompilesAndSpecializes(t *testing.T) {
	dir, _ := hostDB(t, vecaddLaunch(1000), vecaddHost)
	s, err := Open(Options{DB: dir, CompileOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := s.Baseline()
	// Internalized, the module keeps only this kernel: its IR is checked below.
	cfg.Specialize, cfg.SpecializeDims, cfg.Internalize = true, true, true
	res, err := s.Compile(cfg)
	if err != nil || res.Status != mneme.StatusVerified || res.OptTime <= 0 || res.ObjSize == 0 || res.Executed {
		t.Fatalf("compile: %v %+v", err, res)
	}
	again, _ := s.Compile(cfg)
	if again.CacheHit != "memory" {
		t.Fatalf("second compile of the same configuration: cache hit %q", again.CacheHit)
	}
	ir, err := s.PreprocessedIR(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// n = 1000 folded in; the dimension reads are constants.
	if !strings.Contains(ir, "1000") || strings.Contains(ir, "ntid") {
		t.Fatalf("specialized IR does not show n=1000 folded and ntid replaced:\n%s", ir)
	}
	if res, err := s.Run(cfg); err == nil || res.Status != mneme.StatusInternalError {
		t.Fatalf("Run on a compile-only session: %v %+v", err, res)
	}
	bad := cfg
	bad.Passes = "default<O9>"
	if res, _ := s.Compile(bad); res.Status != mneme.StatusCompileError || !strings.Contains(res.Error, "O9") {
		t.Fatalf("invalid pipeline: %+v", res)
	}
}

func writeFile(t *testing.T, name, text string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func copyDir(t *testing.T, src string) string {
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// Recorded device globals stay visible (restorable and verifiable) when the
// configuration internalizes, and everything else is still internalized.
func TestInternalizeKeepsRecordedGlobals(t *testing.T) {
	l := &fixture.Launch{
		Kernel: "scale_global", Grid: dim(4), Block: dim(128),
		Args:    []fixture.Arg{fixture.Ptr("y", 0), fixture.I32("n", 512)},
		Buffers: [][]byte{f32buf(512, func(i int) float32 { return float32(i) })},
		Globals: []fixture.Global{{Name: "g_scale", Data: make([]byte, 4)}, {Name: "g_count", Data: make([]byte, 4)}},
	}
	dir, _ := hostDB(t, l, nil)
	s, err := Open(Options{DB: dir, CompileOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := s.Baseline()
	if cfg.Internalize {
		t.Fatal("the baseline must not internalize: the application's compiler did not")
	}
	cfg.Internalize = true
	out, err := s.comp.Compile(s.request(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ptx := string(out.PTX)
	for _, g := range []string{"g_scale", "g_count"} {
		if !visibleGlobal(ptx, g) {
			t.Fatalf("%s is not a visible global of the PTX:\n%s", g, ptx)
		}
	}
	// Other kernels of the module are gone: internalization still happened.
	if strings.Contains(ptx, "vecadd") || strings.Contains(ptx, "row_sums") {
		t.Fatalf("other kernels survived:\n%s", ptx)
	}
}

// visibleGlobal reports whether the PTX declares name as a .visible .global
// variable (an internalized one loses .visible).
func visibleGlobal(ptx, name string) bool {
	for _, line := range strings.Split(ptx, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, ".visible .global") {
			continue
		}
		for _, field := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == ';' || r == '[' || r == '=' }) {
			if field == name {
				return true
			}
		}
	}
	return false
}
