package llvm

/*
#include <stdlib.h>
#include <llvm-c/Core.h>
#include "shim.h"
*/
import "C"

import (
	"slices"
	"unsafe"
)

// Internalize gives internal linkage (and default visibility) to every
// function, global variable and alias the module defines, except those named
// in keep and the members of llvm.used. LLVM's own globals (llvm.*),
// appending and available_externally definitions and declarations are left
// alone. What is internalized also leaves llvm.compiler.used, where clang
// lists every __device__ variable so that the host can find it by name: once
// internal, it can no longer be found, and DropDead may remove it when unused.
// So keep the kernel and every __device__ variable a replay must find by
// name (see Globals).
func (m *Module) Internalize(keep ...string) {
	if m.usable() != nil {
		return
	}
	used := map[C.LLVMValueRef]bool{}
	if n := C.mn_llvm_used(m.mod, nil, 0); n > 0 {
		members := make([]C.LLVMValueRef, n)
		C.mn_llvm_used(m.mod, &members[0], n)
		for _, g := range members {
			used[g] = true
		}
	}
	var internalized []C.LLVMValueRef
	for _, g := range append(m.functions(), m.globalValues()...) {
		if used[g] {
			continue
		}
		if C.LLVMIsAGlobalIFunc(g) != nil || (C.LLVMIsAGlobalAlias(g) == nil && !isDefinition(g)) {
			continue
		}
		name := valueName(g)
		if isLLVMName(name) || slices.Contains(keep, name) {
			continue
		}
		switch C.LLVMGetLinkage(g) {
		case C.LLVMInternalLinkage, C.LLVMPrivateLinkage, C.LLVMAppendingLinkage, C.LLVMAvailableExternallyLinkage:
			continue
		}
		C.LLVMSetLinkage(g, C.LLVMInternalLinkage)
		C.LLVMSetVisibility(g, C.LLVMDefaultVisibility)
		C.LLVMSetDLLStorageClass(g, C.LLVMDefaultStorageClass)
		internalized = append(internalized, g)
	}
	if len(internalized) > 0 {
		C.mn_drop_from_used_lists(m.mod, &internalized[0], C.size_t(len(internalized)))
	}
}

// DropDead removes the functions, global variables and aliases nothing
// references that are not externally visible (internal, private and
// discardable definitions, unused declarations), with LLVM's globaldce pass.
func (m *Module) DropDead() error {
	if err := m.usable(); err != nil {
		return err
	}
	pipeline := C.CString("globaldce")
	defer C.free(unsafe.Pointer(pipeline))
	return m.noteFatal(shimError(C.mn_run_passes(m.mod, pipeline, nil, 0, 0), m.name+": dropping dead globals"))
}
