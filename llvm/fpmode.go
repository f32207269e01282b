package llvm

/*
#include <stdlib.h>
#include <llvm-c/Core.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"unsafe"
)

// FPOpFusion is how freely code generation may fuse a floating-point
// multiply and add into one fma (LLVM's TargetOptions::AllowFPOpFusion).
type FPOpFusion int

const (
	// FuseFast fuses wherever profitable; clang's -ffp-contract=fast, the
	// default for CUDA device code.
	FuseFast FPOpFusion = iota
	// FuseStandard fuses only what the IR marks (llvm.fmuladd); -ffp-contract=on.
	FuseStandard
	// FuseStrict never fuses; -ffp-contract=off.
	FuseStrict
)

// ParseFPContract maps clang's -ffp-contract values to a fusion level.
func ParseFPContract(s string) (FPOpFusion, error) {
	switch s {
	case "fast", "fast-honor-pragmas":
		return FuseFast, nil
	case "on":
		return FuseStandard, nil
	case "off":
		return FuseStrict, nil
	}
	return 0, fmt.Errorf("fp_contract %q: want fast, on or off", s)
}

func (f FPOpFusion) String() string {
	switch f {
	case FuseFast:
		return "fast"
	case FuseStandard:
		return "on"
	case FuseStrict:
		return "off"
	}
	return fmt.Sprintf("FPOpFusion(%d)", int(f))
}

// SetFPOpFusion sets how the machine fuses multiply-add in code it generates
// from now on.
func (tm *TargetMachine) SetFPOpFusion(f FPOpFusion) error {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.tm == nil {
		return errors.New("target machine was disposed of")
	}
	C.mn_set_fp_fusion(tm.tm, C.int(f))
	return nil
}

// FPContraction tells the -ffp-contract mode the module was compiled under,
// from its instructions: clang marks every floating-point operation
// `contract` under fast contraction and emits llvm.fmuladd under "on". A
// module without floating-point arithmetic reports FuseFast, which is then
// equivalent to any mode.
func (m *Module) FPContraction() FPOpFusion {
	if m.usable() != nil {
		return FuseFast
	}
	sawFP, sawFMulAdd := false, false
	for f := C.LLVMGetFirstFunction(m.mod); f != nil; f = C.LLVMGetNextFunction(f) {
		if C.LLVMIsDeclaration(f) != 0 {
			if valueName(f) == "llvm.fmuladd.f32" || valueName(f) == "llvm.fmuladd.f64" {
				sawFMulAdd = sawFMulAdd || C.LLVMGetFirstUse(f) != nil
			}
			continue
		}
		for b := C.LLVMGetFirstBasicBlock(f); b != nil; b = C.LLVMGetNextBasicBlock(b) {
			for in := C.LLVMGetFirstInstruction(b); in != nil; in = C.LLVMGetNextInstruction(in) {
				switch C.LLVMGetInstructionOpcode(in) {
				case C.LLVMFAdd, C.LLVMFSub, C.LLVMFMul:
				default:
					continue
				}
				if C.LLVMCanValueUseFastMathFlags(in) == 0 {
					continue
				}
				if C.LLVMGetFastMathFlags(in)&C.LLVMFastMathAllowContract != 0 {
					return FuseFast
				}
				sawFP = true
			}
		}
	}
	switch {
	case sawFMulAdd:
		return FuseStandard
	case sawFP:
		return FuseStrict
	}
	return FuseFast
}

var ptxFeature = regexp.MustCompile(`(?:^|,)\+ptx([0-9]+)`)

// KernelPTXVersion is the PTX ISA version (times ten) that the compiler of
// the IR chose for kernel, from the function's "target-features" attribute
// (clang writes e.g. "+ptx88,+sm_90": the newest version its CUDA supports).
// It is 0 when the IR does not say.
func (m *Module) KernelPTXVersion(kernel string) int {
	if m.usable() != nil {
		return 0
	}
	f, err := m.definedFunction(kernel)
	if err != nil {
		return 0
	}
	key := C.CString("target-features")
	defer C.free(unsafe.Pointer(key))
	attr := C.LLVMGetStringAttributeAtIndex(f, C.LLVMAttributeIndex(C.LLVMAttributeFunctionIndex&0xffffffff), key, C.uint(len("target-features")))
	if attr == nil {
		return 0
	}
	var n C.uint
	v := C.LLVMGetStringAttributeValue(attr, &n)
	// The backend applies the features in order, so the last +ptxNN wins
	// (clang without a CUDA installation writes +ptx42 before a -target-feature).
	matches := ptxFeature.FindAllStringSubmatch(C.GoStringN(v, C.int(n)), -1)
	if matches == nil {
		return 0
	}
	ver, _ := strconv.Atoi(matches[len(matches)-1][1])
	return ver
}
