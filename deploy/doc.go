// Package deploy is the plain-Go core of running tuned kernels inside an
// unmodified application: it reads the tuned-kernel files (mneme's
// mneme_tuned_kernels.json and Proteus's PROTEUS_TUNED_KERNELS) into one
// Plan per kernel, adapts a launch's geometry and compile configuration to
// the plan, and caches compiled variants in memory and on disk, shared
// safely by the processes of one job.
//
// It is linked into the in-application runtime library, so it uses no cgo
// and imports none of jit, llvm, tune, replay or cuda: the runtime compiles
// and loads; this package decides what and remembers it. Bad input never
// panics: a reader names the file, the kernel and the field, and the runtime
// falls back to the application's own code.
package deploy
