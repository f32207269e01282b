package llvm

/*
#include <llvm-c/Core.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"strings"
)

// isLLVMName reports whether a global's name is reserved for LLVM itself
// (intrinsics, llvm.used, llvm.global_ctors, ...).
func isLLVMName(name string) bool { return strings.HasPrefix(name, "llvm.") }

// closure collects the global values reachable from some roots through
// instruction operands, constant expressions, aggregate constants, global
// initializers, aliasees, ifunc resolvers and personality/prefix/prologue
// data.
type closure struct {
	globals   map[C.LLVMValueRef]bool
	constants map[C.LLVMValueRef]bool // non-global constants already walked
	work      []C.LLVMValueRef
}

func newClosure() *closure {
	return &closure{globals: map[C.LLVMValueRef]bool{}, constants: map[C.LLVMValueRef]bool{}}
}

// reach computes the closure of roots.
func reach(roots ...C.LLVMValueRef) map[C.LLVMValueRef]bool {
	c := newClosure()
	for _, r := range roots {
		c.value(r)
	}
	for len(c.work) > 0 {
		g := c.work[len(c.work)-1]
		c.work = c.work[:len(c.work)-1]
		c.expand(g)
	}
	return c.globals
}

// value records v if it is a global and walks into it if it is a constant.
func (c *closure) value(v C.LLVMValueRef) {
	if v == nil {
		return
	}
	if C.LLVMIsAGlobalValue(v) != nil {
		if !c.globals[v] {
			c.globals[v] = true
			c.work = append(c.work, v)
		}
		return
	}
	if C.LLVMIsAConstant(v) != nil && !c.constants[v] {
		c.constants[v] = true
		c.operands(v)
	}
}

// operands visits the operands of a user (instruction or constant). Other
// values (arguments, basic blocks, metadata, inline asm) have none that
// matter.
func (c *closure) operands(u C.LLVMValueRef) {
	if C.LLVMIsAUser(u) == nil {
		return
	}
	n := int(C.LLVMGetNumOperands(u))
	for i := range n {
		c.value(C.LLVMGetOperand(u, C.uint(i)))
	}
}

// expand visits what global g itself refers to.
func (c *closure) expand(g C.LLVMValueRef) {
	switch {
	case C.LLVMIsAFunction(g) != nil:
		if C.LLVMHasPersonalityFn(g) != 0 {
			c.value(C.LLVMGetPersonalityFn(g))
		}
		if C.LLVMHasPrefixData(g) != 0 {
			c.value(C.LLVMGetPrefixData(g))
		}
		if C.LLVMHasPrologueData(g) != 0 {
			c.value(C.LLVMGetPrologueData(g))
		}
		forEachInstruction(g, c.operands)
	case C.LLVMIsAGlobalVariable(g) != nil:
		c.value(C.LLVMGetInitializer(g))
	case C.LLVMIsAGlobalAlias(g) != nil:
		c.value(C.LLVMAliasGetAliasee(g))
	case C.LLVMIsAGlobalIFunc(g) != nil:
		c.value(C.LLVMGetGlobalIFuncResolver(g))
	}
}

// ExtractKernel returns a new module, in its own context, holding kernel and
// the transitive closure of the functions, global variables and aliases it
// references (through instructions, constant expressions and initializers).
// Referenced declarations stay declarations; everything else is dropped,
// other kernels included. Linkage, names, module flags, data layout and
// triple are kept; llvm.used, llvm.compiler.used and !nvvm.annotations keep
// only surviving entries, and LLVM's other special globals (llvm.global_ctors,
// llvm.global.annotations, ...) are dropped. The original module is
// unchanged.
func (m *Module) ExtractKernel(kernel string) (*Module, error) {
	if _, err := m.definedFunction(kernel); err != nil {
		return nil, err
	}
	out, err := m.Clone()
	if err != nil {
		return nil, err
	}
	f, err := out.definedFunction(kernel)
	if err != nil {
		out.Dispose()
		return nil, err
	}
	keep := reach(f)
	var dead []C.LLVMValueRef
	for _, g := range append(out.functions(), out.globalValues()...) {
		if keep[g] {
			continue
		}
		if name := valueName(g); name == "llvm.used" || name == "llvm.compiler.used" {
			continue // pruned by mn_erase_globals
		}
		dead = append(dead, g)
	}
	if len(dead) > 0 {
		C.mn_erase_globals(out.mod, &dead[0], C.size_t(len(dead)))
	}
	if err := out.Verify(); err != nil {
		out.Dispose()
		return nil, fmt.Errorf("extracting %s: %w", kernel, err)
	}
	return out, nil
}
