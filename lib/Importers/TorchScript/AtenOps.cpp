//===- AtenOps.cpp - aten operators as graph ops -------------------------===//
//
// One converter per aten operator kind (all overloads of the kind; they are
// told apart by their argument count and types). A converter runs only when
// at least one input is a device tensor: everything else was evaluated by
// libtorch at compile time. Argument positions follow the aten schemas of
// native_functions.yaml.
//
//===----------------------------------------------------------------------===//

#include "OpContext.h"
#include "tessera/Dialect/Graph/IR/GraphEmitter.h"
#include "tessera/Dialect/Graph/IR/Losses.h"
#include "tessera/Dialect/Graph/IR/Recurrent.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/triu.h>

#include <cmath>
#include <type_traits>

using namespace mlir;
namespace g = tessera::graph;

namespace tessera::torchscript_importer {
namespace {

using Ints = SmallVector<int64_t>;

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }
int64_t rankOf(Value v) { return typeOf(v).getRank(); }
Type elementOf(Value v) { return typeOf(v).getElementType(); }

//===----------------------------------------------------------------------===//
// Type promotion (torch.result_type)
//===----------------------------------------------------------------------===//

/// 0 bool, 1 integer, 2 floating point.
int category(Type t) {
  if (t.isInteger(1))
    return 0;
  return isa<FloatType>(t) ? 2 : 1;
}

/// The element type two operands compute in, following PyTorch: a higher
/// category wins; within one, a dimensioned tensor beats a 0-d tensor,
/// which beats a Python number; then the wider type.
FailureOr<Type> resultType(OpContext &c, ArrayRef<size_t> operands) {
  struct Candidate {
    Type type;
    int priority; // 2 dimensioned tensor, 1 zero-dim tensor, 0 number
  };
  SmallVector<Candidate> candidates;
  MLIRContext *ctx = c.context();
  for (size_t i : operands) {
    const ImportedValue &v = c.input(i);
    if (v.kind == ImportedValue::Kind::Tensor) {
      candidates.push_back({elementOf(v.tensor), rankOf(v.tensor) > 0 ? 2 : 1});
    } else if (v.kind == ImportedValue::Kind::Constant && v.constant.isTensor()) {
      const at::Tensor &t = v.constant.toTensor();
      Type type = elementTypeOf(t.scalar_type(), ctx);
      if (!type)
        return c.error() << "unsupported dtype " << c10::toString(t.scalar_type());
      candidates.push_back({type, t.dim() > 0 ? 2 : 1});
    } else if (v.kind == ImportedValue::Kind::Constant &&
               (v.constant.isDouble() || v.constant.isInt() || v.constant.isBool())) {
      Builder b(ctx);
      Type type = v.constant.isDouble() ? Type(b.getF32Type())
                  : v.constant.isInt()  ? Type(b.getI64Type())
                                        : Type(b.getI1Type());
      candidates.push_back({type, 0});
    } else {
      return c.error() << "argument '" << c.argName(i)
                       << "' must be a tensor or a number";
    }
  }
  Candidate best = candidates.front();
  for (const Candidate &cand : ArrayRef(candidates).drop_front()) {
    int cb = category(best.type), cc = category(cand.type);
    if (cc != cb) {
      if (cc > cb) {
        // A number of a higher category gives the default type of it.
        best = cand.priority == 0 ? Candidate{cand.type, best.priority} : cand;
      }
      continue;
    }
    if (cand.priority > best.priority ||
        (cand.priority == best.priority &&
         cand.type.getIntOrFloatBitWidth() > best.type.getIntOrFloatBitWidth()))
      best = cand;
  }
  return best.type;
}

/// Operands `i` and `j` as tensors of their common type.
FailureOr<std::pair<Value, Value>> promoted(OpContext &c, size_t i, size_t j) {
  TESSERA_ASSIGN_OR_FAIL(type, resultType(c, {i, j}));
  TESSERA_ASSIGN_OR_FAIL(a, c.tensor(i, type));
  TESSERA_ASSIGN_OR_FAIL(b, c.tensor(j, type));
  TESSERA_ASSIGN_OR_FAIL(ac, c.castTo(a, type));
  TESSERA_ASSIGN_OR_FAIL(bc, c.castTo(b, type));
  return std::make_pair(ac, bc);
}

/// `v * factor` unless factor is 1.
FailureOr<Value> scaled(OpContext &c, Value v, double factor) {
  if (factor == 1)
    return v;
  return c.infer<g::MulOp>(v, c.scalar(elementOf(v), factor));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename OpTy> LogicalResult unary(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  if (!isa<FloatType>(elementOf(x)) &&
      (std::is_same_v<OpTy, g::ExpOp> || std::is_same_v<OpTy, g::LogOp> ||
       std::is_same_v<OpTy, g::SqrtOp> || std::is_same_v<OpTy, g::SigmoidOp> ||
       std::is_same_v<OpTy, g::TanhOp>)) {
    TESSERA_ASSIGN_OR_FAIL(f, c.castTo(x, c.builder().getF32Type()));
    x = f;
  }
  TESSERA_ASSIGN_OR_FAIL(v, c.build<OpTy>(x.getType(), x));
  return c.setResult(v);
}

LogicalResult identity(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  return c.setResult(x);
}

LogicalResult dropout(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(p, c.getDouble(1));
  TESSERA_ASSIGN_OR_FAIL(train, c.getBool(2));
  if (!train || p == 0)
    return identity(c);
  if (!c.training())
    return c.unsupported("dropout in training mode in an inference model (call "
                         "model.eval() before saving, or compile with --train)");
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, g::createDropout(c.builder(), c.loc(), x, p));
  return c.setResult(d.output);
}

LogicalResult clampTo(OpContext &c, Value x, std::optional<double> lo,
                      std::optional<double> hi) {
  auto attr = [&](std::optional<double> v) {
    return v ? c.builder().getF64FloatAttr(*v) : FloatAttr();
  };
  TESSERA_ASSIGN_OR_FAIL(v, c.build<g::ClampOp>(x.getType(), x, attr(lo), attr(hi)));
  return c.setResult(v);
}

LogicalResult clamp(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  // clamp.Tensor: bounds computed on the device clamp through max/min.
  if (c.isTensor(1) || c.isTensor(2)) {
    Value v = x;
    if (!c.isNone(1)) {
      TESSERA_ASSIGN_OR_FAIL(lo, c.tensor(1, elementOf(x)));
      TESSERA_ASSIGN_OR_FAIL(m, c.infer<g::MaxOp>(v, lo));
      v = m;
    }
    if (!c.isNone(2)) {
      TESSERA_ASSIGN_OR_FAIL(hi, c.tensor(2, elementOf(x)));
      TESSERA_ASSIGN_OR_FAIL(m, c.infer<g::MinOp>(v, hi));
      v = m;
    }
    return c.setResult(v);
  }
  std::optional<double> lo, hi;
  if (!c.isNone(1)) {
    TESSERA_ASSIGN_OR_FAIL(v, c.getDouble(1));
    lo = v;
  }
  if (!c.isNone(2)) {
    TESSERA_ASSIGN_OR_FAIL(v, c.getDouble(2));
    hi = v;
  }
  return clampTo(c, x, lo, hi);
}

LogicalResult hardtanh(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(lo, c.getDouble(1));
  TESSERA_ASSIGN_OR_FAIL(hi, c.getDouble(2));
  return clampTo(c, x, lo, hi);
}

LogicalResult relu6(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  return clampTo(c, x, 0.0, 6.0);
}

LogicalResult hardsigmoid(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(v, c.build<g::HardSigmoidOp>(
                                   x.getType(), x, b.getF64FloatAttr(1.0 / 6),
                                   b.getF64FloatAttr(0.5)));
  return c.setResult(v);
}

LogicalResult silu(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(s, c.build<g::SigmoidOp>(x.getType(), x));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::MulOp>(x, s));
  return c.setResult(v);
}

LogicalResult mish(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(sp, c.build<g::SoftplusOp>(x.getType(), x));
  TESSERA_ASSIGN_OR_FAIL(t, c.build<g::TanhOp>(x.getType(), sp));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::MulOp>(x, t));
  return c.setResult(v);
}

/// gelu(x): x/2 * (1 + erf(x / sqrt 2)), or with `tanh` the approximation
/// x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
FailureOr<Value> geluOf(OpContext &c, Value x, bool tanh) {
  Value inner;
  if (!tanh) {
    TESSERA_ASSIGN_OR_FAIL(s, scaled(c, x, M_SQRT1_2));
    TESSERA_ASSIGN_OR_FAIL(e, c.build<g::ErfOp>(x.getType(), s));
    inner = e;
  } else {
    TESSERA_ASSIGN_OR_FAIL(x2, c.infer<g::MulOp>(x, x));
    TESSERA_ASSIGN_OR_FAIL(x3, c.infer<g::MulOp>(x2, x));
    TESSERA_ASSIGN_OR_FAIL(k, scaled(c, x3, 0.044715));
    TESSERA_ASSIGN_OR_FAIL(sum, c.infer<g::AddOp>(x, k));
    TESSERA_ASSIGN_OR_FAIL(s, scaled(c, sum, std::sqrt(2.0 / M_PI)));
    TESSERA_ASSIGN_OR_FAIL(th, c.build<g::TanhOp>(x.getType(), s));
    inner = th;
  }
  TESSERA_ASSIGN_OR_FAIL(one, c.infer<g::AddOp>(inner, c.scalar(elementOf(x), 1)));
  TESSERA_ASSIGN_OR_FAIL(half, scaled(c, x, 0.5));
  return c.infer<g::MulOp>(half, one);
}

LogicalResult gelu(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  std::string approximate = "none";
  if (c.numInputs() > 1) {
    TESSERA_ASSIGN_OR_FAIL(a, c.getString(1));
    approximate = a;
  }
  if (approximate != "none" && approximate != "tanh")
    return c.unsupported("gelu approximate='" + approximate + "'");
  TESSERA_ASSIGN_OR_FAIL(v, geluOf(c, x, approximate == "tanh"));
  return c.setResult(v);
}

LogicalResult leakyRelu(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  double slope = 0.01;
  if (c.numInputs() > 1) {
    TESSERA_ASSIGN_OR_FAIL(s, c.getDouble(1));
    slope = s;
  }
  TESSERA_ASSIGN_OR_FAIL(v, c.build<g::LeakyReluOp>(
                                   x.getType(), x, c.builder().getF64FloatAttr(slope)));
  return c.setResult(v);
}

LogicalResult elu(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(alpha, c.getDouble(1));
  TESSERA_ASSIGN_OR_FAIL(scale, c.getDouble(2));
  TESSERA_ASSIGN_OR_FAIL(inputScale, c.getDouble(3));
  if (inputScale != 1)
    return c.unsupported("elu with input_scale != 1");
  TESSERA_ASSIGN_OR_FAIL(e, c.build<g::EluOp>(x.getType(), x,
                                                 c.builder().getF64FloatAttr(alpha)));
  TESSERA_ASSIGN_OR_FAIL(v, scaled(c, e, scale));
  return c.setResult(v);
}

LogicalResult softplus(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(beta, c.getDouble(1));
  // log(1 + e^(beta x)) / beta; the threshold (linear above it) changes the
  // result by less than e^-threshold.
  TESSERA_ASSIGN_OR_FAIL(bx, scaled(c, x, beta));
  TESSERA_ASSIGN_OR_FAIL(sp, c.build<g::SoftplusOp>(x.getType(), bx));
  TESSERA_ASSIGN_OR_FAIL(v, scaled(c, sp, 1 / beta));
  return c.setResult(v);
}

/// add/sub(self, other, alpha): self ± alpha * other; rsub swaps.
template <typename OpTy, bool Reversed = false>
LogicalResult addSub(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
  auto [a, b] = operands;
  if (Reversed)
    std::swap(a, b);
  double alpha = 1;
  if (c.numInputs() > 2 && !c.isNone(2)) {
    TESSERA_ASSIGN_OR_FAIL(al, c.getDouble(2));
    alpha = al;
  }
  TESSERA_ASSIGN_OR_FAIL(bs, scaled(c, b, alpha));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<OpTy>(a, bs));
  return c.setResult(v);
}

template <typename OpTy> LogicalResult binary(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<OpTy>(operands.first, operands.second));
  return c.setResult(v);
}

LogicalResult div(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
  auto [a, b] = operands;
  std::string mode;
  if (c.numInputs() > 2 && !c.isNone(2)) {
    TESSERA_ASSIGN_OR_FAIL(m, c.getString(2));
    mode = m;
  }
  if (mode.empty() && !isa<FloatType>(elementOf(a))) {
    // True division of integers gives floats.
    TESSERA_ASSIGN_OR_FAIL(af, c.castTo(a, c.builder().getF32Type()));
    TESSERA_ASSIGN_OR_FAIL(bf, c.castTo(b, c.builder().getF32Type()));
    a = af;
    b = bf;
  }
  if (mode == "floor" && !isa<FloatType>(elementOf(a)))
    return c.unsupported("floor division of integer tensors");
  TESSERA_ASSIGN_OR_FAIL(q, c.infer<g::DivOp>(a, b));
  if (mode == "floor") {
    TESSERA_ASSIGN_OR_FAIL(f, c.build<g::FloorOp>(q.getType(), q));
    return c.setResult(f);
  }
  if (mode == "trunc" && isa<FloatType>(elementOf(a))) {
    // trunc(q) = sign(q) * floor(|q|)
    TESSERA_ASSIGN_OR_FAIL(abs, c.build<g::AbsOp>(q.getType(), q));
    TESSERA_ASSIGN_OR_FAIL(fl, c.build<g::FloorOp>(q.getType(), abs));
    TESSERA_ASSIGN_OR_FAIL(sg, c.build<g::SignOp>(q.getType(), q));
    TESSERA_ASSIGN_OR_FAIL(t, c.infer<g::MulOp>(fl, sg));
    return c.setResult(t);
  }
  if (!mode.empty() && mode != "trunc" && mode != "floor")
    return c.error() << "rounding_mode must be 'trunc', 'floor' or None, got '"
                     << mode << "'";
  return c.setResult(q);
}

LogicalResult floorDivide(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
  if (!isa<FloatType>(elementOf(operands.first)))
    return c.unsupported("floor_divide of integer tensors");
  TESSERA_ASSIGN_OR_FAIL(q, c.infer<g::DivOp>(operands.first, operands.second));
  TESSERA_ASSIGN_OR_FAIL(f, c.build<g::FloorOp>(q.getType(), q));
  return c.setResult(f);
}

template <typename OpTy, bool Negate = false>
LogicalResult compare(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<OpTy>(operands.first, operands.second));
  if (Negate) {
    TESSERA_ASSIGN_OR_FAIL(n, c.build<g::NotOp>(v.getType(), v));
    return c.setResult(n);
  }
  return c.setResult(v);
}

template <typename OpTy> LogicalResult logical(OpContext &c) {
  Type i1 = c.builder().getI1Type();
  TESSERA_ASSIGN_OR_FAIL(a, c.tensor(0, i1));
  TESSERA_ASSIGN_OR_FAIL(b, c.tensor(1, i1));
  TESSERA_ASSIGN_OR_FAIL(ab, c.castTo(a, i1));
  TESSERA_ASSIGN_OR_FAIL(bb, c.castTo(b, i1));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<OpTy>(ab, bb));
  return c.setResult(v);
}

LogicalResult logicalNot(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(b, c.castTo(x, c.builder().getI1Type()));
  TESSERA_ASSIGN_OR_FAIL(v, c.build<g::NotOp>(b.getType(), b));
  return c.setResult(v);
}

/// where(condition, self, other)
LogicalResult where(OpContext &c) {
  if (c.numInputs() < 3)
    return c.unsupported("where(condition) (its shape depends on the data)");
  Type i1 = c.builder().getI1Type();
  TESSERA_ASSIGN_OR_FAIL(cond, c.tensor(0, i1));
  TESSERA_ASSIGN_OR_FAIL(cb, c.castTo(cond, i1));
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 1, 2));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::SelectOp>(cb, operands.first,
                                                    operands.second));
  return c.setResult(v);
}

/// masked_fill(self, mask, value)
LogicalResult maskedFill(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  Type i1 = c.builder().getI1Type();
  TESSERA_ASSIGN_OR_FAIL(mask, c.tensor(1, i1));
  TESSERA_ASSIGN_OR_FAIL(mb, c.castTo(mask, i1));
  TESSERA_ASSIGN_OR_FAIL(value, c.tensor(2, elementOf(x)));
  TESSERA_ASSIGN_OR_FAIL(vc, c.castTo(value, elementOf(x)));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::SelectOp>(mb, vc, x));
  if (shapeOf(v) != shapeOf(x))
    return c.error() << "the mask " << g::formatShape(shapeOf(mb))
                     << " does not broadcast to the tensor "
                     << g::formatShape(shapeOf(x));
  return c.setResult(v);
}

/// to(self, ...) / type_as(self, other): only the dtype matters here.
LogicalResult to(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  Type target = elementOf(x);
  for (size_t i = 1; i < c.numInputs(); ++i) {
    std::string name = c.argName(i);
    if (name == "dtype" && !c.isNone(i)) {
      TESSERA_ASSIGN_OR_FAIL(d, c.getInt(i));
      target = elementTypeOf(static_cast<c10::ScalarType>(d), c.context());
    } else if (name == "other") {
      TESSERA_ASSIGN_OR_FAIL(o, c.tensor(i));
      target = elementOf(o);
    }
  }
  if (!target)
    return c.unsupported("this dtype");
  TESSERA_ASSIGN_OR_FAIL(v, c.castTo(x, target));
  return c.setResult(v);
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult matmul(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::MatmulOp>(operands.first, operands.second));
  return c.setResult(v);
}

LogicalResult transposeLast2(OpContext &c, Value w, Value &out) {
  int64_t r = rankOf(w);
  if (r < 2) {
    out = w;
    return success();
  }
  Ints perm;
  for (int64_t i = 0; i < r; ++i)
    perm.push_back(i);
  std::swap(perm[r - 1], perm[r - 2]);
  TESSERA_ASSIGN_OR_FAIL(t, c.transpose(w, perm));
  out = t;
  return success();
}

/// linear(input, weight, bias): input @ weight^T + bias
LogicalResult linear(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(w, c.tensor(1));
  Value wt;
  if (failed(transposeLast2(c, w, wt)))
    return failure();
  TESSERA_ASSIGN_OR_FAIL(y, c.infer<g::MatmulOp>(x, wt));
  if (c.isNone(2))
    return c.setResult(y);
  TESSERA_ASSIGN_OR_FAIL(b, c.tensor(2));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::AddOp>(y, b));
  return c.setResult(v);
}

LogicalResult t(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  if (rankOf(x) > 2)
    return c.error() << "expects a tensor of at most 2 dims, got "
                     << g::formatShape(shapeOf(x));
  Value v;
  if (failed(transposeLast2(c, x, v)))
    return failure();
  return c.setResult(v);
}

/// addmm / baddbmm(self, a, b, beta, alpha): beta * self + alpha * (a @ b)
LogicalResult addmm(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(self, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(a, c.tensor(1));
  TESSERA_ASSIGN_OR_FAIL(b, c.tensor(2));
  TESSERA_ASSIGN_OR_FAIL(beta, c.getDouble(3));
  TESSERA_ASSIGN_OR_FAIL(alpha, c.getDouble(4));
  TESSERA_ASSIGN_OR_FAIL(ab, c.infer<g::MatmulOp>(a, b));
  TESSERA_ASSIGN_OR_FAIL(sab, scaled(c, ab, alpha));
  if (beta == 0)
    return c.setResult(sab);
  TESSERA_ASSIGN_OR_FAIL(ss, scaled(c, self, beta));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::AddOp>(sab, ss));
  return c.setResult(v);
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// A per-spatial-dim list: one value repeats for every dim.
FailureOr<Ints> spatial(OpContext &c, size_t i, int64_t k, StringRef what) {
  TESSERA_ASSIGN_OR_FAIL(v, c.getInts(i));
  if (v.size() == 1)
    v.assign(k, v.front());
  if (static_cast<int64_t>(v.size()) != k)
    return c.error() << what << " has " << v.size() << " entries, expected "
                     << k;
  return v;
}

Ints symmetricPads(ArrayRef<int64_t> pads) {
  Ints out(pads.begin(), pads.end());
  out.append(pads.begin(), pads.end());
  return out;
}

/// conv(input, weight, bias, stride, padding, dilation, groups) with
/// `transposed` already rejected; `padding` may be "same" or "valid".
LogicalResult convWith(OpContext &c, size_t strideArg, size_t padArg,
                       size_t dilationArg, size_t groupsArg) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(w, c.tensor(1));
  int64_t k = rankOf(w) - 2;
  if (k < 1 || rankOf(x) != k + 2)
    return c.error() << "input " << g::formatShape(shapeOf(x)) << " and weight "
                     << g::formatShape(shapeOf(w)) << " do not make a convolution";
  TESSERA_ASSIGN_OR_FAIL(strides, spatial(c, strideArg, k, "stride"));
  TESSERA_ASSIGN_OR_FAIL(dilations, spatial(c, dilationArg, k, "dilation"));
  TESSERA_ASSIGN_OR_FAIL(groups, c.getInt(groupsArg));
  Ints pads;
  const ImportedValue &pad = c.input(padArg);
  if (pad.kind == ImportedValue::Kind::Constant && pad.constant.isString()) {
    std::string mode = pad.constant.toStringRef();
    pads.assign(2 * k, 0);
    if (mode == "same") {
      for (int64_t i = 0; i < k; ++i) {
        int64_t total = dilations[i] * (shapeOf(w)[2 + i] - 1);
        pads[i] = total / 2;
        pads[k + i] = total - total / 2;
      }
    } else if (mode != "valid") {
      return c.error() << "padding must be 'same', 'valid' or numbers, got '"
                       << mode << "'";
    }
  } else {
    TESSERA_ASSIGN_OR_FAIL(p, spatial(c, padArg, k, "padding"));
    pads = symmetricPads(p);
  }
  Value bias;
  if (!c.isNone(2)) {
    TESSERA_ASSIGN_OR_FAIL(b, c.tensor(2));
    bias = b;
  }
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, c.infer<g::ConvOp>(x, w, bias, b.getDenseI64ArrayAttr(strides),
                            b.getDenseI64ArrayAttr(pads),
                            b.getDenseI64ArrayAttr(dilations),
                            b.getI64IntegerAttr(groups)));
  return c.setResult(v);
}

/// A transposed convolution: input N x C x spatial, weight C x M/groups x
/// window; stride, padding, output_padding, groups and dilation at the
/// given argument positions.
LogicalResult convTransposeWith(OpContext &c, size_t strideArg, size_t padArg,
                                size_t outPadArg, size_t groupsArg, size_t dilationArg) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(w, c.tensor(1));
  int64_t k = rankOf(w) - 2;
  Ints xs(shapeOf(x)), ws(shapeOf(w));
  TESSERA_ASSIGN_OR_FAIL(groups, c.getInt(groupsArg));
  if (k < 1 || rankOf(x) != k + 2 || groups < 1 || xs[1] != ws[0] || ws[0] % groups)
    return c.error() << "input " << g::formatShape(xs) << " and weight " << g::formatShape(ws)
                     << " do not make a transposed convolution in " << groups << " groups";
  TESSERA_ASSIGN_OR_FAIL(strides, spatial(c, strideArg, k, "stride"));
  TESSERA_ASSIGN_OR_FAIL(pads, spatial(c, padArg, k, "padding"));
  TESSERA_ASSIGN_OR_FAIL(outPad, spatial(c, outPadArg, k, "output_padding"));
  TESSERA_ASSIGN_OR_FAIL(dilations, spatial(c, dilationArg, k, "dilation"));
  Ints out{xs[0], groups * ws[1]};
  for (int64_t i = 0; i < k; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || outPad[i] < 0 ||
        outPad[i] >= std::max(strides[i], dilations[i]))
      return c.error() << "strides and dilations must be positive and output_padding "
                          "smaller than the stride or the dilation";
    out.push_back((xs[2 + i] - 1) * strides[i] - 2 * pads[i] +
                  dilations[i] * (ws[2 + i] - 1) + outPad[i] + 1);
    if (out.back() < 1)
      return c.error() << "padding " << g::formatShape(pads) << " leaves no output";
  }
  g::GraphEmitter e(c.builder(), c.loc());
  Value v = e.convTranspose(x, w, out, strides, pads, dilations, groups);
  if (!c.isNone(2)) {
    TESSERA_ASSIGN_OR_FAIL(bias, c.tensor(2));
    Ints biasShape(k + 2, 1);
    biasShape[1] = out[1];
    v = e.add(v, e.reshape(bias, biasShape));
  }
  if (e.failed() || !v)
    return c.error() << "could not build the transposed convolution";
  return c.setResult(v);
}

/// _convolution / convolution(input, weight, bias, stride, padding,
/// dilation, transposed, output_padding, groups, ...)
LogicalResult convolution(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(transposed, c.getBool(6));
  if (transposed)
    return convTransposeWith(c, 3, 4, 7, 8, 5);
  return convWith(c, 3, 4, 5, 8);
}

/// conv_transpose1d/2d/3d(input, weight, bias, stride, padding,
/// output_padding, groups, dilation)
LogicalResult convTransposeNd(OpContext &c) { return convTransposeWith(c, 3, 4, 5, 6, 7); }

/// conv1d/2d/3d(input, weight, bias, stride, padding, dilation, groups)
LogicalResult convNd(OpContext &c) { return convWith(c, 3, 4, 5, 6); }

/// upsample_{nearest,linear,bilinear,trilinear}Nd and
/// _upsample_nearest_exactNd: F.interpolate. The output size is given, or
/// computed from scale factors (floor(size x factor)); an output coordinate
/// maps back by the given factor, or by output / input, as PyTorch does.
/// Arguments: (input, output_size?, [align_corners,] scale_factors?) or
/// the older (input, output_size, [align_corners,] scales_d...).
LogicalResult upsample(OpContext &c, g::ResizeMode mode, bool alignCornersArg, bool exact) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  Ints in(shapeOf(x));
  int64_t k = static_cast<int64_t>(in.size()) - 2;
  if (k < 1)
    return c.error() << "interpolation needs N x C x spatial..., got " << g::formatShape(in);
  size_t at = 2;
  bool alignCorners = false;
  if (alignCornersArg) {
    TESSERA_ASSIGN_OR_FAIL(a, c.getBool(at));
    alignCorners = a;
    ++at;
  }
  // Scale factors: one list, or one optional double per spatial dim.
  SmallVector<std::optional<double>> factors(k);
  const ImportedValue &given = c.input(std::min(at, c.numInputs() - 1));
  if (at < c.numInputs() && given.kind == ImportedValue::Kind::Constant &&
      given.constant.isDoubleList()) {
    auto list = given.constant.toDoubleList();
    if (static_cast<int64_t>(list.size()) != k)
      return c.error() << "scale_factors has " << list.size() << " entries, expected " << k;
    for (int64_t i = 0; i < k; ++i)
      factors[i] = list[i];
  } else {
    for (int64_t i = 0; i < k && at + i < c.numInputs(); ++i)
      if (!c.isNone(at + i)) {
        TESSERA_ASSIGN_OR_FAIL(f, c.getDouble(at + i));
        factors[i] = f;
      }
  }
  Ints out(in.begin(), in.begin() + 2);
  SmallVector<double> scales{1.0, 1.0};
  if (!c.isNone(1)) {
    TESSERA_ASSIGN_OR_FAIL(size, spatial(c, 1, k, "output_size"));
    for (int64_t i = 0; i < k; ++i) {
      out.push_back(size[i]);
      scales.push_back(factors[i] ? *factors[i] : double(size[i]) / in[2 + i]);
    }
  } else {
    for (int64_t i = 0; i < k; ++i) {
      if (!factors[i])
        return c.error() << "interpolation needs an output size or scale factors";
      out.push_back(static_cast<int64_t>(std::floor(in[2 + i] * *factors[i])));
      scales.push_back(*factors[i]);
    }
  }
  for (int64_t i = 0; i < k; ++i)
    if (out[2 + i] < 1 || !(scales[2 + i] > 0))
      return c.error() << "interpolation to " << g::formatShape(out) << " is empty";
  g::CoordinateTransform transform =
      mode == g::ResizeMode::nearest
          ? (exact ? g::CoordinateTransform::half_pixel : g::CoordinateTransform::asymmetric)
      : alignCorners ? g::CoordinateTransform::align_corners
                     : g::CoordinateTransform::pytorch_half_pixel;
  g::NearestMode nearest =
      exact ? g::NearestMode::round_prefer_ceil : g::NearestMode::floor;
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, c.build<g::ResizeOp>(cast<RankedTensorType>(x.getType()).clone(out), x,
                              b.getDenseF64ArrayAttr(scales),
                              g::ResizeModeAttr::get(c.context(), mode),
                              g::CoordinateTransformAttr::get(c.context(), transform),
                              g::NearestModeAttr::get(c.context(), nearest),
                              b.getF64FloatAttr(-0.75), b.getBoolAttr(false)));
  return c.setResult(v);
}

/// aten::lstm / gru / rnn_tanh / rnn_relu (the `.input` overloads): nn.LSTM,
/// nn.GRU and nn.RNN, stacked and bidirectional, unrolled by the builder the
/// ONNX importer uses, with PyTorch's weights reordered into ONNX's gate
/// order (LSTM i f g o -> i o f c; GRU r z n -> z r h, whose candidate
/// PyTorch computes as ONNX's linear_before_reset). Arguments: (input, hx,
/// params, has_biases, num_layers, dropout, train, bidirectional,
/// batch_first); hx is [h0, c0] for an LSTM, h0 otherwise, each
/// [layers x directions, batch, hidden]; params per layer and direction:
/// w_ih, w_hh[, b_ih, b_hh].
LogicalResult recurrent(OpContext &c, g::RecurrentCell cell, StringRef activation) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  if (c.numInputs() != 9 || c.isTensor(3))
    return c.unsupported("packed sequences (pack_padded_sequence) in a recurrent layer");
  SmallVector<Value> hx;
  if (cell == g::RecurrentCell::LSTM) {
    TESSERA_ASSIGN_OR_FAIL(list, c.tensorList(1));
    hx = list;
  } else {
    TESSERA_ASSIGN_OR_FAIL(h, c.tensor(1));
    hx = {h};
  }
  TESSERA_ASSIGN_OR_FAIL(params, c.tensorList(2));
  TESSERA_ASSIGN_OR_FAIL(hasBiases, c.getBool(3));
  TESSERA_ASSIGN_OR_FAIL(layers, c.getInt(4));
  TESSERA_ASSIGN_OR_FAIL(dropout, c.getDouble(5));
  TESSERA_ASSIGN_OR_FAIL(train, c.getBool(6));
  TESSERA_ASSIGN_OR_FAIL(bidirectional, c.getBool(7));
  TESSERA_ASSIGN_OR_FAIL(batchFirst, c.getBool(8));
  if (train && dropout > 0)
    return c.unsupported("dropout between the layers of a recurrent layer in training");
  int64_t dirs = bidirectional ? 2 : 1, perLayer = hasBiases ? 4 : 2;
  if (rankOf(x) != 3 || layers < 1 ||
      static_cast<int64_t>(params.size()) != layers * dirs * perLayer)
    return c.error() << "a recurrent layer needs a rank-3 input and " << perLayer
                     << " weights per layer and direction (projections are not supported), "
                     << "got " << g::formatShape(shapeOf(x)) << " and " << params.size();
  g::GraphEmitter e(c.builder(), c.loc());
  Value input = batchFirst ? e.transpose(x, {1, 0, 2}) : x;
  int64_t hidden = shapeOf(params[1])[1];
  int64_t gates = cell == g::RecurrentCell::LSTM ? 4 : cell == g::RecurrentCell::GRU ? 3 : 1;
  // PyTorch's gate blocks in ONNX's order.
  SmallVector<int64_t> order = cell == g::RecurrentCell::LSTM  ? SmallVector<int64_t>{0, 3, 1, 2}
                               : cell == g::RecurrentCell::GRU ? SmallVector<int64_t>{1, 0, 2}
                                                               : SmallVector<int64_t>{0};
  auto reorder = [&](Value v) {
    SmallVector<Value> blocks;
    for (int64_t k : order)
      blocks.push_back(e.sliceAxis(v, 0, k * hidden, (k + 1) * hidden));
    return e.concat(blocks, 0);
  };
  auto perDirection = [&](auto &&make) {
    SmallVector<Value> parts;
    for (int64_t d = 0; d < dirs; ++d) {
      Value v = make(d);
      ArrayRef<int64_t> shape = graph::shapeOf(v);
      SmallVector<int64_t> one{1};
      one.append(shape.begin(), shape.end());
      parts.push_back(e.reshape(v, one));
    }
    return e.concat(parts, 0);
  };
  SmallVector<g::RecurrentActivation> acts;
  for (int64_t d = 0; d < dirs; ++d) {
    if (cell != g::RecurrentCell::RNN)
      acts.push_back({"sigmoid"});
    acts.push_back({activation.str()});
    if (cell == g::RecurrentCell::LSTM)
      acts.push_back({"tanh"});
  }
  SmallVector<Value> finalH, finalC;
  for (int64_t l = 0; l < layers && !e.failed(); ++l) {
    auto param = [&](int64_t d, int64_t k) { return params[(l * dirs + d) * perLayer + k]; };
    g::RecurrentLayer layer;
    layer.cell = cell;
    ArrayRef<int64_t> xs = graph::shapeOf(input);
    if (xs[0] > g::kMaxUnrolledSteps)
      return c.error() << "a sequence of " << xs[0] << " steps: Tessera unrolls recurrences, "
                       << "over at most " << g::kMaxUnrolledSteps << " steps";
    layer.seq = xs[0];
    layer.batch = xs[1];
    layer.inputSize = xs[2];
    layer.hidden = hidden;
    layer.dirs = dirs;
    layer.elem = cast<RankedTensorType>(x.getType()).getElementType();
    layer.x = input;
    layer.w = perDirection([&](int64_t d) { return reorder(param(d, 0)); });
    layer.r = perDirection([&](int64_t d) { return reorder(param(d, 1)); });
    if (hasBiases)
      layer.b = perDirection([&](int64_t d) {
        return e.concat(ValueRange{reorder(param(d, 2)), reorder(param(d, 3))}, 0);
      });
    layer.h0 = e.sliceAxis(hx[0], 0, l * dirs, (l + 1) * dirs);
    if (cell == g::RecurrentCell::LSTM)
      layer.c0 = e.sliceAxis(hx[1], 0, l * dirs, (l + 1) * dirs);
    layer.unmaskedSteps = layer.seq;
    layer.linearBeforeReset = cell == g::RecurrentCell::GRU;
    layer.activations = acts;
    g::RecurrentResult r = g::buildRecurrent(e, layer);
    // Y [seq, dirs, batch, hidden] -> [seq, batch, dirs x hidden].
    input = e.reshape(e.transpose(r.y, {0, 2, 1, 3}),
                      {layer.seq, layer.batch, dirs * hidden});
    finalH.push_back(r.yh);
    if (r.yc)
      finalC.push_back(r.yc);
  }
  Value output = batchFirst ? e.transpose(input, {1, 0, 2}) : input;
  Value h = e.concat(finalH, 0);
  Value cState = finalC.empty() ? Value() : e.concat(finalC, 0);
  if (e.failed())
    return c.error() << "could not unroll the recurrent layer";
  if (failed(c.setResult(0, output)) || failed(c.setResult(1, h)))
    return failure();
  if (cState)
    return c.setResult(2, cState);
  return success();
}

/// broadcast_tensors(tensors): each expanded to their common shape (what
/// F.mse_loss and friends do before the loss).
LogicalResult broadcastTensors(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(tensors, c.tensorList(0));
  SmallVector<int64_t> shape;
  for (Value t : tensors) {
    auto common = g::broadcastShapes(shape, shapeOf(t));
    if (!common)
      return c.error() << "shapes " << g::formatShape(shape) << " and "
                       << g::formatShape(shapeOf(t)) << " do not broadcast";
    shape.assign(common->begin(), common->end());
  }
  g::GraphEmitter e(c.builder(), c.loc());
  std::vector<ImportedValue> out;
  for (Value t : tensors)
    out.push_back(ImportedValue::ofTensor(
        shapeOf(t) == ArrayRef<int64_t>(shape) ? t : e.expand(t, shape)));
  if (e.failed())
    return c.error() << "could not broadcast to " << g::formatShape(shape);
  return c.setResult(0, ImportedValue::ofSequence(std::move(out), false));
}

/// The window of a pooling op: (self, kernel_size, stride, padding, ...),
/// with an empty stride meaning the kernel size.
struct PoolWindow {
  Value input;
  Ints kernel, strides, pads;
};
FailureOr<PoolWindow> poolWindow(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  int64_t k = rankOf(x) - 2;
  if (k < 1)
    return c.error() << "input must be N x C x spatial..., got "
                     << g::formatShape(shapeOf(x));
  TESSERA_ASSIGN_OR_FAIL(kernel, spatial(c, 1, k, "kernel_size"));
  TESSERA_ASSIGN_OR_FAIL(given, c.getInts(2));
  Ints strides = given;
  if (given.empty())
    strides = kernel;
  else if (given.size() == 1)
    strides.assign(k, given.front());
  TESSERA_ASSIGN_OR_FAIL(pads, spatial(c, 3, k, "padding"));
  return PoolWindow{x, kernel, strides, symmetricPads(pads)};
}

/// max_poolNd(self, kernel_size, stride, padding, dilation, ceil_mode)
LogicalResult maxPool(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(w, poolWindow(c));
  int64_t k = w.kernel.size();
  TESSERA_ASSIGN_OR_FAIL(dilations, spatial(c, 4, k, "dilation"));
  TESSERA_ASSIGN_OR_FAIL(ceil, c.getBool(5));
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, c.infer<g::MaxPoolOp>(w.input, b.getDenseI64ArrayAttr(w.kernel),
                               b.getDenseI64ArrayAttr(w.strides),
                               b.getDenseI64ArrayAttr(w.pads),
                               b.getDenseI64ArrayAttr(dilations),
                               b.getBoolAttr(ceil)));
  return c.setResult(v);
}

/// avg_poolNd(self, kernel_size, stride, padding, ceil_mode,
/// count_include_pad, divisor_override)
LogicalResult avgPool(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(w, poolWindow(c));
  int64_t k = w.kernel.size();
  TESSERA_ASSIGN_OR_FAIL(ceil, c.getBool(4));
  TESSERA_ASSIGN_OR_FAIL(includePad, c.getBool(5));
  if (c.numInputs() > 6 && !c.isNone(6))
    return c.unsupported("avg_pool with divisor_override");
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(
      v, c.infer<g::AvgPoolOp>(w.input, b.getDenseI64ArrayAttr(w.kernel),
                               b.getDenseI64ArrayAttr(w.strides),
                               b.getDenseI64ArrayAttr(w.pads),
                               b.getDenseI64ArrayAttr(Ints(k, 1)),
                               b.getBoolAttr(ceil), b.getBoolAttr(includePad)));
  return c.setResult(v);
}

/// adaptive_{avg,max}_poolNd(self, output_size): a global reduction or a
/// plain pooling when every input size is a multiple of the output size.
template <typename ReduceOp, bool Max>
LogicalResult adaptivePool(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(outSize, c.getInts(1));
  int64_t k = outSize.size();
  if (k < 1 || rankOf(x) < k + 1)
    return c.error() << "output_size has " << k << " entries for input "
                     << g::formatShape(shapeOf(x));
  int64_t first = rankOf(x) - k;
  ArrayRef<int64_t> in = shapeOf(x).drop_front(first);
  bool global = llvm::all_of(outSize, [](int64_t s) { return s == 1; });
  if (global) {
    Ints axes;
    for (int64_t d = first; d < rankOf(x); ++d)
      axes.push_back(d);
    TESSERA_ASSIGN_OR_FAIL(v, c.infer<ReduceOp>(x, c.builder().getDenseI64ArrayAttr(axes),
                                                   c.builder().getBoolAttr(true)));
    if (Max && c.node()->outputs().size() > 1 && c.node()->output(1)->hasUses())
      return c.unsupported("the indices of adaptive_max_pool");
    return c.setResult(v);
  }
  Ints kernel;
  for (int64_t i = 0; i < k; ++i) {
    if (outSize[i] <= 0 || in[i] % outSize[i] != 0)
      return c.unsupported("adaptive pooling from " + g::formatShape(in) +
                           " to " + g::formatShape(outSize) +
                           " (sizes that are not multiples)");
    kernel.push_back(in[i] / outSize[i]);
  }
  if (Max && c.node()->outputs().size() > 1 && c.node()->output(1)->hasUses())
    return c.unsupported("the indices of adaptive_max_pool");
  Value input = x;
  bool batched = rankOf(x) == k + 2;
  if (!batched) { // C x spatial: add N
    Ints s = {1};
    s.append(shapeOf(x).begin(), shapeOf(x).end());
    TESSERA_ASSIGN_OR_FAIL(r, c.reshape(x, s));
    input = r;
  }
  auto &b = c.builder();
  Value v;
  if (Max) {
    TESSERA_ASSIGN_OR_FAIL(
        p, c.infer<g::MaxPoolOp>(input, b.getDenseI64ArrayAttr(kernel),
                                 b.getDenseI64ArrayAttr(kernel),
                                 b.getDenseI64ArrayAttr(Ints(2 * k, 0)),
                                 b.getDenseI64ArrayAttr(Ints(k, 1)),
                                 b.getBoolAttr(false)));
    v = p;
  } else {
    TESSERA_ASSIGN_OR_FAIL(
        p, c.infer<g::AvgPoolOp>(input, b.getDenseI64ArrayAttr(kernel),
                                 b.getDenseI64ArrayAttr(kernel),
                                 b.getDenseI64ArrayAttr(Ints(2 * k, 0)),
                                 b.getDenseI64ArrayAttr(Ints(k, 1)),
                                 b.getBoolAttr(false), b.getBoolAttr(true)));
    v = p;
  }
  if (!batched) {
    TESSERA_ASSIGN_OR_FAIL(r, c.reshape(v, shapeOf(v).drop_front()));
    v = r;
  }
  return c.setResult(v);
}

//===----------------------------------------------------------------------===//
// Normalisation and softmax
//===----------------------------------------------------------------------===//

/// An optional per-channel parameter, or a splat of `fill`.
FailureOr<Value> parameterOr(OpContext &c, size_t i, Type elem,
                             ArrayRef<int64_t> shape, double fill) {
  if (c.isNone(i))
    return c.splat(elem, shape, fill);
  return c.tensor(i);
}

/// batch_norm(input, weight, bias, running_mean, running_var, training,
/// momentum, eps, cudnn_enabled)
LogicalResult batchNorm(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(training, c.getBool(5));
  if (training && !c.training())
    return c.unsupported("batch_norm with batch statistics (training mode, "
                         "or track_running_stats=False) in an inference "
                         "model (call model.eval() before saving, or compile "
                         "with --train)");
  if (c.isNone(3) || c.isNone(4))
    return c.unsupported("batch_norm without running statistics "
                         "(track_running_stats=False)");
  if (rankOf(x) < 2)
    return c.error() << "input must be N x C x ..., got "
                     << g::formatShape(shapeOf(x));
  Type elem = elementOf(x);
  int64_t channels = shapeOf(x)[1];
  TESSERA_ASSIGN_OR_FAIL(scale, parameterOr(c, 1, elem, {channels}, 1));
  TESSERA_ASSIGN_OR_FAIL(bias, parameterOr(c, 2, elem, {channels}, 0));
  TESSERA_ASSIGN_OR_FAIL(mean, c.tensor(3));
  TESSERA_ASSIGN_OR_FAIL(var, c.tensor(4));
  TESSERA_ASSIGN_OR_FAIL(eps, c.getDouble(7));
  if (training) {
    TESSERA_ASSIGN_OR_FAIL(momentum, c.getDouble(6));
    TESSERA_ASSIGN_OR_FAIL(bn, g::createTrainingBatchNorm(c.builder(), c.loc(), x,
                                                          scale, bias, mean, var,
                                                          momentum, eps));
    // The running statistics are module buffers, updated in place.
    auto rebind = [&](Value from, Value to) { c.rebind(from, to); };
    g::storeBackToGlobal(c.builder(), c.loc(), mean, bn.runningMean, rebind);
    g::storeBackToGlobal(c.builder(), c.loc(), var, bn.runningVar, rebind);
    return c.setResult(bn.output);
  }
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::BatchNormOp>(
                                   x, scale, bias, mean, var,
                                   c.builder().getF64FloatAttr(eps)));
  return c.setResult(v);
}

/// layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
LogicalResult layerNorm(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(normalized, c.getInts(1));
  int64_t axis = rankOf(x) - static_cast<int64_t>(normalized.size());
  if (axis < 0 || shapeOf(x).drop_front(axis) != ArrayRef<int64_t>(normalized))
    return c.error() << "normalized_shape " << g::formatShape(normalized)
                     << " is not the trailing shape of the input "
                     << g::formatShape(shapeOf(x));
  Type elem = elementOf(x);
  TESSERA_ASSIGN_OR_FAIL(scale, parameterOr(c, 2, elem, normalized, 1));
  TESSERA_ASSIGN_OR_FAIL(bias, parameterOr(c, 3, elem, normalized, 0));
  TESSERA_ASSIGN_OR_FAIL(eps, c.getDouble(4));
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::LayerNormOp>(
                                   x, scale, bias, b.getI64IntegerAttr(axis),
                                   b.getF64FloatAttr(eps)));
  return c.setResult(v);
}

/// graph.group_norm of input 0 with the optional per-channel weight and
/// bias at `weightArg` and `weightArg + 1` and the epsilon at `epsArg`.
LogicalResult groupNormOf(OpContext &c, Value x, int64_t groups,
                          size_t weightArg, size_t epsArg) {
  int64_t channels = shapeOf(x)[1];
  Type elem = elementOf(x);
  TESSERA_ASSIGN_OR_FAIL(scale, parameterOr(c, weightArg, elem, {channels}, 1));
  TESSERA_ASSIGN_OR_FAIL(bias, parameterOr(c, weightArg + 1, elem, {channels}, 0));
  TESSERA_ASSIGN_OR_FAIL(eps, c.getDouble(epsArg));
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::GroupNormOp>(
                                x, scale, bias, b.getI64IntegerAttr(groups),
                                b.getF64FloatAttr(eps)));
  return c.setResult(v);
}

/// group_norm(input, num_groups, weight, bias, eps, cudnn_enabled)
LogicalResult groupNorm(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(groups, c.getInt(1));
  if (rankOf(x) < 2)
    return c.error() << "input must be N x C x ..., got "
                     << g::formatShape(shapeOf(x));
  return groupNormOf(c, x, groups, 2, 4);
}

/// instance_norm(input, weight, bias, running_mean, running_var,
/// use_input_stats, momentum, eps, cudnn_enabled): one group per channel.
LogicalResult instanceNorm(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(useInputStats, c.getBool(5));
  if (!useInputStats)
    return c.unsupported("instance_norm with running statistics");
  if (rankOf(x) < 3)
    return c.error() << "input must be N x C x spatial..., got "
                     << g::formatShape(shapeOf(x));
  return groupNormOf(c, x, shapeOf(x)[1], 1, 7);
}

/// softmax / log_softmax(self, dim, dtype)
template <typename OpTy> LogicalResult softmax(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(dim, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(dim, rankOf(x)));
  if (c.numInputs() > 2 && !c.isNone(2)) {
    TESSERA_ASSIGN_OR_FAIL(d, c.getInt(2));
    Type t = elementTypeOf(static_cast<c10::ScalarType>(d), c.context());
    if (!t)
      return c.unsupported("this dtype");
    TESSERA_ASSIGN_OR_FAIL(xc, c.castTo(x, t));
    x = xc;
  }
  TESSERA_ASSIGN_OR_FAIL(v, c.build<OpTy>(x.getType(), x,
                                             c.builder().getI64IntegerAttr(axis)));
  return c.setResult(v);
}

//===----------------------------------------------------------------------===//
// Losses: a traced training step computes its own (the Python API's
// trainingModel, whose model returns its loss).
//===----------------------------------------------------------------------===//

/// at::Reduction: 0 none, 1 mean, 2 sum.
FailureOr<graph::LossReduction> lossReduction(OpContext &c, size_t i) {
  TESSERA_ASSIGN_OR_FAIL(r, c.getInt(i));
  switch (r) {
  case 0: return graph::LossReduction::None;
  case 1: return graph::LossReduction::Mean;
  case 2: return graph::LossReduction::Sum;
  }
  return c.error() << "loss reduction " << r << " is not none (0), mean (1) or sum (2)";
}

/// aten::cross_entropy_loss(scores, target, weight, reduction, ignore_index,
/// label_smoothing) and aten::nll_loss(_nd)(log_probs, target, weight,
/// reduction, ignore_index), over N x C scores (or C, one sample) and
/// class-index targets.
LogicalResult classLoss(OpContext &c, bool fromLogits) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(target, c.tensor(1));
  if (!c.isNone(2))
    return c.unsupported("class weights in a loss");
  TESSERA_ASSIGN_OR_FAIL(reduction, lossReduction(c, 3));
  TESSERA_ASSIGN_OR_FAIL(ignoreIndex, c.getInt(4));
  double smoothing = 0;
  if (fromLogits && c.numInputs() > 5 && !c.isNone(5)) {
    TESSERA_ASSIGN_OR_FAIL(s, c.getDouble(5));
    smoothing = s;
  }
  auto targetType = cast<RankedTensorType>(target.getType());
  if (!isa<IntegerType>(targetType.getElementType()))
    return c.unsupported("class probabilities as targets (class indices only)");
  int64_t rank = rankOf(x);
  if (rank != 1 && rank != 2)
    return c.unsupported("a loss over scores of rank " + std::to_string(rank) +
                         " (N x C or C only)");
  graph::GraphEmitter e(c.builder(), c.loc());
  Value scores = x, labels = e.cast(target, c.builder().getI64Type());
  if (rank == 1) {
    scores = e.reshape(x, {1, graph::shapeOf(x)[0]});
    labels = e.reshape(labels, {1});
  }
  Value loss = graph::buildClassLoss(e, scores, labels, fromLogits, smoothing, ignoreIndex,
                                     reduction);
  if (rank == 1 && reduction == graph::LossReduction::None)
    loss = e.reshape(loss, {});
  if (e.failed() || !loss)
    return c.error() << "could not build the loss for scores " << x.getType()
                     << " and targets " << target.getType();
  return c.setResult(loss);
}

/// aten::mse_loss, aten::l1_loss (pred, target, reduction) and
/// aten::binary_cross_entropy_with_logits (pred, target, weight, pos_weight,
/// reduction).
LogicalResult regressionLoss(OpContext &c, StringRef kind) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(target, c.tensor(1));
  size_t reductionAt = 2;
  if (kind == "bce-with-logits") {
    if (!c.isNone(2) || !c.isNone(3))
      return c.unsupported("weight or pos_weight in binary_cross_entropy_with_logits");
    reductionAt = 4;
  }
  TESSERA_ASSIGN_OR_FAIL(reduction, lossReduction(c, reductionAt));
  if (x.getType() != target.getType())
    return c.error() << "the loss's prediction " << x.getType() << " and target "
                     << target.getType() << " differ";
  graph::GraphEmitter e(c.builder(), c.loc());
  Value loss = graph::buildRegressionLoss(e, kind, x, target, reduction);
  if (e.failed() || !loss)
    return c.error() << "could not build the " << kind << " loss for " << x.getType();
  return c.setResult(loss);
}

/// smooth_l1_loss(self, target, reduction, beta), huber_loss(self, target,
/// reduction, delta), soft_margin_loss(self, target, reduction) and
/// kl_div(self, target, reduction, log_target): graph::buildRegressionLoss.
LogicalResult parametricLoss(OpContext &c) {
  std::string kind = c.kind();
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(target, c.tensor(1));
  TESSERA_ASSIGN_OR_FAIL(reduction, lossReduction(c, 2));
  if (x.getType() != target.getType())
    return c.error() << "the loss's prediction " << x.getType() << " and target "
                     << target.getType() << " differ";
  StringRef lossKind = kind == "aten::smooth_l1_loss" ? "smooth-l1"
                       : kind == "aten::huber_loss"   ? "huber"
                       : kind == "aten::soft_margin_loss" ? "soft-margin"
                                                          : "kl-div";
  double parameter = 1.0;
  if (lossKind == "kl-div") {
    TESSERA_ASSIGN_OR_FAIL(logTarget, c.getBool(3));
    if (logTarget)
      lossKind = "kl-div-log-target";
  } else if (lossKind != "soft-margin" && c.numInputs() > 3) {
    TESSERA_ASSIGN_OR_FAIL(p, c.getDouble(3));
    if (p < 0 || (lossKind == "huber" && p == 0))
      return c.error() << (lossKind == "huber" ? "delta" : "beta") << " must be "
                       << (lossKind == "huber" ? "positive" : "non-negative") << ", got " << p;
    parameter = p;
  }
  graph::GraphEmitter e(c.builder(), c.loc());
  Value loss = graph::buildRegressionLoss(e, lossKind, x, target, reduction, parameter);
  if (e.failed() || !loss)
    return c.error() << "could not build the " << lossKind << " loss for " << x.getType();
  return c.setResult(loss);
}

/// The p-norm of `d` over `axis` (p > 0).
Value pNorm(graph::GraphEmitter &e, Value d, double p, int64_t axis, bool keepdim) {
  if (p == 2)
    return e.sqrt(e.reduceSum(e.mul(d, d), {axis}, keepdim));
  if (p == 1)
    return e.reduceSum(e.abs(d), {axis}, keepdim);
  return e.pow(e.reduceSum(e.pow(e.abs(d), e.scalar(d, p)), {axis}, keepdim),
               e.scalar(d, 1 / p));
}

/// pairwise_distance(x1, x2, p, eps, keepdim): ||x1 - x2 + eps||_p over the
/// last dim.
LogicalResult pairwiseDistance(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(p, c.getDouble(2));
  TESSERA_ASSIGN_OR_FAIL(eps, c.getDouble(3));
  TESSERA_ASSIGN_OR_FAIL(keepdim, c.getBool(4));
  if (p <= 0)
    return c.unsupported("a p-norm with p <= 0");
  graph::GraphEmitter e(c.builder(), c.loc());
  Value d = e.addScalar(e.sub(operands.first, operands.second), eps);
  int64_t last = rankOf(d) - 1;
  Value v = pNorm(e, d, p, last, keepdim);
  if (e.failed())
    return failure();
  return c.setResult(v);
}

/// cosine_similarity(x1, x2, dim, eps): x1.x2 / sqrt(max(|x1|^2 |x2|^2, eps^2)).
LogicalResult cosineSimilarity(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(2));
  TESSERA_ASSIGN_OR_FAIL(eps, c.getDouble(3));
  auto [a, b] = operands;
  graph::GraphEmitter e(c.builder(), c.loc());
  Value ab = e.mul(a, b); // the broadcast shape
  if (e.failed())
    return failure();
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(ab)));
  Value dot = e.reduceSum(ab, {axis}, false);
  Value aa = e.reduceSum(e.mul(a, a), {axis}, false);
  Value bb = e.reduceSum(e.mul(b, b), {axis}, false);
  Value denom = e.sqrt(e.max(e.mul(aa, bb), e.scalar(dot, eps * eps)));
  Value v = e.div(dot, denom);
  if (e.failed())
    return failure();
  return c.setResult(v);
}

/// cdist(x1, x2, p, compute_mode): the p-norm distance between every row of
/// x1 [..., P, M] and every row of x2 [..., R, M], [..., P, R].
LogicalResult cdist(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(p, c.getDouble(2));
  auto [a, b] = operands;
  if (rankOf(a) < 2 || rankOf(a) != rankOf(b))
    return c.error() << "takes two tensors of the same rank, at least 2";
  if (p <= 0)
    return c.unsupported("a p-norm with p <= 0");
  int64_t r = rankOf(a);
  Ints aShape(shapeOf(a).begin(), shapeOf(a).end()), bShape(shapeOf(b).begin(),
                                                            shapeOf(b).end());
  aShape.insert(aShape.begin() + r - 1, 1); // [..., P, 1, M]
  bShape.insert(bShape.begin() + r - 2, 1); // [..., 1, R, M]
  graph::GraphEmitter e(c.builder(), c.loc());
  Value d = e.sub(e.reshape(a, aShape), e.reshape(b, bShape));
  Value v = pNorm(e, d, p, r, false);
  if (e.failed())
    return failure();
  return c.setResult(v);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The dims of a reduction: `dim` (int, list, or None/empty for all).
FailureOr<Ints> reductionAxes(OpContext &c, size_t i, int64_t rank) {
  Ints dims;
  if (!c.isNone(i)) {
    TESSERA_ASSIGN_OR_FAIL(d, c.getInts(i));
    dims = d;
  }
  Ints axes;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
    return axes;
  }
  for (int64_t d : dims) {
    TESSERA_ASSIGN_OR_FAIL(n, c.normalizeDim(d, rank));
    if (llvm::is_contained(axes, n))
      return c.error() << "dim " << d << " appears twice";
    axes.push_back(n);
  }
  llvm::sort(axes);
  return axes;
}

/// The axes and keepdim of a reduction overloaded as (self, ...) over
/// everything or (self, dim, keepdim, ...): `dimArg` and `keepdimArg` when
/// the node has the dim overload (more than `dimArg` + 1 inputs).
struct ReductionDims {
  Ints axes;
  bool keepdim = false;
};
FailureOr<ReductionDims> reductionDims(OpContext &c, int64_t rank, size_t dimArg,
                                       size_t keepdimArg) {
  ReductionDims r;
  if (c.numInputs() <= keepdimArg) {
    for (int64_t d = 0; d < rank; ++d)
      r.axes.push_back(d);
    return r;
  }
  TESSERA_ASSIGN_OR_FAIL(axes, reductionAxes(c, dimArg, rank));
  TESSERA_ASSIGN_OR_FAIL(keepdim, c.getBool(keepdimArg));
  r.axes = axes;
  r.keepdim = keepdim;
  return r;
}

/// mean/sum(self, dim, keepdim, dtype) or mean/sum(self, dtype).
template <typename OpTy> LogicalResult reduce(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  bool all = c.numInputs() <= 2; // the (self, dtype) overload
  size_t dtypeArg = all ? 1 : 3;
  if (c.numInputs() > dtypeArg && !c.isNone(dtypeArg)) {
    TESSERA_ASSIGN_OR_FAIL(d, c.getInt(dtypeArg));
    Type t = elementTypeOf(static_cast<c10::ScalarType>(d), c.context());
    if (!t)
      return c.unsupported("this dtype");
    TESSERA_ASSIGN_OR_FAIL(xc, c.castTo(x, t));
    x = xc;
  } else if ((std::is_same_v<OpTy, g::ReduceSumOp> ||
              std::is_same_v<OpTy, g::ReduceProdOp>) &&
             !isa<FloatType>(elementOf(x))) {
    // Integer and bool sums and products accumulate in int64.
    TESSERA_ASSIGN_OR_FAIL(xc, c.castTo(x, c.builder().getI64Type()));
    x = xc;
  }
  Ints axes;
  bool keepdim = false;
  if (all) {
    for (int64_t d = 0; d < rankOf(x); ++d)
      axes.push_back(d);
  } else {
    TESSERA_ASSIGN_OR_FAIL(a, reductionAxes(c, 1, rankOf(x)));
    axes = a;
    TESSERA_ASSIGN_OR_FAIL(k, c.getBool(2));
    keepdim = k;
  }
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<OpTy>(x, b.getDenseI64ArrayAttr(axes),
                                             b.getBoolAttr(keepdim)));
  return c.setResult(v);
}

/// amax/amin(self, dim, keepdim)
template <typename OpTy> LogicalResult reduceExtreme(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(axes, reductionAxes(c, 1, rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(keepdim, c.getBool(2));
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<OpTy>(x, b.getDenseI64ArrayAttr(axes),
                                             b.getBoolAttr(keepdim)));
  return c.setResult(v);
}

/// max/min: (self) over everything, (self, other) elementwise, or
/// (self, dim, keepdim) -> (values, indices).
template <typename ReduceOp, typename BinaryOp, typename ArgOp>
LogicalResult maxMin(OpContext &c) {
  if (c.numInputs() == 2 && c.isTensor(1))
    return binary<BinaryOp>(c);
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  auto &b = c.builder();
  if (c.numInputs() == 1) {
    Ints axes;
    for (int64_t d = 0; d < rankOf(x); ++d)
      axes.push_back(d);
    TESSERA_ASSIGN_OR_FAIL(v, c.infer<ReduceOp>(x, b.getDenseI64ArrayAttr(axes),
                                                   b.getBoolAttr(false)));
    return c.setResult(v);
  }
  TESSERA_ASSIGN_OR_FAIL(dim, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(dim, rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(keepdim, c.getBool(2));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<ReduceOp>(x, b.getDenseI64ArrayAttr({axis}),
                                                 b.getBoolAttr(keepdim)));
  if (failed(c.setResult(0, v)))
    return failure();
  if (!c.node()->output(1)->hasUses())
    return success();
  TESSERA_ASSIGN_OR_FAIL(i, c.infer<ArgOp>(x, b.getI64IntegerAttr(axis),
                                              b.getBoolAttr(keepdim),
                                              b.getBoolAttr(false)));
  return c.setResult(1, i);
}

/// argmax/argmin(self, dim, keepdim)
template <typename ArgOp> LogicalResult argReduce(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(keepdim, c.getBool(2));
  auto &b = c.builder();
  if (c.isNone(1)) { // over the flattened tensor
    TESSERA_ASSIGN_OR_FAIL(flat, c.reshape(x, {typeOf(x).getNumElements()}));
    TESSERA_ASSIGN_OR_FAIL(v, c.infer<ArgOp>(flat, b.getI64IntegerAttr(0),
                                                b.getBoolAttr(false),
                                                b.getBoolAttr(false)));
    return c.setResult(v);
  }
  TESSERA_ASSIGN_OR_FAIL(dim, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(dim, rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<ArgOp>(x, b.getI64IntegerAttr(axis),
                                              b.getBoolAttr(keepdim),
                                              b.getBoolAttr(false)));
  return c.setResult(v);
}

//===----------------------------------------------------------------------===//
// Shapes and data movement
//===----------------------------------------------------------------------===//

/// A shape with at most one -1, resolved against `numElements`.
FailureOr<Ints> resolveShape(OpContext &c, Ints shape, int64_t numElements) {
  int64_t known = 1, inferred = -1;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d == -1) {
      if (inferred >= 0)
        return c.error() << "only one dimension can be -1 in "
                         << g::formatShape(shape);
      inferred = i;
    } else if (d < 0) {
      return c.error() << "invalid size " << d;
    } else {
      known *= d;
    }
  }
  if (inferred >= 0) {
    if (known == 0 || numElements % known != 0)
      return c.error() << "shape " << g::formatShape(shape)
                       << " is invalid for " << numElements << " elements";
    shape[inferred] = numElements / known;
  } else if (known != numElements) {
    return c.error() << "shape " << g::formatShape(shape) << " is invalid for "
                     << numElements << " elements";
  }
  return shape;
}

/// view/reshape(self, shape)
LogicalResult view(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(shape, c.getInts(1));
  TESSERA_ASSIGN_OR_FAIL(resolved, resolveShape(c, shape, typeOf(x).getNumElements()));
  TESSERA_ASSIGN_OR_FAIL(v, c.reshape(x, resolved));
  return c.setResult(v);
}

LogicalResult viewAs(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(o, c.tensor(1));
  TESSERA_ASSIGN_OR_FAIL(v, c.reshape(x, shapeOf(o)));
  return c.setResult(v);
}

/// flatten(self, start_dim, end_dim)
LogicalResult flatten(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(s, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(e, c.getInt(2));
  int64_t rank = rankOf(x);
  if (rank == 0) {
    TESSERA_ASSIGN_OR_FAIL(v, c.reshape(x, {1}));
    return c.setResult(v);
  }
  TESSERA_ASSIGN_OR_FAIL(start, c.normalizeDim(s, rank));
  TESSERA_ASSIGN_OR_FAIL(end, c.normalizeDim(e, rank));
  if (start > end)
    return c.error() << "start_dim " << s << " comes after end_dim " << e;
  ArrayRef<int64_t> in = shapeOf(x);
  Ints shape(in.begin(), in.begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d)
    merged *= in[d];
  shape.push_back(merged);
  shape.append(in.begin() + end + 1, in.end());
  TESSERA_ASSIGN_OR_FAIL(v, c.reshape(x, shape));
  return c.setResult(v);
}

/// unflatten(self, dim, sizes)
LogicalResult unflatten(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(sizes, c.getInts(2));
  TESSERA_ASSIGN_OR_FAIL(dim, c.normalizeDim(d, rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(resolved, resolveShape(c, sizes, shapeOf(x)[dim]));
  Ints shape(shapeOf(x).begin(), shapeOf(x).begin() + dim);
  shape.append(resolved.begin(), resolved.end());
  shape.append(shapeOf(x).begin() + dim + 1, shapeOf(x).end());
  TESSERA_ASSIGN_OR_FAIL(v, c.reshape(x, shape));
  return c.setResult(v);
}

/// permute(self, dims)
LogicalResult permute(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(dims, c.getInts(1));
  if (static_cast<int64_t>(dims.size()) != rankOf(x))
    return c.error() << "dims has " << dims.size()
                     << " entries for a tensor of rank " << rankOf(x);
  Ints perm;
  for (int64_t d : dims) {
    TESSERA_ASSIGN_OR_FAIL(n, c.normalizeDim(d, rankOf(x)));
    perm.push_back(n);
  }
  TESSERA_ASSIGN_OR_FAIL(v, c.transpose(x, perm));
  return c.setResult(v);
}

/// transpose(self, dim0, dim1)
LogicalResult transposeDims(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  int64_t rank = rankOf(x);
  TESSERA_ASSIGN_OR_FAIL(d0, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(d1, c.getInt(2));
  if (rank == 0)
    return c.setResult(x);
  TESSERA_ASSIGN_OR_FAIL(a, c.normalizeDim(d0, rank));
  TESSERA_ASSIGN_OR_FAIL(b, c.normalizeDim(d1, rank));
  Ints perm;
  for (int64_t i = 0; i < rank; ++i)
    perm.push_back(i);
  std::swap(perm[a], perm[b]);
  TESSERA_ASSIGN_OR_FAIL(v, c.transpose(x, perm));
  return c.setResult(v);
}

/// unsqueeze(self, dim)
LogicalResult unsqueeze(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(dim, c.normalizeDim(d, rankOf(x) + 1));
  Ints shape(shapeOf(x).begin(), shapeOf(x).end());
  shape.insert(shape.begin() + dim, 1);
  TESSERA_ASSIGN_OR_FAIL(v, c.reshape(x, shape));
  return c.setResult(v);
}

/// squeeze(self) or squeeze(self, dim)
LogicalResult squeeze(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  ArrayRef<int64_t> in = shapeOf(x);
  Ints shape;
  if (c.numInputs() == 1) {
    for (int64_t s : in)
      if (s != 1)
        shape.push_back(s);
  } else {
    TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
    if (in.empty())
      return c.setResult(x);
    TESSERA_ASSIGN_OR_FAIL(dim, c.normalizeDim(d, rankOf(x)));
    for (auto [i, s] : llvm::enumerate(in))
      if (static_cast<int64_t>(i) != dim || s != 1)
        shape.push_back(s);
  }
  TESSERA_ASSIGN_OR_FAIL(v, c.reshape(x, shape));
  return c.setResult(v);
}

/// expand(self, size, implicit): -1 keeps a dim; new dims lead.
LogicalResult expandOp(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(size, c.getInts(1));
  ArrayRef<int64_t> in = shapeOf(x);
  if (size.size() < in.size())
    return c.error() << "cannot expand " << g::formatShape(in) << " to "
                     << size.size() << " dims";
  size_t lead = size.size() - in.size();
  for (size_t i = 0; i < size.size(); ++i)
    if (size[i] == -1) {
      if (i < lead)
        return c.error() << "-1 is not allowed for a new leading dimension";
      size[i] = in[i - lead];
    }
  if (!g::isBroadcastableTo(in, size))
    return c.error() << "cannot expand " << g::formatShape(in) << " to "
                     << g::formatShape(size);
  TESSERA_ASSIGN_OR_FAIL(v, c.expand(x, size));
  return c.setResult(v);
}

LogicalResult expandAs(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(o, c.tensor(1));
  if (!g::isBroadcastableTo(shapeOf(x), shapeOf(o)))
    return c.error() << "cannot expand " << g::formatShape(shapeOf(x)) << " to "
                     << g::formatShape(shapeOf(o));
  TESSERA_ASSIGN_OR_FAIL(v, c.expand(x, shapeOf(o)));
  return c.setResult(v);
}

/// repeat(self, repeats): tile by broadcasting an interleaved unit dim.
LogicalResult repeat(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(repeats, c.getInts(1));
  ArrayRef<int64_t> in = shapeOf(x);
  if (repeats.size() < in.size())
    return c.error() << "repeats has fewer entries than the tensor has dims";
  Ints padded(repeats.size() - in.size(), 1);
  padded.append(in.begin(), in.end());
  Ints unit, wide, out;
  for (auto [r, s] : llvm::zip(repeats, padded)) {
    unit.append({1, s});
    wide.append({r, s});
    out.push_back(r * s);
  }
  TESSERA_ASSIGN_OR_FAIL(u, c.reshape(x, unit));
  TESSERA_ASSIGN_OR_FAIL(w, c.expand(u, wide));
  TESSERA_ASSIGN_OR_FAIL(v, c.reshape(w, out));
  return c.setResult(v);
}

/// cat(tensors, dim)
LogicalResult cat(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(parts, c.tensorList(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  // Legacy: empty 1-d tensors are skipped.
  SmallVector<Value> inputs;
  for (Value p : parts)
    if (!(rankOf(p) == 1 && shapeOf(p)[0] == 0))
      inputs.push_back(p);
  if (inputs.empty())
    return c.error() << "needs at least one non-empty tensor";
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(inputs.front())));
  if (inputs.size() == 1)
    return c.setResult(inputs.front());
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::ConcatOp>(inputs, c.builder().getI64IntegerAttr(axis)));
  return c.setResult(v);
}

/// einsum(equation, tensors, path=None): the contraction order (path) does
/// not change the result of a one- or two-operand einsum.
LogicalResult einsum(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(equation, c.getString(0));
  TESSERA_ASSIGN_OR_FAIL(operands, c.tensorList(1));
  TESSERA_ASSIGN_OR_FAIL(v, g::createEinsum(c.builder(), c.loc(), equation, operands));
  return c.setResult(v);
}

/// stack(tensors, dim)
LogicalResult stack(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(parts, c.tensorList(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  if (parts.empty())
    return c.error() << "needs at least one tensor";
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(parts.front()) + 1));
  SmallVector<Value> inputs;
  for (Value p : parts) {
    Ints shape(shapeOf(p).begin(), shapeOf(p).end());
    shape.insert(shape.begin() + axis, 1);
    TESSERA_ASSIGN_OR_FAIL(r, c.reshape(p, shape));
    inputs.push_back(r);
  }
  if (inputs.size() == 1)
    return c.setResult(inputs.front());
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::ConcatOp>(inputs, c.builder().getI64IntegerAttr(axis)));
  return c.setResult(v);
}

/// x[start:end:step] along `axis` (start/end already clamped).
FailureOr<Value> sliceAxis(OpContext &c, Value x, int64_t axis, int64_t start,
                           int64_t end, int64_t step) {
  ArrayRef<int64_t> in = shapeOf(x);
  Ints starts(in.size(), 0), limits(in.begin(), in.end()), steps(in.size(), 1);
  starts[axis] = start;
  limits[axis] = end;
  steps[axis] = step;
  if (start == 0 && end == in[axis] && step == 1)
    return x;
  if (end <= start) { // empty: graph.slice needs a start inside the dim
    Ints shape(in.begin(), in.end());
    shape[axis] = 0;
    return c.splat(elementOf(x), shape, 0);
  }
  auto &b = c.builder();
  return c.infer<g::SliceOp>(x, b.getDenseI64ArrayAttr(starts),
                             b.getDenseI64ArrayAttr(limits),
                             b.getDenseI64ArrayAttr(steps));
}

/// Python slice bounds: negative counts from the end, then clamped.
int64_t clampIndex(int64_t i, int64_t size) {
  if (i < 0)
    i += size;
  return std::clamp<int64_t>(i, 0, size);
}

/// slice(self, dim, start, end, step)
LogicalResult slice(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  int64_t size = shapeOf(x)[axis];
  int64_t start = c.optionalInt(2).value_or(0);
  int64_t end = c.optionalInt(3).value_or(INT64_MAX);
  TESSERA_ASSIGN_OR_FAIL(step, c.getInt(4));
  if (step <= 0)
    return c.error() << "slice step must be positive, got " << step;
  TESSERA_ASSIGN_OR_FAIL(
      v, sliceAxis(c, x, axis, clampIndex(start, size), clampIndex(end, size), step));
  return c.setResult(v);
}

/// narrow(self, dim, start, length)
LogicalResult narrow(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(s, c.getInt(2));
  TESSERA_ASSIGN_OR_FAIL(length, c.getInt(3));
  int64_t size = shapeOf(x)[axis];
  int64_t start = s < 0 ? s + size : s;
  if (start < 0 || length < 0 || start + length > size)
    return c.error() << "narrow(" << s << ", " << length
                     << ") is out of range for a dim of " << size;
  TESSERA_ASSIGN_OR_FAIL(v, sliceAxis(c, x, axis, start, start + length, 1));
  return c.setResult(v);
}

/// select(self, dim, index): a slice of one, squeezed.
LogicalResult select(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  if (c.isTensor(2))
    return c.unsupported("select with a tensor index");
  TESSERA_ASSIGN_OR_FAIL(i, c.getInt(2));
  int64_t size = shapeOf(x)[axis];
  if (i < -size || i >= size)
    return c.error() << "index " << i << " is out of range for a dim of " << size;
  int64_t index = i < 0 ? i + size : i;
  TESSERA_ASSIGN_OR_FAIL(s, sliceAxis(c, x, axis, index, index + 1, 1));
  Ints shape(shapeOf(x).begin(), shapeOf(x).end());
  shape.erase(shape.begin() + axis);
  TESSERA_ASSIGN_OR_FAIL(v, c.reshape(s, shape));
  return c.setResult(v);
}

/// The pieces of `x` along `axis` with the given sizes, as a list result.
LogicalResult setPieces(OpContext &c, Value x, int64_t axis,
                        ArrayRef<int64_t> sizes) {
  std::vector<ImportedValue> pieces;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    TESSERA_ASSIGN_OR_FAIL(p, sliceAxis(c, x, axis, offset, offset + s, 1));
    pieces.push_back(ImportedValue::ofTensor(p));
    offset += s;
  }
  if (offset != shapeOf(x)[axis])
    return c.error() << "split sizes add up to " << offset << ", not "
                     << shapeOf(x)[axis];
  return c.setResult(0, ImportedValue::ofSequence(std::move(pieces), false));
}

/// chunk(self, chunks, dim)
LogicalResult chunk(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(chunks, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(2));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  if (chunks <= 0)
    return c.error() << "chunks must be positive, got " << chunks;
  int64_t size = shapeOf(x)[axis];
  int64_t each = (size + chunks - 1) / chunks;
  Ints sizes;
  for (int64_t offset = 0; offset < size; offset += each)
    sizes.push_back(std::min(each, size - offset));
  return setPieces(c, x, axis, sizes);
}

/// split(self, split_size | split_sizes, dim), split_with_sizes.
LogicalResult split(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(2));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  int64_t size = shapeOf(x)[axis];
  const ImportedValue &arg = c.input(1);
  Ints sizes;
  if (arg.kind == ImportedValue::Kind::Constant && arg.constant.isInt()) {
    int64_t each = arg.constant.toInt();
    if (each <= 0)
      return c.error() << "split_size must be positive, got " << each;
    for (int64_t offset = 0; offset < size; offset += each)
      sizes.push_back(std::min(each, size - offset));
  } else {
    TESSERA_ASSIGN_OR_FAIL(s, c.getInts(1));
    sizes = s;
  }
  return setPieces(c, x, axis, sizes);
}

/// unbind(self, dim)
LogicalResult unbind(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  Ints shape(shapeOf(x).begin(), shapeOf(x).end());
  shape.erase(shape.begin() + axis);
  std::vector<ImportedValue> pieces;
  for (int64_t i = 0; i < shapeOf(x)[axis]; ++i) {
    TESSERA_ASSIGN_OR_FAIL(s, sliceAxis(c, x, axis, i, i + 1, 1));
    TESSERA_ASSIGN_OR_FAIL(r, c.reshape(s, shape));
    pieces.push_back(ImportedValue::ofTensor(r));
  }
  return c.setResult(0, ImportedValue::ofSequence(std::move(pieces), false));
}

/// roll(self, shifts, dims): each shifted dim is two slices swapped; no
/// dims rolls the flattened tensor.
LogicalResult roll(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(shifts, c.getInts(1));
  TESSERA_ASSIGN_OR_FAIL(dims, c.getInts(2));
  Ints original(shapeOf(x).begin(), shapeOf(x).end());
  Value v = x;
  if (dims.empty()) {
    if (shifts.size() != 1)
      return c.error() << "without dims, shifts must hold one value";
    TESSERA_ASSIGN_OR_FAIL(flat, c.reshape(x, {typeOf(x).getNumElements()}));
    v = flat;
    dims.push_back(0);
  }
  if (shifts.size() != dims.size())
    return c.error() << "shifts and dims differ in length";
  for (auto [shift, d] : llvm::zip(shifts, dims)) {
    TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(v)));
    int64_t size = shapeOf(v)[axis];
    if (size == 0)
      continue;
    int64_t s = ((shift % size) + size) % size;
    if (s == 0)
      continue;
    TESSERA_ASSIGN_OR_FAIL(tail, sliceAxis(c, v, axis, size - s, size, 1));
    TESSERA_ASSIGN_OR_FAIL(head, sliceAxis(c, v, axis, 0, size - s, 1));
    TESSERA_ASSIGN_OR_FAIL(r, c.infer<g::ConcatOp>(ValueRange{tail, head},
                                                      c.builder().getI64IntegerAttr(axis)));
    v = r;
  }
  TESSERA_ASSIGN_OR_FAIL(out, c.reshape(v, original));
  return c.setResult(out);
}

/// index_select(self, dim, index)
LogicalResult indexSelect(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(index, c.tensor(2));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::GatherOp>(x, index,
                                                    c.builder().getI64IntegerAttr(axis)));
  return c.setResult(v);
}

/// embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
LogicalResult embedding(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(w, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(index, c.tensor(1));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::GatherOp>(w, index,
                                                    c.builder().getI64IntegerAttr(0)));
  return c.setResult(v);
}

/// gather(self, dim, index, sparse_grad)
LogicalResult gather(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(index, c.tensor(2));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::GatherElementsOp>(
                                   x, index, c.builder().getI64IntegerAttr(axis)));
  return c.setResult(v);
}

/// take_along_dim(self, indices, dim): gather along `dim`, the indices and
/// the input broadcast against each other in the other dims (numpy's
/// take_along_axis). Without a dim, both are flattened.
LogicalResult takeAlongDim(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(index, c.tensor(1));
  if (c.isNone(2)) {
    TESSERA_ASSIGN_OR_FAIL(fx, c.reshape(x, {typeOf(x).getNumElements()}));
    TESSERA_ASSIGN_OR_FAIL(fi, c.reshape(index, {typeOf(index).getNumElements()}));
    x = fx;
    index = fi;
  }
  int64_t d = 0;
  if (!c.isNone(2)) {
    TESSERA_ASSIGN_OR_FAIL(dim, c.getInt(2));
    d = dim;
  }
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  if (rankOf(index) != rankOf(x))
    return c.error() << "indices of rank " << rankOf(index) << " for an input of rank "
                     << rankOf(x) << ": they must have the same rank";
  // Broadcast each to the other's size in every dim but the axis.
  Ints xShape(shapeOf(x).begin(), shapeOf(x).end()), iShape(shapeOf(index).begin(),
                                                            shapeOf(index).end());
  for (int64_t k = 0; k < rankOf(x); ++k) {
    if (k == axis)
      continue;
    int64_t size = std::max(xShape[k], iShape[k]);
    if ((xShape[k] != size && xShape[k] != 1) || (iShape[k] != size && iShape[k] != 1))
      return c.error() << "input " << g::formatShape(shapeOf(x)) << " and indices "
                       << g::formatShape(shapeOf(index)) << " do not broadcast in dim " << k;
    xShape[k] = iShape[k] = size;
  }
  TESSERA_ASSIGN_OR_FAIL(xb, c.expand(x, xShape));
  TESSERA_ASSIGN_OR_FAIL(ib, c.expand(index, iShape));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::GatherElementsOp>(
                                   xb, ib, c.builder().getI64IntegerAttr(axis)));
  return c.setResult(v);
}

/// constant_pad_nd(self, pad, value) and pad(self, pad, mode, value); the
/// pad list runs from the last dim backwards, (before, after) per dim.
LogicalResult pad(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(pads, c.getInts(1));
  std::string mode = "constant";
  size_t valueArg = 2;
  if (c.kind() == "aten::pad") {
    TESSERA_ASSIGN_OR_FAIL(m, c.getString(2));
    mode = m;
    valueArg = 3;
  } else if (c.kind() == "aten::reflection_pad1d" ||
             c.kind() == "aten::reflection_pad2d" ||
             c.kind() == "aten::reflection_pad3d") {
    mode = "reflect";
  } else if (c.kind() == "aten::replication_pad1d" ||
             c.kind() == "aten::replication_pad2d" ||
             c.kind() == "aten::replication_pad3d") {
    mode = "replicate";
  }
  double value = 0;
  if (mode == "constant" && c.numInputs() > valueArg && !c.isNone(valueArg)) {
    TESSERA_ASSIGN_OR_FAIL(v, c.getDouble(valueArg));
    value = v;
  }
  int64_t rank = rankOf(x);
  if (pads.size() % 2 || static_cast<int64_t>(pads.size()) > 2 * rank)
    return c.error() << "pad has " << pads.size() << " entries for a tensor of rank "
                     << rank;
  Ints lo(rank, 0), hi(rank, 0);
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    lo[rank - 1 - i] = pads[2 * i];
    hi[rank - 1 - i] = pads[2 * i + 1];
    if (pads[2 * i] < 0 || pads[2 * i + 1] < 0)
      return c.unsupported("negative padding (cropping)");
  }
  g::PadMode padMode;
  if (mode == "constant")
    padMode = g::PadMode::constant;
  else if (mode == "reflect")
    padMode = g::PadMode::reflect;
  else if (mode == "replicate")
    padMode = g::PadMode::edge;
  else
    return c.unsupported("pad mode '" + mode + "'");
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::PadOp>(x, b.getDenseI64ArrayAttr(lo),
                                                 b.getDenseI64ArrayAttr(hi),
                                                 g::PadModeAttr::get(c.context(), padMode),
                                                 b.getF64FloatAttr(value)));
  return c.setResult(v);
}

/// zeros_like/ones_like(self, dtype, ...), full_like(self, fill_value,
/// dtype, ...), new_zeros/new_ones/new_empty(self, size, dtype, ...),
/// new_full(self, size, fill_value, dtype, ...): only the shape and dtype of
/// `self` matter, so the result is a compile-time constant, and later
/// in-place updates of it (masks built slice by slice) are evaluated by
/// libtorch too.
template <int Fill> LogicalResult filled(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  std::string kind = c.kind();
  bool isNew = StringRef(kind).starts_with("aten::new_");
  bool hasFill = kind == "aten::full_like" || kind == "aten::new_full";
  Ints shape(shapeOf(x).begin(), shapeOf(x).end());
  size_t next = 1;
  if (isNew) {
    TESSERA_ASSIGN_OR_FAIL(size, c.getInts(next++));
    shape = size;
  }
  double value = Fill;
  if (hasFill) {
    TESSERA_ASSIGN_OR_FAIL(v, c.getDouble(next++));
    value = v;
  }
  std::optional<c10::ScalarType> dtype = scalarTypeOf(elementOf(x));
  if (c.numInputs() > next && !c.isNone(next)) {
    TESSERA_ASSIGN_OR_FAIL(d, c.getInt(next));
    dtype = static_cast<c10::ScalarType>(d);
  }
  if (!dtype)
    return c.unsupported("this dtype");
  at::Tensor t = at::full(shape, value, at::TensorOptions().dtype(*dtype));
  return c.setResult(0, ImportedValue::ofConstant(t));
}

//===----------------------------------------------------------------------===//
// PyTorch's fused inference kernels (the "fast path" of nn.MultiheadAttention
// and nn.TransformerEncoderLayer taken under torch.no_grad()), decomposed
//===----------------------------------------------------------------------===//

/// x @ w^T + b
FailureOr<Value> linearOf(OpContext &c, Value x, Value w, Value b) {
  Value wt;
  if (failed(transposeLast2(c, w, wt)))
    return failure();
  TESSERA_ASSIGN_OR_FAIL(y, c.infer<g::MatmulOp>(x, wt));
  return c.infer<g::AddOp>(y, b);
}

/// Multi-head attention of batch-first [B, L, E] queries over [B, S, E]
/// keys/values with packed in-projection weights [3E, E]. Returns the
/// projected output and, if `weights` is set, the attention weights
/// ([B, H, L, S], or averaged over heads to [B, L, S]).
FailureOr<Value> attention(OpContext &c, Value query, Value key, Value value,
                           int64_t embed, int64_t heads, Value qkvWeight,
                           Value qkvBias, Value projWeight, Value projBias,
                           Value *weights = nullptr, bool average = true) {
  if (rankOf(query) != 3 || rankOf(key) != 3 || rankOf(value) != 3)
    return c.error() << "expects batch-first [B, L, E] inputs, got "
                     << g::formatShape(shapeOf(query));
  if (heads <= 0 || embed % heads)
    return c.error() << "embed_dim " << embed << " is not a multiple of "
                     << heads << " heads";
  int64_t headDim = embed / heads;
  auto project = [&](Value x, int64_t part, bool scale) -> FailureOr<Value> {
    TESSERA_ASSIGN_OR_FAIL(w, sliceAxis(c, qkvWeight, 0, part * embed,
                                           (part + 1) * embed, 1));
    TESSERA_ASSIGN_OR_FAIL(b, sliceAxis(c, qkvBias, 0, part * embed,
                                           (part + 1) * embed, 1));
    TESSERA_ASSIGN_OR_FAIL(y, linearOf(c, x, w, b));
    if (scale) {
      TESSERA_ASSIGN_OR_FAIL(sy, scaled(c, y, 1 / std::sqrt(double(headDim))));
      y = sy;
    }
    // [B, T, E] -> [B, H, T, D]
    ArrayRef<int64_t> s = shapeOf(y);
    TESSERA_ASSIGN_OR_FAIL(r, c.reshape(y, {s[0], s[1], heads, headDim}));
    return c.transpose(r, {0, 2, 1, 3});
  };
  TESSERA_ASSIGN_OR_FAIL(q, project(query, 0, true));
  TESSERA_ASSIGN_OR_FAIL(k, project(key, 1, false));
  TESSERA_ASSIGN_OR_FAIL(v, project(value, 2, false));
  TESSERA_ASSIGN_OR_FAIL(kt, c.transpose(k, {0, 1, 3, 2}));
  TESSERA_ASSIGN_OR_FAIL(scores, c.infer<g::MatmulOp>(q, kt));
  TESSERA_ASSIGN_OR_FAIL(probs, c.build<g::SoftmaxOp>(
                                       scores.getType(), scores,
                                       c.builder().getI64IntegerAttr(3)));
  TESSERA_ASSIGN_OR_FAIL(o, c.infer<g::MatmulOp>(probs, v));
  TESSERA_ASSIGN_OR_FAIL(ot, c.transpose(o, {0, 2, 1, 3}));
  ArrayRef<int64_t> qs = shapeOf(query);
  TESSERA_ASSIGN_OR_FAIL(merged, c.reshape(ot, {qs[0], qs[1], embed}));
  if (weights) {
    *weights = probs;
    if (average) {
      TESSERA_ASSIGN_OR_FAIL(
          m, c.infer<g::ReduceMeanOp>(probs, c.builder().getDenseI64ArrayAttr({1}),
                                      c.builder().getBoolAttr(false)));
      *weights = m;
    }
  }
  return linearOf(c, merged, projWeight, projBias);
}

/// _native_multi_head_attention(query, key, value, embed_dim, num_head,
/// qkv_weight, qkv_bias, proj_weight, proj_bias, mask, need_weights,
/// average_attn_weights, mask_type) -> (output, weights)
LogicalResult nativeMultiHeadAttention(OpContext &c) {
  if (!c.isNone(9))
    return c.unsupported("an attention mask in the fused attention kernel");
  SmallVector<Value> t;
  for (size_t i : {0, 1, 2, 5, 6, 7, 8}) {
    TESSERA_ASSIGN_OR_FAIL(v, c.tensor(i));
    t.push_back(v);
  }
  TESSERA_ASSIGN_OR_FAIL(embed, c.getInt(3));
  TESSERA_ASSIGN_OR_FAIL(heads, c.getInt(4));
  TESSERA_ASSIGN_OR_FAIL(needWeights, c.getBool(10));
  TESSERA_ASSIGN_OR_FAIL(average, c.getBool(11));
  bool wantWeights = needWeights && c.node()->output(1)->hasUses();
  Value weights;
  TESSERA_ASSIGN_OR_FAIL(out, attention(c, t[0], t[1], t[2], embed, heads,
                                           t[3], t[4], t[5], t[6],
                                           wantWeights ? &weights : nullptr,
                                           average));
  if (failed(c.setResult(0, out)))
    return failure();
  if (wantWeights)
    return c.setResult(1, weights);
  if (c.node()->output(1)->hasUses())
    return c.setResult(1, c.splat(elementOf(out), {0}, 0)); // PyTorch: empty
  return success();
}

/// _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight,
/// qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
/// norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
/// ffn_bias_1, ffn_weight_2, ffn_bias_2, mask, mask_type)
LogicalResult transformerEncoderLayer(OpContext &c) {
  if (!c.isNone(18))
    return c.unsupported("an attention mask in the fused encoder-layer kernel");
  SmallVector<Value> t(18);
  for (size_t i : {0, 3, 4, 5, 6, 10, 11, 12, 13, 14, 15, 16, 17}) {
    TESSERA_ASSIGN_OR_FAIL(v, c.tensor(i));
    t[i] = v;
  }
  TESSERA_ASSIGN_OR_FAIL(embed, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(heads, c.getInt(2));
  TESSERA_ASSIGN_OR_FAIL(useGelu, c.getBool(7));
  TESSERA_ASSIGN_OR_FAIL(normFirst, c.getBool(8));
  TESSERA_ASSIGN_OR_FAIL(eps, c.getDouble(9));
  Value src = t[0];
  if (rankOf(src) != 3)
    return c.error() << "expects batch-first [B, S, E] input, got "
                     << g::formatShape(shapeOf(src));
  auto &b = c.builder();
  auto norm = [&](Value x, Value w, Value bias) {
    return c.infer<g::LayerNormOp>(x, w, bias, b.getI64IntegerAttr(2),
                                   b.getF64FloatAttr(eps));
  };
  auto selfAttention = [&](Value x) {
    return attention(c, x, x, x, embed, heads, t[3], t[4], t[5], t[6]);
  };
  auto feedForward = [&](Value x) -> FailureOr<Value> {
    TESSERA_ASSIGN_OR_FAIL(h, linearOf(c, x, t[14], t[15]));
    Value act;
    if (useGelu) {
      TESSERA_ASSIGN_OR_FAIL(gl, geluOf(c, h, /*tanh=*/false));
      act = gl;
    } else {
      TESSERA_ASSIGN_OR_FAIL(r, c.build<g::ReluOp>(h.getType(), h));
      act = r;
    }
    return linearOf(c, act, t[16], t[17]);
  };
  Value x = src;
  if (normFirst) {
    TESSERA_ASSIGN_OR_FAIL(n1, norm(x, t[10], t[11]));
    TESSERA_ASSIGN_OR_FAIL(a, selfAttention(n1));
    TESSERA_ASSIGN_OR_FAIL(x1, c.infer<g::AddOp>(x, a));
    TESSERA_ASSIGN_OR_FAIL(n2, norm(x1, t[12], t[13]));
    TESSERA_ASSIGN_OR_FAIL(f, feedForward(n2));
    TESSERA_ASSIGN_OR_FAIL(x2, c.infer<g::AddOp>(x1, f));
    return c.setResult(x2);
  }
  TESSERA_ASSIGN_OR_FAIL(a, selfAttention(x));
  TESSERA_ASSIGN_OR_FAIL(s1, c.infer<g::AddOp>(x, a));
  TESSERA_ASSIGN_OR_FAIL(x1, norm(s1, t[10], t[11]));
  TESSERA_ASSIGN_OR_FAIL(f, feedForward(x1));
  TESSERA_ASSIGN_OR_FAIL(s2, c.infer<g::AddOp>(x1, f));
  TESSERA_ASSIGN_OR_FAIL(x2, norm(s2, t[12], t[13]));
  return c.setResult(x2);
}

//===----------------------------------------------------------------------===//
// Compositions: activations, cumulative sums, counting and bucketing
//===----------------------------------------------------------------------===//

/// glu(self, dim): the first half times the sigmoid of the second.
LogicalResult glu(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  int64_t size = shapeOf(x)[axis];
  if (size % 2)
    return c.error() << "halves dimension " << d << " of size " << size
                     << ": it must be even";
  TESSERA_ASSIGN_OR_FAIL(a, sliceAxis(c, x, axis, 0, size / 2, 1));
  TESSERA_ASSIGN_OR_FAIL(b, sliceAxis(c, x, axis, size / 2, size, 1));
  TESSERA_ASSIGN_OR_FAIL(s, c.build<g::SigmoidOp>(b.getType(), b));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::MulOp>(a, s));
  return c.setResult(v);
}

/// prelu(self, weight): x where positive, else weight * x; a weight per
/// channel (dimension 1) or one for all.
LogicalResult prelu(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(w, c.tensor(1));
  int64_t n = typeOf(w).getNumElements();
  if (n > 1) {
    if (rankOf(x) < 2 || shapeOf(x)[1] != n)
      return c.error() << "has " << n << " weights for an input of shape "
                       << g::formatShape(shapeOf(x)) << ": one per channel (dimension 1)";
    Ints shape(rankOf(x), 1);
    shape[1] = n;
    TESSERA_ASSIGN_OR_FAIL(r, c.reshape(w, shape));
    w = r;
  } else {
    TESSERA_ASSIGN_OR_FAIL(r, c.reshape(w, {}));
    w = r;
  }
  TESSERA_ASSIGN_OR_FAIL(wx, c.infer<g::MulOp>(w, x));
  TESSERA_ASSIGN_OR_FAIL(pos, c.infer<g::GreaterOp>(x, c.scalar(elementOf(x), 0)));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::SelectOp>(pos, x, wx));
  return c.setResult(v);
}

/// selu(self): scale * elu(x, alpha) with SELU's constants.
LogicalResult selu(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  constexpr double alpha = 1.6732632423543772848170429916717;
  constexpr double scale = 1.0507009873554804934193349852946;
  TESSERA_ASSIGN_OR_FAIL(e, c.build<g::EluOp>(x.getType(), x,
                                                 c.builder().getF64FloatAttr(alpha)));
  TESSERA_ASSIGN_OR_FAIL(v, scaled(c, e, scale));
  return c.setResult(v);
}

/// celu(self, alpha) = alpha * elu(x / alpha, 1).
LogicalResult celu(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(alpha, c.getDouble(1));
  if (alpha == 0)
    return c.error() << "alpha must not be 0";
  TESSERA_ASSIGN_OR_FAIL(xs, scaled(c, x, 1 / alpha));
  TESSERA_ASSIGN_OR_FAIL(e, c.build<g::EluOp>(x.getType(), xs,
                                                 c.builder().getF64FloatAttr(1.0)));
  TESSERA_ASSIGN_OR_FAIL(v, scaled(c, e, alpha));
  return c.setResult(v);
}

/// softshrink(self, lambd): x - lambd above lambd, x + lambd below -lambd,
/// else 0; hardshrink(self, lambd): x where |x| > lambd, else 0.
template <bool Soft> LogicalResult shrink(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  double lambd = 0.5;
  if (c.numInputs() > 1) {
    TESSERA_ASSIGN_OR_FAIL(l, c.getDouble(1));
    lambd = l;
  }
  Type t = elementOf(x);
  Value zero = c.scalar(t, 0);
  TESSERA_ASSIGN_OR_FAIL(above, c.infer<g::GreaterOp>(x, c.scalar(t, lambd)));
  TESSERA_ASSIGN_OR_FAIL(below, c.infer<g::LessOp>(x, c.scalar(t, -lambd)));
  Value up = x, down = x;
  if (Soft) {
    TESSERA_ASSIGN_OR_FAIL(u, c.infer<g::SubOp>(x, c.scalar(t, lambd)));
    TESSERA_ASSIGN_OR_FAIL(d, c.infer<g::AddOp>(x, c.scalar(t, lambd)));
    up = u;
    down = d;
  }
  TESSERA_ASSIGN_OR_FAIL(lower, c.infer<g::SelectOp>(below, down, zero));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::SelectOp>(above, up, lower));
  return c.setResult(v);
}

/// cumsum(self, dim, dtype): a product with the upper triangle of ones
/// along the dim (each output sums its prefix; a vertex's matmul).
LogicalResult cumsum(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  if (c.numInputs() > 2 && !c.isNone(2)) {
    TESSERA_ASSIGN_OR_FAIL(dt, c.getInt(2));
    Type t = elementTypeOf(static_cast<c10::ScalarType>(dt), c.context());
    if (!t)
      return c.unsupported("this dtype");
    TESSERA_ASSIGN_OR_FAIL(xc, c.castTo(x, t));
    x = xc;
  }
  if (!isa<FloatType>(elementOf(x)))
    return c.unsupported("cumsum of integers (cast to float first)");
  if (rankOf(x) == 0)
    return c.setResult(x);
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  int64_t n = shapeOf(x)[axis];
  std::optional<c10::ScalarType> dtype = scalarTypeOf(elementOf(x));
  if (!dtype)
    return c.unsupported("this dtype");
  at::Tensor upper = at::ones({n, n}, at::TensorOptions().dtype(*dtype)).triu();
  TESSERA_ASSIGN_OR_FAIL(u, c.constant(upper, "cumsum_triangle"));
  int64_t last = rankOf(x) - 1;
  Ints perm;
  for (int64_t i = 0; i <= last; ++i)
    perm.push_back(i);
  std::swap(perm[axis], perm[last]);
  TESSERA_ASSIGN_OR_FAIL(xt, axis == last ? FailureOr<Value>(x) : c.transpose(x, perm));
  TESSERA_ASSIGN_OR_FAIL(p, c.infer<g::MatmulOp>(xt, u));
  TESSERA_ASSIGN_OR_FAIL(v, axis == last ? FailureOr<Value>(p) : c.transpose(p, perm));
  return c.setResult(v);
}

/// one_hot(self, num_classes): int64 ones where the class is the index.
LogicalResult oneHot(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(n, c.getInt(1));
  if (n < 0)
    return c.unsupported("one_hot without num_classes (it depends on the data: pass "
                         "num_classes)");
  TESSERA_ASSIGN_OR_FAIL(xi, c.castTo(x, c.builder().getI64Type()));
  TESSERA_ASSIGN_OR_FAIL(classes, c.constant(at::arange(n, at::kLong), "one_hot_classes"));
  Ints shape(shapeOf(xi).begin(), shapeOf(xi).end());
  shape.push_back(1);
  TESSERA_ASSIGN_OR_FAIL(col, c.reshape(xi, shape));
  TESSERA_ASSIGN_OR_FAIL(eq, c.infer<g::EqualOp>(col, classes));
  TESSERA_ASSIGN_OR_FAIL(v, c.castTo(eq, c.builder().getI64Type()));
  return c.setResult(v);
}

/// bucketize(self, boundaries, out_int32, right): how many boundaries are
/// below each element (right: at or below).
LogicalResult bucketize(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(bounds, c.tensor(1));
  TESSERA_ASSIGN_OR_FAIL(outInt32, c.getBool(2));
  TESSERA_ASSIGN_OR_FAIL(right, c.getBool(3));
  if (rankOf(bounds) != 1)
    return c.error() << "boundaries must be 1-D, got " << g::formatShape(shapeOf(bounds));
  Ints shape(shapeOf(x).begin(), shapeOf(x).end());
  shape.push_back(1);
  TESSERA_ASSIGN_OR_FAIL(col, c.reshape(x, shape));
  Type t = elementOf(x);
  TESSERA_ASSIGN_OR_FAIL(bc, c.castTo(bounds, t));
  FailureOr<Value> below = right ? c.infer<g::LessEqualOp>(bc, col) : c.infer<g::LessOp>(bc, col);
  if (failed(below))
    return failure();
  TESSERA_ASSIGN_OR_FAIL(count, c.castTo(*below, c.builder().getI64Type()));
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(
      sum, c.infer<g::ReduceSumOp>(count, b.getDenseI64ArrayAttr({rankOf(count) - 1}),
                                   b.getBoolAttr(false)));
  if (!outInt32)
    return c.setResult(sum);
  TESSERA_ASSIGN_OR_FAIL(v, c.castTo(sum, b.getI32Type()));
  return c.setResult(v);
}

/// nansum(self, dim, keepdim, dtype): a sum with NaNs as zeros.
LogicalResult nansum(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  if (!isa<FloatType>(elementOf(x)))
    return reduce<g::ReduceSumOp>(c);
  TESSERA_ASSIGN_OR_FAIL(same, c.infer<g::EqualOp>(x, x)); // false for NaN
  TESSERA_ASSIGN_OR_FAIL(clean, c.infer<g::SelectOp>(same, x, c.scalar(elementOf(x), 0)));
  TESSERA_ASSIGN_OR_FAIL(dims, reductionDims(c, rankOf(x), 1, 2));
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::ReduceSumOp>(clean, b.getDenseI64ArrayAttr(dims.axes),
                                                       b.getBoolAttr(dims.keepdim)));
  return c.setResult(v);
}

/// count_nonzero(self, dim): int64 counts.
LogicalResult countNonzero(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(axes, reductionAxes(c, 1, rankOf(x)));
  TESSERA_ASSIGN_OR_FAIL(nz, c.castTo(x, c.builder().getI1Type()));
  TESSERA_ASSIGN_OR_FAIL(n, c.castTo(nz, c.builder().getI64Type()));
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::ReduceSumOp>(n, b.getDenseI64ArrayAttr(axes),
                                                       b.getBoolAttr(false)));
  return c.setResult(v);
}

/// all/any(self) or (self, dim, keepdim): whether every/some element is
/// non-zero, as bool.
template <bool All> LogicalResult allAny(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(dims, reductionDims(c, rankOf(x), 1, 2));
  auto &b = c.builder();
  TESSERA_ASSIGN_OR_FAIL(nz, c.castTo(x, b.getI1Type()));
  TESSERA_ASSIGN_OR_FAIL(n, c.castTo(nz, b.getI32Type()));
  auto axes = b.getDenseI64ArrayAttr(dims.axes);
  auto keepdim = b.getBoolAttr(dims.keepdim);
  FailureOr<Value> r = All ? c.infer<g::ReduceMinOp>(n, axes, keepdim)
                           : c.infer<g::ReduceMaxOp>(n, axes, keepdim);
  if (failed(r))
    return failure();
  TESSERA_ASSIGN_OR_FAIL(v, c.castTo(*r, b.getI1Type()));
  return c.setResult(v);
}

/// index(self, indices): `self[..., i, j, ...]` with index tensors on
/// adjacent dims (the others whole, None): the indexed dims merged into one
/// and read by a gather at the row-major flat index of the broadcast
/// indices (negative ones counting from the end), so the result is
/// self.shape[:k] + the indices' broadcast shape + the dims after. Index
/// tensors on dims apart (numpy moves their dims first) and boolean masks
/// (the result's shape depends on the data) are refused by name.
LogicalResult index(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(indices, c.tensorList(1, /*allowNone=*/true));
  SmallVector<std::pair<int64_t, Value>> used;
  for (auto [k, v] : llvm::enumerate(indices))
    if (v)
      used.push_back({int64_t(k), v});
  if (used.empty())
    return c.setResult(x);
  for (auto [k, v] : used) {
    if (elementOf(v).isInteger(1))
      return c.unsupported("indexing with a boolean mask (the result's shape depends on the "
                           "data: use torch.where)");
    if (k >= rankOf(x))
      return c.error() << "indexes dimension " << k << " of a rank-" << rankOf(x) << " tensor";
  }
  int64_t first = used.front().first, count = used.size();
  if (used.back().first - first + 1 != count)
    return c.unsupported("indexing with index tensors on dimensions that are not next to "
                         "each other");
  auto i64 = c.builder().getI64Type();
  if (count == 1) {
    TESSERA_ASSIGN_OR_FAIL(ii, c.castTo(used.front().second, i64));
    TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::GatherOp>(x, ii, c.builder().getI64IntegerAttr(first)));
    return c.setResult(v);
  }
  g::GraphEmitter e(c.builder(), c.loc());
  ArrayRef<int64_t> shape = shapeOf(x);
  Value flat;
  int64_t merged = 1;
  for (auto [k, v] : llvm::reverse(used)) {
    int64_t size = shape[k];
    Value idx = e.cast(v, i64);
    idx = e.select(e.less(idx, e.scalar(idx, 0)), e.add(idx, e.scalar(idx, size)), idx);
    Value term = merged == 1 ? idx : e.mul(idx, e.scalar(idx, merged));
    flat = flat ? e.add(term, flat) : term; // broadcasts the indices together
    merged *= size;
  }
  Ints mergedShape(shape.begin(), shape.begin() + first);
  mergedShape.push_back(merged);
  mergedShape.append(shape.begin() + first + count, shape.end());
  Value table = e.reshape(x, mergedShape);
  if (e.failed())
    return failure();
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::GatherOp>(table, flat,
                                                    c.builder().getI64IntegerAttr(first)));
  return c.setResult(v);
}

/// Random numbers from the program's counter-based generator (seeded by
/// tessera-run --seed / Options.randomSeed, fresh numbers every run, the
/// same on every tile and replica for an element).
///
/// The element type of a factory's `dtype` argument (f32 when None).
FailureOr<Type> factoryType(OpContext &c, size_t dtypeArg) {
  if (c.numInputs() <= dtypeArg || c.isNone(dtypeArg))
    return Type(c.builder().getF32Type());
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(dtypeArg));
  Type t = elementTypeOf(static_cast<c10::ScalarType>(d), c.context());
  if (!t || !isa<FloatType>(t))
    return c.error() << "random numbers of a non-float dtype are not supported";
  return t;
}

FailureOr<Value> uniform(OpContext &c, Type t, ArrayRef<int64_t> shape, double low,
                         double high) {
  return g::createRandomUniform(c.builder(), c.loc(), t, shape, low, high);
}

/// Standard normal numbers (Box-Muller over two uniforms; 1 - u keeps the
/// logarithm's argument in (0, 1]).
FailureOr<Value> standardNormal(OpContext &c, Type t, ArrayRef<int64_t> shape) {
  TESSERA_ASSIGN_OR_FAIL(u1, uniform(c, t, shape, 0, 1));
  TESSERA_ASSIGN_OR_FAIL(u2, uniform(c, t, shape, 0, 1));
  g::GraphEmitter e(c.builder(), c.loc());
  Value r = e.sqrt(e.mulScalar(e.log(e.sub(e.scalar(u1, 1), u1)), -2));
  Value v = e.mul(r, e.cos(e.mulScalar(u2, 2 * M_PI)));
  if (e.failed())
    return failure();
  return v;
}

/// rand/randn(size, dtype, ...) and rand_like/randn_like(self, dtype, ...).
template <bool Normal, bool Like> LogicalResult randomFactory(OpContext &c) {
  Ints shape;
  if (Like) {
    TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
    shape.assign(shapeOf(x).begin(), shapeOf(x).end());
  } else {
    TESSERA_ASSIGN_OR_FAIL(size, c.getInts(0));
    shape = size;
  }
  TESSERA_ASSIGN_OR_FAIL(t, factoryType(c, 1));
  FailureOr<Value> v = Normal ? standardNormal(c, t, shape) : uniform(c, t, shape, 0, 1);
  if (failed(v))
    return failure();
  return c.setResult(*v);
}

/// normal(mean, std) with tensors or numbers (a size when both are
/// numbers), and normal_(self, mean, std) in place: mean + std * N(0, 1).
LogicalResult normal(OpContext &c) {
  bool inPlace = c.kind() == "aten::normal_";
  Ints shape;
  Type t = c.builder().getF32Type();
  Value mean, std;
  if (inPlace) {
    TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
    shape.assign(shapeOf(x).begin(), shapeOf(x).end());
    t = elementOf(x);
    TESSERA_ASSIGN_OR_FAIL(m, c.getDouble(1));
    TESSERA_ASSIGN_OR_FAIL(s, c.getDouble(2));
    mean = c.scalar(t, m);
    std = c.scalar(t, s);
  } else {
    bool tensors = c.isTensor(0) || c.isTensor(1);
    if (tensors) {
      TESSERA_ASSIGN_OR_FAIL(operands, promoted(c, 0, 1));
      mean = operands.first;
      std = operands.second;
      t = elementOf(mean);
      g::GraphEmitter e(c.builder(), c.loc());
      Value sum = e.add(mean, std); // the broadcast shape
      if (e.failed())
        return failure();
      shape.assign(shapeOf(sum).begin(), shapeOf(sum).end());
    } else {
      TESSERA_ASSIGN_OR_FAIL(m, c.getDouble(0));
      TESSERA_ASSIGN_OR_FAIL(s, c.getDouble(1));
      TESSERA_ASSIGN_OR_FAIL(size, c.getInts(2));
      shape = size;
      TESSERA_ASSIGN_OR_FAIL(ft, factoryType(c, 4));
      t = ft;
      mean = c.scalar(t, m);
      std = c.scalar(t, s);
    }
  }
  if (!isa<FloatType>(t))
    return c.error() << "normal numbers of a non-float type are not supported";
  TESSERA_ASSIGN_OR_FAIL(z, standardNormal(c, t, shape));
  TESSERA_ASSIGN_OR_FAIL(sz, c.infer<g::MulOp>(z, std));
  TESSERA_ASSIGN_OR_FAIL(v, c.infer<g::AddOp>(sz, mean));
  return c.setResult(v);
}

/// uniform_(self, from, to): in place, numbers in [from, to).
LogicalResult uniformInPlace(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(from, c.getDouble(1));
  TESSERA_ASSIGN_OR_FAIL(to, c.getDouble(2));
  if (!isa<FloatType>(elementOf(x)))
    return c.error() << "uniform_ of a non-float tensor is not supported";
  TESSERA_ASSIGN_OR_FAIL(v, uniform(c, elementOf(x), shapeOf(x), from, to));
  return c.setResult(v);
}

/// bernoulli(self) with self the probabilities, or bernoulli(self, p):
/// 1 where a uniform number is below the probability, in self's type.
LogicalResult bernoulli(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  Type t = elementOf(x);
  if (!isa<FloatType>(t))
    return c.error() << "bernoulli of a non-float tensor is not supported";
  Value p = x;
  if (c.numInputs() > 1 && !c.isNone(1) && !c.isTensor(1)) {
    const ImportedValue &arg = c.input(1);
    if (arg.kind == ImportedValue::Kind::Constant && arg.constant.isDouble())
      p = c.scalar(t, arg.constant.toDouble());
  }
  TESSERA_ASSIGN_OR_FAIL(u, uniform(c, t, shapeOf(x), 0, 1));
  TESSERA_ASSIGN_OR_FAIL(below, c.infer<g::LessOp>(u, p));
  TESSERA_ASSIGN_OR_FAIL(v, c.castTo(below, t));
  return c.setResult(v);
}

/// var/std(self, unbiased) or (self, dim, unbiased | correction, keepdim):
/// the mean of squared deviations over n - correction (1 unbiased, the
/// default); std its square root.
template <bool Std> LogicalResult variance(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  if (!isa<FloatType>(elementOf(x)))
    return c.error() << "var/std of a non-float tensor";
  TESSERA_ASSIGN_OR_FAIL(dims, reductionDims(c, rankOf(x), 1, 3));
  auto [axes, keepdim] = dims;
  // (self, unbiased) or (self, dim, unbiased | correction, keepdim).
  size_t correctionArg = c.numInputs() <= 2 ? 1 : 2;
  int64_t correction = 1;
  if (!c.isNone(correctionArg)) {
    const ImportedValue &v = c.input(correctionArg);
    if (v.kind == ImportedValue::Kind::Constant && v.constant.isBool()) {
      correction = v.constant.toBool() ? 1 : 0;
    } else {
      TESSERA_ASSIGN_OR_FAIL(k, c.getInt(correctionArg));
      correction = k;
    }
  }
  int64_t n = 1;
  for (int64_t a : axes)
    n *= shapeOf(x)[a];
  g::GraphEmitter e(c.builder(), c.loc());
  Value deviation = e.sub(x, e.reduceMean(x, axes, true));
  Value v = e.mulScalar(e.reduceSum(e.mul(deviation, deviation), axes, keepdim),
                        1.0 / static_cast<double>(n - correction));
  if (Std)
    v = e.sqrt(v);
  if (e.failed())
    return failure();
  return c.setResult(v);
}

/// scatter_add(self, dim, index, src) and scatter_reduce(self, dim, index,
/// src, reduce, include_self) with reduce "sum" or "mean": src's elements
/// (over the index's shape) added into self at their index along dim
/// (GraphEmitter::scatterElementsAdd); "mean" divides each by how many it
/// got (self counting once when included); without self, a position that
/// gets none keeps self's value.
LogicalResult scatterAddReduce(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(d, c.getInt(1));
  TESSERA_ASSIGN_OR_FAIL(index, c.tensor(2));
  TESSERA_ASSIGN_OR_FAIL(src, c.tensor(3, elementOf(x)));
  std::string reduce = "sum";
  bool includeSelf = true;
  if (c.kind() == "aten::scatter_reduce") {
    TESSERA_ASSIGN_OR_FAIL(r, c.getString(4));
    reduce = r;
    if (c.numInputs() > 5) {
      TESSERA_ASSIGN_OR_FAIL(inc, c.getBool(5));
      includeSelf = inc;
    }
  }
  if (reduce != "sum" && reduce != "mean")
    return c.unsupported("scatter_reduce with reduce '" + reduce + "' (sum and mean are)");
  if (!isa<FloatType>(elementOf(x)))
    return c.unsupported("scatter into a non-float tensor");
  TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
  if (rankOf(index) != rankOf(x) || rankOf(src) != rankOf(x))
    return c.error() << "self, index and src must have the same rank";
  TESSERA_ASSIGN_OR_FAIL(sc, c.castTo(src, elementOf(x)));
  g::GraphEmitter e(c.builder(), c.loc());
  // The part of src the index covers.
  Value part = e.slice(sc, Ints(rankOf(x), 0), shapeOf(index), Ints(rankOf(x), 1));
  Value sum = e.scatterElementsAdd(part, index, axis, shapeOf(x));
  Value count = e.scatterElementsAdd(e.splat(elementOf(x), shapeOf(index), 1), index, axis,
                                     shapeOf(x));
  if (e.failed())
    return failure();
  Value got = e.greater(count, e.scalar(count, 0));
  Value v;
  if (includeSelf) {
    v = e.add(x, sum);
    if (reduce == "mean")
      v = e.div(v, e.addScalar(count, 1));
  } else {
    Value r = reduce == "mean" ? e.div(sum, e.select(got, count, e.scalar(count, 1))) : sum;
    v = e.select(got, r, x);
  }
  if (e.failed())
    return failure();
  return c.setResult(v);
}

/// flip(self, dims): each dim read backwards (GraphEmitter::flip).
LogicalResult flip(OpContext &c) {
  TESSERA_ASSIGN_OR_FAIL(x, c.tensor(0));
  TESSERA_ASSIGN_OR_FAIL(dims, c.getInts(1));
  g::GraphEmitter e(c.builder(), c.loc());
  Value v = x;
  for (int64_t d : dims) {
    TESSERA_ASSIGN_OR_FAIL(axis, c.normalizeDim(d, rankOf(x)));
    v = e.flip(v, axis);
  }
  if (e.failed())
    return failure();
  return c.setResult(v);
}

} // namespace

const llvm::StringMap<AtenConverter> &atenConverters() {
  static const llvm::StringMap<AtenConverter> kConverters = {
      // Elementwise
      {"aten::relu", unary<g::ReluOp>},
      {"aten::sigmoid", unary<g::SigmoidOp>},
      {"aten::tanh", unary<g::TanhOp>},
      {"aten::exp", unary<g::ExpOp>},
      {"aten::log", unary<g::LogOp>},
      {"aten::sqrt", unary<g::SqrtOp>},
      {"aten::rsqrt", unary<g::RsqrtOp>},
      {"aten::reciprocal", unary<g::ReciprocalOp>},
      {"aten::neg", unary<g::NegOp>},
      {"aten::abs", unary<g::AbsOp>},
      {"aten::sign", unary<g::SignOp>},
      {"aten::erf", unary<g::ErfOp>},
      {"aten::sin", unary<g::SinOp>},
      {"aten::cos", unary<g::CosOp>},
      {"aten::floor", unary<g::FloorOp>},
      {"aten::ceil", unary<g::CeilOp>},
      {"aten::round", unary<g::RoundOp>},
      {"aten::hardswish", unary<g::HardSwishOp>},
      {"aten::hardsigmoid", hardsigmoid},
      {"aten::hardtanh", hardtanh},
      {"aten::relu6", relu6},
      {"aten::clamp", clamp},
      {"aten::clip", clamp},
      {"aten::silu", silu},
      {"aten::mish", mish},
      {"aten::gelu", gelu},
      {"aten::leaky_relu", leakyRelu},
      {"aten::elu", elu},
      {"aten::glu", glu},
      {"aten::prelu", prelu},
      {"aten::selu", selu},
      {"aten::celu", celu},
      {"aten::softshrink", shrink<true>},
      {"aten::hardshrink", shrink<false>},
      {"aten::cumsum", cumsum},
      {"aten::one_hot", oneHot},
      {"aten::bucketize", bucketize},
      {"aten::nansum", nansum},
      {"aten::count_nonzero", countNonzero},
      {"aten::all", allAny<true>},
      {"aten::any", allAny<false>},
      {"aten::flip", flip},
      {"aten::scatter_add", scatterAddReduce},
      {"aten::scatter_reduce", scatterAddReduce},
      {"aten::smooth_l1_loss", parametricLoss},
      {"aten::huber_loss", parametricLoss},
      {"aten::soft_margin_loss", parametricLoss},
      {"aten::kl_div", parametricLoss},
      {"aten::pairwise_distance", pairwiseDistance},
      {"aten::cosine_similarity", cosineSimilarity},
      {"aten::cdist", cdist},
      {"aten::var", variance<false>},
      {"aten::std", variance<true>},
      {"aten::rand", randomFactory<false, false>},
      {"aten::randn", randomFactory<true, false>},
      {"aten::rand_like", randomFactory<false, true>},
      {"aten::randn_like", randomFactory<true, true>},
      {"aten::normal", normal},
      {"aten::normal_", normal},
      {"aten::uniform", uniformInPlace},
      {"aten::uniform_", uniformInPlace},
      {"aten::bernoulli", bernoulli},
      {"aten::index", index},
      {"aten::take_along_dim", takeAlongDim},
      {"aten::prod", reduce<g::ReduceProdOp>},
      {"aten::addmv", addmm},
      {"aten::softplus", softplus},
      {"aten::add", addSub<g::AddOp>},
      {"aten::sub", addSub<g::SubOp>},
      {"aten::rsub", addSub<g::SubOp, true>},
      {"aten::mul", binary<g::MulOp>},
      {"aten::div", div},
      {"aten::floor_divide", floorDivide},
      {"aten::pow", binary<g::PowOp>},
      {"aten::maximum", binary<g::MaxOp>},
      {"aten::minimum", binary<g::MinOp>},
      {"aten::eq", compare<g::EqualOp>},
      {"aten::ne", compare<g::EqualOp, true>},
      {"aten::lt", compare<g::LessOp>},
      {"aten::le", compare<g::LessEqualOp>},
      {"aten::gt", compare<g::GreaterOp>},
      {"aten::ge", compare<g::GreaterEqualOp>},
      {"aten::logical_and", logical<g::AndOp>},
      {"aten::logical_or", logical<g::OrOp>},
      {"aten::logical_xor", logical<g::XorOp>},
      {"aten::logical_not", logicalNot},
      {"aten::where", where},
      {"aten::masked_fill", maskedFill},
      {"aten::to", to},
      {"aten::type_as", to},
      // Identities in inference
      {"aten::dropout", dropout},
      {"aten::feature_dropout", dropout},
      {"aten::alpha_dropout", dropout},
      {"aten::feature_alpha_dropout", dropout},
      {"aten::contiguous", identity},
      {"aten::clone", identity},
      {"aten::detach", identity},
      // Linear algebra
      {"aten::matmul", matmul},
      {"aten::mm", matmul},
      {"aten::bmm", matmul},
      {"aten::linear", linear},
      {"aten::t", t},
      {"aten::addmm", addmm},
      {"aten::baddbmm", addmm},
      // Convolution and pooling
      {"aten::_convolution", convolution},
      {"aten::convolution", convolution},
      {"aten::conv1d", convNd},
      {"aten::conv2d", convNd},
      {"aten::conv3d", convNd},
      {"aten::conv_transpose1d", convTransposeNd},
      {"aten::conv_transpose2d", convTransposeNd},
      {"aten::conv_transpose3d", convTransposeNd},
      {"aten::broadcast_tensors", broadcastTensors},
      {"aten::lstm",
       [](OpContext &c) { return recurrent(c, g::RecurrentCell::LSTM, "tanh"); }},
      {"aten::gru",
       [](OpContext &c) { return recurrent(c, g::RecurrentCell::GRU, "tanh"); }},
      {"aten::rnn_tanh",
       [](OpContext &c) { return recurrent(c, g::RecurrentCell::RNN, "tanh"); }},
      {"aten::rnn_relu",
       [](OpContext &c) { return recurrent(c, g::RecurrentCell::RNN, "relu"); }},
      {"aten::upsample_nearest1d",
       [](OpContext &c) { return upsample(c, g::ResizeMode::nearest, false, false); }},
      {"aten::upsample_nearest2d",
       [](OpContext &c) { return upsample(c, g::ResizeMode::nearest, false, false); }},
      {"aten::upsample_nearest3d",
       [](OpContext &c) { return upsample(c, g::ResizeMode::nearest, false, false); }},
      {"aten::_upsample_nearest_exact1d",
       [](OpContext &c) { return upsample(c, g::ResizeMode::nearest, false, true); }},
      {"aten::_upsample_nearest_exact2d",
       [](OpContext &c) { return upsample(c, g::ResizeMode::nearest, false, true); }},
      {"aten::_upsample_nearest_exact3d",
       [](OpContext &c) { return upsample(c, g::ResizeMode::nearest, false, true); }},
      {"aten::upsample_linear1d",
       [](OpContext &c) { return upsample(c, g::ResizeMode::linear, true, false); }},
      {"aten::upsample_bilinear2d",
       [](OpContext &c) { return upsample(c, g::ResizeMode::linear, true, false); }},
      {"aten::upsample_trilinear3d",
       [](OpContext &c) { return upsample(c, g::ResizeMode::linear, true, false); }},
      {"aten::max_pool1d", maxPool},
      {"aten::max_pool2d", maxPool},
      {"aten::max_pool3d", maxPool},
      {"aten::avg_pool1d", avgPool},
      {"aten::avg_pool2d", avgPool},
      {"aten::avg_pool3d", avgPool},
      {"aten::adaptive_avg_pool1d", adaptivePool<g::ReduceMeanOp, false>},
      {"aten::adaptive_avg_pool2d", adaptivePool<g::ReduceMeanOp, false>},
      {"aten::adaptive_avg_pool3d", adaptivePool<g::ReduceMeanOp, false>},
      {"aten::adaptive_max_pool1d", adaptivePool<g::ReduceMaxOp, true>},
      {"aten::adaptive_max_pool2d", adaptivePool<g::ReduceMaxOp, true>},
      {"aten::adaptive_max_pool3d", adaptivePool<g::ReduceMaxOp, true>},
      // Normalisation
      {"aten::batch_norm", batchNorm},
      {"aten::layer_norm", layerNorm},
      {"aten::group_norm", groupNorm},
      {"aten::instance_norm", instanceNorm},
      {"aten::softmax", softmax<g::SoftmaxOp>},
      {"aten::log_softmax", softmax<g::LogSoftmaxOp>},
      {"aten::cross_entropy_loss", [](OpContext &c) { return classLoss(c, true); }},
      {"aten::nll_loss", [](OpContext &c) { return classLoss(c, false); }},
      {"aten::nll_loss_nd", [](OpContext &c) { return classLoss(c, false); }},
      {"aten::mse_loss", [](OpContext &c) { return regressionLoss(c, "mse"); }},
      {"aten::l1_loss", [](OpContext &c) { return regressionLoss(c, "l1"); }},
      {"aten::binary_cross_entropy_with_logits",
       [](OpContext &c) { return regressionLoss(c, "bce-with-logits"); }},
      // Reductions
      {"aten::mean", reduce<g::ReduceMeanOp>},
      {"aten::sum", reduce<g::ReduceSumOp>},
      {"aten::amax", reduceExtreme<g::ReduceMaxOp>},
      {"aten::amin", reduceExtreme<g::ReduceMinOp>},
      {"aten::max", maxMin<g::ReduceMaxOp, g::MaxOp, g::ArgMaxOp>},
      {"aten::min", maxMin<g::ReduceMinOp, g::MinOp, g::ArgMinOp>},
      {"aten::argmax", argReduce<g::ArgMaxOp>},
      {"aten::argmin", argReduce<g::ArgMinOp>},
      // Shapes and data movement
      {"aten::view", view},
      {"aten::reshape", view},
      {"aten::view_as", viewAs},
      {"aten::reshape_as", viewAs},
      {"aten::flatten", flatten},
      {"aten::unflatten", unflatten},
      {"aten::permute", permute},
      {"aten::transpose", transposeDims},
      {"aten::unsqueeze", unsqueeze},
      {"aten::squeeze", squeeze},
      {"aten::expand", expandOp},
      {"aten::expand_as", expandAs},
      {"aten::repeat", repeat},
      {"aten::cat", cat},
      {"aten::concat", cat},
      {"aten::stack", stack},
      {"aten::einsum", einsum},
      {"aten::slice", slice},
      {"aten::narrow", narrow},
      {"aten::select", select},
      {"aten::chunk", chunk},
      {"aten::split", split},
      {"aten::split_with_sizes", split},
      {"aten::unbind", unbind},
      {"aten::roll", roll},
      {"aten::index_select", indexSelect},
      {"aten::embedding", embedding},
      {"aten::gather", gather},
      {"aten::constant_pad_nd", pad},
      {"aten::pad", pad},
      {"aten::reflection_pad1d", pad},
      {"aten::reflection_pad2d", pad},
      {"aten::replication_pad1d", pad},
      {"aten::replication_pad2d", pad},
      {"aten::zeros_like", filled<0>},
      {"aten::ones_like", filled<1>},
      {"aten::full_like", filled<0>},
      {"aten::new_zeros", filled<0>},
      {"aten::new_empty", filled<0>},
      {"aten::new_ones", filled<1>},
      {"aten::new_full", filled<0>},
      // Fused inference kernels
      {"aten::_native_multi_head_attention", nativeMultiHeadAttention},
      {"aten::_transformer_encoder_layer_fwd", transformerEncoderLayer},
  };
  return kConverters;
}

} // namespace tessera::torchscript_importer
