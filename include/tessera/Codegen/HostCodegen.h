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
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace tessera {

/// Dialects, bufferization models and LLVM translations codegen needs.
void registerCodegenDialects(mlir::DialectRegistry &registry);

/// linalg phase -> LLVM dialect: externalize weights, bufferize (results to
/// out-params, deallocation), loops, LLVM.
void buildHostLoweringPipeline(mlir::OpPassManager &pm);

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

/// Resolves tessera-compile's --host-cpu: "native" (this machine's CPU and
/// its features: the fastest code, for this kind of machine), "generic" (the
/// architecture's baseline, e.g. x86-64 with SSE2: runs on any host of the
/// architecture), or an LLVM CPU name ("x86-64-v3", "skylake-avx512", ...).
/// An unknown name is an error listing how to choose.
llvm::Expected<HostCPU> resolveHostCPU(llvm::StringRef name);

/// Translates an LLVM-dialect module to LLVM IR, optimizes it (O2) for
/// `cpu` and returns relocatable object files: the host reference code, then
/// (when there are any) the vertex kernels, compiled on two threads. The
/// runtime links them together. Errors are diagnostics on the module.
mlir::FailureOr<std::vector<std::string>> emitHostObjects(mlir::ModuleOp module,
                                                          const HostCPU &cpu);

} // namespace tessera

#endif // TESSERA_CODEGEN_HOSTCODEGEN_H
