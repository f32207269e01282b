// Package deploy is the plain-Go core of running tuned kernels inside an
// unmodified application: it reads the tuned-kernel files (mneme's
// mneme_tuned_kernels.json and Proteus's PROTEUS_TUNED_KERNELS) into one
// Plan per kernel, adapts a launch's geometry and compile configuration to
// the plan, and caches compiled variants in memory and on disk, shared
// safely by the processes of one job.
//
// Runtime is the in-application deployment policy: which code a launch
// of a tuned kernel runs, found in memory, the disk cache or compiled, how
// many variants a kernel may have, what the shim may run alone, what is
// loaded ahead of the first launch, and what happens after a failure. It
// works through small interfaces (Compiler, Loader, Store), so it is tested
// without a GPU.
//
// It is linked into the in-application runtime library, so it uses no cgo
// and imports none of jit, llvm, tune, replay or cuda: the runtime library
// (cmd/mneme-rt) compiles through CommandCompiler, loads and launches; this
// package decides what and remembers it. Bad input never panics: a reader
// names the file, the kernel and the field, and the runtime falls back to
// the application's own code.
package deploy
