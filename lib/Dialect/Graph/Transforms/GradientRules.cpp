//===- GradientRules.cpp - per-op gradient rules for graph-autodiff ------===//
//
// Each rule builds, in graph ops, the vector-Jacobian product of one op.
// Rules reuse the forward op's operands and results (so nothing the backward
// needs is recomputed) and express every gradient with ops tile mapping
// already plans: a convolution's input and weight gradients are
// convolutions, pooling gradients are the input gradient of a depthwise
// convolution with constant windows, and broadcasting's adjoint is a sum.
//
// Where PyTorch picks one of several valid subgradients, the rules follow
// it: relu'(0) = 0, a max pool's gradient goes to the first maximum of its
// window, clamp passes the gradient at its bounds.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <numeric>

using namespace mlir;

namespace tessera::graph {
namespace {

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

bool isFloat(Value v) { return isa<FloatType>(elementOf(v)); }

SmallVector<int64_t> iota(int64_t from, int64_t to) {
  return llvm::to_vector(llvm::seq<int64_t>(from, to));
}

SmallVector<int64_t> inversePermutation(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return inverse;
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// Views of a window op's attributes (the caller keeps them alive).
struct ConvGeometry {
  ArrayRef<int64_t> strides, pads, dilations;
  int64_t groups;
  int64_t spatialRank() const { return strides.size(); }
};

/// Gradient of a convolution's input: the transposed convolution of the
/// output gradient with the weight, onto the input's shape.
Value convInputGradient(GraphEmitter &e, Value grad, Value weight,
                        ArrayRef<int64_t> inputShape, const ConvGeometry &c) {
  return e.convTranspose(grad, weight, inputShape, c.strides, c.pads.take_front(c.spatialRank()),
                         c.dilations, c.groups);
}

/// Gradient of a convolution's weight: for each group, the correlation of
/// the input (samples as channels) with the output gradient (samples as
/// channels), the forward stride becoming the dilation.
Value convWeightGradient(GraphEmitter &e, Value input, Value grad,
                         ArrayRef<int64_t> weightShape, const ConvGeometry &c) {
  int64_t n = c.spatialRank();
  ArrayRef<int64_t> x = shapeOf(input), g = shapeOf(grad);
  int64_t batch = x[0], channels = x[1], groups = c.groups;
  int64_t cg = channels / groups, m = g[1], mg = m / groups;
  // x: N x C x H -> (N, G, Cg, H) -> (Cg, G, N, H) -> Cg x (G*N) x H.
  SmallVector<int64_t> xg{batch, groups, cg};
  xg.append(x.begin() + 2, x.end());
  SmallVector<int64_t> xperm{2, 1, 0};
  xperm.append(iota(3, 3 + n));
  SmallVector<int64_t> xs{cg, groups * batch};
  xs.append(x.begin() + 2, x.end());
  Value xt = e.reshape(e.transpose(e.reshape(input, xg), xperm), xs);
  // g: N x M x O -> (N, G, Mg, O) -> (G, Mg, N, O) -> M x N x O.
  SmallVector<int64_t> gg{batch, groups, mg};
  gg.append(g.begin() + 2, g.end());
  SmallVector<int64_t> gperm{1, 2, 0};
  gperm.append(iota(3, 3 + n));
  SmallVector<int64_t> gs{m, batch};
  gs.append(g.begin() + 2, g.end());
  Value gt = e.reshape(e.transpose(e.reshape(grad, gg), gperm), gs);
  Value dw = e.conv(xt, gt, c.dilations, c.pads, c.strides, groups);
  if (e.skip({dw}))
    return {};
  // Input rows past the last window (floor in the output size) give extra
  // kernel positions: cut them.
  SmallVector<int64_t> starts(n + 2, 0), limits(shapeOf(dw)),
      strides(n + 2, 1);
  for (int64_t i = 0; i < n; ++i)
    limits[i + 2] = weightShape[i + 2];
  if (ArrayRef<int64_t>(limits) != shapeOf(dw))
    dw = e.slice(dw, starts, limits, strides);
  SmallVector<int64_t> back{1, 0};
  back.append(iota(2, 2 + n));
  return e.transpose(dw, back);
}

/// Pads that make a window op produce `outShape` from `inShape` even in
/// ceil mode (where the last window may reach past the trailing pad).
SmallVector<int64_t> windowPads(ArrayRef<int64_t> inShape,
                                ArrayRef<int64_t> outShape,
                                ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                                ArrayRef<int64_t> pads,
                                ArrayRef<int64_t> dilations) {
  size_t n = kernel.size();
  SmallVector<int64_t> result(pads);
  for (size_t i = 0; i < n; ++i) {
    int64_t span = dilations[i] * (kernel[i] - 1) + 1;
    int64_t needed = (outShape[i + 2] - 1) * strides[i] + span;
    int64_t have = inShape[i + 2] + pads[i] + pads[i + n];
    result[i + n] += std::max<int64_t>(0, needed - have);
  }
  return result;
}

/// A C*R x 1 x K depthwise weight whose output channel c*R + r picks window
/// position r (R = the window's size): convolving with it lays each window
/// out along a channel axis.
Value windowPicker(GraphEmitter &e, Type elem, int64_t channels,
                   ArrayRef<int64_t> kernel) {
  int64_t r = numElements(kernel);
  SmallVector<int64_t> shape{channels * r, 1};
  shape.append(kernel.begin(), kernel.end());
  SmallVector<double> values(channels * r * r, 0.0);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < r; ++k)
      values[(c * r + k) * r + k] = 1.0;
  return e.constant(elem, shape, values);
}

/// 1 where window position r of output position o lies inside the input
/// (not in padding): an R x O... constant.
Value windowValidity(GraphEmitter &e, Type elem, ArrayRef<int64_t> inShape,
                     ArrayRef<int64_t> outShape, ArrayRef<int64_t> kernel,
                     ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                     ArrayRef<int64_t> dilations) {
  int64_t n = kernel.size(), r = numElements(kernel);
  SmallVector<int64_t> out(outShape.drop_front(2));
  int64_t o = numElements(out);
  SmallVector<double> values(r * o, 0.0);
  for (int64_t k = 0; k < r; ++k)
    for (int64_t p = 0; p < o; ++p) {
      bool inside = true;
      int64_t kr = k, pr = p;
      for (int64_t i = n - 1; i >= 0; --i) {
        int64_t ki = kr % kernel[i], pi = pr % out[i];
        kr /= kernel[i];
        pr /= out[i];
        int64_t pos = pi * strides[i] - pads[i] + ki * dilations[i];
        inside &= pos >= 0 && pos < inShape[i + 2];
      }
      values[k * o + p] = inside ? 1.0 : 0.0;
    }
  SmallVector<int64_t> shape{r};
  shape.append(out);
  return e.constant(elem, shape, values);
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

/// Unary elementwise rules: the local derivative times the gradient.
Value unaryGradient(GraphEmitter &e, Operation *op, Value g) {
  Value x = op->getOperand(0), y = op->getResult(0);
  auto zero = [&] { return e.scalar(g, 0.0); };
  return TypeSwitch<Operation *, Value>(op)
      .Case([&](NegOp) { return e.neg(g); })
      .Case([&](ExpOp) { return e.mul(g, y); })
      .Case([&](LogOp) { return e.div(g, x); })
      .Case([&](SqrtOp) { return e.div(e.mulScalar(g, 0.5), y); })
      .Case([&](RsqrtOp) {
        return e.mul(g, e.mulScalar(e.mul(y, e.mul(y, y)), -0.5));
      })
      .Case([&](ReciprocalOp) { return e.neg(e.mul(g, e.mul(y, y))); })
      .Case([&](TanhOp) {
        return e.mul(g, e.sub(e.scalar(y, 1.0), e.mul(y, y)));
      })
      .Case([&](SigmoidOp) {
        return e.mul(g, e.mul(y, e.sub(e.scalar(y, 1.0), y)));
      })
      .Case([&](ReluOp) {
        return e.select(e.greater(x, e.scalar(x, 0.0)), g, zero());
      })
      .Case([&](AbsOp) { return e.mul(g, e.sign(x)); })
      .Case([&](ErfOp) {
        return e.mul(g, e.mulScalar(e.exp(e.neg(e.mul(x, x))),
                                    2.0 / std::sqrt(M_PI)));
      })
      .Case([&](SinOp) { return e.mul(g, e.cos(x)); })
      .Case([&](CosOp) { return e.neg(e.mul(g, e.sin(x))); })
      .Case([&](AtanOp) {
        return e.div(g, e.addScalar(e.mul(x, x), 1.0));
      })
      .Case([&](SoftplusOp) { return e.mul(g, e.sigmoid(x)); })
      .Case([&](LeakyReluOp leaky) {
        double alpha = leaky.getAlpha().convertToDouble();
        return e.select(e.greater(x, e.scalar(x, 0.0)), g,
                        e.mulScalar(g, alpha));
      })
      .Case([&](EluOp elu) {
        double alpha = elu.getAlpha().convertToDouble();
        return e.select(e.greater(x, e.scalar(x, 0.0)), g,
                        e.mul(g, e.addScalar(y, alpha)));
      })
      .Case([&](HardSigmoidOp hs) {
        double alpha = hs.getAlpha().convertToDouble(),
               beta = hs.getBeta().convertToDouble();
        Value t = e.addScalar(e.mulScalar(x, alpha), beta);
        Value inside = e.logicalAnd(e.greater(t, e.scalar(t, 0.0)),
                                    e.less(t, e.scalar(t, 1.0)));
        return e.select(inside, e.mulScalar(g, alpha), zero());
      })
      .Case([&](HardSwishOp) {
        // PyTorch: 0 below -3, 1 above 3, (2x + 3) / 6 between.
        Value mid = e.mul(g, e.addScalar(e.mulScalar(x, 1.0 / 3.0), 0.5));
        Value upper = e.select(e.greater(x, e.scalar(x, 3.0)), g, mid);
        return e.select(e.less(x, e.scalar(x, -3.0)), zero(), upper);
      })
      .Case([&](ClampOp clamp) {
        Value pass = g;
        if (auto lo = clamp.getMin())
          pass = e.select(e.less(x, e.scalar(x, lo->convertToDouble())), zero(),
                          pass);
        if (auto hi = clamp.getMax())
          pass = e.select(e.greater(x, e.scalar(x, hi->convertToDouble())),
                          zero(), pass);
        return pass;
      })
      .Default([](Operation *) { return Value(); });
}

/// Binary elementwise rules, before the broadcast adjoint.
std::pair<Value, Value> binaryGradient(GraphEmitter &e, Operation *op, Value g) {
  Value a = op->getOperand(0), b = op->getOperand(1), y = op->getResult(0);
  return TypeSwitch<Operation *, std::pair<Value, Value>>(op)
      .Case([&](AddOp) { return std::pair(g, g); })
      .Case([&](SubOp) { return std::pair(g, e.neg(g)); })
      .Case([&](MulOp) { return std::pair(e.mul(g, b), e.mul(g, a)); })
      .Case([&](DivOp) {
        Value ga = e.div(g, b);
        return std::pair(ga, e.neg(e.mul(ga, y)));
      })
      .Case([&](PowOp) {
        Value ga = e.mul(g, e.mul(b, e.pow(a, e.sub(b, e.scalar(b, 1.0)))));
        Value gb = e.mul(g, e.mul(y, e.log(a)));
        return std::pair(ga, gb);
      })
      .Case([&](MaxOp) {
        Value pick = e.greaterEqual(a, b), zero = e.scalar(g, 0.0);
        return std::pair(e.select(pick, g, zero), e.select(pick, zero, g));
      })
      .Case([&](MinOp) {
        Value pick = e.lessEqual(a, b), zero = e.scalar(g, 0.0);
        return std::pair(e.select(pick, g, zero), e.select(pick, zero, g));
      })
      .Default([](Operation *) { return std::pair(Value(), Value()); });
}

LogicalResult matmulGradient(GraphEmitter &e, MatmulOp op, Value g,
                             MutableArrayRef<Value> grads) {
  Value a = op.getLhs(), b = op.getRhs();
  ArrayRef<int64_t> as = shapeOf(a), bs = shapeOf(b);
  // Rank-1 operands as numpy promotes them; g gets the promoted dims back.
  SmallVector<int64_t> ap(as), bp(bs), gp(shapeOf(g));
  if (as.size() == 1) {
    ap.insert(ap.begin(), 1);
    gp.insert(gp.end() - (bs.size() == 1 ? 0 : 1), 1);
  }
  if (bs.size() == 1) {
    bp.push_back(1);
    gp.push_back(1);
  }
  Value a2 = e.reshape(a, ap), b2 = e.reshape(b, bp), g2 = e.reshape(g, gp);
  if (isDifferentiableOperand(op, 0))
    grads[0] = e.reshape(e.sumToShape(e.matmul(g2, e.transposeLast2(b2)), ap), as);
  if (isDifferentiableOperand(op, 1)) {
    // A weight shared by every batch of `a` (a linear layer on [B, S, K]):
    // one matmul over all B*S rows. Per batch and then summed, it would
    // first hold B x K x N products -- 906 MB for the in-projection of
    // seq-first attention ([128, 1, 768] @ [768, 2304]).
    ArrayRef<int64_t> aBatch = ArrayRef(ap).drop_back(2), gBatch = ArrayRef(gp).drop_back(2);
    bool shared = aBatch.size() > 0 && aBatch == gBatch &&
                  llvm::all_of(ArrayRef(bp).drop_back(2), [](int64_t d) { return d == 1; });
    if (shared) {
      int64_t rows = numElements(ArrayRef(ap).drop_back(1));
      Value af = e.reshape(a2, {rows, ap.back()}), gf = e.reshape(g2, {rows, gp.back()});
      grads[1] = e.reshape(e.matmul(e.transposeLast2(af), gf), bs);
    } else {
      grads[1] = e.reshape(e.sumToShape(e.matmul(e.transposeLast2(a2), g2), bp), bs);
    }
  }
  return success(!e.failed());
}

LogicalResult convGradient(GraphEmitter &e, ConvOp op, Value g,
                           MutableArrayRef<Value> grads) {
  ConvGeometry c{op.getStrides(), op.getPads(), op.getDilations(),
                 static_cast<int64_t>(op.getGroups())};
  grads[0] = convInputGradient(e, g, op.getWeight(), shapeOf(op.getInput()), c);
  grads[1] = convWeightGradient(e, op.getInput(), g, shapeOf(op.getWeight()), c);
  if (op.getBias()) {
    SmallVector<int64_t> axes{0};
    axes.append(iota(2, shapeOf(g).size()));
    grads[2] = e.reduceSum(g, axes, /*keepdims=*/false);
  }
  return success(!e.failed());
}

LogicalResult avgPoolGradient(GraphEmitter &e, AvgPoolOp op, Value g,
                              MutableArrayRef<Value> grads) {
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(g);
  ArrayRef<int64_t> kernel = op.getKernelShape(), pads = op.getPads();
  int64_t n = kernel.size(), channels = in[1];
  // Divide by the forward's divisors, then spread each output's share over
  // its window: the input gradient of a depthwise convolution with ones.
  SmallVector<SmallVector<double>> perDim;
  for (int64_t i = 0; i < n; ++i)
    perDim.push_back(windowCounts(in[i + 2], out[i + 2], kernel[i],
                                  op.getStrides()[i], pads[i], pads[i + n],
                                  op.getDilations()[i], op.getCountIncludePad()));
  SmallVector<int64_t> spatial(out.drop_front(2));
  SmallVector<double> inverse;
  for (int64_t lin = 0, total = numElements(spatial); lin < total; ++lin) {
    double count = 1;
    for (int64_t i = n - 1, rest = lin; i >= 0; --i) {
      count *= perDim[i][rest % spatial[i]];
      rest /= spatial[i];
    }
    inverse.push_back(1.0 / count);
  }
  Type elem = elementOf(g);
  Value scaled = e.mul(g, e.constant(elem, spatial, inverse));
  SmallVector<int64_t> wshape{channels, 1};
  wshape.append(kernel.begin(), kernel.end());
  SmallVector<int64_t> windowed =
      windowPads(in, out, kernel, op.getStrides(), pads, op.getDilations());
  ConvGeometry c{op.getStrides(), windowed, op.getDilations(), channels};
  grads[0] = convInputGradient(e, scaled, e.splat(elem, wshape, 1.0), in, c);
  return success(!e.failed());
}

LogicalResult maxPoolGradient(GraphEmitter &e, MaxPoolOp op, Value g,
                              MutableArrayRef<Value> grads) {
  Value x = op.getInput(), y = op.getResult();
  ArrayRef<int64_t> in = shapeOf(x), out = shapeOf(y);
  ArrayRef<int64_t> kernel = op.getKernelShape();
  int64_t n = kernel.size(), batch = in[0], channels = in[1];
  int64_t r = numElements(kernel);
  Type elem = elementOf(g);
  SmallVector<int64_t> windowed = windowPads(in, out, kernel, op.getStrides(),
                                             op.getPads(), op.getDilations());
  ConvGeometry c{op.getStrides(), windowed, op.getDilations(), channels};
  // Every window laid out along a new axis: N x C x R x O...
  Value picker = windowPicker(e, elem, channels, kernel);
  Value windows = e.conv(x, picker, c.strides, c.pads, c.dilations, channels);
  SmallVector<int64_t> spread{batch, channels, r}, keep{batch, channels, 1};
  spread.append(out.begin() + 2, out.end());
  keep.append(out.begin() + 2, out.end());
  windows = e.reshape(windows, spread);
  // The first window position holding the maximum (padding never counts).
  Value valid = windowValidity(e, elem, in, out, kernel, c.strides, op.getPads(),
                               c.dilations);
  Value hit = e.logicalAnd(e.equal(windows, e.reshape(y, keep)),
                           e.greater(valid, e.scalar(valid, 0.5)));
  SmallVector<double> positions(r);
  std::iota(positions.begin(), positions.end(), 0.0);
  SmallVector<int64_t> posShape{r};
  posShape.append(n, 1);
  Value position = e.constant(elem, posShape, positions);
  Value candidate = e.select(hit, position, e.scalar(position, double(r)));
  Value first = e.reduceMin(candidate, {2}, /*keepdims=*/true);
  Value pick = e.equal(position, first);
  Value routed = e.select(pick, e.reshape(g, keep), e.scalar(g, 0.0));
  SmallVector<int64_t> flat{batch, channels * r};
  flat.append(out.begin() + 2, out.end());
  grads[0] = convInputGradient(e, e.reshape(routed, flat), picker, in, c);
  return success(!e.failed());
}

LogicalResult reduceGradient(GraphEmitter &e, Operation *op, Value g,
                             MutableArrayRef<Value> grads) {
  Value x = op->getOperand(0), y = op->getResult(0);
  ArrayRef<int64_t> in = shapeOf(x);
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  SmallVector<int64_t> keep(in);
  for (int64_t a : axes)
    keep[a] = 1;
  Value gk = e.reshape(g, keep);
  if (isa<ReduceSumOp>(op)) {
    grads[0] = e.expand(gk, in);
  } else if (isa<ReduceMeanOp>(op)) {
    int64_t count = 1;
    for (int64_t a : axes)
      count *= in[a];
    grads[0] = e.expand(e.mulScalar(gk, 1.0 / count), in);
  } else {
    // max / min: every position equal to the result shares its gradient
    // (torch.amax / amin).
    Value hit = e.equal(x, e.reshape(y, keep));
    Value ones = e.select(hit, e.scalar(gk, 1.0), e.scalar(gk, 0.0));
    Value count = e.reduceSum(ones, axes, /*keepdims=*/true);
    grads[0] = e.mul(ones, e.div(gk, count));
  }
  return success(!e.failed());
}

/// d x of normalising `x` (N x G x M) over its last dimension, given the
/// gradient `dxhat` of the normalised value: layer norm's input gradient,
/// rstd / M * (M * dxhat - sum(dxhat) - xhat * sum(dxhat * xhat)).
Value normalizedInputGradient(GraphEmitter &e, Value xhat, Value rstd, Value dxhat,
                              ArrayRef<int64_t> axes, int64_t count) {
  Value sum1 = e.reduceSum(dxhat, axes, true);
  Value sum2 = e.reduceSum(e.mul(dxhat, xhat), axes, true);
  Value inner = e.sub(e.sub(e.mulScalar(dxhat, double(count)), sum1),
                      e.mul(xhat, sum2));
  return e.mul(inner, e.mulScalar(rstd, 1.0 / count));
}

LogicalResult layerNormGradient(GraphEmitter &e, LayerNormOp op, Value g,
                                MutableArrayRef<Value> grads) {
  Value x = op.getInput();
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t axis = op.getAxis(), rank = in.size();
  SmallVector<int64_t> axes = iota(axis, rank), lead = iota(0, axis);
  int64_t count = 1;
  for (int64_t a : axes)
    count *= in[a];
  double eps = op.getEpsilon().convertToDouble();
  // Recompute the normalised input: cheaper than keeping it.
  Value mean = e.reduceMean(x, axes, true);
  Value centered = e.sub(x, mean);
  Value var = e.reduceMean(e.mul(centered, centered), axes, true);
  Value rstd = e.div(e.scalar(var, 1.0), e.sqrt(e.addScalar(var, eps)));
  Value xhat = e.mul(centered, rstd);
  ArrayRef<int64_t> scaleShape = shapeOf(op.getScale());
  grads[1] = e.sumToShape(e.mul(g, xhat), scaleShape);
  grads[2] = e.sumToShape(g, shapeOf(op.getBias()));
  Value dxhat = e.mul(g, op.getScale());
  grads[0] = normalizedInputGradient(e, xhat, rstd, dxhat, axes, count);
  return success(!e.failed());
}

LogicalResult groupNormGradient(GraphEmitter &e, GroupNormOp op, Value g,
                                MutableArrayRef<Value> grads) {
  Value x = op.getInput();
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t n = in[0], channels = in[1], groups = op.getNumGroups();
  int64_t count = 1;
  for (int64_t d = 1; d < static_cast<int64_t>(in.size()); ++d)
    count *= in[d];
  count /= groups;
  SmallVector<int64_t> grouped{n, groups, count}, channel(in.size(), 1);
  channel[1] = channels;
  double eps = op.getEpsilon().convertToDouble();
  // Each group normalised over its channels and spatial positions.
  Value xg = e.reshape(x, grouped);
  Value centered = e.sub(xg, e.reduceMean(xg, {2}, true));
  Value var = e.reduceMean(e.mul(centered, centered), {2}, true);
  Value rstd = e.div(e.scalar(var, 1.0), e.sqrt(e.addScalar(var, eps)));
  Value xhatG = e.mul(centered, rstd);
  Value xhat = e.reshape(xhatG, in);
  grads[1] = e.reshape(e.sumToShape(e.mul(g, xhat), channel), {channels});
  grads[2] = e.reshape(e.sumToShape(g, channel), {channels});
  Value dxhat = e.reshape(e.mul(g, e.reshape(op.getScale(), channel)), grouped);
  grads[0] = e.reshape(normalizedInputGradient(e, xhatG, rstd, dxhat, {2}, count), in);
  return success(!e.failed());
}

LogicalResult batchNormGradient(GraphEmitter &e, BatchNormOp op, Value g,
                                MutableArrayRef<Value> grads) {
  // y = (x - mean) * rstd * scale + bias, rstd = (var + eps)^-1/2. The
  // statistics are the batch's in training mode (computed from x by the ops
  // before, which carry their gradients on to x) and constants of the step
  // in the inference form (see isDifferentiableOperand).
  ArrayRef<int64_t> in = shapeOf(op.getInput());
  SmallVector<int64_t> channel(in.size(), 1);
  channel[1] = in[1];
  double eps = op.getEpsilon().convertToDouble();
  Value var = e.reshape(op.getVariance(), channel);
  Value rstd = e.div(e.scalar(var, 1.0), e.sqrt(e.addScalar(var, eps)));
  Value scale = e.reshape(op.getScale(), channel);
  Value centered = e.sub(op.getInput(), e.reshape(op.getMean(), channel));
  Value xhat = e.mul(centered, rstd);
  Value gScaled = e.mul(g, scale);
  grads[0] = e.mul(gScaled, rstd);
  grads[1] = e.reshape(e.sumToShape(e.mul(g, xhat), channel),
                       shapeOf(op.getScale()));
  grads[2] = e.reshape(e.sumToShape(g, channel), shapeOf(op.getBias()));
  if (isDifferentiableOperand(op, 3))
    grads[3] = e.reshape(e.neg(e.sumToShape(grads[0], channel)),
                         shapeOf(op.getMean()));
  if (isDifferentiableOperand(op, 4)) {
    // d rstd / d var = -rstd^3 / 2.
    Value rstd3 = e.mul(rstd, e.mul(rstd, rstd));
    Value perChannel = e.sumToShape(e.mul(gScaled, centered), channel);
    grads[4] = e.reshape(e.mul(perChannel, e.mul(rstd3, e.scalar(var, -0.5))),
                         shapeOf(op.getVariance()));
  }
  return success(!e.failed());
}

LogicalResult sliceGradient(GraphEmitter &e, SliceOp op, Value g,
                            MutableArrayRef<Value> grads) {
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(g);
  int64_t rank = in.size();
  SmallVector<int64_t> dims, factors, low(rank), high(rank);
  Value v = g;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t start = op.getStarts()[d], stride = op.getStrides()[d];
    if (stride < 0) {
      // Walk the slice forwards: flip, then it starts at its last element.
      v = e.flip(v, d);
      start = start + (out[d] - 1) * stride;
      stride = -stride;
    }
    if (stride > 1) {
      dims.push_back(d);
      factors.push_back(stride);
    }
    int64_t span = out[d] == 0 ? 0 : (out[d] - 1) * stride + 1;
    low[d] = start;
    high[d] = in[d] - start - span;
  }
  grads[0] = e.padOrCut(e.interleaveZeros(v, dims, factors), low, high);
  return success(!e.failed());
}

LogicalResult concatGradient(GraphEmitter &e, ConcatOp op, Value g,
                             MutableArrayRef<Value> grads) {
  int64_t axis = op.getAxis(), offset = 0;
  ArrayRef<int64_t> out = shapeOf(g);
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    int64_t size = shapeOf(input)[axis];
    if (isDifferentiableOperand(op, i)) {
      SmallVector<int64_t> starts(out.size(), 0), limits(out),
          strides(out.size(), 1);
      starts[axis] = offset;
      limits[axis] = offset + size;
      grads[i] = e.slice(g, starts, limits, strides);
    }
    offset += size;
  }
  return success(!e.failed());
}

} // namespace

bool isDifferentiableOperand(Operation *op, unsigned index) {
  Value operand = op->getOperand(index);
  if (!isa<RankedTensorType>(operand.getType()) || !isFloat(operand))
    return false;
  if (op->getNumResults() == 0 ||
      !llvm::all_of(op->getResults(), [](Value r) {
        return isa<RankedTensorType>(r.getType()) && isFloat(r);
      }))
    return false;
  // Running statistics read from a global are constants of the step (the
  // inference form); the batch's statistics depend on the input.
  if (isa<BatchNormOp>(op) && index >= 3 &&
      isa_and_present<ml_program::GlobalLoadConstOp, ml_program::GlobalLoadOp>(
          operand.getDefiningOp()))
    return false;
  if (auto select = dyn_cast<SelectOp>(op))
    return index != 0;
  return true;
}

bool hasGradientRule(Operation *op) {
  return isa<NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, TanhOp,
             SigmoidOp, ReluOp, AbsOp, ErfOp, SinOp, CosOp, AtanOp, SoftplusOp,
             LeakyReluOp, EluOp, HardSigmoidOp, HardSwishOp, ClampOp, SignOp,
             FloorOp, CeilOp, RoundOp, AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp,
             MinOp, SelectOp, CastOp, MatmulOp, ConvOp, AvgPoolOp, MaxPoolOp,
             ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, SoftmaxOp,
             LogSoftmaxOp, LayerNormOp, GroupNormOp, BatchNormOp, ReshapeOp, TransposeOp,
             ExpandOp, SliceOp, ConcatOp, PadOp, GatherOp, GatherElementsOp>(op);
}

LogicalResult buildGradient(GraphEmitter &e, Operation *op,
                            ArrayRef<Value> resultGrads,
                            MutableArrayRef<Value> operandGrads) {
  Value g = resultGrads.empty() ? Value() : resultGrads[0];
  if (!g)
    return success();
  // No element of an empty result depends on the operands: their
  // gradients are zeros, as autograd's are (a weight reached only through
  // it still trains, with weight decay), and no rule runs, as a rule's
  // geometry (a pooling's channels as groups) may divide by the empty
  // dimension.
  if (llvm::is_contained(shapeOf(g), 0)) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (isDifferentiableOperand(op, i))
        operandGrads[i] =
            e.splat(elementOf(op->getOperand(i)), shapeOf(op->getOperand(i)), 0.0);
    return success(!e.failed());
  }
  // Piecewise-constant ops: zero almost everywhere, as in PyTorch.
  if (isa<SignOp, FloorOp, CeilOp, RoundOp>(op))
    return success();
  if (op->hasTrait<OpTrait::Elementwise>() && op->getNumOperands() == 1) {
    operandGrads[0] = unaryGradient(e, op, g);
    return success(operandGrads[0] && !e.failed());
  }
  if (isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp>(op)) {
    auto [ga, gb] = binaryGradient(e, op, g);
    for (auto [i, grad] : llvm::enumerate(std::array<Value, 2>{ga, gb}))
      if (isDifferentiableOperand(op, i))
        operandGrads[i] = e.sumToShape(grad, shapeOf(op->getOperand(i)));
    return success(!e.failed());
  }
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](SelectOp select) {
        Value zero = e.scalar(g, 0.0);
        operandGrads[1] = e.sumToShape(e.select(select.getCond(), g, zero),
                                       shapeOf(select.getOnTrue()));
        operandGrads[2] = e.sumToShape(e.select(select.getCond(), zero, g),
                                       shapeOf(select.getOnFalse()));
        return success(!e.failed());
      })
      .Case([&](CastOp cast) {
        operandGrads[0] = e.cast(g, elementOf(cast.getInput()));
        return success(!e.failed());
      })
      .Case([&](MatmulOp mm) { return matmulGradient(e, mm, g, operandGrads); })
      .Case([&](ConvOp conv) { return convGradient(e, conv, g, operandGrads); })
      .Case([&](AvgPoolOp pool) {
        return avgPoolGradient(e, pool, g, operandGrads);
      })
      .Case([&](MaxPoolOp pool) {
        return maxPoolGradient(e, pool, g, operandGrads);
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>(
          [&](Operation *reduce) {
            return reduceGradient(e, reduce, g, operandGrads);
          })
      .Case([&](SoftmaxOp softmax) {
        Value y = softmax.getResult();
        int64_t axis = softmax.getAxis();
        Value dot = e.reduceSum(e.mul(g, y), {axis}, true);
        operandGrads[0] = e.mul(y, e.sub(g, dot));
        return success(!e.failed());
      })
      .Case([&](LogSoftmaxOp logSoftmax) {
        int64_t axis = logSoftmax.getAxis();
        Value total = e.reduceSum(g, {axis}, true);
        operandGrads[0] =
            e.sub(g, e.mul(e.exp(logSoftmax.getResult()), total));
        return success(!e.failed());
      })
      .Case([&](LayerNormOp ln) { return layerNormGradient(e, ln, g, operandGrads); })
      .Case([&](GroupNormOp gn) { return groupNormGradient(e, gn, g, operandGrads); })
      .Case([&](BatchNormOp bn) { return batchNormGradient(e, bn, g, operandGrads); })
      .Case([&](ReshapeOp reshape) {
        operandGrads[0] = e.reshape(g, shapeOf(reshape.getInput()));
        return success(!e.failed());
      })
      .Case([&](TransposeOp transpose) {
        operandGrads[0] = e.transpose(g, inversePermutation(transpose.getPerm()));
        return success(!e.failed());
      })
      .Case([&](ExpandOp expand) {
        operandGrads[0] = e.sumToShape(g, shapeOf(expand.getInput()));
        return success(!e.failed());
      })
      .Case([&](GatherOp gather) {
        // The rows read are the rows the gradient adds into (an
        // embedding's gradient); the indices have none.
        operandGrads[0] = e.scatterAdd(g, gather.getIndices(), gather.getAxis(),
                                       shapeOf(gather.getInput()));
        return success(!e.failed());
      })
      .Case([&](GatherElementsOp gather) {
        // Input element v along the axis gets the gradient of every
        // position whose index is v.
        operandGrads[0] = e.scatterElementsAdd(g, gather.getIndices(), gather.getAxis(),
                                               shapeOf(gather.getInput()));
        return success(!e.failed());
      })
      .Case([&](SliceOp slice) { return sliceGradient(e, slice, g, operandGrads); })
      .Case([&](ConcatOp concat) {
        return concatGradient(e, concat, g, operandGrads);
      })
      .Case([&](PadOp pad) {
        if (pad.getMode() != PadMode::constant)
          return failure();
        SmallVector<int64_t> low, high;
        for (int64_t p : pad.getPadsLow())
          low.push_back(-p);
        for (int64_t p : pad.getPadsHigh())
          high.push_back(-p);
        operandGrads[0] = e.padOrCut(g, low, high);
        return success(!e.failed());
      })
      .Default([](Operation *) { return failure(); });
}

} // namespace tessera::graph
