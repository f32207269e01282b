package llvm

import (
	"slices"
	"testing"
)

func TestJITAnnotations(t *testing.T) {
	m := parseCUDA(t, "annotations")
	got, err := m.JITAnnotations()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("JITAnnotations() = %+v, want the two jit-annotated kernels", got)
	}
	if got[0].Kernel != "scaled" || !slices.Equal(got[0].Args, []int{1, 3}) {
		t.Errorf("first annotation %+v, want scaled [1 3]", got[0])
	}
	if got[1].Kernel != "noargs" || len(got[1].Args) != 0 {
		t.Errorf("second annotation %+v, want noargs without arguments", got[1])
	}
	none, err := parseCUDA(t, "geometry").JITAnnotations()
	if err != nil || len(none) != 0 {
		t.Errorf("a module without annotations: %+v, %v", none, err)
	}
}
