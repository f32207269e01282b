// Package shimtest holds the tests and benchmarks of the C shim (the shim_*.c
// files of cmd/mneme-rt/shim) that the compiler wrapper links into
// applications. The shim itself is C, built by the Makefile into
// libmneme_shim.a; these tests build it with the system C compiler and check
// that it forwards every intercepted call unchanged and what one forwarded
// launch costs.
package shimtest
