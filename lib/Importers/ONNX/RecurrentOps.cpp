//===- RecurrentOps.cpp - ONNX RNN, GRU and LSTM to graph ops -------------===//
//
// The graph dialect has no recurrent operator: RNN, GRU and LSTM are
// unrolled here, at import time, into the ops of one step per time step.
// Shapes are static, so the sequence length is known and the unrolled graph
// is exact; the IPU compiler then sees plain matmuls and elementwise ops it
// can schedule and fuse like any other.
//
// Per direction the input projection X * W^T (plus both biases, which are
// constant over time) is one matmul over all steps, [seq, batch, G*hidden].
// Each step then adds H * R^T, splits the G gates along the last axis and
// applies the cell's equations (ONNX operator spec, gate orders: GRU z, r, h;
// LSTM i, o, f, c). A reverse direction walks the steps from last to first.
//
// sequence_lens: a row whose sequence ended (t >= seq_len[b]) keeps its
// state and outputs zeros, done with graph.select on a per-step mask
// `t < seq_len`. Walking all steps backwards under that mask starts a
// reverse row at its own seq_len[b] - 1, as ONNX Runtime does. Steps where
// a constant sequence_lens leaves every row running have no mask at all.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include "llvm/ADT/StringExtras.h"

#include <optional>

using namespace mlir;
namespace g = tessera::graph;

namespace tessera::onnx_importer {
namespace {

enum class Cell { RNN, GRU, LSTM };

/// Inputs in ONNX order (all three cells share the first six).
enum Input { kX = 0, kW, kR, kB, kSeqLens, kInitialH, kInitialC, kP };

//===----------------------------------------------------------------------===//
// Activation functions
//===----------------------------------------------------------------------===//

struct Activation {
  std::string name; // lower case
  double alpha = 0, beta = 0;
};

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

FailureOr<Value> activate(NodeImporter &n, const Activation &act, Value x) {
  Type elem = elementTypeOf(x);
  Type type = x.getType();
  Builder &b = n.builder();
  StringRef name = act.name;
  if (name == "tanh")
    return n.build<g::TanhOp>(type, x);
  if (name == "sigmoid")
    return n.build<g::SigmoidOp>(type, x);
  if (name == "relu")
    return n.build<g::ReluOp>(type, x);
  if (name == "softplus")
    return n.build<g::SoftplusOp>(type, x);
  if (name == "leakyrelu")
    return n.build<g::LeakyReluOp>(type, x, b.getF64FloatAttr(act.alpha));
  if (name == "elu")
    return n.build<g::EluOp>(type, x, b.getF64FloatAttr(act.alpha));
  if (name == "hardsigmoid")
    return n.build<g::HardSigmoidOp>(type, x, b.getF64FloatAttr(act.alpha),
                                     b.getF64FloatAttr(act.beta));
  if (name == "thresholdedrelu") {
    // x if x > alpha, else 0.
    TESSERA_ASSIGN_OR_FAIL(above, n.infer<g::GreaterOp>(x, n.scalar(elem, act.alpha)));
    return n.infer<g::SelectOp>(above, x, n.scalar(elem, 0));
  }
  if (name == "affine") {
    // alpha * x + beta.
    TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(x, n.scalar(elem, act.alpha)));
    return n.infer<g::AddOp>(scaled, n.scalar(elem, act.beta));
  }
  if (name == "scaledtanh") {
    // alpha * tanh(beta * x).
    TESSERA_ASSIGN_OR_FAIL(inner, n.infer<g::MulOp>(x, n.scalar(elem, act.beta)));
    TESSERA_ASSIGN_OR_FAIL(t, n.build<g::TanhOp>(type, inner));
    return n.infer<g::MulOp>(t, n.scalar(elem, act.alpha));
  }
  if (name == "softsign") {
    // x / (1 + |x|).
    TESSERA_ASSIGN_OR_FAIL(a, n.build<g::AbsOp>(type, x));
    TESSERA_ASSIGN_OR_FAIL(d, n.infer<g::AddOp>(a, n.scalar(elem, 1)));
    return n.infer<g::DivOp>(x, d);
  }
  // parseActivations admits only the names above.
  return n.unsupported("activation function '" + act.name + "'");
}

//===----------------------------------------------------------------------===//
// Shared set-up
//===----------------------------------------------------------------------===//

/// Row `index` of `x` along dim 0, without that dim.
FailureOr<Value> row(NodeImporter &n, Value x, int64_t index) {
  TESSERA_ASSIGN_OR_FAIL(s, n.sliceAxis(x, 0, index, index + 1));
  Ints shape = shapeOf(x);
  return n.reshape(s, ArrayRef<int64_t>(shape).drop_front());
}

/// The node's inputs and attributes, checked and with layout=1 undone: X is
/// [seq, batch, input] here whatever the node's layout.
struct Recurrence {
  Cell cell;
  int64_t gates = 0;
  int64_t seq = 0, batch = 0, inputSize = 0, hidden = 0, dirs = 1;
  std::string direction;
  bool batchFirst = false;
  Type elem;
  Value x, w, r, b, seqLens, h0, c0, p;
  /// With a constant sequence_lens: steps before this need no mask.
  int64_t unmaskedSteps = 0;
  std::optional<double> clip;
  bool linearBeforeReset = false, inputForget = false;
  /// perDirection activations for direction 0, then for direction 1.
  SmallVector<Activation> activations;
};

FailureOr<Recurrence> prepare(NodeImporter &n, Cell cell) {
  Recurrence rec;
  rec.cell = cell;
  rec.gates = cell == Cell::RNN ? 1 : cell == Cell::GRU ? 3 : 4;
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
    return n.error() << "R must have rank 3 (directions, " << rec.gates
                     << "*hidden_size, hidden_size), got " << g::formatShape(rs);
  // hidden_size is optional in practice (exporters always set it): R has it.
  rec.hidden = n.intAttr("hidden_size", rs[2]);
  if (rec.hidden <= 0)
    return n.error() << "hidden_size must be positive, got " << rec.hidden;
  int64_t gh = rec.gates * rec.hidden;

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

//===----------------------------------------------------------------------===//
// One direction
//===----------------------------------------------------------------------===//

struct DirectionResult {
  SmallVector<Value> ys; // [batch, hidden] per time step, in time order
  Value h, c;            // final states, [batch, hidden]
};

/// Runs direction `d` of the cell over all steps.
FailureOr<DirectionResult> runDirection(NodeImporter &n, const Recurrence &rec,
                                        int64_t d, bool reverse) {
  Type elem = rec.elem;
  int64_t hid = rec.hidden, gh = rec.gates * hid;
  const Activation *act = &rec.activations[d * (rec.activations.size() / rec.dirs)];

  // Input projection for all steps at once, with the biases folded in
  // (GRU with linear_before_reset keeps Rb_h apart: it is scaled by r).
  TESSERA_ASSIGN_OR_FAIL(wd, row(n, rec.w, d));
  TESSERA_ASSIGN_OR_FAIL(wt, n.transpose(wd, {1, 0}));
  TESSERA_ASSIGN_OR_FAIL(xw, n.infer<g::MatmulOp>(rec.x, wt));
  Value rbH; // GRU linear_before_reset: Rb_h, [hidden]
  if (rec.b) {
    TESSERA_ASSIGN_OR_FAIL(bd, row(n, rec.b, d));
    TESSERA_ASSIGN_OR_FAIL(wb, n.sliceAxis(bd, 0, 0, gh));
    TESSERA_ASSIGN_OR_FAIL(rb, n.sliceAxis(bd, 0, gh, 2 * gh));
    Value inputBias = rb;
    if (rec.cell == Cell::GRU && rec.linearBeforeReset) {
      TESSERA_ASSIGN_OR_FAIL(zr, n.sliceAxis(rb, 0, 0, 2 * hid));
      TESSERA_ASSIGN_OR_FAIL(h, n.sliceAxis(rb, 0, 2 * hid, 3 * hid));
      rbH = h;
      TESSERA_ASSIGN_OR_FAIL(
          cat, n.infer<g::ConcatOp>(ValueRange{zr, n.splat(elem, {hid}, 0)},
                                    n.builder().getI64IntegerAttr(0)));
      inputBias = cat;
    }
    TESSERA_ASSIGN_OR_FAIL(bias, n.infer<g::AddOp>(wb, inputBias));
    TESSERA_ASSIGN_OR_FAIL(biased, n.infer<g::AddOp>(xw, bias));
    xw = biased;
  }

  // Recurrent weights transposed to [hidden, G*hidden]; GRU's h gate
  // multiplies r * H, not H, so its columns are kept apart.
  TESSERA_ASSIGN_OR_FAIL(rd, row(n, rec.r, d));
  TESSERA_ASSIGN_OR_FAIL(rt, n.transpose(rd, {1, 0}));
  Value rGates = rt, rH;
  if (rec.cell == Cell::GRU) {
    TESSERA_ASSIGN_OR_FAIL(zr, n.sliceAxis(rt, 1, 0, 2 * hid));
    TESSERA_ASSIGN_OR_FAIL(h, n.sliceAxis(rt, 1, 2 * hid, 3 * hid));
    rGates = zr;
    rH = h;
  }

  // LSTM peepholes, each [hidden].
  Value pI, pO, pF;
  if (rec.p) {
    TESSERA_ASSIGN_OR_FAIL(pd, row(n, rec.p, d));
    TESSERA_ASSIGN_OR_FAIL(i, n.sliceAxis(pd, 0, 0, hid));
    TESSERA_ASSIGN_OR_FAIL(o, n.sliceAxis(pd, 0, hid, 2 * hid));
    TESSERA_ASSIGN_OR_FAIL(f, n.sliceAxis(pd, 0, 2 * hid, 3 * hid));
    pI = i;
    pO = o;
    pF = f;
  }

  // A missing initial state is zeros: the first step then skips the terms
  // it would multiply (a matmul of a zero constant is wasted IPU work).
  Value h = rec.h0, c = rec.c0;
  bool hZero = !h, cZero = rec.cell == Cell::LSTM && !c;
  if (h) {
    TESSERA_ASSIGN_OR_FAIL(v, row(n, h, d));
    h = v;
  } else {
    h = n.splat(elem, {rec.batch, hid}, 0);
  }
  if (rec.cell == Cell::LSTM) {
    if (c) {
      TESSERA_ASSIGN_OR_FAIL(v, row(n, c, d));
      c = v;
    } else {
      c = n.splat(elem, {rec.batch, hid}, 0);
    }
  }

  Value lens; // [batch, 1]
  if (rec.seqLens) {
    TESSERA_ASSIGN_OR_FAIL(l, n.reshape(rec.seqLens, {rec.batch, 1}));
    lens = l;
  }
  Value zeros = lens ? n.splat(elem, {rec.batch, hid}, 0) : Value();

  auto clip = [&](Value v) -> FailureOr<Value> {
    if (!rec.clip)
      return v;
    Builder &b = n.builder();
    return n.build<g::ClampOp>(v.getType(), v, b.getF64FloatAttr(-*rec.clip),
                               b.getF64FloatAttr(*rec.clip));
  };
  auto gate = [&](Value v, int64_t k) { return n.sliceAxis(v, 1, k * hid, (k + 1) * hid); };
  // f(clip(pre)).
  auto apply = [&](const Activation &a, Value pre) -> FailureOr<Value> {
    TESSERA_ASSIGN_OR_FAIL(clipped, clip(pre));
    return activate(n, a, clipped);
  };

  // a + b, or a where b is a skipped zero term.
  auto plus = [&](Value a, Value b) -> FailureOr<Value> {
    if (!b)
      return a;
    return n.infer<g::AddOp>(a, b);
  };

  DirectionResult result;
  result.ys.resize(rec.seq);
  for (int64_t step = 0; step < rec.seq; ++step) {
    int64_t t = reverse ? rec.seq - 1 - step : step;
    TESSERA_ASSIGN_OR_FAIL(xt, row(n, xw, t)); // [batch, G*hidden]
    Value hr; // H R^T, null while H is zeros
    if (!hZero) {
      TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::MatmulOp>(h, rGates));
      hr = v;
    }
    Value newH, newC;
    switch (rec.cell) {
    case Cell::RNN: {
      // H = f(Xt W^T + H R^T + Wb + Rb).
      TESSERA_ASSIGN_OR_FAIL(pre, plus(xt, hr));
      TESSERA_ASSIGN_OR_FAIL(v, apply(act[0], pre));
      newH = v;
      break;
    }
    case Cell::GRU: {
      // z, r = f(Xt W^T + H R^T + biases); the candidate is
      // g(Xt Wh^T + (r * H) Rh^T + Rbh + Wbh), or with linear_before_reset
      // g(Xt Wh^T + r * (H Rh^T + Rbh) + Wbh); H = (1 - z) * h~ + z * H.
      TESSERA_ASSIGN_OR_FAIL(xzr, n.sliceAxis(xt, 1, 0, 2 * hid));
      TESSERA_ASSIGN_OR_FAIL(xh, gate(xt, 2));
      TESSERA_ASSIGN_OR_FAIL(zrPre, plus(xzr, hr));
      TESSERA_ASSIGN_OR_FAIL(zPre, gate(zrPre, 0));
      TESSERA_ASSIGN_OR_FAIL(rPre, gate(zrPre, 1));
      TESSERA_ASSIGN_OR_FAIL(z, apply(act[0], zPre));
      TESSERA_ASSIGN_OR_FAIL(r, apply(act[0], rPre));
      Value recurrent; // null while H is zeros (and there is no Rb_h)
      if (rec.linearBeforeReset) {
        Value lin = rbH;
        if (!hZero) {
          TESSERA_ASSIGN_OR_FAIL(hh, n.infer<g::MatmulOp>(h, rH));
          TESSERA_ASSIGN_OR_FAIL(withBias, plus(hh, rbH));
          lin = withBias;
        }
        if (lin) {
          TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::MulOp>(r, lin));
          recurrent = v;
        }
      } else if (!hZero) {
        TESSERA_ASSIGN_OR_FAIL(rh, n.infer<g::MulOp>(r, h));
        TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::MatmulOp>(rh, rH));
        recurrent = v;
      }
      TESSERA_ASSIGN_OR_FAIL(candPre, plus(xh, recurrent));
      TESSERA_ASSIGN_OR_FAIL(cand, apply(act[1], candPre));
      // (1 - z) * h~ + z * H = h~ + z * (H - h~), or h~ - z * h~ from zeros.
      if (hZero) {
        TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(z, cand));
        TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::SubOp>(cand, scaled));
        newH = v;
      } else {
        TESSERA_ASSIGN_OR_FAIL(diff, n.infer<g::SubOp>(h, cand));
        TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(z, diff));
        TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::AddOp>(cand, scaled));
        newH = v;
      }
      break;
    }
    case Cell::LSTM: {
      // i = f(.. + Pi * C), f = f(.. + Pf * C) (1 - i with input_forget),
      // C' = f * C + i * g(c), o = f(.. + Po * C'), H = o * h(C').
      TESSERA_ASSIGN_OR_FAIL(pre, plus(xt, hr));
      TESSERA_ASSIGN_OR_FAIL(iPre, gate(pre, 0));
      TESSERA_ASSIGN_OR_FAIL(oPre, gate(pre, 1));
      TESSERA_ASSIGN_OR_FAIL(cPre, gate(pre, 3));
      auto peephole = [&](Value g, Value p, Value state,
                          bool stateZero) -> FailureOr<Value> {
        if (!p || stateZero)
          return g;
        TESSERA_ASSIGN_OR_FAIL(ps, n.infer<g::MulOp>(p, state));
        return n.infer<g::AddOp>(g, ps);
      };
      TESSERA_ASSIGN_OR_FAIL(iPeep, peephole(iPre, pI, c, cZero));
      TESSERA_ASSIGN_OR_FAIL(i, apply(act[0], iPeep));
      TESSERA_ASSIGN_OR_FAIL(cand, apply(act[1], cPre));
      TESSERA_ASSIGN_OR_FAIL(add, n.infer<g::MulOp>(i, cand));
      Value keep; // f * C, null while C is zeros (f is then unused)
      if (!cZero) {
        Value f;
        if (rec.inputForget) {
          TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::SubOp>(n.scalar(elem, 1), i));
          f = v;
        } else {
          TESSERA_ASSIGN_OR_FAIL(fPre, gate(pre, 2));
          TESSERA_ASSIGN_OR_FAIL(fPeep, peephole(fPre, pF, c, false));
          TESSERA_ASSIGN_OR_FAIL(v, apply(act[0], fPeep));
          f = v;
        }
        TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::MulOp>(f, c));
        keep = v;
      }
      TESSERA_ASSIGN_OR_FAIL(cNext, plus(add, keep));
      TESSERA_ASSIGN_OR_FAIL(oPeep, peephole(oPre, pO, cNext, false));
      TESSERA_ASSIGN_OR_FAIL(o, apply(act[0], oPeep));
      TESSERA_ASSIGN_OR_FAIL(hc, activate(n, act[2], cNext));
      TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::MulOp>(o, hc));
      newH = v;
      newC = cNext;
      break;
    }
    }

    if (lens && t >= rec.unmaskedSteps) {
      // Rows whose sequence has ended keep their state and output zeros.
      Value tv = n.splat(elementTypeOf(lens), {}, t);
      TESSERA_ASSIGN_OR_FAIL(live, n.infer<g::LessOp>(tv, lens));
      TESSERA_ASSIGN_OR_FAIL(y, n.infer<g::SelectOp>(live, newH, zeros));
      TESSERA_ASSIGN_OR_FAIL(hKept, n.infer<g::SelectOp>(live, newH, h));
      result.ys[t] = y;
      h = hKept;
      if (newC) {
        TESSERA_ASSIGN_OR_FAIL(cKept, n.infer<g::SelectOp>(live, newC, c));
        c = cKept;
      }
    } else {
      result.ys[t] = newH;
      h = newH;
      if (newC)
        c = newC;
    }
    hZero = cZero = false;
  }
  result.h = h;
  result.c = c;
  return result;
}

//===----------------------------------------------------------------------===//
// The converters
//===----------------------------------------------------------------------===//

/// Joins `parts`, each reshaped to `partShape`, along `axis`.
FailureOr<Value> stack(NodeImporter &n, ArrayRef<Value> parts,
                       ArrayRef<int64_t> partShape, int64_t axis) {
  SmallVector<Value> reshaped;
  for (Value v : parts) {
    TESSERA_ASSIGN_OR_FAIL(r, n.reshape(v, partShape));
    reshaped.push_back(r);
  }
  if (reshaped.size() == 1)
    return reshaped.front();
  return n.infer<g::ConcatOp>(ValueRange(reshaped),
                              n.builder().getI64IntegerAttr(axis));
}

LogicalResult convertRecurrent(NodeImporter &n, Cell cell) {
  TESSERA_ASSIGN_OR_FAIL(rec, prepare(n, cell));
  int64_t hid = rec.hidden;
  Ints yShape = {rec.seq, rec.dirs, rec.batch, hid};
  Ints stateShape = {rec.dirs, rec.batch, hid};

  Value y, yh, yc;
  if (rec.seq == 0) {
    // Nothing runs: no outputs per step, the states are the initial ones.
    y = n.splat(rec.elem, yShape, 0);
    yh = rec.h0 ? rec.h0 : n.splat(rec.elem, stateShape, 0);
    yc = rec.c0 ? rec.c0 : n.splat(rec.elem, stateShape, 0);
  } else {
    SmallVector<Value> ys, hs, cs;
    for (int64_t d = 0; d < rec.dirs; ++d) {
      bool reverse = rec.direction == "reverse" || d == 1;
      TESSERA_ASSIGN_OR_FAIL(r, runDirection(n, rec, d, reverse));
      // [seq, 1, batch, hidden] per direction.
      TESSERA_ASSIGN_OR_FAIL(dirY, stack(n, r.ys, {1, 1, rec.batch, hid}, 0));
      ys.push_back(dirY);
      hs.push_back(r.h);
      if (r.c)
        cs.push_back(r.c);
    }
    TESSERA_ASSIGN_OR_FAIL(allY, stack(n, ys, {rec.seq, 1, rec.batch, hid}, 1));
    TESSERA_ASSIGN_OR_FAIL(allH, stack(n, hs, {1, rec.batch, hid}, 0));
    y = allY;
    yh = allH;
    if (!cs.empty()) {
      TESSERA_ASSIGN_OR_FAIL(allC, stack(n, cs, {1, rec.batch, hid}, 0));
      yc = allC;
    }
  }

  if (rec.batchFirst) {
    // Y [batch, seq, dirs, hidden]; Y_h, Y_c [batch, dirs, hidden].
    TESSERA_ASSIGN_OR_FAIL(yt, n.transpose(y, {2, 0, 1, 3}));
    TESSERA_ASSIGN_OR_FAIL(ht, n.transpose(yh, {1, 0, 2}));
    y = yt;
    yh = ht;
    if (yc) {
      TESSERA_ASSIGN_OR_FAIL(ct, n.transpose(yc, {1, 0, 2}));
      yc = ct;
    }
  }
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
