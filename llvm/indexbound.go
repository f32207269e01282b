package llvm

/*
#include <llvm-c/Core.h>
*/
import "C"

import "strings"

// Taint bits of the index-bound analysis: a value computed from threadIdx,
// from blockIdx, or from both (a global thread index).
const (
	fromThreadID = 1 << iota
	fromBlockID
	fromGlobalIndex = fromThreadID | fromBlockID
)

// indexBounds finds whether the kernel's code (fns, already in SSA form)
// reads or writes memory outside shared memory at an address computed from
// its global thread index (blockIdx and threadIdx together), and whether it
// ever bounds that index from above: an ordered comparison of an index value
// with a value not computed from threadIdx (i < n, a grid-stride loop's
// test, y >= ny - 1), or a clamp (min(i, n - 1)). A remainder or mask of
// the index (x = i % nx) is no index here: it cannot run past its divisor,
// and a bound on it leaves the rest of the index free. A kernel that indexes
// memory by its global index and never bounds it assumes that every thread
// of the launch has its element: the launch must cover exactly the threads
// it was written for, so a block that does not divide them makes the last
// block run past the data.
//
// Comparisons with the constants -1, 0 and 1 are lower-bound and parity
// tests (x > 0, x == 0 written as x < 1), not upper bounds; equality tests
// bound nothing. The facts are per kernel, not per access: one bound
// anywhere counts as guarding all accesses, so the analysis can miss an
// access left unguarded beside a guarded one (the probe replay and the
// adaptive ban remain for those).
func indexBounds(fns []C.LLVMValueRef, regs map[string]sreg) (access, bounded bool) {
	taint := map[C.LLVMValueRef]int{}
	var mark func(v C.LLVMValueRef, bit int)
	mark = func(v C.LLVMValueRef, bit int) {
		if taint[v]&bit != 0 {
			return
		}
		taint[v] |= bit
		for use := C.LLVMGetFirstUse(v); use != nil; use = C.LLVMGetNextUse(use) {
			if user := C.LLVMGetUser(use); carriesIndex(user) {
				mark(user, bit)
			}
		}
	}
	for _, fn := range fns {
		forEachInstruction(fn, func(inst C.LLVMValueRef) {
			if r, ok := calledSreg(inst, regs); ok {
				switch r.kind {
				case sregThreadID:
					mark(inst, fromThreadID)
				case sregBlockID:
					mark(inst, fromBlockID)
				}
			}
		})
	}
	// isIndex: v grows with the global index. A remainder or a mask of it
	// (x = i % nx) stays within its divisor whatever the launch: an address
	// made of it alone needs no guard, and bounding it bounds nothing else
	// (the row i / nx still runs past the data).
	unwrapped := map[C.LLVMValueRef]bool{}
	visiting := map[C.LLVMValueRef]bool{}
	var isIndex func(v C.LLVMValueRef) bool
	isIndex = func(v C.LLVMValueRef) bool {
		if taint[v]&fromGlobalIndex != fromGlobalIndex {
			return false
		}
		if u, ok := unwrapped[v]; ok {
			return u
		}
		if visiting[v] {
			return false // a loop: the answer comes from the way in
		}
		visiting[v] = true
		defer delete(visiting, v)
		u := false
		switch {
		case wrapsIndex(v):
		case C.LLVMIsAInstruction(v) == nil:
			u = true
		default:
			formed := true // the index is formed here: no operand has both parts
			for i := range int(C.LLVMGetNumOperands(v)) {
				op := C.LLVMGetOperand(v, C.uint(i))
				if taint[op]&fromGlobalIndex == fromGlobalIndex {
					formed = false
					if isIndex(op) {
						u = true
						break
					}
				}
			}
			u = u || formed
		}
		unwrapped[v] = u
		return u
	}
	isBound := func(v C.LLVMValueRef) bool {
		if taint[v]&fromThreadID != 0 {
			return false
		}
		if C.LLVMIsAConstantInt(v) != nil {
			k := int64(C.LLVMConstIntGetSExtValue(v))
			return k > 1 || k < -1
		}
		return true
	}
	for _, fn := range fns {
		forEachInstruction(fn, func(inst C.LLVMValueRef) {
			if p := accessedPointer(inst); p != nil && isIndex(p) &&
				C.LLVMGetPointerAddressSpace(C.LLVMTypeOf(p)) != sharedAddressSpace {
				access = true
			}
			if C.LLVMIsAICmpInst(inst) != nil {
				switch C.LLVMGetICmpPredicate(inst) {
				case C.LLVMIntEQ, C.LLVMIntNE:
				default:
					a, b := C.LLVMGetOperand(inst, 0), C.LLVMGetOperand(inst, 1)
					if (isIndex(a) && isBound(b)) || (isIndex(b) && isBound(a)) {
						bounded = true
					}
				}
			}
			if isClamp(inst) {
				a, b := C.LLVMGetOperand(inst, 0), C.LLVMGetOperand(inst, 1)
				if (isIndex(a) && isBound(b)) || (isIndex(b) && isBound(a)) {
					bounded = true
				}
			}
		})
	}
	return access, bounded
}

// wrapsIndex reports whether v is a remainder or a bit mask, which keeps an
// index within a bound of its own.
func wrapsIndex(v C.LLVMValueRef) bool {
	if C.LLVMIsAInstruction(v) == nil {
		return false
	}
	switch C.LLVMGetInstructionOpcode(v) {
	case C.LLVMURem, C.LLVMSRem, C.LLVMAnd:
		return true
	}
	return false
}

// calledSreg tells which special register inst reads, if it is such a call.
func calledSreg(inst C.LLVMValueRef, regs map[string]sreg) (sreg, bool) {
	if C.LLVMIsACallInst(inst) == nil {
		return sreg{}, false
	}
	callee := C.LLVMGetCalledValue(inst)
	if callee == nil || C.LLVMIsAFunction(callee) == nil {
		return sreg{}, false
	}
	r, ok := regs[valueName(callee)]
	return r, ok
}

// carriesIndex reports whether user computes a value from its operands that
// an index flows on in: arithmetic, casts, address computations, phis,
// selects, comparisons and LLVM's integer intrinsics — not loads (the value
// loaded is data, not an index), stores or calls of other functions.
func carriesIndex(user C.LLVMValueRef) bool {
	if C.LLVMIsAInstruction(user) == nil {
		return false
	}
	switch {
	case C.LLVMIsALoadInst(user) != nil, C.LLVMIsAStoreInst(user) != nil,
		C.LLVMIsAAtomicRMWInst(user) != nil, C.LLVMIsAAtomicCmpXchgInst(user) != nil,
		C.LLVMIsAAllocaInst(user) != nil:
		return false
	case C.LLVMIsACallInst(user) != nil:
		callee := C.LLVMGetCalledValue(user)
		return callee != nil && C.LLVMIsAFunction(callee) != nil && isIntIntrinsic(valueName(callee))
	}
	return true
}

// isIntIntrinsic names LLVM's integer intrinsics an index passes through.
func isIntIntrinsic(name string) bool {
	for _, p := range []string{"llvm.smin.", "llvm.umin.", "llvm.smax.", "llvm.umax.", "llvm.abs."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// isClamp reports whether inst is a call of llvm.smin or llvm.umin (what
// instcombine makes of i < n ? i : n - 1).
func isClamp(inst C.LLVMValueRef) bool {
	if C.LLVMIsACallInst(inst) == nil {
		return false
	}
	callee := C.LLVMGetCalledValue(inst)
	if callee == nil || C.LLVMIsAFunction(callee) == nil {
		return false
	}
	name := valueName(callee)
	return strings.HasPrefix(name, "llvm.smin.") || strings.HasPrefix(name, "llvm.umin.")
}

// accessedPointer is the address a load, store or atomic instruction
// accesses, or nil for any other instruction.
func accessedPointer(inst C.LLVMValueRef) C.LLVMValueRef {
	switch {
	case C.LLVMIsALoadInst(inst) != nil, C.LLVMIsAAtomicRMWInst(inst) != nil, C.LLVMIsAAtomicCmpXchgInst(inst) != nil:
		return C.LLVMGetOperand(inst, 0)
	case C.LLVMIsAStoreInst(inst) != nil:
		return C.LLVMGetOperand(inst, 1)
	}
	return nil
}
