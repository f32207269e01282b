package replay

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/replay/internal/compare"
)

func ptrArg(addr uint64) []byte { return binary.LittleEndian.AppendUint64(nil, addr) }

func TestBufferTypes(t *testing.T) {
	blobs := []blobSlot{{Addr: 0x1000, Size: 256}, {Addr: 0x2000, Size: 256}, {Addr: 0x3000, Size: 256}, {Addr: 0x4000, Size: 64}}
	globals := []globalSlot{{Name: "sum", Size: 4}, {Name: "count", Size: 4}}
	ptr := llvm.Param{Kind: llvm.ParamPointer, Bits: 64}
	param := func(i int) llvm.Base { return llvm.Base{Kind: llvm.BaseParam, Param: i} }
	store := func(ty string) llvm.Write { return llvm.Write{Kind: llvm.WriteStore, Type: ty} }
	fadd := llvm.Write{Kind: llvm.WriteAtomicRMW, Type: "float", Op: "fadd"}
	kw := &llvm.KernelWrites{
		Params: []llvm.Param{ptr, ptr, ptr, ptr, {Kind: llvm.ParamOther, ByVal: true, Bits: 128}},
		Writes: []llvm.WriteSite{
			{Base: param(0), Write: store("float")},
			{Base: param(1), Write: store("double")},
			{Base: param(1), Write: store("i64")}, // mixed: untyped
			{Base: param(2), Write: fadd},         // the middle of blob 2
			{Base: llvm.Base{Kind: llvm.BaseParamField, Param: 4, Offset: 8}, Write: store("half")},
			{Base: param(4), Write: store("i32")}, // into the kernel's own copy: ignored
			{Base: llvm.Base{Kind: llvm.BaseGlobal, Global: "sum"}, Write: fadd},
			{Base: llvm.Base{Kind: llvm.BaseGlobal, Global: "count"}, Write: store("i32")},
			{Base: llvm.Base{Kind: llvm.BaseGlobal, Global: "unrecorded"}, Write: store("i8")},
		},
	}
	args := [][]byte{ptrArg(0x1000), ptrArg(0x2010), ptrArg(0x3080), ptrArg(0x1040), append(ptrArg(7), ptrArg(0x4000)...)}
	bt, gt := bufferTypes(kw, args, blobs, globals)
	want := []bufferType{
		{elem: compare.F32, written: true, args: []int{0, 3}},
		{elem: compare.Untyped, written: true, args: []int{1}},
		{elem: compare.F32, atomicSum: true, written: true, args: []int{2}},
		{elem: compare.F16, written: true},
	}
	for i, w := range want {
		g := bt[i]
		if g.elem != w.elem || g.atomicSum != w.atomicSum || g.written != w.written || len(g.args) != len(w.args) {
			t.Errorf("blob %d: got %+v, want %+v", i, g, w)
		}
	}
	if gt[0].elem != compare.F32 || !gt[0].atomicSum || gt[1].elem != compare.Untyped || !gt[1].written {
		t.Errorf("globals: %+v", gt)
	}
	if name := bufferName(0x1000, bt[0].args); name != "allocation 0x1000 (args 0, 3)" {
		t.Errorf("bufferName: %q", name)
	}

	// A float store through an untraceable pointer keeps float buffers
	// float, makes unwritten ones float, and leaves nothing else typed.
	kw.Writes = append(kw.Writes, llvm.WriteSite{Base: llvm.Base{Kind: llvm.BaseUnknown}, Write: store("float")})
	bt, gt = bufferTypes(kw, args, blobs, globals)
	if bt[0].elem != compare.F32 || bt[3].elem != compare.Untyped || gt[0].elem != compare.F32 || gt[1].elem != compare.Untyped {
		t.Errorf("with an unknown float store: %+v %+v", bt, gt)
	}
	// An integer store through an untraceable pointer makes everything untyped.
	kw.Writes = append(kw.Writes, llvm.WriteSite{Base: llvm.Base{Kind: llvm.BaseUnknown}, Write: store("i32")})
	bt, gt = bufferTypes(kw, args, blobs, globals)
	for i, b := range append(bt, gt...) {
		if b.elem != compare.Untyped || b.atomicSum {
			t.Errorf("buffer %d typed %v despite an unknown integer store", i, b.elem)
		}
	}
	// A pointer argument outside every recorded allocation may alias any.
	kw.Writes = []llvm.WriteSite{{Base: param(0), Write: store("double")}, {Base: param(1), Write: store("float")}}
	bt, _ = bufferTypes(kw, [][]byte{ptrArg(0), ptrArg(0x2000)}, blobs, globals)
	if bt[1].elem != compare.Untyped || bt[0].elem != compare.F64 || bt[0].written {
		t.Errorf("null argument written as double: %+v", bt)
	}
	// No analysis: all untyped.
	bt, gt = bufferTypes(nil, args, blobs, globals)
	if bt[0].elem != compare.Untyped || gt[0].elem != compare.Untyped {
		t.Error("no analysis must leave buffers untyped")
	}
}

func TestAtomicSumBounds(t *testing.T) {
	want := binary.LittleEndian.AppendUint32(nil, math.Float32bits(-300))
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(float32(math.Inf(1))))
	base := autoBounds[compare.F32]
	b := atomicSumBounds(base, 400, 4, maxMagnitude(want, compare.F32)) // 100 threads per element
	if math.Abs(b.Rel-10*base.Rel) > 1e-12 || math.Abs(b.Abs-300*b.Rel) > 1e-9 || b.ULP != base.ULP {
		t.Errorf("100 contributions: %+v", b)
	}
	if b := atomicSumBounds(base, 1<<40, 1, maxMagnitude(want, compare.F32)); b.Rel != 100*base.Rel {
		t.Errorf("the widening must stop at 100x: %+v", b)
	}
	if b := atomicSumBounds(base, 1, 1000, maxMagnitude(want, compare.F32)); b.Rel != base.Rel {
		t.Errorf("fewer threads than elements: %+v", b)
	}
}

func TestPlanTypedFromRecordedIR(t *testing.T) {
	dir, _ := hostDB(t, vecaddLaunch(1000), vecaddHost)
	rec, err := Load(dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if rec.Writes == nil {
		t.Fatal("no write analysis of the recorded IR")
	}
	lay := planLayout(rec.Prologue, rec.Epilogue)
	p, err := planTyped(rec, lay, mneme.VerifyOptions{Mode: mneme.VerifyAuto})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.blobs) != 3 {
		t.Fatalf("%d blobs planned", len(p.blobs))
	}
	for i, want := range []compare.ElemType{compare.Untyped, compare.Untyped, compare.F32} {
		if p.blobs[i].elem != want || p.blobs[i].report != (i == 2) {
			t.Errorf("blob %d: %+v, want %v reported only for c", i, p.blobs[i], want)
		}
	}
	if b := p.blobs[2].bounds; b != autoBounds[compare.F32] {
		t.Errorf("c's bounds %+v", b)
	}
	if p, _ := planTyped(rec, lay, mneme.VerifyOptions{Mode: mneme.VerifyULP, ULP: 3}); p.blobs[2].bounds != (compare.Bounds{ULP: 3}) || p.blobs[0].bounds != (compare.Bounds{}) {
		t.Errorf("ulp 3 plan: %+v", p.blobs)
	}
	if p, _ := planTyped(rec, lay, mneme.VerifyOptions{Mode: mneme.VerifyBitwise}); len(p.blobs) != 0 {
		t.Errorf("bitwise mode planned typed buffers: %+v", p)
	}
}

func TestTypedFiguresOf(t *testing.T) {
	want := f32buf(8, func(i int) float32 { return float32(i) + 0.5 })
	got := append([]byte(nil), want...)
	binary.LittleEndian.PutUint32(got[4*3:], math.Float32bits(math.Nextafter32(3.5, 4)))
	binary.LittleEndian.PutUint32(got[4*6:], math.Float32bits(6.5*(1+1e-3)))
	tb := typedBuffer{name: "allocation 0x1000 (arg 0)", elem: compare.F32, bounds: autoBounds[compare.F32], report: true}
	c := comparison{params: compare.Params{N: uint64(len(want))}, what: "allocation 0x1000 (32 bytes)", typed: &tb}

	// The GPU names byte 12 (element 3): the host compares from there on.
	fig, passed, err := typedFiguresOf(c, 12, got[12:], want[12:])
	if err != nil {
		t.Fatal(err)
	}
	if passed || fig.Passed || fig.Differing != 2 || fig.Failing != 1 || *fig.FirstIndex != 6 || fig.Elements != 8 || fig.Bound != "16 ulp or rel 1e-05" {
		t.Fatalf("figures %+v", fig)
	}
	if msg := typedMismatch(c, fig); !strings.Contains(msg, "element 6") || !strings.Contains(msg, "(f32)") {
		t.Errorf("mismatch %q", msg)
	}
	// Within bounds it passes; an equal, reported buffer gets a zero entry.
	binary.LittleEndian.PutUint32(got[4*6:], math.Float32bits(6.5))
	if fig, passed, _ := typedFiguresOf(c, 12, got[12:], want[12:]); !passed || fig.Differing != 1 || *fig.FirstIndex != 3 || fig.MaxULP != 1 {
		t.Fatalf("within bounds: %+v", fig)
	}
	if fig, passed, _ := typedFiguresOf(c, compare.NoDifference, nil, nil); !passed || fig == nil || fig.FirstIndex != nil || fig.Differing != 0 {
		t.Fatalf("equal: %+v", fig)
	}
	tb.report = false
	if fig, passed, _ := typedFiguresOf(c, compare.NoDifference, nil, nil); !passed || fig != nil {
		t.Fatalf("equal, unwritten: %+v", fig)
	}
	// Untyped: bitwise, byte offsets.
	tb = typedBuffer{name: "global g", elem: compare.Untyped}
	fig, passed, err = typedFiguresOf(c, 12, got[12:], want[12:])
	if err != nil || passed || *fig.FirstIndex != 12 || fig.Differing != 1 || fig.Type != "untyped" || fig.Bound != "bitwise" {
		t.Fatalf("untyped: %+v %v", fig, err)
	}
	if _, _, err := typedFiguresOf(c, 13, got[14:], want[12:]); err == nil {
		t.Error("a short copy is not reported")
	}
}
