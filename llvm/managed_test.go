package llvm

import (
	"reflect"
	"strings"
	"testing"
)

// managedIR is testdata/managedvar.cu as clang-22 compiles it, with counter
// marked managed in !nvvm.annotations: clang-22 ignores __managed__ in CUDA
// mode, and the annotation is how NVVM IR and the NVPTX backend mark one.
func managedIR(tb testing.TB) *Module {
	tb.Helper()
	text := parseCUDA(tb, "managedvar").String()
	if strings.Contains(text, "!nvvm.annotations") {
		tb.Fatal("clang's module already has !nvvm.annotations; the fixture would define it twice")
	}
	text += "\n!nvvm.annotations = !{!900}\n!900 = !{ptr addrspace(1) @counter, !\"managed\", i32 1}\n"
	m, err := ParseIR(text, "managedvar.ll")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(m.Dispose)
	return m
}

func TestKernelGlobalsMarksManagedVariables(t *testing.T) {
	m := managedIR(t)
	for _, c := range []struct {
		kernel string
		want   []KernelGlobal
	}{
		{"_Z12uses_managedPf", []KernelGlobal{{Name: "counter", Managed: true}}},
		{"_Z10uses_plainPfi", []KernelGlobal{{Name: "table"}}},
		{"_Z9uses_nonePf", nil},
	} {
		got, err := m.KernelGlobals(c.kernel)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: KernelGlobals = %+v, want %+v", c.kernel, got, c.want)
		}
	}
}

// Without the annotation the same variable is an ordinary __device__ one.
func TestKernelGlobalsWithoutAnnotationIsNotManaged(t *testing.T) {
	m := parseCUDA(t, "managedvar")
	got, err := m.KernelGlobals("_Z12uses_managedPf")
	if err != nil {
		t.Fatal(err)
	}
	if want := []KernelGlobal{{Name: "counter"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("KernelGlobals = %+v, want %+v", got, want)
	}
}

// The recorded IR is the extracted kernel: the mark must survive extraction,
// and it is the mark the NVPTX backend turns into .attribute(.managed).
func TestManagedMarkSurvivesExtractionAndReachesPTX(t *testing.T) {
	m := managedIR(t)
	k, err := m.ExtractKernel("_Z12uses_managedPf")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Dispose()
	got, err := k.KernelGlobals("_Z12uses_managedPf")
	if err != nil {
		t.Fatal(err)
	}
	if want := []KernelGlobal{{Name: "counter", Managed: true}}; !reflect.DeepEqual(got, want) {
		t.Errorf("extracted: KernelGlobals = %+v, want %+v", got, want)
	}
	ptx, err := newTarget(t, "sm_90", 80, 3).EmitPTX(k)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ptx, ".attribute(.managed)") {
		t.Errorf("PTX declares no managed variable:\n%s", ptx)
	}
}

func TestKernelGlobalsUnknownKernel(t *testing.T) {
	if _, err := managedIR(t).KernelGlobals("nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("err = %v, want one naming the kernel", err)
	}
}
