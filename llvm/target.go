package llvm

/*
#include <stdlib.h>
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unsafe"
)

// Triple is the target triple of CUDA device code.
const Triple = "nvptx64-nvidia-cuda"

// TargetMachine is an NVPTX code generator for one GPU architecture, PTX
// version and codegen optimization level. Its methods serialize on a lock,
// so sharing one between goroutines is safe but not parallel; use one per
// worker for parallel codegen.
type TargetMachine struct {
	mu         sync.Mutex
	tm         C.LLVMTargetMachineRef
	arch       string
	ptxVersion int
	dataLayout string
}

var archPattern = regexp.MustCompile(`^sm_[0-9]+[af]?$`)

// NewTargetMachine makes a code generator for arch ("sm_90"). ptxVersion is
// the PTX ISA version times ten (80 is PTX 8.0, the feature +ptx80); 0 leaves
// the choice to the backend, which picks the lowest version that supports
// arch (7.8 for sm_90), as clang-22 does when it finds no CUDA installation.
// codegenOpt is the codegen optimization level, 0 to 3.
func NewTargetMachine(arch string, ptxVersion int, codegenOpt int) (*TargetMachine, error) {
	if !archPattern.MatchString(arch) {
		return nil, fmt.Errorf("GPU architecture %q: want the form sm_XX, e.g. sm_90", arch)
	}
	if codegenOpt < 0 || codegenOpt > 3 {
		return nil, fmt.Errorf("codegen optimization level %d: want 0 to 3", codegenOpt)
	}
	if ptxVersion < 0 {
		return nil, fmt.Errorf("PTX version %d: want a positive version such as 80 (PTX 8.0), or 0 for the default", ptxVersion)
	}
	features := ""
	if ptxVersion > 0 {
		features = fmt.Sprintf("+ptx%d", ptxVersion)
	}
	ctriple, carch, cfeatures := C.CString(Triple), C.CString(arch), C.CString(features)
	defer C.free(unsafe.Pointer(ctriple))
	defer C.free(unsafe.Pointer(carch))
	defer C.free(unsafe.Pointer(cfeatures))
	what := "target " + arch
	if ptxVersion > 0 {
		what += fmt.Sprintf(" with PTX %d.%d", ptxVersion/10, ptxVersion%10)
	}
	if err := shimError(C.mn_check_subtarget(ctriple, carch, cfeatures), what); err != nil {
		return nil, err
	}
	var ref C.LLVMTargetMachineRef
	if err := shimError(C.mn_create_target_machine(ctriple, carch, cfeatures, C.int(codegenOpt), &ref), what); err != nil {
		return nil, err
	}
	td := C.LLVMCreateTargetDataLayout(ref)
	layout := takeLLVMMessage(C.LLVMCopyStringRepOfTargetData(td))
	C.LLVMDisposeTargetData(td)
	return &TargetMachine{tm: ref, arch: arch, ptxVersion: ptxVersion, dataLayout: layout}, nil
}

// Arch is the GPU architecture the machine generates code for.
func (tm *TargetMachine) Arch() string { return tm.arch }

// DataLayout is the data layout string of the target.
func (tm *TargetMachine) DataLayout() string { return tm.dataLayout }

// Dispose frees the target machine; it is idempotent.
func (tm *TargetMachine) Dispose() {
	if tm == nil {
		return
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.tm != nil {
		C.LLVMDisposeTargetMachine(tm.tm)
		tm.tm = nil
	}
}

// RunPasses runs a new-pass-manager pipeline over the module: "default<O0>"
// to "default<O3>", "default<Os>", "default<Oz>", or an explicit list such as
// "instcombine,simplifycfg". tm, which may be nil, lets target-specific
// passes and cost models in (NVVMReflect, NVPTX's TTI). The module is
// verified first; an invalid pipeline gives a one-line error naming it.
func (m *Module) RunPasses(pipeline string, tm *TargetMachine) error {
	if err := m.usable(); err != nil {
		return fmt.Errorf("%s: %w", m.label(), err)
	}
	if strings.TrimSpace(pipeline) == "" {
		return invalidPipeline{"pass pipeline is empty: give e.g. default<O3> or a pass list"}
	}
	if err := m.Verify(); err != nil {
		return fmt.Errorf("before pass pipeline %q: %w", pipeline, err)
	}
	cpipeline := C.CString(pipeline)
	defer C.free(unsafe.Pointer(cpipeline))
	var ref C.LLVMTargetMachineRef
	if tm != nil {
		tm.mu.Lock()
		defer tm.mu.Unlock()
		if tm.tm == nil {
			return errors.New("target machine was disposed of")
		}
		ref = tm.tm
	}
	slp, loopVec := vectorizers(pipeline)
	err := m.noteFatal(shimError(C.mn_run_passes(m.mod, cpipeline, ref, slp, loopVec), fmt.Sprintf("pass pipeline %q", pipeline)))
	var fatal *FatalError
	if err != nil && !errors.As(err, &fatal) {
		// LLVMRunPasses fails without a fatal error only when it cannot
		// parse the pipeline text.
		return invalidPipeline{err.Error()}
	}
	return err
}

var defaultLevel = regexp.MustCompile(`default<O([0-3sz])>`)

// vectorizers says whether clang's driver would run the SLP and the loop
// vectorizer at the pipeline's level: SLP at O2, O3, Os and Oz, loops at
// O2, O3 and Os. Without them the same IR optimizes into other code than the
// application's build got (measured: a double-precision n-body kernel lost
// its paired shared-memory stores and ran 9% slower).
func vectorizers(pipeline string) (slp, loopVectorize C.int) {
	for _, m := range defaultLevel.FindAllStringSubmatch(pipeline, -1) {
		switch m[1] {
		case "2", "3", "s":
			slp, loopVectorize = 1, 1
		case "z":
			slp = 1
		}
	}
	return slp, loopVectorize
}

// ErrInvalidPipeline matches the error of RunPasses for pipeline text that
// does not parse (bad input, as opposed to a failure inside LLVM).
var ErrInvalidPipeline = errors.New("invalid pass pipeline")

type invalidPipeline struct{ msg string }

func (e invalidPipeline) Error() string { return e.msg }
func (e invalidPipeline) Unwrap() error { return ErrInvalidPipeline }

// EmitPTX generates PTX for the module. A module without a triple or data
// layout gets the target's; one for another target is refused. The module is
// verified first. Code generation rewrites the module's IR in place, so emit
// from a clone to keep the IR.
func (tm *TargetMachine) EmitPTX(m *Module) (string, error) {
	if err := m.usable(); err != nil {
		return "", fmt.Errorf("%s: %w", m.label(), err)
	}
	triple := C.GoString(C.LLVMGetTarget(m.mod))
	switch {
	case triple == "":
		ct := C.CString(Triple)
		C.LLVMSetTarget(m.mod, ct)
		C.free(unsafe.Pointer(ct))
	case !strings.HasPrefix(triple, "nvptx64"):
		return "", fmt.Errorf("%s: the module targets %s, not %s", m.name, triple, Triple)
	}
	if C.GoString(C.LLVMGetDataLayoutStr(m.mod)) == "" {
		cl := C.CString(tm.dataLayout)
		C.LLVMSetDataLayout(m.mod, cl)
		C.free(unsafe.Pointer(cl))
	}
	if err := m.Verify(); err != nil {
		return "", fmt.Errorf("before codegen: %w", err)
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.tm == nil {
		return "", errors.New("target machine was disposed of")
	}
	var buf C.LLVMMemoryBufferRef
	if err := shimError(C.mn_emit_assembly(tm.tm, m.mod, &buf), fmt.Sprintf("%s: codegen for %s", m.name, tm.arch)); err != nil {
		return "", m.noteFatal(err)
	}
	defer C.LLVMDisposeMemoryBuffer(buf)
	return C.GoStringN(C.LLVMGetBufferStart(buf), C.int(C.LLVMGetBufferSize(buf))), nil
}
