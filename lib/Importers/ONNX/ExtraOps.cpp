//===- ExtraOps.cpp - the long tail of ONNX, decomposed into graph ops ----===//
//
// Operators that have no graph op of their own. Each is written in terms of
// the graph dialect, so the mapper, the memory planner and codegen see only
// ops they already know:
//  - scatters (ScatterND, ScatterElements, Scatter, MaxUnpool) compare every
//    update's flat target position with every data position (a one-hot mask)
//    and reduce the selected updates; this costs updates x positions work,
//    which is what a static-shape machine without dynamic addressing pays
//    (accumulating ones, reduction "add", are graph.scatter_add instead: the
//    same work in one fused reduction, with no one-hot mask in memory);
//  - TopK repeats arg-max / mask k times;
//  - spectral ops (DFT, STFT) multiply by constant cosine and sine matrices;
//  - windows and MelWeightMatrix are constants computed here from their
//    (compile-time) sizes;
//  - quantized ops (QuantizeLinear, QLinearMatMul, ConvInteger, ...) compute
//    their integer products exactly in f64 and round half to even as ONNX
//    does.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

#include "tessera/Dialect/Graph/IR/GraphEmitter.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include <cmath>
#include <numeric>

using namespace mlir;
namespace g = tessera::graph;

namespace tessera::onnx_importer {
namespace {

constexpr double kPi = 3.14159265358979323846;

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

/// 0, 1, ..., size-1 as i64 along dim `at` of a rank-`rank` shape of 1s;
/// an error beyond what Tessera builds at compile time.
FailureOr<Value> iotaAlong(NodeImporter &n, int64_t size, int64_t at, int64_t rank) {
  if (failed(n.checkConstantElements({size}, "the positions along a dimension")))
    return failure();
  Ints shape(rank, 1);
  shape[at] = size;
  Ints values(size);
  std::iota(values.begin(), values.end(), 0);
  return n.constant(intValues(n.builder().getI64Type(), shape, values));
}

template <typename ReduceOp>
FailureOr<Value> reduce(NodeImporter &n, Value x, ArrayRef<int64_t> axes,
                        bool keepdims) {
  return n.infer<ReduceOp>(x, n.builder().getDenseI64ArrayAttr(axes),
                           n.builder().getBoolAttr(keepdims));
}

FailureOr<Value> concat(NodeImporter &n, ValueRange values, int64_t axis) {
  if (values.size() == 1)
    return values.front();
  return n.infer<g::ConcatOp>(values, n.builder().getI64IntegerAttr(axis));
}

/// The most negative (lowest) or most positive value of `elem`.
double extremeOf(Type elem, bool lowest) {
  if (isa<FloatType>(elem))
    return lowest ? -std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::infinity();
  auto it = cast<IntegerType>(elem);
  unsigned w = it.getWidth();
  if (it.isUnsigned() || w == 1)
    return lowest ? 0.0 : std::ldexp(1.0, w) - 1;
  return lowest ? -std::ldexp(1.0, w - 1) : std::ldexp(1.0, w - 1) - 1;
}

/// `v` with its dim `axis` moved to the end (or back, with `inverse`).
FailureOr<Value> moveAxisToEnd(NodeImporter &n, Value v, int64_t axis,
                               bool inverse = false) {
  int64_t rank = rankOf(v);
  if (axis == rank - 1)
    return v;
  Ints perm;
  if (!inverse) {
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis)
        perm.push_back(d);
    perm.push_back(axis);
  } else {
    for (int64_t d = 0; d < rank - 1; ++d) {
      if (d == axis)
        perm.push_back(rank - 1);
      perm.push_back(d);
    }
    if (axis == rank - 1)
      perm.push_back(rank - 1);
  }
  return n.transpose(v, perm);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// atan directly; asin x = atan(x / sqrt(1 - x^2)) (at |x| = 1 the quotient
/// is +-inf and atan gives +-pi/2); acos x = pi/2 - asin x.
template <int Kind> LogicalResult inverseTrig(NodeImporter &n) {
  Value x = n.input(0);
  Type elem = elementTypeOf(x);
  if (Kind == 0) {
    TESSERA_ASSIGN_OR_FAIL(v, n.build<g::AtanOp>(x.getType(), x));
    return n.setOutput(v);
  }
  TESSERA_ASSIGN_OR_FAIL(sq, n.infer<g::MulOp>(x, x));
  TESSERA_ASSIGN_OR_FAIL(rest, n.infer<g::SubOp>(n.scalar(elem, 1), sq));
  TESSERA_ASSIGN_OR_FAIL(root, n.build<g::SqrtOp>(rest.getType(), rest));
  TESSERA_ASSIGN_OR_FAIL(q, n.infer<g::DivOp>(x, root));
  TESSERA_ASSIGN_OR_FAIL(asin, n.build<g::AtanOp>(q.getType(), q));
  if (Kind == 1)
    return n.setOutput(asin);
  TESSERA_ASSIGN_OR_FAIL(acos, n.infer<g::SubOp>(n.scalar(elem, kPi / 2), asin));
  return n.setOutput(acos);
}

LogicalResult bitShift(NodeImporter &n) {
  std::string direction = n.stringAttr("direction", "");
  FailureOr<Value> v = failure();
  if (direction == "LEFT")
    v = n.infer<g::ShiftLeftOp>(n.input(0), n.input(1));
  else if (direction == "RIGHT")
    v = n.infer<g::ShiftRightOp>(n.input(0), n.input(1));
  else
    return n.error() << "direction must be LEFT or RIGHT, got '" << direction << "'";
  if (failed(v))
    return failure();
  return n.setOutput(*v);
}

//===----------------------------------------------------------------------===//
// Windows and filter banks: constants of a compile-time size
//===----------------------------------------------------------------------===//

/// Output element type from an `output_datatype` attribute (default FLOAT).
FailureOr<Type> outputDatatype(NodeImporter &n) {
  int64_t dt = n.intAttr("output_datatype", 1);
  Type elem = elementTypeFor(dt, n.context());
  if (!elem || !isa<FloatType>(elem))
    return n.error() << "output_datatype " << onnxTypeName(dt)
                     << " is not a floating-point type";
  return elem;
}

/// Hann, Hamming and Blackman windows: sum_j a_j cos(2 pi j k / N) with
/// N = size (periodic) or size - 1 (symmetric).
template <int Kind> LogicalResult window(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(size, n.constantScalar(0, "size"));
  TESSERA_ASSIGN_OR_FAIL(elem, outputDatatype(n));
  int64_t length = static_cast<int64_t>(size);
  if (length < 0 || length > (int64_t(1) << 24))
    return n.error() << "window size " << length << " is out of range";
  double denom = n.intAttr("periodic", 1) ? length : length - 1;
  SmallVector<double> a;
  if (Kind == 0)
    a = {0.5, -0.5};
  else if (Kind == 1)
    a = {25.0 / 46.0, -21.0 / 46.0};
  else
    a = {0.42, -0.5, 0.08};
  SmallVector<double> values;
  for (int64_t k = 0; k < length; ++k) {
    double v = 0;
    for (size_t j = 0; j < a.size(); ++j)
      v += a[j] * (denom == 0 ? 1.0 : std::cos(2 * kPi * j * k / denom));
    values.push_back(v);
  }
  return n.setOutput(n.constant(floatValues(elem, {length}, values)));
}

/// The triangular mel filter bank of the ONNX reference: bin edges equally
/// spaced in mel, truncated to DFT bins.
LogicalResult melWeightMatrix(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(melBins, n.constantScalar(0, "num_mel_bins"));
  TESSERA_ASSIGN_OR_FAIL(dftLength, n.constantScalar(1, "dft_length"));
  TESSERA_ASSIGN_OR_FAIL(sampleRate, n.constantScalar(2, "sample_rate"));
  TESSERA_ASSIGN_OR_FAIL(lowHz, n.constantScalar(3, "lower_edge_hertz"));
  TESSERA_ASSIGN_OR_FAIL(highHz, n.constantScalar(4, "upper_edge_hertz"));
  TESSERA_ASSIGN_OR_FAIL(elem, outputDatatype(n));
  int64_t mels = static_cast<int64_t>(melBins), dft = static_cast<int64_t>(dftLength);
  if (mels <= 0 || dft <= 0 || sampleRate <= 0 || mels > 65536 || dft > (1 << 24))
    return n.error() << "num_mel_bins, dft_length and sample_rate must be positive";
  int64_t spectrogramBins = dft / 2 + 1;
  auto toMel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  double lowMel = toMel(lowHz), step = (toMel(highHz) - lowMel) / (mels + 2);
  SmallVector<int64_t> edges;
  for (int64_t i = 0; i < mels + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (i * step + lowMel) / 2595) - 1);
    edges.push_back(static_cast<int64_t>(std::floor((dft + 1) * hz / sampleRate)));
  }
  SmallVector<double> w(spectrogramBins * mels, 0.0);
  auto at = [&](int64_t bin, int64_t mel) -> double * {
    return bin >= 0 && bin < spectrogramBins ? &w[bin * mels + mel] : nullptr;
  };
  for (int64_t i = 0; i < mels; ++i) {
    int64_t lo = edges[i], center = edges[i + 1], hi = edges[i + 2];
    if (center == lo) {
      if (double *p = at(center, i))
        *p = 1;
    } else {
      for (int64_t j = lo; j <= center; ++j)
        if (double *p = at(j, i))
          *p = double(j - lo) / double(center - lo);
    }
    for (int64_t j = center; j < hi; ++j)
      if (double *p = at(j, i))
        *p = double(hi - j) / double(hi - center);
  }
  return n.setOutput(n.constant(floatValues(elem, {spectrogramBins, mels}, w)));
}

//===----------------------------------------------------------------------===//
// Normalisation and linear algebra
//===----------------------------------------------------------------------===//

/// (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes` (ONNX's function).
LogicalResult meanVarianceNormalization(NodeImporter &n) {
  Value x = n.input(0);
  Type elem = elementTypeOf(x);
  Ints axes = n.intsAttr("axes").value_or(Ints{0, 2, 3});
  TESSERA_ASSIGN_OR_FAIL(normalized, n.normalizeAxes(axes, rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(mean, reduce<g::ReduceMeanOp>(n, x, normalized, true));
  TESSERA_ASSIGN_OR_FAIL(sq, n.infer<g::MulOp>(x, x));
  TESSERA_ASSIGN_OR_FAIL(meanSq, reduce<g::ReduceMeanOp>(n, sq, normalized, true));
  TESSERA_ASSIGN_OR_FAIL(sqMean, n.infer<g::MulOp>(mean, mean));
  TESSERA_ASSIGN_OR_FAIL(var, n.infer<g::SubOp>(meanSq, sqMean));
  TESSERA_ASSIGN_OR_FAIL(std, n.build<g::SqrtOp>(var.getType(), var));
  TESSERA_ASSIGN_OR_FAIL(den, n.infer<g::AddOp>(std, n.scalar(elem, 1e-9)));
  TESSERA_ASSIGN_OR_FAIL(centered, n.infer<g::SubOp>(x, mean));
  TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::DivOp>(centered, den));
  return n.setOutput(v);
}

/// Determinants of [..., m, m] by the Leibniz formula (m <= 4: 24 terms).
LogicalResult det(NodeImporter &n) {
  Value x = n.input(0);
  Ints shape = shapeOf(x);
  int64_t rank = shape.size();
  if (rank < 2 || shape[rank - 1] != shape[rank - 2])
    return n.error() << "input must be [..., M, M], got " << g::formatShape(shape);
  int64_t m = shape.back();
  if (m > 4)
    return n.unsupported("Det of matrices larger than 4x4 (" + std::to_string(m) +
                         "x" + std::to_string(m) + ")");
  Ints batch(shape.begin(), shape.end() - 2);
  // Element (i, j) as a [...] tensor.
  SmallVector<SmallVector<Value>> e(m, SmallVector<Value>(m));
  for (int64_t i = 0; i < m; ++i) {
    TESSERA_ASSIGN_OR_FAIL(row, n.sliceAxis(x, rank - 2, i, i + 1));
    for (int64_t j = 0; j < m; ++j) {
      TESSERA_ASSIGN_OR_FAIL(el, n.sliceAxis(row, rank - 1, j, j + 1));
      TESSERA_ASSIGN_OR_FAIL(flat, n.reshape(el, batch));
      e[i][j] = flat;
    }
  }
  SmallVector<int64_t> perm(m);
  std::iota(perm.begin(), perm.end(), 0);
  Value sum;
  do {
    int64_t inversions = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = i + 1; j < m; ++j)
        inversions += perm[i] > perm[j];
    Value term = e[0][perm[0]];
    for (int64_t i = 1; i < m; ++i) {
      TESSERA_ASSIGN_OR_FAIL(p, n.infer<g::MulOp>(term, e[i][perm[i]]));
      term = p;
    }
    if (!sum) {
      sum = term; // the identity permutation has no inversions
      continue;
    }
    TESSERA_ASSIGN_OR_FAIL(s, inversions % 2 ? n.infer<g::SubOp>(sum, term)
                                             : n.infer<g::AddOp>(sum, term));
    sum = s;
  } while (std::next_permutation(perm.begin(), perm.end()));
  return n.setOutput(sum);
}

//===----------------------------------------------------------------------===//
// Reordering
//===----------------------------------------------------------------------===//

/// y[t, b] = x[len[b] - 1 - t, b] for t < len[b], else x[t, b]: a gather
/// along the time axis with indices computed from sequence_lens.
LogicalResult reverseSequence(NodeImporter &n) {
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  if (rank < 2)
    return n.error() << "input must have rank >= 2";
  TESSERA_ASSIGN_OR_FAIL(batchAxis, n.normalizeAxis(n.intAttr("batch_axis", 1), rank,
                                                    "batch_axis"));
  TESSERA_ASSIGN_OR_FAIL(timeAxis, n.normalizeAxis(n.intAttr("time_axis", 0), rank,
                                                   "time_axis"));
  if (batchAxis == timeAxis || batchAxis > 1 || timeAxis > 1)
    return n.error() << "batch_axis and time_axis must be 0 and 1 in some order";
  Ints shape = shapeOf(x);
  if (shapeOf(n.input(1)) != Ints{shape[batchAxis]})
    return n.error() << "sequence_lens must have shape [" << shape[batchAxis] << "]";
  Type i64 = n.builder().getI64Type();
  TESSERA_ASSIGN_OR_FAIL(lens64, n.castTo(n.input(1), i64));
  Ints lensShape(rank, 1);
  lensShape[batchAxis] = shape[batchAxis];
  TESSERA_ASSIGN_OR_FAIL(lens, n.reshape(lens64, lensShape));
  TESSERA_ASSIGN_OR_FAIL(t, iotaAlong(n, shape[timeAxis], timeAxis, rank));
  TESSERA_ASSIGN_OR_FAIL(inside, n.infer<g::LessOp>(t, lens));
  TESSERA_ASSIGN_OR_FAIL(last, n.infer<g::SubOp>(lens, n.scalar(i64, 1)));
  TESSERA_ASSIGN_OR_FAIL(reversed, n.infer<g::SubOp>(last, t));
  TESSERA_ASSIGN_OR_FAIL(index, n.infer<g::SelectOp>(inside, reversed, t));
  TESSERA_ASSIGN_OR_FAIL(full, n.expand(index, shape));
  TESSERA_ASSIGN_OR_FAIL(
      v, n.infer<g::GatherElementsOp>(x, full, n.builder().getI64IntegerAttr(timeAxis)));
  return n.setOutput(v);
}

/// The k largest (or smallest) along `axis`, sorted, ties to the lower
/// index: k rounds of arg-max, each masking the winner out.
LogicalResult topK(NodeImporter &n) {
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", -1), rank));
  int64_t k;
  if (n.opset() < 10) {
    k = n.intAttr("k", -1);
  } else {
    TESSERA_ASSIGN_OR_FAIL(ks, n.constantInts(1, "K"));
    if (ks.size() != 1)
      return n.error() << "K must hold one value";
    k = ks[0];
  }
  Ints shape = shapeOf(x);
  if (k < 0 || k > shape[axis])
    return n.error() << "K = " << k << " is out of range for an axis of size "
                     << shape[axis];
  constexpr int64_t kMaxK = 256;
  if (k > kMaxK)
    return n.unsupported("TopK with K > " + std::to_string(kMaxK) + " (K = " +
                         std::to_string(k) + "; each of the K picks is a pass over the axis)");
  bool largest = n.intAttr("largest", 1);
  Type elem = elementTypeOf(x);
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(positions, iotaAlong(n, shape[axis], axis, rank));
  Value masked = n.scalar(elem, extremeOf(elem, largest));
  Value current = x;
  SmallVector<Value> values, indices;
  for (int64_t i = 0; i < k; ++i) {
    auto axisAttr = b.getI64IntegerAttr(axis);
    TESSERA_ASSIGN_OR_FAIL(
        best, largest ? n.infer<g::ArgMaxOp>(current, axisAttr, b.getBoolAttr(true),
                                             b.getBoolAttr(false))
                      : n.infer<g::ArgMinOp>(current, axisAttr, b.getBoolAttr(true),
                                             b.getBoolAttr(false)));
    TESSERA_ASSIGN_OR_FAIL(value, n.infer<g::GatherElementsOp>(x, best, axisAttr));
    values.push_back(value);
    indices.push_back(best);
    if (i + 1 == k)
      break;
    TESSERA_ASSIGN_OR_FAIL(taken, n.infer<g::EqualOp>(positions, best));
    TESSERA_ASSIGN_OR_FAIL(next, n.infer<g::SelectOp>(taken, masked, current));
    current = next;
  }
  Ints outShape = shape;
  outShape[axis] = k;
  if (k == 0) {
    Value empty = n.splat(elem, outShape, 0);
    return n.setOutputs({empty, n.splat(b.getI64Type(), outShape, 0)});
  }
  TESSERA_ASSIGN_OR_FAIL(v, concat(n, values, axis));
  TESSERA_ASSIGN_OR_FAIL(idx, concat(n, indices, axis));
  return n.setOutputs({v, idx});
}

//===----------------------------------------------------------------------===//
// Scatters
//===----------------------------------------------------------------------===//

} // namespace

/// ScatterND on computed inputs. data [D...], indices [N..., k], updates
/// [N..., D[k:]...]: each index row's flat position among D[:k] is compared
/// with every position (one-hot [count, M, 1]), the selected updates
/// [count, 1, R] are reduced over the rows and merged into data [M, R].
FailureOr<Value> scatterNDComputed(NodeImporter &n, Value data, Value indices,
                                   Value updates, StringRef reduction) {
  Ints ds = shapeOf(data), is = shapeOf(indices);
  if (is.empty() || is.back() < 1 || is.back() > static_cast<int64_t>(ds.size()))
    return n.error() << "indices shape " << g::formatShape(is)
                     << " does not fit data " << g::formatShape(ds);
  int64_t k = is.back();
  int64_t count = g::numElements(ArrayRef(is).drop_back());
  int64_t positions = g::numElements(ArrayRef(ds).take_front(k));
  int64_t rowSize = g::numElements(ArrayRef(ds).drop_front(k));
  Ints expectUpdates(is.begin(), is.end() - 1);
  expectUpdates.append(ds.begin() + k, ds.end());
  if (shapeOf(updates) != expectUpdates)
    return n.error() << "updates has shape " << g::formatShape(shapeOf(updates))
                     << "; indices " << g::formatShape(is) << " and data "
                     << g::formatShape(ds) << " need " << g::formatShape(expectUpdates);
  if (reduction != "none" && reduction != "add" && reduction != "mul" &&
      reduction != "max" && reduction != "min")
    return n.error() << "unknown reduction '" << reduction << "'";
  Type i64 = n.builder().getI64Type(), elem = elementTypeOf(data);
  TESSERA_ASSIGN_OR_FAIL(idx64, n.castTo(indices, i64));
  TESSERA_ASSIGN_OR_FAIL(rows, n.reshape(idx64, {count, k}));
  // Negative indices count from the end of their dim.
  Ints dims(ds.begin(), ds.begin() + k), strides(k, 1);
  for (int64_t j = k - 2; j >= 0; --j)
    strides[j] = strides[j + 1] * ds[j + 1];
  Value dimsC = n.constant(intValues(i64, {1, k}, dims));
  TESSERA_ASSIGN_OR_FAIL(negative, n.infer<g::LessOp>(rows, n.scalar(i64, 0)));
  TESSERA_ASSIGN_OR_FAIL(wrapped, n.infer<g::AddOp>(rows, dimsC));
  TESSERA_ASSIGN_OR_FAIL(fixed, n.infer<g::SelectOp>(negative, wrapped, rows));
  TESSERA_ASSIGN_OR_FAIL(
      scaled, n.infer<g::MulOp>(fixed, n.constant(intValues(i64, {1, k}, strides))));
  TESSERA_ASSIGN_OR_FAIL(flat, reduce<g::ReduceSumOp>(n, scaled, {1}, false));
  if (reduction == "add") {
    // An accumulating scatter (an embedding's gradient, index_add) is
    // graph.scatter_add into zeros, added to the data: one fused reduction,
    // where the one-hot form below materializes [count, positions, row]
    // selections (3e9 elements for 128 rows into a 30,522 x 768 table).
    TESSERA_ASSIGN_OR_FAIL(upd, n.reshape(updates, {count, rowSize}));
    TESSERA_ASSIGN_OR_FAIL(target, n.reshape(data, {positions, rowSize}));
    g::GraphEmitter e(n.builder(), n.loc());
    Value added = e.scatterAdd(upd, flat, 0, {positions, rowSize});
    if (e.failed() || !added)
      return n.error() << "could not build the accumulating scatter";
    TESSERA_ASSIGN_OR_FAIL(sum, n.infer<g::AddOp>(target, added));
    return n.reshape(sum, ds);
  }
  TESSERA_ASSIGN_OR_FAIL(column, n.reshape(flat, {count, 1, 1}));
  TESSERA_ASSIGN_OR_FAIL(every, iotaAlong(n, positions, 1, 3));
  TESSERA_ASSIGN_OR_FAIL(onehot, n.infer<g::EqualOp>(column, every));
  TESSERA_ASSIGN_OR_FAIL(upd, n.reshape(updates, {count, 1, rowSize}));
  TESSERA_ASSIGN_OR_FAIL(target, n.reshape(data, {positions, rowSize}));
  TESSERA_ASSIGN_OR_FAIL(hits, n.castTo(onehot, n.builder().getI32Type()));
  TESSERA_ASSIGN_OR_FAIL(hitCount, reduce<g::ReduceSumOp>(n, hits, {0}, false));
  TESSERA_ASSIGN_OR_FAIL(hit, n.infer<g::GreaterOp>(hitCount, n.scalar(n.builder().getI32Type(), 0)));
  auto gathered = [&](double identity) {
    return n.infer<g::SelectOp>(onehot, upd, n.scalar(elem, identity));
  };
  Value result;
  if (reduction == "none") {
    TESSERA_ASSIGN_OR_FAIL(sel, gathered(0));
    TESSERA_ASSIGN_OR_FAIL(sum, reduce<g::ReduceSumOp>(n, sel, {0}, false));
    TESSERA_ASSIGN_OR_FAIL(r, n.infer<g::SelectOp>(hit, sum, target));
    result = r;
  } else if (reduction == "mul") {
    TESSERA_ASSIGN_OR_FAIL(sel, gathered(1));
    TESSERA_ASSIGN_OR_FAIL(prod, reduce<g::ReduceProdOp>(n, sel, {0}, false));
    TESSERA_ASSIGN_OR_FAIL(r, n.infer<g::MulOp>(target, prod));
    result = r;
  } else {
    bool isMax = reduction == "max";
    TESSERA_ASSIGN_OR_FAIL(sel, gathered(extremeOf(elem, isMax)));
    TESSERA_ASSIGN_OR_FAIL(best, isMax ? reduce<g::ReduceMaxOp>(n, sel, {0}, false)
                                       : reduce<g::ReduceMinOp>(n, sel, {0}, false));
    TESSERA_ASSIGN_OR_FAIL(merged, isMax ? n.infer<g::MaxOp>(target, best)
                                         : n.infer<g::MinOp>(target, best));
    TESSERA_ASSIGN_OR_FAIL(r, n.infer<g::SelectOp>(hit, merged, target));
    result = r;
  }
  return n.reshape(result, ds);
}

namespace {

LogicalResult scatterND(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(v, scatterNDComputed(n, n.input(0), n.input(1), n.input(2),
                                              n.stringAttr("reduction", "none")));
  return n.setOutput(v);
}

/// ScatterElements (and the older Scatter) as a ScatterND whose index rows
/// are each update's own coordinates with the `axis` one replaced.
LogicalResult scatterElements(NodeImporter &n) {
  Value data = n.input(0), indices = n.input(1), updates = n.input(2);
  int64_t rank = rankOf(data);
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 0), rank));
  Ints is = shapeOf(indices), ds = shapeOf(data);
  if (static_cast<int64_t>(is.size()) != rank || shapeOf(updates) != is)
    return n.error() << "indices and updates must have one shape of the data's rank";
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && is[d] > ds[d])
      return n.error() << "indices dim " << d << " (" << is[d]
                       << ") exceeds the data's (" << ds[d] << ")";
  Type i64 = n.builder().getI64Type();
  TESSERA_ASSIGN_OR_FAIL(idx64, n.castTo(indices, i64));
  Ints column = is;
  column.push_back(1);
  SmallVector<Value> coords;
  for (int64_t d = 0; d < rank; ++d) {
    Value c = idx64;
    if (d != axis) {
      TESSERA_ASSIGN_OR_FAIL(along, iotaAlong(n, is[d], d, rank));
      TESSERA_ASSIGN_OR_FAIL(e, n.expand(along, is));
      c = e;
    }
    TESSERA_ASSIGN_OR_FAIL(r, n.reshape(c, column));
    coords.push_back(r);
  }
  TESSERA_ASSIGN_OR_FAIL(rows, concat(n, coords, rank));
  TESSERA_ASSIGN_OR_FAIL(v, scatterNDComputed(n, data, rows, updates,
                                              n.stringAttr("reduction", "none")));
  return n.setOutput(v);
}

/// Values to the flat positions `indices` names in a zero output (what
/// MaxPool's second output gives).
LogicalResult maxUnpool(NodeImporter &n) {
  Value x = n.input(0), indices = n.input(1);
  Ints xs = shapeOf(x);
  if (xs.size() < 3 || shapeOf(indices) != xs)
    return n.error() << "X and I must have one N x C x spatial... shape";
  size_t spatial = xs.size() - 2;
  // Indices address the shape the pooling saw (inferred from the window);
  // an output_shape beyond it pads at the end, as ONNX's reference does.
  Ints outShape;
  {
    std::optional<Ints> kernel = n.intsAttr("kernel_shape");
    if (!kernel || kernel->size() != spatial)
      return n.error() << "kernel_shape needs " << spatial << " entries";
    Ints strides = n.intsAttr("strides").value_or(Ints(spatial, 1));
    Ints pads = n.intsAttr("pads").value_or(Ints(2 * spatial, 0));
    if (strides.size() != spatial || pads.size() != 2 * spatial)
      return n.error() << "strides and pads need " << spatial << " and "
                       << 2 * spatial << " entries";
    outShape = {xs[0], xs[1]};
    for (size_t i = 0; i < spatial; ++i)
      outShape.push_back((xs[i + 2] - 1) * strides[i] - pads[i] - pads[i + spatial] +
                         (*kernel)[i]);
  }
  if (outShape.size() != xs.size() || outShape[0] != xs[0] || outShape[1] != xs[1])
    return n.error() << "output shape " << g::formatShape(outShape)
                     << " does not fit the input " << g::formatShape(xs);
  int64_t count = g::numElements(xs), total = g::numElements(outShape);
  Value zeros = n.splat(elementTypeOf(x), {total}, 0);
  TESSERA_ASSIGN_OR_FAIL(rows, n.reshape(indices, {count, 1}));
  TESSERA_ASSIGN_OR_FAIL(upd, n.reshape(x, {count}));
  TESSERA_ASSIGN_OR_FAIL(flat, scatterNDComputed(n, zeros, rows, upd, "none"));
  TESSERA_ASSIGN_OR_FAIL(v, n.reshape(flat, outShape));
  if (!n.hasInput(2))
    return n.setOutput(v);
  TESSERA_ASSIGN_OR_FAIL(given, n.constantInts(2, "output_shape"));
  if (given.size() != outShape.size())
    return n.error() << "output_shape has " << given.size() << " dims; expected "
                     << outShape.size();
  Ints low(given.size(), 0), high(given.size(), 0);
  for (size_t d = 0; d < given.size(); ++d) {
    if (given[d] < outShape[d])
      return n.error() << "output_shape " << g::formatShape(given)
                       << " is smaller than the unpooled shape "
                       << g::formatShape(outShape);
    high[d] = given[d] - outShape[d];
  }
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(
      padded, n.infer<g::PadOp>(v, b.getDenseI64ArrayAttr(low), b.getDenseI64ArrayAttr(high),
                                g::PadModeAttr::get(n.context(), g::PadMode::constant),
                                b.getF64FloatAttr(0)));
  return n.setOutput(padded);
}

//===----------------------------------------------------------------------===//
// Spectral
//===----------------------------------------------------------------------===//

/// A real [..., L] signal or its (re, im) pair times the DFT matrix of
/// length L with `bins` outputs: returns (re, im) of [..., bins].
FailureOr<std::pair<Value, Value>> dftLastAxis(NodeImporter &n, Value re, Value im,
                                               int64_t length, int64_t bins,
                                               bool inverse) {
  Type elem = elementTypeOf(re);
  if (failed(n.checkConstantElements({length, bins}, "the DFT matrix")))
    return failure();
  SmallVector<double> cosv(length * bins), sinv(length * bins);
  double sign = inverse ? 1 : -1, scale = inverse ? 1.0 / length : 1.0;
  for (int64_t t = 0; t < length; ++t)
    for (int64_t k = 0; k < bins; ++k) {
      double theta = 2 * kPi * double((t * k) % length) / length;
      cosv[t * bins + k] = scale * std::cos(theta);
      sinv[t * bins + k] = scale * sign * std::sin(theta);
    }
  Value c = n.constant(floatValues(elem, {length, bins}, cosv));
  Value s = n.constant(floatValues(elem, {length, bins}, sinv));
  // (re + i im)(cos + i sin) = (re cos - im sin) + i (re sin + im cos)
  TESSERA_ASSIGN_OR_FAIL(reC, n.infer<g::MatmulOp>(re, c));
  TESSERA_ASSIGN_OR_FAIL(reS, n.infer<g::MatmulOp>(re, s));
  if (!im)
    return std::make_pair(reC, reS);
  TESSERA_ASSIGN_OR_FAIL(imC, n.infer<g::MatmulOp>(im, c));
  TESSERA_ASSIGN_OR_FAIL(imS, n.infer<g::MatmulOp>(im, s));
  TESSERA_ASSIGN_OR_FAIL(outRe, n.infer<g::SubOp>(reC, imS));
  TESSERA_ASSIGN_OR_FAIL(outIm, n.infer<g::AddOp>(reS, imC));
  return std::make_pair(outRe, outIm);
}

/// Splits [..., 1|2] into re and im (null for a real signal) of [...].
FailureOr<std::pair<Value, Value>> splitComplex(NodeImporter &n, Value x) {
  Ints shape = shapeOf(x);
  int64_t rank = shape.size();
  if (rank < 2 || (shape.back() != 1 && shape.back() != 2))
    return n.error() << "input must end in a dim of 1 (real) or 2 (complex), got "
                     << g::formatShape(shape);
  Ints inner(shape.begin(), shape.end() - 1);
  TESSERA_ASSIGN_OR_FAIL(re, n.sliceAxis(x, rank - 1, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(reFlat, n.reshape(re, inner));
  if (shape.back() == 1)
    return std::make_pair(reFlat, Value());
  TESSERA_ASSIGN_OR_FAIL(im, n.sliceAxis(x, rank - 1, 1, 2));
  TESSERA_ASSIGN_OR_FAIL(imFlat, n.reshape(im, inner));
  return std::make_pair(reFlat, imFlat);
}

FailureOr<Value> joinComplex(NodeImporter &n, Value re, Value im) {
  Ints shape = shapeOf(re);
  shape.push_back(1);
  TESSERA_ASSIGN_OR_FAIL(r, n.reshape(re, shape));
  TESSERA_ASSIGN_OR_FAIL(i, n.reshape(im, shape));
  return concat(n, {r, i}, shape.size() - 1);
}

LogicalResult dft(NodeImporter &n) {
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  bool inverse = n.intAttr("inverse", 0), onesided = n.intAttr("onesided", 0);
  int64_t axisAttr = n.intAttr("axis", 1);
  if (n.opset() >= 20)
    return n.unsupported("DFT from opset 20 (axis as an input)");
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(axisAttr, rank - 1));
  if (axis == 0)
    return n.error() << "axis 0 is the batch dim; the signal axis must be 1 or later";
  if (inverse && onesided)
    return n.unsupported("DFT with both inverse and onesided");
  TESSERA_ASSIGN_OR_FAIL(parts, splitComplex(n, x));
  int64_t length = shapeOf(x)[axis];
  if (n.hasInput(1)) {
    TESSERA_ASSIGN_OR_FAIL(len, n.constantScalar(1, "dft_length"));
    length = static_cast<int64_t>(len);
  }
  if (length <= 0 || length > (1 << 16))
    return n.error() << "dft_length " << length << " is out of range";
  if (onesided && parts.second)
    return n.error() << "a onesided DFT takes a real signal";
  auto prepare = [&](Value part) -> FailureOr<Value> {
    if (!part)
      return part;
    TESSERA_ASSIGN_OR_FAIL(moved, moveAxisToEnd(n, part, axis));
    Ints shape = shapeOf(moved);
    int64_t have = shape.back();
    if (have > length)
      return n.sliceAxis(moved, shape.size() - 1, 0, length);
    if (have < length) {
      Ints low(shape.size(), 0), high(shape.size(), 0);
      high.back() = length - have;
      auto &b = n.builder();
      return n.infer<g::PadOp>(moved, b.getDenseI64ArrayAttr(low),
                               b.getDenseI64ArrayAttr(high),
                               g::PadModeAttr::get(n.context(), g::PadMode::constant),
                               b.getF64FloatAttr(0));
    }
    return moved;
  };
  TESSERA_ASSIGN_OR_FAIL(re, prepare(parts.first));
  TESSERA_ASSIGN_OR_FAIL(im, prepare(parts.second));
  int64_t bins = onesided ? length / 2 + 1 : length;
  TESSERA_ASSIGN_OR_FAIL(out, dftLastAxis(n, re, im, length, bins, inverse));
  TESSERA_ASSIGN_OR_FAIL(outRe, moveAxisToEnd(n, out.first, axis, /*inverse=*/true));
  TESSERA_ASSIGN_OR_FAIL(outIm, moveAxisToEnd(n, out.second, axis, /*inverse=*/true));
  TESSERA_ASSIGN_OR_FAIL(v, joinComplex(n, outRe, outIm));
  return n.setOutput(v);
}

/// Frames of frame_length every frame_step samples, times the window, then
/// a DFT per frame: [batch, frames, bins, 2].
LogicalResult stft(NodeImporter &n) {
  Value signal = n.input(0);
  Ints shape = shapeOf(signal);
  if (shape.size() != 3)
    return n.error() << "signal must be [batch, length, 1|2], got "
                     << g::formatShape(shape);
  TESSERA_ASSIGN_OR_FAIL(stepValue, n.constantScalar(1, "frame_step"));
  int64_t step = static_cast<int64_t>(stepValue), length = -1;
  if (n.hasInput(2))
    length = shapeOf(n.input(2))[0];
  if (n.hasInput(3)) {
    TESSERA_ASSIGN_OR_FAIL(l, n.constantScalar(3, "frame_length"));
    length = static_cast<int64_t>(l);
  }
  if (length <= 0)
    return n.error() << "give frame_length or window";
  if (step <= 0 || length > shape[1])
    return n.error() << "frame_step must be positive and frame_length ("
                     << length << ") at most the signal length (" << shape[1] << ")";
  if (n.hasInput(2) && shapeOf(n.input(2)) != Ints{length})
    return n.error() << "window must have frame_length (" << length << ") entries";
  bool onesided = n.intAttr("onesided", 1);
  TESSERA_ASSIGN_OR_FAIL(parts, splitComplex(n, signal));
  if (onesided && parts.second)
    return n.error() << "a onesided STFT takes a real signal";
  int64_t frames = (shape[1] - length) / step + 1;
  if (failed(n.checkConstantElements({frames, length}, "the frames' sample positions")))
    return failure();
  Ints index;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < length; ++t)
      index.push_back(f * step + t);
  Value idx = n.constant(intValues(n.builder().getI64Type(), {frames, length}, index));
  auto framed = [&](Value part) -> FailureOr<Value> {
    if (!part)
      return part;
    TESSERA_ASSIGN_OR_FAIL(
        f, n.infer<g::GatherOp>(part, idx, n.builder().getI64IntegerAttr(1)));
    if (!n.hasInput(2))
      return f;
    return n.infer<g::MulOp>(f, n.input(2));
  };
  TESSERA_ASSIGN_OR_FAIL(re, framed(parts.first));
  TESSERA_ASSIGN_OR_FAIL(im, framed(parts.second));
  int64_t bins = onesided ? length / 2 + 1 : length;
  TESSERA_ASSIGN_OR_FAIL(out, dftLastAxis(n, re, im, length, bins, false));
  TESSERA_ASSIGN_OR_FAIL(v, joinComplex(n, out.first, out.second));
  return n.setOutput(v);
}


//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

/// A per-axis parameter ([C]) reshaped to broadcast along `axis` of a
/// rank-`rank` tensor; scalars and [1] pass through.
FailureOr<Value> alongAxis(NodeImporter &n, Value param, int64_t axis, int64_t rank) {
  Ints ps = shapeOf(param);
  if (ps.empty() || (ps.size() == 1 && ps[0] == 1) || rank <= 1)
    return param;
  if (ps.size() != 1)
    return n.error() << "scale and zero point must be scalars or 1-D, got "
                     << g::formatShape(ps);
  TESSERA_ASSIGN_OR_FAIL(at, n.normalizeAxis(axis, rank));
  axis = at;
  Ints shape(rank - axis, 1);
  shape[0] = ps[0];
  return n.reshape(param, shape);
}

/// round-half-to-even(x) + zero point, saturated to and cast to `to`.
FailureOr<Value> saturateRound(NodeImporter &n, Value x, Value zeroPoint, Type to) {
  Type f = elementTypeOf(x);
  TESSERA_ASSIGN_OR_FAIL(r, n.build<g::RoundOp>(x.getType(), x));
  Value v = r;
  if (zeroPoint) {
    TESSERA_ASSIGN_OR_FAIL(zp, n.castTo(zeroPoint, f));
    TESSERA_ASSIGN_OR_FAIL(s, n.infer<g::AddOp>(v, zp));
    v = s;
  }
  TESSERA_ASSIGN_OR_FAIL(lo, n.infer<g::MaxOp>(v, n.scalar(f, extremeOf(to, true))));
  TESSERA_ASSIGN_OR_FAIL(hi, n.infer<g::MinOp>(lo, n.scalar(f, extremeOf(to, false))));
  return n.castTo(hi, to);
}

Type quantizedType(NodeImporter &n, size_t zeroPointInput) {
  return n.hasInput(zeroPointInput) ? elementTypeOf(n.input(zeroPointInput))
                                    : IntegerType::get(n.context(), 8, IntegerType::Unsigned);
}

LogicalResult quantizeLinear(NodeImporter &n) {
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  int64_t axis = n.intAttr("axis", 1);
  Type to = quantizedType(n, 2);
  Type f = elementTypeOf(n.input(1));
  TESSERA_ASSIGN_OR_FAIL(xf, n.castTo(x, f));
  TESSERA_ASSIGN_OR_FAIL(scale, alongAxis(n, n.input(1), axis, rank));
  Value zp;
  if (n.hasInput(2)) {
    TESSERA_ASSIGN_OR_FAIL(z, alongAxis(n, n.input(2), axis, rank));
    zp = z;
  }
  TESSERA_ASSIGN_OR_FAIL(q, n.infer<g::DivOp>(xf, scale));
  TESSERA_ASSIGN_OR_FAIL(v, saturateRound(n, q, zp, to));
  return n.setOutput(v);
}

LogicalResult dequantizeLinear(NodeImporter &n) {
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  int64_t axis = n.intAttr("axis", 1);
  Type f = elementTypeOf(n.input(1));
  TESSERA_ASSIGN_OR_FAIL(xf, n.castTo(x, f));
  Value v = xf;
  if (n.hasInput(2)) {
    TESSERA_ASSIGN_OR_FAIL(z, alongAxis(n, n.input(2), axis, rank));
    TESSERA_ASSIGN_OR_FAIL(zf, n.castTo(z, f));
    TESSERA_ASSIGN_OR_FAIL(d, n.infer<g::SubOp>(v, zf));
    v = d;
  }
  TESSERA_ASSIGN_OR_FAIL(scale, alongAxis(n, n.input(1), axis, rank));
  TESSERA_ASSIGN_OR_FAIL(y, n.infer<g::MulOp>(v, scale));
  return n.setOutput(y);
}

/// uint8 quantization with the scale and zero point that map
/// [min(x, 0), max(x, 0)] onto [0, 255].
LogicalResult dynamicQuantizeLinear(NodeImporter &n) {
  Value x = n.input(0);
  Type f = elementTypeOf(x);
  Type u8 = IntegerType::get(n.context(), 8, IntegerType::Unsigned);
  Ints all(rankOf(x));
  std::iota(all.begin(), all.end(), 0);
  TESSERA_ASSIGN_OR_FAIL(maxX, reduce<g::ReduceMaxOp>(n, x, all, false));
  TESSERA_ASSIGN_OR_FAIL(minX, reduce<g::ReduceMinOp>(n, x, all, false));
  TESSERA_ASSIGN_OR_FAIL(hi, n.infer<g::MaxOp>(maxX, n.scalar(f, 0)));
  TESSERA_ASSIGN_OR_FAIL(lo, n.infer<g::MinOp>(minX, n.scalar(f, 0)));
  TESSERA_ASSIGN_OR_FAIL(range, n.infer<g::SubOp>(hi, lo));
  TESSERA_ASSIGN_OR_FAIL(scale, n.infer<g::DivOp>(range, n.scalar(f, 255)));
  TESSERA_ASSIGN_OR_FAIL(loScaled, n.infer<g::DivOp>(lo, scale));
  TESSERA_ASSIGN_OR_FAIL(zpFloat, n.infer<g::SubOp>(n.scalar(f, 0), loScaled));
  TESSERA_ASSIGN_OR_FAIL(zp, saturateRound(n, zpFloat, Value(), u8));
  TESSERA_ASSIGN_OR_FAIL(q, n.infer<g::DivOp>(x, scale));
  TESSERA_ASSIGN_OR_FAIL(y, saturateRound(n, q, zp, u8));
  return n.setOutputs({y, scale, zp});
}

/// cast(v) - zero point in f64, where integer products and their sums are
/// exact (below 2^53).
FailureOr<Value> centered(NodeImporter &n, Value v, Value zeroPoint) {
  Type f64 = n.builder().getF64Type();
  TESSERA_ASSIGN_OR_FAIL(vf, n.castTo(v, f64));
  if (!zeroPoint)
    return vf;
  TESSERA_ASSIGN_OR_FAIL(zf, n.castTo(zeroPoint, f64));
  return n.infer<g::SubOp>(vf, zf);
}

/// A's zero point is per row ([M] for [..., M, K]); B's per column ([N]).
FailureOr<Value> integerMatmul(NodeImporter &n, Value a, Value aZero, Value b,
                               Value bZero) {
  if (aZero && shapeOf(aZero).size() == 1 && shapeOf(aZero)[0] != 1) {
    TESSERA_ASSIGN_OR_FAIL(r, n.reshape(aZero, {shapeOf(aZero)[0], 1}));
    aZero = r;
  }
  TESSERA_ASSIGN_OR_FAIL(ac, centered(n, a, aZero));
  TESSERA_ASSIGN_OR_FAIL(bc, centered(n, b, bZero));
  return n.infer<g::MatmulOp>(ac, bc);
}

/// W's zero point is per output channel ([M] for M x C/g x k...).
FailureOr<Value> integerConv(NodeImporter &n, Value x, Value xZero, Value w,
                             Value wZero, Value bias) {
  if (wZero) {
    TESSERA_ASSIGN_OR_FAIL(r, alongAxis(n, wZero, 0, rankOf(w)));
    wZero = r;
  }
  TESSERA_ASSIGN_OR_FAIL(xc, centered(n, x, xZero));
  TESSERA_ASSIGN_OR_FAIL(wc, centered(n, w, wZero));
  Value b;
  if (bias) {
    TESSERA_ASSIGN_OR_FAIL(bf, n.castTo(bias, n.builder().getF64Type()));
    b = bf;
  }
  return buildConv(n, xc, wc, b);
}

Value optionalInput(NodeImporter &n, size_t i) {
  return n.hasInput(i) ? n.input(i) : Value();
}

LogicalResult matMulInteger(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(acc, integerMatmul(n, n.input(0), optionalInput(n, 2),
                                            n.input(1), optionalInput(n, 3)));
  TESSERA_ASSIGN_OR_FAIL(v, n.castTo(acc, n.builder().getI32Type()));
  return n.setOutput(v);
}

LogicalResult convInteger(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(acc, integerConv(n, n.input(0), optionalInput(n, 2),
                                          n.input(1), optionalInput(n, 3), Value()));
  TESSERA_ASSIGN_OR_FAIL(v, n.castTo(acc, n.builder().getI32Type()));
  return n.setOutput(v);
}

/// The integer accumulator times (a_scale * b_scale / y_scale) in f64,
/// then rounded, offset by the output zero point and saturated.
FailureOr<Value> requantize(NodeImporter &n, Value acc, Value aScale, Value bScale,
                            Value yScale, Value yZero, int64_t channelAxis) {
  Type f64 = n.builder().getF64Type();
  int64_t rank = rankOf(acc);
  TESSERA_ASSIGN_OR_FAIL(as, n.castTo(aScale, f64));
  TESSERA_ASSIGN_OR_FAIL(bs64, n.castTo(bScale, f64));
  TESSERA_ASSIGN_OR_FAIL(bs, alongAxis(n, bs64, channelAxis, rank));
  TESSERA_ASSIGN_OR_FAIL(ys, n.castTo(yScale, f64));
  TESSERA_ASSIGN_OR_FAIL(ab, n.infer<g::MulOp>(as, bs));
  TESSERA_ASSIGN_OR_FAIL(m, n.infer<g::DivOp>(ab, ys));
  TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(acc, m));
  return saturateRound(n, scaled, yZero, elementTypeOf(yZero));
}

LogicalResult qLinearMatMul(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(acc, integerMatmul(n, n.input(0), n.input(2), n.input(3),
                                            n.input(5)));
  TESSERA_ASSIGN_OR_FAIL(v, requantize(n, acc, n.input(1), n.input(4), n.input(6),
                                       n.input(7), rankOf(acc) - 1));
  return n.setOutput(v);
}

LogicalResult qLinearConv(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(acc, integerConv(n, n.input(0), n.input(2), n.input(3),
                                          n.input(5), optionalInput(n, 8)));
  TESSERA_ASSIGN_OR_FAIL(v, requantize(n, acc, n.input(1), n.input(4), n.input(6),
                                       n.input(7), 1));
  return n.setOutput(v);
}

//===----------------------------------------------------------------------===//
// Training optimizers (ai.onnx.preview.training): one update step each
//===----------------------------------------------------------------------===//

/// Inputs R (learning rate), T (step), then n groups of `perTensor` tensors;
/// returns n, or an error if the count does not divide.
FailureOr<int64_t> optimizerGroups(NodeImporter &n, int64_t perTensor) {
  int64_t rest = static_cast<int64_t>(n.numInputs()) - 2;
  if (rest <= 0 || rest % perTensor)
    return n.error() << "expects R, T and " << perTensor
                     << " inputs per optimized tensor, got " << n.numInputs() << " inputs";
  return rest / perTensor;
}

/// norm_coefficient * X + G.
FailureOr<Value> regularized(NodeImporter &n, Value x, Value grad) {
  double norm = n.floatAttr("norm_coefficient", 0.0);
  if (norm == 0.0)
    return grad;
  TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(x, n.scalar(elementTypeOf(x), norm)));
  return n.infer<g::AddOp>(scaled, grad);
}

/// R and T as the element type of the tensors they update.
FailureOr<std::pair<Value, Value>> rateAndStep(NodeImporter &n, Type elem) {
  TESSERA_ASSIGN_OR_FAIL(r, n.castTo(n.input(0), elem));
  TESSERA_ASSIGN_OR_FAIL(t, n.castTo(n.input(1), elem));
  return std::make_pair(r, t);
}

LogicalResult adagrad(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(count, optimizerGroups(n, 3));
  Type elem = elementTypeOf(n.input(2));
  TESSERA_ASSIGN_OR_FAIL(rt, rateAndStep(n, elem));
  double decay = n.floatAttr("decay_factor", 0.0), eps = n.floatAttr("epsilon", 1e-6);
  // r = R / (1 + T * decay_factor)
  TESSERA_ASSIGN_OR_FAIL(td, n.infer<g::MulOp>(rt.second, n.scalar(elem, decay)));
  TESSERA_ASSIGN_OR_FAIL(den, n.infer<g::AddOp>(td, n.scalar(elem, 1)));
  TESSERA_ASSIGN_OR_FAIL(rate, n.infer<g::DivOp>(rt.first, den));
  SmallVector<Value> xs, hs;
  for (int64_t i = 0; i < count; ++i) {
    Value x = n.input(2 + i), grad = n.input(2 + count + i), h = n.input(2 + 2 * count + i);
    TESSERA_ASSIGN_OR_FAIL(gr, regularized(n, x, grad));
    TESSERA_ASSIGN_OR_FAIL(sq, n.infer<g::MulOp>(gr, gr));
    TESSERA_ASSIGN_OR_FAIL(hNew, n.infer<g::AddOp>(h, sq));
    TESSERA_ASSIGN_OR_FAIL(root, n.build<g::SqrtOp>(hNew.getType(), hNew));
    TESSERA_ASSIGN_OR_FAIL(adaptive, n.infer<g::AddOp>(root, n.scalar(elem, eps)));
    TESSERA_ASSIGN_OR_FAIL(step, n.infer<g::DivOp>(gr, adaptive));
    TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(rate, step));
    TESSERA_ASSIGN_OR_FAIL(xNew, n.infer<g::SubOp>(x, scaled));
    xs.push_back(xNew);
    hs.push_back(hNew);
  }
  xs.append(hs);
  return n.setOutputs(xs);
}

/// Standard: V' = alpha V + beta' G, X' = X - R V'. Nesterov: X' = X -
/// R (G + alpha V'). beta' is 1 on the first step (T = 0).
LogicalResult momentum(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(count, optimizerGroups(n, 3));
  Type elem = elementTypeOf(n.input(2));
  TESSERA_ASSIGN_OR_FAIL(rt, rateAndStep(n, elem));
  std::string mode = n.stringAttr("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    return n.error() << "mode must be 'standard' or 'nesterov', got '" << mode << "'";
  double alpha = n.floatAttr("alpha", 0.0), beta = n.floatAttr("beta", 1.0);
  TESSERA_ASSIGN_OR_FAIL(started, n.infer<g::GreaterOp>(rt.second, n.scalar(elem, 0)));
  TESSERA_ASSIGN_OR_FAIL(
      betaNow, n.infer<g::SelectOp>(started, n.scalar(elem, beta), n.scalar(elem, 1)));
  SmallVector<Value> xs, vs;
  for (int64_t i = 0; i < count; ++i) {
    Value x = n.input(2 + i), grad = n.input(2 + count + i), v = n.input(2 + 2 * count + i);
    TESSERA_ASSIGN_OR_FAIL(gr, regularized(n, x, grad));
    TESSERA_ASSIGN_OR_FAIL(kept, n.infer<g::MulOp>(v, n.scalar(elem, alpha)));
    TESSERA_ASSIGN_OR_FAIL(added, n.infer<g::MulOp>(gr, betaNow));
    TESSERA_ASSIGN_OR_FAIL(vNew, n.infer<g::AddOp>(kept, added));
    Value direction = vNew;
    if (mode == "nesterov") {
      TESSERA_ASSIGN_OR_FAIL(ahead, n.infer<g::MulOp>(vNew, n.scalar(elem, alpha)));
      TESSERA_ASSIGN_OR_FAIL(d, n.infer<g::AddOp>(gr, ahead));
      direction = d;
    }
    TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(rt.first, direction));
    TESSERA_ASSIGN_OR_FAIL(xNew, n.infer<g::SubOp>(x, scaled));
    xs.push_back(xNew);
    vs.push_back(vNew);
  }
  xs.append(vs);
  return n.setOutputs(xs);
}

/// V' = alpha V + (1 - alpha) G, H' = beta H + (1 - beta) G^2,
/// X' = (1 - norm_coefficient_post) (X - R' V' / (sqrt(H') + epsilon)) with
/// R' = R sqrt(1 - beta^T) / (1 - alpha^T) after the first step.
LogicalResult adam(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(count, optimizerGroups(n, 4));
  Type elem = elementTypeOf(n.input(2));
  TESSERA_ASSIGN_OR_FAIL(rt, rateAndStep(n, elem));
  double alpha = n.floatAttr("alpha", 0.9), beta = n.floatAttr("beta", 0.999),
         eps = n.floatAttr("epsilon", 1e-6),
         post = n.floatAttr("norm_coefficient_post", 0.0);
  Value t = rt.second, one = n.scalar(elem, 1);
  TESSERA_ASSIGN_OR_FAIL(alphaT, n.infer<g::PowOp>(n.scalar(elem, alpha), t));
  TESSERA_ASSIGN_OR_FAIL(betaT, n.infer<g::PowOp>(n.scalar(elem, beta), t));
  TESSERA_ASSIGN_OR_FAIL(betaRest, n.infer<g::SubOp>(one, betaT));
  TESSERA_ASSIGN_OR_FAIL(betaRoot, n.build<g::SqrtOp>(betaRest.getType(), betaRest));
  TESSERA_ASSIGN_OR_FAIL(alphaRest, n.infer<g::SubOp>(one, alphaT));
  TESSERA_ASSIGN_OR_FAIL(corrected, n.infer<g::MulOp>(rt.first, betaRoot));
  TESSERA_ASSIGN_OR_FAIL(correctedRate, n.infer<g::DivOp>(corrected, alphaRest));
  TESSERA_ASSIGN_OR_FAIL(started, n.infer<g::GreaterOp>(t, n.scalar(elem, 0)));
  TESSERA_ASSIGN_OR_FAIL(rate, n.infer<g::SelectOp>(started, correctedRate, rt.first));
  SmallVector<Value> xs, vs, hs;
  for (int64_t i = 0; i < count; ++i) {
    Value x = n.input(2 + i), grad = n.input(2 + count + i),
          v = n.input(2 + 2 * count + i), h = n.input(2 + 3 * count + i);
    TESSERA_ASSIGN_OR_FAIL(gr, regularized(n, x, grad));
    TESSERA_ASSIGN_OR_FAIL(vKept, n.infer<g::MulOp>(v, n.scalar(elem, alpha)));
    TESSERA_ASSIGN_OR_FAIL(vAdded, n.infer<g::MulOp>(gr, n.scalar(elem, 1 - alpha)));
    TESSERA_ASSIGN_OR_FAIL(vNew, n.infer<g::AddOp>(vKept, vAdded));
    TESSERA_ASSIGN_OR_FAIL(sq, n.infer<g::MulOp>(gr, gr));
    TESSERA_ASSIGN_OR_FAIL(hKept, n.infer<g::MulOp>(h, n.scalar(elem, beta)));
    TESSERA_ASSIGN_OR_FAIL(hAdded, n.infer<g::MulOp>(sq, n.scalar(elem, 1 - beta)));
    TESSERA_ASSIGN_OR_FAIL(hNew, n.infer<g::AddOp>(hKept, hAdded));
    TESSERA_ASSIGN_OR_FAIL(root, n.build<g::SqrtOp>(hNew.getType(), hNew));
    TESSERA_ASSIGN_OR_FAIL(den, n.infer<g::AddOp>(root, n.scalar(elem, eps)));
    TESSERA_ASSIGN_OR_FAIL(step, n.infer<g::DivOp>(vNew, den));
    TESSERA_ASSIGN_OR_FAIL(scaled, n.infer<g::MulOp>(rate, step));
    TESSERA_ASSIGN_OR_FAIL(xStep, n.infer<g::SubOp>(x, scaled));
    TESSERA_ASSIGN_OR_FAIL(xNew, n.infer<g::MulOp>(xStep, n.scalar(elem, 1 - post)));
    xs.push_back(xNew);
    vs.push_back(vNew);
    hs.push_back(hNew);
  }
  xs.append(vs);
  xs.append(hs);
  return n.setOutputs(xs);
}

//===----------------------------------------------------------------------===//
// Resize by separable interpolation matrices
//===----------------------------------------------------------------------===//

} // namespace

/// One axis of ONNX's reference Resize: the [out, in] weights of each
/// output position, and whether the position lies outside a crop (then it
/// takes the extrapolation value).
struct AxisWeights {
  SmallVector<double> w;
  SmallVector<bool> outside;
};

static AxisWeights axisWeights(const ResizeAxisSpec &a) {
  AxisWeights r;
  int64_t in = a.in, out = a.out;
  r.w.assign(out * in, 0.0);
  r.outside.assign(out, false);
  double outWidth = a.scale * in;
  for (int64_t x = 0; x < out; ++x) {
    double src;
    const std::string &t = a.transform;
    if (t == "align_corners")
      src = outWidth == 1 ? 0.0 : x * double(in - 1) / (outWidth - 1);
    else if (t == "asymmetric")
      src = x / a.scale;
    else if (t == "tf_crop_and_resize") {
      src = outWidth == 1 ? (a.roiEnd - a.roiStart) * (in - 1) / 2
                          : x * (a.roiEnd - a.roiStart) * (in - 1) / (outWidth - 1);
      src += a.roiStart * (in - 1);
      if (src < 0 || src > in - 1) {
        r.outside[x] = true;
        continue;
      }
    } else if (t == "pytorch_half_pixel")
      src = outWidth == 1 ? -0.5 : (x + 0.5) / a.scale - 0.5;
    else if (t == "tf_half_pixel_for_nn")
      src = (x + 0.5) / a.scale;
    else if (t == "half_pixel_symmetric") {
      double adjustment = out / outWidth;
      double center = in / 2.0, offset = center * (1 - adjustment);
      src = offset + (x + 0.5) / a.scale - 0.5;
    } else // half_pixel
      src = (x + 0.5) / a.scale - 0.5;
    double base = std::floor(src);
    bool whole = src == base;
    double ratio = whole ? 1.0 : src - base;
    // Neighbours and their coefficients, as the reference picks them: the
    // n nearest positions (ties to the left), clamped to the edge.
    SmallVector<double> coeffs;
    int64_t first;
    if (a.mode == "cubic") {
      double A = a.cubicA, r1 = ratio + 1, r2 = 1 - ratio, r3 = 2 - ratio;
      coeffs = {((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A,
                ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
                ((A + 2) * r2 - (A + 3)) * r2 * r2 + 1,
                ((A * r3 - 5 * A) * r3 + 8 * A) * r3 - 4 * A};
      first = static_cast<int64_t>(base) - (whole ? 2 : 1);
    } else if (a.mode == "linear") {
      coeffs = {1 - ratio, ratio};
      first = static_cast<int64_t>(base) - (whole ? 1 : 0);
    } else { // nearest
      bool right;
      if (whole)
        right = true;
      else if (a.nearest == "round_prefer_ceil")
        right = ratio >= 0.5;
      else if (a.nearest == "floor")
        right = false;
      else if (a.nearest == "ceil")
        right = true;
      else // round_prefer_floor
        right = ratio > 0.5;
      coeffs = {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
      first = static_cast<int64_t>(base) - (whole ? 1 : 0);
    }
    if (a.excludeOutside) {
      double sum = 0;
      for (size_t i = 0; i < coeffs.size(); ++i) {
        int64_t idx = first + static_cast<int64_t>(i);
        if (idx < 0 || idx >= in)
          coeffs[i] = 0;
        sum += coeffs[i];
      }
      if (sum != 0)
        for (double &c : coeffs)
          c /= sum;
    }
    for (size_t i = 0; i < coeffs.size(); ++i) {
      int64_t idx = std::clamp<int64_t>(first + static_cast<int64_t>(i), 0, in - 1);
      r.w[x * in + idx] += coeffs[i];
    }
  }
  return r;
}

FailureOr<Value> resizeSeparable(NodeImporter &n, Value x,
                                 ArrayRef<ResizeAxisSpec> axes,
                                 double extrapolation) {
  Type elem = elementTypeOf(x);
  if (!isa<FloatType>(elem))
    return n.unsupported("Resize of integer tensors by cubic, cropping or "
                         "tf_half_pixel_for_nn interpolation");
  int64_t rank = rankOf(x);
  Value v = x, outsideAny;
  for (int64_t d = 0; d < rank; ++d) {
    const ResizeAxisSpec &a = axes[d];
    if (failed(n.checkConstantElements({a.out, a.in}, "the interpolation weights")))
      return failure();
    AxisWeights aw = axisWeights(a);
    bool identity = a.in == a.out && !llvm::is_contained(aw.outside, true);
    for (int64_t i = 0; identity && i < a.out; ++i)
      for (int64_t j = 0; j < a.in; ++j)
        identity &= aw.w[i * a.in + j] == (i == j ? 1.0 : 0.0);
    if (identity)
      continue;
    // [..., in] x [in, out], with the axis moved last and back.
    SmallVector<double> wt(a.in * a.out);
    for (int64_t i = 0; i < a.out; ++i)
      for (int64_t j = 0; j < a.in; ++j)
        wt[j * a.out + i] = aw.w[i * a.in + j];
    TESSERA_ASSIGN_OR_FAIL(moved, moveAxisToEnd(n, v, d));
    TESSERA_ASSIGN_OR_FAIL(
        mixed, n.infer<g::MatmulOp>(moved, n.constant(floatValues(elem, {a.in, a.out}, wt))));
    TESSERA_ASSIGN_OR_FAIL(back, moveAxisToEnd(n, mixed, d, /*inverse=*/true));
    v = back;
    if (llvm::is_contained(aw.outside, true)) {
      Ints shape(rank, 1);
      shape[d] = a.out;
      SmallVector<int64_t> flags(aw.outside.begin(), aw.outside.end());
      Value mask = n.constant(intValues(n.builder().getI1Type(), shape, flags));
      if (!outsideAny) {
        outsideAny = mask;
      } else {
        TESSERA_ASSIGN_OR_FAIL(o, n.infer<g::OrOp>(outsideAny, mask));
        outsideAny = o;
      }
    }
  }
  if (outsideAny) {
    TESSERA_ASSIGN_OR_FAIL(
        e, n.infer<g::SelectOp>(outsideAny, n.scalar(elem, extrapolation), v));
    v = e;
  }
  return v;
}

namespace {

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

/// N-gram counts of integer token sequences: for each n-gram of the pool
/// and each skip distance, compare shifted slices of X with its tokens,
/// `and` them, and count the matching start positions.
LogicalResult tfIdfVectorizer(NodeImporter &n) {
  Value x = n.input(0);
  Ints xs = shapeOf(x);
  if (xs.empty() || xs.size() > 2)
    return n.error() << "X must be [C] or [N, C], got " << g::formatShape(xs);
  if (n.hasAttr("pool_strings"))
    return n.unsupported("TfIdfVectorizer over strings (pool_strings)");
  Type elem = elementTypeOf(x);
  if (!isa<IntegerType>(elem))
    return n.error() << "X must hold integer tokens";
  auto pool = n.intsAttr("pool_int64s").value_or(Ints{});
  Ints counts = n.intsAttr("ngram_counts").value_or(Ints{});
  Ints indexes = n.intsAttr("ngram_indexes").value_or(Ints{});
  std::optional<SmallVector<double>> weights = n.floatsAttr("weights");
  int64_t minN = n.intAttr("min_gram_length", 1), maxN = n.intAttr("max_gram_length", 1),
          maxSkip = n.intAttr("max_skip_count", 0);
  std::string mode = n.stringAttr("mode", "TF");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    return n.error() << "mode must be TF, IDF or TFIDF, got '" << mode << "'";
  if (minN < 1 || maxN < minN || maxSkip < 0 ||
      static_cast<int64_t>(counts.size()) < maxN)
    return n.error() << "needs 1 <= min_gram_length <= max_gram_length <= "
                        "the number of ngram_counts levels";
  // The pool: level l (n = l + 1) holds n-grams from counts[l] up to the
  // next level's start.
  SmallVector<Ints> grams;
  for (size_t level = 0; level < counts.size(); ++level) {
    int64_t begin = counts[level];
    int64_t end = level + 1 < counts.size() ? counts[level + 1] : pool.size();
    int64_t len = level + 1;
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || begin > end ||
        (end - begin) % len)
      return n.error() << "ngram_counts do not split pool_int64s into n-grams";
    for (int64_t at = begin; at < end; at += len)
      grams.push_back(Ints(pool.begin() + at, pool.begin() + at + len));
  }
  if (indexes.size() != grams.size() || (weights && weights->size() != grams.size()))
    return n.error() << "ngram_indexes (and weights) need one entry per n-gram ("
                     << grams.size() << ")";
  int64_t width = 0;
  for (int64_t i : indexes) {
    if (i < 0)
      return n.error() << "ngram_indexes must be non-negative";
    width = std::max(width, i + 1);
  }
  int64_t rows = xs.size() == 2 ? xs[0] : 1, length = xs.back();
  TESSERA_ASSIGN_OR_FAIL(x2, n.reshape(x, {rows, length}));
  Type f32 = n.builder().getF32Type();
  SmallVector<Value> columns(width);
  for (auto [k, gram] : llvm::enumerate(grams)) {
    int64_t len = gram.size();
    if (len < minN || len > maxN)
      continue;
    Value total;
    for (int64_t skip = 0; skip <= (len == 1 ? 0 : maxSkip); ++skip) {
      int64_t span = (len - 1) * (skip + 1), starts = length - span;
      if (starts <= 0)
        break;
      Value match;
      for (int64_t j = 0; j < len; ++j) {
        int64_t offset = j * (skip + 1);
        TESSERA_ASSIGN_OR_FAIL(tokens, n.sliceAxis(x2, 1, offset, offset + starts));
        TESSERA_ASSIGN_OR_FAIL(eq, n.infer<g::EqualOp>(tokens, n.scalar(elem, gram[j])));
        if (!match) {
          match = eq;
          continue;
        }
        TESSERA_ASSIGN_OR_FAIL(both, n.infer<g::AndOp>(match, eq));
        match = both;
      }
      TESSERA_ASSIGN_OR_FAIL(asFloat, n.castTo(match, f32));
      TESSERA_ASSIGN_OR_FAIL(c, reduce<g::ReduceSumOp>(n, asFloat, {1}, true));
      if (!total) {
        total = c;
        continue;
      }
      TESSERA_ASSIGN_OR_FAIL(sum, n.infer<g::AddOp>(total, c));
      total = sum;
    }
    if (!total)
      continue;
    double weight = weights ? (*weights)[k] : 1.0;
    if (mode == "IDF") {
      TESSERA_ASSIGN_OR_FAIL(seen, n.infer<g::GreaterOp>(total, n.scalar(f32, 0)));
      TESSERA_ASSIGN_OR_FAIL(
          w, n.infer<g::SelectOp>(seen, n.scalar(f32, weight), n.scalar(f32, 0)));
      total = w;
    } else if (mode == "TFIDF" && weight != 1.0) {
      TESSERA_ASSIGN_OR_FAIL(w, n.infer<g::MulOp>(total, n.scalar(f32, weight)));
      total = w;
    }
    Value &column = columns[indexes[k]];
    if (!column) {
      column = total;
    } else {
      TESSERA_ASSIGN_OR_FAIL(sum, n.infer<g::AddOp>(column, total));
      column = sum;
    }
  }
  for (Value &c : columns)
    if (!c)
      c = n.splat(f32, {rows, 1}, 0);
  TESSERA_ASSIGN_OR_FAIL(y, concat(n, columns, 1));
  if (xs.size() == 1) {
    TESSERA_ASSIGN_OR_FAIL(flat, n.reshape(y, {width}));
    return n.setOutput(flat);
  }
  return n.setOutput(y);
}

//===----------------------------------------------------------------------===//
// Sequences: lists of tensors known at compile time
//===----------------------------------------------------------------------===//

/// A position into a sequence of `size` (negative counts from the end;
/// `size` itself is allowed where inserting at the end).
FailureOr<int64_t> sequencePosition(NodeImporter &n, size_t input, int64_t size,
                                    bool allowEnd, int64_t dflt) {
  if (!n.hasInput(input))
    return dflt;
  TESSERA_ASSIGN_OR_FAIL(p, n.constantScalar(input, "position"));
  int64_t pos = static_cast<int64_t>(p);
  if (pos < 0)
    pos += size;
  if (pos < 0 || pos > size || (pos == size && !allowEnd))
    return n.error() << "position " << static_cast<int64_t>(p)
                     << " is out of range for a sequence of " << size << " tensors";
  return pos;
}

LogicalResult sequenceEmpty(NodeImporter &n) { return n.setSequenceOutput({}); }

LogicalResult sequenceConstruct(NodeImporter &n) {
  SmallVector<Value> values;
  for (size_t i = 0; i < n.numInputs(); ++i)
    values.push_back(n.input(i));
  return n.setSequenceOutput(values);
}

LogicalResult sequenceInsert(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(seq, n.sequenceInput(0));
  TESSERA_ASSIGN_OR_FAIL(pos, sequencePosition(n, 2, seq.size(), true, seq.size()));
  seq.insert(seq.begin() + pos, n.input(1));
  return n.setSequenceOutput(seq);
}

LogicalResult sequenceErase(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(seq, n.sequenceInput(0));
  if (seq.empty())
    return n.error() << "cannot erase from an empty sequence";
  TESSERA_ASSIGN_OR_FAIL(pos, sequencePosition(n, 1, seq.size(), false, seq.size() - 1));
  seq.erase(seq.begin() + pos);
  return n.setSequenceOutput(seq);
}

LogicalResult sequenceAt(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(seq, n.sequenceInput(0));
  TESSERA_ASSIGN_OR_FAIL(pos, sequencePosition(n, 1, seq.size(), false, 0));
  return n.setOutput(seq[pos]);
}

LogicalResult sequenceLength(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(seq, n.sequenceInput(0));
  return n.setOutput(n.scalar(n.builder().getI64Type(), seq.size()));
}

LogicalResult concatFromSequence(NodeImporter &n) {
  TESSERA_ASSIGN_OR_FAIL(seq, n.sequenceInput(0));
  if (seq.empty())
    return n.error() << "cannot concatenate an empty sequence";
  bool newAxis = n.intAttr("new_axis", 0);
  int64_t rank = rankOf(seq.front()) + (newAxis ? 1 : 0);
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 0), rank));
  SmallVector<Value> parts;
  for (Value v : seq) {
    if (!newAxis) {
      parts.push_back(v);
      continue;
    }
    Ints shape = shapeOf(v);
    shape.insert(shape.begin() + axis, 1);
    TESSERA_ASSIGN_OR_FAIL(r, n.reshape(v, shape));
    parts.push_back(r);
  }
  TESSERA_ASSIGN_OR_FAIL(v, concat(n, parts, axis));
  return n.setOutput(v);
}

LogicalResult splitToSequence(NodeImporter &n) {
  Value x = n.input(0);
  Ints xs = shapeOf(x);
  TESSERA_ASSIGN_OR_FAIL(axis, n.normalizeAxis(n.intAttr("axis", 0), xs.size()));
  int64_t size = xs[axis];
  Ints sizes;
  bool squeeze = false;
  if (!n.hasInput(1)) {
    sizes.assign(size, 1);
    squeeze = !n.intAttr("keepdims", 1);
  } else {
    TESSERA_ASSIGN_OR_FAIL(split, n.constantInts(1, "split"));
    if (shapeOf(n.input(1)).empty()) {
      if (split.size() != 1 || split[0] <= 0)
        return n.error() << "a scalar split must be positive";
      for (int64_t at = 0; at < size; at += split[0])
        sizes.push_back(std::min(split[0], size - at));
    } else {
      sizes = split;
      int64_t total = 0;
      for (int64_t s : sizes)
        total += s;
      if (total != size || llvm::any_of(sizes, [](int64_t s) { return s < 0; }))
        return n.error() << "split sizes sum to " << total << ", not the axis size "
                         << size;
    }
  }
  SmallVector<Value> parts;
  int64_t at = 0;
  for (int64_t s : sizes) {
    TESSERA_ASSIGN_OR_FAIL(part, n.sliceAxis(x, axis, at, at + s));
    at += s;
    if (squeeze) {
      Ints shape = shapeOf(part);
      shape.erase(shape.begin() + axis);
      TESSERA_ASSIGN_OR_FAIL(r, n.reshape(part, shape));
      part = r;
    }
    parts.push_back(part);
  }
  return n.setSequenceOutput(parts);
}

const OpConverter kExtraConverters[] = {
    {"SequenceEmpty", 11, sequenceEmpty},
    {"SequenceConstruct", 11, sequenceConstruct},
    {"SequenceInsert", 11, sequenceInsert},
    {"SequenceErase", 11, sequenceErase},
    {"SequenceAt", 11, sequenceAt},
    {"SequenceLength", 11, sequenceLength},
    {"ConcatFromSequence", 11, concatFromSequence},
    {"SplitToSequence", 11, splitToSequence},
    {"TfIdfVectorizer", 9, tfIdfVectorizer},
    {"ai.onnx.preview.training::Adagrad", 1, adagrad},
    {"ai.onnx.preview.training::Momentum", 1, momentum},
    {"ai.onnx.preview.training::Adam", 1, adam},
    {"QuantizeLinear", 10, quantizeLinear},
    {"DequantizeLinear", 10, dequantizeLinear},
    {"DynamicQuantizeLinear", 11, dynamicQuantizeLinear},
    {"MatMulInteger", 10, matMulInteger},
    {"ConvInteger", 10, convInteger},
    {"QLinearMatMul", 10, qLinearMatMul},
    {"QLinearConv", 10, qLinearConv},
    {"Atan", 7, inverseTrig<0>},
    {"Asin", 7, inverseTrig<1>},
    {"Acos", 7, inverseTrig<2>},
    {"BitShift", 11, bitShift},
    {"HannWindow", 17, window<0>},
    {"HammingWindow", 17, window<1>},
    {"BlackmanWindow", 17, window<2>},
    {"MelWeightMatrix", 17, melWeightMatrix},
    {"MeanVarianceNormalization", 9, meanVarianceNormalization},
    {"Det", 11, det},
    {"ReverseSequence", 10, reverseSequence},
    {"TopK", 1, topK},
    {"ScatterElements", 11, scatterElements},
    {"Scatter", 9, scatterElements},
    {"MaxUnpool", 9, maxUnpool},
    {"DFT", 17, dft},
    {"STFT", 17, stft},
};

} // namespace

ArrayRef<OpConverter> extraConverters() { return kExtraConverters; }

} // namespace tessera::onnx_importer
