package llvm

import (
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/geometry"
)

func TestKernelGeometryDecidesDependence(t *testing.T) {
	m := parseCUDA(t, "geometry")
	block1D := mneme.Dim3{X: 256, Y: 1, Z: 1}
	block2D := mneme.Dim3{X: 16, Y: 16, Z: 1}
	for _, tc := range []struct {
		kernel    string
		block     mneme.Dim3
		dependent bool
	}{
		{"vecadd", block1D, false},
		{"gridstride", block1D, false},
		{"scale64", block1D, false},
		{"boundcheck", block1D, true},
		{"dynreduce", block1D, true},
		{"matmul", block2D, true},
		{"reduce", block1D, true},
		{"reflecting", block1D, false},
	} {
		facts, err := m.KernelGeometry(tc.kernel)
		if err != nil {
			t.Fatalf("%s: %v", tc.kernel, err)
		}
		d := geometry.Decide(facts, tc.block)
		if d.Dependent != tc.dependent {
			t.Errorf("%s: %s (facts %+v), want dependent=%v", tc.kernel, d, facts, tc.dependent)
		}
	}
}

func TestKernelGeometryFacts(t *testing.T) {
	m := parseCUDA(t, "geometry")
	mm, err := m.KernelGeometry("matmul")
	if err != nil {
		t.Fatal(err)
	}
	if len(mm.SharedArrays) != 2 || !mm.SharedArrays[0].IndexedByThreadID || mm.SharedArrays[0].Bytes != 16*16*4 {
		t.Errorf("matmul shared arrays: %+v", mm.SharedArrays)
	}
	if !mm.ThreadIDDims[0] || !mm.ThreadIDDims[1] || mm.ThreadIDDims[2] {
		t.Errorf("matmul reads threadIdx %v, want x and y", mm.ThreadIDDims)
	}
	red, err := m.KernelGeometry("reduce")
	if err != nil {
		t.Fatal(err)
	}
	if len(red.NonCanonicalDimUses) == 0 {
		t.Errorf("reduce: the stride blockDim.x/2 was not seen: %+v", red)
	}
	gs, err := m.KernelGeometry("gridstride")
	if err != nil {
		t.Fatal(err)
	}
	if len(gs.NonCanonicalDimUses) != 0 || len(gs.SharedArrays) != 0 || len(gs.Opaque) != 0 {
		t.Errorf("gridstride: %+v", gs)
	}
	dyn, err := m.KernelGeometry("dynreduce")
	if err != nil {
		t.Fatal(err)
	}
	if len(dyn.SharedArrays) != 1 || !dyn.SharedArrays[0].Dynamic || !dyn.SharedArrays[0].IndexedByThreadID {
		t.Errorf("dynreduce shared arrays: %+v", dyn.SharedArrays)
	}
	if _, err := m.KernelGeometry("nosuchkernel"); err == nil {
		t.Error("a missing kernel gave no error")
	}
	// The kernel's own launch bound is read; a kernel without one has none.
	bs, err := m.KernelGeometry("boundedstride")
	if err != nil {
		t.Fatal(err)
	}
	if bs.MaxThreads != 128 || gs.MaxThreads != 0 {
		t.Errorf("launch bounds: boundedstride %d (want 128), gridstride %d (want 0)", bs.MaxThreads, gs.MaxThreads)
	}
}

func TestParseLaunchBound(t *testing.T) {
	for v, want := range map[string]int{"128": 128, "32,4,1": 128, " 64 ": 64, "": 0, "0": 0, "-1": 0, "x": 0, "128,": 0, "65536,65536": 0} {
		if got := parseLaunchBound(v); got != want {
			t.Errorf("parseLaunchBound(%q) = %d, want %d", v, got, want)
		}
	}
}
