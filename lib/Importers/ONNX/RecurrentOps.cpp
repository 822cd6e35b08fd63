//===- RecurrentOps.cpp - ONNX RNN, GRU and LSTM to graph ops -------------===//
//
// Checks an ONNX recurrent node's inputs and attributes and hands the layer
// to graph::buildRecurrent (Recurrent.h), which unrolls it into the ops of
// one step per time step; the TorchScript importer's nn.LSTM, nn.GRU and
// nn.RNN use the same builder.
//
// sequence_lens: a row whose sequence ended (t >= seq_len[b]) keeps its
// state and outputs zeros. Steps where a constant sequence_lens leaves
// every row running have no mask at all.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"
#include "tessera/Dialect/Graph/IR/Recurrent.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include "llvm/ADT/StringExtras.h"

#include <optional>

using namespace mlir;
namespace g = tessera::graph;

namespace tessera::onnx_importer {
namespace {

using Cell = g::RecurrentCell;

/// Inputs in ONNX order (all three cells share the first six).
enum Input { kX = 0, kW, kR, kB, kSeqLens, kInitialH, kInitialC, kP };

//===----------------------------------------------------------------------===//
// Activation functions
//===----------------------------------------------------------------------===//

using Activation = g::RecurrentActivation;

/// The activations ONNX lists for recurrent cells, how many of
/// activation_alpha / activation_beta each consumes, and the defaults
/// (those of the ONNX operator of the same name) when the lists run out.
struct ActivationInfo {
  const char *name;
  int alphas, betas;
  double alpha, beta;
};
constexpr ActivationInfo kActivations[] = {
    {"relu", 0, 0, 0, 0},         {"tanh", 0, 0, 0, 0},
    {"sigmoid", 0, 0, 0, 0},      {"leakyrelu", 1, 0, 0.01, 0},
    {"thresholdedrelu", 1, 0, 1.0, 0}, {"hardsigmoid", 1, 1, 0.2, 0.5},
    {"affine", 1, 1, 1.0, 0.0},   {"scaledtanh", 1, 1, 1.0, 1.0},
    {"elu", 1, 0, 1.0, 0},        {"softsign", 0, 0, 0, 0},
    {"softplus", 0, 0, 0, 0},
};

/// The `perDirection` activations of each of `dirs` directions, in order.
/// activation_alpha/beta are consumed in list order by the functions that
/// take them (as ONNX Runtime reads them); a list of `perDirection` names
/// serves both directions of a bidirectional cell.
FailureOr<SmallVector<Activation>>
parseActivations(NodeImporter &n, int64_t perDirection, int64_t dirs,
                 ArrayRef<const char *> defaults) {
  SmallVector<std::string> names;
  if (const onnx::AttributeProto *a = n.attr("activations")) {
    for (const std::string &s : a->strings())
      names.push_back(s);
  } else {
    for (int64_t d = 0; d < dirs; ++d)
      for (const char *name : defaults)
        names.push_back(name);
  }
  int64_t count = names.size();
  if (count == perDirection && dirs == 2)
    names.append(SmallVector<std::string>(names));
  else if (count != perDirection * dirs)
    return n.error() << "activations lists " << count << " function(s); "
                     << n.opType() << " needs " << perDirection
                     << " per direction (" << perDirection * dirs << " for "
                     << dirs << " direction(s))";
  SmallVector<double> alphas = n.floatsAttr("activation_alpha").value_or(SmallVector<double>());
  SmallVector<double> betas = n.floatsAttr("activation_beta").value_or(SmallVector<double>());
  size_t nextAlpha = 0, nextBeta = 0;
  SmallVector<Activation> out;
  for (const std::string &name : names) {
    std::string lower = llvm::StringRef(name).lower();
    const ActivationInfo *info = llvm::find_if(
        kActivations, [&](const ActivationInfo &i) { return lower == i.name; });
    if (info == std::end(kActivations)) {
      (void)n.unsupported("activation function '" + name + "'");
      return failure();
    }
    Activation act{lower, info->alpha, info->beta};
    if (info->alphas && nextAlpha < alphas.size())
      act.alpha = alphas[nextAlpha++];
    if (info->betas && nextBeta < betas.size())
      act.beta = betas[nextBeta++];
    out.push_back(act);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Shared set-up
//===----------------------------------------------------------------------===//

/// The node's inputs and attributes, checked and with layout=1 undone: X is
/// [seq, batch, input] here whatever the node's layout.
struct Recurrence : g::RecurrentLayer {
  std::string direction;
  bool batchFirst = false;
};

FailureOr<Recurrence> prepare(NodeImporter &n, Cell cell) {
  Recurrence rec;
  rec.cell = cell;
  for (size_t i : {kX, kW, kR})
    if (!n.hasInput(i))
      return n.error() << "needs the inputs X, W and R";
  rec.x = n.input(kX);
  rec.w = n.input(kW);
  rec.r = n.input(kR);
  rec.elem = elementTypeOf(rec.x);
  if (!isa<FloatType>(rec.elem))
    return n.error() << "X must have a floating-point type, got " << rec.elem;

  int64_t layout = n.intAttr("layout", 0);
  if (layout != 0 && layout != 1)
    return n.error() << "layout must be 0 or 1, got " << layout;
  rec.batchFirst = layout == 1;
  if (rankOf(rec.x) != 3)
    return n.error() << "X must have rank 3 ("
                     << (rec.batchFirst ? "batch, seq" : "seq, batch")
                     << ", input), got " << g::formatShape(shapeOf(rec.x));
  if (rec.batchFirst) {
    TESSERA_ASSIGN_OR_FAIL(t, n.transpose(rec.x, {1, 0, 2}));
    rec.x = t;
  }
  Ints xs = shapeOf(rec.x);
  if (xs[0] > g::kMaxUnrolledSteps)
    return n.error() << "a sequence of " << xs[0] << " steps: Tessera unrolls recurrences, "
                     << "over at most " << g::kMaxUnrolledSteps << " steps";
  rec.seq = xs[0];
  rec.batch = xs[1];
  rec.inputSize = xs[2];

  rec.direction = n.stringAttr("direction", "forward");
  if (rec.direction == "bidirectional")
    rec.dirs = 2;
  else if (rec.direction != "forward" && rec.direction != "reverse")
    return n.error() << "direction must be forward, reverse or bidirectional, got '"
                     << rec.direction << "'";

  Ints rs = shapeOf(rec.r);
  if (rs.size() != 3)
    return n.error() << "R must have rank 3 (directions, " << rec.gates()
                     << "*hidden_size, hidden_size), got " << g::formatShape(rs);
  // hidden_size is optional in practice (exporters always set it): R has it.
  rec.hidden = n.intAttr("hidden_size", rs[2]);
  // Bounded, so gates x hidden and the shapes below cannot overflow.
  if (rec.hidden <= 0 || rec.hidden > kMaxAttributeSize)
    return n.error() << "hidden_size must be positive and at most 2^24, got " << rec.hidden;
  int64_t gh = rec.gates() * rec.hidden;

  // Every input's expected shape; a mismatch names the input and both shapes.
  auto check = [&](size_t i, StringRef what, ArrayRef<int64_t> want) -> LogicalResult {
    Value v = n.input(i);
    if (shapeOf(v) != Ints(want))
      return n.error() << what << " has shape " << g::formatShape(shapeOf(v))
                       << "; expected " << g::formatShape(want) << " (X "
                       << g::formatShape(shapeOf(n.input(kX))) << ", "
                       << rec.dirs << " direction(s), hidden_size "
                       << rec.hidden << ")";
    if (elementTypeOf(v) != rec.elem)
      return n.error() << what << " has element type " << elementTypeOf(v)
                       << "; expected X's " << rec.elem;
    return success();
  };
  if (failed(check(kW, "W", {rec.dirs, gh, rec.inputSize})) ||
      failed(check(kR, "R", {rec.dirs, gh, rec.hidden})))
    return failure();
  // States are [directions, batch, hidden], batch-first [batch, directions,
  // hidden]; they are made seq-first like X.
  Ints state = rec.batchFirst ? Ints{rec.batch, rec.dirs, rec.hidden}
                              : Ints{rec.dirs, rec.batch, rec.hidden};
  if (n.hasInput(kB)) {
    if (failed(check(kB, "B", {rec.dirs, 2 * gh})))
      return failure();
    rec.b = n.input(kB);
  }
  if (n.hasInput(kInitialH)) {
    if (failed(check(kInitialH, "initial_h", state)))
      return failure();
    rec.h0 = n.input(kInitialH);
  }
  if (cell == Cell::LSTM && n.hasInput(kInitialC)) {
    if (failed(check(kInitialC, "initial_c", state)))
      return failure();
    rec.c0 = n.input(kInitialC);
  }
  if (cell == Cell::LSTM && n.hasInput(kP)) {
    if (failed(check(kP, "P", {rec.dirs, 3 * rec.hidden})))
      return failure();
    rec.p = n.input(kP);
  }
  if (rec.batchFirst) {
    for (Value *v : {&rec.h0, &rec.c0}) {
      if (!*v)
        continue;
      TESSERA_ASSIGN_OR_FAIL(t, n.transpose(*v, {1, 0, 2}));
      *v = t;
    }
  }

  rec.unmaskedSteps = rec.seq;
  if (n.hasInput(kSeqLens)) {
    Value lens = n.input(kSeqLens);
    if (shapeOf(lens) != Ints{rec.batch} || !isa<IntegerType>(elementTypeOf(lens)))
      return n.error() << "sequence_lens must be [" << rec.batch
                       << "] integers (one per batch row), got "
                       << lens.getType();
    rec.seqLens = lens;
    rec.unmaskedSteps = 0;
    if (DenseElementsAttr c = n.constantInput(kSeqLens)) {
      int64_t shortest = rec.seq;
      for (const APInt &v : c.getValues<APInt>()) {
        int64_t len = v.getSExtValue();
        if (len < 0 || len > rec.seq)
          return n.error() << "sequence_lens holds " << len
                           << ", outside [0, " << rec.seq << "]";
        shortest = std::min(shortest, len);
      }
      rec.unmaskedSteps = shortest;
      // Every row runs the whole sequence: nothing to mask.
      if (shortest == rec.seq)
        rec.seqLens = Value();
    }
  }

  if (n.hasAttr("clip")) {
    double clip = n.floatAttr("clip", 0);
    if (!(clip > 0))
      return n.error() << "clip must be positive, got " << clip;
    rec.clip = clip;
  }
  rec.linearBeforeReset = n.intAttr("linear_before_reset", 0) != 0;
  rec.inputForget = n.intAttr("input_forget", 0) != 0;

  SmallVector<const char *> defaults;
  if (cell == Cell::RNN)
    defaults = {"Tanh"};
  else if (cell == Cell::GRU)
    defaults = {"Sigmoid", "Tanh"};
  else
    defaults = {"Sigmoid", "Tanh", "Tanh"};
  TESSERA_ASSIGN_OR_FAIL(acts, parseActivations(n, defaults.size(), rec.dirs, defaults));
  rec.activations = acts;
  return rec;
}

LogicalResult convertRecurrent(NodeImporter &n, Cell cell) {
  TESSERA_ASSIGN_OR_FAIL(rec, prepare(n, cell));
  rec.reverse = rec.direction == "reverse";
  g::GraphEmitter e(n.builder(), n.loc());
  g::RecurrentResult r = g::buildRecurrent(e, rec);
  Value y = r.y, yh = r.yh, yc = r.yc;
  if (rec.batchFirst) {
    // Y [batch, seq, dirs, hidden]; Y_h, Y_c [batch, dirs, hidden].
    y = e.transpose(y, {2, 0, 1, 3});
    yh = e.transpose(yh, {1, 0, 2});
    if (yc)
      yc = e.transpose(yc, {1, 0, 2});
  }
  if (e.failed())
    return n.error() << "could not unroll the recurrence";
  if (cell == Cell::LSTM)
    return n.setOutputs({y, yh, yc});
  return n.setOutputs({y, yh});
}

LogicalResult rnn(NodeImporter &n) { return convertRecurrent(n, Cell::RNN); }
LogicalResult gru(NodeImporter &n) { return convertRecurrent(n, Cell::GRU); }
LogicalResult lstm(NodeImporter &n) { return convertRecurrent(n, Cell::LSTM); }

// Opset 7 dropped the output_sequence attribute (Y is always computed); 14
// added layout, which the converters read at any opset (it defaults to 0).
const OpConverter kRecurrentConverters[] = {
    {"RNN", 7, rnn},
    {"GRU", 7, gru},
    {"LSTM", 7, lstm},
};

} // namespace

ArrayRef<OpConverter> recurrentConverters() { return kRecurrentConverters; }

} // namespace tessera::onnx_importer
