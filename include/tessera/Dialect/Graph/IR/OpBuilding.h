//===- OpBuilding.h - importers' way of creating graph ops ------*- C++ -*-===//
//
// Importers create a graph op with a placeholder result type, then call
// finishCreatedOp(): the result type is inferred from the operands and
// attributes, the op is verified and folded. Any inconsistency (a wrong
// shape, a bad attribute) becomes a diagnostic at the op's location and the
// op is erased, so an importer never leaves an invalid op behind.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_IR_OPBUILDING_H
#define TESSERA_DIALECT_GRAPH_IR_OPBUILDING_H

#include "mlir/IR/Builders.h"

/// Unwraps a FailureOr<T> into `var` or returns failure from the caller.
#define TESSERA_ASSIGN_OR_FAIL(var, expr)                                      \
  auto var##OrFailure = (expr);                                                \
  if (::mlir::failed(var##OrFailure))                                          \
    return ::mlir::failure();                                                  \
  auto var = std::move(*var##OrFailure)

namespace tessera::graph {

/// The result type to create an op with when finishCreatedOp() infers it.
mlir::Type placeholderResultType(mlir::MLIRContext *context);

/// Infers the result types of `op` (if it implements InferTypeOpInterface),
/// verifies it and folds it; returns its first result, the folded value, or
/// failure (after a diagnostic; `op` is erased).
mlir::FailureOr<mlir::Value> finishCreatedOp(mlir::OpBuilder &builder,
                                             mlir::Operation *op);

/// A graph.constant of `shape` and `elementType` with every element `v`
/// (bool: v != 0; integers: truncated).
mlir::Value createSplatConstant(mlir::OpBuilder &builder, mlir::Location loc,
                                mlir::Type elementType,
                                llvm::ArrayRef<int64_t> shape, double v);

/// graph.reshape / graph.transpose / graph.cast / graph.expand of `v`,
/// verified and folded like every created op (`v` itself when nothing
/// changes).
mlir::FailureOr<mlir::Value> createReshape(mlir::OpBuilder &builder,
                                           mlir::Location loc, mlir::Value v,
                                           llvm::ArrayRef<int64_t> shape);
mlir::FailureOr<mlir::Value> createTranspose(mlir::OpBuilder &builder,
                                             mlir::Location loc, mlir::Value v,
                                             llvm::ArrayRef<int64_t> perm);
mlir::FailureOr<mlir::Value> createCast(mlir::OpBuilder &builder,
                                        mlir::Location loc, mlir::Value v,
                                        mlir::Type elementType);
mlir::FailureOr<mlir::Value> createExpand(mlir::OpBuilder &builder,
                                          mlir::Location loc, mlir::Value v,
                                          llvm::ArrayRef<int64_t> shape);

/// einsum(`equation`, `operands`) (one or two operands; ellipses, implicit
/// output, repeated labels) as graph ops; errors are reported at `loc`.
mlir::FailureOr<mlir::Value> createEinsum(mlir::OpBuilder &builder,
                                          mlir::Location loc,
                                          llvm::StringRef equation,
                                          mlir::ValueRange operands);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_IR_OPBUILDING_H
