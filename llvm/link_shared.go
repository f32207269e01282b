//go:build !llvmstatic

package llvm

// The shared libLLVM: quick to link, which suits tests and development; each
// process that loads it spends about 10 ms in the dynamic loader and LLVM's
// static constructors before main (measured on the build machine).

// #cgo LDFLAGS: -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lLLVM-22
import "C"
