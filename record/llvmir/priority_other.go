//go:build !linux

package llvmir

// lowerThreadPriority does nothing where niceness is per process: lowering
// it would slow the whole of mneme, not only the prefetch.
func lowerThreadPriority() {}
