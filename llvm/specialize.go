package llvm

/*
#include <stdlib.h>
#include <llvm-c/Core.h>
#include "shim.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/mneme-gpu/mneme"
)

// SpecializeArg replaces every use of argument index of kernel with a
// constant built from value, the argument's recorded little-endian bytes:
// integers of any width, half, bfloat, float and double, and pointers, which
// become `inttoptr (i64 V to ptr addrspace(N))`. The kernel's signature is
// unchanged, so it is launched with the same arguments. Aggregates and byval
// arguments are refused, as is a value whose length does not match the type.
func (m *Module) SpecializeArg(kernel string, index int, value []byte) error {
	f, err := m.definedFunction(kernel)
	if err != nil {
		return err
	}
	params, err := m.KernelParams(kernel)
	if err != nil {
		return err
	}
	if index < 0 || index >= len(params) {
		return fmt.Errorf("%s: %s has %d arguments, there is no argument %d", m.name, kernel, len(params), index)
	}
	p := params[index]
	if p.ByVal || p.Kind == ParamOther {
		kind := "an aggregate"
		if p.ByVal {
			kind = "passed byval"
		}
		return fmt.Errorf("%s: argument %d of %s (%s) is %s: only scalar arguments can be specialized", m.name, index, kernel, p.Type, kind)
	}
	if len(value) != p.Bytes() {
		return fmt.Errorf("%s: argument %d of %s (%s): value has %d bytes, the type needs %d", m.name, index, kernel, p.Type, len(value), p.Bytes())
	}
	arg := C.LLVMGetParam(f, C.uint(index))
	t := C.LLVMTypeOf(arg)
	var constant C.LLVMValueRef
	switch p.Kind {
	case ParamInt:
		constant = m.intConstant(t, p.Bits, value)
	case ParamFloat, ParamDouble, ParamHalf, ParamBFloat:
		// Reinterpreting the integer bits keeps every value exact, NaN
		// payloads included; LLVM folds the bitcast to a ConstantFP.
		bits := C.LLVMIntTypeInContext(m.ctx, C.uint(p.Bits))
		constant = C.LLVMConstBitCast(m.intConstant(bits, p.Bits, value), t)
	case ParamPointer:
		addr := C.LLVMIntTypeInContext(m.ctx, C.uint(p.Bits))
		constant = C.LLVMConstIntToPtr(m.intConstant(addr, p.Bits, value), t)
	}
	C.LLVMReplaceAllUsesWith(arg, constant)
	return nil
}

// intConstant builds an integer constant of type t (width bits) from
// little-endian bytes, masking bits beyond the width.
func (m *Module) intConstant(t C.LLVMTypeRef, bits int, value []byte) C.LLVMValueRef {
	nwords := (bits + 63) / 64
	words := make([]C.uint64_t, nwords)
	padded := make([]byte, nwords*8)
	copy(padded, value)
	for i := range words {
		words[i] = C.uint64_t(binary.LittleEndian.Uint64(padded[i*8:]))
	}
	if rem := bits % 64; rem != 0 {
		words[nwords-1] &= C.uint64_t(uint64(1)<<rem - 1)
	}
	return C.LLVMConstIntOfArbitraryPrecision(t, C.uint(nwords), &words[0])
}

// Special-register intrinsics that SpecializeDims rewrites.
var (
	blockDimIntrinsics = [3]string{"llvm.nvvm.read.ptx.sreg.ntid.x", "llvm.nvvm.read.ptx.sreg.ntid.y", "llvm.nvvm.read.ptx.sreg.ntid.z"}
	gridDimIntrinsics  = [3]string{"llvm.nvvm.read.ptx.sreg.nctaid.x", "llvm.nvvm.read.ptx.sreg.nctaid.y", "llvm.nvvm.read.ptx.sreg.nctaid.z"}
	threadIdIntrinsics = [3]string{"llvm.nvvm.read.ptx.sreg.tid.x", "llvm.nvvm.read.ptx.sreg.tid.y", "llvm.nvvm.read.ptx.sreg.tid.z"}
	blockIdIntrinsics  = [3]string{"llvm.nvvm.read.ptx.sreg.ctaid.x", "llvm.nvvm.read.ptx.sreg.ctaid.y", "llvm.nvvm.read.ptx.sreg.ctaid.z"}
)

// dimRewrite is what happens to one special-register read.
type dimRewrite struct {
	constant bool   // replace the call by value
	value    uint32 // the constant, or the exclusive upper bound of the range
}

// SpecializeDims fixes the launch geometry in the code of kernel and of every
// function reachable from it: calls to llvm.nvvm.read.ptx.sreg.ntid.{x,y,z}
// and nctaid.{x,y,z} become the constants of block and grid, and calls to
// tid.{x,y,z} and ctaid.{x,y,z} get the return range [0, block.d) and
// [0, grid.d).
//
// A function reachable from this kernel and also from another kernel of the
// module is not changed in place, since the other kernel may run with other
// dimensions: it is cloned (internal linkage, name suffix ".dims"), and the
// calls and references inside this kernel's code are pointed at the clone.
// References held by global variables keep the original, which stays correct,
// only unspecialized. After ExtractKernel no function is shared and nothing
// is cloned.
func (m *Module) SpecializeDims(kernel string, block, grid mneme.Dim3) error {
	f, err := m.definedFunction(kernel)
	if err != nil {
		return err
	}
	for _, d := range []struct {
		what string
		dim  mneme.Dim3
	}{{mneme.KeyBlock, block}, {mneme.KeyGrid, grid}} {
		if d.dim.X == 0 || d.dim.Y == 0 || d.dim.Z == 0 {
			return fmt.Errorf("%s: specializing %s: %s dimensions %s: every dimension must be at least 1", m.name, kernel, d.what, d.dim)
		}
	}
	targets := m.ownCode(f)

	rewrites := map[string]dimRewrite{}
	blockD := [3]uint32{block.X, block.Y, block.Z}
	gridD := [3]uint32{grid.X, grid.Y, grid.Z}
	for i := range 3 {
		rewrites[blockDimIntrinsics[i]] = dimRewrite{constant: true, value: blockD[i]}
		rewrites[gridDimIntrinsics[i]] = dimRewrite{constant: true, value: gridD[i]}
		rewrites[threadIdIntrinsics[i]] = dimRewrite{value: blockD[i]}
		rewrites[blockIdIntrinsics[i]] = dimRewrite{value: gridD[i]}
	}
	rangeKind := attributeKind("range")
	type site struct {
		call C.LLVMValueRef
		rw   dimRewrite
	}
	var sites []site
	for _, fn := range targets {
		forEachInstruction(fn, func(inst C.LLVMValueRef) {
			if C.LLVMIsACallInst(inst) == nil {
				return
			}
			callee := C.LLVMGetCalledValue(inst)
			if callee == nil || C.LLVMIsAFunction(callee) == nil {
				return
			}
			if rw, ok := rewrites[valueName(callee)]; ok {
				sites = append(sites, site{inst, rw})
			}
		})
	}
	for _, s := range sites {
		t := C.LLVMTypeOf(s.call)
		if s.rw.constant {
			C.LLVMReplaceAllUsesWith(s.call, C.LLVMConstInt(t, C.ulonglong(s.rw.value), 0))
			C.LLVMInstructionEraseFromParent(s.call)
			continue
		}
		width := C.LLVMGetIntTypeWidth(t)
		lower := [1]C.uint64_t{0}
		upper := [1]C.uint64_t{C.uint64_t(s.rw.value)}
		attr := C.LLVMCreateConstantRangeAttribute(m.ctx, rangeKind, width, &lower[0], &upper[0])
		C.LLVMAddCallSiteAttribute(s.call, C.LLVMAttributeReturnIndex, attr)
	}
	return nil
}

// forEachInstruction calls visit for every instruction of function fn.
func forEachInstruction(fn C.LLVMValueRef, visit func(C.LLVMValueRef)) {
	for bb := C.LLVMGetFirstBasicBlock(fn); bb != nil; bb = C.LLVMGetNextBasicBlock(bb) {
		for inst := C.LLVMGetFirstInstruction(bb); inst != nil; inst = C.LLVMGetNextInstruction(inst) {
			visit(inst)
		}
	}
}

// ownCode returns kernel f and the defined functions reachable from it, with
// every function that another kernel also reaches replaced by a private
// clone that only f's code calls (see SpecializeDims).
func (m *Module) ownCode(f C.LLVMValueRef) []C.LLVMValueRef {
	mine := reach(f)
	var others []C.LLVMValueRef
	for _, k := range m.kernelValues() {
		if k != f {
			others = append(others, k)
		}
	}
	shared := map[C.LLVMValueRef]bool{}
	if len(others) > 0 {
		for g := range reach(others...) {
			if mine[g] && g != f && C.LLVMIsAFunction(g) != nil && isDefinition(g) {
				shared[g] = true
			}
		}
	}
	// Walk in module order so that the output does not depend on map order.
	targets := []C.LLVMValueRef{f}
	var sharedInOrder []C.LLVMValueRef
	for _, g := range m.functions() {
		switch {
		case g == f || !mine[g] || !isDefinition(g):
		case shared[g]:
			sharedInOrder = append(sharedInOrder, g)
		default:
			targets = append(targets, g)
		}
	}
	if len(sharedInOrder) == 0 {
		return targets
	}
	clones := map[C.LLVMValueRef]C.LLVMValueRef{}
	for _, g := range sharedInOrder {
		name := C.CString(valueName(g) + ".dims")
		clone := C.mn_clone_function(g, name)
		C.free(unsafe.Pointer(name))
		clones[g] = clone
		targets = append(targets, clone)
	}
	// Point direct operands (callees, function pointers) of this kernel's
	// code at the clones. Clones start as exact copies, so they are
	// redirected too.
	for _, fn := range targets {
		forEachInstruction(fn, func(inst C.LLVMValueRef) {
			n := int(C.LLVMGetNumOperands(inst))
			for i := range n {
				if c, ok := clones[C.LLVMGetOperand(inst, C.uint(i))]; ok {
					C.LLVMSetOperand(inst, C.uint(i), c)
				}
			}
		})
	}
	return targets
}

// Function string attributes through which LLVM 22's NVPTX backend reads
// launch bounds (clang-22 emits them for __launch_bounds__(MAX, MIN)); they
// print as .maxntid and .minnctapersm in the PTX.
const (
	maxThreadsAttribute     = "nvvm.maxntid"
	minBlocksPerSMAttribute = "nvvm.minctasm"
)

// SetLaunchBounds sets kernel's launch bounds: at most maxThreads threads per
// block and, when minBlocksPerSM > 0, at least that many resident blocks per
// multiprocessor. Existing bounds are replaced; minBlocksPerSM 0 removes that
// bound.
func (m *Module) SetLaunchBounds(kernel string, maxThreads, minBlocksPerSM int) error {
	f, err := m.definedFunction(kernel)
	if err != nil {
		return err
	}
	if maxThreads < 1 {
		return fmt.Errorf("%s: launch bounds of %s: max threads per block must be at least 1, got %d", m.name, kernel, maxThreads)
	}
	if minBlocksPerSM < 0 {
		return fmt.Errorf("%s: launch bounds of %s: min blocks per SM must not be negative, got %d", m.name, kernel, minBlocksPerSM)
	}
	m.setFunctionAttribute(f, maxThreadsAttribute, strconv.Itoa(maxThreads))
	if minBlocksPerSM > 0 {
		m.setFunctionAttribute(f, minBlocksPerSMAttribute, strconv.Itoa(minBlocksPerSM))
	} else {
		removeFunctionAttribute(f, minBlocksPerSMAttribute)
	}
	return nil
}

// LaunchBound is kernel's own maximum threads per block, from its
// nvvm.maxntid attribute ("128", or per dimension "32,4,1", whose product
// counts); 0 when it has none, or the value does not read as positive
// numbers.
func (m *Module) LaunchBound(kernel string) int {
	f, err := m.definedFunction(kernel)
	if err != nil {
		return 0
	}
	ckey := C.CString(maxThreadsAttribute)
	defer C.free(unsafe.Pointer(ckey))
	attr := C.LLVMGetStringAttributeAtIndex(f, functionIndex, ckey, C.uint(len(maxThreadsAttribute)))
	if attr == nil {
		return 0
	}
	var n C.uint
	v := C.LLVMGetStringAttributeValue(attr, &n)
	return parseLaunchBound(C.GoStringN(v, C.int(n)))
}

// parseLaunchBound reads an nvvm.maxntid value: the product of its
// comma-separated dimensions, each a positive integer; 0 when it is not
// that or exceeds CUDA's 1024 threads per block many times over.
func parseLaunchBound(v string) int {
	total := 1
	for _, d := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(d))
		if err != nil || n < 1 || n > 1<<16 {
			return 0
		}
		total *= n
		if total > 1<<16 {
			return 0
		}
	}
	return total
}

// setFunctionAttribute sets the string attribute key=value on f, replacing
// any earlier value.
func (m *Module) setFunctionAttribute(f C.LLVMValueRef, key, value string) {
	removeFunctionAttribute(f, key)
	ckey, cvalue := C.CString(key), C.CString(value)
	defer C.free(unsafe.Pointer(ckey))
	defer C.free(unsafe.Pointer(cvalue))
	attr := C.LLVMCreateStringAttribute(m.ctx, ckey, C.uint(len(key)), cvalue, C.uint(len(value)))
	C.LLVMAddAttributeAtIndex(f, functionIndex, attr)
}

func removeFunctionAttribute(f C.LLVMValueRef, key string) {
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	C.LLVMRemoveStringAttributeAtIndex(f, functionIndex, ckey, C.uint(len(key)))
}

// functionIndex is LLVMAttributeFunctionIndex (~0U), which cgo sees as the
// untyped constant -1.
const functionIndex = C.LLVMAttributeIndex(^uint32(0))

// FuseFoldedMultiplyAdds prepares kernel for folding the float arguments
// numbered in folded after optimization: each add or subtract that code
// generation under fusion would fuse with a multiply of values that become
// constants is made an explicit fma now. Folding a multiply into a constant
// would otherwise round its product before the add, where the application's
// code rounds once: results one unit in the last place apart, which
// cancellation can turn into large relative errors. It returns the number
// of adds rewritten.
func (m *Module) FuseFoldedMultiplyAdds(kernel string, folded []int, fusion FPOpFusion) (int, error) {
	f, err := m.definedFunction(kernel)
	if err != nil {
		return 0, err
	}
	if len(folded) == 0 {
		return 0, nil
	}
	indices := make([]C.uint, len(folded))
	for i, a := range folded {
		if a < 0 {
			return 0, fmt.Errorf("%s: argument index %d is negative", m.name, a)
		}
		indices[i] = C.uint(a)
	}
	global := C.int(0)
	if fusion == FuseFast {
		global = 1
	}
	n := C.mn_fuse_folded_multiply_adds(f, &indices[0], C.size_t(len(indices)), global)
	return int(n), nil
}
