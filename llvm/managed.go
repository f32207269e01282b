package llvm

/*
#include <llvm-c/Core.h>
#include "shim.h"
*/
import "C"

import "sort"

// KernelGlobal is a global variable a kernel uses.
type KernelGlobal struct {
	Name string
	// Managed: !nvvm.annotations marks it "managed", as the NVPTX backend
	// reads a CUDA __managed__ variable (emitted with .attribute(.managed)):
	// its storage is managed memory the driver places at load time.
	Managed bool
}

// KernelGlobals lists, by name, the global variables kernel reaches: those
// its instructions, the functions it calls and their initializers refer to
// (declarations included, LLVM's own excluded). Replay needs it to tell
// whether a kernel reads a variable no snapshot holds.
func (m *Module) KernelGlobals(kernel string) ([]KernelGlobal, error) {
	f, err := m.definedFunction(kernel)
	if err != nil {
		return nil, err
	}
	managed := map[C.LLVMValueRef]bool{}
	if n := C.mn_managed_globals(m.mod, nil, 0); n > 0 {
		vs := make([]C.LLVMValueRef, n)
		C.mn_managed_globals(m.mod, &vs[0], n)
		for _, v := range vs {
			managed[v] = true
		}
	}
	var out []KernelGlobal
	for g := range reach(f) {
		if C.LLVMIsAGlobalVariable(g) == nil {
			continue
		}
		name := valueName(g)
		if isLLVMName(name) {
			continue
		}
		out = append(out, KernelGlobal{Name: name, Managed: managed[g]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
