package llvm

import (
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/diff"

	"github.com/mneme-gpu/mneme"
)

var update = flag.Bool("update", false, "rewrite the expected outputs of the golden IR tests (testdata/golden/*.out.ll)")

// goldenDirective starts a line of a golden input naming a transform to run;
// several such lines run in order.
const goldenDirective = "; golden:"

// TestGolden runs each testdata/golden/NAME.ll through the transforms its
// "; golden:" lines name and compares the printed module with NAME.out.ll.
// With -update it writes NAME.out.ll instead.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.ll"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, in := range inputs {
		if !strings.HasSuffix(in, ".out.ll") {
			cases = append(cases, in)
		}
	}
	if len(cases) == 0 {
		t.Fatal("no golden inputs in testdata/golden")
	}
	for _, in := range cases {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".ll"), func(t *testing.T) {
			testGolden(t, in)
		})
	}
}

func testGolden(t *testing.T, in string) {
	src, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := goldenSteps(in, string(src))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseIR(string(src), filepath.Base(in))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { m.Dispose() }()
	for _, step := range steps {
		out, err := step.run(m)
		if err != nil {
			t.Fatalf("%s: %s: %v", in, step.line, err)
		}
		if out != m {
			m.Dispose()
			m = out
		}
	}
	if err := m.Verify(); err != nil {
		t.Fatalf("%s: the transformed module does not verify: %v", in, err)
	}
	printed := withoutModuleNames(m.String())
	want := strings.TrimSuffix(in, ".ll") + ".out.ll"
	if *update {
		if err := os.WriteFile(want, []byte(printed), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	expected, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("%v (run `go test ./llvm -run Golden -update` to create it)", err)
	}
	if got, exp := normalizeGoldenIR(printed), normalizeGoldenIR(string(expected)); got != exp {
		t.Errorf("%s: output differs from %s (run `go test ./llvm -run Golden -update` if the change is intended):\n%s",
			in, want, diff.Diff(want, []byte(exp), "got", []byte(got)))
	}
}

// withoutModuleNames drops the module ID and source file name, which the
// parser takes from the name it is given, not from the transform.
func withoutModuleNames(ir string) string {
	var out []string
	for line := range strings.SplitSeq(ir, "\n") {
		if strings.HasPrefix(line, "; ModuleID = ") || strings.HasPrefix(line, "source_filename = ") {
			continue
		}
		out = append(out, line)
	}
	return strings.TrimLeft(strings.Join(out, "\n"), "\n")
}

// normalizeGoldenIR is what the comparison sees: the IR without module
// names, blank lines and trailing space, so that an expected file edited
// by hand or saved by an editor compares by its content.
func normalizeGoldenIR(ir string) string {
	var out []string
	for line := range strings.SplitSeq(withoutModuleNames(ir), "\n") {
		if line = strings.TrimRight(line, " \t\r"); line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// goldenStep is one transform with its options, parsed from a directive.
type goldenStep struct {
	line string
	run  func(*Module) (*Module, error) // returns m itself, or a new module that replaces it
}

// goldenSteps parses the "; golden:" lines of a golden input. Each reads
// `; golden: TRANSFORM key=value ...`:
//
//	specialize-arg kernel=K index=N value=TYPE:V   (TYPE: i8 i16 i32 i64 f32 f64 ptr hex)
//	specialize-dims kernel=K block=X,Y,Z grid=X,Y,Z
//	launch-bounds kernel=K max=N [min=M]
//	extract kernel=K
//	internalize [keep=A,B,...]
//	drop-dead
func goldenSteps(file, src string) ([]goldenStep, error) {
	var steps []goldenStep
	for n, line := range strings.Split(src, "\n") {
		rest, ok := strings.CutPrefix(line, goldenDirective)
		if !ok {
			continue
		}
		where := fmt.Sprintf("%s:%d", file, n+1)
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("%s: %q names no transform", where, line)
		}
		opts := map[string]string{}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("%s: option %q is not key=value", where, f)
			}
			opts[k] = v
		}
		run, err := goldenTransform(fields[0], opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		steps = append(steps, goldenStep{line: strings.TrimSpace(rest), run: run})
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("%s: no %q line says which transform to run", file, goldenDirective)
	}
	return steps, nil
}

// goldenTransform builds the transform name with its options; every option
// must be used.
func goldenTransform(name string, opts map[string]string) (func(*Module) (*Module, error), error) {
	used := map[string]bool{}
	get := func(key string) string { used[key] = true; return opts[key] }
	var run func(*Module) (*Module, error)
	var err error
	switch name {
	case "specialize-arg":
		kernel := get("kernel")
		var index int
		var value []byte
		if index, err = strconv.Atoi(get("index")); err != nil {
			return nil, fmt.Errorf("index: %v", err)
		}
		if value, err = goldenValue(get("value")); err != nil {
			return nil, fmt.Errorf("value: %v", err)
		}
		run = func(m *Module) (*Module, error) { return m, m.SpecializeArg(kernel, index, value) }
	case "specialize-dims":
		kernel := get("kernel")
		var block, grid mneme.Dim3
		if block, err = goldenDim3(get("block")); err != nil {
			return nil, fmt.Errorf("block: %v", err)
		}
		if grid, err = goldenDim3(get("grid")); err != nil {
			return nil, fmt.Errorf("grid: %v", err)
		}
		run = func(m *Module) (*Module, error) { return m, m.SpecializeDims(kernel, block, grid) }
	case "launch-bounds":
		kernel := get("kernel")
		var maxThreads, minBlocks int
		if maxThreads, err = strconv.Atoi(get("max")); err != nil {
			return nil, fmt.Errorf("max: %v", err)
		}
		if s := get("min"); s != "" {
			if minBlocks, err = strconv.Atoi(s); err != nil {
				return nil, fmt.Errorf("min: %v", err)
			}
		}
		run = func(m *Module) (*Module, error) { return m, m.SetLaunchBounds(kernel, maxThreads, minBlocks) }
	case "extract":
		kernel := get("kernel")
		run = func(m *Module) (*Module, error) { return m.ExtractKernel(kernel) }
	case "internalize":
		var keep []string
		if s := get("keep"); s != "" {
			keep = strings.Split(s, ",")
		}
		run = func(m *Module) (*Module, error) { m.Internalize(keep...); return m, nil }
	case "drop-dead":
		run = func(m *Module) (*Module, error) { return m, m.DropDead() }
	default:
		return nil, fmt.Errorf("unknown transform %q", name)
	}
	for k := range opts {
		if !used[k] {
			return nil, fmt.Errorf("%s takes no option %q", name, k)
		}
	}
	return run, nil
}

// goldenValue encodes TYPE:V as the little-endian bytes a recording holds.
func goldenValue(s string) ([]byte, error) {
	typ, v, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("%q is not TYPE:VALUE", s)
	}
	var bits uint64
	var size int
	switch typ {
	case "i8", "i16", "i32", "i64":
		size, _ = strconv.Atoi(typ[1:])
		size /= 8
		n, err := strconv.ParseInt(v, 0, size*8)
		if err != nil {
			return nil, err
		}
		bits = uint64(n)
	case "ptr":
		n, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			return nil, err
		}
		bits, size = n, 8
	case "f32":
		f, err := strconv.ParseFloat(v, 32)
		if err != nil {
			return nil, err
		}
		bits, size = uint64(math.Float32bits(float32(f))), 4
	case "f64":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, err
		}
		bits, size = math.Float64bits(f), 8
	case "hex":
		return hex.DecodeString(v)
	default:
		return nil, fmt.Errorf("unknown type %q (i8, i16, i32, i64, ptr, f32, f64, hex)", typ)
	}
	b := binary.LittleEndian.AppendUint64(nil, bits)
	return b[:size], nil
}

// goldenDim3 reads X,Y,Z.
func goldenDim3(s string) (mneme.Dim3, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return mneme.Dim3{}, fmt.Errorf("%q is not X,Y,Z", s)
	}
	var d [3]uint32
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return mneme.Dim3{}, err
		}
		d[i] = uint32(n)
	}
	return mneme.Dim3{X: d[0], Y: d[1], Z: d[2]}, nil
}

// TestGoldenDirectivesRefuseMistakes checks that a misspelt directive fails
// the test instead of running a different transform or none.
func TestGoldenDirectivesRefuseMistakes(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"define void @k() {\n  ret void\n}\n", "no \"; golden:\" line"},
		{"; golden:\n", "names no transform"},
		{"; golden: specialise-arg kernel=k index=0 value=i32:1\n", `x.ll:1: unknown transform "specialise-arg"`},
		{"; golden: launch-bounds kernel=k max=64 minimum=2\n", `launch-bounds takes no option "minimum"`},
		{"; golden: drop-dead\n; golden: extract kernel\n", `x.ll:2: option "kernel" is not key=value`},
		{"; golden: specialize-arg kernel=k index=0 value=u32:1\n", `value: unknown type "u32"`},
		{"; golden: specialize-arg kernel=k index=0 value=i8:300\n", "value: strconv.ParseInt"},
		{"; golden: specialize-dims kernel=k block=32,1 grid=1,1,1\n", `block: "32,1" is not X,Y,Z`},
	} {
		if _, err := goldenSteps("x.ll", c.src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.src, err, c.want)
		}
	}
	steps, err := goldenSteps("x.ll", "; golden: internalize keep=a,b\n; golden: drop-dead\n")
	if err != nil || len(steps) != 2 || steps[0].line != "internalize keep=a,b" || steps[1].line != "drop-dead" {
		t.Errorf("two directives: got %d steps, %v", len(steps), err)
	}
}

// TestGoldenValueEncoding pins the bytes each TYPE:VALUE stands for.
func TestGoldenValueEncoding(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []byte
	}{
		{"i8:-1", []byte{0xff}},
		{"i16:0x1234", []byte{0x34, 0x12}},
		{"i32:1024", []byte{0, 4, 0, 0}},
		{"i64:-2", []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"ptr:0x7f0000200000", []byte{0, 0, 0x20, 0, 0, 0x7f, 0, 0}},
		{"f32:2.5", []byte{0, 0, 0x20, 0x40}},
		{"f64:1", []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
		{"hex:0a0b", []byte{0x0a, 0x0b}},
	} {
		got, err := goldenValue(c.in)
		if err != nil || string(got) != string(c.want) {
			t.Errorf("%s: got % x, %v; want % x", c.in, got, err, c.want)
		}
	}
}
