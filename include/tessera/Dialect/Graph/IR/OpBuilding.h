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

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

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

/// Batch normalisation as PyTorch's train() runs it: `output` normalised with
/// the batch's statistics over every dim but 1 (population variance), and
/// the running statistics moved towards the batch's with PyTorch's
/// `momentum` (new = (1 - momentum) * old + momentum * batch) and the
/// unbiased variance. An N x C x ... input with one value per channel is an
/// error at `loc` (no variance to estimate), as in PyTorch.
struct TrainingBatchNorm {
  mlir::Value output;
  mlir::Value batchMean, batchVar; ///< per channel; the variance biased
  mlir::Value runningMean, runningVar;
};
mlir::FailureOr<TrainingBatchNorm>
createTrainingBatchNorm(mlir::OpBuilder &builder, mlir::Location loc,
                        mlir::Value input, mlir::Value scale, mlir::Value bias,
                        mlir::Value runningMean, mlir::Value runningVar,
                        double momentum, double epsilon);

/// Makes `value` the new content of the global that `loaded` was read from
/// (a running statistic updated in place): the global becomes a mutable
/// buffer (marked graph.buffer: state that is not trained), its loads read
/// the current value, and an ml_program.global_store at the builder's point
/// writes `value`. Returns false (and changes nothing) when `loaded` is not a
/// load of a global. Constant loads are replaced by loads; `replaced` is
/// told of each, so that an importer can update the values it has cached.
bool storeBackToGlobal(
    mlir::OpBuilder &builder, mlir::Location loc, mlir::Value loaded,
    mlir::Value value,
    llvm::function_ref<void(mlir::Value from, mlir::Value to)> replaced);

/// graph.random_uniform of `shape` and `elementType` in [low, high), keyed
/// by the program's random state: `rng.seed` (an i64 global marked
/// graph.hyperparameter, 0 unless the runtime sets it: tessera-run --seed)
/// and `rng.counter` (an i64 buffer the program increments every run, so
/// every run draws fresh numbers and a checkpoint resumes the sequence),
/// both created on first use and read once at the top of the function. Each
/// call gets its own stream.
mlir::FailureOr<mlir::Value> createRandomUniform(mlir::OpBuilder &builder,
                                                 mlir::Location loc,
                                                 mlir::Type elementType,
                                                 llvm::ArrayRef<int64_t> shape,
                                                 double low, double high);

/// The value of the i64 scalar global `name` (created, 0 and marked with
/// the unit attribute `marker`, on first use), loaded once at the top of
/// `func`; with `increment`, the global is stored its value plus one right
/// after. A global of that name the model already has is an error at `at`
/// saying `purpose` ("random numbers") needs it.
mlir::FailureOr<mlir::Value> loadI64StateGlobal(mlir::OpBuilder &builder,
                                                mlir::func::FuncOp func, llvm::StringRef name,
                                                llvm::StringRef marker, bool increment,
                                                mlir::Location at, llvm::StringRef purpose);

/// graph.stochastic_round of an f32 `input` to f16, drawing from the same
/// random state as createRandomUniform (its own stream).
mlir::FailureOr<mlir::Value> createStochasticRound(mlir::OpBuilder &builder,
                                                   mlir::Location loc, mlir::Value input);

/// Dropout in training mode: `output` = input * mask / (1 - ratio), `mask`
/// (i1) true where a uniform draw is >= ratio; 0 <= ratio < 1.
struct Dropout {
  mlir::Value output, mask;
};
mlir::FailureOr<Dropout> createDropout(mlir::OpBuilder &builder, mlir::Location loc,
                                       mlir::Value input, double ratio);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_IR_OPBUILDING_H
