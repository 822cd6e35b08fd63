//===- GraphToLinalg.cpp - graph ops to linalg/tensor/arith/math ---------===//
//
// One pattern per graph op (or op family). The lowered forms are chosen for
// the tile mapper that follows: every compute op is a linalg structured op
// whose iteration space names each dimension it could split (batch, groups,
// output channels, output pixels, reduction dims), and broadcasting lives in
// indexing maps rather than in materialised copies.
//
// One rule of linalg shapes every generic here: loop bounds come from the
// first operand that indexes a loop with a bare dimension, so every bare
// dimension in an input map must have the output's extent. Windows (pooling)
// therefore get a dummy operand of the window's shape, strided slices go
// through tensor.extract_slice, and convolution exposes groups as a dim.
//
//===----------------------------------------------------------------------===//

#include "tessera/Conversion/Passes.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"
#include "tessera/Dialect/IPU/IR/IPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <map>
#include <tuple>

namespace tessera {
#define GEN_PASS_DEF_CONVERTGRAPHTOLINALG
#include "tessera/Conversion/Passes.h.inc"
} // namespace tessera

using namespace mlir;
namespace g = tessera::graph;
using utils::IteratorType;

namespace {

//===----------------------------------------------------------------------===//
// Scalar helpers: one place that knows float / signed / unsigned / bool
//===----------------------------------------------------------------------===//

bool isFloat(Type t) { return isa<FloatType>(t); }
bool isUnsigned(Type t) {
  auto i = dyn_cast<IntegerType>(t);
  return i && (i.isUnsigned() || i.getWidth() == 1);
}

/// Arith works on signless integers: graph's ui8 etc. are computed as
/// signless of the same width, with unsigned ops chosen by isUnsigned().
Type arithType(Type t) {
  if (auto i = dyn_cast<IntegerType>(t); i && !i.isSignless())
    return IntegerType::get(t.getContext(), i.getWidth());
  return t;
}

TypedAttr scalarAttr(Type t, double v) {
  Type at = arithType(t);
  if (auto ft = dyn_cast<FloatType>(at))
    return FloatAttr::get(ft, v);
  auto it = cast<IntegerType>(at);
  if (it.getWidth() == 1)
    return IntegerAttr::get(it, v != 0);
  return IntegerAttr::get(it, APInt(it.getWidth(), static_cast<int64_t>(v),
                                    /*isSigned=*/true, /*implicitTrunc=*/true));
}

Value scalar(OpBuilder &b, Location loc, Type t, double v) {
  return arith::ConstantOp::create(b, loc, scalarAttr(t, v));
}

/// The identity of max (lowest value) or min (highest value) for `t`.
Value extremum(OpBuilder &b, Location loc, Type t, bool lowest) {
  Type at = arithType(t);
  if (auto ft = dyn_cast<FloatType>(at))
    return arith::ConstantOp::create(
        b, loc, FloatAttr::get(ft, APFloat::getInf(ft.getFloatSemantics(),
                                                  /*Negative=*/lowest)));
  unsigned w = at.getIntOrFloatBitWidth();
  APInt v = isUnsigned(t) ? (lowest ? APInt::getMinValue(w) : APInt::getMaxValue(w))
                          : (lowest ? APInt::getSignedMinValue(w)
                                    : APInt::getSignedMaxValue(w));
  return arith::ConstantOp::create(b, loc, IntegerAttr::get(at, v));
}

Value addS(OpBuilder &b, Location l, Value x, Value y) {
  return isFloat(x.getType()) ? arith::AddFOp::create(b, l, x, y).getResult()
                              : arith::AddIOp::create(b, l, x, y).getResult();
}
Value subS(OpBuilder &b, Location l, Value x, Value y) {
  return isFloat(x.getType()) ? arith::SubFOp::create(b, l, x, y).getResult()
                              : arith::SubIOp::create(b, l, x, y).getResult();
}
Value mulS(OpBuilder &b, Location l, Value x, Value y) {
  return isFloat(x.getType()) ? arith::MulFOp::create(b, l, x, y).getResult()
                              : arith::MulIOp::create(b, l, x, y).getResult();
}
Value divS(OpBuilder &b, Location l, Value x, Value y, bool uns) {
  if (isFloat(x.getType()))
    return arith::DivFOp::create(b, l, x, y);
  return uns ? arith::DivUIOp::create(b, l, x, y).getResult()
             : arith::DivSIOp::create(b, l, x, y).getResult();
}
Value maxS(OpBuilder &b, Location l, Value x, Value y, bool uns) {
  if (isFloat(x.getType()))
    return arith::MaximumFOp::create(b, l, x, y); // NaN propagates
  return uns ? arith::MaxUIOp::create(b, l, x, y).getResult()
             : arith::MaxSIOp::create(b, l, x, y).getResult();
}
Value minS(OpBuilder &b, Location l, Value x, Value y, bool uns) {
  if (isFloat(x.getType()))
    return arith::MinimumFOp::create(b, l, x, y);
  return uns ? arith::MinUIOp::create(b, l, x, y).getResult()
             : arith::MinSIOp::create(b, l, x, y).getResult();
}

/// Comparison by predicate name: "eq", "lt", "le", "gt", "ge".
Value compareS(OpBuilder &b, Location l, StringRef pred, Value x, Value y,
               bool uns) {
  if (isFloat(x.getType())) {
    auto p = llvm::StringSwitch<arith::CmpFPredicate>(pred)
                 .Case("eq", arith::CmpFPredicate::OEQ)
                 .Case("lt", arith::CmpFPredicate::OLT)
                 .Case("le", arith::CmpFPredicate::OLE)
                 .Case("gt", arith::CmpFPredicate::OGT)
                 .Default(arith::CmpFPredicate::OGE);
    return arith::CmpFOp::create(b, l, p, x, y);
  }
  auto p = llvm::StringSwitch<arith::CmpIPredicate>(pred)
               .Case("eq", arith::CmpIPredicate::eq)
               .Case("lt", uns ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt)
               .Case("le", uns ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle)
               .Case("gt", uns ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt)
               .Default(uns ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge);
  return arith::CmpIOp::create(b, l, p, x, y);
}

/// Converts a scalar between element types with graph.cast's semantics.
Value convertS(OpBuilder &b, Location l, Value x, Type fromGraph, Type toGraph) {
  Type from = arithType(fromGraph), to = arithType(toGraph);
  if (from == to)
    return x;
  bool fromFloat = isFloat(from), toFloat = isFloat(to);
  if (to.isInteger(1)) {
    Value zero = scalar(b, l, fromGraph, 0);
    return fromFloat ? arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNE, x, zero)
                           .getResult()
                     : arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, x, zero)
                           .getResult();
  }
  if (fromFloat && toFloat && from.getIntOrFloatBitWidth() == to.getIntOrFloatBitWidth()) {
    // f16 <-> bf16: through f32, which holds both exactly.
    Value wide = arith::ExtFOp::create(b, l, Float32Type::get(b.getContext()), x);
    return arith::TruncFOp::create(b, l, to, wide);
  }
  if (fromFloat && toFloat)
    return from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth()
               ? arith::ExtFOp::create(b, l, to, x).getResult()
               : arith::TruncFOp::create(b, l, to, x).getResult();
  if (fromFloat)
    return isUnsigned(toGraph) ? arith::FPToUIOp::create(b, l, to, x).getResult()
                               : arith::FPToSIOp::create(b, l, to, x).getResult();
  if (toFloat)
    return isUnsigned(fromGraph) ? arith::UIToFPOp::create(b, l, to, x).getResult()
                                 : arith::SIToFPOp::create(b, l, to, x).getResult();
  unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
  if (fw > tw)
    return arith::TruncIOp::create(b, l, to, x);
  return isUnsigned(fromGraph) ? arith::ExtUIOp::create(b, l, to, x).getResult()
                               : arith::ExtSIOp::create(b, l, to, x).getResult();
}

//===----------------------------------------------------------------------===//
// Tensor helpers
//===----------------------------------------------------------------------===//

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// tensor.empty of `type`, with graph's unsigned element types kept: the
/// tensors keep their types, only scalar arithmetic is signless.
Value empty(OpBuilder &b, Location l, RankedTensorType type) {
  return tensor::EmptyOp::create(b, l, type.getShape(), type.getElementType());
}

/// A tensor of `type` filled with the scalar `v` (given in arith's type).
Value filled(OpBuilder &b, Location l, RankedTensorType type, Value v) {
  return linalg::FillOp::create(b, l, ValueRange{v}, ValueRange{empty(b, l, type)})
      .getResult(0);
}

/// The indexing map reading an operand of `operandShape` for each point of
/// `resultShape` under NumPy broadcasting (aligned at the trailing dim).
AffineMap broadcastMap(MLIRContext *ctx, ArrayRef<int64_t> operandShape,
                       ArrayRef<int64_t> resultShape) {
  size_t offset = resultShape.size() - operandShape.size();
  SmallVector<AffineExpr> exprs;
  for (size_t i = 0; i < operandShape.size(); ++i)
    exprs.push_back(operandShape[i] == 1 && resultShape[i + offset] != 1
                        ? getAffineConstantExpr(0, ctx)
                        : getAffineDimExpr(i + offset, ctx));
  return AffineMap::get(resultShape.size(), 0, exprs, ctx);
}

using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// A parallel linalg.generic producing `resultType` from broadcast operands.
/// The body sees the operands' scalars (signless for integers).
Value elementwise(OpBuilder &b, Location l, RankedTensorType resultType,
                  ValueRange operands, BodyFn body) {
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps;
  for (Value v : operands)
    maps.push_back(broadcastMap(ctx, tensorType(v).getShape(), resultType.getShape()));
  maps.push_back(AffineMap::getMultiDimIdentityMap(resultType.getRank(), ctx));
  SmallVector<IteratorType> iters(resultType.getRank(), IteratorType::parallel);
  return linalg::GenericOp::create(
             b, l, TypeRange{resultType}, operands, ValueRange{empty(b, l, resultType)},
             maps, iters,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value r = body(nb, nl, args.drop_back());
               linalg::YieldOp::create(nb, nl, r);
             })
      .getResult(0);
}

Value reshapeTo(OpBuilder &b, Location l, Value v, ArrayRef<int64_t> shape) {
  auto type = tensorType(v);
  if (type.getShape() == shape)
    return v;
  auto shapeType = RankedTensorType::get({static_cast<int64_t>(shape.size())},
                                         b.getIndexType());
  SmallVector<APInt> dims;
  for (int64_t d : shape)
    dims.push_back(APInt(64, d));
  Value shapeValue = arith::ConstantOp::create(
      b, l, DenseElementsAttr::get(shapeType, ArrayRef<APInt>(dims)));
  return tensor::ReshapeOp::create(b, l, type.clone(shape), v, shapeValue);
}

Value indexConst(OpBuilder &b, Location l, int64_t v) {
  return arith::ConstantIndexOp::create(b, l, v);
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

/// Lowers an op whose result is an elementwise function of its (broadcast)
/// operands; `fn` gets the op, the element type of operand 0 and scalars.
template <typename OpTy>
struct ElementwisePattern : OpConversionPattern<OpTy> {
  using Fn = std::function<Value(OpTy, OpBuilder &, Location, Type, ValueRange)>;
  ElementwisePattern(MLIRContext *ctx, Fn fn)
      : OpConversionPattern<OpTy>(ctx), fn(std::move(fn)) {}

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type elem = tensorType(op->getOperand(op->getNumOperands() - 1)).getElementType();
    // For select the value operands decide the type; for the rest any
    // operand does.
    if (!isa<g::SelectOp>(op.getOperation()))
      elem = tensorType(op->getOperand(0)).getElementType();
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    Value result = elementwise(
        rewriter, op.getLoc(), resultType, adaptor.getOperands(),
        [&](OpBuilder &b, Location l, ValueRange args) {
          return fn(op, b, l, elem, args);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
  Fn fn;
};

template <typename OpTy, typename... Args>
void addElementwise(RewritePatternSet &patterns,
                    typename ElementwisePattern<OpTy>::Fn fn) {
  patterns.add<ElementwisePattern<OpTy>>(patterns.getContext(), std::move(fn));
}

void populateElementwise(RewritePatternSet &p) {
  using V = ValueRange;
  // Binary arithmetic.
  addElementwise<g::AddOp>(p, [](auto, OpBuilder &b, Location l, Type, V a) {
    return addS(b, l, a[0], a[1]);
  });
  addElementwise<g::SubOp>(p, [](auto, OpBuilder &b, Location l, Type, V a) {
    return subS(b, l, a[0], a[1]);
  });
  addElementwise<g::MulOp>(p, [](auto, OpBuilder &b, Location l, Type, V a) {
    return mulS(b, l, a[0], a[1]);
  });
  addElementwise<g::DivOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    return divS(b, l, a[0], a[1], isUnsigned(t));
  });
  addElementwise<g::RemOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) -> Value {
    if (isFloat(t))
      return arith::RemFOp::create(b, l, a[0], a[1]);
    return isUnsigned(t) ? arith::RemUIOp::create(b, l, a[0], a[1]).getResult()
                         : arith::RemSIOp::create(b, l, a[0], a[1]).getResult();
  });
  addElementwise<g::PowOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) -> Value {
    if (isFloat(t))
      return math::PowFOp::create(b, l, a[0], a[1]);
    return math::IPowIOp::create(b, l, a[0], a[1]);
  });
  addElementwise<g::MaxOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    return maxS(b, l, a[0], a[1], isUnsigned(t));
  });
  addElementwise<g::MinOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    return minS(b, l, a[0], a[1], isUnsigned(t));
  });
  // LLVM's shifts by the width or more are poison; ONNX's give 0 (or the
  // sign for an arithmetic right shift), so the amount is clamped first.
  addElementwise<g::ShiftLeftOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    Value width = scalar(b, l, t, arithType(t).getIntOrFloatBitWidth());
    Value tooFar = compareS(b, l, "ge", a[1], width, /*uns=*/true);
    Value shifted = arith::ShLIOp::create(b, l, a[0], a[1]);
    return arith::SelectOp::create(b, l, tooFar, scalar(b, l, t, 0), shifted).getResult();
  });
  addElementwise<g::ShiftRightOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    unsigned w = arithType(t).getIntOrFloatBitWidth();
    if (isUnsigned(t)) {
      Value tooFar = compareS(b, l, "ge", a[1], scalar(b, l, t, w), /*uns=*/true);
      Value shifted = arith::ShRUIOp::create(b, l, a[0], a[1]);
      return arith::SelectOp::create(b, l, tooFar, scalar(b, l, t, 0), shifted).getResult();
    }
    Value amount = minS(b, l, a[1], scalar(b, l, t, w - 1), /*uns=*/true);
    return arith::ShRSIOp::create(b, l, a[0], amount).getResult();
  });
  addElementwise<g::AndOp>(p, [](auto, OpBuilder &b, Location l, Type, V a) {
    return arith::AndIOp::create(b, l, a[0], a[1]).getResult();
  });
  addElementwise<g::OrOp>(p, [](auto, OpBuilder &b, Location l, Type, V a) {
    return arith::OrIOp::create(b, l, a[0], a[1]).getResult();
  });
  addElementwise<g::XorOp>(p, [](auto, OpBuilder &b, Location l, Type, V a) {
    return arith::XOrIOp::create(b, l, a[0], a[1]).getResult();
  });
  // Comparisons and select.
  auto cmp = [](const char *pred) {
    return [pred](auto, OpBuilder &b, Location l, Type t, V a) {
      return compareS(b, l, pred, a[0], a[1], isUnsigned(t));
    };
  };
  addElementwise<g::EqualOp>(p, cmp("eq"));
  addElementwise<g::LessOp>(p, cmp("lt"));
  addElementwise<g::LessEqualOp>(p, cmp("le"));
  addElementwise<g::GreaterOp>(p, cmp("gt"));
  addElementwise<g::GreaterEqualOp>(p, cmp("ge"));
  addElementwise<g::SelectOp>(p, [](auto, OpBuilder &b, Location l, Type, V a) {
    return arith::SelectOp::create(b, l, a[0], a[1], a[2]).getResult();
  });
  addElementwise<g::CastOp>(p, [](g::CastOp op, OpBuilder &b, Location l, Type t, V a) {
    return convertS(b, l, a[0], t, op.getType().getElementType());
  });

  // Unary.
  addElementwise<g::NegOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) -> Value {
    if (isFloat(t))
      return arith::NegFOp::create(b, l, a[0]);
    return arith::SubIOp::create(b, l, scalar(b, l, t, 0), a[0]);
  });
  addElementwise<g::AbsOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) -> Value {
    if (isFloat(t))
      return math::AbsFOp::create(b, l, a[0]);
    return isUnsigned(t) ? a[0] : math::AbsIOp::create(b, l, a[0]).getResult();
  });
  addElementwise<g::SignOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    // NaN and zero fall through both tests and come back unchanged.
    Value x = a[0], zero = scalar(b, l, t, 0);
    Value pos = compareS(b, l, "gt", x, zero, isUnsigned(t));
    Value neg = compareS(b, l, "lt", x, zero, isUnsigned(t));
    Value r = arith::SelectOp::create(b, l, neg, scalar(b, l, t, -1), x);
    return arith::SelectOp::create(b, l, pos, scalar(b, l, t, 1), r).getResult();
  });
  auto math1 = [](auto create) {
    return [create](auto, OpBuilder &b, Location l, Type, V a) -> Value {
      return create(b, l, a[0]);
    };
  };
  addElementwise<g::ExpOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::ExpOp::create(b, l, x).getResult(); }));
  addElementwise<g::LogOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::LogOp::create(b, l, x).getResult(); }));
  addElementwise<g::SqrtOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::SqrtOp::create(b, l, x).getResult(); }));
  addElementwise<g::RsqrtOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::RsqrtOp::create(b, l, x).getResult(); }));
  addElementwise<g::TanhOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::TanhOp::create(b, l, x).getResult(); }));
  addElementwise<g::ErfOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::ErfOp::create(b, l, x).getResult(); }));
  addElementwise<g::AtanOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::AtanOp::create(b, l, x).getResult(); }));
  addElementwise<g::SinOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::SinOp::create(b, l, x).getResult(); }));
  addElementwise<g::CosOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::CosOp::create(b, l, x).getResult(); }));
  addElementwise<g::FloorOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::FloorOp::create(b, l, x).getResult(); }));
  addElementwise<g::CeilOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::CeilOp::create(b, l, x).getResult(); }));
  addElementwise<g::RoundOp>(p, math1([](OpBuilder &b, Location l, Value x) {
    return math::RoundEvenOp::create(b, l, x).getResult(); }));
  addElementwise<g::ReciprocalOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    return arith::DivFOp::create(b, l, scalar(b, l, t, 1), a[0]).getResult();
  });
  addElementwise<g::SigmoidOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    Value e = math::ExpOp::create(b, l, arith::NegFOp::create(b, l, a[0]));
    Value d = arith::AddFOp::create(b, l, scalar(b, l, t, 1), e);
    return arith::DivFOp::create(b, l, scalar(b, l, t, 1), d).getResult();
  });
  addElementwise<g::ReluOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    return maxS(b, l, a[0], scalar(b, l, t, 0), isUnsigned(t));
  });
  addElementwise<g::NotOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    return arith::XOrIOp::create(b, l, a[0], scalar(b, l, t, 1)).getResult();
  });
  addElementwise<g::SoftplusOp>(p, [](auto, OpBuilder &b, Location l, Type, V a) {
    return math::Log1pOp::create(b, l, math::ExpOp::create(b, l, a[0])).getResult();
  });
  addElementwise<g::HardSwishOp>(p, [](auto, OpBuilder &b, Location l, Type t, V a) {
    Value x = a[0];
    Value s = arith::AddFOp::create(
        b, l, arith::MulFOp::create(b, l, x, scalar(b, l, t, 1.0 / 6)),
        scalar(b, l, t, 0.5));
    s = arith::MinimumFOp::create(
        b, l, arith::MaximumFOp::create(b, l, s, scalar(b, l, t, 0)),
        scalar(b, l, t, 1));
    return arith::MulFOp::create(b, l, x, s).getResult();
  });
  addElementwise<g::HardSigmoidOp>(p, [](g::HardSigmoidOp op, OpBuilder &b, Location l,
                                         Type t, V a) {
    Value s = arith::AddFOp::create(
        b, l,
        arith::MulFOp::create(b, l, a[0],
                              scalar(b, l, t, op.getAlpha().convertToDouble())),
        scalar(b, l, t, op.getBeta().convertToDouble()));
    return arith::MinimumFOp::create(
               b, l, arith::MaximumFOp::create(b, l, s, scalar(b, l, t, 0)),
               scalar(b, l, t, 1))
        .getResult();
  });
  addElementwise<g::LeakyReluOp>(p, [](g::LeakyReluOp op, OpBuilder &b, Location l,
                                       Type t, V a) {
    Value x = a[0];
    Value neg = compareS(b, l, "lt", x, scalar(b, l, t, 0), false);
    Value scaled = arith::MulFOp::create(
        b, l, x, scalar(b, l, t, op.getAlpha().convertToDouble()));
    return arith::SelectOp::create(b, l, neg, scaled, x).getResult();
  });
  addElementwise<g::EluOp>(p, [](g::EluOp op, OpBuilder &b, Location l, Type t, V a) {
    Value x = a[0];
    Value neg = compareS(b, l, "lt", x, scalar(b, l, t, 0), false);
    Value e = arith::MulFOp::create(
        b, l, math::ExpM1Op::create(b, l, x),
        scalar(b, l, t, op.getAlpha().convertToDouble()));
    return arith::SelectOp::create(b, l, neg, e, x).getResult();
  });
  addElementwise<g::ClampOp>(p, [](g::ClampOp op, OpBuilder &b, Location l, Type t, V a) {
    Value x = a[0];
    bool uns = isUnsigned(t);
    if (op.getMin())
      x = maxS(b, l, x, scalar(b, l, t, op.getMin()->convertToDouble()), uns);
    if (op.getMax())
      x = minS(b, l, x, scalar(b, l, t, op.getMax()->convertToDouble()), uns);
    return x;
  });
}

//===----------------------------------------------------------------------===//
// Contractions: matmul, convolution, pooling
//===----------------------------------------------------------------------===//

/// The type a sum (a reduction, a mean, a normalisation's statistics, a
/// softmax's denominator) of `elem` values adds in: f32 for 16-bit floats,
/// whatever the partials type (as Poplar's reductions of fp16 do: such sums
/// pass fp16's range -- a batch norm's over N x H x W, a softmax's over a
/// vocabulary); the result's own type otherwise.
Type sumType(Operation *op, Type elem) {
  if (!elem.isF16() && !elem.isBF16())
    return elem;
  return Float32Type::get(op->getContext());
}

/// The type a matmul or a convolution of `elem` values adds its partial
/// sums in (PopTorch's setPartialsType, which covers only those): the sum
/// type, unless the module asks for half partials (graph.partials_type),
/// then the result's own type.
Type partialsType(Operation *op, Type elem) {
  auto module = op->getParentOfType<ModuleOp>();
  auto asked = module ? module->getAttrOfType<TypeAttr>(g::kPartialsTypeAttrName) : TypeAttr();
  if (asked && asked.getValue().isF16())
    return elem;
  return sumType(op, elem);
}

/// `out += a * b` into a tensor of `outType`'s shape in `partials`, the
/// operands widened to it, reshaped to `resultShape`; rounded once (to
/// nearest) to `outType`'s element type at the end. The multiply-accumulate
/// is a single linalg.generic, as the tile planner and codegen recognise
/// contractions; the rounding comes after the reshape, where the elementwise
/// ops that follow (a bias, an activation) join it, and with them it runs
/// as the contraction's epilogue.
Value contraction(OpBuilder &b, Location l, RankedTensorType outType, Type partials,
                  ValueRange operands, ArrayRef<AffineMap> maps,
                  ArrayRef<IteratorType> iters, ArrayRef<int64_t> resultShape) {
  Type elem = outType.getElementType();
  auto accType = outType.clone(partials);
  Value init = filled(b, l, accType, scalar(b, l, partials, 0));
  Value sum = linalg::GenericOp::create(
                  b, l, TypeRange{accType}, operands, ValueRange{init}, maps, iters,
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value x = a[0], y = a[1];
                    if (partials != elem) {
                      x = arith::ExtFOp::create(nb, nl, partials, x);
                      y = arith::ExtFOp::create(nb, nl, partials, y);
                    }
                    linalg::YieldOp::create(nb, nl, addS(nb, nl, a[2], mulS(nb, nl, x, y)));
                  })
                  .getResult(0);
  sum = reshapeTo(b, l, sum, resultShape);
  if (partials == elem)
    return sum;
  return elementwise(b, l, outType.clone(resultShape), ValueRange{sum},
                     [&](OpBuilder &nb, Location nl, ValueRange a) {
                       return arith::TruncFOp::create(nb, nl, elem, a[0]).getResult();
                     });
}

struct MatmulPattern : OpConversionPattern<g::MatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::MatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    MLIRContext *ctx = getContext();
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    SmallVector<int64_t> ls(tensorType(lhs).getShape()), rs(tensorType(rhs).getShape());
    // Rank-1 operands become matrices, as numpy.matmul promotes them.
    if (ls.size() == 1) {
      ls.insert(ls.begin(), 1);
      lhs = reshapeTo(rewriter, l, lhs, ls);
    }
    if (rs.size() == 1) {
      rs.push_back(1);
      rhs = reshapeTo(rewriter, l, rhs, rs);
    }
    SmallVector<int64_t> batch =
        *g::broadcastShapes(ArrayRef(ls).drop_back(2), ArrayRef(rs).drop_back(2));
    int64_t nb = batch.size();
    // Loops: batch..., m, n, k.
    unsigned loops = nb + 3;
    auto dim = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
    auto operandMap = [&](ArrayRef<int64_t> shape, AffineExpr a, AffineExpr b) {
      SmallVector<AffineExpr> exprs;
      size_t off = nb - (shape.size() - 2);
      for (size_t i = 0; i + 2 < shape.size(); ++i)
        exprs.push_back(shape[i] == 1 && batch[i + off] != 1
                            ? getAffineConstantExpr(0, ctx)
                            : dim(i + off));
      exprs.push_back(a);
      exprs.push_back(b);
      return AffineMap::get(loops, 0, exprs, ctx);
    };
    SmallVector<AffineExpr> outExprs;
    for (int64_t i = 0; i < nb; ++i)
      outExprs.push_back(dim(i));
    outExprs.push_back(dim(nb));
    outExprs.push_back(dim(nb + 1));
    SmallVector<AffineMap> maps = {operandMap(ls, dim(nb), dim(nb + 2)),
                                   operandMap(rs, dim(nb + 2), dim(nb + 1)),
                                   AffineMap::get(loops, 0, outExprs, ctx)};
    SmallVector<IteratorType> iters(loops, IteratorType::parallel);
    iters.back() = IteratorType::reduction;
    Type elem = op.getType().getElementType();
    SmallVector<int64_t> outShape = batch;
    outShape.push_back(ls[ls.size() - 2]);
    outShape.push_back(rs.back());
    auto outType = RankedTensorType::get(outShape, elem);
    rewriter.replaceOp(op, contraction(rewriter, l, outType, partialsType(op, elem),
                                       ValueRange{lhs, rhs}, maps, iters,
                                       op.getType().getShape()));
    return success();
  }
};

/// Pads the spatial dims (from dim 2) of `x` by `low`/`high` with `value`.
Value padSpatial(OpBuilder &b, Location l, Value x, ArrayRef<int64_t> low,
                 ArrayRef<int64_t> high, Value value) {
  if (llvm::all_of(low, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(high, [](int64_t p) { return p == 0; }))
    return x;
  auto type = tensorType(x);
  SmallVector<int64_t> lo = {0, 0}, hi = {0, 0}, shape(type.getShape());
  llvm::append_range(lo, low);
  llvm::append_range(hi, high);
  for (size_t d = 0; d < shape.size(); ++d)
    shape[d] += lo[d] + hi[d];
  SmallVector<OpFoldResult> loF, hiF;
  for (size_t d = 0; d < shape.size(); ++d) {
    loF.push_back(b.getIndexAttr(lo[d]));
    hiF.push_back(b.getIndexAttr(hi[d]));
  }
  return tensor::PadOp::create(b, l, type.clone(shape), x, loF, hiF, value);
}

struct ConvPattern : OpConversionPattern<g::ConvOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::ConvOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    MLIRContext *ctx = getContext();
    Type elem = op.getType().getElementType();
    ArrayRef<int64_t> in = tensorType(adaptor.getInput()).getShape();
    ArrayRef<int64_t> w = tensorType(adaptor.getWeight()).getShape();
    ArrayRef<int64_t> out = op.getType().getShape();
    int64_t k = in.size() - 2, groups = op.getGroups();
    int64_t cg = w[1], fg = w[0] / groups;
    ArrayRef<int64_t> pads = op.getPads();
    Value x = padSpatial(rewriter, l, adaptor.getInput(), pads.take_front(k),
                         pads.drop_front(k), scalar(rewriter, l, elem, 0));
    SmallVector<int64_t> padded(tensorType(x).getShape());
    // Expose groups as dims so every loop has a pure index somewhere:
    // input N x G x C/G x D..., weight G x F/G x C/G x K..., out N x G x F/G x O...
    SmallVector<int64_t> xg = {padded[0], groups, cg};
    llvm::append_range(xg, ArrayRef(padded).drop_front(2));
    SmallVector<int64_t> wg = {groups, fg, cg};
    llvm::append_range(wg, w.drop_front(2));
    SmallVector<int64_t> og = {out[0], groups, fg};
    llvm::append_range(og, out.drop_front(2));
    x = reshapeTo(rewriter, l, x, xg);
    Value wv = reshapeTo(rewriter, l, adaptor.getWeight(), wg);
    // Loops: n, g, f, o_1..o_k, c, r_1..r_k.
    unsigned loops = 4 + 2 * k;
    auto dim = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
    SmallVector<AffineExpr> xe = {dim(0), dim(1), dim(3 + k)};
    SmallVector<AffineExpr> we = {dim(1), dim(2), dim(3 + k)};
    SmallVector<AffineExpr> oe = {dim(0), dim(1), dim(2)};
    for (int64_t i = 0; i < k; ++i) {
      xe.push_back(dim(3 + i) * op.getStrides()[i] +
                   dim(4 + k + i) * op.getDilations()[i]);
      we.push_back(dim(4 + k + i));
      oe.push_back(dim(3 + i));
    }
    SmallVector<AffineMap> maps = {AffineMap::get(loops, 0, xe, ctx),
                                   AffineMap::get(loops, 0, we, ctx),
                                   AffineMap::get(loops, 0, oe, ctx)};
    SmallVector<IteratorType> iters(loops, IteratorType::parallel);
    for (unsigned i = 3 + k; i < loops; ++i)
      iters[i] = IteratorType::reduction;
    auto outType = RankedTensorType::get(og, elem);
    // The accumulator starts at zero and the bias is added afterwards, as an
    // elementwise op. Starting it at the broadcast bias instead would need a
    // pass writing the whole output before the convolution -- on the IPU a
    // compute set and a sync of its own per convolution -- where an add
    // joins the elementwise chain after it (BatchNorm, Relu, a residual Add)
    // that ipu-map-tiles runs in the convolution's compute set, or in the
    // combining step of a split reduction, whose accumulator then also
    // starts at zero.
    Value result = contraction(rewriter, l, outType, partialsType(op, elem),
                               ValueRange{x, wv}, maps, iters, out);
    if (Value bias = adaptor.getBias()) {
      // Read at the channel index (d1), not broadcast from C x 1 x 1: a map
      // of dims only is what ipu-map-tiles fuses into the reduction.
      unsigned r = out.size();
      AffineMap identity = AffineMap::getMultiDimIdentityMap(r, ctx);
      auto resultType = tensorType(result);
      result = linalg::GenericOp::create(
                   rewriter, l, TypeRange{resultType}, ValueRange{result, bias},
                   ValueRange{empty(rewriter, l, resultType)},
                   {identity, AffineMap::get(r, 0, {dim(1)}, ctx), identity},
                   SmallVector<IteratorType>(r, IteratorType::parallel),
                   [](OpBuilder &b, Location nl, ValueRange a) {
                     linalg::YieldOp::create(b, nl, addS(b, nl, a[0], a[1]));
                   })
                   .getResult(0);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Extra trailing padding so that ceil-mode windows stay inside the tensor.
SmallVector<int64_t> windowHighPads(ArrayRef<int64_t> in, ArrayRef<int64_t> out,
                                    ArrayRef<int64_t> kernel,
                                    ArrayRef<int64_t> strides,
                                    ArrayRef<int64_t> pads,
                                    ArrayRef<int64_t> dilations) {
  size_t k = kernel.size();
  SmallVector<int64_t> high;
  for (size_t i = 0; i < k; ++i) {
    int64_t span = dilations[i] * (kernel[i] - 1) + 1;
    int64_t needed = (out[i + 2] - 1) * strides[i] + span;
    int64_t have = in[i + 2] + pads[i] + pads[i + k];
    high.push_back(pads[i + k] + std::max<int64_t>(0, needed - have));
  }
  return high;
}

/// Pooling as a window reduction: input N x C x (o*s + r*d), with a dummy
/// operand of the window's shape that gives the r loops their bounds.
Value poolWindow(OpBuilder &b, Location l, Value x, RankedTensorType outType,
                 ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                 ArrayRef<int64_t> dilations, Value init,
                 function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  MLIRContext *ctx = b.getContext();
  int64_t k = kernel.size();
  unsigned loops = 2 + 2 * k;
  auto dim = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineExpr> xe = {dim(0), dim(1)}, ke, oe = {dim(0), dim(1)};
  for (int64_t i = 0; i < k; ++i) {
    xe.push_back(dim(2 + i) * strides[i] + dim(2 + k + i) * dilations[i]);
    ke.push_back(dim(2 + k + i));
    oe.push_back(dim(2 + i));
  }
  Value window = tensor::EmptyOp::create(b, l, kernel, b.getI1Type());
  SmallVector<IteratorType> iters(loops, IteratorType::parallel);
  for (unsigned i = 2 + k; i < loops; ++i)
    iters[i] = IteratorType::reduction;
  return linalg::GenericOp::create(
             b, l, TypeRange{outType}, ValueRange{x, window}, ValueRange{init},
             {AffineMap::get(loops, 0, xe, ctx), AffineMap::get(loops, 0, ke, ctx),
              AffineMap::get(loops, 0, oe, ctx)},
             iters,
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               linalg::YieldOp::create(nb, nl, combine(nb, nl, a[2], a[0]));
             })
      .getResult(0);
}

struct MaxPoolPattern : OpConversionPattern<g::MaxPoolOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::MaxPoolOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    Type elem = op.getType().getElementType();
    ArrayRef<int64_t> pads = op.getPads();
    int64_t k = op.getKernelShape().size();
    SmallVector<int64_t> high = windowHighPads(
        tensorType(adaptor.getInput()).getShape(), op.getType().getShape(),
        op.getKernelShape(), op.getStrides(), pads, op.getDilations());
    Value lowest = extremum(rewriter, l, elem, /*lowest=*/true);
    Value x = padSpatial(rewriter, l, adaptor.getInput(), pads.take_front(k), high, lowest);
    Value init = filled(rewriter, l, op.getType(), lowest);
    bool uns = isUnsigned(elem);
    rewriter.replaceOp(op, poolWindow(rewriter, l, x, op.getType(), op.getKernelShape(),
                                      op.getStrides(), op.getDilations(), init,
                                      [&](OpBuilder &b, Location nl, Value acc, Value v) {
                                        return maxS(b, nl, acc, v, uns);
                                      }));
    return success();
  }
};

struct AvgPoolPattern : OpConversionPattern<g::AvgPoolOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::AvgPoolOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    Type elem = op.getType().getElementType();
    ArrayRef<int64_t> pads = op.getPads(), in = tensorType(adaptor.getInput()).getShape();
    ArrayRef<int64_t> out = op.getType().getShape();
    int64_t k = op.getKernelShape().size();
    SmallVector<int64_t> high = windowHighPads(in, out, op.getKernelShape(),
                                               op.getStrides(), pads, op.getDilations());
    Value zero = scalar(rewriter, l, elem, 0);
    Value x = padSpatial(rewriter, l, adaptor.getInput(), pads.take_front(k), high, zero);
    Value sum = poolWindow(rewriter, l, x, op.getType(), op.getKernelShape(),
                           op.getStrides(), op.getDilations(),
                           filled(rewriter, l, op.getType(), zero),
                           [](OpBuilder &b, Location nl, Value acc, Value v) {
                             return addS(b, nl, acc, v);
                           });
    // Divisors depend only on the output position: a compile-time table of
    // the output's spatial shape, broadcast over N and C.
    SmallVector<int64_t> spatial(out.drop_front(2));
    SmallVector<SmallVector<double>> perDim;
    for (int64_t i = 0; i < k; ++i)
      perDim.push_back(g::windowCounts(in[i + 2], out[i + 2], op.getKernelShape()[i],
                                    op.getStrides()[i], pads[i], pads[i + k],
                                    op.getDilations()[i], op.getCountIncludePad()));
    int64_t n = g::numElements(spatial);
    SmallVector<Attribute> table;
    for (int64_t lin = 0; lin < n; ++lin) {
      double c = 1;
      int64_t rest = lin;
      for (int64_t i = k - 1; i >= 0; --i) {
        c *= perDim[i][rest % spatial[i]];
        rest /= spatial[i];
      }
      table.push_back(scalarAttr(elem, c));
    }
    auto tableType = RankedTensorType::get(spatial, elem);
    Value counts = arith::ConstantOp::create(
        rewriter, l, DenseElementsAttr::get(tableType, table));
    rewriter.replaceOp(op, elementwise(rewriter, l, op.getType(), ValueRange{sum, counts},
                                       [](OpBuilder &b, Location nl, ValueRange a) {
                                         return divS(b, nl, a[0], a[1], false);
                                       }));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

/// linalg.reduce of `x` over `axes` into a tensor filled with `init` (of
/// `init`'s type: a sum of fp16 values may accumulate in f32, each value
/// widened), reshaped to `resultShape` (which has size-1 dims with
/// keepdims).
Value reduce(OpBuilder &b, Location l, Value x, ArrayRef<int64_t> axes,
             ArrayRef<int64_t> resultShape, Value init,
             function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  auto type = tensorType(x);
  SmallVector<int64_t> kept;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!llvm::is_contained(axes, d))
      kept.push_back(type.getDimSize(d));
  auto keptType = RankedTensorType::get(kept, init.getType());
  Value acc = filled(b, l, keptType, init);
  Value r = linalg::ReduceOp::create(
                b, l, ValueRange{x}, ValueRange{acc}, axes,
                [&](OpBuilder &nb, Location nl, ValueRange a) {
                  Value v = a[0];
                  if (v.getType() != a[1].getType())
                    v = arith::ExtFOp::create(nb, nl, a[1].getType(), v);
                  linalg::YieldOp::create(nb, nl, combine(nb, nl, a[1], v));
                })
                .getResult(0);
  return reshapeTo(b, l, r, resultShape);
}

/// The sum of `x` over `axes` in `partials` (sumType), reshaped to
/// `resultShape`: still in `partials`, for the caller to divide before it
/// rounds (a mean of fp16 values whose sum passes fp16's range).
Value sumIn(OpBuilder &b, Location l, Value x, ArrayRef<int64_t> axes,
            ArrayRef<int64_t> resultShape, Type partials) {
  return reduce(b, l, x, axes, resultShape, scalar(b, l, partials, 0),
                [](OpBuilder &nb, Location nl, Value a, Value v) { return addS(nb, nl, a, v); });
}

/// `v` rounded (to nearest) to `elem` when it is of another float type.
Value roundTo(OpBuilder &b, Location l, Value v, Type elem) {
  auto type = tensorType(v);
  if (type.getElementType() == elem)
    return v;
  return elementwise(b, l, type.clone(elem), ValueRange{v},
                     [&](OpBuilder &nb, Location nl, ValueRange a) {
                       return arith::TruncFOp::create(nb, nl, elem, a[0]).getResult();
                     });
}

int64_t reducedCount(Value x, ArrayRef<int64_t> axes) {
  int64_t n = 1;
  for (int64_t a : axes)
    n *= tensorType(x).getDimSize(a);
  return n;
}

template <typename OpTy>
struct ReducePattern : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    Type elem = op.getType().getElementType();
    bool uns = isUnsigned(elem);
    Value x = adaptor.getInput();
    ArrayRef<int64_t> shape = op.getType().getShape();
    Value r;
    if constexpr (std::is_same_v<OpTy, g::ReduceMaxOp>) {
      r = reduce(rewriter, l, x, op.getAxes(), shape, extremum(rewriter, l, elem, true),
                 [&](OpBuilder &b, Location nl, Value a, Value v) {
                   return maxS(b, nl, a, v, uns);
                 });
    } else if constexpr (std::is_same_v<OpTy, g::ReduceMinOp>) {
      r = reduce(rewriter, l, x, op.getAxes(), shape, extremum(rewriter, l, elem, false),
                 [&](OpBuilder &b, Location nl, Value a, Value v) {
                   return minS(b, nl, a, v, uns);
                 });
    } else if constexpr (std::is_same_v<OpTy, g::ReduceProdOp>) {
      r = reduce(rewriter, l, x, op.getAxes(), shape, scalar(rewriter, l, elem, 1),
                 [](OpBuilder &b, Location nl, Value a, Value v) {
                   return mulS(b, nl, a, v);
                 });
    } else {
      // Sums of fp16 values add in f32 (sumType), a mean divides there
      // too, and the result rounds once.
      Type partials = sumType(op, elem);
      r = sumIn(rewriter, l, x, op.getAxes(), shape, partials);
      if constexpr (std::is_same_v<OpTy, g::ReduceMeanOp>) {
        double count = reducedCount(x, op.getAxes());
        Value c = scalar(rewriter, l, partials, count);
        r = elementwise(rewriter, l, op.getType().clone(partials), ValueRange{r},
                        [&](OpBuilder &b, Location nl, ValueRange a) {
                          return divS(b, nl, a[0], c, false);
                        });
      }
      r = roundTo(rewriter, l, r, elem);
    }
    rewriter.replaceOp(op, r);
    return success();
  }
};

template <typename OpTy>
struct ArgReducePattern : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    constexpr bool isMax = std::is_same_v<OpTy, g::ArgMaxOp>;
    Location l = op.getLoc();
    MLIRContext *ctx = this->getContext();
    Value x = adaptor.getInput();
    auto xt = tensorType(x);
    Type elem = xt.getElementType();
    int64_t axis = op.getAxis(), rank = xt.getRank();
    SmallVector<int64_t> kept;
    SmallVector<AffineExpr> keptExprs;
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis) {
        kept.push_back(xt.getDimSize(d));
        keptExprs.push_back(getAffineDimExpr(d, ctx));
      }
    auto valType = xt.clone(kept);
    auto idxType = RankedTensorType::get(kept, rewriter.getI64Type());
    Value vals = filled(rewriter, l, valType, extremum(rewriter, l, elem, isMax));
    Value idxs = filled(rewriter, l, idxType, scalar(rewriter, l, rewriter.getI64Type(), 0));
    SmallVector<IteratorType> iters(rank, IteratorType::parallel);
    iters[axis] = IteratorType::reduction;
    AffineMap keptMap = AffineMap::get(rank, 0, keptExprs, ctx);
    bool last = op.getSelectLastIndex(), uns = isUnsigned(elem);
    auto generic = linalg::GenericOp::create(
        rewriter, l, TypeRange{valType, idxType}, ValueRange{x}, ValueRange{vals, idxs},
        {AffineMap::getMultiDimIdentityMap(rank, ctx), keptMap, keptMap}, iters,
        [&](OpBuilder &b, Location nl, ValueRange a) {
          Value i = arith::IndexCastOp::create(
              b, nl, b.getI64Type(), linalg::IndexOp::create(b, nl, axis));
          Value better = compareS(b, nl, isMax ? "gt" : "lt", a[0], a[1], uns);
          if (last)
            better = arith::OrIOp::create(b, nl, better,
                                          compareS(b, nl, "eq", a[0], a[1], uns));
          // The first NaN wins over everything, as in numpy.argmax.
          if (isFloat(elem)) {
            Value isNan =
                arith::CmpFOp::create(b, nl, arith::CmpFPredicate::UNO, a[0], a[0]);
            Value accNan =
                arith::CmpFOp::create(b, nl, arith::CmpFPredicate::UNO, a[1], a[1]);
            better = arith::OrIOp::create(b, nl, better, isNan);
            better = arith::AndIOp::create(
                b, nl, better,
                arith::XOrIOp::create(b, nl, accNan,
                                      arith::ConstantOp::create(b, nl, b.getBoolAttr(true))));
          }
          linalg::YieldOp::create(
              b, nl,
              ValueRange{arith::SelectOp::create(b, nl, better, a[0], a[1]),
                         arith::SelectOp::create(b, nl, better, i, a[2])});
        });
    rewriter.replaceOp(op, reshapeTo(rewriter, l, generic.getResult(1),
                                     op.getType().getShape()));
    return success();
  }
};

template <typename OpTy>
struct SoftmaxPattern : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    Value x = adaptor.getInput();
    auto type = op.getType();
    Type elem = type.getElementType();
    SmallVector<int64_t> kept(type.getShape());
    int64_t axis = op.getAxis();
    kept[axis] = 1;
    // Shifted by the max for range: e = exp(x - max), s = sum(e).
    Value m = reduce(rewriter, l, x, {axis}, kept, extremum(rewriter, l, elem, true),
                     [](OpBuilder &b, Location nl, Value a, Value v) {
                       return arith::MaximumFOp::create(b, nl, a, v).getResult();
                     });
    Value shifted = elementwise(rewriter, l, type, ValueRange{x, m},
                                [](OpBuilder &b, Location nl, ValueRange a) {
                                  return arith::SubFOp::create(b, nl, a[0], a[1]).getResult();
                                });
    Value e = elementwise(rewriter, l, type, ValueRange{shifted},
                          [](OpBuilder &b, Location nl, ValueRange a) {
                            return math::ExpOp::create(b, nl, a[0]).getResult();
                          });
    // The denominator summed in f32 (sumType) and used there: rounded
    // only with the result (a sum over a vocabulary passes fp16's range).
    Type partials = sumType(op, elem);
    Value s = sumIn(rewriter, l, e, {axis}, kept, partials);
    auto wide = [&](OpBuilder &b, Location nl, Value v) {
      return v.getType() == partials ? v : arith::ExtFOp::create(b, nl, partials, v).getResult();
    };
    auto narrow = [&](OpBuilder &b, Location nl, Value v) {
      return partials == elem ? v : arith::TruncFOp::create(b, nl, elem, v).getResult();
    };
    Value r;
    if constexpr (std::is_same_v<OpTy, g::LogSoftmaxOp>)
      r = elementwise(rewriter, l, type, ValueRange{shifted, s},
                      [&](OpBuilder &b, Location nl, ValueRange a) {
                        Value d = arith::SubFOp::create(b, nl, wide(b, nl, a[0]),
                                                        math::LogOp::create(b, nl, a[1]));
                        return narrow(b, nl, d);
                      });
    else
      r = elementwise(rewriter, l, type, ValueRange{e, s},
                      [&](OpBuilder &b, Location nl, ValueRange a) {
                        return narrow(b, nl, arith::DivFOp::create(b, nl, wide(b, nl, a[0]), a[1]));
                      });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// Reshapes a per-channel vector of C elements to C x 1 x ... x 1 so that
/// NumPy broadcasting applies it along dim 1 of an N x C x ... tensor.
Value channelVector(OpBuilder &b, Location l, Value v, int64_t rank) {
  SmallVector<int64_t> shape(rank - 1, 1);
  shape[0] = tensorType(v).getDimSize(0);
  return reshapeTo(b, l, v, shape);
}

/// (x - mean) * rsqrt(var + eps), with mean and var over `axes` (kept dims).
Value normalize(OpBuilder &b, Location l, Value x, ArrayRef<int64_t> axes,
                double epsilon, Type partials) {
  auto type = tensorType(x);
  Type elem = type.getElementType();
  SmallVector<int64_t> kept(type.getShape());
  for (int64_t a : axes)
    kept[a] = 1;
  if (partials != elem) {
    // fp16 values: the statistics in `partials` -- the mean summed and
    // divided there and rounded once (the model subtracts it in fp16), the
    // squares, their mean, epsilon and the reciprocal square root never
    // rounded (a square passes fp16's range past 256, and BERT's epsilon of
    // 1e-12 is 0 in fp16) -- and the result rounded once.
    auto wide = type.clone(partials);
    Value count = scalar(b, l, partials, reducedCount(x, axes));
    auto meanOf = [&](Value v) {
      Value sum = sumIn(b, l, v, axes, kept, partials);
      return elementwise(b, l, tensorType(sum), ValueRange{sum},
                         [&](OpBuilder &nb, Location nl, ValueRange a) {
                           return arith::DivFOp::create(nb, nl, a[0], count).getResult();
                         });
    };
    Value centered = elementwise(b, l, type, ValueRange{x, roundTo(b, l, meanOf(x), elem)},
                                 [](OpBuilder &nb, Location nl, ValueRange a) {
                                   return arith::SubFOp::create(nb, nl, a[0], a[1]).getResult();
                                 });
    Value sq = elementwise(b, l, wide, ValueRange{centered},
                           [&](OpBuilder &nb, Location nl, ValueRange a) {
                             Value c = arith::ExtFOp::create(nb, nl, partials, a[0]);
                             return arith::MulFOp::create(nb, nl, c, c).getResult();
                           });
    Value wideEps = scalar(b, l, partials, epsilon);
    return elementwise(b, l, type, ValueRange{centered, meanOf(sq)},
                       [&](OpBuilder &nb, Location nl, ValueRange a) {
                         Value inv = math::RsqrtOp::create(
                             nb, nl, arith::AddFOp::create(nb, nl, a[1], wideEps));
                         Value c = arith::ExtFOp::create(nb, nl, partials, a[0]);
                         Value y = arith::MulFOp::create(nb, nl, c, inv);
                         return arith::TruncFOp::create(nb, nl, elem, y).getResult();
                       });
  }
  Value eps = scalar(b, l, elem, epsilon);
  Value count = scalar(b, l, elem, reducedCount(x, axes));
  auto add = [](OpBuilder &nb, Location nl, Value a, Value v) {
    return arith::AddFOp::create(nb, nl, a, v).getResult();
  };
  Value sum = reduce(b, l, x, axes, kept, scalar(b, l, elem, 0), add);
  Value centered = elementwise(b, l, type, ValueRange{x, sum},
                               [&](OpBuilder &nb, Location nl, ValueRange a) {
                                 Value mean = arith::DivFOp::create(nb, nl, a[1], count);
                                 return arith::SubFOp::create(nb, nl, a[0], mean).getResult();
                               });
  Value sq = elementwise(b, l, type, ValueRange{centered},
                         [](OpBuilder &nb, Location nl, ValueRange a) {
                           return arith::MulFOp::create(nb, nl, a[0], a[0]).getResult();
                         });
  Value sqSum = reduce(b, l, sq, axes, kept, scalar(b, l, elem, 0), add);
  return elementwise(b, l, type, ValueRange{centered, sqSum},
                     [&](OpBuilder &nb, Location nl, ValueRange a) {
                       Value var = arith::DivFOp::create(nb, nl, a[1], count);
                       Value inv = math::RsqrtOp::create(
                           nb, nl, arith::AddFOp::create(nb, nl, var, eps));
                       return arith::MulFOp::create(nb, nl, a[0], inv).getResult();
                     });
}

/// y * scale + bias with NumPy broadcasting of scale and bias.
Value scaleShift(OpBuilder &b, Location l, Value y, Value scale, Value bias) {
  return elementwise(b, l, tensorType(y), ValueRange{y, scale, bias},
                     [](OpBuilder &nb, Location nl, ValueRange a) {
                       Value m = arith::MulFOp::create(nb, nl, a[0], a[1]);
                       return arith::AddFOp::create(nb, nl, m, a[2]).getResult();
                     });
}

struct BatchNormPattern : OpConversionPattern<g::BatchNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::BatchNormOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    auto type = op.getType();
    int64_t rank = type.getRank();
    Type elem = type.getElementType();
    Value eps = scalar(rewriter, l, elem, op.getEpsilon().convertToDouble());
    // One elementwise op: (x - mean) * scale * rsqrt(var + eps) + bias.
    Value r = elementwise(
        rewriter, l, type,
        ValueRange{a.getInput(), channelVector(rewriter, l, a.getScale(), rank),
                   channelVector(rewriter, l, a.getBias(), rank),
                   channelVector(rewriter, l, a.getMean(), rank),
                   channelVector(rewriter, l, a.getVariance(), rank)},
        [&](OpBuilder &b, Location nl, ValueRange v) {
          Value inv = math::RsqrtOp::create(b, nl, arith::AddFOp::create(b, nl, v[4], eps));
          Value c = arith::SubFOp::create(b, nl, v[0], v[3]);
          Value s = arith::MulFOp::create(b, nl, arith::MulFOp::create(b, nl, c, inv), v[1]);
          return arith::AddFOp::create(b, nl, s, v[2]).getResult();
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct LayerNormPattern : OpConversionPattern<g::LayerNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::LayerNormOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    SmallVector<int64_t> axes;
    for (int64_t d = op.getAxis(); d < op.getType().getRank(); ++d)
      axes.push_back(d);
    Value y = normalize(rewriter, l, a.getInput(), axes, op.getEpsilon().convertToDouble(),
                        sumType(op, op.getType().getElementType()));
    rewriter.replaceOp(op, scaleShift(rewriter, l, y, a.getScale(), a.getBias()));
    return success();
  }
};

struct GroupNormPattern : OpConversionPattern<g::GroupNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::GroupNormOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    ArrayRef<int64_t> shape = op.getType().getShape();
    int64_t groups = op.getNumGroups(), rank = shape.size();
    // N x G x C/G x spatial..., normalised over everything after G.
    SmallVector<int64_t> grouped = {shape[0], groups, shape[1] / groups};
    llvm::append_range(grouped, shape.drop_front(2));
    SmallVector<int64_t> axes;
    for (int64_t d = 2; d < static_cast<int64_t>(grouped.size()); ++d)
      axes.push_back(d);
    Value x = reshapeTo(rewriter, l, a.getInput(), grouped);
    Value y = reshapeTo(rewriter, l,
                        normalize(rewriter, l, x, axes, op.getEpsilon().convertToDouble(),
                                  sumType(op, op.getType().getElementType())),
                        shape);
    rewriter.replaceOp(op, scaleShift(rewriter, l, y,
                                      channelVector(rewriter, l, a.getScale(), rank),
                                      channelVector(rewriter, l, a.getBias(), rank)));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

struct ConstantPattern : OpConversionPattern<g::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::ConstantOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto value = dyn_cast<TypedAttr>(op.getValue());
    if (!value)
      return rewriter.notifyMatchFailure(op, "constant is not a typed attribute");
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, value);
    return success();
  }
};

struct ReshapePattern : OpConversionPattern<g::ReshapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::ReshapeOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, reshapeTo(rewriter, op.getLoc(), a.getInput(),
                                     op.getType().getShape()));
    return success();
  }
};

struct TransposePattern : OpConversionPattern<g::TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::TransposeOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Value init = empty(rewriter, op.getLoc(), op.getType());
    rewriter.replaceOp(op, linalg::TransposeOp::create(rewriter, op.getLoc(), a.getInput(),
                                                       init, op.getPerm())
                               .getResult());
    return success();
  }
};

struct ExpandPattern : OpConversionPattern<g::ExpandOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::ExpandOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, elementwise(rewriter, op.getLoc(), op.getType(),
                                       ValueRange{a.getInput()},
                                       [](OpBuilder &, Location, ValueRange v) {
                                         return v[0];
                                       }));
    return success();
  }
};

struct ConcatPattern : OpConversionPattern<g::ConcatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::ConcatOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    Value dest = empty(rewriter, l, op.getType());
    int64_t offset = 0, axis = op.getAxis(), rank = op.getType().getRank();
    for (Value in : a.getInputs()) {
      auto t = tensorType(in);
      SmallVector<OpFoldResult> offsets(rank, rewriter.getIndexAttr(0)), sizes,
          strides(rank, rewriter.getIndexAttr(1));
      offsets[axis] = rewriter.getIndexAttr(offset);
      for (int64_t s : t.getShape())
        sizes.push_back(rewriter.getIndexAttr(s));
      dest = tensor::InsertSliceOp::create(rewriter, l, in, dest, offsets, sizes, strides);
      offset += t.getDimSize(axis);
    }
    rewriter.replaceOp(op, dest);
    return success();
  }
};

struct SlicePattern : OpConversionPattern<g::SliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::SliceOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    MLIRContext *ctx = getContext();
    auto type = op.getType();
    int64_t rank = type.getRank();
    // A strided tensor.extract_slice of the selected elements in ascending
    // order; dims with a negative stride are then reversed by a generic.
    SmallVector<OpFoldResult> offsets, sizes, strides;
    bool reverses = false;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t n = type.getDimSize(d), start = op.getStarts()[d];
      int64_t stride = op.getStrides()[d];
      int64_t low = stride > 0 ? start : start + (n - 1) * stride;
      offsets.push_back(rewriter.getIndexAttr(n == 0 ? 0 : low));
      sizes.push_back(rewriter.getIndexAttr(n));
      strides.push_back(rewriter.getIndexAttr(std::abs(stride)));
      reverses |= stride < 0 && n > 1;
    }
    Value r = tensor::ExtractSliceOp::create(rewriter, l, type, a.getInput(), offsets,
                                             sizes, strides);
    if (reverses) {
      SmallVector<AffineExpr> exprs;
      for (int64_t d = 0; d < rank; ++d) {
        int64_t n = type.getDimSize(d);
        AffineExpr i = getAffineDimExpr(d, ctx);
        exprs.push_back(op.getStrides()[d] < 0 && n > 1 ? (n - 1) - i : i);
      }
      r = linalg::GenericOp::create(
              rewriter, l, TypeRange{type}, ValueRange{r},
              ValueRange{empty(rewriter, l, type)},
              {AffineMap::get(rank, 0, exprs, ctx),
               AffineMap::getMultiDimIdentityMap(rank, ctx)},
              SmallVector<IteratorType>(rank, IteratorType::parallel),
              [](OpBuilder &b, Location nl, ValueRange v) {
                linalg::YieldOp::create(b, nl, v[0]);
              })
              .getResult(0);
    }
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// A generic over `type` whose body computes, from the output indices, the
/// indices to read in `source` and extracts that element.
Value gatherGeneric(OpBuilder &b, Location l, RankedTensorType type,
                    ValueRange inputs, ArrayRef<AffineMap> inputMaps, Value source,
                    function_ref<SmallVector<Value>(OpBuilder &, Location,
                                                    ValueRange, ValueRange)>
                        indicesFn) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = type.getRank();
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  return linalg::GenericOp::create(
             b, l, TypeRange{type}, inputs, ValueRange{empty(b, l, type)}, maps,
             SmallVector<IteratorType>(rank, IteratorType::parallel),
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               SmallVector<Value> outIdx;
               for (int64_t d = 0; d < rank; ++d)
                 outIdx.push_back(linalg::IndexOp::create(nb, nl, d));
               SmallVector<Value> srcIdx = indicesFn(nb, nl, outIdx, args.drop_back());
               Value v = tensor::ExtractOp::create(nb, nl, source, srcIdx);
               linalg::YieldOp::create(nb, nl, v);
             })
      .getResult(0);
}

/// An index value as `index`, counting from the end when negative (ONNX
/// Gather and GatherElements semantics) for a dim of `dimSize`.
Value wrapIndex(OpBuilder &b, Location l, Value raw, int64_t dimSize) {
  Value i = arith::IndexCastOp::create(b, l, b.getIndexType(), raw);
  Value neg = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, i,
                                    indexConst(b, l, 0));
  return arith::SelectOp::create(
      b, l, neg, arith::AddIOp::create(b, l, i, indexConst(b, l, dimSize)), i);
}

struct GatherPattern : OpConversionPattern<g::GatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::GatherOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    MLIRContext *ctx = getContext();
    auto type = op.getType();
    int64_t axis = op.getAxis(), rank = type.getRank();
    int64_t idxRank = tensorType(a.getIndices()).getRank();
    int64_t dimSize = tensorType(a.getInput()).getDimSize(axis);
    SmallVector<AffineExpr> idxExprs;
    for (int64_t d = 0; d < idxRank; ++d)
      idxExprs.push_back(getAffineDimExpr(axis + d, ctx));
    Value r = gatherGeneric(
        rewriter, l, type, ValueRange{a.getIndices()},
        {AffineMap::get(rank, 0, idxExprs, ctx)}, a.getInput(),
        [&](OpBuilder &b, Location nl, ValueRange out, ValueRange args) {
          SmallVector<Value> src(out.take_front(axis));
          src.push_back(wrapIndex(b, nl, args[0], dimSize));
          llvm::append_range(src, out.drop_front(axis + idxRank));
          return src;
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// graph.scatter_add as a reduction over the index positions: each result
/// element sums the updates whose index names its row. As written every
/// element compares every index (result x indices); the planner splits it
/// over tiles like any reduction, and codegen-sparse-scatter-adds turns each
/// vertex's piece into a loop over the indices that adds only the rows the
/// piece holds (PopLibs' multiUpdateAdd: indices x the row's elements).
/// Keep this form in step with codegen::matchScatterAdd.
struct ScatterAddPattern : OpConversionPattern<g::ScatterAddOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::ScatterAddOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    MLIRContext *ctx = getContext();
    auto type = op.getType();
    int64_t axis = op.getAxis(), rank = type.getRank();
    int64_t idxRank = tensorType(a.getIndices()).getRank();
    int64_t rows = type.getDimSize(axis);
    // Loops: the result's dims, then the index positions (reductions).
    int64_t loops = rank + idxRank;
    SmallVector<AffineExpr> idxExprs, updExprs;
    for (int64_t d = 0; d < idxRank; ++d)
      idxExprs.push_back(getAffineDimExpr(rank + d, ctx));
    for (int64_t d = 0; d < axis; ++d)
      updExprs.push_back(getAffineDimExpr(d, ctx));
    llvm::append_range(updExprs, idxExprs);
    for (int64_t d = axis + 1; d < rank; ++d)
      updExprs.push_back(getAffineDimExpr(d, ctx));
    SmallVector<AffineMap> maps{AffineMap::get(loops, 0, idxExprs, ctx),
                                AffineMap::get(loops, 0, updExprs, ctx),
                                AffineMap::get(loops, 0,
                                               AffineMap::getMultiDimIdentityMap(rank, ctx)
                                                   .getResults(),
                                               ctx)};
    SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
    iterators.append(idxRank, IteratorType::reduction);
    Type elem = type.getElementType();
    Value init = filled(rewriter, l, type, scalar(rewriter, l, elem, 0));
    Value r = linalg::GenericOp::create(
                  rewriter, l, TypeRange{type}, ValueRange{a.getIndices(), a.getUpdates()},
                  ValueRange{init}, maps, iterators,
                  [&](OpBuilder &b, Location nl, ValueRange args) {
                    Value row = wrapIndex(b, nl, args[0], rows);
                    Value here = arith::CmpIOp::create(b, nl, arith::CmpIPredicate::eq, row,
                                                       linalg::IndexOp::create(b, nl, axis));
                    Value zero = scalar(b, nl, elem, 0);
                    Value add = arith::SelectOp::create(b, nl, here, args[1], zero);
                    linalg::YieldOp::create(b, nl, addS(b, nl, args[2], add));
                  })
                  .getResult(0);
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct GatherElementsPattern : OpConversionPattern<g::GatherElementsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::GatherElementsOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    auto type = op.getType();
    int64_t axis = op.getAxis(), rank = type.getRank();
    int64_t dimSize = tensorType(a.getInput()).getDimSize(axis);
    Value r = gatherGeneric(
        rewriter, l, type, ValueRange{a.getIndices()},
        {AffineMap::getMultiDimIdentityMap(rank, getContext())}, a.getInput(),
        [&](OpBuilder &b, Location nl, ValueRange out, ValueRange args) {
          SmallVector<Value> src(out);
          src[axis] = wrapIndex(b, nl, args[0], dimSize);
          return src;
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct PadPattern : OpConversionPattern<g::PadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::PadOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    auto type = op.getType();
    ArrayRef<int64_t> lo = op.getPadsLow(), hi = op.getPadsHigh();
    if (op.getMode() == g::PadMode::constant) {
      SmallVector<OpFoldResult> loF, hiF;
      for (auto [p, q] : llvm::zip(lo, hi)) {
        loF.push_back(rewriter.getIndexAttr(p));
        hiF.push_back(rewriter.getIndexAttr(q));
      }
      Value v = scalar(rewriter, l, type.getElementType(), op.getValue().convertToDouble());
      rewriter.replaceOp(op, tensor::PadOp::create(rewriter, l, type, a.getInput(), loF,
                                                   hiF, v));
      return success();
    }
    ArrayRef<int64_t> in = tensorType(a.getInput()).getShape();
    bool reflect = op.getMode() == g::PadMode::reflect;
    Value r = gatherGeneric(
        rewriter, l, type, {}, {}, a.getInput(),
        [&](OpBuilder &b, Location nl, ValueRange out, ValueRange) {
          SmallVector<Value> src;
          for (auto [d, o] : llvm::enumerate(out)) {
            Value j = arith::SubIOp::create(b, nl, o, indexConst(b, nl, lo[d]));
            Value last = indexConst(b, nl, in[d] - 1);
            if (reflect) {
              // Mirror without repeating the edge: -j before, 2*last - j after.
              Value negJ = arith::SubIOp::create(b, nl, indexConst(b, nl, 0), j);
              j = arith::MaxSIOp::create(b, nl, j, negJ);
              Value mirrored = arith::SubIOp::create(
                  b, nl, arith::AddIOp::create(b, nl, last, last), j);
              j = arith::MinSIOp::create(b, nl, j, mirrored);
            } else {
              j = arith::MaxSIOp::create(b, nl, j, indexConst(b, nl, 0));
              j = arith::MinSIOp::create(b, nl, j, last);
            }
            src.push_back(j);
          }
          return src;
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// One generic over the result: every element hashes its row-major index
/// with the op's key (see graph.random_uniform). The key's mix is loop
/// invariant, left to LLVM to hoist out of the vertex's loops.
/// 64 random bits for the element at row-major index `index` (i64) from
/// the counter-based generator of graph.random_uniform: splitmix64 of a key
/// mixed from `seed`, `counter` (i64 or narrower) and `stream`.
Value counterBasedBits(OpBuilder &b, Location nl, Value seed, Value counter, int64_t stream,
                       Value index) {
  Type i64 = b.getI64Type();
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(b, nl, b.getI64IntegerAttr(static_cast<int64_t>(v)))
        .getResult();
  };
  auto splitmix = [&](Value z) {
    z = arith::XOrIOp::create(b, nl, z, arith::ShRUIOp::create(b, nl, z, c(30)));
    z = arith::MulIOp::create(b, nl, z, c(0xBF58476D1CE4E5B9ULL));
    z = arith::XOrIOp::create(b, nl, z, arith::ShRUIOp::create(b, nl, z, c(27)));
    z = arith::MulIOp::create(b, nl, z, c(0x94D049BB133111EBULL));
    return arith::XOrIOp::create(b, nl, z, arith::ShRUIOp::create(b, nl, z, c(31))).getResult();
  };
  auto toI64 = [&](Value v) {
    return v.getType() == i64 ? v : arith::ExtSIOp::create(b, nl, i64, v).getResult();
  };
  Value key = splitmix(
      arith::XOrIOp::create(b, nl, toI64(counter), splitmix(c(static_cast<uint64_t>(stream)))));
  key = splitmix(arith::XOrIOp::create(b, nl, toI64(seed), key));
  return splitmix(arith::AddIOp::create(
      b, nl, key, arith::MulIOp::create(b, nl, index, c(0x9E3779B97F4A7C15ULL))));
}

/// The row-major index (i64) of a generic's current element in `shape`.
Value rowMajorIndex(OpBuilder &b, Location nl, ArrayRef<int64_t> shape) {
  Type i64 = b.getI64Type();
  Value index = arith::ConstantOp::create(b, nl, b.getI64IntegerAttr(0));
  int64_t stride = 1;
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    Value i = arith::IndexCastOp::create(b, nl, i64, linalg::IndexOp::create(b, nl, d));
    index = arith::AddIOp::create(
        b, nl, index,
        arith::MulIOp::create(b, nl, i,
                              arith::ConstantOp::create(b, nl, b.getI64IntegerAttr(stride))));
    stride *= shape[d];
  }
  return index;
}

struct RandomUniformPattern : OpConversionPattern<g::RandomUniformOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::RandomUniformOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    MLIRContext *ctx = getContext();
    auto type = op.getType();
    auto elem = cast<FloatType>(type.getElementType());
    int64_t rank = type.getRank();
    // As many random bits as the type's significand holds: u * 2^bits is an
    // integer the type represents exactly, so u < 1.
    int64_t bits = std::min<int64_t>(elem.getFPMantissaWidth(), 53);
    Value init = tensor::EmptyOp::create(rewriter, l, type.getShape(), elem);
    AffineMap scalarMap = AffineMap::get(rank, 0, {}, ctx);
    SmallVector<IteratorType> iters(rank, IteratorType::parallel);
    double low = op.getLow().convertToDouble(), high = op.getHigh().convertToDouble();
    int64_t stream = op.getStream();
    auto generic = linalg::GenericOp::create(
        rewriter, l, TypeRange{type}, ValueRange{a.getSeed(), a.getCounter()},
        ValueRange{init},
        {scalarMap, scalarMap, AffineMap::getMultiDimIdentityMap(rank, ctx)}, iters,
        [&](OpBuilder &b, Location nl, ValueRange args) {
          Value r = counterBasedBits(b, nl, args[0], args[1], stream,
                                     rowMajorIndex(b, nl, type.getShape()));
          Value top = arith::ShRUIOp::create(
              b, nl, r, arith::ConstantOp::create(b, nl, b.getI64IntegerAttr(64 - bits)));
          Value u = arith::MulFOp::create(
              b, nl, arith::UIToFPOp::create(b, nl, elem, top),
              scalar(b, nl, elem, std::ldexp(1.0, -static_cast<int>(bits))));
          Value v = arith::AddFOp::create(
              b, nl, scalar(b, nl, elem, low),
              arith::MulFOp::create(b, nl, u, scalar(b, nl, elem, high - low)));
          linalg::YieldOp::create(b, nl, v);
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// A collective, not a computation: the ipu dialect's op, which tile
/// mapping places like its inputs and the program runs across replicas.
struct CrossReplicaSumPattern : OpConversionPattern<g::CrossReplicaSumOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::CrossReplicaSumOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<tessera::ipu::CrossReplicaSumOp>(op, op.getResultTypes(),
                                                                 a.getInputs());
    return success();
  }
};

/// f32 -> f16, unbiased: random bits below f16's last place added to the
/// f32 bits and the rest truncated (normal f16 range); for f16's subnormal
/// range, the same on the fixed-point grid of 2^-24 (floor plus a random
/// carry). Round to nearest for NaN and magnitudes beyond f16's largest.
struct StochasticRoundPattern : OpConversionPattern<g::StochasticRoundOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::StochasticRoundOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = op.getLoc();
    MLIRContext *ctx = getContext();
    auto type = cast<RankedTensorType>(op.getType());
    int64_t rank = type.getRank();
    Value init = tensor::EmptyOp::create(rewriter, l, type.getShape(), type.getElementType());
    AffineMap scalarMap = AffineMap::get(rank, 0, {}, ctx);
    AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
    SmallVector<IteratorType> iters(rank, IteratorType::parallel);
    int64_t stream = op.getStream();
    auto generic = linalg::GenericOp::create(
        rewriter, l, TypeRange{type}, ValueRange{a.getInput(), a.getSeed(), a.getCounter()},
        ValueRange{init}, {identity, scalarMap, scalarMap, identity}, iters,
        [&](OpBuilder &b, Location nl, ValueRange args) {
          Type i32 = b.getI32Type(), f32 = b.getF32Type(), f16 = b.getF16Type();
          auto ci = [&](int64_t v) {
            return arith::ConstantOp::create(b, nl, b.getI32IntegerAttr(v)).getResult();
          };
          auto cf = [&](double v) {
            return arith::ConstantOp::create(b, nl, b.getF32FloatAttr(v)).getResult();
          };
          Value x = args[0];
          Value r64 = counterBasedBits(b, nl, args[1], args[2], stream,
                                       rowMajorIndex(b, nl, type.getShape()));
          Value r = arith::TruncIOp::create(b, nl, i32, r64);
          // Normal range: 13 random bits under the f16 last place; a carry
          // out of them rounds up (into the exponent too, as it should).
          Value bits = arith::BitcastOp::create(b, nl, i32, x);
          Value added = arith::AddIOp::create(
              b, nl, bits, arith::AndIOp::create(b, nl, r, ci(0x1fff)));
          Value truncated = arith::AndIOp::create(b, nl, added, ci(~0x1fff));
          Value normal = arith::TruncFOp::create(
              b, nl, f16, arith::BitcastOp::create(b, nl, f32, truncated));
          // Subnormal range: |x| * 2^24 holds the f16 grid as integers.
          Value ax = math::AbsFOp::create(b, nl, x);
          Value scaled = arith::MulFOp::create(b, nl, ax, cf(16777216.0));
          Value whole = math::FloorOp::create(b, nl, scaled);
          Value fraction = arith::SubFOp::create(b, nl, scaled, whole);
          Value u = arith::MulFOp::create(
              b, nl,
              arith::UIToFPOp::create(
                  b, nl, f32, arith::ShRUIOp::create(b, nl, r, ci(8))),
              cf(std::ldexp(1.0, -24)));
          Value carry = arith::SelectOp::create(
              b, nl, arith::CmpFOp::create(b, nl, arith::CmpFPredicate::OLT, u, fraction),
              cf(1.0), cf(0.0));
          Value magnitude = arith::MulFOp::create(
              b, nl, arith::AddFOp::create(b, nl, whole, carry), cf(std::ldexp(1.0, -24)));
          Value subnormal = arith::TruncFOp::create(
              b, nl, f16, math::CopySignOp::create(b, nl, magnitude, x));
          Value isSubnormal = arith::CmpFOp::create(b, nl, arith::CmpFPredicate::OLT, ax,
                                                    cf(std::ldexp(1.0, -14)));
          // NaN (unordered) and beyond f16's largest finite: to nearest.
          Value inRange = arith::CmpFOp::create(b, nl, arith::CmpFPredicate::OLE, ax,
                                                cf(65504.0));
          Value nearest = arith::TruncFOp::create(b, nl, f16, x);
          Value rounded = arith::SelectOp::create(
              b, nl, inRange, arith::SelectOp::create(b, nl, isSubnormal, subnormal, normal),
              nearest);
          linalg::YieldOp::create(b, nl, rounded);
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct ResizePattern : OpConversionPattern<g::ResizeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(g::ResizeOp op, OpAdaptor a,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getMode() == g::ResizeMode::cubic)
      return rewriter.notifyMatchFailure(op, "cubic resize is not lowered yet");
    Location l = op.getLoc();
    auto type = op.getType();
    Type elem = type.getElementType();
    ArrayRef<int64_t> in = tensorType(a.getInput()).getShape();
    ArrayRef<int64_t> out = type.getShape();
    ArrayRef<double> scales = op.getScales();
    int64_t rank = type.getRank();
    Type f32 = rewriter.getF32Type();
    auto fconst = [&](OpBuilder &b, Location nl, double v) {
      return arith::ConstantOp::create(b, nl, b.getF32FloatAttr(v)).getResult();
    };
    // Input coordinate (float) of output index `o` along dim d.
    auto source = [&](OpBuilder &b, Location nl, Value o, int64_t d) -> Value {
      Value of = arith::UIToFPOp::create(
          b, nl, f32, arith::IndexCastOp::create(b, nl, b.getI64Type(), o));
      double s = scales[d];
      switch (op.getCoordinateTransform()) {
      case g::CoordinateTransform::asymmetric:
        return arith::DivFOp::create(b, nl, of, fconst(b, nl, s));
      case g::CoordinateTransform::align_corners: {
        // The resized length is input x scale, not rounded (ONNX's
        // reference): equal to the output size when sizes were given.
        double resized = double(in[d]) * s;
        if (resized <= 1)
          return fconst(b, nl, 0);
        return arith::MulFOp::create(b, nl, of,
                                     fconst(b, nl, double(in[d] - 1) / (resized - 1)));
      }
      case g::CoordinateTransform::pytorch_half_pixel:
        if (out[d] == 1)
          return fconst(b, nl, 0);
        [[fallthrough]];
      default: { // half_pixel
        Value c = arith::AddFOp::create(b, nl, of, fconst(b, nl, 0.5));
        return arith::SubFOp::create(
            b, nl, arith::DivFOp::create(b, nl, c, fconst(b, nl, s)), fconst(b, nl, 0.5));
      }
      }
    };
    auto toIndex = [&](OpBuilder &b, Location nl, Value f, int64_t d) {
      Value i = arith::FPToSIOp::create(b, nl, b.getI64Type(), f);
      i = arith::MaxSIOp::create(b, nl, i,
                                 arith::ConstantOp::create(b, nl, b.getI64IntegerAttr(0)));
      i = arith::MinSIOp::create(
          b, nl, i, arith::ConstantOp::create(b, nl, b.getI64IntegerAttr(in[d] - 1)));
      return arith::IndexCastOp::create(b, nl, b.getIndexType(), i).getResult();
    };
    Value x = a.getInput();
    Value r;
    if (op.getMode() == g::ResizeMode::nearest) {
      r = gatherGeneric(
          rewriter, l, type, {}, {}, x,
          [&](OpBuilder &b, Location nl, ValueRange o, ValueRange) {
            SmallVector<Value> src;
            for (int64_t d = 0; d < rank; ++d) {
              if (in[d] == out[d] && scales[d] == 1.0) {
                src.push_back(o[d]);
                continue;
              }
              Value f = source(b, nl, o[d], d);
              switch (op.getNearestMode()) {
              case g::NearestMode::floor:
                f = math::FloorOp::create(b, nl, f);
                break;
              case g::NearestMode::ceil:
                f = math::CeilOp::create(b, nl, f);
                break;
              case g::NearestMode::round_prefer_ceil:
                f = math::FloorOp::create(b, nl,
                                          arith::AddFOp::create(b, nl, f, fconst(b, nl, 0.5)));
                break;
              case g::NearestMode::round_prefer_floor:
                f = math::CeilOp::create(b, nl,
                                         arith::SubFOp::create(b, nl, f, fconst(b, nl, 0.5)));
                break;
              }
              src.push_back(toIndex(b, nl, f, d));
            }
            return src;
          });
    } else {
      // n-linear: blend the 2^k corners of the resized dims.
      SmallVector<int64_t> resized;
      for (int64_t d = 0; d < rank; ++d)
        if (!(in[d] == out[d] && scales[d] == 1.0))
          resized.push_back(d);
      MLIRContext *ctx = getContext();
      r = linalg::GenericOp::create(
              rewriter, l, TypeRange{type}, ValueRange{},
              ValueRange{empty(rewriter, l, type)},
              {AffineMap::getMultiDimIdentityMap(rank, ctx)},
              SmallVector<IteratorType>(rank, IteratorType::parallel),
              [&](OpBuilder &b, Location nl, ValueRange) {
                SmallVector<Value> o;
                for (int64_t d = 0; d < rank; ++d)
                  o.push_back(linalg::IndexOp::create(b, nl, d));
                SmallVector<Value> lo(o), hi(o), frac(rank);
                for (int64_t d : resized) {
                  Value f = source(b, nl, o[d], d);
                  f = arith::MaximumFOp::create(b, nl, f, fconst(b, nl, 0));
                  Value fl = math::FloorOp::create(b, nl, f);
                  frac[d] = arith::SubFOp::create(b, nl, f, fl);
                  lo[d] = toIndex(b, nl, fl, d);
                  hi[d] = toIndex(b, nl, arith::AddFOp::create(b, nl, fl, fconst(b, nl, 1)), d);
                }
                Value acc = fconst(b, nl, 0);
                for (unsigned corner = 0; corner < (1u << resized.size()); ++corner) {
                  SmallVector<Value> idx(o);
                  Value weight = fconst(b, nl, 1);
                  for (auto [bit, d] : llvm::enumerate(resized)) {
                    bool upper = corner & (1u << bit);
                    idx[d] = upper ? hi[d] : lo[d];
                    Value w = upper ? frac[d]
                                    : arith::SubFOp::create(b, nl, fconst(b, nl, 1), frac[d])
                                          .getResult();
                    weight = arith::MulFOp::create(b, nl, weight, w);
                  }
                  Value v = tensor::ExtractOp::create(b, nl, x, idx);
                  v = convertS(b, nl, v, elem, f32);
                  acc = arith::AddFOp::create(b, nl, acc,
                                              arith::MulFOp::create(b, nl, v, weight));
                }
                linalg::YieldOp::create(b, nl, convertS(b, nl, acc, f32, elem));
              })
              .getResult(0);
    }
    rewriter.replaceOp(op, r);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Signedness
//===----------------------------------------------------------------------===//

/// `t` with every unsigned integer (scalar or tensor element) made signless.
Type signless(Type t) {
  if (auto shaped = dyn_cast<RankedTensorType>(t))
    return shaped.clone(arithType(shaped.getElementType()));
  return arithType(t);
}

/// Arith and linalg bodies compute on signless integers, so the patterns
/// above read signedness from the graph ops' types (isUnsigned) while they
/// build, and the module is made signless once they are done: every value,
/// block argument, function type, global and constant. The interface keeps
/// its meaning: @main's unsigned arguments and results carry their graph
/// element type as `graph.element_type`, which the executable's signature
/// reads.
void eraseSignedness(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  auto retypeElements = [&](Attribute value) -> Attribute {
    if (auto dense = dyn_cast_if_present<DenseElementsAttr>(value)) {
      Type elem = dense.getElementType();
      return elem == arithType(elem) ? value : dense.bitcast(arithType(elem));
    }
    if (auto resource = dyn_cast_if_present<DenseResourceElementsAttr>(value)) {
      auto type = resource.getType();
      if (type.getElementType() == arithType(type.getElementType()))
        return value;
      return DenseResourceElementsAttr::get(cast<ShapedType>(signless(type)),
                                            resource.getRawHandle());
    }
    return value;
  };
  module.walk([&](Operation *op) {
    if (auto func = dyn_cast<func::FuncOp>(op)) {
      FunctionType type = func.getFunctionType();
      auto convert = [&](TypeRange types, bool results) {
        SmallVector<Type> out;
        for (auto [i, t] : llvm::enumerate(types)) {
          out.push_back(signless(t));
          if (out.back() == t || func.getName() != "main")
            continue;
          auto elem = TypeAttr::get(getElementTypeOrSelf(t));
          if (results)
            func.setResultAttr(i, "graph.element_type", elem);
          else
            func.setArgAttr(i, "graph.element_type", elem);
        }
        return out;
      };
      SmallVector<Type> inputs = convert(type.getInputs(), false);
      SmallVector<Type> results = convert(type.getResults(), true);
      func.setFunctionType(FunctionType::get(ctx, inputs, results));
    } else if (auto global = dyn_cast<ml_program::GlobalOp>(op)) {
      global.setType(signless(global.getType()));
      if (auto value = global.getValue())
        global.setValueAttr(retypeElements(*value));
    } else if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      Attribute value = retypeElements(constant.getValue());
      if (value != constant.getValue())
        constant.setValueAttr(cast<TypedAttr>(value));
    }
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          arg.setType(signless(arg.getType()));
    for (OpResult result : op->getResults())
      result.setType(signless(result.getType()));
  });
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct ConvertGraphToLinalg
    : tessera::impl::ConvertGraphToLinalgBase<ConvertGraphToLinalg> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<g::GraphDialect>();
    target.addLegalDialect<linalg::LinalgDialect, tensor::TensorDialect,
                           arith::ArithDialect, math::MathDialect,
                           ml_program::MLProgramDialect, func::FuncDialect,
                           tessera::ipu::IPUDialect>();
    RewritePatternSet patterns(ctx);
    tessera::populateGraphToLinalgPatterns(patterns);
    FrozenRewritePatternSet frozen(std::move(patterns));
    // Placed ops (graph-assign-stages) are converted one placement at a
    // time, and the ops each conversion adds take that placement: the tile
    // planner maps every op onto its IPU.
    // Recomputed ops (graph-recompute) and the backward pass likewise keep
    // their marks.
    struct Marks {
      int64_t stage = -1, ipu = -1;
      bool recomputed = false, backward = false;
      bool operator<(const Marks &o) const {
        return std::tie(stage, ipu, recomputed, backward) <
               std::tie(o.stage, o.ipu, o.recomputed, o.backward);
      }
    };
    std::map<Marks, SmallVector<Operation *>> byMarks;
    getOperation()->walk([&](Operation *op) {
      if (!isa<g::GraphDialect>(op->getDialect()))
        return;
      Marks m{g::placedStage(op).value_or(-1), g::placedIpu(op).value_or(-1),
              op->hasAttr(g::kRecomputedAttrName), op->hasAttr(g::kBackwardAttrName)};
      if (m.ipu >= 0 || m.recomputed || m.backward)
        byMarks[m].push_back(op);
    });
    for (auto &[marks, ops] : byMarks) {
      DenseSet<Operation *> before;
      getOperation()->walk([&](Operation *op) { before.insert(op); });
      if (failed(applyPartialConversion(ops, target, frozen)))
        return signalPassFailure();
      getOperation()->walk([&](Operation *op) {
        if (before.contains(op) || !isa_and_nonnull<func::FuncOp>(op->getParentOp()))
          return;
        if (marks.ipu >= 0 && !g::placedIpu(op))
          g::setPlacement(op, marks.stage, marks.ipu);
        if (marks.recomputed)
          op->setAttr(g::kRecomputedAttrName, UnitAttr::get(op->getContext()));
        if (marks.backward)
          op->setAttr(g::kBackwardAttrName, UnitAttr::get(op->getContext()));
      });
    }
    if (failed(applyPartialConversion(getOperation(), target, frozen)))
      return signalPassFailure();
    eraseSignedness(getOperation());
  }
};

} // namespace

void tessera::populateGraphToLinalgPatterns(RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  populateElementwise(patterns);
  patterns.add<MatmulPattern, ConvPattern, MaxPoolPattern, AvgPoolPattern,
               ReducePattern<g::ReduceSumOp>, ReducePattern<g::ReduceMeanOp>,
               ReducePattern<g::ReduceMaxOp>, ReducePattern<g::ReduceMinOp>,
               ReducePattern<g::ReduceProdOp>, ArgReducePattern<g::ArgMaxOp>,
               ArgReducePattern<g::ArgMinOp>, SoftmaxPattern<g::SoftmaxOp>,
               SoftmaxPattern<g::LogSoftmaxOp>, BatchNormPattern, LayerNormPattern,
               GroupNormPattern, ConstantPattern, ReshapePattern, TransposePattern,
               ExpandPattern, ConcatPattern, SlicePattern, GatherPattern,
               GatherElementsPattern, ScatterAddPattern, PadPattern, RandomUniformPattern,
               StochasticRoundPattern, ResizePattern, CrossReplicaSumPattern>(ctx);
}
