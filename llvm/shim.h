// C interface of the C++ helpers in shim.cpp: the operations LLVM's C API
// cannot do safely or at all. Every function returning char* returns NULL on
// success and otherwise a malloc'd, NUL-terminated error message that the
// caller frees.
#ifndef MNEME_LLVM_SHIM_H
#define MNEME_LLVM_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#ifdef __cplusplus
extern "C" {
#endif

// A fresh context whose diagnostic handler records errors instead of letting
// LLVM print them and call exit(1).
LLVMContextRef mn_context_create(void);

// The demangled form of a symbol name (Itanium, as nvcc and clang mangle
// kernels), malloc'd; NULL when the name is not mangled.
char *mn_demangle(const char *mangled);

// The guarded operations run with a fatal-error trap armed on the calling
// thread: report_fatal_error inside them returns here as an error message.
char *mn_parse_bitcode(LLVMContextRef ctx, const char *data, size_t len,
                       const char *name, LLVMModuleRef *out);
// Reads the bitcode in a forked child process limited to memory_budget
// bytes of new address space and timeout_seconds of time, and reports the
// child's verdict: NULL when it read, else why not (reader error, crash,
// memory exhaustion, time-out). The parent process is never at risk.
char *mn_check_bitcode_isolated(const char *data, size_t len, const char *name,
                                size_t memory_budget, unsigned timeout_seconds);
char *mn_parse_ir(LLVMContextRef ctx, const char *text, size_t len,
                  const char *name, LLVMModuleRef *out);
char *mn_verify(LLVMModuleRef m);
// slp and loop_vectorize turn LLVM's vectorizers on as clang's driver does
// for the -O level (they are off in a default LLVMPassBuilderOptions).
char *mn_run_passes(LLVMModuleRef m, const char *pipeline,
                    LLVMTargetMachineRef tm, int slp, int loop_vectorize);
char *mn_create_target_machine(const char *triple, const char *cpu,
                               const char *features, int opt_level,
                               LLVMTargetMachineRef *out);
char *mn_emit_assembly(LLVMTargetMachineRef tm, LLVMModuleRef m,
                       LLVMMemoryBufferRef *out);

// Calls llvm::report_fatal_error(message) under the trap; it exists so that
// tests can prove the trap works without depending on a backend bug.
char *mn_provoke_fatal_error(const char *message);

// Writes through a null pointer under the trap, as a crash inside LLVM
// would; for tests.
char *mn_provoke_crash(void);

// Checks that cpu and every "+feature" in features are known to the target
// of triple, before a target machine is built (LLVM only warns on stderr).
char *mn_check_subtarget(const char *triple, const char *cpu,
                         const char *features);

// Erases the given global values from their module: drops their references,
// removes them from llvm.used / llvm.compiler.used and !nvvm.annotations.
void mn_erase_globals(LLVMModuleRef m, LLVMValueRef *globals, size_t n);

// Removes the given globals from llvm.used and llvm.compiler.used.
void mn_drop_from_used_lists(LLVMModuleRef m, LLVMValueRef *globals, size_t n);

// The members of llvm.used (not llvm.compiler.used), up to cap of them; the
// return value is their number.
size_t mn_llvm_used(LLVMModuleRef m, LLVMValueRef *out, size_t cap);

// Clones function f into its own module under name, with internal linkage.
LLVMValueRef mn_clone_function(LLVMValueRef f, const char *name);

// The defined functions named in !nvvm.annotations with "kernel" = 1.
size_t mn_annotated_kernels(LLVMModuleRef m, LLVMValueRef *out, size_t cap);

// The global variables named in !nvvm.annotations with "managed" = 1.
size_t mn_managed_globals(LLVMModuleRef m, LLVMValueRef *out, size_t cap);

void mn_set_fp_fusion(LLVMTargetMachineRef tm, int level);

// Rewrites, in kernel f, each floating-point add or subtract that code
// generation would fuse with a multiply into an fma (llvm.fma) where that
// multiply's operands come only from constants and the arguments numbered in
// folded, so that folding those arguments later keeps the single rounding
// the application's code has. fuse_globally is the target's fusion under
// -ffp-contract=fast (every multiply-add pair), else only pairs marked
// contract. Returns the number of adds rewritten.
size_t mn_fuse_folded_multiply_adds(LLVMValueRef f, const unsigned *folded,
                                    size_t n, int fuse_globally);

#ifdef __cplusplus
}
#endif

#endif
