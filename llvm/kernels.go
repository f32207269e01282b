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
	"unsafe"
)

// ptxKernelCallConv is LLVM's CallingConv::PTX_Kernel, which clang-22 puts
// on every __global__ function.
const ptxKernelCallConv = 71

// label names the module in error messages, even a nil one.
func (m *Module) label() string {
	if m == nil {
		return "module"
	}
	return m.name
}

// valueName is the name of an LLVM value ("" for an unnamed one).
func valueName(v C.LLVMValueRef) string {
	var n C.size_t
	p := C.LLVMGetValueName2(v, &n)
	return C.GoStringN(p, C.int(n))
}

// typeString prints an LLVM type as IR text.
func typeString(t C.LLVMTypeRef) string {
	return takeLLVMMessage(C.LLVMPrintTypeToString(t))
}

// functions lists the module's functions, declarations included.
func (m *Module) functions() []C.LLVMValueRef {
	var out []C.LLVMValueRef
	for f := C.LLVMGetFirstFunction(m.mod); f != nil; f = C.LLVMGetNextFunction(f) {
		out = append(out, f)
	}
	return out
}

// globals lists the module's global variables, aliases and ifuncs.
func (m *Module) globalValues() []C.LLVMValueRef {
	var out []C.LLVMValueRef
	for g := C.LLVMGetFirstGlobal(m.mod); g != nil; g = C.LLVMGetNextGlobal(g) {
		out = append(out, g)
	}
	for a := C.LLVMGetFirstGlobalAlias(m.mod); a != nil; a = C.LLVMGetNextGlobalAlias(a) {
		out = append(out, a)
	}
	for i := C.LLVMGetFirstGlobalIFunc(m.mod); i != nil; i = C.LLVMGetNextGlobalIFunc(i) {
		out = append(out, i)
	}
	return out
}

func isDefinition(f C.LLVMValueRef) bool { return C.LLVMIsDeclaration(f) == 0 }

// kernelValues lists the kernels: defined functions with the ptx_kernel
// calling convention, then those only marked by legacy !nvvm.annotations.
func (m *Module) kernelValues() []C.LLVMValueRef {
	var out []C.LLVMValueRef
	seen := map[C.LLVMValueRef]bool{}
	for _, f := range m.functions() {
		if isDefinition(f) && C.LLVMGetFunctionCallConv(f) == ptxKernelCallConv {
			out = append(out, f)
			seen[f] = true
		}
	}
	n := C.mn_annotated_kernels(m.mod, nil, 0)
	if n > 0 {
		annotated := make([]C.LLVMValueRef, n)
		C.mn_annotated_kernels(m.mod, &annotated[0], n)
		for _, f := range annotated {
			if !seen[f] {
				out = append(out, f)
				seen[f] = true
			}
		}
	}
	return out
}

// Kernels lists the (mangled) names of the module's kernels in module order:
// defined functions with the ptx_kernel calling convention, and functions
// marked "kernel" in legacy !nvvm.annotations.
func (m *Module) Kernels() []string {
	if m.usable() != nil {
		return nil
	}
	var names []string
	for _, f := range m.kernelValues() {
		names = append(names, valueName(f))
	}
	return names
}

// Globals lists the names of the global variables the module defines, except
// LLVM's own (llvm.used and the like). These are the __device__ and
// __constant__ variables a replay may need to find by name.
func (m *Module) Globals() []string {
	if m.usable() != nil {
		return nil
	}
	var names []string
	for g := C.LLVMGetFirstGlobal(m.mod); g != nil; g = C.LLVMGetNextGlobal(g) {
		name := valueName(g)
		if isDefinition(g) && !isLLVMName(name) {
			names = append(names, name)
		}
	}
	return names
}

// GlobalVar is a global variable a module defines: its NVPTX address space
// (1 global, 3 shared, 4 constant) and whether LLVM knows it read-only.
type GlobalVar struct {
	Name         string
	AddressSpace int
	ReadOnly     bool
}

// GlobalVars lists the global variables the module defines, except LLVM's
// own, with their address spaces: deployment must know which of them the
// host also sees (__device__ and __constant__ variables).
func (m *Module) GlobalVars() []GlobalVar {
	if m.usable() != nil {
		return nil
	}
	var out []GlobalVar
	for g := C.LLVMGetFirstGlobal(m.mod); g != nil; g = C.LLVMGetNextGlobal(g) {
		name := valueName(g)
		if isDefinition(g) && !isLLVMName(name) {
			out = append(out, GlobalVar{Name: name, AddressSpace: int(C.LLVMGetPointerAddressSpace(C.LLVMTypeOf(g))),
				ReadOnly: C.LLVMIsGlobalConstant(g) != 0})
		}
	}
	return out
}

// definedFunction finds the function named name that has a body.
func (m *Module) definedFunction(name string) (C.LLVMValueRef, error) {
	if err := m.usable(); err != nil {
		return nil, fmt.Errorf("%s: %w", m.label(), err)
	}
	// With its length: a name read from arbitrary bitcode may hold NUL
	// bytes, which would cut a C string short.
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	f := C.LLVMGetNamedFunctionWithLength(m.mod, cname, C.size_t(len(name)))
	if f == nil {
		return nil, fmt.Errorf("%s: no function named %q (kernels: %v)", m.name, name, m.Kernels())
	}
	if !isDefinition(f) {
		return nil, fmt.Errorf("%s: function %q is only declared, not defined", m.name, name)
	}
	return f, nil
}

// ParamKind classifies a kernel parameter by how its recorded bytes are read.
type ParamKind int

// Parameter kinds. ParamOther covers aggregates (structs, arrays, vectors)
// and byval parameters: their bytes cannot become a scalar constant.
const (
	ParamOther ParamKind = iota
	ParamInt
	ParamFloat  // f32
	ParamDouble // f64
	ParamHalf   // f16
	ParamBFloat // bf16
	ParamPointer
)

func (k ParamKind) String() string {
	switch k {
	case ParamInt:
		return "int"
	case ParamFloat:
		return "float"
	case ParamDouble:
		return "double"
	case ParamHalf:
		return "half"
	case ParamBFloat:
		return "bfloat"
	case ParamPointer:
		return "pointer"
	}
	return "other"
}

// Param describes one kernel parameter.
type Param struct {
	Name  string    // IR name; often empty, clang drops value names
	Kind  ParamKind //
	Bits  int       // width of the value: integer width, 16/32/64 for floats, pointer size, byval/aggregate size
	ByVal bool      // passed byval (a struct by value): Type is the pointee type
	Type  string    // IR type text: "i32", "ptr addrspace(1)", "%struct.Pair" (byval), ...
	// AddrSpace is the address space of a pointer parameter.
	AddrSpace int
}

// IsFloat reports whether the parameter is a floating-point scalar.
func (p Param) IsFloat() bool {
	switch p.Kind {
	case ParamFloat, ParamDouble, ParamHalf, ParamBFloat:
		return !p.ByVal
	}
	return false
}

// Bytes is the size of the parameter's recorded value in bytes.
func (p Param) Bytes() int { return (p.Bits + 7) / 8 }

// targetData builds the module's DataLayout; the caller disposes of it.
func (m *Module) targetData() C.LLVMTargetDataRef {
	return C.LLVMCreateTargetData(C.LLVMGetDataLayoutStr(m.mod))
}

// attributeKind is the enum attribute kind of name ("byval", "range").
func attributeKind(name string) C.uint {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.LLVMGetEnumAttributeKindForName(cname, C.size_t(len(name)))
}

// KernelParams describes the parameters of kernel (any defined function).
func (m *Module) KernelParams(kernel string) ([]Param, error) {
	f, err := m.definedFunction(kernel)
	if err != nil {
		return nil, err
	}
	td := m.targetData()
	defer C.LLVMDisposeTargetData(td)
	byval := attributeKind("byval")
	n := int(C.LLVMCountParams(f))
	params := make([]Param, n)
	for i := range n {
		v := C.LLVMGetParam(f, C.uint(i))
		t := C.LLVMTypeOf(v)
		p := Param{Name: valueName(v), Type: typeString(t)}
		if a := C.LLVMGetEnumAttributeAtIndex(f, C.LLVMAttributeIndex(i+1), byval); a != nil {
			inner := C.LLVMGetTypeAttributeValue(a)
			p.ByVal = true
			p.Kind = ParamOther
			p.Type = typeString(inner)
			p.Bits = int(C.LLVMABISizeOfType(td, inner)) * 8
			params[i] = p
			continue
		}
		switch C.LLVMGetTypeKind(t) {
		case C.LLVMIntegerTypeKind:
			p.Kind, p.Bits = ParamInt, int(C.LLVMGetIntTypeWidth(t))
		case C.LLVMFloatTypeKind:
			p.Kind, p.Bits = ParamFloat, 32
		case C.LLVMDoubleTypeKind:
			p.Kind, p.Bits = ParamDouble, 64
		case C.LLVMHalfTypeKind:
			p.Kind, p.Bits = ParamHalf, 16
		case C.LLVMBFloatTypeKind:
			p.Kind, p.Bits = ParamBFloat, 16
		case C.LLVMPointerTypeKind:
			as := C.LLVMGetPointerAddressSpace(t)
			p.Kind, p.AddrSpace = ParamPointer, int(as)
			p.Bits = int(C.LLVMPointerSizeForAS(td, as)) * 8
		default:
			p.Kind = ParamOther
			p.Bits = int(C.LLVMABISizeOfType(td, t)) * 8
		}
		params[i] = p
	}
	return params, nil
}
