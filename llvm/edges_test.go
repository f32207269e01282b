package llvm

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// Edges of IR specialization that the CUDA test programs do not reach:
// wide integers, argument indices at the end of the list, launch bounds of
// one thread, helpers no other kernel shares, and annotation operands
// wrapped in casts or holding empty strings.

const edgeIR = `
target triple = "nvptx64-nvidia-cuda"

@out = addrspace(1) global i128 0
@.str = private unnamed_addr addrspace(1) constant [4 x i8] c"jit\00"
@.empty = private unnamed_addr addrspace(1) constant [1 x i8] c"\00"
@.file = private unnamed_addr addrspace(1) constant [6 x i8] c"x.cu\00\00"
@.args = private unnamed_addr addrspace(1) constant { i32 } { i32 1 }
@llvm.global.annotations = appending global [2 x { ptr, ptr, ptr, i32, ptr }] [
  { ptr, ptr, ptr, i32, ptr } { ptr @wide, ptr addrspacecast (ptr addrspace(1) @.str to ptr), ptr addrspacecast (ptr addrspace(1) @.file to ptr), i32 1, ptr addrspacecast (ptr addrspace(1) @.args to ptr) },
  { ptr, ptr, ptr, i32, ptr } { ptr @solo, ptr addrspacecast (ptr addrspace(1) @.empty to ptr), ptr addrspacecast (ptr addrspace(1) @.file to ptr), i32 2, ptr null }
], section "llvm.metadata"

define internal i32 @helper() {
  %x = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  ret i32 %x
}

define ptx_kernel void @wide(i128 %v, i32 %n) {
  %s = add i128 %v, 1
  store i128 %s, ptr addrspace(1) @out
  ret void
}

define ptx_kernel void @solo(ptr addrspace(1) %p) {
  %x = call i32 @helper()
  store i32 %x, ptr addrspace(1) %p
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
`

func parseEdgeIR(t *testing.T) *Module {
	t.Helper()
	m, err := ParseIR(edgeIR, "edge.ll")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Dispose)
	return m
}

func TestSpecializeAWideInteger(t *testing.T) {
	m := parseEdgeIR(t)
	v := make([]byte, 16)
	binary.LittleEndian.PutUint64(v, 5)
	binary.LittleEndian.PutUint64(v[8:], 1) // 2^64 + 5
	if err := m.SpecializeArg("wide", 0, v); err != nil {
		t.Fatal(err)
	}
	if ir := m.String(); !strings.Contains(ir, "add i128 18446744073709551621, 1") {
		t.Errorf("the i128 argument 2^64+5 was not folded in whole:\n%s", ir)
	}
}

func TestSpecializeArgIndexAtTheEnd(t *testing.T) {
	m := parseEdgeIR(t)
	if err := m.SpecializeArg("wide", 2, []byte{0, 0, 0, 0}); err == nil || !strings.Contains(err.Error(), "has 2 arguments, there is no argument 2") {
		t.Errorf("argument 2 of a 2-argument kernel: %v", err)
	}
	if err := m.SpecializeArg("wide", 1, []byte{7, 0, 0, 0}); err != nil {
		t.Errorf("the last argument: %v", err)
	}
}

func TestLaunchBoundsOfOneThread(t *testing.T) {
	m := parseEdgeIR(t)
	if err := m.SetLaunchBounds("solo", 1, 0); err != nil {
		t.Fatalf("launch bounds of one thread: %v", err)
	}
	if ir := m.String(); !strings.Contains(ir, `"nvvm.maxntid"="1"`) {
		t.Errorf("the bound is not in the IR:\n%s", ir)
	}
}

func TestSpecializeDimsClonesOnlySharedHelpers(t *testing.T) {
	m := parseEdgeIR(t)
	if err := m.SpecializeDims("solo", mneme.Dim3{X: 64, Y: 1, Z: 1}, mneme.Dim3{X: 2, Y: 1, Z: 1}); err != nil {
		t.Fatal(err)
	}
	// No other kernel reaches helper: it is specialized in place, not cloned.
	if ir := m.String(); strings.Contains(ir, "@helper.dims") || strings.Contains(ir, "sreg.ntid.x()\n  ret") {
		t.Errorf("an unshared helper was cloned or kept its ntid.x read:\n%s", ir)
	}
}

func TestJITAnnotationsThroughCastsAndEmptyStrings(t *testing.T) {
	got, err := parseEdgeIR(t).JITAnnotations()
	if err != nil {
		t.Fatal(err)
	}
	// The first entry's strings are behind addrspacecasts; the second's
	// annotation is the empty string, which is not "jit".
	if len(got) != 1 || got[0].Kernel != "wide" || len(got[0].Args) != 1 || got[0].Args[0] != 1 {
		t.Errorf("annotations %+v, want wide [1] only", got)
	}
}
