package record

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// IRTools is what finalizing a recording needs from LLVM: `mneme record`
// implements it with the llvm package, outside the application, so the
// application never loads LLVM (faster to start, and no clash with an LLVM
// the application links itself).
type IRTools interface {
	// ExtractKernel returns the kernel extracted from module bitcode with
	// everything it uses, and its parameters; defined is false when the
	// module does not define the kernel.
	ExtractKernel(bitcode []byte, moduleName, kernel string) (ir *KernelIR, defined bool, err error)
	// Version is the LLVM version, recorded in the kernel files.
	Version() string
}

// FinalizeResult says what Finalize did to one kernel file.
type FinalizeResult struct {
	Kernel string // demangled name
	File   string // the kernel's JSON file
	Err    error
}

// Finalize analyzes the IR of every kernel of a recording directory: it
// replaces each RecordedIR file (the defining translation unit, as the
// application wrote it) with the kernel extracted from it, and fills the
// argument names, kinds and specializability from the kernel's parameters.
// When the written module does not define the kernel, the modules of
// fallback (the IR sections of the application's files) are searched.
// Every file is replaced atomically and the IR before the JSON, so the
// database stays valid if this is interrupted; running it again is harmless.
// tools may answer from analysis done earlier (`mneme record` analyzes the
// executable's embedded IR while the application runs), as long as its
// answers are those the analysis itself would give.
func Finalize(dir string, tools IRTools, fallback func() ([]appabi.IREntry, error)) []FinalizeResult {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []FinalizeResult
	var entries []appabi.IREntry
	var fallbackErr error
	loaded := false
	for _, f := range files {
		res := FinalizeResult{File: f}
		k, err := db.ReadKernel(f)
		if err != nil {
			res.Err = err
			out = append(out, res)
			continue
		}
		if k.MachineCodeOnly() {
			continue // recorded through the driver: no IR to analyze
		}
		res.Kernel = k.Name()
		irPath := filepath.Join(dir, k.Modules[0])
		bc, err := safefile.ReadFile(irPath, safefile.MaxIR)
		if err != nil {
			res.Err = fmt.Errorf("kernel %s: %w", k.Name(), err)
			out = append(out, res)
			continue
		}
		ir, defined, err := tools.ExtractKernel(bc, k.Modules[0], k.KernelName)
		if err == nil && !defined && fallback != nil {
			if !loaded {
				entries, fallbackErr = fallback()
				loaded = true
			}
			for _, e := range entries {
				if ir, defined, err = tools.ExtractKernel(e.Bitcode, e.Name, k.KernelName); err != nil || defined {
					break
				}
			}
			if err == nil && !defined && fallbackErr != nil {
				err = fallbackErr
			}
		}
		if err == nil && !defined {
			err = errors.New("no recorded or embedded IR module defines it")
		}
		if err != nil {
			res.Err = fmt.Errorf("kernel %s: IR: %w", k.Name(), err)
			out = append(out, res)
			continue
		}
		names, kinds, specs, err := argMeta(ir, k.ArgSizes)
		if err != nil {
			res.Err = fmt.Errorf("kernel %s: %w", k.Name(), err)
			out = append(out, res)
			continue
		}
		if err := db.ReplaceFile(irPath, ir.Bitcode); err != nil {
			res.Err = err
			out = append(out, res)
			continue
		}
		k.ArgNames, k.ArgKinds, k.Specializations = names, kinds, specs
		k.Toolchain.LLVM = tools.Version()
		data, err := db.MarshalKernel(k)
		if err == nil {
			err = db.ReplaceFile(f, data)
		}
		res.Err = err
		out = append(out, res)
	}
	return out
}
