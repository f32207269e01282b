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

	"github.com/mneme-gpu/mneme/geometry"
)

// geometryPipeline brings unoptimized recorded IR into SSA form (values out
// of allocas, helpers inlined, repeated register reads merged) so the
// patterns of KernelGeometry are visible, without the loop transforms of a
// full pipeline.
const geometryPipeline = "always-inline,inline,function(sroa,early-cse,instcombine)"

// harmlessDeclarations are functions without a body that cannot read the
// launch geometry. __nvvm_reflect answers compile-time questions (FTZ,
// architecture) that libdevice's math functions ask.
var harmlessDeclarations = map[string]bool{"vprintf": true, "__assertfail": true, "malloc": true, "free": true, "__nvvm_reflect": true}

// sharedAddressSpace is NVPTX's shared-memory address space.
const sharedAddressSpace = 3

// KernelGeometry reports how kernel uses its launch geometry: reads of
// blockDim/gridDim outside the global-index and grid-stride patterns, which
// threadIdx components it reads, its shared arrays and whether
// threadIdx indexes them, whether memory is indexed by the global thread
// index with no bound on it (indexBounds), and code the walk cannot see into. It works on a
// copy; the module is unchanged. geometry.Decide turns the facts into a
// decision.
func (m *Module) KernelGeometry(kernel string) (geometry.Facts, error) {
	var facts geometry.Facts
	work, err := m.ExtractKernel(kernel)
	if err != nil {
		return facts, err
	}
	defer work.Dispose()
	if err := work.RunPasses(geometryPipeline, nil); err != nil {
		return facts, fmt.Errorf("%s: preparing %s for the geometry analysis: %w", m.label(), kernel, err)
	}
	regs := map[string]sreg{}
	for d := range 3 {
		regs[blockDimIntrinsics[d]] = sreg{kind: sregBlockDim, dim: d}
		regs[gridDimIntrinsics[d]] = sreg{kind: sregGridDim, dim: d}
		regs[threadIdIntrinsics[d]] = sreg{kind: sregThreadID, dim: d}
		regs[blockIdIntrinsics[d]] = sreg{kind: sregBlockID, dim: d}
	}
	g := &geometryWalk{regs: regs, tainted: map[C.LLVMValueRef]bool{}}
	opaque := map[string]bool{}
	var dimReads, tidReads []C.LLVMValueRef
	for _, fn := range work.functions() {
		if !isDefinition(fn) {
			continue
		}
		forEachInstruction(fn, func(inst C.LLVMValueRef) {
			if C.LLVMIsACallInst(inst) == nil {
				return
			}
			callee := C.LLVMGetCalledValue(inst)
			switch {
			case callee != nil && C.LLVMIsAInlineAsm(callee) != nil:
				opaque["inline assembly"] = true
			case callee == nil || C.LLVMIsAFunction(callee) == nil:
				opaque["an indirect call"] = true
			default:
				name := valueName(callee)
				r, ok := regs[name]
				switch {
				case ok && (r.kind == sregBlockDim || r.kind == sregGridDim):
					dimReads = append(dimReads, inst)
				case ok && r.kind == sregThreadID:
					facts.ThreadIDDims[r.dim] = true
					tidReads = append(tidReads, inst)
				case ok, isLLVMName(name), isDefinition(callee), harmlessDeclarations[name]:
				default:
					opaque["a call of "+name] = true
				}
			}
		})
	}
	uses := map[string]bool{}
	for _, read := range dimReads {
		for _, u := range g.nonCanonicalUses(read) {
			uses[u] = true
		}
	}
	facts.NonCanonicalDimUses = sortedKeys(uses)
	facts.Opaque = sortedKeys(opaque)
	var defined []C.LLVMValueRef
	for _, fn := range work.functions() {
		if isDefinition(fn) {
			defined = append(defined, fn)
		}
	}
	facts.GlobalIndexAccess, facts.IndexBounded = indexBounds(defined, regs)
	for _, t := range tidReads {
		g.taint(t)
	}
	td := work.targetData()
	defer C.LLVMDisposeTargetData(td)
	for v := C.LLVMGetFirstGlobal(work.mod); v != nil; v = C.LLVMGetNextGlobal(v) {
		if C.LLVMGetPointerAddressSpace(C.LLVMTypeOf(v)) != sharedAddressSpace {
			continue
		}
		// An extern __shared__ array is sized at launch, by the recorded
		// shared-memory size, which tuning keeps: it is as tied to the
		// block as a static one.
		dynamic := C.LLVMIsDeclaration(v) != 0
		bytes := uint64(0)
		if !dynamic {
			bytes = uint64(C.LLVMABISizeOfType(td, C.LLVMGlobalGetValueType(v)))
		}
		facts.SharedArrays = append(facts.SharedArrays, geometry.SharedArray{
			Name: valueName(v), Bytes: bytes, Dynamic: dynamic, IndexedByThreadID: g.addressTainted(v, map[C.LLVMValueRef]bool{}),
		})
	}
	facts.MaxThreads = m.LaunchBound(kernel)
	return facts, nil
}

type sregKind int

const (
	sregBlockDim sregKind = iota
	sregGridDim
	sregThreadID
	sregBlockID
)

// sreg is one special-register read intrinsic: what it reads, in which dimension.
type sreg struct {
	kind sregKind
	dim  int
}

var dimLetters = [3]string{"x", "y", "z"}

func (r sreg) String() string {
	return [...]string{"ntid", "nctaid", "tid", "ctaid"}[r.kind] + "." + dimLetters[r.dim]
}

// geometryWalk holds the state of one KernelGeometry analysis.
type geometryWalk struct {
	regs    map[string]sreg
	tainted map[C.LLVMValueRef]bool // values computed from threadIdx
}

// regOf tells which special register v reads, looking through integer casts.
func (g *geometryWalk) regOf(v C.LLVMValueRef) (sreg, bool) {
	v = stripIntCasts(v)
	if C.LLVMIsACallInst(v) == nil {
		return sreg{}, false
	}
	callee := C.LLVMGetCalledValue(v)
	if callee == nil || C.LLVMIsAFunction(callee) == nil {
		return sreg{}, false
	}
	r, ok := g.regs[valueName(callee)]
	return r, ok
}

func stripIntCasts(v C.LLVMValueRef) C.LLVMValueRef {
	for C.LLVMIsAZExtInst(v) != nil || C.LLVMIsASExtInst(v) != nil || C.LLVMIsATruncInst(v) != nil {
		v = C.LLVMGetOperand(v, 0)
	}
	return v
}

// nonCanonicalUses describes the uses of a blockDim or gridDim read other
// than blockIdx*blockDim (global index) and blockDim*gridDim (grid stride),
// looking through integer casts.
func (g *geometryWalk) nonCanonicalUses(read C.LLVMValueRef) []string {
	self, _ := g.regOf(read)
	var out []string
	var visit func(v C.LLVMValueRef)
	visit = func(v C.LLVMValueRef) {
		for use := C.LLVMGetFirstUse(v); use != nil; use = C.LLVMGetNextUse(use) {
			user := C.LLVMGetUser(use)
			if C.LLVMIsAZExtInst(user) != nil || C.LLVMIsASExtInst(user) != nil || C.LLVMIsATruncInst(user) != nil {
				visit(user)
				continue
			}
			if C.LLVMIsAInstruction(user) != nil && C.LLVMGetInstructionOpcode(user) == C.LLVMMul && C.LLVMGetNumOperands(user) == 2 {
				other := C.LLVMGetOperand(user, 0)
				if stripIntCasts(other) == stripIntCasts(v) {
					other = C.LLVMGetOperand(user, 1)
				}
				if o, ok := g.regOf(other); ok && o.dim == self.dim && canonicalPair(self.kind, o.kind) {
					continue
				}
			}
			out = append(out, self.String()+" in "+opcodeName(user))
		}
	}
	visit(read)
	return out
}

// canonicalPair reports whether a product of the two registers (of one
// dimension) is a global index or a grid stride.
func canonicalPair(a, b sregKind) bool {
	pair := func(x, y sregKind) bool { return (a == x && b == y) || (a == y && b == x) }
	return pair(sregBlockDim, sregBlockID) || pair(sregBlockDim, sregGridDim)
}

// opcodeName names the instruction for a message ("udiv", "icmp", "store").
func opcodeName(v C.LLVMValueRef) string {
	if C.LLVMIsAInstruction(v) == nil {
		return "a constant expression"
	}
	text := strings.TrimSpace(takeLLVMMessage(C.LLVMPrintValueToString(v)))
	if i := strings.Index(text, " = "); i >= 0 {
		text = text[i+3:]
	}
	if f := strings.Fields(text); len(f) > 0 {
		return f[0]
	}
	return "an instruction"
}

// taint marks v and every instruction computed from it, transitively.
func (g *geometryWalk) taint(v C.LLVMValueRef) {
	if g.tainted[v] {
		return
	}
	g.tainted[v] = true
	for use := C.LLVMGetFirstUse(v); use != nil; use = C.LLVMGetNextUse(use) {
		user := C.LLVMGetUser(use)
		if C.LLVMIsAInstruction(user) != nil && C.LLVMIsAStoreInst(user) == nil {
			g.taint(user)
		}
	}
}

// addressTainted reports whether an address derived from v (through
// constant expressions, GEPs, casts, phis and selects) has an operand
// computed from threadIdx.
func (g *geometryWalk) addressTainted(v C.LLVMValueRef, seen map[C.LLVMValueRef]bool) bool {
	if seen[v] {
		return false
	}
	seen[v] = true
	for use := C.LLVMGetFirstUse(v); use != nil; use = C.LLVMGetNextUse(use) {
		user := C.LLVMGetUser(use)
		isExpr := C.LLVMIsAConstantExpr(user) != nil
		isAddr := C.LLVMIsAGetElementPtrInst(user) != nil || C.LLVMIsACastInst(user) != nil ||
			C.LLVMIsAPHINode(user) != nil || C.LLVMIsASelectInst(user) != nil
		if !isExpr && !isAddr {
			continue
		}
		if isAddr {
			for i := range int(C.LLVMGetNumOperands(user)) {
				if g.tainted[C.LLVMGetOperand(user, C.uint(i))] {
					return true
				}
			}
		}
		if g.addressTainted(user, seen) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
