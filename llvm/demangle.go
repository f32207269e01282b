package llvm

// #include <stdlib.h>
// #include "shim.h"
import "C"

import "unsafe"

// Demangle returns the C++ name of a mangled symbol (`_Z4vaddPfi` is
// `vadd(float*, int)`), or name itself when it is not mangled: how kernels
// recorded without IR get their demangled names.
func Demangle(name string) string {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	d := C.mn_demangle(cname)
	if d == nil {
		return name
	}
	defer C.free(unsafe.Pointer(d))
	return C.GoString(d)
}
