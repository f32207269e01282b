// Command firstcall is a c-shared library with one exported function that
// does nothing: BenchmarkFirstCallIntoGo times calls into it from C threads,
// the cost a launch pays where the shim asks the runtime library.
package main

import "C"

//export mneme_bench_noop
func mneme_bench_noop() C.int { return 1 }

func main() {}
