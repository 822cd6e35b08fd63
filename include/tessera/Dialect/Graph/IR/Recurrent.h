//===- Recurrent.h - RNN, GRU and LSTM layers unrolled into graph ops -*- C++ -*-===//
//
// The graph dialect has no recurrent operator: a recurrent layer is unrolled
// at import time into the ops of one step per time step. Shapes are static,
// so the sequence length is known and the unrolled graph is exact; the IPU
// compiler then sees plain matmuls and elementwise ops it can schedule and
// fuse like any other. One definition serves both importers: ONNX's RNN,
// GRU and LSTM directly, PyTorch's nn.RNN/GRU/LSTM (aten::rnn_*, gru, lstm)
// with their weights reordered into ONNX's gate order.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_IR_RECURRENT_H
#define TESSERA_DIALECT_GRAPH_IR_RECURRENT_H

#include "tessera/Dialect/Graph/IR/GraphEmitter.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace tessera::graph {

enum class RecurrentCell { RNN, GRU, LSTM };

/// An activation function of a recurrent cell, by its ONNX name in lower
/// case (tanh, sigmoid, relu, leakyrelu, thresholdedrelu, hardsigmoid,
/// affine, scaledtanh, elu, softsign, softplus) with its parameters.
struct RecurrentActivation {
  std::string name;
  double alpha = 0, beta = 0;
};

/// One recurrent layer in ONNX's terms: gate orders GRU z, r, h and LSTM
/// i, o, f, c; W [dirs, G*hidden, input], R [dirs, G*hidden, hidden], B
/// [dirs, 2*G*hidden] (input biases, then recurrent), states [dirs, batch,
/// hidden], P [dirs, 3*hidden] (peepholes i, o, f). X is [seq, batch,
/// input]. Optional values are null.
struct RecurrentLayer {
  RecurrentCell cell = RecurrentCell::LSTM;
  int64_t seq = 0, batch = 0, inputSize = 0, hidden = 0, dirs = 1;
  /// One direction that walks the steps from last to first.
  bool reverse = false;
  mlir::Type elem;
  mlir::Value x, w, r, b, seqLens, h0, c0, p;
  /// With sequence lengths: steps before this need no mask (all rows run).
  int64_t unmaskedSteps = 0;
  std::optional<double> clip;
  bool linearBeforeReset = false, inputForget = false;
  /// The activations of direction 0, then of direction 1 (f, g[, h]).
  llvm::SmallVector<RecurrentActivation> activations;

  int64_t gates() const {
    return cell == RecurrentCell::RNN ? 1 : cell == RecurrentCell::GRU ? 3 : 4;
  }
};

/// The most time steps a recurrence is unrolled over: every step is ops of
/// its own, and importers refuse longer sequences before building any.
constexpr int64_t kMaxUnrolledSteps = int64_t(1) << 14;

/// Y [seq, dirs, batch, hidden], Y_h and (LSTM) Y_c [dirs, batch, hidden];
/// null after a failure, which `e` latches.
struct RecurrentResult {
  mlir::Value y, yh, yc;
};

/// The layer, unrolled. Per direction the input projection X W^T (plus both
/// biases, constant over time) is one matmul over all steps; each step adds
/// H R^T and applies the cell's equations. With sequence lengths, a row
/// whose sequence has ended keeps its state and outputs zeros; walking all
/// steps backwards under that mask starts a reverse row at its own
/// length - 1, as ONNX Runtime does.
RecurrentResult buildRecurrent(GraphEmitter &e, const RecurrentLayer &layer);

/// `x` through activation `act` (its name checked by the caller).
mlir::Value applyActivation(GraphEmitter &e, const RecurrentActivation &act, mlir::Value x);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_IR_RECURRENT_H
