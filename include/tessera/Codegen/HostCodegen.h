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

#include <string>

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

/// Translates an LLVM-dialect module to LLVM IR, optimizes it (O2) for the
/// host CPU and returns the relocatable object file's bytes. Errors are
/// diagnostics on the module.
mlir::FailureOr<std::string> emitHostObject(mlir::ModuleOp module);

} // namespace tessera

#endif // TESSERA_CODEGEN_HOSTCODEGEN_H
