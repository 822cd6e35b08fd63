//===- GraphFolds.cpp - graph dialect folders and canonicalizations ------===//
//
// Folding that pays on imported models:
//  - constant evaluation of small tensors, which is what turns ONNX shape
//    subgraphs (Shape -> Gather -> Concat -> Reshape) into static shapes;
//  - identities (x + 0, x * 1, reshape/transpose/expand to the same type,
//    empty reductions, single-input concat, full slices, zero pads);
//  - chains (reshape of reshape, transpose of transpose);
//  - explicit broadcasts feeding broadcasting ops, and broadcasts of splats.
// Only DenseElementsAttr constants up to kMaxFoldElements are evaluated:
// parameters live in ml_program globals and are never folded here.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace tessera::graph;
using llvm::APFloat;
using llvm::APInt;

namespace {

/// Larger constants are left to later passes: evaluating them here would
/// create big uniqued attributes for little gain.
constexpr int64_t kMaxFoldElements = 1 << 16;

DenseElementsAttr foldable(Attribute a) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(a);
  if (!dense || dense.getNumElements() > kMaxFoldElements)
    return {};
  return dense;
}

/// Row-major strides of a static shape.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// For each element of `resultShape`, the linear index of the element of an
/// operand of shape `operandShape` that NumPy broadcasting reads.
SmallVector<int64_t> broadcastIndices(ArrayRef<int64_t> operandShape,
                                      ArrayRef<int64_t> resultShape) {
  int64_t n = numElements(resultShape);
  SmallVector<int64_t> out(n);
  SmallVector<int64_t> opStrides = stridesOf(operandShape);
  size_t offset = resultShape.size() - operandShape.size();
  SmallVector<int64_t> idx(resultShape.size(), 0);
  for (int64_t lin = 0; lin < n; ++lin) {
    int64_t src = 0;
    for (size_t d = 0; d < operandShape.size(); ++d)
      if (operandShape[d] != 1)
        src += idx[d + offset] * opStrides[d];
    out[lin] = src;
    for (int64_t d = static_cast<int64_t>(resultShape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < resultShape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

bool isUnsignedInt(Type t) {
  auto i = dyn_cast<IntegerType>(t);
  return i && i.isUnsigned();
}

using IntFn = std::function<std::optional<APInt>(const APInt &, const APInt &)>;
using FloatFn =
    std::function<std::optional<APFloat>(const APFloat &, const APFloat &)>;

/// Evaluates a broadcasting binary op on constants. `resultType` may have an
/// element type different from the operands' (comparisons yield i1).
Attribute foldBinary(Attribute lhsAttr, Attribute rhsAttr, ShapedType resultType,
                     const IntFn &intFn, const FloatFn &floatFn) {
  auto lhs = foldable(lhsAttr), rhs = foldable(rhsAttr);
  if (!lhs || !rhs || !resultType.hasStaticShape() ||
      resultType.getNumElements() > kMaxFoldElements)
    return {};
  Type elem = lhs.getElementType();
  SmallVector<int64_t> li = broadcastIndices(lhs.getType().getShape(),
                                             resultType.getShape());
  SmallVector<int64_t> ri = broadcastIndices(rhs.getType().getShape(),
                                             resultType.getShape());
  bool resultIsBool = resultType.getElementType().isInteger(1) &&
                      !elem.isInteger(1);
  if (isa<FloatType>(elem)) {
    if (!floatFn)
      return {};
    auto lv = llvm::to_vector(lhs.getValues<APFloat>());
    auto rv = llvm::to_vector(rhs.getValues<APFloat>());
    SmallVector<APFloat> outF;
    SmallVector<APInt> outB;
    for (size_t i = 0; i < li.size(); ++i) {
      std::optional<APFloat> v = floatFn(lv[li[i]], rv[ri[i]]);
      if (!v)
        return {};
      if (resultIsBool)
        outB.push_back(APInt(1, v->isZero() ? 0 : 1));
      else
        outF.push_back(*v);
    }
    return resultIsBool ? DenseElementsAttr::get(resultType, outB)
                        : DenseElementsAttr::get(resultType, outF);
  }
  if (!intFn)
    return {};
  auto lv = llvm::to_vector(lhs.getValues<APInt>());
  auto rv = llvm::to_vector(rhs.getValues<APInt>());
  SmallVector<APInt> out;
  for (size_t i = 0; i < li.size(); ++i) {
    std::optional<APInt> v = intFn(lv[li[i]], rv[ri[i]]);
    if (!v)
      return {};
    out.push_back(resultIsBool ? APInt(1, v->isZero() ? 0 : 1) : *v);
  }
  return DenseElementsAttr::get(resultType, out);
}

/// Evaluates an elementwise unary op on a constant through double precision
/// (floats) or APInt (integers). Either function may be null.
Attribute foldUnary(Attribute inAttr, std::function<double(double)> floatFn,
                    std::function<std::optional<APInt>(const APInt &)> intFn) {
  auto in = foldable(inAttr);
  if (!in)
    return {};
  Type elem = in.getElementType();
  if (auto ft = dyn_cast<FloatType>(elem)) {
    if (!floatFn)
      return {};
    SmallVector<APFloat> out;
    for (APFloat v : in.getValues<APFloat>()) {
      APFloat r(floatFn(v.convertToDouble()));
      bool lost;
      r.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      out.push_back(r);
    }
    return DenseElementsAttr::get(in.getType(), out);
  }
  if (!intFn)
    return {};
  SmallVector<APInt> out;
  for (const APInt &v : in.getValues<APInt>()) {
    std::optional<APInt> r = intFn(v);
    if (!r)
      return {};
    out.push_back(*r);
  }
  return DenseElementsAttr::get(in.getType(), out);
}

/// True if `a` is a splat constant equal to `value` (in any numeric type).
bool isSplatOf(Attribute a, double value) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(a);
  if (!dense || !dense.isSplat())
    return false;
  if (isa<FloatType>(dense.getElementType()))
    return dense.getSplatValue<APFloat>().convertToDouble() == value;
  if (dense.getElementType().isInteger(1))
    return false;
  return dense.getSplatValue<APInt>().getSExtValue() ==
         static_cast<int64_t>(value);
}

/// `x op c` is `x` when c is a splat identity and broadcasting does not
/// change x's type.
OpFoldResult foldIdentity(Value lhs, Attribute rhsAttr, Type resultType,
                          double identity) {
  if (lhs.getType() == resultType && isSplatOf(rhsAttr, identity))
    return lhs;
  return {};
}

/// Moves the elements of a constant by an index map (result linear index ->
/// source linear index), keeping the element type. Works for every type.
Attribute permuteElements(DenseElementsAttr in, ShapedType resultType,
                          ArrayRef<int64_t> sourceIndex) {
  if (in.isSplat())
    return DenseElementsAttr::get(resultType, in.getSplatValue<Attribute>());
  auto values = llvm::to_vector(in.getValues<Attribute>());
  SmallVector<Attribute> out;
  out.reserve(sourceIndex.size());
  for (int64_t i : sourceIndex)
    out.push_back(values[i]);
  return DenseElementsAttr::get(resultType, out);
}

/// Linear indices of a strided box inside `shape`.
SmallVector<int64_t> boxIndices(ArrayRef<int64_t> shape,
                                ArrayRef<int64_t> starts,
                                ArrayRef<int64_t> sizes,
                                ArrayRef<int64_t> steps) {
  SmallVector<int64_t> strides = stridesOf(shape);
  int64_t n = numElements(sizes);
  SmallVector<int64_t> out;
  out.reserve(n);
  SmallVector<int64_t> idx(sizes.size(), 0);
  for (int64_t lin = 0; lin < n; ++lin) {
    int64_t src = 0;
    for (size_t d = 0; d < sizes.size(); ++d)
      src += (starts[d] + idx[d] * steps[d]) * strides[d];
    out.push_back(src);
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Constants and elementwise
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult NegOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return -x; },
                   [](const APInt &x) -> std::optional<APInt> { return -x; });
}
OpFoldResult AbsOp::fold(FoldAdaptor a) {
  bool isUnsigned = isUnsignedInt(getType().getElementType());
  return foldUnary(a.getInput(), [](double x) { return std::fabs(x); },
                   [=](const APInt &x) -> std::optional<APInt> {
                     return isUnsigned ? x : x.abs();
                   });
}
OpFoldResult SignOp::fold(FoldAdaptor a) {
  return foldUnary(
      a.getInput(),
      [](double x) { return std::isnan(x) ? x : (x > 0) - (x < 0); }, nullptr);
}
OpFoldResult ExpOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::exp(x); }, nullptr);
}
OpFoldResult LogOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::log(x); }, nullptr);
}
OpFoldResult SqrtOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::sqrt(x); }, nullptr);
}
OpFoldResult RsqrtOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return 1 / std::sqrt(x); },
                   nullptr);
}
OpFoldResult ReciprocalOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return 1 / x; }, nullptr);
}
OpFoldResult TanhOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::tanh(x); }, nullptr);
}
OpFoldResult SigmoidOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return 1 / (1 + std::exp(-x)); },
                   nullptr);
}
OpFoldResult ErfOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::erf(x); }, nullptr);
}
OpFoldResult SinOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::sin(x); }, nullptr);
}
OpFoldResult AtanOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::atan(x); }, nullptr);
}
OpFoldResult CosOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::cos(x); }, nullptr);
}
OpFoldResult FloorOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::floor(x); }, nullptr);
}
OpFoldResult CeilOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::ceil(x); }, nullptr);
}
OpFoldResult RoundOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::nearbyint(x); },
                   nullptr);
}
OpFoldResult ReluOp::fold(FoldAdaptor a) {
  bool isUnsigned = isUnsignedInt(getType().getElementType());
  return foldUnary(a.getInput(), [](double x) { return x < 0 ? 0.0 : x; },
                   [=](const APInt &x) -> std::optional<APInt> {
                     return !isUnsigned && x.isNegative()
                                ? APInt::getZero(x.getBitWidth())
                                : x;
                   });
}
OpFoldResult NotOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), nullptr,
                   [](const APInt &x) -> std::optional<APInt> { return ~x; });
}
OpFoldResult SoftplusOp::fold(FoldAdaptor a) {
  return foldUnary(a.getInput(), [](double x) { return std::log1p(std::exp(x)); },
                   nullptr);
}
OpFoldResult HardSwishOp::fold(FoldAdaptor a) {
  return foldUnary(
      a.getInput(),
      [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }, nullptr);
}
OpFoldResult LeakyReluOp::fold(FoldAdaptor a) {
  double alpha = getAlpha().convertToDouble();
  return foldUnary(a.getInput(), [=](double x) { return x < 0 ? alpha * x : x; },
                   nullptr);
}
OpFoldResult EluOp::fold(FoldAdaptor a) {
  double alpha = getAlpha().convertToDouble();
  return foldUnary(
      a.getInput(),
      [=](double x) { return x < 0 ? alpha * (std::exp(x) - 1) : x; }, nullptr);
}
OpFoldResult HardSigmoidOp::fold(FoldAdaptor a) {
  double alpha = getAlpha().convertToDouble(), beta = getBeta().convertToDouble();
  return foldUnary(
      a.getInput(),
      [=](double x) { return std::clamp(alpha * x + beta, 0.0, 1.0); }, nullptr);
}
OpFoldResult ClampOp::fold(FoldAdaptor a) {
  if (!getMin() && !getMax())
    return getInput();
  double lo = getMin() ? getMin()->convertToDouble() : -INFINITY;
  double hi = getMax() ? getMax()->convertToDouble() : INFINITY;
  bool isUnsigned = isUnsignedInt(getType().getElementType());
  return foldUnary(
      a.getInput(), [=](double x) { return std::isnan(x) ? x : std::clamp(x, lo, hi); },
      [=](const APInt &x) -> std::optional<APInt> {
        double v = isUnsigned ? static_cast<double>(x.getZExtValue())
                              : static_cast<double>(x.getSExtValue());
        double c = std::clamp(v, lo, hi);
        return APInt(x.getBitWidth(), static_cast<int64_t>(c), !isUnsigned);
      });
}

OpFoldResult AddOp::fold(FoldAdaptor a) {
  if (auto r = foldIdentity(getLhs(), a.getRhs(), getType(), 0))
    return r;
  if (auto r = foldIdentity(getRhs(), a.getLhs(), getType(), 0))
    return r;
  return foldBinary(
      a.getLhs(), a.getRhs(), getType(),
      [](const APInt &l, const APInt &r) -> std::optional<APInt> { return l + r; },
      [](const APFloat &l, const APFloat &r) -> std::optional<APFloat> {
        return l + r;
      });
}

OpFoldResult SubOp::fold(FoldAdaptor a) {
  if (auto r = foldIdentity(getLhs(), a.getRhs(), getType(), 0))
    return r;
  return foldBinary(
      a.getLhs(), a.getRhs(), getType(),
      [](const APInt &l, const APInt &r) -> std::optional<APInt> { return l - r; },
      [](const APFloat &l, const APFloat &r) -> std::optional<APFloat> {
        return l - r;
      });
}

OpFoldResult MulOp::fold(FoldAdaptor a) {
  if (auto r = foldIdentity(getLhs(), a.getRhs(), getType(), 1))
    return r;
  if (auto r = foldIdentity(getRhs(), a.getLhs(), getType(), 1))
    return r;
  return foldBinary(
      a.getLhs(), a.getRhs(), getType(),
      [](const APInt &l, const APInt &r) -> std::optional<APInt> { return l * r; },
      [](const APFloat &l, const APFloat &r) -> std::optional<APFloat> {
        return l * r;
      });
}

OpFoldResult DivOp::fold(FoldAdaptor a) {
  if (auto r = foldIdentity(getLhs(), a.getRhs(), getType(), 1))
    return r;
  bool isUnsigned = isUnsignedInt(getType().getElementType());
  return foldBinary(
      a.getLhs(), a.getRhs(), getType(),
      [=](const APInt &l, const APInt &r) -> std::optional<APInt> {
        if (r.isZero())
          return std::nullopt; // leave undefined behaviour to run time
        return isUnsigned ? l.udiv(r) : l.sdiv(r);
      },
      [](const APFloat &l, const APFloat &r) -> std::optional<APFloat> {
        return l / r;
      });
}

OpFoldResult RemOp::fold(FoldAdaptor a) {
  bool isUnsigned = isUnsignedInt(getType().getElementType());
  return foldBinary(
      a.getLhs(), a.getRhs(), getType(),
      [=](const APInt &l, const APInt &r) -> std::optional<APInt> {
        if (r.isZero())
          return std::nullopt;
        return isUnsigned ? l.urem(r) : l.srem(r);
      },
      [](const APFloat &l, const APFloat &r) -> std::optional<APFloat> {
        APFloat v = l;
        v.mod(r);
        return v;
      });
}

OpFoldResult PowOp::fold(FoldAdaptor a) {
  if (auto r = foldIdentity(getLhs(), a.getRhs(), getType(), 1))
    return r;
  return foldBinary(
      a.getLhs(), a.getRhs(), getType(), nullptr,
      [](const APFloat &l, const APFloat &r) -> std::optional<APFloat> {
        APFloat v(std::pow(l.convertToDouble(), r.convertToDouble()));
        bool lost;
        v.convert(l.getSemantics(), APFloat::rmNearestTiesToEven, &lost);
        return v;
      });
}

OpFoldResult MaxOp::fold(FoldAdaptor a) {
  bool isUnsigned = isUnsignedInt(getType().getElementType());
  return foldBinary(
      a.getLhs(), a.getRhs(), getType(),
      [=](const APInt &l, const APInt &r) -> std::optional<APInt> {
        return (isUnsigned ? l.uge(r) : l.sge(r)) ? l : r;
      },
      [](const APFloat &l, const APFloat &r) -> std::optional<APFloat> {
        return llvm::maximum(l, r);
      });
}

OpFoldResult MinOp::fold(FoldAdaptor a) {
  bool isUnsigned = isUnsignedInt(getType().getElementType());
  return foldBinary(
      a.getLhs(), a.getRhs(), getType(),
      [=](const APInt &l, const APInt &r) -> std::optional<APInt> {
        return (isUnsigned ? l.ule(r) : l.sle(r)) ? l : r;
      },
      [](const APFloat &l, const APFloat &r) -> std::optional<APFloat> {
        return llvm::minimum(l, r);
      });
}

OpFoldResult ShiftLeftOp::fold(FoldAdaptor a) {
  return foldBinary(a.getLhs(), a.getRhs(), getType(),
                    [](const APInt &l, const APInt &r) -> std::optional<APInt> {
                      if (r.uge(l.getBitWidth()))
                        return APInt::getZero(l.getBitWidth());
                      return l.shl(r);
                    },
                    nullptr);
}
OpFoldResult ShiftRightOp::fold(FoldAdaptor a) {
  bool isUnsigned = isUnsignedInt(getType().getElementType());
  return foldBinary(a.getLhs(), a.getRhs(), getType(),
                    [=](const APInt &l, const APInt &r) -> std::optional<APInt> {
                      unsigned w = l.getBitWidth();
                      unsigned n = r.uge(w) ? w : static_cast<unsigned>(r.getZExtValue());
                      if (isUnsigned)
                        return n == w ? APInt::getZero(w) : l.lshr(n);
                      return l.ashr(std::min(n, w - 1));
                    },
                    nullptr);
}
OpFoldResult AndOp::fold(FoldAdaptor a) {
  return foldBinary(a.getLhs(), a.getRhs(), getType(),
                    [](const APInt &l, const APInt &r) -> std::optional<APInt> {
                      return l & r;
                    },
                    nullptr);
}
OpFoldResult OrOp::fold(FoldAdaptor a) {
  return foldBinary(a.getLhs(), a.getRhs(), getType(),
                    [](const APInt &l, const APInt &r) -> std::optional<APInt> {
                      return l | r;
                    },
                    nullptr);
}
OpFoldResult XorOp::fold(FoldAdaptor a) {
  return foldBinary(a.getLhs(), a.getRhs(), getType(),
                    [](const APInt &l, const APInt &r) -> std::optional<APInt> {
                      return l ^ r;
                    },
                    nullptr);
}

/// Comparison folding: `pred` maps a three-way result (-1, 0, 1, or 2 for
/// unordered) to the truth value.
template <typename Op>
static OpFoldResult foldCompare(Op op, Attribute lhs, Attribute rhs,
                                std::function<bool(int)> pred) {
  bool isUnsigned = isUnsignedInt(op.getLhs().getType().getElementType());
  auto boolInt = [](bool b) { return APInt(1, b ? 1 : 0); };
  auto boolFloat = [](bool b) { return APFloat(b ? 1.0f : 0.0f); };
  return foldBinary(
      lhs, rhs, op.getType(),
      [=](const APInt &l, const APInt &r) -> std::optional<APInt> {
        bool lt = isUnsigned ? l.ult(r) : l.slt(r);
        return boolInt(pred(l == r ? 0 : (lt ? -1 : 1)));
      },
      [=](const APFloat &l, const APFloat &r) -> std::optional<APFloat> {
        switch (l.compare(r)) {
        case APFloat::cmpLessThan:
          return boolFloat(pred(-1));
        case APFloat::cmpEqual:
          return boolFloat(pred(0));
        case APFloat::cmpGreaterThan:
          return boolFloat(pred(1));
        case APFloat::cmpUnordered:
          return boolFloat(pred(2));
        }
        return std::nullopt;
      });
}

OpFoldResult EqualOp::fold(FoldAdaptor a) {
  return foldCompare(*this, a.getLhs(), a.getRhs(), [](int c) { return c == 0; });
}
OpFoldResult LessOp::fold(FoldAdaptor a) {
  return foldCompare(*this, a.getLhs(), a.getRhs(), [](int c) { return c == -1; });
}
OpFoldResult LessEqualOp::fold(FoldAdaptor a) {
  return foldCompare(*this, a.getLhs(), a.getRhs(),
                     [](int c) { return c == -1 || c == 0; });
}
OpFoldResult GreaterOp::fold(FoldAdaptor a) {
  return foldCompare(*this, a.getLhs(), a.getRhs(), [](int c) { return c == 1; });
}
OpFoldResult GreaterEqualOp::fold(FoldAdaptor a) {
  return foldCompare(*this, a.getLhs(), a.getRhs(),
                     [](int c) { return c == 1 || c == 0; });
}

OpFoldResult SelectOp::fold(FoldAdaptor a) {
  if (auto cond = dyn_cast_if_present<SplatElementsAttr>(a.getCond())) {
    Value picked = cond.getSplatValue<bool>() ? getOnTrue() : getOnFalse();
    if (picked.getType() == getType())
      return picked;
  }
  auto cond = foldable(a.getCond());
  auto t = foldable(a.getOnTrue()), f = foldable(a.getOnFalse());
  if (!cond || !t || !f || !getType().hasStaticShape())
    return {};
  ArrayRef<int64_t> shape = getType().getShape();
  auto ci = broadcastIndices(cond.getType().getShape(), shape);
  auto ti = broadcastIndices(t.getType().getShape(), shape);
  auto fi = broadcastIndices(f.getType().getShape(), shape);
  auto cv = llvm::to_vector(cond.getValues<bool>());
  auto tv = llvm::to_vector(t.getValues<Attribute>());
  auto fv = llvm::to_vector(f.getValues<Attribute>());
  SmallVector<Attribute> out;
  for (size_t i = 0; i < ci.size(); ++i)
    out.push_back(cv[ci[i]] ? tv[ti[i]] : fv[fi[i]]);
  return DenseElementsAttr::get(getType(), out);
}

OpFoldResult CastOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getType())
    return getInput();
  auto in = foldable(a.getInput());
  if (!in)
    return {};
  Type from = in.getElementType(), to = getType().getElementType();
  bool fromUnsigned = isUnsignedInt(from), toUnsigned = isUnsignedInt(to);
  auto toFloat = dyn_cast<FloatType>(to);
  unsigned toWidth = to.getIntOrFloatBitWidth();
  SmallVector<APFloat> outF;
  SmallVector<APInt> outI;
  auto push = [&](double v, std::optional<APInt> exact) {
    if (toFloat) {
      APFloat f(v);
      bool lost;
      f.convert(toFloat.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &lost);
      outF.push_back(f);
    } else if (toWidth == 1) {
      outI.push_back(APInt(1, exact ? !exact->isZero() : v != 0));
    } else if (exact) {
      outI.push_back(fromUnsigned ? exact->zextOrTrunc(toWidth)
                                  : exact->sextOrTrunc(toWidth));
    } else {
      outI.push_back(APInt(toWidth, static_cast<int64_t>(std::trunc(v)),
                           !toUnsigned, /*implicitTrunc=*/true));
    }
  };
  if (isa<FloatType>(from)) {
    for (APFloat v : in.getValues<APFloat>()) {
      double d = v.convertToDouble();
      if (!toFloat && toWidth != 1 && !std::isfinite(d))
        return {}; // undefined in ONNX; leave it to run time
      push(d, std::nullopt);
    }
  } else {
    for (const APInt &v : in.getValues<APInt>()) {
      double d = fromUnsigned || from.isInteger(1)
                     ? static_cast<double>(v.getZExtValue())
                     : static_cast<double>(v.getSExtValue());
      push(d, from.isInteger(1) ? v.zext(64) : v);
    }
  }
  return toFloat ? DenseElementsAttr::get(getType(), outF)
                 : DenseElementsAttr::get(getType(), outI);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

#define TESSERA_REDUCE_FOLD(OP)                                                \
  OpFoldResult OP::fold(FoldAdaptor) {                                         \
    if (getAxes().empty() && getInput().getType() == getType())                \
      return getInput();                                                       \
    return {};                                                                 \
  }
TESSERA_REDUCE_FOLD(ReduceSumOp)
TESSERA_REDUCE_FOLD(ReduceMeanOp)
TESSERA_REDUCE_FOLD(ReduceMaxOp)
TESSERA_REDUCE_FOLD(ReduceMinOp)
TESSERA_REDUCE_FOLD(ReduceProdOp)
#undef TESSERA_REDUCE_FOLD

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

OpFoldResult ReshapeOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto in = foldable(a.getInput()))
    return in.reshape(getType());
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor a) {
  ArrayRef<int64_t> perm = getPerm();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  if (auto producer = getInput().getDefiningOp<TransposeOp>()) {
    // result[i] = mid[perm[i]] = in[inner[perm[i]]]
    SmallVector<int64_t> composed;
    for (int64_t p : perm)
      composed.push_back(producer.getPerm()[p]);
    getInputMutable().assign(producer.getInput());
    setPerm(composed);
    return getResult();
  }
  auto in = foldable(a.getInput());
  if (!in || !getType().hasStaticShape())
    return {};
  ArrayRef<int64_t> inShape = in.getType().getShape();
  SmallVector<int64_t> inStrides = stridesOf(inShape);
  // Walk the result in order; a box over the input with permuted strides.
  SmallVector<int64_t> sizes(getType().getShape());
  SmallVector<int64_t> steps, permStrides;
  for (int64_t p : perm)
    permStrides.push_back(inStrides[p]);
  SmallVector<int64_t> src;
  SmallVector<int64_t> idx(sizes.size(), 0);
  int64_t n = numElements(sizes);
  for (int64_t lin = 0; lin < n; ++lin) {
    int64_t s = 0;
    for (size_t d = 0; d < sizes.size(); ++d)
      s += idx[d] * permStrides[d];
    src.push_back(s);
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d])
        break;
      idx[d] = 0;
    }
  }
  return permuteElements(in, getType(), src);
}

OpFoldResult ExpandOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getType())
    return getInput();
  auto in = foldable(a.getInput());
  if (in && in.isSplat())
    return DenseElementsAttr::get(getType(), in.getSplatValue<Attribute>());
  if (!in || !getType().hasStaticShape() ||
      getType().getNumElements() > kMaxFoldElements)
    return {};
  return permuteElements(
      in, getType(),
      broadcastIndices(in.getType().getShape(), getType().getShape()));
}

OpFoldResult ConcatOp::fold(FoldAdaptor a) {
  if (getInputs().size() == 1 && getInputs().front().getType() == getType())
    return getInputs().front();
  if (!getType().hasStaticShape() ||
      getType().getNumElements() > kMaxFoldElements)
    return {};
  SmallVector<SmallVector<Attribute>> parts;
  for (Attribute attr : a.getInputs()) {
    auto dense = foldable(attr);
    if (!dense)
      return {};
    parts.push_back(llvm::to_vector(dense.getValues<Attribute>()));
  }
  // Interleave: for every index of the dims before `axis`, append each
  // input's contiguous block of dims from `axis` on.
  int64_t axis = getAxis();
  int64_t outer = numElements(getType().getShape().take_front(axis));
  SmallVector<Attribute> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (auto [i, input] : llvm::enumerate(getInputs())) {
      int64_t block =
          numElements(cast<RankedTensorType>(input.getType()).getShape().drop_front(axis));
      for (int64_t j = 0; j < block; ++j)
        out.push_back(parts[i][o * block + j]);
    }
  }
  return DenseElementsAttr::get(getType(), out);
}

OpFoldResult SliceOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getStarts(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getStrides(), [](int64_t s) { return s == 1; }))
    return getInput();
  auto in = foldable(a.getInput());
  if (!in || !getType().hasStaticShape())
    return {};
  return permuteElements(in, getType(),
                         boxIndices(in.getType().getShape(), getStarts(),
                                    getType().getShape(), getStrides()));
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult GatherOp::fold(FoldAdaptor a) {
  auto in = foldable(a.getInput());
  auto indices = foldable(a.getIndices());
  if (!in || !indices || !getType().hasStaticShape())
    return {};
  ArrayRef<int64_t> shape = in.getType().getShape();
  int64_t axis = getAxis();
  int64_t outer = numElements(shape.take_front(axis));
  int64_t inner = numElements(shape.drop_front(axis + 1));
  int64_t dim = shape[axis];
  SmallVector<int64_t> src;
  for (int64_t o = 0; o < outer; ++o) {
    for (const APInt &raw : indices.getValues<APInt>()) {
      int64_t i = raw.getSExtValue();
      if (i < 0)
        i += dim;
      if (i < 0 || i >= dim)
        return {}; // out of bounds: reported by the importer or at run time
      for (int64_t j = 0; j < inner; ++j)
        src.push_back((o * dim + i) * inner + j);
    }
  }
  return permuteElements(in, getType(), src);
}

//===----------------------------------------------------------------------===//
// Canonicalization: explicit broadcasts feeding broadcasting ops
//===----------------------------------------------------------------------===//

namespace {
/// `op(expand(x), y)` -> `op(x, y)` when implicit broadcasting yields the
/// same result type: the explicit broadcast only costs memory and a copy.
struct DropRedundantExpand : public RewritePattern {
  DropRedundantExpand(MLIRContext *ctx, StringRef opName)
      : RewritePattern(opName, /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    auto resultShape =
        cast<RankedTensorType>(op->getResult(0).getType()).getShape();
    for (OpOperand &operand : op->getOpOperands()) {
      auto expand = operand.get().getDefiningOp<ExpandOp>();
      if (!expand)
        continue;
      // Broadcasting all other operands with the expand's input must still
      // reach the result shape.
      std::optional<SmallVector<int64_t>> shape =
          SmallVector<int64_t>(expand.getInput().getType().getShape());
      for (OpOperand &other : op->getOpOperands())
        if (&other != &operand && shape)
          shape = broadcastShapes(
              *shape, cast<RankedTensorType>(other.get().getType()).getShape());
      if (!shape || ArrayRef<int64_t>(*shape) != resultShape)
        continue;
      rewriter.modifyOpInPlace(
          op, [&] { operand.set(expand.getInput()); });
      return success();
    }
    return rewriter.notifyMatchFailure(op, "no removable expand operand");
  }
};
} // namespace

namespace {
/// `gather(x, constant indices)` whose indices (normalised) step evenly,
/// `x[:, 0]` or `x[..., 2:8:2]` as exporters write them, -> a strided
/// slice and a reshape: data movement that tile mapping plans like any
/// other, and that has a gradient, where a gather reads its whole input on
/// every tile.
struct GatherAtConstantIndicesToSlice : public OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    DenseElementsAttr indices;
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    if (!matchPattern(op.getIndices(), m_Constant(&indices)) ||
        !inType.hasStaticShape() || !op.getType().hasStaticShape() ||
        indices.getNumElements() == 0)
      return rewriter.notifyMatchFailure(op, "indices not constant");
    int64_t axis = op.getAxis(), dim = inType.getDimSize(axis);
    SmallVector<int64_t> values;
    for (const APInt &raw : indices.getValues<APInt>()) {
      int64_t i = raw.getSExtValue();
      if (i < 0)
        i += dim;
      if (i < 0 || i >= dim)
        return rewriter.notifyMatchFailure(op, "index out of bounds");
      values.push_back(i);
    }
    int64_t step = values.size() > 1 ? values[1] - values[0] : 1;
    if (step < 1)
      return rewriter.notifyMatchFailure(op, "indices do not ascend");
    for (size_t k = 1; k < values.size(); ++k)
      if (values[k] - values[k - 1] != step)
        return rewriter.notifyMatchFailure(op, "indices do not step evenly");
    int64_t rank = inType.getRank();
    SmallVector<int64_t> starts(rank, 0), limits(inType.getShape()),
        strides(rank, 1), sliced(inType.getShape());
    starts[axis] = values.front();
    limits[axis] = values.back() + 1;
    strides[axis] = step;
    sliced[axis] = values.size();
    Value slice = SliceOp::create(rewriter, op.getLoc(), inType.clone(sliced),
                                  op.getInput(), rewriter.getDenseI64ArrayAttr(starts),
                                  rewriter.getDenseI64ArrayAttr(limits),
                                  rewriter.getDenseI64ArrayAttr(strides));
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), slice);
    return success();
  }
};
} // namespace

void GatherOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *ctx) {
  results.add<GatherAtConstantIndicesToSlice>(ctx);
}

#define TESSERA_BROADCAST_CANON(OP)                                            \
  void OP::getCanonicalizationPatterns(RewritePatternSet &results,             \
                                       MLIRContext *ctx) {                     \
    results.add<DropRedundantExpand>(ctx, OP::getOperationName());             \
  }
TESSERA_BROADCAST_CANON(AddOp)
TESSERA_BROADCAST_CANON(SubOp)
TESSERA_BROADCAST_CANON(MulOp)
TESSERA_BROADCAST_CANON(DivOp)
TESSERA_BROADCAST_CANON(RemOp)
TESSERA_BROADCAST_CANON(PowOp)
TESSERA_BROADCAST_CANON(MaxOp)
TESSERA_BROADCAST_CANON(MinOp)
TESSERA_BROADCAST_CANON(AndOp)
TESSERA_BROADCAST_CANON(OrOp)
TESSERA_BROADCAST_CANON(XorOp)
TESSERA_BROADCAST_CANON(ShiftLeftOp)
TESSERA_BROADCAST_CANON(ShiftRightOp)
TESSERA_BROADCAST_CANON(EqualOp)
TESSERA_BROADCAST_CANON(LessOp)
TESSERA_BROADCAST_CANON(LessEqualOp)
TESSERA_BROADCAST_CANON(GreaterOp)
TESSERA_BROADCAST_CANON(GreaterEqualOp)
TESSERA_BROADCAST_CANON(SelectOp)
#undef TESSERA_BROADCAST_CANON
