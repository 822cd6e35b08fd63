//===- Passes.h - ipu dialect passes ----------------------------*- C++ -*-===//
//
// Tile mapping and the machine-program passes. Each is declared in Passes.td,
// implemented in a file of the same name, and registered by
// registerIPUPasses(). exportMachineProgram turns a mapped module into the
// runtime's MachineProgram (the allocation pass and the executable writer
// share it).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_IPU_TRANSFORMS_PASSES_H
#define TESSERA_DIALECT_IPU_TRANSFORMS_PASSES_H

#include "tessera/Dialect/IPU/IR/IPU.h"
#include "tessera/Runtime/MachineProgram.h"
#include "tessera/Target/IPUTarget.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace tessera::ipu {

#define GEN_PASS_DECL
#include "tessera/Dialect/IPU/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessera/Dialect/IPU/Transforms/Passes.h.inc"

/// The machine program of a mapped module's @main. Weights are numbered in
/// the order of their first load in @main (as codegen-externalize-weights
/// numbers them). Errors are diagnostics.
mlir::FailureOr<runtime::MachineProgram> exportMachineProgram(mlir::ModuleOp module);

/// A padding element's bytes, little-endian (runtime::Variable::padBits);
/// nullopt for an attribute that is not a float or an integer.
std::optional<uint64_t> paddingBits(mlir::TypedAttr padding);

} // namespace tessera::ipu

#endif // TESSERA_DIALECT_IPU_TRANSFORMS_PASSES_H
