//===- Recurrent.cpp - RNN, GRU and LSTM layers unrolled into graph ops ---===//

#include "tessera/Dialect/Graph/IR/Recurrent.h"

#include "tessera/Dialect/Graph/IR/Graph.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace tessera::graph {

Value applyActivation(GraphEmitter &e, const RecurrentActivation &act, Value x) {
  if (e.skip({x}))
    return {};
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Type type = x.getType();
  StringRef name = act.name;
  if (name == "tanh")
    return e.tanh(x);
  if (name == "sigmoid")
    return e.sigmoid(x);
  if (name == "relu")
    return e.relu(x);
  if (name == "softplus")
    return e.softplus(x);
  if (name == "leakyrelu")
    return e.finish(LeakyReluOp::create(b, loc, type, x, b.getF64FloatAttr(act.alpha)));
  if (name == "elu")
    return e.finish(EluOp::create(b, loc, type, x, b.getF64FloatAttr(act.alpha)));
  if (name == "hardsigmoid")
    return e.finish(HardSigmoidOp::create(b, loc, type, x, b.getF64FloatAttr(act.alpha),
                                          b.getF64FloatAttr(act.beta)));
  if (name == "thresholdedrelu") // x if x > alpha, else 0
    return e.select(e.greater(x, e.scalar(x, act.alpha)), x, e.scalar(x, 0));
  if (name == "affine") // alpha * x + beta
    return e.addScalar(e.mulScalar(x, act.alpha), act.beta);
  if (name == "scaledtanh") // alpha * tanh(beta * x)
    return e.mulScalar(e.tanh(e.mulScalar(x, act.beta)), act.alpha);
  if (name == "softsign") // x / (1 + |x|)
    return e.div(x, e.addScalar(e.abs(x), 1));
  emitError(loc) << "unknown recurrent activation '" << name << "'";
  e.skip({Value()}); // latches the failure
  return {};
}

namespace {

struct DirectionResult {
  SmallVector<Value> ys; // [batch, hidden] per time step, in time order
  Value h, c;            // final states, [batch, hidden]
};

/// Row `index` of `x` along dim 0, without that dim.
Value row(GraphEmitter &e, Value x, int64_t index) {
  Value s = e.sliceAxis(x, 0, index, index + 1);
  if (!s)
    return {};
  return e.reshape(s, shapeOf(x).drop_front());
}

/// Runs direction `d` of the cell over all steps.
DirectionResult runDirection(GraphEmitter &e, const RecurrentLayer &rec, int64_t d,
                             bool reverse) {
  Type elem = rec.elem;
  int64_t hid = rec.hidden, gh = rec.gates() * hid;
  const RecurrentActivation *act = &rec.activations[d * (rec.activations.size() / rec.dirs)];
  bool isGRU = rec.cell == RecurrentCell::GRU, isLSTM = rec.cell == RecurrentCell::LSTM;

  // Input projection for all steps at once, with the biases folded in
  // (GRU with linear_before_reset keeps Rb_h apart: it is scaled by r).
  Value xw = e.matmul(rec.x, e.transpose(row(e, rec.w, d), {1, 0}));
  Value rbH; // GRU linear_before_reset: Rb_h, [hidden]
  if (rec.b) {
    Value bd = row(e, rec.b, d);
    Value wb = e.sliceAxis(bd, 0, 0, gh), rb = e.sliceAxis(bd, 0, gh, 2 * gh);
    Value inputBias = rb;
    if (isGRU && rec.linearBeforeReset) {
      rbH = e.sliceAxis(rb, 0, 2 * hid, 3 * hid);
      inputBias =
          e.concat(ValueRange{e.sliceAxis(rb, 0, 0, 2 * hid), e.splat(elem, {hid}, 0)}, 0);
    }
    xw = e.add(xw, e.add(wb, inputBias));
  }

  // Recurrent weights transposed to [hidden, G*hidden]; GRU's h gate
  // multiplies r * H, not H, so its columns are kept apart.
  Value rt = e.transpose(row(e, rec.r, d), {1, 0});
  Value rGates = rt, rH;
  if (isGRU) {
    rGates = e.sliceAxis(rt, 1, 0, 2 * hid);
    rH = e.sliceAxis(rt, 1, 2 * hid, 3 * hid);
  }

  // LSTM peepholes, each [hidden].
  Value pI, pO, pF;
  if (rec.p) {
    Value pd = row(e, rec.p, d);
    pI = e.sliceAxis(pd, 0, 0, hid);
    pO = e.sliceAxis(pd, 0, hid, 2 * hid);
    pF = e.sliceAxis(pd, 0, 2 * hid, 3 * hid);
  }

  // A missing initial state is zeros: the first step then skips the terms
  // it would multiply (a matmul of a zero constant is wasted IPU work).
  Value h = rec.h0, c = rec.c0;
  bool hZero = !h, cZero = isLSTM && !c;
  h = h ? row(e, h, d) : e.splat(elem, {rec.batch, hid}, 0);
  if (isLSTM)
    c = c ? row(e, c, d) : e.splat(elem, {rec.batch, hid}, 0);

  Value lens = rec.seqLens ? e.reshape(rec.seqLens, {rec.batch, 1}) : Value();
  Value zeros = lens ? e.splat(elem, {rec.batch, hid}, 0) : Value();

  auto clip = [&](Value v) -> Value {
    if (!rec.clip || e.skip({v}))
      return v;
    OpBuilder &b = e.builder();
    return e.finish(ClampOp::create(b, e.location(), v.getType(), v,
                                    b.getF64FloatAttr(-*rec.clip),
                                    b.getF64FloatAttr(*rec.clip)));
  };
  auto gate = [&](Value v, int64_t k) { return e.sliceAxis(v, 1, k * hid, (k + 1) * hid); };
  auto apply = [&](const RecurrentActivation &a, Value pre) {
    return applyActivation(e, a, clip(pre));
  };
  // a + b, or a where b is a skipped zero term.
  auto plus = [&](Value a, Value b) { return b ? e.add(a, b) : a; };

  DirectionResult result;
  result.ys.resize(rec.seq);
  for (int64_t step = 0; step < rec.seq && !e.failed(); ++step) {
    int64_t t = reverse ? rec.seq - 1 - step : step;
    Value xt = row(e, xw, t); // [batch, G*hidden]
    Value hr = hZero ? Value() : e.matmul(h, rGates); // H R^T
    Value newH, newC;
    switch (rec.cell) {
    case RecurrentCell::RNN:
      // H = f(Xt W^T + H R^T + Wb + Rb).
      newH = apply(act[0], plus(xt, hr));
      break;
    case RecurrentCell::GRU: {
      // z, r = f(Xt W^T + H R^T + biases); the candidate is
      // g(Xt Wh^T + (r * H) Rh^T + Rbh + Wbh), or with linear_before_reset
      // g(Xt Wh^T + r * (H Rh^T + Rbh) + Wbh); H = (1 - z) * h~ + z * H.
      Value zrPre = plus(e.sliceAxis(xt, 1, 0, 2 * hid), hr);
      Value z = apply(act[0], gate(zrPre, 0)), r = apply(act[0], gate(zrPre, 1));
      Value recurrent; // null while H is zeros (and there is no Rb_h)
      if (rec.linearBeforeReset) {
        Value lin = hZero ? rbH : plus(e.matmul(h, rH), rbH);
        if (lin)
          recurrent = e.mul(r, lin);
      } else if (!hZero) {
        recurrent = e.matmul(e.mul(r, h), rH);
      }
      Value cand = apply(act[1], plus(gate(xt, 2), recurrent));
      // (1 - z) * h~ + z * H = h~ + z * (H - h~), or h~ - z * h~ from zeros.
      newH = hZero ? e.sub(cand, e.mul(z, cand)) : e.add(cand, e.mul(z, e.sub(h, cand)));
      break;
    }
    case RecurrentCell::LSTM: {
      // i = f(.. + Pi * C), f = f(.. + Pf * C) (1 - i with input_forget),
      // C' = f * C + i * g(c), o = f(.. + Po * C'), H = o * h(C').
      Value pre = plus(xt, hr);
      auto peephole = [&](Value g, Value p, Value state, bool stateZero) {
        return !p || stateZero ? g : e.add(g, e.mul(p, state));
      };
      Value i = apply(act[0], peephole(gate(pre, 0), pI, c, cZero));
      Value add = e.mul(i, apply(act[1], gate(pre, 3)));
      Value keep; // f * C, null while C is zeros (f is then unused)
      if (!cZero) {
        Value f = rec.inputForget ? e.sub(e.scalar(i, 1), i)
                                  : apply(act[0], peephole(gate(pre, 2), pF, c, false));
        keep = e.mul(f, c);
      }
      Value cNext = plus(add, keep);
      Value o = apply(act[0], peephole(gate(pre, 1), pO, cNext, false));
      newH = e.mul(o, applyActivation(e, act[2], cNext));
      newC = cNext;
      break;
    }
    }

    if (lens && t >= rec.unmaskedSteps) {
      // Rows whose sequence has ended keep their state and output zeros.
      Value tv = e.splat(cast<RankedTensorType>(lens.getType()).getElementType(), {}, t);
      Value live = e.less(tv, lens);
      result.ys[t] = e.select(live, newH, zeros);
      h = e.select(live, newH, h);
      if (newC)
        c = e.select(live, newC, c);
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

/// Joins `parts`, each reshaped to `partShape`, along `axis`.
Value stack(GraphEmitter &e, ArrayRef<Value> parts, ArrayRef<int64_t> partShape,
            int64_t axis) {
  SmallVector<Value> reshaped;
  for (Value v : parts)
    reshaped.push_back(e.reshape(v, partShape));
  return e.concat(reshaped, axis);
}

} // namespace

RecurrentResult buildRecurrent(GraphEmitter &e, const RecurrentLayer &rec) {
  int64_t hid = rec.hidden;
  SmallVector<int64_t> yShape{rec.seq, rec.dirs, rec.batch, hid};
  SmallVector<int64_t> stateShape{rec.dirs, rec.batch, hid};
  RecurrentResult out;
  if (rec.seq == 0) {
    // Nothing runs: no outputs per step, the states are the initial ones.
    out.y = e.splat(rec.elem, yShape, 0);
    out.yh = rec.h0 ? rec.h0 : e.splat(rec.elem, stateShape, 0);
    if (rec.cell == RecurrentCell::LSTM)
      out.yc = rec.c0 ? rec.c0 : e.splat(rec.elem, stateShape, 0);
    return out;
  }
  SmallVector<Value> ys, hs, cs;
  for (int64_t d = 0; d < rec.dirs; ++d) {
    DirectionResult r = runDirection(e, rec, d, rec.reverse || d == 1);
    if (e.failed())
      return {};
    // [seq, 1, batch, hidden] per direction.
    ys.push_back(stack(e, r.ys, {1, 1, rec.batch, hid}, 0));
    hs.push_back(r.h);
    if (r.c)
      cs.push_back(r.c);
  }
  out.y = stack(e, ys, {rec.seq, 1, rec.batch, hid}, 1);
  out.yh = stack(e, hs, {1, rec.batch, hid}, 0);
  if (!cs.empty())
    out.yc = stack(e, cs, {1, rec.batch, hid}, 0);
  if (e.failed())
    return {};
  return out;
}

} // namespace tessera::graph
