//===- ONNXOps.cpp - ONNX operators to graph-dialect ops -----------------===//
//
// One converter per ONNX operator (and per opset where behaviour changed),
// registered in the table at the bottom. Converters decompose the long tail
// of ONNX into the graph dialect's operator set; operators whose inputs are
// constants (shape arithmetic, Range, ScatterND on masks) are evaluated here
// or by the ops' folders so that imported models have static shapes.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"
#include "tessera/Dialect/Graph/IR/GraphEmitter.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <numeric>

using namespace mlir;
namespace g = tessera::graph;

namespace tessera::onnx_importer {
namespace {


//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename OpTy> LogicalResult unary(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(v, n.build<OpTy>(n.inputType(0), n.input(0)));
  return n.setOutput(v);
}

/// Before opset 7, binary ops broadcast only with `broadcast=1`, aligning
/// the right operand at `axis` (default: its trailing dims) rather than at
/// the end; reshaping it with trailing 1s gives the NumPy equivalent.
FailureOr<Value> legacyBroadcastRhs(NodeImporter &n, Value lhs, Value rhs) {
  if (n.opset() >= 7 || !n.intAttr("broadcast", 0))
    return rhs;
  int64_t lhsRank = rankOf(lhs), rhsRank = rankOf(rhs);
  int64_t axis = n.intAttr("axis", lhsRank - rhsRank);
  if (axis < 0)
    axis += lhsRank;
  if (axis < 0 || axis + rhsRank > lhsRank)
    return n.error() << "broadcast axis " << n.intAttr("axis", 0)
                     << " does not fit operands of rank " << lhsRank << " and "
                     << rhsRank;
  Ints shape = shapeOf(rhs);
  shape.append(lhsRank - axis - rhsRank, 1);
  return n.reshape(rhs, shape);
}

template <typename OpTy> LogicalResult binary(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(rhs, legacyBroadcastRhs(n, n.input(0), n.input(1)));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<OpTy>(n.input(0), rhs));
  return n.setOutput(v);
}

/// Sum, Max, Min, Mean take one or more inputs.
template <typename OpTy> LogicalResult variadic(NodeImporter &n) {
  Value acc = n.input(0);
  for (size_t i = 1; i < n.numInputs(); ++i) {
    TESSERA_ASSIGN_OR_FAIL(v, n.infer<OpTy>(acc, n.input(i)));
    acc = v;
  }
  return n.setOutput(acc);
}

LogicalResult mean(NodeImporter &n) {
  Value acc = n.input(0);
  for (size_t i = 1; i < n.numInputs(); ++i) {
    TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::AddOp>(acc, n.input(i)));
    acc = v;
  }
  Value count = n.scalar(elementTypeOf(acc), n.numInputs());
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::DivOp>(acc, count));
  return n.setOutput(v);
}

LogicalResult pow(NodeImporter &n) {
  // From opset 12 the exponent may have another type; compute in the base's.
  TESSERA_ASSIGN_OR_FAIL(rhs, legacyBroadcastRhs(n, n.input(0), n.input(1)));
  TESSERA_ASSIGN_OR_FAIL(exponent, n.castTo(rhs, elementTypeOf(n.input(0))));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::PowOp>(n.input(0), exponent));
  return n.setOutput(v);
}

LogicalResult mod(NodeImporter &n) {
  Value a = n.input(0), b = n.input(1);
  bool isFloat = isa<FloatType>(elementTypeOf(a));
  bool fmod = n.intAttr("fmod", 0) != 0;
  if (isFloat && !fmod)
    return n.error() << "fmod=0 is only defined for integers (ONNX requires "
                        "fmod=1 for floating-point inputs)";
  TESSERA_ASSIGN_OR_FAIL(r, n.infer<g::RemOp>(a, b));
  if (fmod)
    return n.setOutput(r);
  // Python-style modulo takes the divisor's sign: r + b where r != 0 and
  // the signs of r and b differ.
  Type elem = elementTypeOf(a);
  Value zero = n.scalar(elem, 0);
  TESSERA_ASSIGN_OR_FAIL(nonZero, n.infer<g::EqualOp>(r, zero));
  TESSERA_ASSIGN_OR_FAIL(isNonZero, n.build<g::NotOp>(nonZero.getType(), nonZero));
  TESSERA_ASSIGN_OR_FAIL(rNeg, n.infer<g::LessOp>(r, zero));
  TESSERA_ASSIGN_OR_FAIL(bNeg, n.infer<g::LessOp>(b, zero));
  TESSERA_ASSIGN_OR_FAIL(signsDiffer, n.infer<g::XorOp>(rNeg, bNeg));
  TESSERA_ASSIGN_OR_FAIL(fix, n.infer<g::AndOp>(isNonZero, signsDiffer));
  TESSERA_ASSIGN_OR_FAIL(adjusted, n.infer<g::AddOp>(r, b));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::SelectOp>(fix, adjusted, r));
  return n.setOutput(v);
}

LogicalResult leakyRelu(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(
      v, n.build<g::LeakyReluOp>(n.inputType(0), n.input(0),
                                 n.builder().getF64FloatAttr(
                                     n.floatAttr("alpha", 0.01))));
  return n.setOutput(v);
}

LogicalResult elu(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(
      v, n.build<g::EluOp>(n.inputType(0), n.input(0),
                           n.builder().getF64FloatAttr(n.floatAttr("alpha", 1.0))));
  return n.setOutput(v);
}

/// Celu(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)), which is
/// Elu of x / alpha scaled by alpha.
LogicalResult celu(NodeImporter &n) {
  Value x = n.input(0);
  Type elem = elementTypeOf(x);
  double alpha = n.floatAttr("alpha", 1.0);
  TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::DivOp>(x, n.scalar(elem, alpha)));
  TESSERA_ASSIGN_OR_FAIL(
      e, n.build<g::EluOp>(scaled.getType(), scaled, n.builder().getF64FloatAttr(1.0)));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::MulOp>(e, n.scalar(elem, alpha)));
  return n.setOutput(v);
}

/// sinh x = (e^x - e^-x) / 2, cosh x = (e^x + e^-x) / 2.
template <bool Cosh>
LogicalResult hyperbolic(NodeImporter &n) {
  Value x = n.input(0);
  Type elem = elementTypeOf(x);
  TESSERA_ASSIGN_OR_FAIL(up, n.build<g::ExpOp>(x.getType(), x));
  TESSERA_ASSIGN_OR_FAIL(negated, n.build<g::NegOp>(x.getType(), x));
  TESSERA_ASSIGN_OR_FAIL(down, n.build<g::ExpOp>(x.getType(), negated));
  TESSERA_ASSIGN_OR_FAIL(sum, Cosh ? n.infer<g::AddOp>(up, down) : n.infer<g::SubOp>(up, down));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::MulOp>(sum, n.scalar(elem, 0.5)));
  return n.setOutput(v);
}

LogicalResult tan(NodeImporter &n) {
  Value x = n.input(0);
  TESSERA_ASSIGN_OR_FAIL(s, n.build<g::SinOp>(x.getType(), x));
  TESSERA_ASSIGN_OR_FAIL(c, n.build<g::CosOp>(x.getType(), x));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::DivOp>(s, c));
  return n.setOutput(v);
}

LogicalResult selu(NodeImporter &n) {
  double alpha = n.floatAttr("alpha", 1.67326319217681884765625);
  double gamma = n.floatAttr("gamma", 1.05070102214813232421875);
  TESSERA_ASSIGN_OR_FAIL(
      e, n.build<g::EluOp>(n.inputType(0), n.input(0),
                           n.builder().getF64FloatAttr(alpha)));
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::MulOp>(e, n.scalar(elementTypeOf(e), gamma)));
  return n.setOutput(v);
}

LogicalResult hardSigmoid(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(
      v, n.build<g::HardSigmoidOp>(
             n.inputType(0), n.input(0),
             n.builder().getF64FloatAttr(n.floatAttr("alpha", 0.2)),
             n.builder().getF64FloatAttr(n.floatAttr("beta", 0.5))));
  return n.setOutput(v);
}

LogicalResult softsign(NodeImporter &n) {
  Value x = n.input(0);
  TESSERA_ASSIGN_OR_FAIL(a, n.build<g::AbsOp>(x.getType(), x));
  TESSERA_ASSIGN_OR_FAIL(d, n.infer<g::AddOp>(a, n.scalar(elementTypeOf(x), 1)));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::DivOp>(x, d));
  return n.setOutput(v);
}

LogicalResult shrink(NodeImporter &n) {
  // x < -lambd: x + bias; x > lambd: x - bias; else 0.
  Value x = n.input(0);
  Type elem = elementTypeOf(x);
  double lambd = n.floatAttr("lambd", 0.5), bias = n.floatAttr("bias", 0.0);
  TESSERA_ASSIGN_OR_FAIL(low, n.infer<g::LessOp>(x, n.scalar(elem, -lambd)));
  TESSERA_ASSIGN_OR_FAIL(high, n.infer<g::GreaterOp>(x, n.scalar(elem, lambd)));
  TESSERA_ASSIGN_OR_FAIL(up, n.infer<g::AddOp>(x, n.scalar(elem, bias)));
  TESSERA_ASSIGN_OR_FAIL(down, n.infer<g::SubOp>(x, n.scalar(elem, bias)));
  TESSERA_ASSIGN_OR_FAIL(inner, n.infer<g::SelectOp>(high, down, n.scalar(elem, 0)));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::SelectOp>(low, up, inner));
  return n.setOutput(v);
}

LogicalResult isNaN(NodeImporter &n) {
  // NaN is the one value unequal to itself.
  Value x = n.input(0);
  TESSERA_ASSIGN_OR_FAIL(same, n.infer<g::EqualOp>(x, x));
  TESSERA_ASSIGN_OR_FAIL(v, n.build<g::NotOp>(same.getType(), same));
  return n.setOutput(v);
}

LogicalResult isInf(NodeImporter &n) {
  Value x = n.input(0);
  Type elem = elementTypeOf(x);
  bool positive = n.intAttr("detect_positive", 1), negative = n.intAttr("detect_negative", 1);
  TESSERA_ASSIGN_OR_FAIL(
      pos, n.infer<g::EqualOp>(x, n.scalar(elem, std::numeric_limits<double>::infinity())));
  TESSERA_ASSIGN_OR_FAIL(
      neg, n.infer<g::EqualOp>(x, n.scalar(elem, -std::numeric_limits<double>::infinity())));
  if (positive && negative) {
    TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::OrOp>(pos, neg));
    return n.setOutput(v);
  }
  if (positive)
    return n.setOutput(pos);
  if (negative)
    return n.setOutput(neg);
  TESSERA_ASSIGN_OR_FAIL(none, n.infer<g::AndOp>(pos, neg)); // never both
  return n.setOutput(none);
}

/// Inverse hyperbolic functions through log and sqrt:
/// asinh x = log(x + sqrt(x^2 + 1)), acosh x = log(x + sqrt(x^2 - 1)),
/// atanh x = log((1 + x) / (1 - x)) / 2.
template <int Kind>
LogicalResult inverseHyperbolic(NodeImporter &n) {
  Value x = n.input(0);
  Type elem = elementTypeOf(x);
  Value arg;
  if (Kind == 2) {
    TESSERA_ASSIGN_OR_FAIL(num, n.infer<g::AddOp>(n.scalar(elem, 1), x));
    TESSERA_ASSIGN_OR_FAIL(den, n.infer<g::SubOp>(n.scalar(elem, 1), x));
    TESSERA_ASSIGN_OR_FAIL(q, n.infer<g::DivOp>(num, den));
    arg = q;
  } else {
    TESSERA_ASSIGN_OR_FAIL(sq, n.infer<g::MulOp>(x, x));
    TESSERA_ASSIGN_OR_FAIL(shifted, Kind == 0
                                        ? n.infer<g::AddOp>(sq, n.scalar(elem, 1))
                                        : n.infer<g::SubOp>(sq, n.scalar(elem, 1)));
    TESSERA_ASSIGN_OR_FAIL(root, n.build<g::SqrtOp>(shifted.getType(), shifted));
    TESSERA_ASSIGN_OR_FAIL(sum, n.infer<g::AddOp>(x, root));
    arg = sum;
  }
  TESSERA_ASSIGN_OR_FAIL(log, n.build<g::LogOp>(arg.getType(), arg));
  if (Kind != 2)
    return n.setOutput(log);
  TESSERA_ASSIGN_OR_FAIL(half, n.infer<g::MulOp>(log, n.scalar(elem, 0.5)));
  return n.setOutput(half);
}

LogicalResult thresholdedRelu(NodeImporter &n) {
  Value x = n.input(0);
  Type elem = elementTypeOf(x);
  TESSERA_ASSIGN_OR_FAIL(
      keep, n.infer<g::GreaterOp>(x, n.scalar(elem, n.floatAttr("alpha", 1.0))));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::SelectOp>(keep, x, n.scalar(elem, 0)));
  return n.setOutput(v);
}

LogicalResult prelu(NodeImporter &n) {
  Value x = n.input(0), slope = n.input(1);
  Type elem = elementTypeOf(x);
  // PyTorch's exporter gives a per-channel slope as [C] for N x C x ...;
  // NumPy broadcasting would align it with the last dim instead.
  Ints xs = shapeOf(x), ss = shapeOf(slope);
  if (ss.size() == 1 && xs.size() > 2 && ss[0] == xs[1] && ss[0] != xs.back()) {
    Ints perChannel(xs.size() - 1, 1);
    perChannel[0] = ss[0];
    TESSERA_ASSIGN_OR_FAIL(r, n.reshape(slope, perChannel));
    slope = r;
  }
  TESSERA_ASSIGN_OR_FAIL(neg, n.infer<g::LessOp>(x, n.scalar(elem, 0)));
  TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(x, slope));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::SelectOp>(neg, scaled, x));
  if (shapeOf(v) != shapeOf(x))
    return n.error() << "slope of shape " << g::formatShape(shapeOf(slope))
                     << " must broadcast to the input's "
                     << g::formatShape(shapeOf(x));
  return n.setOutput(v);
}

LogicalResult clip(NodeImporter &n) {
  Value x = n.input(0);
  std::optional<double> lo, hi;
  Value loValue, hiValue;
  if (n.opset() < 11) {
    if (n.hasAttr("min"))
      lo = n.floatAttr("min", 0);
    if (n.hasAttr("max"))
      hi = n.floatAttr("max", 0);
  } else {
    for (int i : {1, 2}) {
      if (!n.hasInput(i))
        continue;
      if (n.constantInput(i)) {
        TESSERA_ASSIGN_OR_FAIL(c, n.constantScalar(i, i == 1 ? "min" : "max"));
        (i == 1 ? lo : hi) = c;
      } else {
        (i == 1 ? loValue : hiValue) = n.input(i);
      }
    }
  }
  auto attr = [&](std::optional<double> v) {
    return v ? n.builder().getF64FloatAttr(*v) : FloatAttr();
  };
  TESSERA_ASSIGN_OR_FAIL(
      v, n.build<g::ClampOp>(x.getType(), x, attr(lo), attr(hi)));
  // Bounds computed at run time clamp through max/min.
  if (loValue) {
    TESSERA_ASSIGN_OR_FAIL(m, n.infer<g::MaxOp>(v, loValue));
    v = m;
  }
  if (hiValue) {
    TESSERA_ASSIGN_OR_FAIL(m, n.infer<g::MinOp>(v, hiValue));
    v = m;
  }
  return n.setOutput(v);
}

LogicalResult where(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::SelectOp>(n.input(0), n.input(1), n.input(2)));
  return n.setOutput(v);
}

LogicalResult castOp(NodeImporter &n) {
  int64_t to = n.intAttr("to", 0);
  Type elem = elementTypeFor(to, n.context());
  if (!elem)
    return n.unsupported("Cast to " + onnxTypeName(to));
  TESSERA_ASSIGN_OR_FAIL(v, n.castTo(n.input(0), elem));
  return n.setOutput(v);
}

LogicalResult castLike(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(v, n.castTo(n.input(0), elementTypeOf(n.input(1))));
  return n.setOutput(v);
}

LogicalResult identity(NodeImporter &n) { return n.setOutput(n.input(0)); }

LogicalResult dropout(NodeImporter &n) {
  // Inference: the identity. Training mode (torch.onnx.export with
  // TrainingMode.TRAINING) draws a random mask from the program's
  // counter-based generator; a zero ratio (as torchvision's Swin exports)
  // is the identity in either mode.
  if (n.opset() >= 12 && n.hasInput(2)) {
    DenseElementsAttr mode = n.constantInput(2);
    if (!mode)
      return n.notConstant(2, "training_mode", " boolean");
    if (mode.getSplatValue<bool>()) {
      double ratio = 0.5;
      if (n.hasInput(1)) {
        TESSERA_ASSIGN_OR_FAIL(r, n.constantScalar(1, "ratio"));
        ratio = r;
      }
      if (ratio != 0.0) {
        TESSERA_ASSIGN_OR_FAIL(d, g::createDropout(n.builder(), n.loc(), n.input(0), ratio));
        return n.setOutputs({d.output, d.mask});
      }
    }
  }
  if (n.node().output_size() > 1 && !n.node().output(1).empty()) {
    // The mask of an inference dropout is all ones.
    Value ones = n.splat(n.builder().getI1Type(), shapeOf(n.input(0)), 1);
    return n.setOutputs({n.input(0), ones});
  }
  return n.setOutput(n.input(0));
}

//===----------------------------------------------------------------------===//
// Linear algebra and NN
//===----------------------------------------------------------------------===//

LogicalResult matmul(NodeImporter &n) { return binary<g::MatmulOp>(n); }

/// LRN: x / (bias + alpha / size * S)^beta, where S sums x^2 over a window
/// of `size` channels: a matmul of a constant 0/1 band matrix [C, C] with
/// x^2 viewed as [N, C, H*W...].
LogicalResult lrn(NodeImporter &n) {
  Value x = n.input(0);
  Ints s = shapeOf(x);
  int64_t size = n.intAttr("size", 0);
  if (s.size() < 3 || size <= 0)
    return n.error() << "needs an input of rank 3 or more and a positive size (input "
                     << g::formatShape(s) << ", size " << size << ")";
  Type elem = elementTypeOf(x);
  double alpha = n.floatAttr("alpha", 1e-4), beta = n.floatAttr("beta", 0.75),
         bias = n.floatAttr("bias", 1.0);
  int64_t c = s[1], spatial = g::numElements(ArrayRef<int64_t>(s).drop_front(2));
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  if (failed(n.checkConstantElements({c, c}, "the channel window")))
    return failure();
  SmallVector<Attribute> band;
  Builder &b = n.builder();
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = 0; j < c; ++j)
      band.push_back(b.getFloatAttr(elem, j >= i - before && j <= i + after ? 1.0 : 0.0));
  Value window = n.constant(DenseElementsAttr::get(RankedTensorType::get({c, c}, elem), band));
  TESSERA_ASSIGN_OR_FAIL(sq, n.infer<g::MulOp>(x, x));
  TESSERA_ASSIGN_OR_FAIL(rows, n.reshape(sq, {s[0], c, spatial}));
  TESSERA_ASSIGN_OR_FAIL(sums, n.infer<g::MatmulOp>(window, rows));
  TESSERA_ASSIGN_OR_FAIL(sum, n.reshape(sums, s));
  TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(sum, n.scalar(elem, alpha / size)));
  TESSERA_ASSIGN_OR_FAIL(shifted, n.infer<g::AddOp>(scaled, n.scalar(elem, bias)));
  TESSERA_ASSIGN_OR_FAIL(denominator, n.infer<g::PowOp>(shifted, n.scalar(elem, beta)));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::DivOp>(x, denominator));
  return n.setOutput(v);
}

LogicalResult gemm(NodeImporter &n) {
  Value a = n.input(0), b = n.input(1);
  if (rankOf(a) != 2 || rankOf(b) != 2)
    return n.error() << "A and B must be matrices, got "
                     << g::formatShape(shapeOf(a)) << " and "
                     << g::formatShape(shapeOf(b));
  if (n.intAttr("transA", 0)) {
    TESSERA_ASSIGN_OR_FAIL(t, n.transpose(a, {1, 0}));
    a = t;
  }
  if (n.intAttr("transB", 0)) {
    TESSERA_ASSIGN_OR_FAIL(t, n.transpose(b, {1, 0}));
    b = t;
  }
  TESSERA_ASSIGN_OR_FAIL(y, n.infer<g::MatmulOp>(a, b));
  Type elem = elementTypeOf(y);
  double alpha = n.floatAttr("alpha", 1.0), beta = n.floatAttr("beta", 1.0);
  if (alpha != 1.0) {
    TESSERA_ASSIGN_OR_FAIL(s, n.infer<g::MulOp>(y, n.scalar(elem, alpha)));
    y = s;
  }
  if (n.hasInput(2) && beta != 0.0) {
    Value c = n.input(2);
    if (beta != 1.0) {
      TESSERA_ASSIGN_OR_FAIL(s, n.infer<g::MulOp>(c, n.scalar(elem, beta)));
      c = s;
    }
    TESSERA_ASSIGN_OR_FAIL(s, n.infer<g::AddOp>(y, c));
    if (shapeOf(s) != shapeOf(y))
      return n.error() << "C of shape " << g::formatShape(shapeOf(c))
                       << " must broadcast to A*B's "
                       << g::formatShape(shapeOf(y));
    y = s;
  }
  return n.setOutput(y);
}

/// Resolves auto_pad / pads for a window op; `kernel` is the spatial window.
FailureOr<Ints> windowPads(NodeImporter &n, ArrayRef<int64_t> inShape,
                           ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                           ArrayRef<int64_t> dilations) {
  size_t rank = kernel.size();
  std::string autoPad = n.stringAttr("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    Ints pads = n.intsAttr("pads").value_or(Ints(2 * rank, 0));
    if (pads.size() != 2 * rank)
      return n.error() << "pads has " << pads.size() << " entries; expected "
                       << 2 * rank << " (begin and end per spatial dim)";
    return pads;
  }
  Ints pads(2 * rank, 0);
  if (autoPad == "VALID")
    return pads;
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return n.error() << "unknown auto_pad '" << autoPad << "'";
  for (size_t i = 0; i < rank; ++i) {
    int64_t in = inShape[i + 2];
    int64_t out = (in + strides[i] - 1) / strides[i];
    int64_t span = dilations[i] * (kernel[i] - 1) + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + span - in);
    int64_t small = total / 2, big = total - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : big;
    pads[i + rank] = autoPad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

struct WindowAttrs {
  Ints kernel, strides, pads, dilations;
};

/// Window attributes (kernel sizes, strides, dilations, pads, output
/// shapes) are at most kMaxAttributeSize in magnitude.
LogicalResult checkWindowAttrs(NodeImporter &n,
                               std::initializer_list<ArrayRef<int64_t>> lists) {
  for (ArrayRef<int64_t> list : lists)
    for (int64_t v : list)
      if (v > kMaxAttributeSize || v < -kMaxAttributeSize)
        return n.error() << "window attribute value " << v << " is out of range (at most 2^24)";
  return success();
}

FailureOr<WindowAttrs> windowAttrs(NodeImporter &n, Value x,
                                   std::optional<Ints> kernel) {
  if (rankOf(x) < 3)
    return n.error() << "input must be N x C x spatial..., got "
                     << g::formatShape(shapeOf(x));
  size_t rank = rankOf(x) - 2;
  WindowAttrs w;
  if (!kernel)
    return n.error() << "kernel_shape is required";
  w.kernel = *kernel;
  if (w.kernel.size() != rank)
    return n.error() << "kernel_shape has " << w.kernel.size()
                     << " dims for " << rank << " spatial dims";
  w.strides = n.intsAttr("strides").value_or(Ints(rank, 1));
  w.dilations = n.intsAttr("dilations").value_or(Ints(rank, 1));
  if (w.strides.size() != rank || w.dilations.size() != rank)
    return n.error() << "strides and dilations need " << rank << " entries";
  if (failed(checkWindowAttrs(n, {w.kernel, w.strides, w.dilations,
                                  n.intsAttr("pads").value_or(Ints{})})))
    return failure();
  for (size_t i = 0; i < rank; ++i)
    if (w.strides[i] <= 0 || w.dilations[i] <= 0 || w.kernel[i] <= 0)
      return n.error() << "kernel sizes, strides and dilations must be positive";
  TESSERA_ASSIGN_OR_FAIL(pads, windowPads(n, shapeOf(x), w.kernel, w.strides,
                                          w.dilations));
  w.pads = pads;
  return w;
}

} // namespace

FailureOr<Value> buildConv(NodeImporter &n, Value x, Value w, Value bias) {
  if (rankOf(w) != rankOf(x))
    return n.error() << "weight " << g::formatShape(shapeOf(w))
                     << " must have the input's rank " << rankOf(x);
  if (rankOf(x) < 3)
    return n.error() << "input must be N x C x spatial..., got "
                     << g::formatShape(shapeOf(x));
  Ints kernel = n.intsAttr("kernel_shape")
                    .value_or(Ints(ArrayRef(shapeOf(w)).drop_front(2)));
  TESSERA_ASSIGN_OR_FAIL(attrs, windowAttrs(n, x, kernel));
  if (ArrayRef<int64_t>(attrs.kernel) != ArrayRef(shapeOf(w)).drop_front(2))
    return n.error() << "kernel_shape " << g::formatShape(attrs.kernel)
                     << " disagrees with the weight "
                     << g::formatShape(shapeOf(w));
  auto &b = n.builder();
  return n.infer<g::ConvOp>(x, w, bias, b.getDenseI64ArrayAttr(attrs.strides),
                            b.getDenseI64ArrayAttr(attrs.pads),
                            b.getDenseI64ArrayAttr(attrs.dilations),
                            b.getI64IntegerAttr(n.intAttr("group", 1)));
}

namespace {

LogicalResult conv(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(v, buildConv(n, n.input(0), n.input(1), n.input(2)));
  return n.setOutput(v);
}

/// MaxPool's second output: the flat index (over N x C x spatial, row- or
/// column-major by storage_order) of each window's first maximum. Every
/// window offset is a strided slice of the input padded with the lowest
/// value; a running select keeps the best value and its index, whose
/// per-offset indices are constants.
LogicalResult maxPoolWithIndices(NodeImporter &n, const WindowAttrs &attrs,
                                 Value pooled) {
  Value x = n.input(0);
  Ints xs = shapeOf(x), out = shapeOf(pooled);
  int64_t rank = xs.size(), k = rank - 2;
  bool columnMajor = n.intAttr("storage_order", 0) != 0;
  if (columnMajor && k != 2)
    return n.unsupported("MaxPool storage_order=1 with other than 2 spatial dims");
  Type elem = elementTypeOf(x), i64 = n.builder().getI64Type();
  double lowest = isa<FloatType>(elem) ? -std::numeric_limits<double>::infinity()
                                       : -std::ldexp(1.0, elem.getIntOrFloatBitWidth() - 1);
  auto &b = n.builder();
  // Pad so that every window of every output position lies inside.
  Ints lo(rank, 0), hi(rank, 0);
  for (int64_t i = 0; i < k; ++i) {
    lo[2 + i] = attrs.pads[i];
    int64_t need = (out[2 + i] - 1) * attrs.strides[i] +
                   (attrs.kernel[i] - 1) * attrs.dilations[i] + 1;
    hi[2 + i] = std::max<int64_t>(0, need - attrs.pads[i] - xs[2 + i]);
  }
  TESSERA_ASSIGN_OR_FAIL(
      padded, n.infer<g::PadOp>(x, b.getDenseI64ArrayAttr(lo), b.getDenseI64ArrayAttr(hi),
                                g::PadModeAttr::get(n.context(), g::PadMode::constant),
                                b.getF64FloatAttr(lowest)));
  int64_t spatialSize = g::numElements(ArrayRef(xs).drop_front(2));
  // Constants: a base per image and channel, input positions per kernel
  // offset and output position (the bound on their count kept from when
  // they were one constant each).
  if (failed(n.checkConstantElements({xs[0], xs[1]}, "the indices' base")) ||
      failed(n.checkConstantElements({g::numElements(attrs.kernel),
                                      g::numElements(ArrayRef(out).drop_front(2))},
                                     "the window positions of the indices")))
    return failure();
  Ints base;
  for (int64_t nc = 0; nc < xs[0] * xs[1]; ++nc)
    base.push_back(nc * spatialSize);
  Value baseC = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({xs[0], xs[1]}, i64), ArrayRef<int64_t>(base)));
  Ints baseShape = {xs[0], xs[1]};
  baseShape.append(k, 1);
  TESSERA_ASSIGN_OR_FAIL(baseR, n.reshape(baseC, baseShape));
  int64_t offsets = g::numElements(attrs.kernel);
  Value best, bestIdx;
  for (int64_t off = 0; off < offsets; ++off) {
    Ints kpos(k);
    for (int64_t i = k - 1, rest = off; i >= 0; --i) {
      kpos[i] = rest % attrs.kernel[i];
      rest /= attrs.kernel[i];
    }
    Ints starts(rank, 0), limits = shapeOf(padded), steps(rank, 1);
    for (int64_t i = 0; i < k; ++i) {
      starts[2 + i] = kpos[i] * attrs.dilations[i];
      steps[2 + i] = attrs.strides[i];
      limits[2 + i] = starts[2 + i] + (out[2 + i] - 1) * attrs.strides[i] + 1;
    }
    TESSERA_ASSIGN_OR_FAIL(cand, n.infer<g::SliceOp>(padded, b.getDenseI64ArrayAttr(starts),
                                                     b.getDenseI64ArrayAttr(limits),
                                                     b.getDenseI64ArrayAttr(steps)));
    // Flat input positions of this offset for every output position
    // (clamped where the window reaches into padding: never the maximum):
    // the base plus, per spatial dimension, its clamped coordinate times
    // its weight in the flat index, broadcast over the others. Constants of
    // the output's extent per dimension, not of its every position (filled
    // element by element, a fuzzed model took the instrumented importer 27 s).
    Value candIdx = baseR;
    for (int64_t i = 0; i < k; ++i) {
      int64_t weight = 1;
      if (columnMajor)
        weight = i == 1 ? xs[2] : 1;
      else
        for (int64_t j = i + 1; j < k; ++j)
          weight *= xs[2 + j];
      Ints term(out[2 + i]);
      for (int64_t o = 0; o < out[2 + i]; ++o)
        term[o] = std::clamp<int64_t>(o * attrs.strides[i] - attrs.pads[i] +
                                          kpos[i] * attrs.dilations[i],
                                      0, xs[2 + i] - 1) *
                  weight;
      Ints termShape(rank, 1);
      termShape[2 + i] = out[2 + i];
      Value termC = n.constant(DenseElementsAttr::get(RankedTensorType::get(termShape, i64),
                                                      ArrayRef<int64_t>(term)));
      TESSERA_ASSIGN_OR_FAIL(sum, n.infer<g::AddOp>(candIdx, termC));
      candIdx = sum;
    }
    if (!best) {
      best = cand;
      bestIdx = candIdx;
      continue;
    }
    TESSERA_ASSIGN_OR_FAIL(better, n.infer<g::GreaterOp>(cand, best));
    TESSERA_ASSIGN_OR_FAIL(nb, n.infer<g::SelectOp>(better, cand, best));
    TESSERA_ASSIGN_OR_FAIL(ni, n.infer<g::SelectOp>(better, candIdx, bestIdx));
    best = nb;
    bestIdx = ni;
  }
  return n.setOutputs({pooled, bestIdx});
}

LogicalResult maxPool(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(attrs, windowAttrs(n, n.input(0), n.intsAttr("kernel_shape")));
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::MaxPoolOp>(n.input(0), b.getDenseI64ArrayAttr(attrs.kernel),
                               b.getDenseI64ArrayAttr(attrs.strides),
                               b.getDenseI64ArrayAttr(attrs.pads),
                               b.getDenseI64ArrayAttr(attrs.dilations),
                               b.getBoolAttr(n.intAttr("ceil_mode", 0))));
  if (n.node().output_size() > 1 && !n.node().output(1).empty())
    return maxPoolWithIndices(n, attrs, v);
  return n.setOutput(v);
}

LogicalResult avgPool(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(attrs, windowAttrs(n, n.input(0), n.intsAttr("kernel_shape")));
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::AvgPoolOp>(n.input(0), b.getDenseI64ArrayAttr(attrs.kernel),
                               b.getDenseI64ArrayAttr(attrs.strides),
                               b.getDenseI64ArrayAttr(attrs.pads),
                               b.getDenseI64ArrayAttr(attrs.dilations),
                               b.getBoolAttr(n.intAttr("ceil_mode", 0)),
                               b.getBoolAttr(n.intAttr("count_include_pad", 0))));
  return n.setOutput(v);
}

template <typename ReduceOp> LogicalResult globalPool(NodeImporter &n) {
  Value x = n.input(0);
  if (rankOf(x) < 3)
    return n.error() << "input must be N x C x spatial..., got "
                     << g::formatShape(shapeOf(x));
  Ints axes;
  for (int64_t d = 2; d < rankOf(x); ++d)
    axes.push_back(d);
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<ReduceOp>(x, n.builder().getDenseI64ArrayAttr(axes),
                                              n.builder().getBoolAttr(true)));
  return n.setOutput(v);
}

/// Training mode normalises with the batch's statistics and outputs the
/// running mean and variance moved towards them, with the population
/// variance as ONNX specifies. The running-statistics initializers are also
/// updated in place the way PyTorch's train() updates its buffers (with the
/// unbiased variance), since torch.onnx.export leaves those outputs unused
/// and ONNX has no state of its own.
LogicalResult batchNormTraining(NodeImporter &n) {
  // ONNX's momentum weighs the old value; PyTorch's the batch's.
  double momentum = n.floatAttr("momentum", 0.9);
  TESSERA_ASSIGN_OR_FAIL(
      bn, g::createTrainingBatchNorm(n.builder(), n.loc(), n.input(0), n.input(1),
                                     n.input(2), n.input(3), n.input(4), 1 - momentum,
                                     n.floatAttr("epsilon", 1e-5)));
  auto rebind = [&](Value from, Value to) { n.model().rebind(from, to); };
  g::storeBackToGlobal(n.builder(), n.loc(), n.input(3), bn.runningMean, rebind);
  g::storeBackToGlobal(n.builder(), n.loc(), n.input(4), bn.runningVar, rebind);
  Type elem = elementTypeOf(n.input(0));
  TESSERA_ASSIGN_OR_FAIL(kept, n.infer<g::MulOp>(n.input(4), n.scalar(elem, momentum)));
  TESSERA_ASSIGN_OR_FAIL(added, n.infer<g::MulOp>(bn.batchVar, n.scalar(elem, 1 - momentum)));
  TESSERA_ASSIGN_OR_FAIL(populationVar, n.infer<g::AddOp>(kept, added));
  return n.setOutputs({bn.output, bn.runningMean, populationVar});
}

LogicalResult batchNorm(NodeImporter &n) {
  if (n.intAttr("training_mode", 0))
    return batchNormTraining(n);
  if (n.opset() < 9 && n.intAttr("spatial", 1) == 0)
    return n.unsupported("BatchNormalization with spatial=0");
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::BatchNormOp>(n.input(0), n.input(1), n.input(2), n.input(3),
                                 n.input(4),
                                 n.builder().getF64FloatAttr(
                                     n.floatAttr("epsilon", 1e-5))));
  return n.setOutput(v);
}

LogicalResult layerNorm(NodeImporter &n) {
  Value x = n.input(0), scale = n.input(1);
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", -1), rankOf(x)));
  double epsilon = n.floatAttr("epsilon", 1e-5);
  Value bias = n.hasInput(2) ? n.input(2)
                             : n.splat(elementTypeOf(x), shapeOf(scale), 0);
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(
      y, n.infer<g::LayerNormOp>(x, scale, bias, b.getI64IntegerAttr(axis),
                                 b.getF64FloatAttr(epsilon)));
  if (n.node().output_size() == 1)
    return n.setOutput(y);
  // The optional Mean and InvStdDev outputs (training graphs keep them),
  // shaped like the input with the normalised dims reduced to 1.
  Ints axes;
  for (int64_t d = axis; d < rankOf(x); ++d)
    axes.push_back(d);
  Type elem = elementTypeOf(x);
  TESSERA_ASSIGN_OR_FAIL(mean, n.infer<g::ReduceMeanOp>(x, b.getDenseI64ArrayAttr(axes),
                                                         b.getBoolAttr(true)));
  TESSERA_ASSIGN_OR_FAIL(centered, n.infer<g::SubOp>(x, mean));
  TESSERA_ASSIGN_OR_FAIL(sq, n.infer<g::MulOp>(centered, centered));
  TESSERA_ASSIGN_OR_FAIL(var, n.infer<g::ReduceMeanOp>(sq, b.getDenseI64ArrayAttr(axes),
                                                        b.getBoolAttr(true)));
  TESSERA_ASSIGN_OR_FAIL(shifted, n.infer<g::AddOp>(var, n.scalar(elem, epsilon)));
  TESSERA_ASSIGN_OR_FAIL(inv, n.build<g::RsqrtOp>(shifted.getType(), shifted));
  return n.setOutputs({y, mean, inv});
}

LogicalResult trilu(NodeImporter &n) {
  Value x = n.input(0);
  Ints s = shapeOf(x);
  if (s.size() < 2)
    return n.error() << "input must have rank >= 2, got " << g::formatShape(s);
  int64_t k = 0;
  if (n.hasInput(1)) {
    TESSERA_ASSIGN_OR_FAIL(kv, n.constantScalar(1, "k"));
    k = static_cast<int64_t>(kv);
  }
  bool upper = n.intAttr("upper", 1) != 0;
  // The kept triangle as a compile-time mask over the last two dims.
  int64_t rows = s[s.size() - 2], cols = s.back();
  if (failed(n.checkConstantElements({rows, cols}, "the triangle's mask")))
    return failure();
  SmallVector<bool> mask;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.push_back(upper ? j - i >= k : j - i <= k);
  auto maskType = RankedTensorType::get({rows, cols}, n.builder().getI1Type());
  Value m = n.constant(DenseElementsAttr::get(maskType, ArrayRef<bool>(mask)));
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::SelectOp>(m, x, n.scalar(elementTypeOf(x), 0)));
  return n.setOutput(v);
}

LogicalResult instanceNorm(NodeImporter &n) {
  Value x = n.input(0);
  if (rankOf(x) < 3)
    return n.error() << "input must be N x C x spatial..., got "
                     << g::formatShape(shapeOf(x));
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::GroupNormOp>(x, n.input(1), n.input(2),
                                 n.builder().getI64IntegerAttr(shapeOf(x)[1]),
                                 n.builder().getF64FloatAttr(
                                     n.floatAttr("epsilon", 1e-5))));
  return n.setOutput(v);
}

template <typename SoftmaxOp> LogicalResult softmax(NodeImporter &n) {
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  if (rank == 0)
    return n.error() << "input must have rank >= 1";
  auto &b = n.builder();
  if (n.opset() >= 13) {
    TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", -1), rank));
    TESSERA_ASSIGN_OR_FAIL(v, n.build<SoftmaxOp>(x.getType(), x,
                                                 b.getI64IntegerAttr(axis)));
    return n.setOutput(v);
  }
  // Before opset 13 the input is coerced to 2-D at `axis` and normalised
  // over everything from `axis` on.
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 1), rank));
  Ints shape = shapeOf(x);
  if (axis == rank - 1) {
    TESSERA_ASSIGN_OR_FAIL(v, n.build<SoftmaxOp>(x.getType(), x,
                                                 b.getI64IntegerAttr(axis)));
    return n.setOutput(v);
  }
  int64_t outer = g::numElements(ArrayRef(shape).take_front(axis));
  int64_t inner = g::numElements(ArrayRef(shape).drop_front(axis));
  TESSERA_ASSIGN_OR_FAIL(flat, n.reshape(x, {outer, inner}));
  TESSERA_ASSIGN_OR_FAIL(s, n.build<SoftmaxOp>(flat.getType(), flat,
                                               b.getI64IntegerAttr(1)));
  TESSERA_ASSIGN_OR_FAIL(v, n.reshape(s, shape));
  return n.setOutput(v);
}

/// One-hot of the (first) maximum along `axis` of a tensor.
FailureOr<Value> hardmaxAlong(NodeImporter &n, Value x, int64_t axis) {
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(am, n.infer<g::ArgMaxOp>(x, b.getI64IntegerAttr(axis),
                                                  b.getBoolAttr(true),
                                                  b.getBoolAttr(false)));
  Ints s = shapeOf(x);
  Ints iotaShape(s.size(), 1);
  iotaShape[axis] = s[axis];
  if (failed(n.checkConstantElements({s[axis]}, "the positions along the axis")))
    return failure();
  SmallVector<int64_t> values;
  for (int64_t i = 0; i < s[axis]; ++i)
    values.push_back(i);
  Value iota = n.constant(DenseElementsAttr::get(
      RankedTensorType::get(iotaShape, b.getI64Type()), ArrayRef<int64_t>(values)));
  TESSERA_ASSIGN_OR_FAIL(hit, n.infer<g::EqualOp>(iota, am));
  return n.castTo(hit, elementTypeOf(x));
}

LogicalResult hardmax(NodeImporter &n) {
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  if (rank == 0)
    return n.error() << "input must have rank >= 1";
  if (n.opset() >= 13) {
    TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", -1), rank));
    TESSERA_ASSIGN_OR_FAIL(v, hardmaxAlong(n, x, axis));
    return n.setOutput(v);
  }
  // Before opset 13: over everything from `axis` on, as a 2-D view.
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 1), rank));
  Ints shape = shapeOf(x);
  TESSERA_ASSIGN_OR_FAIL(
      flat, n.reshape(x, {g::numElements(ArrayRef(shape).take_front(axis)),
                          g::numElements(ArrayRef(shape).drop_front(axis))}));
  TESSERA_ASSIGN_OR_FAIL(h, hardmaxAlong(n, flat, 1));
  TESSERA_ASSIGN_OR_FAIL(v, n.reshape(h, shape));
  return n.setOutput(v);
}

LogicalResult cumSum(NodeImporter &n) {
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  TESSERA_ASSIGN_OR_FAIL(axisValue, n.constantScalar(1, "axis"));
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(static_cast<int64_t>(axisValue), rank));
  bool exclusive = n.intAttr("exclusive", 0), reverse = n.intAttr("reverse", 0);
  // A running sum is a product with a triangular 0/1 matrix: move `axis`
  // last, multiply by M[j][i] = (i is summed into j), move it back.
  int64_t len = shapeOf(x)[axis];
  Type elem = elementTypeOf(x);
  if (failed(n.checkConstantElements({len, len}, "the summation mask")))
    return failure();
  SmallVector<Attribute> m;
  for (int64_t src = 0; src < len; ++src)
    for (int64_t dst = 0; dst < len; ++dst) {
      bool in = reverse ? (exclusive ? src > dst : src >= dst)
                        : (exclusive ? src < dst : src <= dst);
      m.push_back(isa<FloatType>(elem)
                      ? static_cast<Attribute>(FloatAttr::get(elem, in ? 1.0 : 0.0))
                      : IntegerAttr::get(elem, in ? 1 : 0));
    }
  Value mask = n.constant(DenseElementsAttr::get(RankedTensorType::get({len, len}, elem), m));
  Ints perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  Ints inverse(rank);
  for (int64_t d = 0; d < rank; ++d)
    inverse[perm[d]] = d;
  TESSERA_ASSIGN_OR_FAIL(moved, n.transpose(x, perm));
  TESSERA_ASSIGN_OR_FAIL(summed, n.infer<g::MatmulOp>(moved, mask));
  TESSERA_ASSIGN_OR_FAIL(v, n.transpose(summed, inverse));
  return n.setOutput(v);
}

//===----------------------------------------------------------------------===//
// Losses: decomposed into gathers, selects and reductions
//===----------------------------------------------------------------------===//

/// NegativeLogLikelihoodLoss of log-probabilities `logp` (N x C x d...) at
/// class indices `target` (N x d...), with optional class `weight` (C),
/// `ignore_index` and reduction none / sum / mean (weighted mean).
FailureOr<Value> nllLoss(NodeImporter &n, Value logp, Value target, Value weight) {
  auto &b = n.builder();
  Type elem = elementTypeOf(logp);
  Ints ts = shapeOf(target);
  if (rankOf(logp) < 2 || static_cast<int64_t>(ts.size()) != rankOf(logp) - 1)
    return n.error() << "input " << g::formatShape(shapeOf(logp))
                     << " must be N x C x d... and target N x d..., got target "
                     << g::formatShape(ts);
  Value t = target;
  Value valid;
  if (n.hasAttr("ignore_index")) {
    Value ii = n.scalar(elementTypeOf(target), n.intAttr("ignore_index", 0));
    TESSERA_ASSIGN_OR_FAIL(ignored, n.infer<g::EqualOp>(target, ii));
    TESSERA_ASSIGN_OR_FAIL(keep, n.build<g::NotOp>(ignored.getType(), ignored));
    valid = keep;
    // Ignored positions read class 0; their weight is zeroed below.
    TESSERA_ASSIGN_OR_FAIL(safe, n.infer<g::SelectOp>(
                                     valid, target, n.scalar(elementTypeOf(target), 0)));
    t = safe;
  }
  Ints idxShape = ts;
  idxShape.insert(idxShape.begin() + 1, 1);
  TESSERA_ASSIGN_OR_FAIL(idx, n.reshape(t, idxShape));
  TESSERA_ASSIGN_OR_FAIL(picked, n.infer<g::GatherElementsOp>(logp, idx,
                                                               b.getI64IntegerAttr(1)));
  TESSERA_ASSIGN_OR_FAIL(pickedFlat, n.reshape(picked, ts));
  Value w;
  if (weight) {
    TESSERA_ASSIGN_OR_FAIL(gw, n.infer<g::GatherOp>(weight, t, b.getI64IntegerAttr(0)));
    w = gw;
  } else {
    w = n.splat(elem, ts, 1);
  }
  if (valid) {
    TESSERA_ASSIGN_OR_FAIL(vw, n.infer<g::SelectOp>(valid, w, n.scalar(elem, 0)));
    w = vw;
  }
  TESSERA_ASSIGN_OR_FAIL(weighted, n.infer<g::MulOp>(pickedFlat, w));
  TESSERA_ASSIGN_OR_FAIL(loss, n.build<g::NegOp>(weighted.getType(), weighted));
  std::string reduction = n.stringAttr("reduction", "mean");
  if (reduction == "none")
    return loss;
  Ints all;
  for (int64_t d = 0; d < static_cast<int64_t>(ts.size()); ++d)
    all.push_back(d);
  TESSERA_ASSIGN_OR_FAIL(sum, n.infer<g::ReduceSumOp>(loss, b.getDenseI64ArrayAttr(all),
                                                       b.getBoolAttr(false)));
  if (reduction == "sum")
    return sum;
  if (reduction != "mean")
    return n.error() << "unknown reduction '" << reduction << "'";
  TESSERA_ASSIGN_OR_FAIL(wsum, n.infer<g::ReduceSumOp>(w, b.getDenseI64ArrayAttr(all),
                                                        b.getBoolAttr(false)));
  return n.infer<g::DivOp>(sum, wsum);
}

LogicalResult negativeLogLikelihoodLoss(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(v, nllLoss(n, n.input(0), n.input(1), n.input(2)));
  return n.setOutput(v);
}

LogicalResult softmaxCrossEntropyLoss(NodeImporter &n) {
  Value scores = n.input(0);
  if (rankOf(scores) < 2)
    return n.error() << "scores must be N x C x d..., got "
                     << g::formatShape(shapeOf(scores));
  TESSERA_ASSIGN_OR_FAIL(
      logp, n.build<g::LogSoftmaxOp>(scores.getType(), scores,
                                     n.builder().getI64IntegerAttr(1)));
  TESSERA_ASSIGN_OR_FAIL(loss, nllLoss(n, logp, n.input(1), n.input(2)));
  return n.setOutputs({loss, logp});
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The reduced axes of a Reduce* node: from the `axes` input (ReduceSum from
/// opset 13) or attribute; none means all unless noop_with_empty_axes.
FailureOr<Ints> reductionAxes(NodeImporter &n, bool axesAsInput) {
  Value x = n.input(0);
  std::optional<Ints> axes;
  if (axesAsInput) {
    if (n.hasInput(1)) {
      TESSERA_ASSIGN_OR_FAIL(a, n.constantInts(1, "axes"));
      axes = a;
    }
  } else {
    axes = n.intsAttr("axes");
  }
  if (!axes || axes->empty()) {
    if (n.intAttr("noop_with_empty_axes", 0))
      return Ints();
    Ints all;
    for (int64_t d = 0; d < rankOf(x); ++d)
      all.push_back(d);
    return all;
  }
  return n.normalizeAxes(*axes, rankOf(x));
}

template <typename ReduceOp>
FailureOr<Value> reduce(NodeImporter &n, Value x, ArrayRef<int64_t> axes) {
  return n.infer<ReduceOp>(x, n.builder().getDenseI64ArrayAttr(axes),
                           n.builder().getBoolAttr(n.intAttr("keepdims", 1)));
}

template <typename ReduceOp> LogicalResult reduceOp(NodeImporter &n) {
  bool axesAsInput = std::is_same_v<ReduceOp, g::ReduceSumOp> && n.opset() >= 13;
  TESSERA_ASSIGN_OR_FAIL(axes, reductionAxes(n, axesAsInput));
  TESSERA_ASSIGN_OR_FAIL(v, reduce<ReduceOp>(n, n.input(0), axes));
  return n.setOutput(v);
}

/// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp.
LogicalResult reduceComposite(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(axes, reductionAxes(n, /*axesAsInput=*/false));
  Value x = n.input(0);
  StringRef op = n.opType();
  if (op == "ReduceL1") {
    TESSERA_ASSIGN_OR_FAIL(a, n.build<g::AbsOp>(x.getType(), x));
    x = a;
  } else if (op == "ReduceL2" || op == "ReduceSumSquare") {
    TESSERA_ASSIGN_OR_FAIL(sq, n.infer<g::MulOp>(x, x));
    x = sq;
  }
  if (op == "ReduceLogSumExp") {
    // Shift by the max for stability: log(sum(exp(x - m))) + m.
    TESSERA_ASSIGN_OR_FAIL(
        m, n.infer<g::ReduceMaxOp>(x, n.builder().getDenseI64ArrayAttr(axes),
                                   n.builder().getBoolAttr(true)));
    TESSERA_ASSIGN_OR_FAIL(shifted, n.infer<g::SubOp>(x, m));
    TESSERA_ASSIGN_OR_FAIL(e, n.build<g::ExpOp>(shifted.getType(), shifted));
    TESSERA_ASSIGN_OR_FAIL(s, reduce<g::ReduceSumOp>(n, e, axes));
    TESSERA_ASSIGN_OR_FAIL(l, n.build<g::LogOp>(s.getType(), s));
    Value mk = m;
    if (!n.intAttr("keepdims", 1)) {
      TESSERA_ASSIGN_OR_FAIL(r, n.reshape(m, shapeOf(l)));
      mk = r;
    }
    TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::AddOp>(l, mk));
    return n.setOutput(v);
  }
  TESSERA_ASSIGN_OR_FAIL(s, reduce<g::ReduceSumOp>(n, x, axes));
  if (op == "ReduceL2") {
    TESSERA_ASSIGN_OR_FAIL(r, n.build<g::SqrtOp>(s.getType(), s));
    s = r;
  } else if (op == "ReduceLogSum") {
    TESSERA_ASSIGN_OR_FAIL(r, n.build<g::LogOp>(s.getType(), s));
    s = r;
  }
  return n.setOutput(s);
}

template <typename ArgOp> LogicalResult argReduce(NodeImporter &n) {
  Value x = n.input(0);
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 0), rankOf(x)));
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<ArgOp>(x, b.getI64IntegerAttr(axis),
                        b.getBoolAttr(n.intAttr("keepdims", 1)),
                        b.getBoolAttr(n.intAttr("select_last_index", 0))));
  return n.setOutput(v);
}

//===----------------------------------------------------------------------===//
// Shapes and data movement
//===----------------------------------------------------------------------===//

LogicalResult shape(NodeImporter &n) {
  Ints s = shapeOf(n.input(0));
  int64_t rank = s.size();
  int64_t start = n.intAttr("start", 0), end = n.intAttr("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  return n.setOutput(n.i64Constant(ArrayRef(s).slice(start, end - start)));
}

LogicalResult size(NodeImporter &n) {
  return n.setOutput(
      n.splat(n.builder().getI64Type(), {}, g::numElements(shapeOf(n.input(0)))));
}

LogicalResult reshape(NodeImporter &n) {
  Value x = n.input(0);
  Ints in = shapeOf(x);
  Ints target;
  if (n.opset() < 5) {
    target = n.intsAttr("shape").value_or(Ints());
  } else {
    TESSERA_ASSIGN_OR_FAIL(t, n.constantInts(1, "shape"));
    target = t;
  }
  bool allowZero = n.intAttr("allowzero", 0) != 0;
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowZero) {
      if (i >= in.size())
        return n.error() << "shape entry " << i
                         << " is 0 (copy the input dim) but the input has rank "
                         << in.size();
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (inferred >= 0)
        return n.error() << "shape " << g::formatShape(target)
                         << " has more than one -1";
      inferred = i;
      continue;
    }
    if (target[i] < 0)
      return n.error() << "shape entry " << target[i] << " is invalid";
    // A product past any IPU system's elements (2^36) cannot be the
    // input's, and must not overflow on the way.
    if (target[i] > 0 && known > (int64_t(1) << 36) / target[i])
      return n.error() << "shape " << g::formatShape(target)
                       << " has more elements than any IPU system holds";
    known *= target[i];
  }
  int64_t total = g::numElements(in);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return n.error() << "cannot reshape " << g::formatShape(in)
                       << " to a shape with known dims of product " << known;
    target[inferred] = total / known;
  }
  TESSERA_ASSIGN_OR_FAIL(v, n.reshape(x, target));
  return n.setOutput(v);
}

LogicalResult flatten(NodeImporter &n) {
  Value x = n.input(0);
  Ints s = shapeOf(x);
  int64_t rank = s.size();
  int64_t axis = n.intAttr("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return n.error() << "axis " << n.intAttr("axis", 1)
                     << " is out of range for rank " << rank;
  TESSERA_ASSIGN_OR_FAIL(
      v, n.reshape(x, {g::numElements(ArrayRef(s).take_front(axis)),
                       g::numElements(ArrayRef(s).drop_front(axis))}));
  return n.setOutput(v);
}

LogicalResult transposeOp(NodeImporter &n) {
  Value x = n.input(0);
  Ints perm;
  if (auto p = n.intsAttr("perm")) {
    perm = *p;
  } else {
    for (int64_t d = rankOf(x) - 1; d >= 0; --d)
      perm.push_back(d);
  }
  TESSERA_ASSIGN_OR_FAIL(v, n.transpose(x, perm));
  return n.setOutput(v);
}

/// DepthToSpace and SpaceToDepth: a reshape that exposes the blocks, a
/// transpose that moves them, and a reshape back to rank 4.
LogicalResult depthToSpace(NodeImporter &n) {
  Value x = n.input(0);
  Ints s = shapeOf(x);
  int64_t b = n.intAttr("blocksize", 0);
  if (failed(checkWindowAttrs(n, {{b}})))
    return failure();
  if (s.size() != 4 || b <= 0 || s[1] % (b * b) != 0)
    return n.error() << "needs a rank-4 input whose channels divide by blocksize^2 "
                        "(blocksize "
                     << b << ", input " << g::formatShape(s) << ")";
  int64_t c = s[1] / (b * b);
  bool crd = n.stringAttr("mode", "DCR") == "CRD";
  TESSERA_ASSIGN_OR_FAIL(
      blocks, crd ? n.reshape(x, {s[0], c, b, b, s[2], s[3]})
                  : n.reshape(x, {s[0], b, b, c, s[2], s[3]}));
  TESSERA_ASSIGN_OR_FAIL(moved, crd ? n.transpose(blocks, {0, 1, 4, 2, 5, 3})
                                    : n.transpose(blocks, {0, 3, 4, 1, 5, 2}));
  TESSERA_ASSIGN_OR_FAIL(v, n.reshape(moved, {s[0], c, s[2] * b, s[3] * b}));
  return n.setOutput(v);
}

LogicalResult spaceToDepth(NodeImporter &n) {
  Value x = n.input(0);
  Ints s = shapeOf(x);
  int64_t b = n.intAttr("blocksize", 0);
  if (s.size() != 4 || b <= 0 || s[2] % b != 0 || s[3] % b != 0)
    return n.error() << "needs a rank-4 input whose height and width divide by "
                        "blocksize (blocksize "
                     << b << ", input " << g::formatShape(s) << ")";
  TESSERA_ASSIGN_OR_FAIL(blocks, n.reshape(x, {s[0], s[1], s[2] / b, b, s[3] / b, b}));
  TESSERA_ASSIGN_OR_FAIL(moved, n.transpose(blocks, {0, 3, 5, 1, 2, 4}));
  TESSERA_ASSIGN_OR_FAIL(v, n.reshape(moved, {s[0], s[1] * b * b, s[2] / b, s[3] / b}));
  return n.setOutput(v);
}

/// EyeLike: ones on diagonal k of a matrix the input's shape, a constant.
LogicalResult eyeLike(NodeImporter &n) {
  Ints s = shapeOf(n.input(0));
  if (s.size() != 2)
    return n.error() << "needs a rank-2 input, got " << g::formatShape(s);
  Type elem = elementTypeOf(n.input(0));
  if (n.hasAttr("dtype")) {
    elem = elementTypeFor(n.intAttr("dtype", 1), n.builder().getContext());
    if (!elem)
      return n.unsupported("EyeLike dtype " + std::to_string(n.intAttr("dtype", 1)));
  }
  int64_t k = n.intAttr("k", 0);
  auto type = RankedTensorType::get(s, elem);
  if (failed(n.checkConstantElements(s, "the identity matrix")))
    return failure();
  SmallVector<Attribute> values;
  Builder &b = n.builder();
  for (int64_t i = 0; i < s[0]; ++i)
    for (int64_t j = 0; j < s[1]; ++j) {
      bool one = j - i == k;
      values.push_back(isa<FloatType>(elem)
                           ? Attribute(b.getFloatAttr(elem, one ? 1.0 : 0.0))
                           : Attribute(b.getIntegerAttr(elem, one ? 1 : 0)));
    }
  return n.setOutput(n.constant(DenseElementsAttr::get(type, values)));
}

/// The float element type a random op produces: its `dtype` attribute, else
/// `fallback` (the input's for the *Like ops, f32 otherwise).
FailureOr<Type> randomElementType(NodeImporter &n, Type fallback) {
  Type elem = fallback;
  if (n.hasAttr("dtype"))
    elem = elementTypeFor(n.intAttr("dtype", 1), n.builder().getContext());
  if (!elem || !isa<FloatType>(elem))
    return n.error() << "random values must be floats, got dtype "
                     << n.intAttr("dtype", 1);
  return elem;
}

/// RandomUniform(Like) and RandomNormal(Like) draw from Tessera's
/// counter-based generator (graph.random_uniform, keyed by the program's
/// rng.seed and run counter), not from the node's `seed` attribute: the
/// same numbers on the IPU model and the host, fresh every run.
template <bool like, bool normal> LogicalResult randomOp(NodeImporter &n) {
  Ints shape;
  Type fallback = n.builder().getF32Type();
  if (like) {
    shape = shapeOf(n.input(0));
    if (isa<FloatType>(elementTypeOf(n.input(0))))
      fallback = elementTypeOf(n.input(0));
  } else {
    auto given = n.intsAttr("shape");
    if (!given)
      return n.error() << "needs its 'shape' attribute";
    shape.assign(given->begin(), given->end());
  }
  TESSERA_ASSIGN_OR_FAIL(elem, randomElementType(n, fallback));
  Location loc = n.loc();
  if (!normal) {
    double low = n.floatAttr("low", 0.0), high = n.floatAttr("high", 1.0);
    if (!(low < high))
      return n.error() << "needs low < high, got [" << low << ", " << high << ")";
    TESSERA_ASSIGN_OR_FAIL(u, g::createRandomUniform(n.builder(), loc, elem, shape, low, high));
    return n.setOutput(u);
  }
  // Box-Muller: sqrt(-2 ln u1) cos(2 pi u2), with u1 in (0, 1].
  double mean = n.floatAttr("mean", 0.0), scale = n.floatAttr("scale", 1.0);
  TESSERA_ASSIGN_OR_FAIL(u1, g::createRandomUniform(n.builder(), loc, elem, shape, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(u2, g::createRandomUniform(n.builder(), loc, elem, shape, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(open, n.infer<g::SubOp>(n.scalar(elem, 1.0), u1));
  TESSERA_ASSIGN_OR_FAIL(logU, n.build<g::LogOp>(open.getType(), open));
  TESSERA_ASSIGN_OR_FAIL(radius2, n.infer<g::MulOp>(logU, n.scalar(elem, -2.0)));
  TESSERA_ASSIGN_OR_FAIL(radius, n.build<g::SqrtOp>(radius2.getType(), radius2));
  TESSERA_ASSIGN_OR_FAIL(angle, n.infer<g::MulOp>(u2, n.scalar(elem, 2 * M_PI)));
  TESSERA_ASSIGN_OR_FAIL(cosine, n.build<g::CosOp>(angle.getType(), angle));
  TESSERA_ASSIGN_OR_FAIL(z, n.infer<g::MulOp>(radius, cosine));
  TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(z, n.scalar(elem, scale)));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::AddOp>(scaled, n.scalar(elem, mean)));
  return n.setOutput(v);
}

/// Bernoulli: 1 where a uniform draw falls below the input's probability.
LogicalResult bernoulli(NodeImporter &n) {
  Value p = n.input(0);
  Type probElem = elementTypeOf(p);
  if (!isa<FloatType>(probElem))
    return n.error() << "probabilities must be floats";
  Type elem = probElem;
  if (n.hasAttr("dtype")) {
    elem = elementTypeFor(n.intAttr("dtype", 1), n.builder().getContext());
    if (!elem)
      return n.unsupported("Bernoulli dtype " + std::to_string(n.intAttr("dtype", 1)));
  }
  TESSERA_ASSIGN_OR_FAIL(u, g::createRandomUniform(n.builder(), n.loc(), probElem,
                                                   shapeOf(p), 0, 1));
  TESSERA_ASSIGN_OR_FAIL(hit, n.infer<g::LessOp>(u, p));
  TESSERA_ASSIGN_OR_FAIL(v, n.castTo(hit, elem));
  return n.setOutput(v);
}

/// OneHot: compare the indices (moved to the new axis) with 0..depth-1
/// along it, and pick the on or off value. depth and values are constants.
LogicalResult oneHot(NodeImporter &n) {
  Value indices = n.input(0);
  TESSERA_ASSIGN_OR_FAIL(depthValue, n.constantScalar(1, "depth"));
  int64_t depth = static_cast<int64_t>(depthValue);
  DenseElementsAttr values = n.constantInput(2);
  if (!values || values.getNumElements() != 2)
    return n.error() << "input 'values' must be a constant [off, on] pair";
  if (depth <= 0)
    return n.error() << "depth must be positive, got " << depth;
  Type elem = values.getElementType();
  auto scalarOf = [&](int64_t i) {
    if (isa<FloatType>(elem))
      return (*(values.getValues<APFloat>().begin() + i)).convertToDouble();
    return double((*(values.getValues<APInt>().begin() + i)).getSExtValue());
  };
  Ints s = shapeOf(indices);
  int64_t rank = s.size() + 1;
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", -1), rank));
  Type i64 = n.builder().getI64Type();
  TESSERA_ASSIGN_OR_FAIL(idx, n.castTo(indices, i64));
  // Negative indices count from depth.
  TESSERA_ASSIGN_OR_FAIL(negative, n.infer<g::LessOp>(idx, n.scalar(i64, 0)));
  TESSERA_ASSIGN_OR_FAIL(wrapped, n.infer<g::AddOp>(idx, n.scalar(i64, double(depth))));
  TESSERA_ASSIGN_OR_FAIL(fixed, n.infer<g::SelectOp>(negative, wrapped, idx));
  Ints expanded = s;
  expanded.insert(expanded.begin() + axis, 1);
  TESSERA_ASSIGN_OR_FAIL(column, n.reshape(fixed, expanded));
  Ints iotaShape(rank, 1);
  iotaShape[axis] = depth;
  if (failed(n.checkConstantElements({depth}, "the one-hot positions")))
    return failure();
  SmallVector<int64_t> iota(depth);
  std::iota(iota.begin(), iota.end(), 0);
  Value positions = n.constant(
      DenseElementsAttr::get(RankedTensorType::get(iotaShape, i64), ArrayRef<int64_t>(iota)));
  TESSERA_ASSIGN_OR_FAIL(hit, n.infer<g::EqualOp>(column, positions));
  Ints outShape = expanded;
  outShape[axis] = depth;
  Value on = n.splat(elem, outShape, scalarOf(1));
  Value off = n.splat(elem, outShape, scalarOf(0));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::SelectOp>(hit, on, off));
  return n.setOutput(v);
}

LogicalResult squeeze(NodeImporter &n) {
  Value x = n.input(0);
  Ints s = shapeOf(x);
  std::optional<Ints> axes;
  if (n.opset() >= 13) {
    if (n.hasInput(1)) {
      TESSERA_ASSIGN_OR_FAIL(a, n.constantInts(1, "axes"));
      axes = a;
    }
  } else {
    axes = n.intsAttr("axes");
  }
  Ints drop;
  if (axes) {
    TESSERA_ASSIGN_OR_FAIL(a, n.normalizeAxes(*axes, s.size()));
    drop = a;
    for (int64_t d : drop)
      if (s[d] != 1)
        return n.error() << "cannot squeeze dim " << d << " of size " << s[d]
                         << " (shape " << g::formatShape(s) << ")";
  } else {
    for (size_t d = 0; d < s.size(); ++d)
      if (s[d] == 1)
        drop.push_back(d);
  }
  Ints out;
  for (size_t d = 0; d < s.size(); ++d)
    if (!llvm::is_contained(drop, static_cast<int64_t>(d)))
      out.push_back(s[d]);
  TESSERA_ASSIGN_OR_FAIL(v, n.reshape(x, out));
  return n.setOutput(v);
}

LogicalResult unsqueeze(NodeImporter &n) {
  Value x = n.input(0);
  Ints s = shapeOf(x);
  Ints axes;
  if (n.opset() >= 13) {
    TESSERA_ASSIGN_OR_FAIL(a, n.constantInts(1, "axes"));
    axes = a;
  } else {
    axes = n.intsAttr("axes").value_or(Ints());
  }
  int64_t outRank = s.size() + axes.size();
  TESSERA_ASSIGN_OR_FAIL(norm, n.normalizeAxes(axes, outRank));
  Ints out;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d)
    out.push_back(llvm::is_contained(norm, d) ? 1 : s[next++]);
  TESSERA_ASSIGN_OR_FAIL(v, n.reshape(x, out));
  return n.setOutput(v);
}

LogicalResult concat(NodeImporter &n) {
  SmallVector<Value> inputs;
  for (size_t i = 0; i < n.numInputs(); ++i)
    if (n.hasInput(i))
      inputs.push_back(n.input(i));
  if (inputs.empty())
    return n.error() << "needs at least one input";
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 0), rankOf(inputs[0])));
  // ONNX allows zero-sized inputs, which carry nothing.
  SmallVector<Value> nonEmpty;
  for (Value v : inputs)
    if (g::numElements(shapeOf(v)) != 0)
      nonEmpty.push_back(v);
  if (nonEmpty.empty())
    nonEmpty.push_back(inputs.front());
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::ConcatOp>(nonEmpty,
                                                 n.builder().getI64IntegerAttr(axis)));
  return n.setOutput(v);
}

/// ConvTranspose as a stride-1 convolution of the zero-upsampled input with
/// the flipped, channel-swapped kernel: every piece is an existing graph op
/// (reshape + pad interleaves the zeros, negative-stride slices flip).
LogicalResult convTranspose(NodeImporter &n) {
  Value x = n.input(0), w = n.input(1);
  Ints xs = shapeOf(x), ws = shapeOf(w);
  int64_t rank = xs.size(), k = rank - 2;
  if (rank < 3 || static_cast<int64_t>(ws.size()) != rank)
    return n.error() << "input " << g::formatShape(xs) << " and weight "
                     << g::formatShape(ws) << " must both be N x C x spatial...";
  int64_t groups = n.intAttr("group", 1);
  if (groups <= 0 || xs[1] != ws[0] || ws[0] % groups != 0)
    return n.error() << "weight " << g::formatShape(ws) << " does not fit "
                     << xs[1] << " input channels in " << groups << " groups";
  Ints kernel(ws.begin() + 2, ws.end());
  Ints strides = n.intsAttr("strides").value_or(Ints(k, 1));
  Ints dilations = n.intsAttr("dilations").value_or(Ints(k, 1));
  Ints outPad = n.intsAttr("output_padding").value_or(Ints(k, 0));
  Ints pads = n.intsAttr("pads").value_or(Ints(2 * k, 0));
  if (strides.size() != static_cast<size_t>(k) || dilations.size() != static_cast<size_t>(k) ||
      outPad.size() != static_cast<size_t>(k) || pads.size() != static_cast<size_t>(2 * k))
    return n.error() << "strides, dilations and output_padding need " << k
                     << " entries and pads " << 2 * k;
  std::string autoPad = n.stringAttr("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return n.error() << "unknown auto_pad '" << autoPad << "'";
  // An output_shape (or SAME: input x stride) fixes the total padding per
  // dim; SAME_UPPER puts the odd one at the end, otherwise at the start.
  std::optional<Ints> outShape = n.intsAttr("output_shape");
  if (failed(checkWindowAttrs(n, {kernel, strides, dilations, outPad, pads,
                                  outShape.value_or(Ints{})})))
    return failure();
  if (outShape && outShape->size() == static_cast<size_t>(rank))
    outShape = Ints(outShape->begin() + 2, outShape->end());
  if (outShape && outShape->size() != static_cast<size_t>(k))
    return n.error() << "output_shape needs " << k << " spatial entries";
  if (!outShape && autoPad.rfind("SAME", 0) == 0) {
    outShape.emplace();
    for (int64_t i = 0; i < k; ++i)
      outShape->push_back(xs[2 + i] * strides[i]);
  }
  if (outShape) {
    for (int64_t i = 0; i < k; ++i) {
      int64_t total = strides[i] * (xs[2 + i] - 1) + outPad[i] +
                      (kernel[i] - 1) * dilations[i] + 1 - (*outShape)[i];
      int64_t half = llvm::divideFloorSigned(total, 2); // as ONNX's reference
      pads[i] = autoPad == "SAME_UPPER" ? half : total - half;
      pads[i + k] = total - pads[i];
    }
  }
  for (int64_t i = 0; i < k; ++i)
    if (strides[i] <= 0 || dilations[i] <= 0 || outPad[i] < 0 ||
        outPad[i] >= std::max(strides[i], dilations[i]))
      return n.error() << "strides and dilations must be positive and "
                          "output_padding smaller than the stride";
  // The transposed convolution onto the output's shape (which includes
  // output_padding), as a convolution's input gradient is computed.
  Ints outShape2{xs[0], groups * ws[1]};
  for (int64_t i = 0; i < k; ++i)
    outShape2.push_back(strides[i] * (xs[2 + i] - 1) + outPad[i] +
                        dilations[i] * (kernel[i] - 1) + 1 - pads[i] - pads[i + k]);
  if (llvm::any_of(outShape2, [](int64_t d) { return d <= 0; }))
    return n.error() << "pads " << g::formatShape(pads) << " leave an empty output "
                     << g::formatShape(outShape2);
  g::GraphEmitter e(n.builder(), n.loc());
  Value v = e.convTranspose(x, w, outShape2, strides, ArrayRef(pads).take_front(k),
                            dilations, groups);
  if (n.hasInput(2)) {
    Ints biasShape(rank, 1);
    biasShape[1] = outShape2[1];
    v = e.add(v, e.reshape(n.input(2), biasShape));
  }
  if (e.failed() || !v)
    return n.error() << "could not build the transposed convolution";
  return n.setOutput(v);
}

LogicalResult split(NodeImporter &n) {
  Value x = n.input(0);
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 0), rankOf(x)));
  int64_t dim = shapeOf(x)[axis];
  int64_t outputs = n.node().output_size();
  if (outputs == 0)
    return n.error() << "has no outputs";
  Ints sizes;
  if (n.opset() >= 13 && n.hasInput(1)) {
    TESSERA_ASSIGN_OR_FAIL(s, n.constantInts(1, "split"));
    sizes = s;
  } else if (n.opset() < 13 && n.hasAttr("split")) {
    sizes = *n.intsAttr("split");
  } else {
    if (dim % outputs != 0)
      return n.error() << "cannot split a dim of " << dim << " into "
                       << outputs << " equal parts";
    sizes.assign(outputs, dim / outputs);
  }
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if (static_cast<int64_t>(sizes.size()) != outputs || total != dim)
    return n.error() << "split sizes " << g::formatShape(sizes)
                     << " must give " << outputs << " parts summing to " << dim;
  SmallVector<Value> results;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    TESSERA_ASSIGN_OR_FAIL(v, n.sliceAxis(x, axis, offset, offset + s));
    results.push_back(v);
    offset += s;
  }
  return n.setOutputs(results);
}

LogicalResult slice(NodeImporter &n) {
  Value x = n.input(0);
  Ints s = shapeOf(x);
  Ints starts, ends, axes, steps;
  if (n.opset() < 10) {
    starts = n.intsAttr("starts").value_or(Ints());
    ends = n.intsAttr("ends").value_or(Ints());
    axes = n.intsAttr("axes").value_or(Ints());
  } else {
    TESSERA_ASSIGN_OR_FAIL(st, n.constantInts(1, "starts"));
    TESSERA_ASSIGN_OR_FAIL(en, n.constantInts(2, "ends"));
    starts = st;
    ends = en;
    if (n.hasInput(3)) {
      TESSERA_ASSIGN_OR_FAIL(ax, n.constantInts(3, "axes"));
      axes = ax;
    }
    if (n.hasInput(4)) {
      TESSERA_ASSIGN_OR_FAIL(sp, n.constantInts(4, "steps"));
      steps = sp;
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return n.error() << "starts, ends, axes and steps must have equal lengths";
  Ints outStarts(s.size(), 0), outLimits(s), outSteps(s.size(), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(axes[i], s.size()));
    int64_t dim = s[axis], step = steps[i];
    if (step == 0)
      return n.error() << "step must be non-zero";
    int64_t start = starts[i], end = ends[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    if (dim == 0) {
      start = end = 0; // nothing to select, whatever the bounds
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    outStarts[axis] = start;
    outLimits[axis] = end;
    outSteps[axis] = step;
  }
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::SliceOp>(x, b.getDenseI64ArrayAttr(outStarts),
                             b.getDenseI64ArrayAttr(outLimits),
                             b.getDenseI64ArrayAttr(outSteps)));
  return n.setOutput(v);
}

LogicalResult gather(NodeImporter &n) {
  Value x = n.input(0), indices = n.input(1);
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 0), rankOf(x)));
  int64_t dim = shapeOf(x)[axis];
  // Constant indices are checked (and made non-negative) here, where the
  // error can name the node.
  if (DenseElementsAttr c = n.constantInput(1)) {
    Ints fixed;
    for (const APInt &raw : c.getValues<APInt>()) {
      int64_t i = raw.getSExtValue();
      if (i < -dim || i >= dim)
        return n.error() << "index " << i << " is out of range for axis "
                         << axis << " of size " << dim;
      fixed.push_back(i < 0 ? i + dim : i);
    }
    auto type = RankedTensorType::get(c.getType().getShape(),
                                      n.builder().getI64Type());
    indices = n.constant(DenseElementsAttr::get(type, ArrayRef<int64_t>(fixed)));
  }
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::GatherOp>(x, indices,
                                                 n.builder().getI64IntegerAttr(axis)));
  return n.setOutput(v);
}

/// Compress with a constant condition: a Gather of the selected positions
/// (the output's size depends on the condition, so it must be known).
LogicalResult compress(NodeImporter &n) {
  Value x = n.input(0);
  DenseElementsAttr condition = n.constantInput(1);
  if (!condition)
    return n.notConstant(1, "condition", "");
  if (condition.getType().getRank() != 1)
    return n.error() << "condition must be rank 1, got "
                     << g::formatShape(condition.getType().getShape());
  int64_t axis = 0;
  if (n.hasAttr("axis")) {
    TESSERA_ASSIGN_OR_FAIL(a, n.normalizeAxis(n.intAttr("axis", 0), rankOf(x)));
    axis = a;
  } else {
    // No axis: the flattened input.
    TESSERA_ASSIGN_OR_FAIL(flat, n.reshape(x, {g::numElements(shapeOf(x))}));
    x = flat;
  }
  int64_t dim = shapeOf(x)[axis];
  Ints selected;
  int64_t position = 0;
  for (const APInt &c : condition.getValues<APInt>()) {
    if (!c.isZero())
      selected.push_back(position);
    ++position;
  }
  if (position > dim)
    return n.error() << "condition has " << position << " entries for an axis of size "
                     << dim;
  auto type = RankedTensorType::get({static_cast<int64_t>(selected.size())},
                                    n.builder().getI64Type());
  Value indices = n.constant(DenseElementsAttr::get(type, ArrayRef<int64_t>(selected)));
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::GatherOp>(x, indices, n.builder().getI64IntegerAttr(axis)));
  return n.setOutput(v);
}

/// GatherND as a Gather along axis 0 of the data viewed as
/// [batches * indexed positions, rest...], at flat positions computed from
/// the index tuples (wrapped when negative) and their batch.
LogicalResult gatherND(NodeImporter &n) {
  Value data = n.input(0);
  Ints ds = shapeOf(data), is = shapeOf(n.input(1));
  int64_t b = n.intAttr("batch_dims", 0);
  if (is.empty() || b < 0 || b >= static_cast<int64_t>(is.size()) ||
      b + is.back() > static_cast<int64_t>(ds.size()))
    return n.error() << "indices " << g::formatShape(is) << " do not index data "
                     << g::formatShape(ds) << " with batch_dims " << b;
  int64_t k = is.back();
  Type i64 = n.builder().getI64Type();
  TESSERA_ASSIGN_OR_FAIL(idx, n.castTo(n.input(1), i64));
  Ints dims(ds.begin() + b, ds.begin() + b + k), strides(k, 1);
  for (int64_t j = k - 2; j >= 0; --j)
    strides[j] = strides[j + 1] * dims[j + 1];
  auto vector = [&](ArrayRef<int64_t> v) {
    return n.constant(DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(v.size())}, i64), v));
  };
  TESSERA_ASSIGN_OR_FAIL(negative, n.infer<g::LessOp>(idx, n.scalar(i64, 0)));
  TESSERA_ASSIGN_OR_FAIL(wrapped, n.infer<g::AddOp>(idx, vector(dims)));
  TESSERA_ASSIGN_OR_FAIL(fixed, n.infer<g::SelectOp>(negative, wrapped, idx));
  TESSERA_ASSIGN_OR_FAIL(terms, n.infer<g::MulOp>(fixed, vector(strides)));
  int64_t last = static_cast<int64_t>(is.size()) - 1;
  Builder &bld = n.builder();
  TESSERA_ASSIGN_OR_FAIL(flat, n.infer<g::ReduceSumOp>(terms, bld.getDenseI64ArrayAttr({last}),
                                                        bld.getBoolAttr(false)));
  int64_t positions = g::numElements(dims);
  Ints batchShape(ds.begin(), ds.begin() + b);
  int64_t batches = g::numElements(batchShape);
  if (b > 0) {
    // Each index tuple's batch, as an offset into the flattened batches.
    Ints outer(is.begin(), is.end() - 1);
    int64_t perBatch = g::numElements(ArrayRef<int64_t>(outer).drop_front(b));
    if (failed(n.checkConstantElements(outer, "the batch offsets")))
      return failure();
    SmallVector<int64_t> offsets(g::numElements(outer));
    for (size_t p = 0; p < offsets.size(); ++p)
      offsets[p] = static_cast<int64_t>(p) / perBatch * positions;
    Value offset = n.constant(
        DenseElementsAttr::get(RankedTensorType::get(outer, i64), ArrayRef<int64_t>(offsets)));
    TESSERA_ASSIGN_OR_FAIL(shifted, n.infer<g::AddOp>(flat, offset));
    flat = shifted;
  }
  Ints viewed{batches * positions};
  viewed.append(ds.begin() + b + k, ds.end());
  TESSERA_ASSIGN_OR_FAIL(table, n.reshape(data, viewed));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::GatherOp>(table, flat, bld.getI64IntegerAttr(0)));
  return n.setOutput(v);
}

LogicalResult gatherElements(NodeImporter &n) {
  Value x = n.input(0);
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 0), rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::GatherElementsOp>(x, n.input(1), n.builder().getI64IntegerAttr(axis)));
  return n.setOutput(v);
}

LogicalResult expandOp(NodeImporter &n) {
  Value x = n.input(0);
  TESSERA_ASSIGN_OR_FAIL(target, n.constantInts(1, "shape"));
  // ONNX Expand broadcasts both ways: a 1 in `shape` keeps the input's dim.
  auto out = g::broadcastShapes(shapeOf(x), target);
  if (!out)
    return n.error() << "cannot broadcast " << g::formatShape(shapeOf(x))
                     << " with shape " << g::formatShape(target);
  TESSERA_ASSIGN_OR_FAIL(v, n.expand(x, *out));
  return n.setOutput(v);
}

LogicalResult tile(NodeImporter &n) {
  Value x = n.input(0);
  Ints s = shapeOf(x);
  TESSERA_ASSIGN_OR_FAIL(repeats, n.constantInts(1, "repeats"));
  if (repeats.size() != s.size())
    return n.error() << "repeats has " << repeats.size()
                     << " entries for a rank-" << s.size() << " input";
  // Interleave a size-1 dim before each dim, broadcast it to the repeat
  // count, then merge each pair.
  Ints interleaved, expanded, out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (repeats[d] < 0)
      return n.error() << "repeats must be non-negative";
    interleaved.append({1, s[d]});
    expanded.append({repeats[d], s[d]});
    out.push_back(repeats[d] * s[d]);
  }
  TESSERA_ASSIGN_OR_FAIL(r, n.reshape(x, interleaved));
  TESSERA_ASSIGN_OR_FAIL(e, n.expand(r, expanded));
  TESSERA_ASSIGN_OR_FAIL(v, n.reshape(e, out));
  return n.setOutput(v);
}

LogicalResult pad(NodeImporter &n) {
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  Ints pads;
  double value = 0;
  if (n.opset() < 11) {
    pads = n.intsAttr("pads").value_or(Ints());
    value = n.floatAttr("value", 0);
  } else {
    TESSERA_ASSIGN_OR_FAIL(p, n.constantInts(1, "pads"));
    pads = p;
    if (n.hasInput(2)) {
      TESSERA_ASSIGN_OR_FAIL(c, n.constantScalar(2, "constant_value"));
      value = c;
    }
  }
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return n.error() << "pads has " << pads.size() << " entries; expected "
                     << 2 * rank;
  std::string modeName = n.stringAttr("mode", "constant");
  std::optional<g::PadMode> mode = g::symbolizePadMode(modeName);
  if (!mode)
    return n.unsupported("Pad mode '" + modeName + "'");
  // Negative pads crop: pad with the positive parts, then slice.
  Ints lo(rank), hi(rank);
  bool crops = false;
  for (int64_t d = 0; d < rank; ++d) {
    lo[d] = std::max<int64_t>(0, pads[d]);
    hi[d] = std::max<int64_t>(0, pads[d + rank]);
    crops |= pads[d] < 0 || pads[d + rank] < 0;
  }
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::PadOp>(x, b.getDenseI64ArrayAttr(lo), b.getDenseI64ArrayAttr(hi),
                           g::PadModeAttr::get(n.context(), *mode),
                           b.getF64FloatAttr(value)));
  if (crops) {
    Ints s = shapeOf(v), starts(rank), limits(rank), steps(rank, 1);
    for (int64_t d = 0; d < rank; ++d) {
      starts[d] = std::max<int64_t>(0, -pads[d]);
      limits[d] = s[d] - std::max<int64_t>(0, -pads[d + rank]);
      if (limits[d] < starts[d])
        return n.error() << "negative pads remove more than dim " << d << " holds";
    }
    TESSERA_ASSIGN_OR_FAIL(c, n.infer<g::SliceOp>(v, b.getDenseI64ArrayAttr(starts),
                                                  b.getDenseI64ArrayAttr(limits),
                                                  b.getDenseI64ArrayAttr(steps)));
    v = c;
  }
  return n.setOutput(v);
}

LogicalResult resize(NodeImporter &n) {
  Value x = n.input(0);
  Ints in = shapeOf(x);
  int64_t rank = in.size();
  bool isUpsample = n.opType() == "Upsample";
  SmallVector<double> scales;
  Ints out;
  int scalesInput = (isUpsample || n.opset() < 11) ? 1 : 2;
  bool haveSizes = !isUpsample && n.opset() >= 11 && n.hasInput(3);
  if (haveSizes) {
    TESSERA_ASSIGN_OR_FAIL(sizes, n.constantInts(3, "sizes"));
    out = sizes;
    if (static_cast<int64_t>(out.size()) != rank)
      return n.error() << "sizes has " << out.size() << " entries for rank "
                       << rank;
    for (int64_t d = 0; d < rank; ++d)
      scales.push_back(static_cast<double>(out[d]) / in[d]);
  } else {
    if (isUpsample && n.opset() < 9) {
      if (auto s = n.floatsAttr("scales"))
        scales = *s;
    } else {
      DenseElementsAttr s = n.constantInput(scalesInput);
      if (!s || !isa<FloatType>(s.getElementType()))
        return n.error() << "scales must be a constant float tensor";
      for (APFloat f : s.getValues<APFloat>())
        scales.push_back(f.convertToDouble());
    }
    if (static_cast<int64_t>(scales.size()) != rank)
      return n.error() << "scales has " << scales.size()
                       << " entries for rank " << rank;
    for (int64_t d = 0; d < rank; ++d)
      out.push_back(static_cast<int64_t>(std::floor(in[d] * scales[d])));
  }
  std::string modeName = n.stringAttr("mode", "nearest");
  if (modeName == "bilinear" || modeName == "trilinear")
    modeName = "linear"; // Upsample-7 names
  auto mode = g::symbolizeResizeMode(modeName);
  std::string transformName =
      (isUpsample || n.opset() < 11)
          ? "asymmetric"
          : n.stringAttr("coordinate_transformation_mode", "half_pixel");
  auto transform = g::symbolizeCoordinateTransform(transformName);
  std::string nearestName = (isUpsample || n.opset() < 11)
                                ? "floor"
                                : n.stringAttr("nearest_mode", "round_prefer_floor");
  auto nearest = g::symbolizeNearestMode(nearestName);
  // Cubic, cropping and the transforms graph.resize does not name are
  // interpolation matrices (ExtraOps.cpp).
  if ((mode && *mode == g::ResizeMode::cubic) ||
      transformName == "tf_crop_and_resize" || transformName == "tf_half_pixel_for_nn" ||
      transformName == "half_pixel_symmetric") {
    SmallVector<double> roi;
    if (transformName == "tf_crop_and_resize") {
      DenseElementsAttr r = n.hasInput(1) ? n.constantInput(1) : DenseElementsAttr();
      if (n.hasInput(1) && !r)
        return n.notConstant(1, "roi", " float tensor");
      if (!r || !isa<FloatType>(r.getElementType()) ||
          r.getNumElements() != 2 * rank)
        return n.error() << "tf_crop_and_resize needs a constant float roi of "
                         << 2 * rank << " values";
      for (APFloat f : r.getValues<APFloat>())
        roi.push_back(f.convertToDouble());
    }
    SmallVector<ResizeAxisSpec> axes;
    for (int64_t d = 0; d < rank; ++d) {
      ResizeAxisSpec a;
      a.in = in[d];
      a.out = out[d];
      a.scale = scales[d];
      a.mode = modeName;
      a.transform = transformName;
      a.nearest = nearestName;
      a.cubicA = n.floatAttr("cubic_coeff_a", -0.75);
      a.excludeOutside = n.intAttr("exclude_outside", 0);
      if (!roi.empty()) {
        a.roiStart = roi[d];
        a.roiEnd = roi[d + rank];
      }
      axes.push_back(a);
    }
    TESSERA_ASSIGN_OR_FAIL(
        v, resizeSeparable(n, x, axes, n.floatAttr("extrapolation_value", 0.0)));
    return n.setOutput(v);
  }
  if (!mode || !transform || !nearest)
    return n.unsupported("Resize with mode '" + modeName +
                         "', coordinate_transformation_mode '" + transformName +
                         "', nearest_mode '" + nearestName + "'");
  if (*transform == g::CoordinateTransform::tf_crop_and_resize)
    return n.unsupported("Resize with tf_crop_and_resize");
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, n.build<g::ResizeOp>(
             cast<RankedTensorType>(x.getType()).clone(out), x,
             b.getDenseF64ArrayAttr(scales),
             g::ResizeModeAttr::get(n.context(), *mode),
             g::CoordinateTransformAttr::get(n.context(), *transform),
             g::NearestModeAttr::get(n.context(), *nearest),
             b.getF64FloatAttr(n.floatAttr("cubic_coeff_a", -0.75)),
             b.getBoolAttr(n.intAttr("exclude_outside", 0))));
  return n.setOutput(v);
}

//===----------------------------------------------------------------------===//
// Generators and constants
//===----------------------------------------------------------------------===//

LogicalResult constantOfShape(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(shape, n.constantInts(0, "input"));
  Type elem = n.builder().getF32Type();
  Attribute value = n.builder().getF32FloatAttr(0);
  if (const auto *a = n.attr("value")) {
    Type t = elementTypeFor(a->t().data_type(), n.context());
    if (!t)
      return n.unsupported("ConstantOfShape of " + onnxTypeName(a->t().data_type()));
    // The one-element value tensor: raw or typed data.
    onnx::TensorProto one = a->t();
    one.clear_dims();
    auto type = RankedTensorType::get({}, t);
    std::string raw = one.raw_data();
    if (raw.empty()) {
      if (one.float_data_size())
        return n.setOutput(n.splat(t, shape, one.float_data(0)));
      if (one.int64_data_size())
        return n.setOutput(n.splat(t, shape, one.int64_data(0)));
      if (one.int32_data_size())
        return n.setOutput(n.splat(t, shape, one.int32_data(0)));
      if (one.double_data_size())
        return n.setOutput(n.splat(t, shape, one.double_data(0)));
      return n.error() << "value attribute holds no data";
    }
    bool splatDetected = false;
    if (!DenseElementsAttr::isValidRawBuffer(type, ArrayRef(raw.data(), raw.size()),
                                             splatDetected))
      return n.error() << "value attribute has malformed data";
    if (t.isInteger(1))
      return n.setOutput(n.splat(t, shape, raw[0] != 0));
    auto attr = DenseElementsAttr::getFromRawBuffer(type, ArrayRef(raw.data(), raw.size()));
    elem = t;
    value = attr.getSplatValue<Attribute>();
  }
  for (int64_t d : shape)
    if (d < 0)
      return n.error() << "shape " << g::formatShape(shape) << " has a negative dim";
  return n.setOutput(n.constant(
      DenseElementsAttr::get(RankedTensorType::get(shape, elem), value)));
}

LogicalResult range(NodeImporter &n) {
  DenseElementsAttr start = n.constantInput(0);
  if (!start)
    return n.notConstant(0, "start", " scalar");
  TESSERA_ASSIGN_OR_FAIL(s, n.constantScalar(0, "start"));
  TESSERA_ASSIGN_OR_FAIL(l, n.constantScalar(1, "limit"));
  TESSERA_ASSIGN_OR_FAIL(d, n.constantScalar(2, "delta"));
  if (d == 0)
    return n.error() << "delta must be non-zero";
  double steps = std::ceil((l - s) / d);
  // Range is evaluated here; a huge one is a mistake, not a constant.
  constexpr int64_t kMaxRange = 1 << 24;
  if (!(steps <= kMaxRange))
    return n.error() << "Range of " << steps << " elements is too large to "
                     << "evaluate at compile time (limit " << kMaxRange << ")";
  int64_t count = std::max<int64_t>(0, static_cast<int64_t>(steps));
  Type elem = start.getElementType();
  auto type = RankedTensorType::get({count}, elem);
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < count; ++i) {
    double v = s + i * d;
    values.push_back(isa<FloatType>(elem)
                         ? static_cast<Attribute>(FloatAttr::get(elem, v))
                         : IntegerAttr::get(elem, static_cast<int64_t>(v)));
  }
  return n.setOutput(n.constant(DenseElementsAttr::get(type, values)));
}

/// ScatterND on constant inputs (masks built from shapes, as in Swin) is
/// evaluated here; otherwise it is built from graph ops (ExtraOps.cpp).
LogicalResult scatterND(NodeImporter &n) {
  DenseElementsAttr data = n.constantInput(0), indices = n.constantInput(1),
                    updates = n.constantInput(2);
  if (!data || !indices || !updates || n.stringAttr("reduction", "none") != "none") {
    TESSERA_ASSIGN_OR_FAIL(v, scatterNDComputed(n, n.input(0), n.input(1), n.input(2),
                                                n.stringAttr("reduction", "none")));
    return n.setOutput(v);
  }
  Ints ds(data.getType().getShape()), is(indices.getType().getShape());
  if (is.empty() || is.back() > static_cast<int64_t>(ds.size()))
    return n.error() << "indices shape " << g::formatShape(is)
                     << " does not fit data " << g::formatShape(ds);
  int64_t k = is.back();
  int64_t sliceSize = g::numElements(ArrayRef(ds).drop_front(k));
  int64_t count = g::numElements(ArrayRef(is).drop_back());
  if (updates.getNumElements() != count * sliceSize)
    return n.error() << "updates has " << updates.getNumElements()
                     << " elements; expected " << count * sliceSize;
  auto out = llvm::to_vector(data.getValues<Attribute>());
  auto upd = llvm::to_vector(updates.getValues<Attribute>());
  auto idx = llvm::to_vector(indices.getValues<APInt>());
  for (int64_t c = 0; c < count; ++c) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = idx[c * k + j].getSExtValue();
      if (i < 0)
        i += ds[j];
      if (i < 0 || i >= ds[j])
        return n.error() << "index " << idx[c * k + j].getSExtValue()
                         << " is out of range for dim " << j << " of size " << ds[j];
      offset = offset * ds[j] + i;
    }
    for (int64_t e = 0; e < sliceSize; ++e)
      out[offset * sliceSize + e] = upd[c * sliceSize + e];
  }
  return n.setOutput(n.constant(DenseElementsAttr::get(data.getType(), out)));
}

//===----------------------------------------------------------------------===//
// Einsum: decomposed into transposes, reductions and one batched matmul
//===----------------------------------------------------------------------===//

LogicalResult einsum(NodeImporter &n) {
  SmallVector<Value> operands;
  for (size_t i = 0; i < n.numInputs(); ++i)
    operands.push_back(n.input(i));
  TESSERA_ASSIGN_OR_FAIL(
      v, g::createEinsum(n.builder(), n.loc(), n.stringAttr("equation", ""), operands));
  return n.setOutput(v);
}

LogicalResult convertConstant(NodeImporter &n) {
  auto &b = n.builder();
  if (const auto *a = n.attr("value")) {
    TESSERA_ASSIGN_OR_FAIL(v, n.tensorValue(a->t()));
    return n.setOutput(v);
  }
  if (n.hasAttr("sparse_value"))
    return n.unsupported("Constant with sparse_value");
  if (n.hasAttr("value_string") || n.hasAttr("value_strings"))
    return n.unsupported("string Constant");
  if (n.hasAttr("value_float"))
    return n.setOutput(n.scalar(b.getF32Type(), n.floatAttr("value_float", 0)));
  if (n.hasAttr("value_int"))
    return n.setOutput(n.scalar(b.getI64Type(), n.intAttr("value_int", 0)));
  if (auto fs = n.floatsAttr("value_floats")) {
    SmallVector<float> values(fs->begin(), fs->end());
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      b.getF32Type());
    return n.setOutput(n.constant(DenseElementsAttr::get(type, ArrayRef(values))));
  }
  if (auto is = n.intsAttr("value_ints"))
    return n.setOutput(n.i64Constant(*is));
  return n.error() << "has no value attribute";
}

} // namespace

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

static const OpConverter kConverters[] = {
    // Elementwise
    {"Abs", 1, unary<g::AbsOp>},
    {"Neg", 1, unary<g::NegOp>},
    {"Sign", 9, unary<g::SignOp>},
    {"Exp", 1, unary<g::ExpOp>},
    {"Log", 1, unary<g::LogOp>},
    {"Sqrt", 1, unary<g::SqrtOp>},
    {"Reciprocal", 1, unary<g::ReciprocalOp>},
    {"Tanh", 1, unary<g::TanhOp>},
    {"Sigmoid", 1, unary<g::SigmoidOp>},
    {"Erf", 9, unary<g::ErfOp>},
    {"Sin", 7, unary<g::SinOp>},
    {"Cos", 7, unary<g::CosOp>},
    {"Floor", 1, unary<g::FloorOp>},
    {"Ceil", 1, unary<g::CeilOp>},
    {"Round", 11, unary<g::RoundOp>},
    {"Relu", 1, unary<g::ReluOp>},
    {"Not", 1, unary<g::NotOp>},
    {"Softplus", 1, unary<g::SoftplusOp>},
    {"HardSwish", 14, unary<g::HardSwishOp>},
    {"LeakyRelu", 1, leakyRelu},
    {"Elu", 1, elu},
    {"Selu", 1, selu},
    {"HardSigmoid", 1, hardSigmoid},
    {"Softsign", 1, softsign},
    {"Shrink", 9, shrink},
    {"Celu", 12, celu},
    {"Sinh", 9, hyperbolic<false>},
    {"Cosh", 9, hyperbolic<true>},
    {"Tan", 7, tan},
    {"IsNaN", 9, isNaN},
    {"IsInf", 10, isInf},
    {"Asinh", 9, inverseHyperbolic<0>},
    {"Acosh", 9, inverseHyperbolic<1>},
    {"Atanh", 9, inverseHyperbolic<2>},
    {"EyeLike", 9, eyeLike},
    {"OneHot", 9, oneHot},
    {"Compress", 9, compress},
    {"LRN", 1, lrn},
    {"GatherND", 11, gatherND},
    {"DepthToSpace", 1, depthToSpace},
    {"SpaceToDepth", 1, spaceToDepth},
    {"ThresholdedRelu", 10, thresholdedRelu},
    {"PRelu", 1, prelu},
    {"Clip", 1, clip},
    {"Add", 1, binary<g::AddOp>},
    {"Sub", 1, binary<g::SubOp>},
    {"Mul", 1, binary<g::MulOp>},
    {"Div", 1, binary<g::DivOp>},
    {"Pow", 1, pow},
    {"Mod", 10, mod},
    {"Max", 1, variadic<g::MaxOp>},
    {"Min", 1, variadic<g::MinOp>},
    {"Sum", 1, variadic<g::AddOp>},
    {"Mean", 1, mean},
    {"And", 1, binary<g::AndOp>},
    {"Or", 1, binary<g::OrOp>},
    {"Xor", 1, binary<g::XorOp>},
    {"Equal", 1, binary<g::EqualOp>},
    {"Less", 1, binary<g::LessOp>},
    {"LessOrEqual", 12, binary<g::LessEqualOp>},
    {"Greater", 1, binary<g::GreaterOp>},
    {"GreaterOrEqual", 12, binary<g::GreaterEqualOp>},
    {"Where", 9, where},
    {"Cast", 1, castOp},
    {"CastLike", 15, castLike},
    {"Identity", 1, identity},
    {"Dropout", 1, dropout},
    {"RandomUniform", 1, randomOp<false, false>},
    {"RandomUniformLike", 1, randomOp<true, false>},
    {"RandomNormal", 1, randomOp<false, true>},
    {"RandomNormalLike", 1, randomOp<true, true>},
    {"Bernoulli", 15, bernoulli},
    // Linear algebra and NN
    {"MatMul", 1, matmul},
    {"Gemm", 1, gemm},
    {"Einsum", 12, einsum},
    {"Conv", 1, conv},
    {"ConvTranspose", 1, convTranspose},
    {"MaxPool", 1, maxPool},
    {"AveragePool", 1, avgPool},
    {"GlobalAveragePool", 1, globalPool<g::ReduceMeanOp>},
    {"GlobalMaxPool", 1, globalPool<g::ReduceMaxOp>},
    {"BatchNormalization", 1, batchNorm},
    {"LayerNormalization", 17, layerNorm},
    {"Trilu", 14, trilu},
    {"InstanceNormalization", 1, instanceNorm},
    {"Softmax", 1, softmax<g::SoftmaxOp>},
    {"Hardmax", 1, hardmax},
    {"CumSum", 11, cumSum},
    {"NegativeLogLikelihoodLoss", 12, negativeLogLikelihoodLoss},
    {"SoftmaxCrossEntropyLoss", 12, softmaxCrossEntropyLoss},
    {"LogSoftmax", 1, softmax<g::LogSoftmaxOp>},
    // Reductions
    {"ReduceSum", 1, reduceOp<g::ReduceSumOp>},
    {"ReduceMean", 1, reduceOp<g::ReduceMeanOp>},
    {"ReduceMax", 1, reduceOp<g::ReduceMaxOp>},
    {"ReduceMin", 1, reduceOp<g::ReduceMinOp>},
    {"ReduceProd", 1, reduceOp<g::ReduceProdOp>},
    {"ReduceL1", 1, reduceComposite},
    {"ReduceL2", 1, reduceComposite},
    {"ReduceSumSquare", 1, reduceComposite},
    {"ReduceLogSum", 1, reduceComposite},
    {"ReduceLogSumExp", 1, reduceComposite},
    {"ArgMax", 1, argReduce<g::ArgMaxOp>},
    {"ArgMin", 1, argReduce<g::ArgMinOp>},
    // Shapes and data movement
    {"Constant", 1, convertConstant},
    {"ConstantOfShape", 9, constantOfShape},
    {"Range", 11, range},
    {"Shape", 1, shape},
    {"Size", 1, size},
    {"Reshape", 1, reshape},
    {"Flatten", 1, flatten},
    {"Transpose", 1, transposeOp},
    {"Squeeze", 1, squeeze},
    {"Unsqueeze", 1, unsqueeze},
    {"Concat", 1, concat},
    {"Split", 2, split},
    {"Slice", 1, slice},
    {"Gather", 1, gather},
    {"GatherElements", 11, gatherElements},
    {"Expand", 8, expandOp},
    {"Tile", 6, tile},
    {"Pad", 2, pad},
    {"Resize", 10, resize},
    {"Upsample", 7, resize},
    {"ScatterND", 11, scatterND},
};

ArrayRef<OpConverter> allConverters() {
  static const std::vector<OpConverter> all = [] {
    std::vector<OpConverter> v(std::begin(kConverters), std::end(kConverters));
    for (ArrayRef<OpConverter> group : {recurrentConverters(), samplingConverters(), extraConverters()})
      v.insert(v.end(), group.begin(), group.end());
    return v;
  }();
  return all;
}

const OpConverter *lookupConverter(StringRef opType, int64_t opset) {
  const OpConverter *best = nullptr;
  for (const OpConverter &c : allConverters())
    if (opType == c.opType && c.sinceOpset <= opset &&
        (!best || c.sinceOpset > best->sinceOpset))
      best = &c;
  // Upsample was removed from the operator set at opset 10.
  if (best && opType == "Upsample" && opset >= 10)
    return nullptr;
  return best;
}

} // namespace tessera::onnx_importer
