//===- GradientRules.h - per-op gradient rules for graph-autodiff -*- C++ -*-===//
//
// One rule per graph op: given the gradients of the op's results, build the
// gradients of its operands in graph ops. graph-autodiff walks the forward
// graph backwards and calls these; they are kept apart so a rule can be read
// (and added) without the traversal around it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_DIALECT_GRAPH_TRANSFORMS_GRADIENTRULES_H
#define TESSERA_LIB_DIALECT_GRAPH_TRANSFORMS_GRADIENTRULES_H

#include "tessera/Dialect/Graph/IR/GraphEmitter.h"

namespace tessera::graph {

/// Whether a gradient flows through operand `index` of `op` at all: float
/// operands of ops with float results, except a batch norm's running
/// statistics (buffers in PyTorch's terms).
bool isDifferentiableOperand(mlir::Operation *op, unsigned index);

/// Builds the gradients of `op`'s operands from `resultGrads` (one per
/// result, null where a result gets none). `operandGrads` has one slot per
/// operand; a slot left null means zero. Returns failure if `op` has no
/// rule (the caller reports it) or a rule could not be built.
mlir::LogicalResult buildGradient(GraphEmitter &e, mlir::Operation *op,
                                  llvm::ArrayRef<mlir::Value> resultGrads,
                                  llvm::MutableArrayRef<mlir::Value> operandGrads);

/// True if buildGradient() knows `op`.
bool hasGradientRule(mlir::Operation *op);

} // namespace tessera::graph

#endif // TESSERA_LIB_DIALECT_GRAPH_TRANSFORMS_GRADIENTRULES_H
