//===- JIT.h - link an executable's native code in memory -------*- C++ -*-===//
//
// One ORC LLJIT setup shared by the host reference runner and the IPU model:
// the executable's relocatable object is linked in process, its calls to
// libm and the C library resolve to this process, and `memrefCopy` (which
// MLIR's lowering of non-contiguous copies calls, normally from MLIR's runner
// utilities) resolves to the runtime's own copy. No MLIR here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_JIT_H
#define TESSERA_RUNTIME_JIT_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Module;
class Target;
namespace orc {
class LLJIT;
} // namespace orc
} // namespace llvm

namespace tessera::runtime {

/// Every packed entry point: one pointer argument per operand.
using PackedEntry = void (*)(void **);

struct ExecutableMetadata;

/// Whether this machine's CPU has every feature the executable's code may
/// use; the error names the missing ones and how to recompile.
llvm::Error checkHostCPU(const ExecutableMetadata &metadata);

/// LLVM's target for this process's triple, the native target initialized;
/// the error says none is built in.
llvm::Expected<const llvm::Target *> lookupHostTarget();

/// `module` optimized (O2) and compiled for `cpu` with `features` (an LLVM
/// feature string, "+avx2,-avx512f,..."): a relocatable object's bytes. The
/// compiler's vertex kernels and the runtime's host reference code both go
/// through it. Each call makes its own target machine: calls on separate
/// threads (each module in its own LLVMContext) are safe. `unrollLoops`
/// false leaves LLVM's loop unroller out of O2 (the vectorizers stay): for
/// code whose loops were unrolled as far as pays before LLVM sees them.
llvm::Expected<std::string> compileToObject(llvm::Module &module, llvm::StringRef cpu,
                                            llvm::StringRef features,
                                            bool unrollLoops = true);

/// Host reference code in LLVM IR, unoptimized (what
/// tessera::compileHostReference translates), optimized and compiled for
/// this machine's CPU: an object for createCodeJIT.
llvm::Expected<std::string> compileReferenceObject(llvm::Module &module);

/// A JIT with `objects` (an executable's code section) linked in.
llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>>
createCodeJIT(llvm::ArrayRef<llvm::StringRef> objects);

/// The functions `objects` define (global, not undefined): the only
/// symbols an executable may name as entries, so that a forged executable
/// cannot call into the process (abort, exit) or the runtime.
std::vector<std::string> definedFunctions(llvm::ArrayRef<llvm::StringRef> objects);

/// The data symbols `objects` define (global, not undefined), with their
/// sizes in bytes: the kernels' signatures.
llvm::StringMap<uint64_t> definedData(llvm::ArrayRef<llvm::StringRef> objects);

/// The packed entry `symbol` of the linked code; the error names the symbol.
llvm::Expected<PackedEntry> lookupEntry(llvm::orc::LLJIT &jit, llvm::StringRef symbol);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_JIT_H
