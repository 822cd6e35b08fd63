//===- HostCodegen.h - native code for the host reference path --*- C++ -*-===//
//
// The host reference path compiles the whole graph, without tile
// decomposition, to native code for the machine the runtime runs on. It is
// what `tessera-run --reference` executes and what the IPU model is checked
// against. Weights are not embedded: @main takes them as trailing arguments
// (see codegen-externalize-weights) and writes its results to out-params.
//
// The entry point is `_mlir_ciface_main`, taking one pointer to a strided
// memref descriptor {allocated, aligned, offset, sizes[rank], strides[rank]}
// per input, then per weight, then per output.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_CODEGEN_HOSTCODEGEN_H
#define TESSERA_CODEGEN_HOSTCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace tessera {

/// Dialects, bufferization models and LLVM translations codegen needs.
void registerCodegenDialects(mlir::DialectRegistry &registry);

/// The linalg phase's @main made the host reference code's source: one
/// replica's step, the weights its arguments. An executable stores the
/// result (MLIR bytecode) and lowers it only when a run asks for it
/// (compileHostReference).
void buildPrepareHostReferencePipeline(mlir::OpPassManager &pm);

/// linalg phase -> LLVM dialect: buildPrepareHostReferencePipeline, then
/// buildLowerToLLVMPipeline.
void buildHostLoweringPipeline(mlir::OpPassManager &pm, int64_t vectorBits = 512);

/// Bufferization (results to out-params, deallocation), vector
/// contractions (their register tiles of `vectorBits`-wide vectors, see
/// vectorBitsOf), loops, LLVM dialect: what the host reference code and the
/// vertex kernels both go through (the kernels alone need only this).
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm, int64_t vectorBits = 512);

/// Moves the operations of `from` (LLVM dialect) to the end of `into`'s
/// body, for one module of the host reference code and the vertex kernels
/// lowered apart. A function declared in both is kept once (an error if
/// the two declarations differ); any other symbol defined in both is
/// renamed in `from` first. `from` is left empty.
mlir::LogicalResult appendLoweredModule(mlir::ModuleOp into, mlir::ModuleOp from);

/// The CPU native code is generated for: an LLVM CPU name and the CPU
/// features the code may use (recorded in the executable, checked at load).
struct HostCPU {
  std::string name;
  std::vector<std::string> features;
  /// The CPU name's features the code must not use: for "native", those this
  /// machine lacks although its CPU model has them (a virtual machine often
  /// hides some). Naming the CPU alone would enable them.
  std::vector<std::string> disabled;
};

/// The width of `cpu`'s vector registers, which contractions' register
/// tiles are sized for: 512 bits with AVX-512, 256 with AVX, else 128 (SSE,
/// NEON).
int64_t vectorBitsOf(const HostCPU &cpu);

/// Resolves tessera-compile's --host-cpu: "native" (this machine's CPU and
/// its features: the fastest code, for this kind of machine), "generic" (the
/// architecture's baseline, e.g. x86-64 with SSE2: runs on any host of the
/// architecture), or an LLVM CPU name ("x86-64-v3", "skylake-avx512", ...).
/// An unknown name is an error listing how to choose.
llvm::Expected<HostCPU> resolveHostCPU(llvm::StringRef name);

/// An executable's native code.
struct HostCode {
  /// Relocatable objects the IPU model links: the vertex kernels.
  std::vector<std::string> objects;
  /// Each vertex kernel's packed entry as the machine program names it
  /// ("vertex_cs3_0_entry") -> as the code defines it: named by the
  /// kernel's code ("vertex_<32 hex digits>_entry"), so that the same
  /// kernel has the same name, and one cached object, in any program.
  std::map<std::string, std::string> entryNames;
};

/// The persistent kernel cache (tessera-compile's --cache-dir, its
/// kernels/ folder): one native object per vertex kernel, keyed by the
/// kernel's code, the target CPU and the compiler build, written
/// atomically. A compile that finds a kernel there links the object
/// instead of compiling the kernel again. Beside each object, an index
/// entry maps the kernel's code before lowering to the name of its object,
/// so that a kernel found there is not even lowered (takeCachedKernels).
struct KernelCache {
  std::string directory;
  /// The compiler build and the target CPU: part of every entry's key, so
  /// that another build's or another CPU's objects are never used.
  std::string identity;
  /// Filled by takeCachedKernels and emitHostObjects: kernels found (of
  /// which before lowering), and compiled and stored.
  int64_t hits = 0, hitsBeforeLowering = 0, misses = 0;
  /// Why an object could not be stored (the executable is still written).
  std::string warning;
  /// The error of the first entry left unread because someone else could
  /// have written it (runtime::whyUntrusted): the compile then fails.
  std::string refusal;
  /// Kernels found before lowering and taken out of the module: each
  /// kernel's name in the program -> its code's name, and each code's
  /// object.
  std::map<std::string, std::string> foundNames, foundObjects;
  /// Kernels left to lower: each one's key before lowering, by its name in
  /// the program (emitHostObjects stores the index entry once it is named).
  std::map<std::string, std::string> keysBeforeLowering;
};

/// Takes out of `module` (llvm phase, before buildHostLoweringPipeline)
/// each vertex kernel that `cache` holds compiled, as found by its code
/// before lowering, into `cache.foundNames` and `cache.foundObjects`: it is
/// then neither lowered nor compiled. The others' keys go to
/// `cache.keysBeforeLowering`, but for kernels naming another symbol (their
/// text leaves its definition out): those are lowered and looked for by
/// their code only. A damaged or missing entry is a miss.
void takeCachedKernels(mlir::ModuleOp module, KernelCache &cache);

/// Compiles the vertex kernels of an LLVM-dialect module for `cpu`:
/// translated to LLVM IR, optimized (O2) and compiled to objects, or taken
/// from `cache`. Other functions (a host reference @main) are not part of
/// the objects. Errors are diagnostics on the module. `timing`, when given,
/// gets a scope per phase (--mlir-timing).
mlir::FailureOr<HostCode> emitHostObjects(mlir::ModuleOp module, const HostCPU &cpu,
                                          mlir::TimingScope *timing = nullptr,
                                          KernelCache *cache = nullptr);

/// The host reference code (an LLVM-dialect module of @main and its parts,
/// without vertex kernels) as LLVM IR in `context`, with its packed entry
/// `tessera_main`, not yet optimized (runtime::compileReferenceObject
/// optimizes and compiles it for the running machine). Null on failure,
/// reported as a diagnostic on the module.
std::unique_ptr<llvm::Module> translateHostReference(mlir::ModuleOp module,
                                                     llvm::LLVMContext &context);

} // namespace tessera

#endif // TESSERA_CODEGEN_HOSTCODEGEN_H
