package llvm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme"
)

const (
	loopKernel      = "_Z11loop_kernelPfPKfif"
	unrelatedKernel = "_Z16unrelated_kernelPi"
	mixedKernel     = "_Z12mixed_kernel4PairdscbxPf"
	dimsA           = "_Z6dims_aPj"
	dimsB           = "_Z6dims_bPj"
)

func TestVersion(t *testing.T) {
	v := Version()
	if !strings.HasPrefix(v, "22.") {
		t.Fatalf("Version() = %q, want LLVM 22.x", v)
	}
	if out, err := exec.Command("llvm-config-22", "--version").Output(); err == nil {
		if want := strings.TrimSpace(string(out)); want != v {
			t.Errorf("Version() = %q, llvm-config-22 says %q", v, want)
		}
	}
}

func TestKernelsAreListedMangled(t *testing.T) {
	m := parseCUDA(t, "kernels")
	want := []string{loopKernel, unrelatedKernel, mixedKernel, dimsA, dimsB}
	if got := m.Kernels(); !slices.Equal(got, want) {
		t.Fatalf("Kernels() = %v, want %v", got, want)
	}
	if got := m.Globals(); !slices.Equal(got, []string{"scale_factor", "unrelated_counter"}) {
		t.Errorf("Globals() = %v", got)
	}
	// __device__ variables live in the global address space and are writable.
	wantVars := []GlobalVar{{Name: "scale_factor", AddressSpace: 1}, {Name: "unrelated_counter", AddressSpace: 1}}
	if got := m.GlobalVars(); !slices.Equal(got, wantVars) {
		t.Errorf("GlobalVars() = %+v, want %+v", got, wantVars)
	}
}

func TestLegacyKernelAnnotation(t *testing.T) {
	// An old-style module: a plain function marked by !nvvm.annotations.
	// LLVM upgrades the annotation when parsing; either way it is a kernel.
	m, err := ParseIR(`target triple = "nvptx64-nvidia-cuda"
define void @old(ptr %p) {
  store i32 1, ptr %p
  ret void
}
define void @helper() {
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{ptr @old, !"kernel", i32 1}
`, "legacy.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	if got := m.Kernels(); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("Kernels() = %v, want [old]", got)
	}
}

func TestKernelParams(t *testing.T) {
	m := parseCUDA(t, "kernels")
	params, err := m.KernelParams(mixedKernel)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		kind  ParamKind
		bits  int
		byval bool
		typ   string
	}
	wants := []want{
		{ParamOther, 64, true, "%struct.Pair = type { i32, float }"},
		{ParamDouble, 64, false, "double"},
		{ParamInt, 16, false, "i16"},
		{ParamInt, 8, false, "i8"},
		{ParamInt, 1, false, "i1"},
		{ParamInt, 64, false, "i64"},
		{ParamPointer, 64, false, "ptr"},
	}
	if len(params) != len(wants) {
		t.Fatalf("got %d params, want %d: %+v", len(params), len(wants), params)
	}
	for i, w := range wants {
		p := params[i]
		if p.Kind != w.kind || p.Bits != w.bits || p.ByVal != w.byval || p.Type != w.typ {
			t.Errorf("param %d = %+v, want %+v", i, p, w)
		}
	}
	if params[4].Bytes() != 1 || params[0].Bytes() != 8 {
		t.Errorf("Bytes(): bool %d, struct %d", params[4].Bytes(), params[0].Bytes())
	}
	if _, err := m.KernelParams("no_such_kernel"); err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Errorf("unknown kernel: err = %v", err)
	}
}

func TestBitcodeAndTextRoundTrip(t *testing.T) {
	m := parseCUDA(t, "kernels")
	again, err := ParseBitcode(m.Bitcode(), "again.bc")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Dispose()
	// The first line, "; ModuleID = 'NAME'", differs by design.
	body := func(ir string) string { return ir[strings.Index(ir, "\n"):] }
	if body(again.String()) != body(m.String()) {
		t.Error("bitcode round trip changed the IR")
	}
	text, err := ParseIR(m.String(), "again.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer text.Dispose()
	if !slices.Equal(text.Kernels(), m.Kernels()) {
		t.Errorf("text round trip kernels %v, want %v", text.Kernels(), m.Kernels())
	}
}

func TestCloneIsIndependent(t *testing.T) {
	m := parseCUDA(t, "kernels")
	before := m.String()
	c, err := m.Clone()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SpecializeArg(loopKernel, 2, le32(5)); err != nil {
		t.Fatal(err)
	}
	if m.String() != before {
		t.Error("changing the clone changed the original")
	}
	if c.String() == before {
		t.Error("the clone did not change")
	}
	c.Dispose()
	c.Dispose() // idempotent
	if c.String() != "" || c.Kernels() != nil {
		t.Error("a disposed module still answers")
	}
	if err := c.Verify(); !errors.Is(err, ErrModuleUnusable) {
		t.Errorf("Verify after Dispose: %v", err)
	}
	if m.Verify() != nil {
		t.Error("original no longer verifies")
	}
}

func TestExtractKernel(t *testing.T) {
	m := parseCUDA(t, "kernels")
	before := m.String()
	x, err := m.ExtractKernel(loopKernel)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Dispose()
	if m.String() != before {
		t.Error("ExtractKernel changed the original module")
	}
	if got := x.Kernels(); !slices.Equal(got, []string{loopKernel}) {
		t.Errorf("extracted kernels = %v", got)
	}
	if got := x.Globals(); !slices.Equal(got, []string{"scale_factor"}) {
		t.Errorf("extracted globals = %v, want [scale_factor]", got)
	}
	ir := x.String()
	for _, keep := range []string{"define dso_local noundef float @_Z6scaledf", "@scale_factor = ", "@llvm.compiler.used", `target triple = "nvptx64-nvidia-cuda"`, "target datalayout", "!llvm.module.flags", "declare", "llvm.nvvm.read.ptx.sreg.tid.x"} {
		if !strings.Contains(ir, keep) {
			t.Errorf("extracted IR lacks %q", keep)
		}
	}
	for _, gone := range []string{"unrelated", "mixed_kernel", "linear_index", "dims_a", "%struct.Pair"} {
		if strings.Contains(ir, gone) {
			t.Errorf("extracted IR still mentions %q", gone)
		}
	}
	// llvm.compiler.used lists only what survived.
	if !regexp.MustCompile(`@llvm.compiler.used = appending global \[1 x ptr\]`).MatchString(ir) {
		t.Errorf("llvm.compiler.used not pruned to one entry:\n%s", ir)
	}
	ptx := optimizedPTX(t, x, "default<O3>")
	if !strings.Contains(ptx, ".entry "+loopKernel) || strings.Contains(ptx, unrelatedKernel) {
		t.Errorf("PTX of the extracted module:\n%s", ptx)
	}
	if _, err := m.ExtractKernel("nope"); err == nil {
		t.Error("extracting a missing kernel succeeded")
	}
}

func TestExtractKeepsExternalDeclarationsAndAliases(t *testing.T) {
	m, err := ParseIR(`target triple = "nvptx64-nvidia-cuda"
@table = addrspace(1) global [2 x ptr] [ptr @f1, ptr @f2]
@other = addrspace(1) global i32 5
@alias = alias i32, ptr addrspace(1) @other
declare float @external(float)
define internal void @f1() { ret void }
define internal void @f2() { ret void }
define internal void @dead() { call void @f1() ret void }
define ptx_kernel void @k(ptr %p, i64 %i) {
  %slot = getelementptr [2 x ptr], ptr addrspace(1) @table, i64 0, i64 %i
  %fp = load ptr, ptr addrspace(1) %slot
  call void %fp()
  %v = call float @external(float 1.0)
  %w = load i32, ptr addrspace(1) @alias
  store float %v, ptr %p
  ret void
}
define ptx_kernel void @k2(ptr %p) {
  call void @dead()
  ret void
}
`, "table.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	x, err := m.ExtractKernel("k")
	if err != nil {
		t.Fatal(err)
	}
	defer x.Dispose()
	ir := x.String()
	for _, keep := range []string{"@table", "define internal void @f1", "define internal void @f2", "declare float @external", "@alias = alias", "@other"} {
		if !strings.Contains(ir, keep) {
			t.Errorf("extracted IR lacks %q:\n%s", keep, ir)
		}
	}
	for _, gone := range []string{"@dead", "@k2"} {
		if strings.Contains(ir, gone) {
			t.Errorf("extracted IR still has %q", gone)
		}
	}
}

// entryPTX cuts the PTX of one kernel, header to closing brace, out of ptx.
func entryPTX(t *testing.T, ptx, kernel string) string {
	t.Helper()
	start := strings.Index(ptx, ".entry "+kernel+"(")
	if start < 0 {
		t.Fatalf("no .entry %s in the PTX:\n%s", kernel, ptx)
	}
	body := ptx[start:]
	if end := strings.Index(body, "\n}\n"); end >= 0 {
		body = body[:end+2]
	}
	return body
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// immediateCompare matches a PTX comparison against a literal.
var immediateCompare = regexp.MustCompile(`setp\.\w+\.\w+\s+%p\d+, %r\d+, \d+;`)

func TestSpecializeLoopBound(t *testing.T) {
	m := parseCUDA(t, "kernels")
	loadBound := "[" + loopKernel + "_param_2]"
	base := optimizedPTX(t, m, "default<O3>")
	if !strings.Contains(base, loadBound) {
		t.Fatalf("unspecialized PTX does not load the bound:\n%s", base)
	}
	if err := m.SpecializeArg(loopKernel, 2, le32(1000)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.String(), "store i32 1000, ptr %7") {
		t.Errorf("the bound is not a constant in the IR:\n%s", m.String())
	}
	ptx := optimizedPTX(t, m, "default<O3>")
	if strings.Contains(ptx, loadBound) {
		t.Errorf("specialized PTX still loads the bound")
	}
	kernelPTX := entryPTX(t, ptx, loopKernel)
	if !immediateCompare.MatchString(kernelPTX) {
		t.Errorf("the loop compare is not against a literal:\n%s", kernelPTX)
	}
	// A short trip count is unrolled completely: 5 loads of the input.
	small := parseCUDA(t, "kernels")
	if err := small.SpecializeArg(loopKernel, 2, le32(5)); err != nil {
		t.Fatal(err)
	}
	smallPTX := optimizedPTX(t, small, "default<O3>")
	body := entryPTX(t, smallPTX, loopKernel)
	if n := strings.Count(body, "ld.global.b32"); n != 6 { // 5 inputs + scale_factor
		t.Errorf("trip count 5: %d global loads, want 6:\n%s", n, body)
	}
	if strings.Contains(body, "bra") {
		t.Errorf("trip count 5 left a loop:\n%s", body)
	}
}

func TestSpecializeFloatDoubleAndPointer(t *testing.T) {
	m := parseCUDA(t, "kernels")
	if err := m.SpecializeArg(loopKernel, 3, le32(math.Float32bits(2.5))); err != nil {
		t.Fatal(err)
	}
	const addr = 0x7f0000001000
	if err := m.SpecializeArg(loopKernel, 0, le64(addr)); err != nil {
		t.Fatal(err)
	}
	ir := m.String()
	if !strings.Contains(ir, "float 2.500000e+00") {
		t.Errorf("float constant missing from IR")
	}
	if !strings.Contains(ir, "inttoptr (i64 139637976731648 to ptr)") {
		t.Errorf("pointer constant missing from IR:\n%s", ir)
	}
	ptx := optimizedPTX(t, m, "default<O3>")
	body := entryPTX(t, ptx, loopKernel)
	if !strings.Contains(body, "0f40200000") {
		t.Errorf("PTX lacks the float 2.5 (0f40200000):\n%s", body)
	}
	if strings.Contains(body, "_param_3]") || strings.Contains(body, "_param_0]") {
		t.Errorf("PTX still loads the specialized arguments:\n%s", body)
	}
	if !strings.Contains(body, "139637976731648") {
		t.Errorf("PTX lacks the pointer value:\n%s", body)
	}

	mixed := parseCUDA(t, "kernels")
	if err := mixed.SpecializeArg(mixedKernel, 1, le64(math.Float64bits(-0.125))); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		index int
		value []byte
		want  string
	}{
		{2, []byte{0xfe, 0xff}, "i16 -2"},
		{3, []byte{0x7f}, "i8 127"},
		{4, []byte{1}, "i1 true"},
		{5, le64(1 << 40), "i64 1099511627776"},
	} {
		if err := mixed.SpecializeArg(mixedKernel, c.index, c.value); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(mixed.String(), c.want) {
			t.Errorf("argument %d: IR lacks %q", c.index, c.want)
		}
	}
	if !strings.Contains(mixed.String(), "double -1.250000e-01") {
		t.Error("double constant missing")
	}
	if err := mixed.Verify(); err != nil {
		t.Fatal(err)
	}
	optimizedPTX(t, mixed, "default<O3>")
}

func TestSpecializeHalf(t *testing.T) {
	m, err := ParseIR(`target triple = "nvptx64-nvidia-cuda"
define ptx_kernel void @h(half %x, bfloat %y, ptr addrspace(1) %p, ptr %out) {
  %e = fpext half %x to float
  %f = fpext bfloat %y to float
  %s = fadd float %e, %f
  store float %s, ptr %out
  store ptr addrspace(1) %p, ptr %out
  ret void
}`, "half.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	params, err := m.KernelParams("h")
	if err != nil {
		t.Fatal(err)
	}
	if params[0].Kind != ParamHalf || params[1].Kind != ParamBFloat || params[2].AddrSpace != 1 {
		t.Fatalf("params = %+v", params)
	}
	if err := m.SpecializeArg("h", 0, []byte{0x00, 0x3c}); err != nil { // 1.0 in f16
		t.Fatal(err)
	}
	if err := m.SpecializeArg("h", 1, []byte{0x40, 0x40}); err != nil { // 3.0 in bf16
		t.Fatal(err)
	}
	if err := m.SpecializeArg("h", 2, le64(0x1000)); err != nil {
		t.Fatal(err)
	}
	ir := m.String()
	for _, want := range []string{"half 0xH3C00", "bfloat 0xR4040", "inttoptr (i64 4096 to ptr addrspace(1))"} {
		if !strings.Contains(ir, want) {
			t.Errorf("IR lacks %q:\n%s", want, ir)
		}
	}
	if err := m.RunPasses("instcombine", nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.String(), "float 4.000000e+00") {
		t.Errorf("1.0h + 3.0bf did not fold to 4.0:\n%s", m.String())
	}
}

func TestSpecializeArgErrors(t *testing.T) {
	m := parseCUDA(t, "kernels")
	for _, c := range []struct {
		index int
		value []byte
		want  string
	}{
		{0, le64(1), "byval"},
		{2, le64(1), "value has 8 bytes, the type needs 2"},
		{1, le32(1), "value has 4 bytes, the type needs 8"},
		{9, le32(1), "there is no argument 9"},
		{-1, le32(1), "there is no argument -1"},
	} {
		err := m.SpecializeArg(mixedKernel, c.index, c.value)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("argument %d: err = %v, want it to mention %q", c.index, err, c.want)
		}
	}
	if err := m.SpecializeArg("missing", 0, le32(1)); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("missing kernel: %v", err)
	}
	if err := m.Verify(); err != nil {
		t.Errorf("failed specializations changed the module: %v", err)
	}
}

func TestSpecializeDims(t *testing.T) {
	m := parseCUDA(t, "kernels")
	x, err := m.ExtractKernel(loopKernel)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Dispose()
	if base := optimizedPTX(t, x, "default<O3>"); !strings.Contains(base, "%ntid.x") {
		t.Fatalf("unspecialized PTX lacks %%ntid.x:\n%s", base)
	}
	if err := x.SpecializeDims(loopKernel, dim(128, 1, 1), dim(4096, 1, 1)); err != nil {
		t.Fatal(err)
	}
	ir := x.String()
	if strings.Contains(ir, "call i32 @llvm.nvvm.read.ptx.sreg.ntid.x") {
		t.Error("ntid.x call left in the IR")
	}
	for _, want := range []string{"call range(i32 0, 128) i32 @llvm.nvvm.read.ptx.sreg.tid.x()", "call range(i32 0, 4096) i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()"} {
		if !strings.Contains(ir, want) {
			t.Errorf("IR lacks %q:\n%s", want, ir)
		}
	}
	ptx := optimizedPTX(t, x, "default<O3>")
	if strings.Contains(ptx, "%ntid.x") {
		t.Errorf("specialized PTX still reads %%ntid.x:\n%s", ptx)
	}
	body := entryPTX(t, ptx, loopKernel)
	// ctaid.x * 128 + tid.x: a shift by 7, and, since tid.x < 128 is known
	// from its range, an or instead of an add.
	if !regexp.MustCompile(`shl\.b32\s+%r\d+, %r\d+, 7;`).MatchString(body) || !strings.Contains(body, "or.b32") {
		t.Errorf("the index computation does not use the block size 128 and the tid.x range:\n%s", body)
	}
	if err := x.SpecializeDims(loopKernel, dim(0, 1, 1), dim(1, 1, 1)); err == nil || !strings.Contains(err.Error(), "block dimensions 0,1,1") {
		t.Errorf("zero block dimension: %v", err)
	}
}

func dim(x, y, z uint32) mneme.Dim3 { return mneme.Dim3{X: x, Y: y, Z: z} }

func TestSpecializeDimsClonesSharedFunctions(t *testing.T) {
	m := parseCUDA(t, "kernels")
	if err := m.SpecializeDims(dimsA, dim(64, 1, 1), dim(10, 1, 1)); err != nil {
		t.Fatal(err)
	}
	ir := m.String()
	if !strings.Contains(ir, "define internal noundef i32 @_Z12linear_indexv.dims()") {
		t.Fatalf("the shared helper was not cloned:\n%s", ir)
	}
	// The original helper, still used by dims_b, reads the block size.
	orig := ir[strings.Index(ir, "define dso_local noundef i32 @_Z12linear_indexv()"):]
	orig = orig[:strings.Index(orig, "\n}\n")]
	if !strings.Contains(orig, "@llvm.nvvm.read.ptx.sreg.ntid.x()") {
		t.Errorf("the original helper lost its ntid.x read:\n%s", orig)
	}
	ptx := optimizedPTX(t, m, "default<O3>")
	a, b := entryPTX(t, ptx, dimsA), entryPTX(t, ptx, dimsB)
	if strings.Contains(a, "%ntid.x") || strings.Contains(a, "%nctaid.x") {
		t.Errorf("dims_a still reads its dimensions:\n%s", a)
	}
	if !strings.Contains(b, "%ntid.x") {
		t.Errorf("dims_b was specialized too:\n%s", b)
	}
}

func TestSetLaunchBounds(t *testing.T) {
	m := parseCUDA(t, "kernels")
	if err := m.SetLaunchBounds(loopKernel, 128, 2); err != nil {
		t.Fatal(err)
	}
	// Replace clang's __launch_bounds__(256, 2) and drop the minimum.
	if err := m.SetLaunchBounds(mixedKernel, 64, 0); err != nil {
		t.Fatal(err)
	}
	ptx := optimizedPTX(t, m, "default<O3>")
	loop := ptx[strings.Index(ptx, ".entry "+loopKernel):]
	loop = loop[:strings.Index(loop, "{")]
	if !regexp.MustCompile(`\.maxntid 128(, 1, 1)?\n`).MatchString(loop) || !strings.Contains(loop, ".minnctapersm 2") {
		t.Errorf("loop kernel header:\n%s", loop)
	}
	mixed := ptx[strings.Index(ptx, ".entry "+mixedKernel):]
	mixed = mixed[:strings.Index(mixed, "{")]
	if !regexp.MustCompile(`\.maxntid 64(, 1, 1)?\n`).MatchString(mixed) || strings.Contains(mixed, "minnctapersm") {
		t.Errorf("mixed kernel header:\n%s", mixed)
	}
	if err := m.SetLaunchBounds(loopKernel, 0, 0); err == nil {
		t.Error("max threads 0 accepted")
	}
	if err := m.SetLaunchBounds(loopKernel, 32, -1); err == nil {
		t.Error("negative min blocks accepted")
	}
}

func TestInternalizeAndDropDead(t *testing.T) {
	m := parseCUDA(t, "kernels")
	m.Internalize(loopKernel, "scale_factor")
	ir := m.String()
	for _, want := range []string{"define internal noundef float @_Z6scaledf", "@unrelated_counter = internal addrspace(1)", "define internal ptx_kernel void @" + unrelatedKernel, "@scale_factor = dso_local addrspace(1)", "define dso_local ptx_kernel void @" + loopKernel} {
		if !strings.Contains(ir, want) {
			t.Errorf("after Internalize the IR lacks %q", want)
		}
	}
	if err := m.DropDead(); err != nil {
		t.Fatal(err)
	}
	if got := m.Kernels(); !slices.Equal(got, []string{loopKernel}) {
		t.Errorf("after DropDead kernels = %v", got)
	}
	ir = m.String()
	if strings.Contains(ir, "unrelated_counter") || strings.Contains(ir, "linear_index") {
		t.Errorf("dead globals survived:\n%s", ir)
	}
	if !strings.Contains(ir, "@_Z6scaledf") || !strings.Contains(ir, "@scale_factor") {
		t.Error("DropDead removed live globals")
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestRunPipelines(t *testing.T) {
	for _, p := range []string{"default<O0>", "default<O1>", "default<O2>", "default<O3>", "default<Os>", "default<Oz>", "instcombine,simplifycfg", "function(sroa,early-cse),globaldce"} {
		m := parseCUDA(t, "vecadd")
		c, err := m.Clone()
		if err != nil {
			t.Fatal(err)
		}
		tm := newTarget(t, "sm_90", 0, 2)
		if err := c.RunPasses(p, tm); err != nil {
			t.Errorf("%s: %v", p, err)
		} else if _, err := tm.EmitPTX(c); err != nil {
			t.Errorf("%s: codegen: %v", p, err)
		}
		c.Dispose()
	}
}

func TestInvalidPipeline(t *testing.T) {
	m := parseCUDA(t, "vecadd")
	for _, p := range []string{"no-such-pass", "default<O7>", "instcombine,(", "function(module-pass-here)"} {
		err := m.RunPasses(p, nil)
		if err == nil {
			t.Errorf("%q: no error", p)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, p) || strings.Contains(msg, "\n") {
			t.Errorf("%q: error %q should name the pipeline on one line", p, msg)
		}
		if !errors.Is(err, ErrInvalidPipeline) {
			t.Errorf("%q: error %q is not ErrInvalidPipeline", p, msg)
		}
	}
	if err := m.RunPasses("  ", nil); !errors.Is(err, ErrInvalidPipeline) {
		t.Errorf("empty pipeline: want ErrInvalidPipeline, got %v", err)
	}
	// The module is still fine.
	if err := m.RunPasses("default<O2>", nil); err != nil {
		t.Fatal(err)
	}
}

func TestCodegenLevelsAndPTXVersions(t *testing.T) {
	m := parseCUDA(t, "vecadd")
	for opt := 0; opt <= 3; opt++ {
		for _, c := range []struct {
			arch    string
			ptx     int
			version string
		}{{"sm_90", 0, ".version 7.8"}, {"sm_90", 80, ".version 8.0"}, {"sm_80", 0, ".version 7.0"}, {"sm_90a", 88, ".version 8.8"}} {
			tm := newTarget(t, c.arch, c.ptx, opt)
			x, err := m.Clone()
			if err != nil {
				t.Fatal(err)
			}
			ptx, err := tm.EmitPTX(x)
			x.Dispose()
			if err != nil {
				t.Fatalf("%s ptx%d O%d: %v", c.arch, c.ptx, opt, err)
			}
			if !strings.Contains(ptx, c.version+"\n") || !strings.Contains(ptx, ".target "+c.arch) {
				t.Errorf("%s ptx%d O%d: header\n%s", c.arch, c.ptx, opt, ptx[:200])
			}
		}
	}
	for _, c := range []struct {
		arch      string
		ptx, opt  int
		wantError string
	}{
		{"sm_999", 0, 2, "unknown GPU architecture \"sm_999\""},
		{"compute_90", 0, 2, "want the form sm_XX"},
		{"sm_90", 99, 2, "unknown target feature \"ptx99\""},
		{"sm_90", 0, 4, "want 0 to 3"},
		{"sm_90", 70, 2, "PTX version 7.0 does not support target 'sm_90'"},
	} {
		tm, err := NewTargetMachine(c.arch, c.ptx, c.opt)
		if err == nil {
			tm.Dispose()
			t.Errorf("%s ptx%d O%d: no error", c.arch, c.ptx, c.opt)
			continue
		}
		if !strings.Contains(err.Error(), c.wantError) {
			t.Errorf("%s ptx%d O%d: %v, want %q", c.arch, c.ptx, c.opt, err, c.wantError)
		}
	}
}

func TestEmitPTXFillsTripleAndLayout(t *testing.T) {
	m, err := ParseIR(`define ptx_kernel void @k(ptr %p) {
  store i32 42, ptr %p
  ret void
}`, "bare.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	tm := newTarget(t, "sm_90", 0, 2)
	ptx, err := tm.EmitPTX(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ptx, ".entry k(") || !strings.Contains(m.String(), `target triple = "nvptx64-nvidia-cuda"`) || !strings.Contains(m.String(), "target datalayout") {
		t.Errorf("ptx:\n%s\nIR:\n%s", ptx, m.String())
	}
	other, err := ParseIR("target triple = \"x86_64-pc-linux-gnu\"\ndefine void @f() {\n ret void\n}\n", "host.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Dispose()
	if _, err := tm.EmitPTX(other); err == nil || !strings.Contains(err.Error(), "x86_64-pc-linux-gnu") {
		t.Errorf("host module: %v", err)
	}
}

func TestNotBitcode(t *testing.T) {
	for _, c := range []struct {
		data []byte
		want string
	}{
		{nil, "the input is empty"},
		{[]byte("hello world, not bitcode"), "it starts with 68 65 6c 6c"},
		{[]byte("; ModuleID = 'k.cu'\ndefine void @f() {\n ret void\n}\n"), "looks like textual LLVM IR"},
		{[]byte{'B', 'C', 0xC0, 0xDE, 1, 2, 3}, ""},
	} {
		m, err := ParseBitcode(c.data, "input.bin")
		if err == nil {
			m.Dispose()
			t.Errorf("%q: parsed", c.data)
			continue
		}
		if !errors.Is(err, ErrNotBitcode) || !strings.HasPrefix(err.Error(), "input.bin: not LLVM bitcode: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %q", c.data, err)
		}
	}
	// Every truncation of real bitcode is an error, never a crash.
	bc := cudaBitcode(t, "vecadd")
	for n := 0; n < len(bc); n += 97 {
		if m, err := ParseBitcode(bc[:n], "cut.bc"); err == nil {
			m.Dispose()
			t.Errorf("truncated to %d bytes: parsed", n)
		}
	}
}

func TestParseIRErrors(t *testing.T) {
	_, err := ParseIR("define void @f() {\n  ret i32\n}\n", "broken.ll")
	if err == nil || !strings.HasPrefix(err.Error(), "broken.ll:3:1: error: expected value token") {
		t.Errorf("syntax error: %v", err)
	}
	// Parses, but an instruction does not dominate its use: the verifier says so.
	_, err = ParseIR(`define i32 @f(i1 %c) {
entry:
  br i1 %c, label %a, label %b
a:
  %x = add i32 1, 2
  br label %b
b:
  ret i32 %x
}`, "dom.ll")
	if err == nil || !strings.Contains(err.Error(), "dom.ll: invalid module") || !strings.Contains(err.Error(), "does not dominate") || strings.Contains(err.Error(), "\n") {
		t.Errorf("verifier error: %v", err)
	}
}

func TestFatalErrorIsAnError(t *testing.T) {
	for i := range 3 { // the trap re-arms
		err := provokeFatalError("deliberate failure")
		var fatal *FatalError
		if !errors.As(err, &fatal) || fatal.Message != "deliberate failure" {
			t.Fatalf("round %d: %v", i, err)
		}
	}
}

func TestCrashInsideLLVMIsAnError(t *testing.T) {
	for i := range 3 {
		err := provokeCrash()
		var fatal *FatalError
		if !errors.As(err, &fatal) || !strings.Contains(fatal.Message, "SIGSEGV") {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	// Faults outside LLVM still reach the Go runtime: a nil dereference in
	// Go code is still a recoverable panic.
	var p *Module
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("nil dereference did not panic")
			}
		}()
		_ = p.name
	}()
}

func TestCorruptBitcodeThatCrashedTheReader(t *testing.T) {
	// Found by FuzzParseBitcode: LLVM 22's release-build reader dereferences
	// a null pointer on it (testdata/fuzz/FuzzParseBitcode/d0d851ba9a274967).
	data, err := os.ReadFile("testdata/fuzz/FuzzParseBitcode/d0d851ba9a274967")
	if err != nil {
		t.Fatal(err)
	}
	input := fuzzCorpusBytes(t, data)
	_, err = ParseBitcode(input, "crash.bc")
	if !errors.Is(err, ErrNotBitcode) || !strings.Contains(err.Error(), "SIGSEGV") {
		t.Fatalf("ParseBitcode: %v", err)
	}
}

func TestCorruptBitcodeThatExhaustedMemory(t *testing.T) {
	// Found by FuzzParseBitcode: the reader sizes an attribute list by an
	// index from the file and asks for tens of gigabytes; in-process it was
	// killed by the OOM killer, in the isolated reader it is an error.
	data, err := os.ReadFile("testdata/fuzz/FuzzParseBitcode/94b302a789072504")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseBitcode(fuzzCorpusBytes(t, data), "huge.bc")
	if !errors.Is(err, ErrNotBitcode) || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("ParseBitcode: %v", err)
	}
}

// clusterKernel reads a register that exists from sm_90 on: on sm_80 the
// NVPTX instruction selector cannot select it and calls report_fatal_error.
const clusterKernel = `target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()
define ptx_kernel void @k(ptr %p) {
  %v = call i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()
  store i32 %v, ptr %p
  ret void
}`

func TestCodegenFatalErrorIsRecovered(t *testing.T) {
	m, err := ParseIR(clusterKernel, "cluster.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	tm := newTarget(t, "sm_80", 0, 2)
	_, err = tm.EmitPTX(m)
	var fatal *FatalError
	if !errors.As(err, &fatal) || !strings.Contains(fatal.Message, "Cannot select") {
		t.Fatalf("EmitPTX: %v", err)
	}
	if !strings.Contains(err.Error(), "cluster.ll: codegen for sm_80") {
		t.Errorf("error does not say where: %v", err)
	}
	if err := m.Verify(); !errors.Is(err, ErrModuleUnusable) {
		t.Errorf("module after a fatal error: %v", err)
	}
	// The same target machine keeps working.
	ok, err := ParseIR(strings.Replace(clusterKernel, "clusterid", "tid", 2), "tid.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Dispose()
	if ptx, err := tm.EmitPTX(ok); err != nil || !strings.Contains(ptx, "%tid.x") {
		t.Fatalf("after a fatal error: %v\n%s", err, ptx)
	}
	// And sm_90 can select it.
	good, _ := ParseIR(clusterKernel, "cluster.ll")
	defer good.Dispose()
	if ptx, err := newTarget(t, "sm_90", 0, 2).EmitPTX(good); err != nil || !strings.Contains(ptx, "%clusterid.x") {
		t.Fatalf("sm_90: %v", err)
	}
}

func TestCodegenErrorDiagnostic(t *testing.T) {
	// LLVM reports this through the context's diagnostic handler, whose
	// default would print it and exit(1).
	m, err := ParseIR(`target triple = "nvptx64-nvidia-cuda"
define ptx_kernel void @k(ptr %p, i64 %n) {
  %a = alloca i8, i64 %n
  store volatile i8 1, ptr %a
  %v = load volatile i8, ptr %a
  store i8 %v, ptr %p
  ret void
}`, "alloca.ll")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	_, err = newTarget(t, "sm_52", 60, 2).EmitPTX(m)
	if err == nil || !strings.Contains(err.Error(), "dynamic alloca") {
		t.Fatalf("EmitPTX: %v", err)
	}
}

func TestModulesInParallel(t *testing.T) {
	bc := cudaBitcode(t, "kernels")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	results := make([]string, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := ParseBitcode(bc, "kernels.bc")
			if err != nil {
				errs <- err
				return
			}
			defer m.Dispose()
			x, err := m.ExtractKernel(loopKernel)
			if err != nil {
				errs <- err
				return
			}
			defer x.Dispose()
			if err := x.SpecializeArg(loopKernel, 2, le32(64)); err != nil {
				errs <- err
				return
			}
			tm, err := NewTargetMachine("sm_90", 80, 3)
			if err != nil {
				errs <- err
				return
			}
			defer tm.Dispose()
			if err := x.RunPasses("default<O3>", tm); err != nil {
				errs <- err
				return
			}
			ptx, err := tm.EmitPTX(x)
			if err != nil {
				errs <- err
				return
			}
			if i%2 == 0 {
				if err := provokeFatalError("parallel"); err == nil {
					errs <- errors.New("no fatal error")
				}
			}
			results[i] = ptx
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range results {
		if results[i] != results[0] || results[i] == "" {
			t.Fatalf("goroutine %d produced different PTX", i)
		}
	}
	if !bytes.Contains([]byte(results[0]), []byte(".entry "+loopKernel)) {
		t.Error("no kernel in the PTX")
	}
}

// TestSpecializeDimsEveryDimension specializes a launch whose x, y and z
// differ, so that a dimension read from another one is seen: the constants
// of ntid and nctaid, and the ranges of tid and ctaid, per dimension.
func TestSpecializeDimsEveryDimension(t *testing.T) {
	const kernel = "_Z5dims3Pj"
	m := parseCUDA(t, "dims3")
	if err := m.SpecializeDims(kernel, dim(2, 3, 5), dim(7, 11, 13)); err != nil {
		t.Fatal(err)
	}
	ir := m.String()
	for _, d := range []string{"x", "y", "z"} {
		for _, reg := range []string{"ntid", "nctaid"} {
			if call := "@llvm.nvvm.read.ptx.sreg." + reg + "." + d + "()"; strings.Contains(ir, "call i32 "+call) {
				t.Errorf("%s left in the IR", call)
			}
		}
	}
	for _, want := range []string{
		"call range(i32 0, 2) i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
		"call range(i32 0, 3) i32 @llvm.nvvm.read.ptx.sreg.tid.y()",
		"call range(i32 0, 5) i32 @llvm.nvvm.read.ptx.sreg.tid.z()",
		"call range(i32 0, 7) i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()",
		"call range(i32 0, 11) i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()",
		"call range(i32 0, 13) i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()",
	} {
		if !strings.Contains(ir, want) {
			t.Errorf("IR lacks %q:\n%s", want, ir)
		}
	}
	c, err := m.Clone()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Dispose()
	if err := c.RunPasses("default<O3>", newTarget(t, "sm_90", 80, 3)); err != nil {
		t.Fatal(err)
	}
	// 2 + 100*3 + 10000*5 and 7 + 100*11 + 10000*13.
	opt := c.String()
	for _, want := range []string{"store i32 50302,", "store i32 131107,"} {
		if !strings.Contains(opt, want) {
			t.Errorf("optimized IR lacks %q:\n%s", want, opt)
		}
	}
	for i, bad := range []mneme.Dim3{dim(1, 0, 1), dim(1, 1, 0)} {
		if err := m.SpecializeDims(kernel, bad, dim(1, 1, 1)); err == nil || !strings.Contains(err.Error(), "block dimensions") {
			t.Errorf("block %d %v: %v", i, bad, err)
		}
		if err := m.SpecializeDims(kernel, dim(1, 1, 1), bad); err == nil || !strings.Contains(err.Error(), "grid dimensions") {
			t.Errorf("grid %d %v: %v", i, bad, err)
		}
	}
}

func TestVectorizersFollowClangDriver(t *testing.T) {
	for _, tc := range []struct {
		pipeline     string
		slp, loopVec bool
	}{
		{"default<O0>", false, false}, {"default<O1>", false, false}, {"default<O2>", true, true},
		{"default<O3>", true, true}, {"default<Os>", true, true}, {"default<Oz>", true, false},
		{"instcombine,simplifycfg", false, false},
	} {
		slp, lv := vectorizers(tc.pipeline)
		if (slp != 0) != tc.slp || (lv != 0) != tc.loopVec {
			t.Errorf("%s: slp %d, loop vectorizer %d; want %v, %v", tc.pipeline, slp, lv, tc.slp, tc.loopVec)
		}
	}
}
