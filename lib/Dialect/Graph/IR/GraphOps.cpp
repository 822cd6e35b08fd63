//===- GraphOps.cpp - graph dialect: type inference and verifiers --------===//
//
// Every op's inferReturnTypes checks exactly what its result type depends on
// and reports a user-facing error (through the op's location) otherwise, so
// importers can build ops from untrusted models and turn a bad shape into a
// diagnostic instead of a crash.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace tessera::graph;

namespace {

RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Shape of a value with a "1x2x?" rendering for messages.
std::string shapeOf(Value v) {
  auto t = rankedType(v);
  return formatShape(t.getShape());
}

LogicalResult fail(std::optional<Location> loc, const Twine &msg) {
  return emitOptionalError(loc, msg);
}

/// Common inference for NumPy-broadcasting ops: all operands' shapes
/// broadcast; `elementType` is the result element type.
LogicalResult inferBroadcast(std::optional<Location> loc, ValueRange operands,
                             Type elementType, SmallVectorImpl<Type> &results) {
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    auto next = broadcastShapes(shape, rankedType(v).getShape());
    if (!next)
      return fail(loc, "operand shapes do not broadcast: " +
                           formatShape(shape) + " vs " + shapeOf(v) +
                           " (NumPy rules: sizes must match or be 1)");
    shape = std::move(*next);
  }
  results.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

LogicalResult sameElementType(std::optional<Location> loc, Value a, Value b) {
  if (rankedType(a).getElementType() != rankedType(b).getElementType())
    return fail(loc, Twine("operands must share an element type; got ") +
                         "tensor<" + shapeOf(a) + "> and tensor<" + shapeOf(b) +
                         "> with different element types");
  return success();
}

/// Checks that `axes` are sorted, unique and within [0, rank).
LogicalResult checkAxes(std::optional<Location> loc, ArrayRef<int64_t> axes,
                        int64_t rank, StringRef what) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      return fail(loc, what + " " + Twine(axes[i]) + " is out of range for rank " +
                           Twine(rank));
    if (i && axes[i] <= axes[i - 1])
      return fail(loc, what + " must be sorted and unique");
  }
  return success();
}

LogicalResult checkAxis(std::optional<Location> loc, int64_t axis,
                        int64_t rank) {
  if (axis < 0 || axis >= rank)
    return fail(loc, "axis " + Twine(axis) + " is out of range for rank " +
                         Twine(rank));
  return success();
}

/// Spatial window checks shared by convolution and pooling.
LogicalResult inferWindow(std::optional<Location> loc, ArrayRef<int64_t> in,
                          ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                          ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                          bool ceilMode, SmallVectorImpl<int64_t> &out) {
  size_t n = kernel.size();
  if (in.size() != n + 2)
    return fail(loc, "input must be N x C x " + Twine(n) +
                         " spatial dims, got rank " + Twine(in.size()));
  if (strides.size() != n || dilations.size() != n || pads.size() != 2 * n)
    return fail(loc, "expected " + Twine(n) + " strides and dilations and " +
                         Twine(2 * n) + " pads, got " + Twine(strides.size()) +
                         ", " + Twine(dilations.size()) + " and " +
                         Twine(pads.size()));
  for (size_t i = 0; i < n; ++i) {
    if (kernel[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0)
      return fail(loc, "kernel sizes, strides and dilations must be positive");
    if (pads[i] < 0 || pads[i + n] < 0)
      return fail(loc, "pads must be non-negative");
    auto size = windowOutputSize(in[i + 2], kernel[i], strides[i], pads[i],
                                 pads[i + n], dilations[i], ceilMode);
    if (!size)
      return fail(loc, "spatial dim " + Twine(i) + " of size " +
                           Twine(in[i + 2]) + " (padded by " + Twine(pads[i]) +
                           "+" + Twine(pads[i + n]) +
                           ") is smaller than the window of " +
                           Twine(dilations[i] * (kernel[i] - 1) + 1));
    out.push_back(*size);
  }
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult ClampOp::verify() {
  if (getMin() && getMax() &&
      getMin()->convertToDouble() > getMax()->convertToDouble())
    return emitOpError("min bound ")
           << getMin()->convertToDouble() << " exceeds max bound "
           << getMax()->convertToDouble();
  return success();
}

#define TESSERA_BINARY_INFER(OP)                                               \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> l, \
                                     Adaptor a, SmallVectorImpl<Type> &r) {    \
    if (failed(sameElementType(l, a.getLhs(), a.getRhs())))                    \
      return failure();                                                        \
    return inferBroadcast(l, a.getOperands(),                                  \
                          rankedType(a.getLhs()).getElementType(), r);         \
  }
TESSERA_BINARY_INFER(AddOp)
TESSERA_BINARY_INFER(SubOp)
TESSERA_BINARY_INFER(MulOp)
TESSERA_BINARY_INFER(DivOp)
TESSERA_BINARY_INFER(RemOp)
TESSERA_BINARY_INFER(PowOp)
TESSERA_BINARY_INFER(MaxOp)
TESSERA_BINARY_INFER(MinOp)
TESSERA_BINARY_INFER(AndOp)
TESSERA_BINARY_INFER(OrOp)
TESSERA_BINARY_INFER(XorOp)
TESSERA_BINARY_INFER(ShiftLeftOp)
TESSERA_BINARY_INFER(ShiftRightOp)
#undef TESSERA_BINARY_INFER

#define TESSERA_COMPARE_INFER(OP)                                              \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx,                         \
                                     std::optional<Location> l, Adaptor a,     \
                                     SmallVectorImpl<Type> &r) {               \
    if (failed(sameElementType(l, a.getLhs(), a.getRhs())))                    \
      return failure();                                                        \
    return inferBroadcast(l, a.getOperands(), IntegerType::get(ctx, 1), r);    \
  }
TESSERA_COMPARE_INFER(EqualOp)
TESSERA_COMPARE_INFER(LessOp)
TESSERA_COMPARE_INFER(LessEqualOp)
TESSERA_COMPARE_INFER(GreaterOp)
TESSERA_COMPARE_INFER(GreaterEqualOp)
#undef TESSERA_COMPARE_INFER

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &r) {
  if (failed(sameElementType(loc, a.getOnTrue(), a.getOnFalse())))
    return failure();
  return inferBroadcast(loc, a.getOperands(),
                        rankedType(a.getOnTrue()).getElementType(), r);
}

//===----------------------------------------------------------------------===//
// Linear algebra and NN
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &r) {
  if (failed(sameElementType(loc, a.getLhs(), a.getRhs())))
    return failure();
  SmallVector<int64_t> lhs(rankedType(a.getLhs()).getShape());
  SmallVector<int64_t> rhs(rankedType(a.getRhs()).getShape());
  if (lhs.empty() || rhs.empty())
    return fail(loc, "matmul operands must have rank >= 1");
  bool lhsVector = lhs.size() == 1, rhsVector = rhs.size() == 1;
  if (lhsVector)
    lhs.insert(lhs.begin(), 1);
  if (rhsVector)
    rhs.push_back(1);
  int64_t k1 = lhs.back(), k2 = rhs[rhs.size() - 2];
  if (k1 != k2 && k1 != kDynamicDim && k2 != kDynamicDim)
    return fail(loc, "contracting dims differ: lhs " + shapeOf(a.getLhs()) +
                         " vs rhs " + shapeOf(a.getRhs()));
  auto batch = broadcastShapes(ArrayRef(lhs).drop_back(2),
                               ArrayRef(rhs).drop_back(2));
  if (!batch)
    return fail(loc, "batch dims do not broadcast: lhs " + shapeOf(a.getLhs()) +
                         " vs rhs " + shapeOf(a.getRhs()));
  SmallVector<int64_t> shape = *batch;
  if (!lhsVector)
    shape.push_back(lhs[lhs.size() - 2]);
  if (!rhsVector)
    shape.push_back(rhs.back());
  r.push_back(
      RankedTensorType::get(shape, rankedType(a.getLhs()).getElementType()));
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc, Adaptor a,
                                       SmallVectorImpl<Type> &r) {
  if (failed(sameElementType(loc, a.getInput(), a.getWeight())))
    return failure();
  ArrayRef<int64_t> in = rankedType(a.getInput()).getShape();
  ArrayRef<int64_t> w = rankedType(a.getWeight()).getShape();
  if (w.size() != in.size() || in.size() < 3)
    return fail(loc, "convolution input " + shapeOf(a.getInput()) +
                         " and weight " + shapeOf(a.getWeight()) +
                         " must both have rank >= 3 and equal ranks");
  int64_t groups = a.getGroups();
  if (groups <= 0)
    return fail(loc, "groups must be positive, got " + Twine(groups));
  if (in[1] != kDynamicDim && w[1] != kDynamicDim && in[1] != w[1] * groups)
    return fail(loc, "input has " + Twine(in[1]) + " channels but weight " +
                         shapeOf(a.getWeight()) + " with " + Twine(groups) +
                         " groups expects " + Twine(w[1] * groups));
  if (w[0] != kDynamicDim && w[0] % groups != 0)
    return fail(loc, Twine(w[0]) + " output channels are not divisible by " +
                         Twine(groups) + " groups");
  if (Value bias = a.getBias()) {
    ArrayRef<int64_t> b = rankedType(bias).getShape();
    if (b.size() != 1 || (b[0] != w[0] && b[0] != kDynamicDim &&
                          w[0] != kDynamicDim))
      return fail(loc, "bias must have shape " + Twine(w[0]) + ", got " +
                           shapeOf(bias));
  }
  SmallVector<int64_t> out = {in[0], w[0]};
  if (failed(inferWindow(loc, in, w.drop_front(2), a.getStrides(), a.getPads(),
                         a.getDilations(), /*ceilMode=*/false, out)))
    return failure();
  r.push_back(RankedTensorType::get(out, rankedType(a.getInput()).getElementType()));
  return success();
}

template <typename Adaptor>
static LogicalResult inferPool(std::optional<Location> loc, Adaptor a,
                               SmallVectorImpl<Type> &r) {
  ArrayRef<int64_t> in = rankedType(a.getInput()).getShape();
  SmallVector<int64_t> out(in.take_front(std::min<size_t>(2, in.size())));
  if (failed(inferWindow(loc, in, a.getKernelShape(), a.getStrides(),
                         a.getPads(), a.getDilations(), a.getCeilMode(), out)))
    return failure();
  // A window must overlap the input, or the padded region alone would be
  // pooled (ONNX forbids pads >= kernel for the same reason).
  for (auto [k, p] : llvm::zip(a.getKernelShape(), a.getPads()))
    if (p >= k)
      return fail(loc, "pad " + Twine(p) + " must be smaller than kernel " +
                           Twine(k));
  r.push_back(RankedTensorType::get(out, rankedType(a.getInput()).getElementType()));
  return success();
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &r) {
  return inferPool(loc, a, r);
}

LogicalResult AvgPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &r) {
  return inferPool(loc, a, r);
}

static LogicalResult inferReduce(std::optional<Location> loc, Value input,
                                 ArrayRef<int64_t> axes, bool keepdims,
                                 Type elementType, SmallVectorImpl<Type> &r) {
  ArrayRef<int64_t> in = rankedType(input).getShape();
  if (failed(checkAxes(loc, axes, in.size(), "reduction axis")))
    return failure();
  SmallVector<int64_t> out;
  for (auto [i, d] : llvm::enumerate(in)) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(i)))
      out.push_back(d);
    else if (keepdims)
      out.push_back(1);
  }
  r.push_back(RankedTensorType::get(out, elementType));
  return success();
}

/// A maximum or minimum over an empty dimension into a result that is not
/// empty has no value (a sum over nothing is 0, a product 1; ONNX Runtime
/// refuses these).
static LogicalResult checkExtremumNotOverNothing(std::optional<Location> l, Value input,
                                                 ArrayRef<int64_t> axes, StringRef what) {
  auto type = rankedType(input);
  if (!type)
    return success();
  std::optional<int64_t> emptyAxis;
  for (auto [i, d] : llvm::enumerate(type.getShape())) {
    bool reduced = llvm::is_contained(axes, static_cast<int64_t>(i));
    if (d == 0 && !reduced)
      return success(); // nothing to compute
    if (d == 0 && reduced && !emptyAxis)
      emptyAxis = i;
  }
  if (!emptyAxis)
    return success();
  return emitOptionalError(l, "reduces over dimension ", *emptyAxis, " of ",
                           formatShape(type.getShape()), ", which is empty: a ", what,
                           " over no elements has no value; reduce a non-empty dimension");
}

#define TESSERA_REDUCE_INFER(OP, EXTREMUM)                                     \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> l, \
                                     Adaptor a, SmallVectorImpl<Type> &r) {    \
    if (StringRef what = EXTREMUM; !what.empty() &&                            \
        failed(checkExtremumNotOverNothing(l, a.getInput(), a.getAxes(), what))) \
      return failure();                                                        \
    return inferReduce(l, a.getInput(), a.getAxes(), a.getKeepdims(),          \
                       rankedType(a.getInput()).getElementType(), r);          \
  }
TESSERA_REDUCE_INFER(ReduceSumOp, "")
TESSERA_REDUCE_INFER(ReduceMeanOp, "")
TESSERA_REDUCE_INFER(ReduceMaxOp, "maximum")
TESSERA_REDUCE_INFER(ReduceMinOp, "minimum")
TESSERA_REDUCE_INFER(ReduceProdOp, "")
#undef TESSERA_REDUCE_INFER

/// An argmax or argmin over an empty dimension has no index to return.
static LogicalResult checkArgAxisNotEmpty(std::optional<Location> l, Value input,
                                          int64_t axis) {
  auto type = rankedType(input);
  if (!type || axis < 0 || axis >= type.getRank() || type.getDimSize(axis) != 0)
    return success(); // the rank check is inferReduce's
  return emitOptionalError(l, "reduces over dimension ", axis, " of ",
                           formatShape(type.getShape()),
                           ", which is empty: there is no index to return");
}

#define TESSERA_ARG_INFER(OP)                                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx,                         \
                                     std::optional<Location> l, Adaptor a,     \
                                     SmallVectorImpl<Type> &r) {               \
    int64_t axis = a.getAxis();                                                \
    if (failed(checkArgAxisNotEmpty(l, a.getInput(), axis)))                   \
      return failure();                                                        \
    return inferReduce(l, a.getInput(), ArrayRef(axis), a.getKeepdims(),       \
                       IntegerType::get(ctx, 64), r);                          \
  }
TESSERA_ARG_INFER(ArgMaxOp)
TESSERA_ARG_INFER(ArgMinOp)
#undef TESSERA_ARG_INFER

template <typename Op> static LogicalResult verifySoftmax(Op op) {
  return checkAxis(op.getLoc(), op.getAxis(), op.getInput().getType().getRank());
}
LogicalResult SoftmaxOp::verify() { return verifySoftmax(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmax(*this); }

/// Checks that each per-channel operand of a normalisation is a vector of
/// `channels` elements.
static LogicalResult checkChannelVectors(std::optional<Location> loc,
                                         int64_t channels, ValueRange vectors) {
  for (Value v : vectors) {
    ArrayRef<int64_t> s = rankedType(v).getShape();
    if (s.size() != 1 ||
        (s[0] != channels && s[0] != kDynamicDim && channels != kDynamicDim))
      return fail(loc, "per-channel operand must have shape " +
                           formatShape(channels) + ", got " + shapeOf(v));
  }
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &r) {
  auto in = rankedType(a.getInput());
  if (in.getRank() < 2)
    return fail(loc, "batch_norm input must be N x C x ..., got rank " +
                         Twine(in.getRank()));
  if (failed(checkChannelVectors(
          loc, in.getDimSize(1),
          {a.getScale(), a.getBias(), a.getMean(), a.getVariance()})))
    return failure();
  r.push_back(in);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &r) {
  auto in = rankedType(a.getInput());
  if (failed(checkAxis(loc, a.getAxis(), in.getRank())))
    return failure();
  ArrayRef<int64_t> normalized = in.getShape().drop_front(a.getAxis());
  for (Value v : {a.getScale(), a.getBias()})
    if (!isBroadcastableTo(rankedType(v).getShape(), normalized))
      return fail(loc, "scale and bias must broadcast to the normalised dims " +
                           formatShape(normalized) + ", got " + shapeOf(v));
  r.push_back(in);
  return success();
}

LogicalResult GroupNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &r) {
  auto in = rankedType(a.getInput());
  if (in.getRank() < 2)
    return fail(loc, "group_norm input must be N x C x ..., got rank " +
                         Twine(in.getRank()));
  int64_t groups = a.getNumGroups(), channels = in.getDimSize(1);
  if (groups <= 0 || (channels != kDynamicDim && channels % groups != 0))
    return fail(loc, Twine(channels) + " channels cannot be split into " +
                         Twine(groups) + " groups");
  if (failed(checkChannelVectors(loc, channels, {a.getScale(), a.getBias()})))
    return failure();
  r.push_back(in);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  int64_t in = numElements(getInput().getType().getShape());
  int64_t out = numElements(getType().getShape());
  if (in != kDynamicDim && out != kDynamicDim && in != out)
    return emitOpError("cannot reshape ")
           << formatShape(getInput().getType().getShape()) << " (" << in
           << " elements) to " << formatShape(getType().getShape()) << " ("
           << out << " elements)";
  if (getInput().getType().getElementType() != getType().getElementType())
    return emitOpError("reshape cannot change the element type");
  return success();
}

LogicalResult ExpandOp::verify() {
  if (!isBroadcastableTo(getInput().getType().getShape(), getType().getShape()))
    return emitOpError("cannot broadcast ")
           << formatShape(getInput().getType().getShape()) << " to "
           << formatShape(getType().getShape());
  if (getInput().getType().getElementType() != getType().getElementType())
    return emitOpError("expand cannot change the element type");
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &r) {
  auto in = rankedType(a.getInput());
  ArrayRef<int64_t> perm = a.getPerm();
  if (static_cast<int64_t>(perm.size()) != in.getRank())
    return fail(loc, "perm has " + Twine(perm.size()) +
                         " entries for a rank-" + Twine(in.getRank()) + " input");
  llvm::SmallSet<int64_t, 8> seen;
  SmallVector<int64_t> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || !seen.insert(p).second)
      return fail(loc, "perm must be a permutation of 0.." +
                           Twine(in.getRank() - 1));
    out.push_back(in.getDimSize(p));
  }
  r.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &r) {
  if (a.getInputs().empty())
    return fail(loc, "concat needs at least one input");
  auto first = rankedType(a.getInputs().front());
  int64_t axis = a.getAxis();
  if (failed(checkAxis(loc, axis, first.getRank())))
    return failure();
  SmallVector<int64_t> out(first.getShape());
  for (Value v : a.getInputs().drop_front()) {
    auto t = rankedType(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return fail(loc, "concat inputs must share rank and element type");
    for (int64_t d = 0; d < t.getRank(); ++d) {
      int64_t s = t.getDimSize(d);
      if (d == axis) {
        out[d] = (out[d] == kDynamicDim || s == kDynamicDim) ? kDynamicDim
                                                              : out[d] + s;
      } else if (s != out[d] && s != kDynamicDim && out[d] != kDynamicDim) {
        return fail(loc, "concat inputs " + formatShape(first.getShape()) +
                             " and " + formatShape(t.getShape()) +
                             " differ in dim " + Twine(d) + " (axis is " +
                             Twine(axis) + ")");
      } else if (out[d] == kDynamicDim) {
        out[d] = s;
      }
    }
  }
  r.push_back(RankedTensorType::get(out, first.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc, Adaptor a,
                                        SmallVectorImpl<Type> &r) {
  auto in = rankedType(a.getInput());
  ArrayRef<int64_t> starts = a.getStarts(), limits = a.getLimits(),
                    strides = a.getStrides();
  size_t rank = in.getRank();
  if (starts.size() != rank || limits.size() != rank || strides.size() != rank)
    return fail(loc, "slice needs one start, limit and stride per dim (rank " +
                         Twine(rank) + ")");
  SmallVector<int64_t> out;
  for (size_t d = 0; d < rank; ++d) {
    int64_t size = in.getDimSize(d);
    if (strides[d] == 0)
      return fail(loc, "slice stride must be non-zero");
    if (size == kDynamicDim) {
      out.push_back(kDynamicDim);
      continue;
    }
    bool inRange = starts[d] >= 0 && limits[d] >= -1 && limits[d] <= size &&
                   (starts[d] < size || sliceOutputSize(starts[d], limits[d],
                                                        strides[d]) == 0);
    if (!inRange)
      return fail(loc, "slice [" + Twine(starts[d]) + ":" + Twine(limits[d]) +
                           ":" + Twine(strides[d]) + "] is out of range for dim " +
                           Twine(d) + " of size " + Twine(size));
    out.push_back(sliceOutputSize(starts[d], limits[d], strides[d]));
  }
  r.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc, Adaptor a,
                                      SmallVectorImpl<Type> &r) {
  auto in = rankedType(a.getInput());
  ArrayRef<int64_t> lo = a.getPadsLow(), hi = a.getPadsHigh();
  if (static_cast<int64_t>(lo.size()) != in.getRank() ||
      static_cast<int64_t>(hi.size()) != in.getRank())
    return fail(loc, "pad needs one low and one high pad per dim");
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (lo[d] < 0 || hi[d] < 0)
      return fail(loc, "pads must be non-negative");
    int64_t s = in.getDimSize(d);
    if (a.getMode() == PadMode::reflect && s != kDynamicDim &&
        (lo[d] >= s || hi[d] >= s))
      return fail(loc, "reflect padding of dim " + Twine(d) + " needs pads < " +
                           Twine(s));
    out.push_back(s == kDynamicDim ? s : s + lo[d] + hi[d]);
  }
  r.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &r) {
  auto in = rankedType(a.getInput());
  int64_t axis = a.getAxis();
  if (failed(checkAxis(loc, axis, in.getRank())))
    return failure();
  SmallVector<int64_t> out(in.getShape().take_front(axis));
  llvm::append_range(out, rankedType(a.getIndices()).getShape());
  llvm::append_range(out, in.getShape().drop_front(axis + 1));
  r.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

LogicalResult ScatterAddOp::verify() {
  auto updates = cast<RankedTensorType>(getUpdates().getType());
  auto indices = cast<RankedTensorType>(getIndices().getType());
  auto result = cast<RankedTensorType>(getType());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= result.getRank())
    return emitOpError("axis ") << axis << " is out of range for a rank-"
                                << result.getRank() << " result";
  if (updates.getElementType() != result.getElementType())
    return emitOpError("updates ") << updates << " and result " << result
                                   << " differ in element type";
  SmallVector<int64_t> expected(result.getShape().take_front(axis));
  llvm::append_range(expected, indices.getShape());
  llvm::append_range(expected, result.getShape().drop_front(axis + 1));
  if (updates.getRank() != static_cast<int64_t>(expected.size()) ||
      llvm::any_of(llvm::zip(updates.getShape(), expected), [](auto p) {
        auto [a, b] = p;
        return a != b && a != kDynamicDim && b != kDynamicDim;
      }))
    return emitOpError("updates ")
           << updates << " must have the shape of the result's dims before axis "
           << axis << ", the indices' and the result's after it";
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor a,
                                                 SmallVectorImpl<Type> &r) {
  auto in = rankedType(a.getInput());
  auto idx = rankedType(a.getIndices());
  if (failed(checkAxis(loc, a.getAxis(), in.getRank())))
    return failure();
  if (idx.getRank() != in.getRank())
    return fail(loc, "indices " + shapeOf(a.getIndices()) +
                         " must have the rank of the input " + shapeOf(a.getInput()));
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (d != a.getAxis() && idx.getDimSize(d) != kDynamicDim &&
        in.getDimSize(d) != kDynamicDim && idx.getDimSize(d) > in.getDimSize(d))
      return fail(loc, "indices " + shapeOf(a.getIndices()) + " exceed the input " +
                           shapeOf(a.getInput()) + " in dim " + Twine(d));
  r.push_back(RankedTensorType::get(idx.getShape(), in.getElementType()));
  return success();
}

LogicalResult RandomUniformOp::verify() {
  for (Value v : {getSeed(), getCounter()}) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() != 0 || !type.getElementType().isInteger(64))
      return emitOpError("seed and counter must be 0-d i64 tensors, got ")
             << type;
  }
  if (!getType().hasStaticShape())
    return emitOpError("needs a static result shape, got ") << getType();
  if (!(getLow().convertToDouble() < getHigh().convertToDouble()))
    return emitOpError("needs low < high");
  return success();
}

LogicalResult StochasticRoundOp::verify() {
  for (Value v : {getSeed(), getCounter()}) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() != 0 || !type.getElementType().isInteger(64))
      return emitOpError("seed and counter must be 0-d i64 tensors, got ") << type;
  }
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (!in.getElementType().isF32() || !out.getElementType().isF16())
    return emitOpError("rounds f32 to f16, got ") << in << " to " << out;
  if (in.getShape() != out.getShape())
    return emitOpError("keeps the shape, got ") << in << " to " << out;
  return success();
}

LogicalResult CrossReplicaSumOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs one or more tensors to sum");
  if (getInputs().size() != getResults().size())
    return emitOpError("needs one result per input");
  for (auto [in, out] : llvm::zip(getInputs().getTypes(), getResultTypes()))
    if (in != out)
      return emitOpError("result type ") << out << " differs from its input's " << in;
  return success();
}

LogicalResult ResizeOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getRank() != out.getRank() ||
      static_cast<int64_t>(getScales().size()) != in.getRank())
    return emitOpError("resize keeps the rank and needs one scale per dim");
  if (in.getElementType() != out.getElementType())
    return emitOpError("resize cannot change the element type");
  for (double s : getScales())
    if (!(s > 0))
      return emitOpError("scales must be positive");
  return success();
}

//===----------------------------------------------------------------------===//
// Result type compatibility
//===----------------------------------------------------------------------===//

/// A written result type may be less (or more) static than the inferred one:
/// `graph-infer-shapes` refines `?` dims later. Ranks, element types and
/// every known size must agree.
static bool compatibleResults(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != actual.size())
    return false;
  for (auto [a, b] : llvm::zip(inferred, actual))
    if (a != b && failed(verifyCompatibleShape(a, b)))
      return false;
  for (auto [a, b] : llvm::zip(inferred, actual))
    if (getElementTypeOrSelf(a) != getElementTypeOrSelf(b))
      return false;
  return true;
}

#define TESSERA_COMPATIBLE(OP)                                                 \
  bool OP::isCompatibleReturnTypes(TypeRange l, TypeRange r) {                 \
    return compatibleResults(l, r);                                            \
  }
TESSERA_COMPATIBLE(AddOp)
TESSERA_COMPATIBLE(AndOp)
TESSERA_COMPATIBLE(ArgMaxOp)
TESSERA_COMPATIBLE(ArgMinOp)
TESSERA_COMPATIBLE(AvgPoolOp)
TESSERA_COMPATIBLE(BatchNormOp)
TESSERA_COMPATIBLE(ConcatOp)
TESSERA_COMPATIBLE(ConvOp)
TESSERA_COMPATIBLE(DivOp)
TESSERA_COMPATIBLE(EqualOp)
TESSERA_COMPATIBLE(GatherOp)
TESSERA_COMPATIBLE(GatherElementsOp)
TESSERA_COMPATIBLE(GreaterEqualOp)
TESSERA_COMPATIBLE(GreaterOp)
TESSERA_COMPATIBLE(GroupNormOp)
TESSERA_COMPATIBLE(LayerNormOp)
TESSERA_COMPATIBLE(LessEqualOp)
TESSERA_COMPATIBLE(LessOp)
TESSERA_COMPATIBLE(MatmulOp)
TESSERA_COMPATIBLE(MaxOp)
TESSERA_COMPATIBLE(MaxPoolOp)
TESSERA_COMPATIBLE(MinOp)
TESSERA_COMPATIBLE(MulOp)
TESSERA_COMPATIBLE(OrOp)
TESSERA_COMPATIBLE(PadOp)
TESSERA_COMPATIBLE(PowOp)
TESSERA_COMPATIBLE(ReduceMaxOp)
TESSERA_COMPATIBLE(ReduceMeanOp)
TESSERA_COMPATIBLE(ReduceMinOp)
TESSERA_COMPATIBLE(ReduceProdOp)
TESSERA_COMPATIBLE(ReduceSumOp)
TESSERA_COMPATIBLE(RemOp)
TESSERA_COMPATIBLE(SelectOp)
TESSERA_COMPATIBLE(SliceOp)
TESSERA_COMPATIBLE(SubOp)
TESSERA_COMPATIBLE(TransposeOp)
TESSERA_COMPATIBLE(XorOp)
TESSERA_COMPATIBLE(ShiftLeftOp)
TESSERA_COMPATIBLE(ShiftRightOp)
#undef TESSERA_COMPATIBLE
