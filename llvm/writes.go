package llvm

/*
#include <stdlib.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"strings"
)

// WriteKind is how an instruction writes memory.
type WriteKind int

// Write kinds.
const (
	WriteStore     WriteKind = iota // store
	WriteAtomicRMW                  // atomicrmw
	WriteCmpXchg                    // cmpxchg
	WriteMemory                     // llvm.memcpy, llvm.memmove, llvm.memset: untyped bytes
	WriteOpaque                     // code the walk cannot see into (declarations, inline asm, indirect calls)
)

func (k WriteKind) String() string {
	switch k {
	case WriteStore:
		return "store"
	case WriteAtomicRMW:
		return "atomicrmw"
	case WriteCmpXchg:
		return "cmpxchg"
	case WriteMemory:
		return "memory"
	case WriteOpaque:
		return "opaque"
	}
	return fmt.Sprintf("WriteKind(%d)", int(k))
}

// BaseKind says what a written pointer derives from.
type BaseKind int

// Base kinds.
const (
	// BaseParam is a kernel parameter: the pointer it holds.
	BaseParam BaseKind = iota
	// BaseParamField is a pointer stored inside a by-value kernel parameter
	// (a struct argument) at a constant byte offset.
	BaseParamField
	// BaseGlobal is a module global variable, by name.
	BaseGlobal
	// BaseUnknown is any other pointer (loaded from memory, computed from an
	// integer, returned by a call): the write may reach any buffer.
	BaseUnknown
)

func (k BaseKind) String() string {
	switch k {
	case BaseParam:
		return "param"
	case BaseParamField:
		return "param-field"
	case BaseGlobal:
		return "global"
	case BaseUnknown:
		return "unknown"
	}
	return fmt.Sprintf("BaseKind(%d)", int(k))
}

// Base is the root a written pointer was traced back to.
type Base struct {
	Kind   BaseKind
	Param  int    // BaseParam, BaseParamField: the kernel parameter's index
	Offset int64  // BaseParamField: byte offset of the pointer inside the parameter
	Global string // BaseGlobal: the global's name
}

func (b Base) String() string {
	switch b.Kind {
	case BaseParam:
		return fmt.Sprintf("param %d", b.Param)
	case BaseParamField:
		return fmt.Sprintf("param %d+%d", b.Param, b.Offset)
	case BaseGlobal:
		return "global " + b.Global
	}
	return "unknown"
}

// Write is one way memory is written: the kind of instruction and the
// scalar type it writes.
type Write struct {
	Kind WriteKind
	// Type is the written scalar type as IR text ("float", "double",
	// "half", "bfloat", "i32", "ptr", ...); for a vector store, its element
	// type; an aggregate store gives the aggregate's text. Empty for untyped
	// writes (WriteMemory, WriteOpaque).
	Type string
	// Op is atomicrmw's operation ("fadd", "add", "xchg", ...).
	Op string
}

// WriteSite is a write and the base its pointer derives from.
type WriteSite struct {
	Base  Base
	Write Write
}

// KernelWrites describes every write the kernel's code (and the functions it
// calls) may do to memory outside its own stack, by base.
type KernelWrites struct {
	Kernel string
	Params []Param
	// Writes are deduplicated and sorted by base, then write.
	Writes []WriteSite
}

// KernelWrites walks the kernel and the functions it calls for stores,
// atomics and memory intrinsics, and traces each written pointer back through
// GEPs, casts, phis and selects to the kernel parameter or global it derives
// from. It analyzes a copy of the kernel's closure after SROA (recorded IR is
// unoptimized: parameters go through stack slots); m is unchanged. A write
// whose pointer cannot be traced is reported with BaseUnknown.
func (m *Module) KernelWrites(kernel string) (*KernelWrites, error) {
	params, err := m.KernelParams(kernel)
	if err != nil {
		return nil, err
	}
	c, err := m.ExtractKernel(kernel)
	if err != nil {
		return nil, err
	}
	defer c.Dispose()
	if err := c.RunPasses("function(sroa)", nil); err != nil {
		return nil, fmt.Errorf("preparing %s for the write analysis: %w", kernel, err)
	}
	f, err := c.definedFunction(kernel)
	if err != nil {
		return nil, err
	}
	td := c.targetData()
	defer C.LLVMDisposeTargetData(td)
	w := &writeWalk{td: td, summaries: map[C.LLVMValueRef][]WriteSite{}, active: map[C.LLVMValueRef]bool{}}
	sites := w.summary(f)
	out := &KernelWrites{Kernel: kernel, Params: params, Writes: dedupSites(sites)}
	return out, nil
}

func dedupSites(in []WriteSite) []WriteSite {
	seen := map[WriteSite]bool{}
	var out []WriteSite
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Base != b.Base {
			if a.Base.Kind != b.Base.Kind {
				return a.Base.Kind < b.Base.Kind
			}
			if a.Base.Param != b.Base.Param {
				return a.Base.Param < b.Base.Param
			}
			if a.Base.Offset != b.Base.Offset {
				return a.Base.Offset < b.Base.Offset
			}
			return a.Base.Global < b.Base.Global
		}
		if a.Write.Kind != b.Write.Kind {
			return a.Write.Kind < b.Write.Kind
		}
		if a.Write.Type != b.Write.Type {
			return a.Write.Type < b.Write.Type
		}
		return a.Write.Op < b.Write.Op
	})
	return out
}

// writeWalk computes per-function write summaries whose bases are the
// function's own parameters; a call maps the callee's parameter bases to
// the bases of the actual arguments.
type writeWalk struct {
	td        C.LLVMTargetDataRef
	summaries map[C.LLVMValueRef][]WriteSite
	active    map[C.LLVMValueRef]bool // functions being summarized (recursion)
}

// baseLocal marks pointers into the function's own stack or to nothing
// (null, undef): writes through them reach no buffer. It is internal to the
// walk and never reported.
const baseLocal BaseKind = -1

func (w *writeWalk) summary(f C.LLVMValueRef) []WriteSite {
	if s, ok := w.summaries[f]; ok {
		return s
	}
	w.active[f] = true
	var sites []WriteSite
	add := func(ptr C.LLVMValueRef, wr Write) {
		for _, b := range w.trace(ptr) {
			if b.Kind != baseLocal {
				sites = append(sites, WriteSite{Base: b, Write: wr})
			}
		}
	}
	forEachInstruction(f, func(inst C.LLVMValueRef) {
		switch C.LLVMGetInstructionOpcode(inst) {
		case C.LLVMStore:
			add(C.LLVMGetOperand(inst, 1), Write{Kind: WriteStore, Type: scalarType(C.LLVMTypeOf(C.LLVMGetOperand(inst, 0)))})
		case C.LLVMAtomicRMW:
			add(C.LLVMGetOperand(inst, 0), Write{Kind: WriteAtomicRMW, Type: scalarType(C.LLVMTypeOf(C.LLVMGetOperand(inst, 1))),
				Op: atomicOpName(C.LLVMGetAtomicRMWBinOp(inst))})
		case C.LLVMAtomicCmpXchg:
			add(C.LLVMGetOperand(inst, 0), Write{Kind: WriteCmpXchg, Type: scalarType(C.LLVMTypeOf(C.LLVMGetOperand(inst, 1)))})
		case C.LLVMCall, C.LLVMInvoke, C.LLVMCallBr:
			sites = append(sites, w.call(inst, add)...)
		}
	})
	delete(w.active, f)
	w.summaries[f] = sites
	return sites
}

// readOnlyIntrinsics are intrinsics that take pointers but write no memory
// a buffer could be.
var readOnlyIntrinsics = []string{
	"llvm.dbg.", "llvm.lifetime.", "llvm.assume", "llvm.experimental.noalias.scope.decl",
	"llvm.invariant.", "llvm.prefetch", "llvm.nvvm.ldg.", "llvm.nvvm.ldu.", "llvm.nvvm.isspacep.",
	"llvm.ptr.annotation", "llvm.var.annotation", "llvm.ptrmask", "llvm.launder.invariant.group",
	"llvm.strip.invariant.group", "llvm.objectsize", "llvm.stacksave", "llvm.stackrestore",
}

// call handles a call instruction: memory intrinsics write untyped bytes
// through their destination, defined callees contribute their summaries
// mapped onto the actual arguments, and anything else may write untyped
// bytes through every pointer it is given.
func (w *writeWalk) call(inst C.LLVMValueRef, add func(C.LLVMValueRef, Write)) []WriteSite {
	callee := C.LLVMGetCalledValue(inst)
	nargs := int(C.LLVMGetNumArgOperands(inst))
	opaqueArgs := func() {
		for i := range nargs {
			a := C.LLVMGetOperand(inst, C.uint(i))
			if C.LLVMGetTypeKind(C.LLVMTypeOf(a)) == C.LLVMPointerTypeKind {
				add(a, Write{Kind: WriteOpaque})
			}
		}
	}
	if C.LLVMIsAFunction(callee) == nil {
		opaqueArgs()
		if C.LLVMIsAInlineAsm(callee) == nil {
			// An indirect call may run any code.
			return []WriteSite{{Base: Base{Kind: BaseUnknown}, Write: Write{Kind: WriteOpaque}}}
		}
		return nil
	}
	name := valueName(callee)
	if strings.HasPrefix(name, "llvm.") {
		for _, p := range []string{"llvm.memcpy", "llvm.memmove", "llvm.memset"} {
			if strings.HasPrefix(name, p) {
				add(C.LLVMGetOperand(inst, 0), Write{Kind: WriteMemory})
				return nil
			}
		}
		for _, p := range readOnlyIntrinsics {
			if strings.HasPrefix(name, p) {
				return nil
			}
		}
		opaqueArgs()
		return nil
	}
	if !isDefinition(callee) || w.active[callee] {
		// External code, or a recursive call whose summary is not done:
		// assume it writes through every pointer it gets.
		opaqueArgs()
		if w.active[callee] {
			return []WriteSite{{Base: Base{Kind: BaseUnknown}, Write: Write{Kind: WriteOpaque}}}
		}
		return nil
	}
	var out []WriteSite
	for _, s := range w.summary(callee) {
		if s.Base.Kind != BaseParam && s.Base.Kind != BaseParamField {
			out = append(out, s)
			continue
		}
		if s.Base.Param >= nargs {
			out = append(out, WriteSite{Base: Base{Kind: BaseUnknown}, Write: s.Write})
			continue
		}
		actual := C.LLVMGetOperand(inst, C.uint(s.Base.Param))
		if s.Base.Kind == BaseParamField {
			// A pointer loaded from a callee's by-value struct: the caller's
			// copy is not traced further.
			out = append(out, WriteSite{Base: Base{Kind: BaseUnknown}, Write: s.Write})
			continue
		}
		for _, b := range w.trace(actual) {
			if b.Kind != baseLocal {
				out = append(out, WriteSite{Base: b, Write: s.Write})
			}
		}
	}
	return out
}

// trace finds the bases pointer p may derive from.
func (w *writeWalk) trace(p C.LLVMValueRef) []Base {
	seen := map[C.LLVMValueRef]bool{}
	var out []Base
	var visit func(v C.LLVMValueRef)
	visit = func(v C.LLVMValueRef) {
		if v == nil || seen[v] {
			return
		}
		seen[v] = true
		switch {
		case C.LLVMIsAArgument(v) != nil:
			out = append(out, Base{Kind: BaseParam, Param: paramIndex(v)})
		case C.LLVMIsAGlobalVariable(v) != nil:
			out = append(out, Base{Kind: BaseGlobal, Global: valueName(v)})
		case C.LLVMIsAGlobalAlias(v) != nil:
			visit(C.LLVMAliasGetAliasee(v))
		case C.LLVMIsAConstantPointerNull(v) != nil, C.LLVMIsAUndefValue(v) != nil, C.LLVMIsAAllocaInst(v) != nil:
			out = append(out, Base{Kind: baseLocal})
		case C.LLVMIsAConstantExpr(v) != nil:
			switch C.LLVMGetConstOpcode(v) {
			case C.LLVMGetElementPtr, C.LLVMBitCast, C.LLVMAddrSpaceCast:
				visit(C.LLVMGetOperand(v, 0))
			default:
				out = append(out, Base{Kind: BaseUnknown})
			}
		case C.LLVMIsAInstruction(v) != nil:
			switch C.LLVMGetInstructionOpcode(v) {
			case C.LLVMGetElementPtr, C.LLVMBitCast, C.LLVMAddrSpaceCast, C.LLVMFreeze:
				visit(C.LLVMGetOperand(v, 0))
			case C.LLVMPHI:
				for i := range int(C.LLVMCountIncoming(v)) {
					visit(C.LLVMGetIncomingValue(v, C.uint(i)))
				}
			case C.LLVMSelect:
				visit(C.LLVMGetOperand(v, 1))
				visit(C.LLVMGetOperand(v, 2))
			case C.LLVMIntToPtr:
				if x := C.LLVMGetOperand(v, 0); C.LLVMIsAInstruction(x) != nil && C.LLVMGetInstructionOpcode(x) == C.LLVMPtrToInt {
					visit(C.LLVMGetOperand(x, 0))
				} else {
					out = append(out, Base{Kind: BaseUnknown})
				}
			case C.LLVMLoad:
				out = append(out, w.loadedPointer(C.LLVMGetOperand(v, 0)))
			case C.LLVMCall:
				// Intrinsics that return their pointer argument, adjusted.
				if callee := C.LLVMGetCalledValue(v); C.LLVMIsAFunction(callee) != nil {
					name := valueName(callee)
					if strings.HasPrefix(name, "llvm.ptrmask") || strings.HasPrefix(name, "llvm.launder.invariant.group") ||
						strings.HasPrefix(name, "llvm.strip.invariant.group") {
						visit(C.LLVMGetOperand(v, 0))
						return
					}
				}
				out = append(out, Base{Kind: BaseUnknown})
			default:
				out = append(out, Base{Kind: BaseUnknown})
			}
		default:
			out = append(out, Base{Kind: BaseUnknown})
		}
	}
	visit(p)
	return out
}

// loadedPointer is the base of a pointer loaded from addr: a field of a
// by-value parameter when addr is that parameter at a constant offset,
// else unknown.
func (w *writeWalk) loadedPointer(addr C.LLVMValueRef) Base {
	off := int64(0)
	for {
		switch {
		case C.LLVMIsAArgument(addr) != nil:
			f := C.LLVMGetParamParent(addr)
			i := paramIndex(addr)
			if C.LLVMGetEnumAttributeAtIndex(f, C.LLVMAttributeIndex(i+1), attributeKind("byval")) == nil {
				return Base{Kind: BaseUnknown}
			}
			return Base{Kind: BaseParamField, Param: i, Offset: off}
		case C.LLVMIsAGetElementPtrInst(addr) != nil:
			o, ok := w.constantOffset(addr)
			if !ok {
				return Base{Kind: BaseUnknown}
			}
			off += o
			addr = C.LLVMGetOperand(addr, 0)
		case C.LLVMIsABitCastInst(addr) != nil, C.LLVMIsAAddrSpaceCastInst(addr) != nil:
			addr = C.LLVMGetOperand(addr, 0)
		default:
			return Base{Kind: BaseUnknown}
		}
	}
}

// constantOffset is the byte offset a GEP with constant indices adds.
func (w *writeWalk) constantOffset(gep C.LLVMValueRef) (int64, bool) {
	t := C.LLVMGetGEPSourceElementType(gep)
	n := int(C.LLVMGetNumOperands(gep))
	var off int64
	for i := 1; i < n; i++ {
		idx := C.LLVMGetOperand(gep, C.uint(i))
		if C.LLVMIsAConstantInt(idx) == nil {
			return 0, false
		}
		k := int64(C.LLVMConstIntGetSExtValue(idx))
		if i == 1 {
			off += k * int64(C.LLVMABISizeOfType(w.td, t))
			continue
		}
		switch C.LLVMGetTypeKind(t) {
		case C.LLVMStructTypeKind:
			off += int64(C.LLVMOffsetOfElement(w.td, t, C.uint(k)))
			t = C.LLVMStructGetTypeAtIndex(t, C.uint(k))
		case C.LLVMArrayTypeKind, C.LLVMVectorTypeKind:
			t = C.LLVMGetElementType(t)
			off += k * int64(C.LLVMABISizeOfType(w.td, t))
		default:
			return 0, false
		}
	}
	return off, true
}

// paramIndex is the position of argument a in its function's parameters.
func paramIndex(a C.LLVMValueRef) int {
	f := C.LLVMGetParamParent(a)
	for i := range int(C.LLVMCountParams(f)) {
		if C.LLVMGetParam(f, C.uint(i)) == a {
			return i
		}
	}
	return -1
}

// scalarType is t's text, or its element's for a vector.
func scalarType(t C.LLVMTypeRef) string {
	if k := C.LLVMGetTypeKind(t); k == C.LLVMVectorTypeKind || k == C.LLVMScalableVectorTypeKind {
		t = C.LLVMGetElementType(t)
	}
	return typeString(t)
}

func atomicOpName(op C.LLVMAtomicRMWBinOp) string {
	names := map[C.LLVMAtomicRMWBinOp]string{
		C.LLVMAtomicRMWBinOpXchg: "xchg", C.LLVMAtomicRMWBinOpAdd: "add", C.LLVMAtomicRMWBinOpSub: "sub",
		C.LLVMAtomicRMWBinOpAnd: "and", C.LLVMAtomicRMWBinOpNand: "nand", C.LLVMAtomicRMWBinOpOr: "or",
		C.LLVMAtomicRMWBinOpXor: "xor", C.LLVMAtomicRMWBinOpMax: "max", C.LLVMAtomicRMWBinOpMin: "min",
		C.LLVMAtomicRMWBinOpUMax: "umax", C.LLVMAtomicRMWBinOpUMin: "umin", C.LLVMAtomicRMWBinOpFAdd: "fadd",
		C.LLVMAtomicRMWBinOpFSub: "fsub", C.LLVMAtomicRMWBinOpFMax: "fmax", C.LLVMAtomicRMWBinOpFMin: "fmin",
	}
	if n, ok := names[op]; ok {
		return n
	}
	return fmt.Sprintf("op%d", int(op))
}
