package main

// Exit codes shared by every subcommand; the README documents them.
const (
	exitFailure      = 1 // an operation failed (I/O, CUDA, internal)
	exitUsage        = 2 // bad flags, arguments or input files
	exitVerification = 3 // the replayed kernel ran but its output differs from the recording
	exitKernelFault  = 4 // the kernel faulted, trapped or could not be launched
	exitCompile      = 5 // the kernel could not be compiled under the configuration
	exitNoGPU        = 6 // the command needs a CUDA driver and GPU and found none
)
