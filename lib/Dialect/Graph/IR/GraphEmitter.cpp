//===- GraphEmitter.cpp - terse creation of graph ops for passes ---------===//

#include "tessera/Dialect/Graph/IR/GraphEmitter.h"

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/OpBuilding.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <numeric>

using namespace mlir;

namespace tessera::graph {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

namespace {
Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}
} // namespace

bool GraphEmitter::skip(std::initializer_list<Value> operands) {
  if (hasFailed)
    return true;
  for (Value v : operands)
    if (!v) {
      hasFailed = true;
      return true;
    }
  return false;
}

Value GraphEmitter::finish(Operation *op) {
  return unwrap(finishCreatedOp(b, op));
}

Value GraphEmitter::unwrap(FailureOr<Value> v) {
  if (mlir::failed(v)) {
    hasFailed = true;
    return {};
  }
  return *v;
}

Value GraphEmitter::splat(Type elementType, ArrayRef<int64_t> shape, double v) {
  if (hasFailed)
    return {};
  return createSplatConstant(b, loc, elementType, shape, v);
}

Value GraphEmitter::scalar(Value like, double v) {
  if (skip({like}))
    return {};
  return splat(elementOf(like), {}, v);
}

Value GraphEmitter::constant(Type elementType, ArrayRef<int64_t> shape,
                             ArrayRef<double> values) {
  if (hasFailed)
    return {};
  auto type = RankedTensorType::get(shape, elementType);
  SmallVector<Attribute> elements;
  for (double v : values) {
    if (auto ft = dyn_cast<FloatType>(elementType))
      elements.push_back(FloatAttr::get(ft, v));
    else if (elementType.isInteger(1))
      elements.push_back(b.getBoolAttr(v != 0));
    else
      elements.push_back(IntegerAttr::get(elementType, static_cast<int64_t>(v)));
  }
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, elements))
      .getResult();
}

#define TESSERA_BINARY(method, OpTy)                                           \
  Value GraphEmitter::method(Value x, Value y) {                               \
    if (skip({x, y}))                                                          \
      return {};                                                               \
    return finish(                                                             \
        OpTy::create(b, loc, placeholderResultType(b.getContext()), x, y));    \
  }
TESSERA_BINARY(add, AddOp)
TESSERA_BINARY(sub, SubOp)
TESSERA_BINARY(mul, MulOp)
TESSERA_BINARY(div, DivOp)
TESSERA_BINARY(pow, PowOp)
TESSERA_BINARY(max, MaxOp)
TESSERA_BINARY(greater, GreaterOp)
TESSERA_BINARY(greaterEqual, GreaterEqualOp)
TESSERA_BINARY(less, LessOp)
TESSERA_BINARY(lessEqual, LessEqualOp)
TESSERA_BINARY(equal, EqualOp)
TESSERA_BINARY(logicalAnd, AndOp)
TESSERA_BINARY(matmul, MatmulOp)
#undef TESSERA_BINARY

// Unary ops keep their operand's type.
#define TESSERA_UNARY(method, OpTy)                                            \
  Value GraphEmitter::method(Value x) {                                        \
    if (skip({x}))                                                             \
      return {};                                                               \
    return finish(OpTy::create(b, loc, x.getType(), x));                       \
  }
TESSERA_UNARY(neg, NegOp)
TESSERA_UNARY(exp, ExpOp)
TESSERA_UNARY(log, LogOp)
TESSERA_UNARY(sqrt, SqrtOp)
TESSERA_UNARY(abs, AbsOp)
TESSERA_UNARY(sign, SignOp)
TESSERA_UNARY(cos, CosOp)
TESSERA_UNARY(sin, SinOp)
TESSERA_UNARY(sigmoid, SigmoidOp)
TESSERA_UNARY(tanh, TanhOp)
TESSERA_UNARY(relu, ReluOp)
TESSERA_UNARY(softplus, SoftplusOp)
#undef TESSERA_UNARY

Value GraphEmitter::concat(ValueRange parts, int64_t axis) {
  if (parts.empty() || llvm::any_of(parts, [](Value v) { return !v; }) || hasFailed) {
    hasFailed = true;
    return {};
  }
  if (parts.size() == 1)
    return parts.front();
  return finish(ConcatOp::create(b, loc, placeholderResultType(b.getContext()), parts,
                                 b.getI64IntegerAttr(axis)));
}

Value GraphEmitter::sliceAxis(Value x, int64_t axis, int64_t start, int64_t end) {
  if (skip({x}))
    return {};
  ArrayRef<int64_t> shape = shapeOf(x);
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape), strides(shape.size(), 1);
  starts[axis] = start;
  limits[axis] = end;
  return slice(x, starts, limits, strides);
}

Value GraphEmitter::notEqual(Value x, Value y) {
  Value eq = equal(x, y);
  if (skip({eq}))
    return {};
  return finish(NotOp::create(b, loc, eq.getType(), eq));
}

Value GraphEmitter::select(Value cond, Value onTrue, Value onFalse) {
  if (skip({cond, onTrue, onFalse}))
    return {};
  return finish(SelectOp::create(b, loc, placeholderResultType(b.getContext()),
                                 cond, onTrue, onFalse));
}

Value GraphEmitter::cast(Value x, Type elementType) {
  if (skip({x}))
    return {};
  return unwrap(createCast(b, loc, x, elementType));
}

Value GraphEmitter::reshape(Value x, ArrayRef<int64_t> shape) {
  if (skip({x}))
    return {};
  return unwrap(createReshape(b, loc, x, shape));
}

Value GraphEmitter::transpose(Value x, ArrayRef<int64_t> perm) {
  if (skip({x}))
    return {};
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return x;
  return unwrap(createTranspose(b, loc, x, perm));
}

Value GraphEmitter::expand(Value x, ArrayRef<int64_t> shape) {
  if (skip({x}))
    return {};
  return unwrap(createExpand(b, loc, x, shape));
}

Value GraphEmitter::slice(Value x, ArrayRef<int64_t> starts,
                          ArrayRef<int64_t> limits, ArrayRef<int64_t> strides) {
  if (skip({x}))
    return {};
  return finish(SliceOp::create(b, loc, placeholderResultType(b.getContext()), x,
                                b.getDenseI64ArrayAttr(starts),
                                b.getDenseI64ArrayAttr(limits),
                                b.getDenseI64ArrayAttr(strides)));
}

Value GraphEmitter::padOrCut(Value x, ArrayRef<int64_t> low,
                             ArrayRef<int64_t> high) {
  if (skip({x}))
    return {};
  ArrayRef<int64_t> shape = shapeOf(x);
  size_t rank = shape.size();
  // Cut first (negative amounts), then pad what is left.
  bool cut = false, pad = false;
  SmallVector<int64_t> starts(rank, 0), limits(shape), strides(rank, 1);
  SmallVector<int64_t> padLow(rank, 0), padHigh(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    if (low[d] < 0) {
      starts[d] = -low[d];
      cut = true;
    } else if (low[d] > 0) {
      padLow[d] = low[d];
      pad = true;
    }
    if (high[d] < 0) {
      limits[d] = shape[d] + high[d];
      cut = true;
    } else if (high[d] > 0) {
      padHigh[d] = high[d];
      pad = true;
    }
  }
  Value v = cut ? slice(x, starts, limits, strides) : x;
  if (!pad || skip({v}))
    return v;
  return finish(PadOp::create(b, loc, placeholderResultType(b.getContext()), v,
                              b.getDenseI64ArrayAttr(padLow),
                              b.getDenseI64ArrayAttr(padHigh),
                              PadModeAttr::get(b.getContext(), PadMode::constant),
                              b.getF64FloatAttr(0.0)));
}

Value GraphEmitter::flip(Value x, int64_t dim) {
  if (skip({x}))
    return {};
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape[dim] <= 1)
    return x;
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      strides(shape.size(), 1);
  starts[dim] = shape[dim] - 1;
  limits[dim] = -1;
  strides[dim] = -1;
  return slice(x, starts, limits, strides);
}

Value GraphEmitter::interleaveZeros(Value x, ArrayRef<int64_t> dims,
                                    ArrayRef<int64_t> factors) {
  if (skip({x}))
    return {};
  // Each stretched dim n becomes (n, 1), is zero-padded to (n, f), merged to
  // n * f and cut to (n - 1) * f + 1: all with ops tile mapping knows.
  ArrayRef<int64_t> shape = shapeOf(x);
  SmallVector<int64_t> split, padHigh, merged, limits;
  bool any = false;
  for (auto [d, n] : llvm::enumerate(shape)) {
    auto it = llvm::find(dims, static_cast<int64_t>(d));
    int64_t f = it == dims.end() ? 1 : factors[it - dims.begin()];
    split.push_back(n);
    padHigh.push_back(0);
    merged.push_back(n * f);
    limits.push_back(f > 1 ? (n - 1) * f + 1 : n);
    if (f > 1) {
      split.push_back(1);
      padHigh.push_back(f - 1);
      any = true;
    }
  }
  if (!any)
    return x;
  Value v = reshape(x, split);
  v = padOrCut(v, SmallVector<int64_t>(split.size(), 0), padHigh);
  v = reshape(v, merged);
  if (skip({v}))
    return {};
  return slice(v, SmallVector<int64_t>(merged.size(), 0), limits,
               SmallVector<int64_t>(merged.size(), 1));
}

namespace {
template <typename OpTy>
Value reduce(GraphEmitter &e, OpBuilder &b, Location loc, Value x,
             ArrayRef<int64_t> axes, bool keepdims) {
  if (e.skip({x}))
    return {};
  if (axes.empty())
    return x;
  SmallVector<int64_t> sorted(axes);
  llvm::sort(sorted);
  return e.finish(OpTy::create(b, loc, placeholderResultType(b.getContext()), x,
                               b.getDenseI64ArrayAttr(sorted),
                               b.getBoolAttr(keepdims)));
}
} // namespace

Value GraphEmitter::reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  return reduce<ReduceSumOp>(*this, b, loc, x, axes, keepdims);
}
Value GraphEmitter::reduceMean(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  return reduce<ReduceMeanOp>(*this, b, loc, x, axes, keepdims);
}
Value GraphEmitter::reduceMin(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  return reduce<ReduceMinOp>(*this, b, loc, x, axes, keepdims);
}

Value GraphEmitter::sumToShape(Value x, ArrayRef<int64_t> shape) {
  if (skip({x}))
    return {};
  ArrayRef<int64_t> from = shapeOf(x);
  if (from == shape)
    return x;
  int64_t lead = from.size() - shape.size();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d)
    if (d < lead || (shape[d - lead] == 1 && from[d] != 1))
      axes.push_back(d);
  return reshape(reduceSum(x, axes, /*keepdims=*/true), shape);
}

Value GraphEmitter::transposeLast2(Value x) {
  if (skip({x}))
    return {};
  int64_t rank = shapeOf(x).size();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return transpose(x, perm);
}

Value GraphEmitter::conv(Value input, Value weight, ArrayRef<int64_t> strides,
                         ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                         int64_t groups) {
  if (skip({input, weight}))
    return {};
  return finish(ConvOp::create(
      b, loc, placeholderResultType(b.getContext()), input, weight, Value(),
      b.getDenseI64ArrayAttr(strides), b.getDenseI64ArrayAttr(pads),
      b.getDenseI64ArrayAttr(dilations), b.getI64IntegerAttr(groups)));
}

Value GraphEmitter::softmax(Value x, int64_t axis) {
  if (skip({x}))
    return {};
  return finish(SoftmaxOp::create(b, loc, x.getType(), x,
                                  b.getI64IntegerAttr(axis)));
}

Value GraphEmitter::scatterAdd(Value updates, Value indices, int64_t axis,
                               ArrayRef<int64_t> shape) {
  if (skip({updates, indices}))
    return {};
  auto type = RankedTensorType::get(
      shape, mlir::cast<RankedTensorType>(updates.getType()).getElementType());
  return finish(ScatterAddOp::create(b, loc, type, updates, indices, b.getI64IntegerAttr(axis)));
}

/// Built from a one-hot of the indices (index shape x the axis' size),
/// multiplied by the updates and summed over the axis: no element scatter
/// needed, at the cost of that product's size.
Value GraphEmitter::scatterElementsAdd(Value updates, Value indices, int64_t axis,
                                       ArrayRef<int64_t> shape) {
  if (skip({updates, indices}))
    return {};
  SmallVector<int64_t> idxShape(mlir::cast<RankedTensorType>(indices.getType()).getShape());
  int64_t rank = idxShape.size(), n = shape[axis];
  Type i64 = b.getI64Type();
  Value index = cast(indices, i64);
  // Negative indices count from the end.
  index = select(less(index, scalar(index, 0)), add(index, scalar(index, n)), index);
  SmallVector<double> values;
  for (int64_t v = 0; v < n; ++v)
    values.push_back(v);
  SmallVector<int64_t> column(idxShape), classesShape(rank, 1);
  column.push_back(1);
  classesShape.push_back(n);
  Type f = mlir::cast<RankedTensorType>(updates.getType()).getElementType();
  Value oneHot = cast(equal(reshape(index, column), constant(i64, classesShape, values)), f);
  Value summed = reduceSum(mul(oneHot, reshape(updates, column)), {axis}, false);
  // [dims but the axis..., n] -> the axis back in its place.
  SmallVector<int64_t> perm;
  for (int64_t d = 0, k = 0; d < rank; ++d)
    perm.push_back(d == axis ? rank - 1 : k++);
  Value result = transpose(summed, perm);
  // The indices may cover less than `shape` in the other dims.
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  bool pad = false;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && idxShape[d] != shape[d]) {
      high[d] = shape[d] - idxShape[d];
      pad = true;
    }
  return pad ? padOrCut(result, low, high) : result;
}

namespace {
/// `w` (C x M x k1 x ... x kn) with every window dimension reversed. A
/// small window is reversed by a matmul with a permutation matrix, not by
/// reversing slices: tile mapping reads a reversed operand whole (its access
/// is not a box), which for a large weight (512 x 512 x 3 x 3, 9.4 MB) does
/// not fit on a tile, while the matmul splits over the weight's rows. The
/// product is exact: each element is 1 x w plus zeros.
Value flipWindow(GraphEmitter &e, Value w) {
  if (e.skip({w}))
    return {};
  ArrayRef<int64_t> shape = shapeOf(w);
  ArrayRef<int64_t> window = shape.drop_front(2);
  int64_t size = std::accumulate(window.begin(), window.end(), int64_t(1),
                                 std::multiplies<int64_t>());
  if (size <= 1)
    return w;
  constexpr int64_t kMaxPermutedWindow = 64;
  if (size > kMaxPermutedWindow) {
    for (int64_t i = 0; i < static_cast<int64_t>(window.size()); ++i)
      w = e.flip(w, i + 2);
    return w;
  }
  // Reversing every dimension of a row-major window reverses its
  // flattened index: P[size - 1 - i][i] = 1.
  SmallVector<double> permutation(size * size, 0.0);
  for (int64_t i = 0; i < size; ++i)
    permutation[(size - 1 - i) * size + i] = 1.0;
  Type elem = cast<RankedTensorType>(w.getType()).getElementType();
  Value flat = e.reshape(w, {shape[0] * shape[1], size});
  Value reversed = e.matmul(flat, e.constant(elem, {size, size}, permutation));
  return e.reshape(reversed, shape);
}

} // namespace

Value GraphEmitter::convTranspose(Value input, Value weight, ArrayRef<int64_t> outputShape,
                                  ArrayRef<int64_t> strides, ArrayRef<int64_t> padsLow,
                                  ArrayRef<int64_t> dilations, int64_t groups) {
  if (skip({input, weight}))
    return {};
  GraphEmitter &e = *this;
  int64_t n = strides.size();
  ArrayRef<int64_t> w = shapeOf(weight);
  int64_t m = w[0], cg = w[1], mg = m / groups;
  SmallVector<int64_t> dims = llvm::to_vector(llvm::seq<int64_t>(2, 2 + n));
  Value spread = e.interleaveZeros(input, dims, strides);
  if (e.skip({spread}))
    return {};
  SmallVector<int64_t> low(n + 2, 0), high(n + 2, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = w[i + 2], span = dilations[i] * (k - 1);
    low[i + 2] = span - padsLow[i];
    high[i + 2] = outputShape[i + 2] + padsLow[i] - shapeOf(spread)[i + 2];
  }
  Value padded = e.padOrCut(spread, low, high);
  // w: M x Cg x K -> (G, Mg, Cg, K) -> (G, Cg, Mg, K) -> C x Mg x K, flipped.
  SmallVector<int64_t> grouped{groups, mg, cg};
  grouped.append(w.begin() + 2, w.end());
  SmallVector<int64_t> perm{0, 2, 1};
  perm.append(llvm::seq<int64_t>(3, 3 + n).begin(), llvm::seq<int64_t>(3, 3 + n).end());
  SmallVector<int64_t> swapped{groups * cg, mg};
  swapped.append(w.begin() + 2, w.end());
  Value wt = e.reshape(e.transpose(e.reshape(weight, grouped), perm), swapped);
  wt = flipWindow(e, wt);
  return e.conv(padded, wt, SmallVector<int64_t>(n, 1), SmallVector<int64_t>(2 * n, 0),
                dilations, groups);
}

Value GraphEmitter::logSoftmax(Value x, int64_t axis) {
  if (skip({x}))
    return {};
  return finish(LogSoftmaxOp::create(b, loc, x.getType(), x,
                                     b.getI64IntegerAttr(axis)));
}

} // namespace tessera::graph
