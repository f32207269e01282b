package llvmir

import (
	"runtime"
	"syscall"
)

// backgroundNice is the niceness of the prefetch thread: the application
// being recorded gets the CPU first when both want it.
const backgroundNice = 10

// lowerThreadPriority lowers the niceness of the calling goroutine's thread
// (on Linux, niceness is per thread). The goroutine stays locked to the
// thread, so when it returns the thread exits instead of carrying the lower
// priority into other goroutines; the bitcode-checking child processes the
// llvm package forks from it inherit the niceness too. Failing to lower it
// only costs the application some CPU, so the error is ignored.
func lowerThreadPriority() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), backgroundNice)
}
