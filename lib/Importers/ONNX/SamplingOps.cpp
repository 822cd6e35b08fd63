//===- SamplingOps.cpp - GridSample and RoiAlign from graph ops -------------===//
//
// GridSample and RoiAlign read the input at positions computed at run time
// (from the grid, from the regions of interest), which no graph op does by
// itself. Both are decomposed here into elementwise arithmetic on sample
// coordinates plus a single gather, following ONNX's reference
// implementations (onnx/reference/ops/op_grid_sample.py, op_roi_align.py)
// step by step:
//
//  1. The sample positions are float tensors computed with elementwise ops
//     (GridSample: denormalisation, nearest's rounding half to even,
//     border/reflection padding of out-of-bound samples; RoiAlign: the
//     regular grid of samples in each bin of each region).
//  2. Interpolation is separable: along each axis a sample reads a few taps
//     (1 for nearest, 2 for bilinear, 4 for bicubic), each an integer pixel
//     position with a weight. The y and x taps are combined by broadcasting
//     into the K = Ky x Kx pixels of every sample: a flat index into the
//     flattened image and the product of the two weights.
//  3. All K pixels of all samples are read with one gather
//     (graph.gather_elements on X as [N, C, H * W] for GridSample,
//     graph.gather of rows of X as [N * H * W, C] for RoiAlign, whose
//     regions pick their image by batch index), multiplied by their weights
//     and reduced over the pixels (and RoiAlign's samples) with one
//     reduce_sum (or reduce_max).
//
// Indices are clamped into the image before the gather, so it never reads
// out of bounds. A pixel that ONNX reads as 0 (GridSample's zeros padding)
// indexes an extra zero appended to the flattened image; a sample that
// RoiAlign skips (more than a pixel outside the image) gets weight 0.
//
// Shapes are static, so the number of taps is too, except for RoiAlign with
// sampling_ratio 0, where the samples per bin depend on each region's size:
// there the regions must be constants, every region samples the largest
// count and the samples it does not have are masked off.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
namespace g = tessera::graph;

namespace tessera::onnx_importer {
namespace {

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

/// offset, offset + 1, ..., offset + size - 1 (float) along dim `at` of a
/// rank-`rank` shape of 1s.
FailureOr<Value> iotaAlong(NodeImporter &n, Type elem, int64_t size, int64_t at,
                           int64_t rank, double offset = 0) {
  if (failed(n.checkConstantElements({size}, "the positions along a dimension")))
    return failure();
  Ints shape(rank, 1);
  shape[at] = size;
  SmallVector<double> values;
  for (int64_t i = 0; i < size; ++i)
    values.push_back(offset + i);
  return n.constant(floatValues(elem, shape, values));
}

FailureOr<Value> concat(NodeImporter &n, ValueRange values, int64_t axis) {
  if (values.size() == 1)
    return values.front();
  return n.infer<g::ConcatOp>(values, n.builder().getI64IntegerAttr(axis));
}

FailureOr<Value> clamp(NodeImporter &n, Value x, std::optional<double> lo,
                       std::optional<double> hi) {
  auto &b = n.builder();
  auto attr = [&](std::optional<double> v) {
    return v ? b.getF64FloatAttr(*v) : FloatAttr();
  };
  return n.build<g::ClampOp>(x.getType(), x, attr(lo), attr(hi));
}

/// `x` (float tensor) plus, times, minus a compile-time scalar.
FailureOr<Value> addScalar(NodeImporter &n, Value x, double v) {
  if (v == 0)
    return x;
  return n.infer<g::AddOp>(x, n.scalar(elementTypeOf(x), v));
}
FailureOr<Value> mulScalar(NodeImporter &n, Value x, double v) {
  if (v == 1)
    return x;
  return n.infer<g::MulOp>(x, n.scalar(elementTypeOf(x), v));
}
/// `v - x`.
FailureOr<Value> scalarSub(NodeImporter &n, double v, Value x) {
  return n.infer<g::SubOp>(n.scalar(elementTypeOf(x), v), x);
}

/// The float type samples are computed in: f64 if the input or the
/// coordinates are f64, else f32. Narrower floats and integer pixels go
/// through f32 (the reference computes positions and weights in Python
/// floats or f32 and casts the result back).
Type computeType(Type data, Type coords, MLIRContext *context) {
  if (data.isF64() || coords.isF64())
    return Float64Type::get(context);
  return Float32Type::get(context);
}

/// Reflects float `x` between `lo` and `hi` until it lies within them, as
/// ONNX's reference _gs_reflect: d is the distance beyond the crossed bound,
/// after `flips = floor(d / range)` whole crossings the remainder
/// r = d - flips * range is measured from the bound crossed first (even
/// flips) or from the other one (odd flips). Values inside stay unchanged.
FailureOr<Value> reflect(NodeImporter &n, Value x, double lo, double hi) {
  Type elem = elementTypeOf(x);
  double range = hi - lo;
  // A single position (align_corners with one pixel): everything lands on
  // it. The reference would divide by zero here.
  if (range <= 0)
    return n.splat(elem, shapeOf(x), lo);
  TESSERA_ASSIGN_OR_FAIL(below, n.infer<g::LessOp>(x, n.scalar(elem, lo)));
  TESSERA_ASSIGN_OR_FAIL(above, n.infer<g::GreaterOp>(x, n.scalar(elem, hi)));
  // max(lo - x, x - hi) is the distance beyond whichever bound x crossed.
  TESSERA_ASSIGN_OR_FAIL(dLo, scalarSub(n, lo, x));
  TESSERA_ASSIGN_OR_FAIL(dHi, addScalar(n, x, -hi));
  TESSERA_ASSIGN_OR_FAIL(d, n.infer<g::MaxOp>(dLo, dHi));
  TESSERA_ASSIGN_OR_FAIL(q, mulScalar(n, d, 1.0 / range));
  TESSERA_ASSIGN_OR_FAIL(flips, n.build<g::FloorOp>(q.getType(), q));
  TESSERA_ASSIGN_OR_FAIL(whole, mulScalar(n, flips, range));
  TESSERA_ASSIGN_OR_FAIL(r, n.infer<g::SubOp>(d, whole));
  TESSERA_ASSIGN_OR_FAIL(parity, n.infer<g::RemOp>(flips, n.scalar(elem, 2)));
  TESSERA_ASSIGN_OR_FAIL(odd, n.infer<g::GreaterOp>(parity, n.scalar(elem, 0.5)));
  // From below, even flips end at lo + r and odd ones at hi - r; from above
  // the other way round.
  TESSERA_ASSIGN_OR_FAIL(fromLo, n.infer<g::XorOp>(below, odd));
  TESSERA_ASSIGN_OR_FAIL(loSide, addScalar(n, r, lo));
  TESSERA_ASSIGN_OR_FAIL(hiSide, scalarSub(n, hi, r));
  TESSERA_ASSIGN_OR_FAIL(reflected, n.infer<g::SelectOp>(fromLo, loSide, hiSide));
  TESSERA_ASSIGN_OR_FAIL(outside, n.infer<g::OrOp>(below, above));
  return n.infer<g::SelectOp>(outside, reflected, x);
}

//===----------------------------------------------------------------------===//
// GridSample
//===----------------------------------------------------------------------===//

enum class Padding { Zeros, Border, Reflection };

/// One spatial axis of a GridSample input.
struct SampleAxis {
  int64_t size;
  /// Bounds of the reflection (and of "out of bound"): pixel edges, or
  /// pixel centres with align_corners.
  double lo, hi;
};

/// Keys' cubic convolution weights with A = -0.75 (the reference's
/// _gs_get_cubic_coeffs) for a tap at distance s: `near` for s in [0, 1],
/// else s in [1, 2].
FailureOr<Value> cubicWeight(NodeImporter &n, Value s, bool near) {
  constexpr double A = -0.75;
  if (near) {
    // ((A + 2) s - (A + 3)) s^2 + 1
    TESSERA_ASSIGN_OR_FAIL(a, mulScalar(n, s, A + 2));
    TESSERA_ASSIGN_OR_FAIL(b, addScalar(n, a, -(A + 3)));
    TESSERA_ASSIGN_OR_FAIL(c, n.infer<g::MulOp>(b, s));
    TESSERA_ASSIGN_OR_FAIL(d, n.infer<g::MulOp>(c, s));
    return addScalar(n, d, 1);
  }
  // ((A s - 5A) s + 8A) s - 4A
  TESSERA_ASSIGN_OR_FAIL(a, mulScalar(n, s, A));
  TESSERA_ASSIGN_OR_FAIL(b, addScalar(n, a, -5 * A));
  TESSERA_ASSIGN_OR_FAIL(c, n.infer<g::MulOp>(b, s));
  TESSERA_ASSIGN_OR_FAIL(d, addScalar(n, c, 8 * A));
  TESSERA_ASSIGN_OR_FAIL(e, n.infer<g::MulOp>(d, s));
  return addScalar(n, e, -4 * A);
}

/// The pixels one axis contributes to every sample: K taps per sample
/// position, [N, K, P] each.
struct AxisTaps {
  int64_t count = 1;
  /// Pixel position times the axis' stride in the flattened image (i64),
  /// already inside the image.
  Value index;
  /// Whether the tap lies inside the image (zeros padding only, else null).
  Value inside;
  /// Interpolation weight (null for nearest: 1).
  Value weight;
};

/// The taps of coordinate `c` ([N, 1, P], in pixels) along `axis`: the
/// rounded position (nearest), floor(c) and floor(c) + 1 (bilinear) or
/// floor(c) - 1 ... floor(c) + 2 (bicubic), each read with the reference's
/// _pixel_at_grid rule: border clamps into the image, reflection reflects
/// (then clamps, which only matters for NaN or a one-pixel axis), zeros
/// marks the taps outside.
FailureOr<AxisTaps> axisTaps(NodeImporter &n, Value c, StringRef mode,
                             const SampleAxis &axis, Padding padding,
                             int64_t stride) {
  SmallVector<Value> pos, weight;
  if (mode == "nearest") {
    pos.push_back(c);
  } else {
    TESSERA_ASSIGN_OR_FAIL(c0, n.build<g::FloorOp>(c.getType(), c));
    TESSERA_ASSIGN_OR_FAIL(t, n.infer<g::SubOp>(c, c0));
    if (mode == "bilinear") {
      // floor(c) and floor(c) + 1, weighted (c1 - c) and (c - c0).
      TESSERA_ASSIGN_OR_FAIL(c1, addScalar(n, c0, 1));
      TESSERA_ASSIGN_OR_FAIL(w0, n.infer<g::SubOp>(c1, c));
      pos = {c0, c1};
      weight = {w0, t};
    } else {
      // bicubic: floor(c) - 1 ... floor(c) + 2 at distances t + 1, t, 1 - t
      // and 2 - t.
      for (int k = -1; k <= 2; ++k) {
        TESSERA_ASSIGN_OR_FAIL(p, addScalar(n, c0, k));
        Value s;
        if (k <= 0) {
          TESSERA_ASSIGN_OR_FAIL(d, addScalar(n, t, -k));
          s = d;
        } else {
          TESSERA_ASSIGN_OR_FAIL(d, scalarSub(n, k, t));
          s = d;
        }
        TESSERA_ASSIGN_OR_FAIL(w, cubicWeight(n, s, k == 0 || k == 1));
        pos.push_back(p);
        weight.push_back(w);
      }
    }
  }
  AxisTaps taps;
  taps.count = pos.size();
  TESSERA_ASSIGN_OR_FAIL(all, concat(n, pos, 1));
  if (!weight.empty()) {
    TESSERA_ASSIGN_OR_FAIL(w, concat(n, weight, 1));
    taps.weight = w;
  }
  Type elem = elementTypeOf(all);
  // A nearest tap is the sample position itself, already reflected into
  // the bounds: reflecting it again changes nothing.
  if (padding == Padding::Reflection && mode != "nearest") {
    TESSERA_ASSIGN_OR_FAIL(r, reflect(n, all, axis.lo, axis.hi));
    all = r;
  } else if (padding == Padding::Zeros) {
    TESSERA_ASSIGN_OR_FAIL(geLo, n.infer<g::GreaterEqualOp>(all, n.scalar(elem, 0)));
    TESSERA_ASSIGN_OR_FAIL(
        leHi, n.infer<g::LessEqualOp>(all, n.scalar(elem, axis.size - 1)));
    TESSERA_ASSIGN_OR_FAIL(in, n.infer<g::AndOp>(geLo, leHi));
    taps.inside = in;
  }
  TESSERA_ASSIGN_OR_FAIL(clamped, clamp(n, all, 0.0, double(axis.size - 1)));
  Type i64 = n.builder().getI64Type();
  TESSERA_ASSIGN_OR_FAIL(ints, n.castTo(clamped, i64));
  TESSERA_ASSIGN_OR_FAIL(index, n.infer<g::MulOp>(ints, n.scalar(i64, stride)));
  taps.index = index;
  return taps;
}

/// y taps [N, Ky, P] against x taps [N, Kx, P] (`combine`, broadcast over
/// [N, Ky, Kx, P]), flattened tap-major to [N, 1, Ky * Kx * P].
template <typename OpTy>
FailureOr<Value> crossTaps(NodeImporter &n, Value y, Value x) {
  Ints ys = shapeOf(y), xs = shapeOf(x);
  TESSERA_ASSIGN_OR_FAIL(y4, n.reshape(y, {ys[0], ys[1], 1, ys[2]}));
  TESSERA_ASSIGN_OR_FAIL(x4, n.reshape(x, {xs[0], 1, xs[1], xs[2]}));
  TESSERA_ASSIGN_OR_FAIL(both, n.infer<OpTy>(y4, x4));
  return n.reshape(both, {ys[0], 1, ys[1] * xs[1] * ys[2]});
}

/// GridSample-16 (bilinear, nearest, bicubic; opset 20's N-D sampling and
/// its mode names linear and cubic are past the opsets Tessera reads) on 4-D
/// inputs: X [N, C, H, W], grid [N, Ho, Wo, 2] holding (x, y)
/// normalised to [-1, 1]; Y [N, C, Ho, Wo].
LogicalResult gridSample(NodeImporter &n) {
  Value x = n.input(0), grid = n.input(1);
  Ints xs = shapeOf(x), gs = shapeOf(grid);
  if (xs.size() != 4)
    return n.error() << "X has rank " << xs.size()
                     << "; only 4-D X (N x C x H x W) is supported yet, not "
                        "volumetric or N-D sampling";
  if (gs.size() != 4 || gs[0] != xs[0] || gs[3] != 2)
    return n.error() << "grid has shape " << g::formatShape(gs)
                     << "; expected " << xs[0] << "xHoxWox2 for X "
                     << g::formatShape(xs);
  if (!isa<FloatType>(elementTypeOf(grid)))
    return n.error() << "grid must be a float tensor";

  std::string mode = n.stringAttr("mode", "bilinear");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return n.error() << "mode must be bilinear, nearest or bicubic, got '"
                     << mode << "'";
  std::string paddingName = n.stringAttr("padding_mode", "zeros");
  Padding padding;
  if (paddingName == "zeros")
    padding = Padding::Zeros;
  else if (paddingName == "border")
    padding = Padding::Border;
  else if (paddingName == "reflection")
    padding = Padding::Reflection;
  else
    return n.error() << "padding_mode must be zeros, border or reflection, "
                        "got '"
                     << paddingName << "'";
  bool alignCorners = n.intAttr("align_corners", 0) != 0;

  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], Ho = gs[1], Wo = gs[2];
  int64_t P = Ho * Wo;
  if (H == 0 || W == 0)
    return n.unsupported("X with an empty spatial axis");
  Type xElem = elementTypeOf(x);
  Type elem = computeType(xElem, elementTypeOf(grid), n.context());
  // Edges of the outer pixels, or their centres with align_corners.
  SampleAxis ay{H, -0.5, H - 0.5}, ax{W, -0.5, W - 0.5};
  if (alignCorners) {
    ay = {H, 0.0, double(H - 1)};
    ax = {W, 0.0, double(W - 1)};
  }

  // Sample coordinates in pixels, each [N, 1, P].
  TESSERA_ASSIGN_OR_FAIL(gridC, n.castTo(grid, elem));
  TESSERA_ASSIGN_OR_FAIL(flatGrid, n.reshape(gridC, {N, P, 2}));
  Value coord[2]; // x, y
  for (int64_t i = 0; i < 2; ++i) {
    int64_t len = i == 0 ? W : H;
    TESSERA_ASSIGN_OR_FAIL(s, n.sliceAxis(flatGrid, 2, i, i + 1));
    TESSERA_ASSIGN_OR_FAIL(v, n.reshape(s, {N, 1, P}));
    // align_corners: (v + 1) / 2 * (len - 1); else ((v + 1) * len - 1) / 2.
    TESSERA_ASSIGN_OR_FAIL(v1, addScalar(n, v, 1));
    Value c;
    if (alignCorners) {
      TESSERA_ASSIGN_OR_FAIL(half, mulScalar(n, v1, 0.5));
      TESSERA_ASSIGN_OR_FAIL(scaled, mulScalar(n, half, double(len - 1)));
      c = scaled;
    } else {
      TESSERA_ASSIGN_OR_FAIL(scaled, mulScalar(n, v1, double(len)));
      TESSERA_ASSIGN_OR_FAIL(shifted, addScalar(n, scaled, -1));
      TESSERA_ASSIGN_OR_FAIL(half, mulScalar(n, shifted, 0.5));
      c = half;
    }
    if (mode == "nearest") {
      // np.rint: half to even.
      TESSERA_ASSIGN_OR_FAIL(r, n.build<g::RoundOp>(c.getType(), c));
      c = r;
    }
    coord[i] = c;
  }

  // Out-of-bound samples (either coordinate outside its bounds) are clamped
  // into the image (border, using pixel centres in both align_corners
  // cases, as the reference) or reflected back into the bounds. Reflection
  // leaves an inside coordinate unchanged, so it needs no condition.
  if (padding == Padding::Border) {
    Value out;
    for (auto [c, a] : {std::pair{coord[0], ax}, std::pair{coord[1], ay}}) {
      TESSERA_ASSIGN_OR_FAIL(below, n.infer<g::LessOp>(c, n.scalar(elem, a.lo)));
      TESSERA_ASSIGN_OR_FAIL(above, n.infer<g::GreaterOp>(c, n.scalar(elem, a.hi)));
      TESSERA_ASSIGN_OR_FAIL(either, n.infer<g::OrOp>(below, above));
      if (out) {
        TESSERA_ASSIGN_OR_FAIL(any, n.infer<g::OrOp>(out, either));
        out = any;
      } else {
        out = either;
      }
    }
    for (auto [c, a] : {std::pair{&coord[0], ax}, std::pair{&coord[1], ay}}) {
      TESSERA_ASSIGN_OR_FAIL(clamped, clamp(n, *c, 0.0, double(a.size - 1)));
      TESSERA_ASSIGN_OR_FAIL(v, n.infer<g::SelectOp>(out, clamped, *c));
      *c = v;
    }
  } else if (padding == Padding::Reflection) {
    TESSERA_ASSIGN_OR_FAIL(rx, reflect(n, coord[0], ax.lo, ax.hi));
    TESSERA_ASSIGN_OR_FAIL(ry, reflect(n, coord[1], ay.lo, ay.hi));
    coord[0] = rx;
    coord[1] = ry;
  }

  // The K = Ky x Kx pixels of every sample: flat indices y * W + x (H * W,
  // the appended zero, for a pixel outside with zeros padding) and weights,
  // tap-major [N, 1, K * P].
  TESSERA_ASSIGN_OR_FAIL(ty, axisTaps(n, coord[1], mode, ay, padding, W));
  TESSERA_ASSIGN_OR_FAIL(tx, axisTaps(n, coord[0], mode, ax, padding, 1));
  int64_t K = ty.count * tx.count;
  TESSERA_ASSIGN_OR_FAIL(index, crossTaps<g::AddOp>(n, ty.index, tx.index));
  if (padding == Padding::Zeros) {
    TESSERA_ASSIGN_OR_FAIL(inside, crossTaps<g::AndOp>(n, ty.inside, tx.inside));
    TESSERA_ASSIGN_OR_FAIL(
        sent, n.infer<g::SelectOp>(inside, index,
                                   n.scalar(n.builder().getI64Type(), H * W)));
    index = sent;
  }
  TESSERA_ASSIGN_OR_FAIL(fullIndex, n.expand(index, {N, C, K * P}));

  // The image flattened to [N, C, H * W] (+ one zero for zeros padding).
  TESSERA_ASSIGN_OR_FAIL(xc, n.castTo(x, elem));
  TESSERA_ASSIGN_OR_FAIL(image, n.reshape(xc, {N, C, H * W}));
  if (padding == Padding::Zeros) {
    TESSERA_ASSIGN_OR_FAIL(padded,
                           concat(n, {image, n.splat(elem, {N, C, 1}, 0)}, 2));
    image = padded;
  }
  TESSERA_ASSIGN_OR_FAIL(
      pixels, n.infer<g::GatherElementsOp>(image, fullIndex,
                                           n.builder().getI64IntegerAttr(2)));
  Value y = pixels;
  if (ty.weight) {
    TESSERA_ASSIGN_OR_FAIL(weight, crossTaps<g::MulOp>(n, ty.weight, tx.weight));
    TESSERA_ASSIGN_OR_FAIL(weighted, n.infer<g::MulOp>(pixels, weight));
    TESSERA_ASSIGN_OR_FAIL(split, n.reshape(weighted, {N, C, K, P}));
    TESSERA_ASSIGN_OR_FAIL(
        sum, n.infer<g::ReduceSumOp>(split, n.builder().getDenseI64ArrayAttr({2}),
                                     n.builder().getBoolAttr(false)));
    y = sum;
  }
  TESSERA_ASSIGN_OR_FAIL(shaped, n.reshape(y, {N, C, Ho, Wo}));
  TESSERA_ASSIGN_OR_FAIL(result, n.castTo(shaped, xElem));
  return n.setOutput(result);
}


//===----------------------------------------------------------------------===//
// RoiAlign
//===----------------------------------------------------------------------===//

/// One axis (y or x) of RoiAlign's sampling, for R rois with `pooled` bins
/// of `grid` samples each: the flat-index contribution (i64, times `stride`)
/// and the weight of the low and high neighbour of every sample, both
/// [R, pooled, grid, 2], as the reference's pre_calc_for_bilinear_interpolate.
struct RoiTaps {
  Value index, weight;
};

/// `start` and `bin` are [R, 1, 1]; `count` is the number of samples per bin
/// (a scalar, or [R, 1, 1] when it differs between rois, where `live`
/// [R, 1, grid] marks the samples a roi has).
FailureOr<RoiTaps> roiAxisTaps(NodeImporter &n, Value start, Value bin,
                               Value count, Value live, int64_t pooled,
                               int64_t grid, int64_t len, int64_t stride) {
  Type elem = elementTypeOf(start);
  // start + p * bin + (i + 0.5) * bin / count, in the reference's order.
  TESSERA_ASSIGN_OR_FAIL(pooledIota, iotaAlong(n, elem, pooled, 1, 3));
  TESSERA_ASSIGN_OR_FAIL(binOffset, n.infer<g::MulOp>(pooledIota, bin));
  TESSERA_ASSIGN_OR_FAIL(binStart, n.infer<g::AddOp>(start, binOffset));
  TESSERA_ASSIGN_OR_FAIL(gridIota, iotaAlong(n, elem, grid, 2, 3, 0.5));
  TESSERA_ASSIGN_OR_FAIL(sampleOffset, n.infer<g::MulOp>(gridIota, bin));
  TESSERA_ASSIGN_OR_FAIL(sampleStep, n.infer<g::DivOp>(sampleOffset, count));
  TESSERA_ASSIGN_OR_FAIL(pos, n.infer<g::AddOp>(binStart, sampleStep));
  // Samples beyond one pixel outside the image are skipped (weight 0).
  TESSERA_ASSIGN_OR_FAIL(geLo, n.infer<g::GreaterEqualOp>(pos, n.scalar(elem, -1)));
  TESSERA_ASSIGN_OR_FAIL(leHi, n.infer<g::LessEqualOp>(pos, n.scalar(elem, len)));
  TESSERA_ASSIGN_OR_FAIL(valid, n.infer<g::AndOp>(geLo, leHi));
  if (live) {
    TESSERA_ASSIGN_OR_FAIL(both, n.infer<g::AndOp>(valid, live));
    valid = both;
  }
  // Positions below 0 read pixel 0; from len - 1 on, both neighbours are the
  // last pixel with weight 1 on the low one. Clamping the position into
  // [0, len - 1] gives exactly that.
  TESSERA_ASSIGN_OR_FAIL(c, clamp(n, pos, 0.0, double(len - 1)));
  TESSERA_ASSIGN_OR_FAIL(low, n.build<g::FloorOp>(c.getType(), c));
  TESSERA_ASSIGN_OR_FAIL(next, addScalar(n, low, 1));
  TESSERA_ASSIGN_OR_FAIL(high, clamp(n, next, std::nullopt, double(len - 1)));
  TESSERA_ASSIGN_OR_FAIL(lw, n.infer<g::SubOp>(c, low));
  TESSERA_ASSIGN_OR_FAIL(hw, scalarSub(n, 1, lw));
  Value zero = n.scalar(elem, 0);
  TESSERA_ASSIGN_OR_FAIL(wLow, n.infer<g::SelectOp>(valid, hw, zero));
  TESSERA_ASSIGN_OR_FAIL(wHigh, n.infer<g::SelectOp>(valid, lw, zero));

  Ints shape = shapeOf(pos);
  shape.push_back(1);
  SmallVector<Value> idx, w;
  for (auto [p, wt] : {std::pair{low, wLow}, std::pair{high, wHigh}}) {
    TESSERA_ASSIGN_OR_FAIL(pr, n.reshape(p, shape));
    TESSERA_ASSIGN_OR_FAIL(wr, n.reshape(wt, shape));
    idx.push_back(pr);
    w.push_back(wr);
  }
  TESSERA_ASSIGN_OR_FAIL(both, concat(n, idx, 3));
  TESSERA_ASSIGN_OR_FAIL(ints, n.castTo(both, n.builder().getI64Type()));
  TESSERA_ASSIGN_OR_FAIL(index, n.infer<g::MulOp>(ints, n.scalar(n.builder().getI64Type(), stride)));
  TESSERA_ASSIGN_OR_FAIL(weight, concat(n, w, 3));
  return RoiTaps{index, weight};
}

/// RoiAlign-10/16: X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2),
/// batch_indices [R]; Y [R, C, output_height, output_width]. Every bin
/// averages (or maxes) a grid of bilinear samples; the samples are gathered
/// as rows of X laid out [N * H * W, C], indexed [R, OH, GH, OW, GW, 4]
/// (the 4 bilinear neighbours last) so that the bins reduce over axes 2, 4
/// and 5.
LogicalResult roiAlign(NodeImporter &n) {
  Value x = n.input(0), rois = n.input(1), batch = n.input(2);
  Ints xs = shapeOf(x), rs = shapeOf(rois), bs = shapeOf(batch);
  if (xs.size() != 4)
    return n.error() << "X must be 4-D (N x C x H x W), got "
                     << g::formatShape(xs);
  if (rs.size() != 2 || rs[1] != 4 || bs.size() != 1 || bs[0] != rs[0])
    return n.error() << "rois must be Rx4 and batch_indices R, got "
                     << g::formatShape(rs) << " and " << g::formatShape(bs);
  Type xElem = elementTypeOf(x);
  if (!isa<FloatType>(xElem) || !isa<FloatType>(elementTypeOf(rois)))
    return n.error() << "X and rois must be float tensors";
  if (!isa<IntegerType>(elementTypeOf(batch)))
    return n.error() << "batch_indices must be an integer tensor";

  // The reference lower-cases both string attributes.
  std::string mode = StringRef(n.stringAttr("mode", "avg")).lower();
  if (mode != "avg" && mode != "max")
    return n.error() << "mode must be avg or max, got '" << mode << "'";
  // Opset 16 added coordinate_transformation_mode and made half_pixel the
  // default; before, coordinates were those of output_half_pixel.
  std::string transform =
      n.opset() >= 16 ? StringRef(n.stringAttr("coordinate_transformation_mode",
                                               "half_pixel"))
                            .lower()
                      : "output_half_pixel";
  if (transform != "half_pixel" && transform != "output_half_pixel")
    return n.error() << "coordinate_transformation_mode must be half_pixel or "
                        "output_half_pixel, got '"
                     << transform << "'";
  bool halfPixel = transform == "half_pixel";
  int64_t OH = n.intAttr("output_height", 1), OW = n.intAttr("output_width", 1);
  int64_t ratio = n.intAttr("sampling_ratio", 0);
  double scale = n.floatAttr("spatial_scale", 1.0);
  // Bounded as every attribute size: the grid sizes below multiply them.
  if (OH < 1 || OW < 1 || ratio < 0 || OH > kMaxAttributeSize || OW > kMaxAttributeSize ||
      ratio > kMaxAttributeSize)
    return n.error() << "output_height and output_width must be positive and "
                        "sampling_ratio non-negative, each at most 2^24";

  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], R = rs[0];
  if (H == 0 || W == 0 || N == 0)
    return n.unsupported("RoiAlign of an empty X");
  Type elem = computeType(xElem, elementTypeOf(rois), n.context());
  double offset = halfPixel ? 0.5 : 0.0;

  // Samples per bin along y and x: sampling_ratio, or (0) the bin size
  // rounded up, which depends on the rois' values: they must be constants,
  // and the axis samples the largest count with the extra samples masked
  // off per roi.
  int64_t gridH = ratio, gridW = ratio;
  SmallVector<double> countsH, countsW, totals;
  if (ratio == 0) {
    DenseElementsAttr values = n.constantInput(1);
    if (!values)
      return n.notConstant(1, "rois", " float tensor")
             << "; with sampling_ratio 0 the number of samples per bin "
                "depends on the regions' sizes";
    SmallVector<double> v;
    for (APFloat f : values.getValues<APFloat>())
      v.push_back(f.convertToDouble());
    bool isDouble = elem.isF64();
    // The reference's arithmetic in the computation type (float or double):
    // ceil() is exact only if the size is rounded as there.
    auto grids = [&](double lo, double hi, int64_t pooled) -> double {
      double size;
      if (isDouble) {
        size = (hi * scale - offset) - (lo * scale - offset);
        if (!halfPixel)
          size = std::max(size, 1.0);
        return std::ceil(size / pooled);
      }
      float fs = float(scale), fo = float(offset);
      float s = (float(hi) * fs - fo) - (float(lo) * fs - fo);
      if (!halfPixel)
        s = std::max(s, 1.0f);
      return std::ceil(s / float(pooled));
    };
    gridH = gridW = 1;
    for (int64_t r = 0; r < R; ++r) {
      // A negative count samples nothing (an empty loop in the reference).
      double gh = std::max(grids(v[4 * r + 1], v[4 * r + 3], OH), 0.0);
      double gw = std::max(grids(v[4 * r + 0], v[4 * r + 2], OW), 0.0);
      countsH.push_back(gh);
      countsW.push_back(gw);
      // The reference divides by max(gh * gw, 1) of the unclamped counts;
      // with no samples the sum is 0 either way.
      totals.push_back(std::max(gh * gw, 1.0));
      gridH = std::max(gridH, int64_t(gh));
      gridW = std::max(gridW, int64_t(gw));
    }
    if (gridH * gridW > (int64_t(1) << 16))
      return n.unsupported("RoiAlign with " + Twine(gridH) + "x" + Twine(gridW) +
                           " samples per bin");
  }
  // Per-roi counts only where they differ; otherwise the static path.
  bool varying = false;
  if (ratio == 0) {
    for (int64_t r = 1; r < R; ++r)
      varying |= countsH[r] != countsH[0] || countsW[r] != countsW[0];
    if (!varying && R > 0 && (countsH[0] == 0 || countsW[0] == 0))
      varying = true; // no samples at all: mask every one off
  }

  TESSERA_ASSIGN_OR_FAIL(roisC, n.castTo(rois, elem));
  // Region corners in pixels, each [R, 1, 1].
  Value corner[4]; // x1, y1, x2, y2
  for (int64_t i = 0; i < 4; ++i) {
    TESSERA_ASSIGN_OR_FAIL(col, n.sliceAxis(roisC, 1, i, i + 1));
    TESSERA_ASSIGN_OR_FAIL(r3, n.reshape(col, {R, 1, 1}));
    TESSERA_ASSIGN_OR_FAIL(scaled, mulScalar(n, r3, scale));
    TESSERA_ASSIGN_OR_FAIL(shifted, addScalar(n, scaled, -offset));
    corner[i] = shifted;
  }
  RoiTaps taps[2]; // y, x
  Value live[2];
  for (int64_t axis = 0; axis < 2; ++axis) {
    Value lo = corner[1 - axis], hi = corner[3 - axis];
    int64_t pooled = axis == 0 ? OH : OW, grid = axis == 0 ? gridH : gridW;
    TESSERA_ASSIGN_OR_FAIL(size, n.infer<g::SubOp>(hi, lo));
    if (!halfPixel) {
      // Malformed regions are forced to 1x1 pixels.
      TESSERA_ASSIGN_OR_FAIL(atLeast1, clamp(n, size, 1.0, std::nullopt));
      size = atLeast1;
    }
    TESSERA_ASSIGN_OR_FAIL(bin, n.infer<g::DivOp>(size, n.scalar(elem, pooled)));
    Value count = n.scalar(elem, grid);
    if (varying) {
      ArrayRef<double> counts = axis == 0 ? countsH : countsW;
      count = n.constant(floatValues(elem, {R, 1, 1}, counts));
      TESSERA_ASSIGN_OR_FAIL(gridIota, iotaAlong(n, elem, grid, 2, 3));
      TESSERA_ASSIGN_OR_FAIL(l, n.infer<g::LessOp>(gridIota, count));
      live[axis] = l;
    }
    TESSERA_ASSIGN_OR_FAIL(
        t, roiAxisTaps(n, lo, bin, count, live[axis], pooled, grid,
                       axis == 0 ? H : W, axis == 0 ? W : 1));
    taps[axis] = t;
  }

  // Flat row b * H * W + y * W + x of every neighbour and its weight, the
  // y and x parts broadcast against each other: [R, OH, GH, OW, GW, 2, 2].
  Type i64 = n.builder().getI64Type();
  TESSERA_ASSIGN_OR_FAIL(yRow, n.reshape(taps[0].index, {R, OH, gridH, 1, 1, 2, 1}));
  TESSERA_ASSIGN_OR_FAIL(xCol, n.reshape(taps[1].index, {R, 1, 1, OW, gridW, 1, 2}));
  TESSERA_ASSIGN_OR_FAIL(pixel, n.infer<g::AddOp>(yRow, xCol));
  TESSERA_ASSIGN_OR_FAIL(b64, n.castTo(batch, i64));
  // An out-of-range batch index is invalid ONNX; clamp it rather than read
  // outside X.
  TESSERA_ASSIGN_OR_FAIL(bClamped, clamp(n, b64, 0.0, double(N - 1)));
  TESSERA_ASSIGN_OR_FAIL(image, n.infer<g::MulOp>(bClamped, n.scalar(i64, H * W)));
  TESSERA_ASSIGN_OR_FAIL(image7, n.reshape(image, {R, 1, 1, 1, 1, 1, 1}));
  TESSERA_ASSIGN_OR_FAIL(row7, n.infer<g::AddOp>(pixel, image7));
  TESSERA_ASSIGN_OR_FAIL(rows, n.reshape(row7, {R, OH, gridH, OW, gridW, 4}));
  TESSERA_ASSIGN_OR_FAIL(wy, n.reshape(taps[0].weight, {R, OH, gridH, 1, 1, 2, 1}));
  TESSERA_ASSIGN_OR_FAIL(wx, n.reshape(taps[1].weight, {R, 1, 1, OW, gridW, 1, 2}));
  TESSERA_ASSIGN_OR_FAIL(w7, n.infer<g::MulOp>(wy, wx));
  TESSERA_ASSIGN_OR_FAIL(weight, n.reshape(w7, {R, OH, gridH, OW, gridW, 4, 1}));

  // X as a table of pixels [N * H * W, C]; the gather gives
  // [R, OH, GH, OW, GW, 4, C].
  TESSERA_ASSIGN_OR_FAIL(xc, n.castTo(x, elem));
  TESSERA_ASSIGN_OR_FAIL(nhwc, n.transpose(xc, {0, 2, 3, 1}));
  TESSERA_ASSIGN_OR_FAIL(table, n.reshape(nhwc, {N * H * W, C}));
  auto &b = n.builder();
  TESSERA_ASSIGN_OR_FAIL(
      pixels, n.infer<g::GatherOp>(table, rows, b.getI64IntegerAttr(0)));
  TESSERA_ASSIGN_OR_FAIL(weighted, n.infer<g::MulOp>(pixels, weight));

  Value pooledValue; // [R, OH, OW, C]
  if (mode == "avg") {
    TESSERA_ASSIGN_OR_FAIL(
        sum, n.infer<g::ReduceSumOp>(weighted, b.getDenseI64ArrayAttr({2, 4, 5}),
                                     b.getBoolAttr(false)));
    Value count =
        varying ? n.constant(floatValues(elem, {R, 1, 1, 1}, totals))
                : n.scalar(elem, std::max<int64_t>(gridH * gridW, 1));
    TESSERA_ASSIGN_OR_FAIL(avg, n.infer<g::DivOp>(sum, count));
    pooledValue = avg;
  } else {
    // The reference's max mode: the largest weighted neighbour of each
    // sample, then the largest over the bin's samples.
    TESSERA_ASSIGN_OR_FAIL(
        perSample, n.infer<g::ReduceMaxOp>(weighted, b.getDenseI64ArrayAttr({5}),
                                           b.getBoolAttr(false)));
    if (varying) {
      // Samples a roi does not have must not win.
      TESSERA_ASSIGN_OR_FAIL(ly, n.reshape(live[0], {R, 1, gridH, 1, 1, 1}));
      TESSERA_ASSIGN_OR_FAIL(lx, n.reshape(live[1], {R, 1, 1, 1, gridW, 1}));
      TESSERA_ASSIGN_OR_FAIL(both, n.infer<g::AndOp>(ly, lx));
      TESSERA_ASSIGN_OR_FAIL(
          masked, n.infer<g::SelectOp>(
                      both, perSample,
                      n.scalar(elem, -std::numeric_limits<double>::infinity())));
      perSample = masked;
    }
    TESSERA_ASSIGN_OR_FAIL(
        best, n.infer<g::ReduceMaxOp>(perSample, b.getDenseI64ArrayAttr({2, 4}),
                                      b.getBoolAttr(false)));
    pooledValue = best;
    if (varying) {
      // A roi without samples gives 0.
      SmallVector<double> has;
      for (int64_t r = 0; r < R; ++r)
        has.push_back(countsH[r] * countsW[r] > 0 ? 1 : 0);
      TESSERA_ASSIGN_OR_FAIL(
          any, n.castTo(n.constant(floatValues(elem, {R, 1, 1, 1}, has)),
                        b.getI1Type()));
      TESSERA_ASSIGN_OR_FAIL(
          kept, n.infer<g::SelectOp>(any, best, n.scalar(elem, 0)));
      pooledValue = kept;
    }
  }
  TESSERA_ASSIGN_OR_FAIL(nchw, n.transpose(pooledValue, {0, 3, 1, 2}));
  TESSERA_ASSIGN_OR_FAIL(result, n.castTo(nchw, xElem));
  return n.setOutput(result);
}

const OpConverter kSamplingConverters[] = {
    {"GridSample", 16, gridSample},
    {"RoiAlign", 10, roiAlign},
};

} // namespace

ArrayRef<OpConverter> samplingConverters() { return kSamplingConverters; }

} // namespace tessera::onnx_importer
