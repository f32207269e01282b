// C++ helpers for the Go binding: LLVM fatal errors turned into error
// messages, and the few module edits LLVM's C API has no call for.
//
// Why a trap of our own rather than llvm::CrashRecoveryContext: in LLVM 22
// report_fatal_error calls the installed handler and then abort() or exit(1)
// directly, and CrashRecoveryContext::RunSafely only arms its jump buffer
// after CrashRecoveryContext::Enable(), which installs SIGSEGV/SIGBUS/SIGABRT
// handlers that would replace the Go runtime's. So the fatal-error handler
// installed here never returns into LLVM: it records the message and
// longjmps back to the guarded entry point on the same thread. Objects on the
// abandoned LLVM frames are leaked, which is the same trade-off clang's crash
// recovery makes; the Go side stops using a module after such an error.
//
// The same trap catches SIGSEGV/SIGBUS/SIGFPE/SIGILL raised inside a guarded
// call (see onSignal), chaining every other such signal to the Go runtime.
//
// This file is compiled with exceptions enabled (the LLVM library itself is
// not) only so that guarded() can catch what operator new throws.
#include "shim.h"

#include <llvm-c/BitReader.h>
#include <llvm-c/Error.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/Demangle/Demangle.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalValue.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

using namespace llvm;

namespace {

// One trap per OS thread; a Go goroutine stays on its thread for the whole
// of one cgo call, which is the trap's whole lifetime. armedJump is plain
// initial-exec TLS because the signal handler reads it.
__thread sigjmp_buf *armedJump __attribute__((tls_model("initial-exec")));
__thread int caughtSignal __attribute__((tls_model("initial-exec")));

struct Trap {
  sigjmp_buf jump;
  std::string fatal;       // message of the fatal error that sprang the trap
  std::string diagnostics; // error diagnostics reported while armed
};
thread_local Trap trap;

enum Sprung { byFatalError = 1, bySignal = 2 };

[[noreturn]] void spring(int how) {
  sigjmp_buf *jump = armedJump;
  armedJump = nullptr;
  siglongjmp(*jump, how);
}

void onFatalError(void *, const char *reason, bool) {
  if (armedJump) {
    trap.fatal = reason ? reason : "unknown fatal error";
    spring(byFatalError);
  }
  // Not inside a guarded call: report as LLVM would; LLVM then exits.
  std::fprintf(stderr, "LLVM ERROR: %s\n", reason ? reason : "");
}

// LLVM's own allocation helpers (safe_malloc, used by SmallVector and the
// bitcode reader's tables) report a failed allocation here and must not
// return. Corrupt bitcode can ask for absurd sizes, so this is an input
// error, not the end of the process.
void onBadAlloc(void *, const char *reason, bool) {
  if (armedJump) {
    trap.fatal = std::string("out of memory: ") + (reason ? reason : "");
    spring(byFatalError);
  }
  std::fprintf(stderr, "LLVM ERROR: out of memory: %s\n", reason ? reason : "");
  std::abort();
}

// Crashes inside LLVM. LLVM's readers are not hardened against hostile input
// in release builds (they rely on assertions that are compiled out), and
// fuzzing finds null dereferences in the bitcode reader. A fault on a thread
// whose trap is armed jumps back to the guarded call; any other fault is
// passed to the handler that was installed before (the Go runtime's), called
// as the kernel would call it, so Go's nil-pointer panics and crash reports
// work as before. SIGABRT is left alone: glibc's abort() holds a lock that a
// jump out of it would never release.
const int trappedSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
struct sigaction previousAction[NSIG];

void onSignal(int sig, siginfo_t *info, void *context) {
  if (armedJump) {
    caughtSignal = sig;
    spring(bySignal);
  }
  const struct sigaction &prev = previousAction[sig];
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction)
      prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler == SIG_DFL) {
    // Returning re-runs the faulting instruction, which now gets the
    // default action.
    sigaction(sig, &prev, nullptr);
    return;
  }
  if (prev.sa_handler != SIG_IGN)
    prev.sa_handler(sig);
}

void installSignalTrap() {
  for (int sig : trappedSignals) {
    if (sigaction(sig, nullptr, &previousAction[sig]) != 0)
      continue;
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = onSignal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    action.sa_mask = previousAction[sig].sa_mask;
    sigaction(sig, &action, nullptr);
  }
}

const char *signalName(int sig) {
  switch (sig) {
  case SIGSEGV:
    return "SIGSEGV (invalid memory access)";
  case SIGBUS:
    return "SIGBUS (bus error)";
  case SIGFPE:
    return "SIGFPE (arithmetic fault)";
  case SIGILL:
    return "SIGILL (illegal instruction)";
  }
  return "a signal";
}

void onDiagnostic(LLVMDiagnosticInfoRef info, void *) {
  // Warnings and remarks are dropped: a library must not print, and LLVM's
  // default handler would call exit(1) on an error.
  if (LLVMGetDiagInfoSeverity(info) != LLVMDSError || !armedJump)
    return;
  char *text = LLVMGetDiagInfoDescription(info);
  if (!trap.diagnostics.empty())
    trap.diagnostics += "; ";
  trap.diagnostics += text ? text : "unknown error";
  LLVMDisposeMessage(text);
}

std::once_flag setupOnce;

void setup() {
  std::call_once(setupOnce, [] {
    install_fatal_error_handler(onFatalError, nullptr);
    install_bad_alloc_error_handler(onBadAlloc, nullptr);
    installSignalTrap();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

char *copyMessage(const std::string &s) {
  char *out = static_cast<char *>(std::malloc(s.size() + 1));
  if (out) {
    std::memcpy(out, s.data(), s.size());
    out[s.size()] = 0;
  }
  return out;
}

// guarded runs body with the fatal-error trap armed. body returns an error
// message or the empty string; error diagnostics collected while it ran are
// appended, so a diagnostic that LLVM did not treat as a failure still fails
// the call.
template <typename Body> char *guarded(Body &&body) {
  setup();
  if (armedJump)
    return copyMessage("internal error: nested guarded LLVM call");
  trap.fatal.clear();
  trap.diagnostics.clear();
  // savemask=1: leaving a signal handler by jump must restore the mask.
  if (int how = sigsetjmp(trap.jump, 1)) {
    std::string msg = "LLVM fatal error: ";
    if (how == bySignal)
      msg += std::string("LLVM crashed with ") + signalName(caughtSignal) +
             "; the state of this LLVM context is unknown";
    else
      msg += trap.fatal;
    if (!trap.diagnostics.empty())
      msg += " (" + trap.diagnostics + ")";
    return copyMessage(msg);
  }
  armedJump = &trap.jump;
  std::string err;
  // LLVM is built without exceptions, but operator new and the standard
  // containers it uses still throw (std::bad_alloc, std::length_error) on
  // absurd sizes; such an exception must not reach the cgo boundary.
  try {
    err = body();
  } catch (const std::exception &e) {
    err = std::string("LLVM failed with a C++ exception: ") + e.what();
  } catch (...) {
    err = "LLVM failed with an unknown C++ exception";
  }
  armedJump = nullptr;
  if (!trap.diagnostics.empty()) {
    if (err.empty())
      err = trap.diagnostics;
    else if (err.find(trap.diagnostics) == std::string::npos)
      err += ": " + trap.diagnostics;
  }
  return err.empty() ? nullptr : copyMessage(err);
}

std::string takeMessage(char *msg) {
  std::string s = msg ? msg : "";
  if (msg)
    LLVMDisposeMessage(msg);
  return s;
}

} // namespace

extern "C" {

LLVMContextRef mn_context_create(void) {
  setup();
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(ctx, onDiagnostic, nullptr);
  return ctx;
}

char *mn_parse_bitcode(LLVMContextRef ctx, const char *data, size_t len,
                       const char *name, LLVMModuleRef *out) {
  *out = nullptr;
  return guarded([&]() -> std::string {
    LLVMMemoryBufferRef buf =
        LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len, name);
    LLVMBool failed = LLVMParseBitcodeInContext2(ctx, buf, out);
    LLVMDisposeMemoryBuffer(buf);
    if (failed) {
      *out = nullptr;
      return trap.diagnostics.empty() ? "unreadable bitcode" : "";
    }
    return "";
  });
}

char *mn_check_bitcode_isolated(const char *data, size_t len, const char *name,
                                size_t memory_budget,
                                unsigned timeout_seconds) {
  setup(); // finish one-time setup here, not in the child
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return copyMessage(std::string("cannot check the bitcode: pipe: ") +
                       std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    return copyMessage(std::string("cannot check the bitcode: fork: ") +
                       std::strerror(e));
  }
  if (pid == 0) {
    // The child: one thread, plain C and LLVM only, then _exit. It reads the
    // bytes under an address-space limit and a time limit, so allocation
    // bombs fail fast and a reader loop ends.
    close(fds[0]);
    long pages = 0;
    if (FILE *statm = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(statm, "%ld", &pages) != 1)
        pages = 0;
      std::fclose(statm);
    }
    if (pages > 0) {
      rlim_t limit =
          rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + memory_budget;
      struct rlimit rl = {limit, limit};
      setrlimit(RLIMIT_AS, &rl);
    }
    alarm(timeout_seconds);
    LLVMModuleRef mod = nullptr;
    char *err = mn_parse_bitcode(mn_context_create(), data, len, name, &mod);
    if (err) {
      ssize_t ignored = write(fds[1], err, std::strlen(err));
      (void)ignored;
      _exit(1);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string message;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0)
      message.append(buf, size_t(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return nullptr;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && !message.empty())
    return copyMessage(message);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      return copyMessage("the bitcode reader did not finish within " +
                         std::to_string(timeout_seconds) + " s");
    return copyMessage(
        std::string("the bitcode reader was killed by ") +
        (sig == SIGKILL ? "SIGKILL (out of memory?)" : strsignal(sig)));
  }
  return copyMessage("the bitcode reader failed (exit status " +
                     std::to_string(WEXITSTATUS(status)) + ")");
}

char *mn_parse_ir(LLVMContextRef ctx, const char *text, size_t len,
                  const char *name, LLVMModuleRef *out) {
  *out = nullptr;
  return guarded([&]() -> std::string {
    // The IR parser takes ownership of the buffer; the copy is
    // NUL-terminated, which the lexer relies on.
    LLVMMemoryBufferRef buf =
        LLVMCreateMemoryBufferWithMemoryRangeCopy(text, len, name);
    char *msg = nullptr;
    if (LLVMParseIRInContext(ctx, buf, out, &msg)) {
      *out = nullptr;
      std::string s = takeMessage(msg);
      return s.empty() ? "unreadable IR" : s;
    }
    return "";
  });
}

char *mn_verify(LLVMModuleRef m) {
  return guarded([&]() -> std::string {
    std::string text;
    raw_string_ostream os(text);
    if (verifyModule(*unwrap(m), &os))
      return text.empty() ? "invalid module" : text;
    return "";
  });
}

char *mn_run_passes(LLVMModuleRef m, const char *pipeline,
                    LLVMTargetMachineRef tm, int slp, int loop_vectorize) {
  return guarded([&]() -> std::string {
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetSLPVectorization(opts, slp);
    LLVMPassBuilderOptionsSetLoopVectorization(opts, loop_vectorize);
    LLVMErrorRef err = LLVMRunPasses(m, pipeline, tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (err)
      return takeMessage(LLVMGetErrorMessage(err));
    return "";
  });
}

char *mn_create_target_machine(const char *triple, const char *cpu,
                               const char *features, int opt_level,
                               LLVMTargetMachineRef *out) {
  *out = nullptr;
  return guarded([&]() -> std::string {
    LLVMTargetRef target = nullptr;
    char *msg = nullptr;
    if (LLVMGetTargetFromTriple(triple, &target, &msg))
      return takeMessage(msg);
    LLVMTargetMachineOptionsRef opts = LLVMCreateTargetMachineOptions();
    LLVMTargetMachineOptionsSetCPU(opts, cpu);
    LLVMTargetMachineOptionsSetFeatures(opts, features);
    LLVMTargetMachineOptionsSetCodeGenOptLevel(
        opts, static_cast<LLVMCodeGenOptLevel>(opt_level));
    *out = LLVMCreateTargetMachineWithOptions(target, triple, opts);
    LLVMDisposeTargetMachineOptions(opts);
    if (!*out)
      return "cannot create a target machine";
    return "";
  });
}

char *mn_emit_assembly(LLVMTargetMachineRef tm, LLVMModuleRef m,
                       LLVMMemoryBufferRef *out) {
  *out = nullptr;
  return guarded([&]() -> std::string {
    char *msg = nullptr;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMAssemblyFile, &msg,
                                            out)) {
      *out = nullptr;
      std::string s = takeMessage(msg);
      return s.empty() ? "code generation failed" : s;
    }
    if (msg)
      LLVMDisposeMessage(msg);
    return "";
  });
}

char *mn_provoke_fatal_error(const char *message) {
  return guarded([&]() -> std::string {
    report_fatal_error(Twine(message), /*gen_crash_diag=*/true);
    return "report_fatal_error returned";
  });
}

char *mn_provoke_crash(void) {
  return guarded([&]() -> std::string {
    volatile int *nowhere = nullptr;
    *nowhere = 1;
    return "writing through a null pointer did not fault";
  });
}

char *mn_check_subtarget(const char *triple, const char *cpu,
                         const char *features) {
  return guarded([&]() -> std::string {
    std::string error;
    Triple tt(triple);
    const Target *target = TargetRegistry::lookupTarget(tt, error);
    if (!target)
      return error;
    // An empty CPU makes LLVM look nothing up, so nothing is printed.
    std::unique_ptr<MCSubtargetInfo> sti(
        target->createMCSubtargetInfo(tt, "", ""));
    if (!sti)
      return "no subtarget information for " + std::string(triple);
    if (!sti->isCPUStringValid(cpu)) {
      std::string known;
      for (const auto &p : sti->getAllProcessorDescriptions())
        known += (known.empty() ? "" : " ") + std::string(p.Key);
      return "unknown GPU architecture \"" + std::string(cpu) +
             "\" (LLVM knows: " + known + ")";
    }
    StringRef rest(features);
    while (!rest.empty()) {
      auto [item, tail] = rest.split(',');
      rest = tail;
      StringRef name = item.trim();
      if (name.empty())
        continue;
      if (name.front() == '+' || name.front() == '-')
        name = name.drop_front();
      bool found = false;
      for (const auto &f : sti->getAllProcessorFeatures())
        if (name == f.Key)
          found = true;
      if (!found) {
        std::string known;
        for (const auto &f : sti->getAllProcessorFeatures())
          if (StringRef(f.Key).starts_with("ptx"))
            known += (known.empty() ? "" : " ") + std::string(f.Key);
        return "unknown target feature \"" + name.str() +
               "\" (PTX versions LLVM knows: " + known + ")";
      }
    }
    return "";
  });
}

void mn_drop_from_used_lists(LLVMModuleRef m, LLVMValueRef *globals, size_t n) {
  SmallPtrSet<GlobalValue *, 32> drop;
  for (size_t i = 0; i < n; i++)
    drop.insert(cast<GlobalValue>(unwrap(globals[i])));
  removeFromUsedLists(*unwrap(m), [&](Constant *c) {
    auto *gv = dyn_cast<GlobalValue>(c->stripPointerCasts());
    return gv && drop.count(gv);
  });
}

size_t mn_llvm_used(LLVMModuleRef m, LLVMValueRef *out, size_t cap) {
  SmallVector<GlobalValue *, 8> used;
  collectUsedGlobalVariables(*unwrap(m), used, /*CompilerUsed=*/false);
  for (size_t i = 0; i < used.size() && i < cap; i++)
    out[i] = wrap(used[i]);
  return used.size();
}

void mn_erase_globals(LLVMModuleRef m, LLVMValueRef *globals, size_t n) {
  Module &mod = *unwrap(m);
  SmallPtrSet<GlobalValue *, 32> dead;
  for (size_t i = 0; i < n; i++)
    dead.insert(cast<GlobalValue>(unwrap(globals[i])));
  mn_drop_from_used_lists(m, globals, n);
  if (NamedMDNode *ann = mod.getNamedMetadata("nvvm.annotations")) {
    SmallVector<MDNode *, 8> keep;
    for (MDNode *node : ann->operands()) {
      GlobalValue *gv = nullptr;
      if (node->getNumOperands() > 0)
        gv = mdconst::dyn_extract_or_null<GlobalValue>(node->getOperand(0));
      if (!gv || !dead.count(gv))
        keep.push_back(node);
    }
    ann->clearOperands();
    for (MDNode *node : keep)
      ann->addOperand(node);
  }
  // Drop every reference first so the dead values may refer to each other.
  for (GlobalValue *gv : dead) {
    if (auto *fn = dyn_cast<Function>(gv))
      fn->dropAllReferences();
    else if (auto *var = dyn_cast<GlobalVariable>(gv))
      var->setInitializer(nullptr);
    else if (auto *alias = dyn_cast<GlobalAlias>(gv))
      alias->setAliasee(nullptr);
    else if (auto *ifunc = dyn_cast<GlobalIFunc>(gv))
      ifunc->setResolver(nullptr);
  }
  for (GlobalValue *gv : dead) {
    gv->removeDeadConstantUsers();
    if (!gv->use_empty())
      gv->replaceAllUsesWith(PoisonValue::get(gv->getType()));
  }
  for (GlobalValue *gv : dead)
    gv->eraseFromParent();
}

LLVMValueRef mn_clone_function(LLVMValueRef f, const char *name) {
  Function *fn = cast<Function>(unwrap(f));
  ValueToValueMapTy map;
  Function *clone = CloneFunction(fn, map);
  clone->setName(name);
  clone->setLinkage(GlobalValue::InternalLinkage);
  clone->setVisibility(GlobalValue::DefaultVisibility);
  clone->setDLLStorageClass(GlobalValue::DefaultStorageClass);
  return wrap(clone);
}

// annotationSet reports whether an !nvvm.annotations entry sets key to 1;
// the operands after the annotated value come in (name, value) pairs.
static bool annotationSet(const MDNode *node, StringRef key) {
  for (unsigned i = 1; i + 1 < node->getNumOperands(); i += 2) {
    auto *name = dyn_cast_or_null<MDString>(node->getOperand(i));
    auto *val =
        mdconst::dyn_extract_or_null<ConstantInt>(node->getOperand(i + 1));
    if (name && val && name->getString() == key && val->isOne())
      return true;
  }
  return false;
}

size_t mn_annotated_kernels(LLVMModuleRef m, LLVMValueRef *out, size_t cap) {
  NamedMDNode *ann = unwrap(m)->getNamedMetadata("nvvm.annotations");
  if (!ann)
    return 0;
  size_t n = 0;
  for (MDNode *node : ann->operands()) {
    if (node->getNumOperands() < 3)
      continue;
    auto *fn = mdconst::dyn_extract_or_null<Function>(node->getOperand(0));
    if (!fn || fn->isDeclaration() || !annotationSet(node, "kernel"))
      continue;
    if (n < cap)
      out[n] = wrap(fn);
    n++;
  }
  return n;
}

// mn_managed_globals lists the global variables that !nvvm.annotations
// marks "managed" (CUDA __managed__ variables; NVPTX emits them with
// .attribute(.managed)), as mn_annotated_kernels does for kernels.
size_t mn_managed_globals(LLVMModuleRef m, LLVMValueRef *out, size_t cap) {
  NamedMDNode *ann = unwrap(m)->getNamedMetadata("nvvm.annotations");
  if (!ann)
    return 0;
  size_t n = 0;
  for (MDNode *node : ann->operands()) {
    if (node->getNumOperands() < 3)
      continue;
    auto *gv =
        mdconst::dyn_extract_or_null<GlobalVariable>(node->getOperand(0));
    if (!gv || !annotationSet(node, "managed"))
      continue;
    if (n < cap)
      out[n] = wrap(gv);
    n++;
  }
  return n;
}

} // extern "C"

void mn_set_fp_fusion(LLVMTargetMachineRef tm, int level) {
  // The C API has no way to set TargetOptions. NVPTX reads AllowFPOpFusion
  // when it lowers fmul/fadd: under Fast it emits plain mul/add that ptxas
  // may contract into fma (what clang does for CUDA's default
  // -ffp-contract=fast); otherwise it pins them with .rn.
  auto *machine = reinterpret_cast<llvm::TargetMachine *>(tm);
  switch (level) {
  case 0:
    machine->Options.AllowFPOpFusion = llvm::FPOpFusion::Fast;
    break;
  case 1:
    machine->Options.AllowFPOpFusion = llvm::FPOpFusion::Standard;
    break;
  default:
    machine->Options.AllowFPOpFusion = llvm::FPOpFusion::Strict;
    break;
  }
}

char *mn_demangle(const char *mangled) {
  std::string d = llvm::demangle(mangled);
  if (d == mangled)
    return nullptr;
  return strdup(d.c_str());
}

namespace {

// FoldedValues answers which values of a function become constants once the
// chosen arguments are folded: constants, those arguments, and arithmetic
// whose every operand is such a value. Folding then computes them on the
// host with IEEE rounding at each operation, as the GPU would, except where
// the GPU code fuses a multiply into an add.
class FoldedValues {
public:
  explicit FoldedValues(llvm::SmallPtrSet<const llvm::Value *, 8> args)
      : args_(std::move(args)) {}

  bool folds(const llvm::Value *v, unsigned depth = 0) {
    if (llvm::isa<llvm::ConstantFP>(v) || llvm::isa<llvm::ConstantInt>(v))
      return true;
    if (args_.contains(v))
      return true;
    const auto *inst = llvm::dyn_cast<llvm::Instruction>(v);
    if (inst == nullptr || depth > 64)
      return false;
    if (auto it = memo_.find(inst); it != memo_.end())
      return it->second;
    bool pure = llvm::isa<llvm::UnaryOperator>(inst) ||
                llvm::isa<llvm::BinaryOperator>(inst) ||
                llvm::isa<llvm::CastInst>(inst) ||
                llvm::isa<llvm::CmpInst>(inst) ||
                llvm::isa<llvm::SelectInst>(inst);
    const auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(inst);
    if (call != nullptr) {
      switch (call->getIntrinsicID()) {
      case llvm::Intrinsic::fma:
      case llvm::Intrinsic::fmuladd:
      case llvm::Intrinsic::fabs:
      case llvm::Intrinsic::copysign:
        pure = true;
        break;
      default:
        break;
      }
    }
    bool result = pure;
    if (pure) {
      auto operands = call != nullptr ? call->args() : inst->operands();
      for (const llvm::Use &op : operands) {
        if (!folds(op.get(), depth + 1)) {
          result = false;
          break;
        }
      }
    }
    memo_[inst] = result;
    return result;
  }

private:
  llvm::SmallPtrSet<const llvm::Value *, 8> args_;
  llvm::DenseMap<const llvm::Instruction *, bool> memo_;
};

// contractibleMultiply mirrors what LLVM's DAG combiner treats as a multiply
// it may fuse into an add of block bb: an fmul in the same block,
// contractible, and not one the combiner rewrites first
// (x * 2.0 becomes x + x, x * -1.0 becomes -x; both exact).
const llvm::BinaryOperator *contractibleMultiply(const llvm::Value *v,
                                                 const llvm::BasicBlock *bb,
                                                 bool fuseGlobally) {
  const auto *mul = llvm::dyn_cast<llvm::BinaryOperator>(v);
  if (mul == nullptr || mul->getOpcode() != llvm::Instruction::FMul ||
      mul->getParent() != bb)
    return nullptr;
  if (!fuseGlobally && !mul->hasAllowContract())
    return nullptr;
  for (const llvm::Use &op : mul->operands()) {
    if (const auto *c = llvm::dyn_cast<llvm::ConstantFP>(op.get());
        c != nullptr && (c->isExactlyValue(2.0) || c->isExactlyValue(-1.0)))
      return nullptr;
  }
  return mul;
}

} // namespace

size_t mn_fuse_folded_multiply_adds(LLVMValueRef fn, const unsigned *folded,
                                    size_t n, int fuse_globally) {
  auto *f = llvm::unwrap<llvm::Function>(fn);
  llvm::SmallPtrSet<const llvm::Value *, 8> args;
  for (size_t i = 0; i < n; i++) {
    if (folded[i] < f->arg_size())
      args.insert(f->getArg(folded[i]));
  }
  FoldedValues values(std::move(args));
  const bool global = fuse_globally != 0;

  struct Fusion {
    llvm::Instruction *add;
    const llvm::BinaryOperator *mul;
    bool negateProduct, negateAddend;
    unsigned addend; // operand index: read when rewriting, as an earlier
                     // rewrite may have replaced it
  };
  std::vector<Fusion> fusions;
  for (llvm::BasicBlock &bb : *f) {
    for (llvm::Instruction &inst : bb) {
      const unsigned op = inst.getOpcode();
      if (op != llvm::Instruction::FAdd && op != llvm::Instruction::FSub)
        continue;
      // Half too: NVPTX fuses f16 (fma.rn.f16); clang computes bfloat in
      // float.
      const llvm::Type *ty = inst.getType();
      if (!ty->isFloatTy() && !ty->isDoubleTy() && !ty->isHalfTy())
        continue;
      if (!global && !inst.hasAllowContract())
        continue;
      llvm::Value *n0 = inst.getOperand(0), *n1 = inst.getOperand(1);
      const auto *m0 = contractibleMultiply(n0, &bb, global);
      const auto *m1 = contractibleMultiply(n1, &bb, global);
      // NVPTX fuses aggressively (a multiply with several uses too); given
      // two candidates the combiner takes the one with fewer uses, the
      // first operand on a tie.
      const bool preferSecond =
          m0 != nullptr && m1 != nullptr && n0->getNumUses() > n1->getNumUses();
      Fusion fu{&inst, nullptr, false, false, 0};
      if (op == llvm::Instruction::FAdd) {
        if (m0 != nullptr && !preferSecond)
          fu = {&inst, m0, false, false, 1};
        else if (m1 != nullptr)
          fu = {&inst, m1, false, false, 0};
      } else {
        // a*b - c = fma(a, b, -c); c - a*b = fma(-a, b, c)
        if (m0 != nullptr && !preferSecond)
          fu = {&inst, m0, false, true, 1};
        else if (m1 != nullptr)
          fu = {&inst, m1, true, false, 0};
      }
      // Only a multiply that folds to a constant loses its fusion; every
      // other pair the code generator fuses as it always did.
      if (fu.mul != nullptr && values.folds(fu.mul))
        fusions.push_back(fu);
    }
  }
  for (const Fusion &fu : fusions) {
    llvm::IRBuilder<> b(fu.add);
    llvm::Value *a = fu.mul->getOperand(0);
    if (fu.negateProduct)
      a = b.CreateFNeg(a);
    llvm::Value *c = fu.add->getOperand(fu.addend);
    if (fu.negateAddend)
      c = b.CreateFNeg(c);
    llvm::Value *fma =
        b.CreateIntrinsic(llvm::Intrinsic::fma, {fu.add->getType()},
                          {a, fu.mul->getOperand(1), c});
    fma->takeName(fu.add);
    fu.add->replaceAllUsesWith(fma);
  }
  for (const Fusion &fu : fusions)
    fu.add->eraseFromParent();
  return fusions.size();
}
