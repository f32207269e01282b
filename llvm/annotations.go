package llvm

/*
#include <stdlib.h>
#include <llvm-c/Core.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// JITAnnotation is Proteus's __attribute__((annotate("jit", I, ...))) on a
// kernel: the 1-based indices of the arguments to fold in as constants at
// run time.
type JITAnnotation struct {
	Kernel string
	Args   []int // 1-based, as written in the source
}

// JITAnnotations reads the "jit" entries of @llvm.global.annotations: one
// per annotated kernel, in module order. An entry whose arguments are not
// integer constants is an error naming the kernel.
func (m *Module) JITAnnotations() ([]JITAnnotation, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	name := C.CString("llvm.global.annotations")
	defer C.free(unsafe.Pointer(name))
	g := C.LLVMGetNamedGlobal(m.mod, name)
	if g == nil {
		return nil, nil
	}
	init := C.LLVMGetInitializer(g)
	if init == nil {
		return nil, nil
	}
	var out []JITAnnotation
	n := int(C.LLVMGetNumOperands(init))
	for i := 0; i < n; i++ {
		entry := C.LLVMGetOperand(init, C.unsigned(i))
		if entry == nil || C.LLVMGetNumOperands(entry) < 5 {
			continue
		}
		fn := stripCasts(C.LLVMGetOperand(entry, 0))
		if fn == nil || C.LLVMIsAFunction(fn) == nil || constString(C.LLVMGetOperand(entry, 1)) != "jit" {
			continue
		}
		kernel := valueName(fn)
		a := JITAnnotation{Kernel: kernel}
		args := stripCasts(C.LLVMGetOperand(entry, 4))
		if args != nil && C.LLVMIsAGlobalVariable(args) != nil {
			if v := C.LLVMGetInitializer(args); v != nil {
				for j := 0; j < int(C.LLVMGetNumOperands(v)); j++ {
					op := C.LLVMGetOperand(v, C.unsigned(j))
					if op == nil || C.LLVMIsAConstantInt(op) == nil {
						return nil, fmt.Errorf("%s: annotate(\"jit\") on %s: argument %d is not an integer constant", m.name, kernel, j+1)
					}
					a.Args = append(a.Args, int(C.LLVMConstIntGetSExtValue(op)))
				}
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// stripCasts looks through constant casts (typed-pointer IR wraps
// annotation operands in bitcasts).
func stripCasts(v C.LLVMValueRef) C.LLVMValueRef {
	for v != nil && C.LLVMIsAConstantExpr(v) != nil && C.LLVMGetNumOperands(v) == 1 {
		v = C.LLVMGetOperand(v, 0)
	}
	return v
}

// constString is the text of a global holding a C string constant ("" if v
// is none).
func constString(v C.LLVMValueRef) string {
	v = stripCasts(v)
	if v == nil || C.LLVMIsAGlobalVariable(v) == nil {
		return ""
	}
	init := C.LLVMGetInitializer(v)
	if init == nil || C.LLVMIsAConstantDataSequential(init) == nil || C.LLVMIsConstantString(init) == 0 {
		return ""
	}
	var n C.size_t
	p := C.LLVMGetAsString(init, &n)
	s := C.GoStringN(p, C.int(n))
	for len(s) > 0 && s[len(s)-1] == 0 {
		s = s[:len(s)-1]
	}
	return s
}
