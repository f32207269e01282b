package nvbin

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/mneme-gpu/mneme/internal/cubintest"
)

// variablesCubin is a cubin with one kernel and device variables of every
// kind nvcc emits, and symbols that are not variables.
func variablesCubin() []byte {
	// .nv.info.k: one 8-byte parameter at offset 0, an 8-byte buffer.
	info := []byte{4, 0x17, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8 << 2, 0, 3, 0x19, 8, 0}
	sections := []cubintest.Section{
		{Name: ".nv.info.k", Type: 0x70000000, Data: info},        // 4
		{Name: ".text.k", Type: 1, Data: make([]byte, 16)},        // 5
		{Name: ".nv.global", Type: 8, Size: 32},                   // 6
		{Name: ".nv.constant3", Type: 1, Data: make([]byte, 64)},  // 7
		{Name: ".nv.constant0.k", Type: 1, Data: make([]byte, 8)}, // 8
		{Name: ".nv.global.init", Type: 1, Data: make([]byte, 8)}, // 9
		{Name: ".nv.shared.k", Type: 8, Size: 128},                // 10
	}
	const local, global, object, function = 0, 1, 1, 2
	syms := []cubintest.Symbol{
		{Name: "scratch", Bind: local, Type: object, Section: 6, Size: 4},
		{Name: "k", Bind: global, Type: function, Section: 5, Size: 16},
		{Name: "counter", Bind: global, Type: object, Section: 6, Size: 16},
		{Name: "_ZL5table", Bind: global, Type: object, Section: 7, Size: 64},
		{Name: "params", Bind: global, Type: object, Section: 8, Size: 8},
		{Name: "seed", Bind: global, Type: object, Section: 9, Size: 8},
		{Name: "tile", Bind: global, Type: object, Section: 10, Size: 128},
		{Name: "empty", Bind: global, Type: object, Section: 6, Size: 0},
		{Name: "tally", Bind: global, Type: object, Other: 0x24, Section: 6, Size: 4}, // STO_CUDA_GLOBAL|STO_CUDA_MANAGED
	}
	return cubintest.Build(sections, syms)
}

// A kernel's launch bound (EIATTR_MAX_THREADS, x y z) is read as its
// thread count; one beyond CUDA's limit, or with a zero dimension, is none.
func TestCubinLaunchBound(t *testing.T) {
	for _, tc := range []struct {
		x, y, z uint32
		want    int
	}{{128, 1, 1, 128}, {32, 4, 2, 256}, {0, 1, 1, 0}, {1024, 2, 1, 0}, {2048, 1, 1, 0}} {
		rec := []byte{4, 0x05, 12, 0}
		for _, d := range []uint32{tc.x, tc.y, tc.z} {
			rec = binary.LittleEndian.AppendUint32(rec, d)
		}
		info := append(rec, 3, 0x19, 8, 0)
		c, err := ParseCubin(cubintest.Build([]cubintest.Section{{Name: ".nv.info.k", Type: 0x70000000, Data: info}, {Name: ".text.k", Type: 1, Data: make([]byte, 16)}},
			[]cubintest.Symbol{{Name: "k", Bind: 1, Type: 2, Section: 5, Size: 16}}))
		if err != nil {
			t.Fatal(err)
		}
		if k, ok := c.Kernel("k"); !ok || k.MaxThreads != tc.want {
			t.Errorf("bound %d,%d,%d: kernel %+v (found %v), want MaxThreads %d", tc.x, tc.y, tc.z, k, ok, tc.want)
		}
	}
	// Without the record: none.
	c, err := ParseCubin(variablesCubin())
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := c.Kernel("k"); k.MaxThreads != 0 {
		t.Errorf("no record: MaxThreads %d", k.MaxThreads)
	}
}

func TestCubinVariables(t *testing.T) {
	c, err := ParseCubin(variablesCubin())
	if err != nil {
		t.Fatal(err)
	}
	want := []Variable{{Name: "_ZL5table", Size: 64, Constant: true}, {Name: "counter", Size: 16}, {Name: "scratch", Size: 4}, {Name: "seed", Size: 8}, {Name: "tally", Size: 4, Managed: true}}
	if !reflect.DeepEqual(c.Variables, want) {
		t.Errorf("variables %+v, want %+v", c.Variables, want)
	}
	if len(c.Kernels) != 1 || c.Kernels[0].Name != "k" || len(c.Kernels[0].Params) != 1 || c.Kernels[0].Params[0].Size != 8 {
		t.Errorf("kernels %+v", c.Kernels)
	}
	if c.Arch != 90 {
		t.Errorf("arch %d", c.Arch)
	}
}

func TestRealCubinHasNoVariables(t *testing.T) {
	c, err := ParseCubin(readTestdata(t, "vecadd.sm_90.cubin"))
	if err != nil || len(c.Variables) != 0 {
		t.Errorf("vector add cubin: variables %+v, %v; want none", c.Variables, err)
	}
}

// nvcc's whole-program cubin binds the program's __device__ variables
// locally: they are variables all the same (recording skipped them, and
// devglobal's replay read zeros for its scale factor).
func TestWholeProgramCubinLocalVariables(t *testing.T) {
	c, err := ParseCubin(readTestdata(t, "devglobal.sm_90.cubin"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Variable{{Name: "above_threshold", Size: 4}, {Name: "scale_factor", Size: 4}}
	if !reflect.DeepEqual(c.Variables, want) {
		t.Errorf("variables %+v, want %+v", c.Variables, want)
	}
}

// An image's cubins: a bare cubin is its own; PTX text or bytes that parse
// as neither have none.
func TestCubinsOfAnImage(t *testing.T) {
	cubin := variablesCubin()
	if got := Cubins(cubin, 90); len(got) != 1 || !reflect.DeepEqual(got[0], cubin) {
		t.Errorf("a bare cubin: %d cubins", len(got))
	}
	// A real nvcc fat binary: the two sm_90 cubins Select picks, each a cubin.
	got := Cubins(readTestdata(t, "vecadd.nv_fatbin"), 90)
	if len(got) != 2 {
		t.Fatalf("vecadd.nv_fatbin: %d cubins for sm_90, want 2", len(got))
	}
	for _, b := range got {
		if _, err := ParseCubin(b); err != nil {
			t.Errorf("a cubin of the fat binary does not parse: %v", err)
		}
	}
	for _, image := range [][]byte{[]byte(".version 8.0\n.target sm_90\n"), []byte("garbage"), nil} {
		if got := Cubins(image, 90); len(got) != 0 {
			t.Errorf("%q: %d cubins, want none", image, len(got))
		}
	}
}
