// Package llvm is mneme's only door to LLVM 22: it reads and writes kernel IR,
// rewrites it for one launch (extraction, argument and dimension
// specialization, launch bounds, internalization), runs new-pass-manager
// pipelines and generates PTX with the NVPTX backend.
//
// It binds LLVM's C API with cgo and adds small C++ helpers (shim.cpp) where
// that API has a gap. LLVM failures come back as Go errors: error diagnostics
// are collected instead of ending the process, and report_fatal_error inside
// parsing, verification, pass pipelines, target-machine creation and codegen
// is trapped (see shim.cpp) and returned as a *FatalError, as are crashes
// (SIGSEGV and the like) and failed allocations inside those calls. After a
// fatal error the module involved may be half-rewritten, so it refuses
// further use and Dispose leaks it rather than freeing possibly inconsistent
// IR. Bitcode bytes not seen before are first read in a forked child under
// memory and time limits, so corrupt input cannot exhaust this process's
// memory either.
//
// Building needs LLVM 22's headers and library. The cgo directives below
// name Debian's location (/usr/lib/llvm-22), so a plain `go build` works
// there; elsewhere CGO_CPPFLAGS="$(llvm-config-22 --cppflags)" and
// CGO_LDFLAGS="$(llvm-config-22 --ldflags)" add the right paths. A plain
// build links the shared libLLVM; the build tag llvmstatic links only the
// components mneme uses from LLVM's static archives instead (link_static.go),
// which is what `make` ships: it starts in a third of the time.
//
// Thread safety: a Module owns its own LLVMContext, so different Modules may
// be used from different goroutines at once; one Module is not safe for
// concurrent use. A TargetMachine serializes its own use. The fatal-error trap
// is per OS thread and lives only within one cgo call, so callers need not
// lock goroutines to threads.
package llvm

/*
#cgo CPPFLAGS: -I/usr/lib/llvm-22/include -D_GNU_SOURCE -D__STDC_CONSTANT_MACROS -D__STDC_FORMAT_MACROS -D__STDC_LIMIT_MACROS
#cgo CXXFLAGS: -std=c++17 -fexceptions
#include <stdlib.h>
#include <llvm-c/Core.h>
#include <llvm-c/BitWriter.h>
#include "shim.h"
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// fatalPrefix starts every message shim.cpp returns for a trapped
// report_fatal_error.
const fatalPrefix = "LLVM fatal error: "

// FatalError is an LLVM report_fatal_error that was trapped instead of ending
// the process (for example a codegen "Cannot select"). The module the
// operation ran on is no longer usable.
type FatalError struct {
	Op      string // what was running, e.g. "codegen for sm_90"
	Message string // LLVM's message
}

func (e *FatalError) Error() string { return e.Op + ": " + fatalPrefix + e.Message }

// ErrNotBitcode is wrapped by the errors ParseBitcode returns for data that
// is not readable LLVM bitcode.
var ErrNotBitcode = errors.New("not LLVM bitcode")

// ErrModuleUnusable is wrapped by the errors of operations on a module that
// was disposed of or went through an LLVM fatal error.
var ErrModuleUnusable = errors.New("module is unusable")

// Module is one LLVM module in its own LLVMContext.
type Module struct {
	ctx  C.LLVMContextRef
	mod  C.LLVMModuleRef
	name string
	// broken is the fatal error that left the IR in an unknown state.
	broken error
}

// Name is the name the module was parsed under (a file name, usually).
func (m *Module) Name() string { return m.name }

// takeMessage converts a malloc'd message from shim.cpp and frees it.
func takeMessage(msg *C.char) string {
	s := C.GoString(msg)
	C.free(unsafe.Pointer(msg))
	return s
}

// oneLine folds LLVM's multi-line messages into one line for error values.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	s = strings.Join(lines, "; ")
	const limit = 4000
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return s
}

// shimError turns a message from a guarded shim call into an error; a trapped
// fatal error becomes a *FatalError. It returns nil for a nil message.
func shimError(msg *C.char, op string) error {
	if msg == nil {
		return nil
	}
	s := takeMessage(msg)
	if rest, ok := strings.CutPrefix(s, fatalPrefix); ok {
		return &FatalError{Op: op, Message: oneLine(rest)}
	}
	return fmt.Errorf("%s: %s", op, oneLine(s))
}

// usable reports why the module cannot be used, or nil.
func (m *Module) usable() error {
	if m == nil || m.mod == nil {
		return fmt.Errorf("%w: it was disposed of", ErrModuleUnusable)
	}
	if m.broken != nil {
		return fmt.Errorf("%w after an earlier LLVM fatal error (%v)", ErrModuleUnusable, m.broken)
	}
	return nil
}

// noteFatal marks the module broken when err is a fatal error, and returns err.
func (m *Module) noteFatal(err error) error {
	var fatal *FatalError
	if errors.As(err, &fatal) {
		m.broken = fatal
	}
	return err
}

// Bitcode magic numbers: raw bitcode ('B' 'C' 0xC0DE) and the wrapper header
// (0x0B17C0DE, little-endian) Darwin and embedded IR sometimes use.
var (
	rawBitcodeMagic     = []byte{'B', 'C', 0xC0, 0xDE}
	wrapperBitcodeMagic = []byte{0xDE, 0xC0, 0x17, 0x0B}
)

// notBitcode describes why data is not bitcode, as an error wrapping
// ErrNotBitcode and naming the input.
func notBitcode(name, reason string) error {
	return fmt.Errorf("%s: %w: %s", name, ErrNotBitcode, reason)
}

// magicProblem explains why data cannot be bitcode by its header, or "".
func magicProblem(data []byte) string {
	if len(data) == 0 {
		return "the input is empty"
	}
	if bytes.HasPrefix(data, rawBitcodeMagic) || bytes.HasPrefix(data, wrapperBitcodeMagic) {
		return ""
	}
	head := data[:min(len(data), 4)]
	reason := fmt.Sprintf("it starts with % x, not the bitcode magic 42 43 c0 de", head)
	text := string(data[:min(len(data), 4096)])
	if strings.Contains(text, "define ") || strings.Contains(text, "target triple") || strings.HasPrefix(text, "; ModuleID") {
		reason += " (it looks like textual LLVM IR)"
	}
	return reason
}

// ParseBitcode reads a module from LLVM bitcode. name labels errors (use the
// file name). Data that is not bitcode gives an error wrapping ErrNotBitcode,
// "NAME: not LLVM bitcode: ..."; a module that reads but fails the verifier
// gives "NAME: invalid module: ...". The first parse of given bytes costs a
// fork (about 2 ms for a small kernel, see checkBitcodeIsolated).
func ParseBitcode(data []byte, name string) (*Module, error) {
	if name == "" {
		name = "bitcode"
	}
	if reason := magicProblem(data); reason != "" {
		return nil, notBitcode(name, reason)
	}
	if err := checkBitcodeIsolated(data, name); err != nil {
		return nil, err
	}
	m, err := parseBitcode(data, name)
	if err != nil {
		return nil, err
	}
	if err := m.Verify(); err != nil {
		m.Dispose()
		return nil, err
	}
	return m, nil
}

// LLVM's bitcode reader trusts its input: on corrupt bytes it can crash,
// which the trap in shim.cpp turns into an error, but it can also ask for
// tens of gigabytes (an attribute index of 2^32, say) and be killed for it,
// which no in-process trap can stop. So bytes not seen before are first
// read in a forked child under memory and time limits; only bitcode the
// child read is parsed here. Reading is deterministic, so a verdict is
// remembered by content hash and repeated parses of one recording (the JIT's
// common case) pay for the child once.
const (
	isolatedReadMinMemory = 1 << 30 // address space the child may add, at least
	isolatedReadPerByte   = 256     // ... or this many bytes per input byte
	isolatedReadTimeout   = 60      // seconds
	checkedBitcodeLimit   = 4096    // remembered verdicts before forgetting all
)

var (
	checkedMu      sync.Mutex
	checkedBitcode = map[xxh3.Uint128]bool{}
)

// checkBitcodeIsolated returns nil when data reads as bitcode in a child
// process (or did before), else an error wrapping ErrNotBitcode.
func checkBitcodeIsolated(data []byte, name string) error {
	sum := xxh3.Hash128(data)
	checkedMu.Lock()
	ok := checkedBitcode[sum]
	checkedMu.Unlock()
	if ok {
		return nil
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	budget := max(isolatedReadMinMemory, isolatedReadPerByte*len(data))
	msg := C.mn_check_bitcode_isolated((*C.char)(unsafe.Pointer(unsafe.SliceData(data))), C.size_t(len(data)), cname, C.size_t(budget), isolatedReadTimeout)
	if msg != nil {
		return notBitcode(name, oneLine(takeMessage(msg)))
	}
	checkedMu.Lock()
	if len(checkedBitcode) >= checkedBitcodeLimit {
		clear(checkedBitcode)
	}
	checkedBitcode[sum] = true
	checkedMu.Unlock()
	return nil
}

// parseBitcode reads bitcode without verifying the result.
func parseBitcode(data []byte, name string) (*Module, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	ctx := C.mn_context_create()
	var mod C.LLVMModuleRef
	// The shim copies the bytes before parsing, so Go memory is not retained.
	msg := C.mn_parse_bitcode(ctx, (*C.char)(unsafe.Pointer(unsafe.SliceData(data))), C.size_t(len(data)), cname, &mod)
	if msg != nil {
		s := takeMessage(msg)
		if rest, ok := strings.CutPrefix(s, fatalPrefix); ok {
			// The context may hold half-built state: leak it rather than free it.
			return nil, fmt.Errorf("%s: %w: %w", name, ErrNotBitcode, &FatalError{Op: "reading bitcode", Message: oneLine(rest)})
		}
		C.LLVMContextDispose(ctx)
		return nil, notBitcode(name, oneLine(s))
	}
	return &Module{ctx: ctx, mod: mod, name: name}, nil
}

// ParseIR reads a module from textual LLVM IR (.ll). name labels errors; the
// parser's message carries the line and column.
func ParseIR(text string, name string) (*Module, error) {
	if name == "" {
		name = "IR"
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	ctx := C.mn_context_create()
	var mod C.LLVMModuleRef
	msg := C.mn_parse_ir(ctx, ctext, C.size_t(len(text)), cname, &mod)
	if msg != nil {
		s := takeMessage(msg)
		if rest, ok := strings.CutPrefix(s, fatalPrefix); ok {
			return nil, &FatalError{Op: name + ": reading IR", Message: oneLine(rest)}
		}
		C.LLVMContextDispose(ctx)
		s = strings.TrimSpace(s)
		if !strings.HasPrefix(s, name) {
			s = name + ": " + s
		}
		return nil, fmt.Errorf("%s", oneLine(s))
	}
	m := &Module{ctx: ctx, mod: mod, name: name}
	if err := m.Verify(); err != nil {
		m.Dispose()
		return nil, err
	}
	return m, nil
}

// Bitcode writes the module as bitcode; nil for an unusable module.
func (m *Module) Bitcode() []byte {
	if m.usable() != nil {
		return nil
	}
	buf := C.LLVMWriteBitcodeToMemoryBuffer(m.mod)
	defer C.LLVMDisposeMemoryBuffer(buf)
	return C.GoBytes(unsafe.Pointer(C.LLVMGetBufferStart(buf)), C.int(C.LLVMGetBufferSize(buf)))
}

// String prints the module as textual IR; "" for an unusable module.
func (m *Module) String() string {
	if m.usable() != nil {
		return ""
	}
	return takeLLVMMessage(C.LLVMPrintModuleToString(m.mod))
}

// takeLLVMMessage converts a string LLVM allocated and disposes of it.
func takeLLVMMessage(s *C.char) string {
	if s == nil {
		return ""
	}
	out := C.GoString(s)
	C.LLVMDisposeMessage(s)
	return out
}

// Clone returns an independent copy of the module in a context of its own.
func (m *Module) Clone() (*Module, error) {
	if err := m.usable(); err != nil {
		return nil, fmt.Errorf("%s: clone: %w", m.name, err)
	}
	c, err := parseBitcode(m.Bitcode(), m.name)
	if err != nil {
		return nil, fmt.Errorf("%s: clone: %w", m.name, err)
	}
	return c, nil
}

// Dispose frees the module and its context. It is idempotent. A module that
// went through an LLVM fatal error is leaked instead: its IR may be
// inconsistent enough to crash the destructor.
func (m *Module) Dispose() {
	if m == nil || m.mod == nil {
		return
	}
	if m.broken == nil {
		C.LLVMDisposeModule(m.mod)
		C.LLVMContextDispose(m.ctx)
	}
	m.mod = nil
	m.ctx = nil
}

// Verify runs LLVM's IR verifier. The error, "NAME: invalid module: ...",
// lists what is wrong on one line.
func (m *Module) Verify() error {
	if err := m.usable(); err != nil {
		return fmt.Errorf("%s: %w", m.name, err)
	}
	return m.noteFatal(shimError(C.mn_verify(m.mod), m.name+": invalid module"))
}

// Version is the version of the LLVM library in use, e.g. "22.1.8".
func Version() string {
	var major, minor, patch C.uint
	C.LLVMGetVersion(&major, &minor, &patch)
	return fmt.Sprintf("%d.%d.%d", major, minor, patch)
}

// provokeFatalError runs llvm::report_fatal_error(message) inside the trap
// and returns what the trap made of it; it is how tests show that a fatal
// error does not end the process.
func provokeFatalError(message string) error {
	cmsg := C.CString(message)
	defer C.free(unsafe.Pointer(cmsg))
	return shimError(C.mn_provoke_fatal_error(cmsg), "report_fatal_error")
}

// provokeCrash faults inside the trap the way a crashing LLVM would; tests
// use it to show that the fault becomes an error.
func provokeCrash() error {
	return shimError(C.mn_provoke_crash(), "null write")
}
