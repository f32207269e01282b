package main

import (
	"github.com/mneme-gpu/mneme/geometry"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/llvm"
)

// analyzeGeometry reads the launch-geometry facts of kernel from the recorded
// IR file at irPath, for mneme tune's launch safety.
func analyzeGeometry(irPath, kernel string) (geometry.Facts, error) {
	bc, err := safefile.ReadFile(irPath, safefile.MaxIR)
	if err != nil {
		return geometry.Facts{}, err
	}
	m, err := llvm.ParseBitcode(bc, irPath)
	if err != nil {
		return geometry.Facts{}, err
	}
	defer m.Dispose()
	return m.KernelGeometry(kernel)
}
