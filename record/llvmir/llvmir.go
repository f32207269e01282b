// Package llvmir analyzes recorded kernel IR with LLVM for the recorder: it
// implements record.IRTools with the llvm package. It is used by
// `mneme record`, outside the application, so the application itself never
// loads LLVM; Prefetch analyzes the executable's embedded IR while the
// application runs, so little of that work is left for after it.
package llvmir

import (
	"fmt"
	"slices"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/record"
)

// Tools is the LLVM implementation of record.IRTools.
type Tools struct{}

// ExtractKernel implements record.IRTools.
func (Tools) ExtractKernel(bitcode []byte, moduleName, kernel string) (*record.KernelIR, bool, error) {
	m, err := llvm.ParseBitcode(bitcode, moduleName)
	if err != nil {
		return nil, false, err
	}
	defer m.Dispose()
	if !slices.Contains(m.Kernels(), kernel) {
		return nil, false, nil
	}
	ir, err := analyzeKernel(m, moduleName, kernel)
	return ir, true, err
}

// analyzeKernel extracts kernel, which m defines, and classifies its
// parameters. It is the one place both the direct and the prefetched
// analysis go through, so their results are the same bytes.
func analyzeKernel(m *llvm.Module, moduleName, kernel string) (*record.KernelIR, error) {
	params, err := m.KernelParams(kernel)
	if err != nil {
		return nil, err
	}
	ext, err := m.ExtractKernel(kernel)
	if err != nil {
		return nil, fmt.Errorf("extract %s from %s: %w", kernel, moduleName, err)
	}
	defer ext.Dispose()
	ir := &record.KernelIR{Bitcode: ext.Bitcode()}
	for _, p := range params {
		ir.ArgNames = append(ir.ArgNames, p.Name)
		ir.ArgKinds = append(ir.ArgKinds, ArgKind(p))
	}
	return ir, nil
}

// ArgKind names a parameter the way the database does. Integers wider than
// 64 bits and anything else without a scalar kind are raw bytes.
func ArgKind(p llvm.Param) mneme.ArgKind {
	switch p.Kind {
	case llvm.ParamInt:
		switch {
		case p.Bits <= 8:
			return mneme.ArgI8
		case p.Bits <= 16:
			return mneme.ArgI16
		case p.Bits <= 32:
			return mneme.ArgI32
		case p.Bits <= 64:
			return mneme.ArgI64
		}
	case llvm.ParamFloat:
		return mneme.ArgF32
	case llvm.ParamDouble:
		return mneme.ArgF64
	case llvm.ParamHalf:
		return mneme.ArgF16
	case llvm.ParamBFloat:
		return mneme.ArgBF16
	case llvm.ParamPointer:
		return mneme.ArgPtr
	}
	return mneme.ArgByVal(uint64(p.Bytes()))
}

// Version implements record.IRTools: the LLVM version the IR is analyzed with.
func (Tools) Version() string { return llvm.Version() }
