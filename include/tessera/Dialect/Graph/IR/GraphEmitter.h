//===- GraphEmitter.h - terse creation of graph ops for passes --*- C++ -*-===//
//
// The training passes (loss, autodiff, optimizer) and the importers' loss
// operators build many small graph ops.
// GraphEmitter creates each through finishCreatedOp() (type inferred,
// verified, folded) and latches the first failure: after one, every call
// returns a null Value, so a rule reads as arithmetic and checks `failed()`
// once at the end. Failures here are shape bugs in a rule, reported at the
// location the emitter was made with.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_IR_GRAPHEMITTER_H
#define TESSERA_DIALECT_GRAPH_IR_GRAPHEMITTER_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/ArrayRef.h"

namespace tessera::graph {

class GraphEmitter {
public:
  GraphEmitter(mlir::OpBuilder &builder, mlir::Location loc)
      : b(builder), loc(loc) {}

  bool failed() const { return hasFailed; }
  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }

  // Constants of `like`'s element type.
  mlir::Value scalar(mlir::Value like, double v);
  mlir::Value splat(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                    double v);
  mlir::Value constant(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                       llvm::ArrayRef<double> values);

  // Elementwise, NumPy broadcasting.
  mlir::Value add(mlir::Value a, mlir::Value b);
  mlir::Value sub(mlir::Value a, mlir::Value b);
  mlir::Value mul(mlir::Value a, mlir::Value b);
  mlir::Value div(mlir::Value a, mlir::Value b);
  mlir::Value pow(mlir::Value a, mlir::Value b);
  mlir::Value max(mlir::Value a, mlir::Value b);
  mlir::Value mulScalar(mlir::Value a, double v) { return mul(a, scalar(a, v)); }
  mlir::Value addScalar(mlir::Value a, double v) { return add(a, scalar(a, v)); }
  mlir::Value neg(mlir::Value a);
  mlir::Value exp(mlir::Value a);
  mlir::Value log(mlir::Value a);
  mlir::Value sqrt(mlir::Value a);
  mlir::Value abs(mlir::Value a);
  mlir::Value sign(mlir::Value a);
  mlir::Value cos(mlir::Value a);
  mlir::Value sin(mlir::Value a);
  mlir::Value sigmoid(mlir::Value a);
  mlir::Value tanh(mlir::Value a);
  mlir::Value relu(mlir::Value a);
  mlir::Value softplus(mlir::Value a);
  mlir::Value greater(mlir::Value a, mlir::Value b);
  mlir::Value greaterEqual(mlir::Value a, mlir::Value b);
  mlir::Value less(mlir::Value a, mlir::Value b);
  mlir::Value lessEqual(mlir::Value a, mlir::Value b);
  mlir::Value equal(mlir::Value a, mlir::Value b);
  mlir::Value notEqual(mlir::Value a, mlir::Value b);
  mlir::Value logicalAnd(mlir::Value a, mlir::Value b);
  mlir::Value select(mlir::Value cond, mlir::Value onTrue, mlir::Value onFalse);
  mlir::Value cast(mlir::Value a, mlir::Type elementType);

  // Shapes.
  mlir::Value reshape(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value a, llvm::ArrayRef<int64_t> perm);
  mlir::Value expand(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  mlir::Value slice(mlir::Value a, llvm::ArrayRef<int64_t> starts,
                    llvm::ArrayRef<int64_t> limits,
                    llvm::ArrayRef<int64_t> strides);
  /// Elements [start, end) of dimension `axis`.
  mlir::Value sliceAxis(mlir::Value a, int64_t axis, int64_t start, int64_t end);
  /// `parts` joined along `axis` (one part: itself).
  mlir::Value concat(mlir::ValueRange parts, int64_t axis);
  /// Zero padding; negative amounts cut elements off instead.
  mlir::Value padOrCut(mlir::Value a, llvm::ArrayRef<int64_t> low,
                       llvm::ArrayRef<int64_t> high);
  /// Reverses dimension `dim`.
  mlir::Value flip(mlir::Value a, int64_t dim);
  /// Inserts `factor - 1` zeros between neighbouring elements along each
  /// dimension `dims[i]` (size n becomes (n - 1) * factor + 1).
  mlir::Value interleaveZeros(mlir::Value a, llvm::ArrayRef<int64_t> dims,
                              llvm::ArrayRef<int64_t> factors);

  // Reductions and contractions.
  mlir::Value reduceSum(mlir::Value a, llvm::ArrayRef<int64_t> axes,
                        bool keepdims);
  mlir::Value reduceMean(mlir::Value a, llvm::ArrayRef<int64_t> axes,
                         bool keepdims);
  mlir::Value reduceMin(mlir::Value a, llvm::ArrayRef<int64_t> axes,
                        bool keepdims);
  /// Sums `a` over the dimensions NumPy broadcasting added or stretched to
  /// reach its shape from `shape` (the adjoint of broadcasting).
  mlir::Value sumToShape(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  mlir::Value matmul(mlir::Value a, mlir::Value b);
  /// Swaps the last two dimensions.
  mlir::Value transposeLast2(mlir::Value a);
  mlir::Value conv(mlir::Value input, mlir::Value weight,
                   llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> pads,
                   llvm::ArrayRef<int64_t> dilations, int64_t groups);
  mlir::Value softmax(mlir::Value a, int64_t axis);
  /// The transposed convolution (ONNX ConvTranspose, PyTorch's
  /// conv_transpose, a convolution's input gradient) of `input` (N x C x
  /// spatial) with `weight` (C x M/groups x window) onto `outputShape`
  /// (N x M x spatial): zeros between the input's elements (stride),
  /// padding so every output position sees the window positions that reach
  /// it (`padsLow` is the forward convolution's low padding; the high side
  /// follows from the output's shape, which covers output_padding), then a
  /// stride-1 convolution with the window flipped and the channels swapped
  /// within each group.
  mlir::Value convTranspose(mlir::Value input, mlir::Value weight,
                            llvm::ArrayRef<int64_t> outputShape,
                            llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> padsLow,
                            llvm::ArrayRef<int64_t> dilations, int64_t groups);
  mlir::Value logSoftmax(mlir::Value a, int64_t axis);
  /// graph.scatter_add of `updates` at `indices` into a zero tensor of `shape`.
  mlir::Value scatterAdd(mlir::Value updates, mlir::Value indices, int64_t axis,
                         llvm::ArrayRef<int64_t> shape);
  /// The adjoint of graph.gather_elements (torch's scatter_add into zeros):
  /// a zero tensor of `shape` whose element v along `axis` adds every
  /// element of `updates` (the shape of `indices`) whose index is v.
  mlir::Value scatterElementsAdd(mlir::Value updates, mlir::Value indices, int64_t axis,
                                 llvm::ArrayRef<int64_t> shape);

  /// Adds the op the caller created (placeholder result type allowed).
  mlir::Value finish(mlir::Operation *op);
  /// True (and nothing to emit) once an earlier call failed or an operand is
  /// null.
  bool skip(std::initializer_list<mlir::Value> operands);

private:
  /// The value, or null after latching the failure.
  mlir::Value unwrap(mlir::FailureOr<mlir::Value> v);
  mlir::OpBuilder &b;
  mlir::Location loc;
  bool hasFailed = false;
};

/// Shape of a ranked tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_IR_GRAPHEMITTER_H
