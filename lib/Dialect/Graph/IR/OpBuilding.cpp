//===- OpBuilding.cpp - importers' way of creating graph ops -------------===//

#include "tessera/Dialect/Graph/IR/OpBuilding.h"
#include "tessera/Dialect/Graph/IR/Graph.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

using namespace mlir;

namespace tessera::graph {

Type placeholderResultType(MLIRContext *context) {
  // Replaced by the inferred type before anyone sees it.
  return UnrankedTensorType::get(Float32Type::get(context));
}

FailureOr<Value> finishCreatedOp(OpBuilder &builder, Operation *op) {
  if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(
            op->getContext(), op->getLoc(), op->getOperands(),
            op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
            op->getRegions(), types))) {
      op->erase();
      return failure();
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
  }
  if (failed(verify(op, /*verifyRecursively=*/false))) {
    op->erase();
    return failure();
  }
  SmallVector<Value> folded;
  if (succeeded(builder.tryFold(op, folded)) && !folded.empty() &&
      folded.front() != op->getResult(0)) {
    op->erase();
    return folded.front();
  }
  return op->getResult(0);
}

Value createSplatConstant(OpBuilder &builder, Location loc, Type elementType,
                          ArrayRef<int64_t> shape, double v) {
  auto type = RankedTensorType::get(shape, elementType);
  Attribute element;
  if (auto ft = dyn_cast<FloatType>(elementType))
    element = FloatAttr::get(ft, v);
  else if (elementType.isInteger(1))
    element = builder.getBoolAttr(v != 0);
  else
    element = IntegerAttr::get(elementType, static_cast<int64_t>(v));
  return ConstantOp::create(builder, loc, DenseElementsAttr::get(type, element))
      .getResult();
}

FailureOr<Value> createReshape(OpBuilder &builder, Location loc, Value v,
                               ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return finishCreatedOp(
      builder, ReshapeOp::create(builder, loc, type.clone(shape), v));
}

FailureOr<Value> createTranspose(OpBuilder &builder, Location loc, Value v,
                                 ArrayRef<int64_t> perm) {
  return finishCreatedOp(
      builder, TransposeOp::create(builder, loc,
                                   placeholderResultType(builder.getContext()),
                                   v, builder.getDenseI64ArrayAttr(perm)));
}

FailureOr<Value> createCast(OpBuilder &builder, Location loc, Value v,
                            Type elementType) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getElementType() == elementType)
    return v;
  return finishCreatedOp(
      builder, CastOp::create(builder, loc, type.clone(elementType), v));
}

FailureOr<Value> createExpand(OpBuilder &builder, Location loc, Value v,
                              ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return finishCreatedOp(
      builder, ExpandOp::create(builder, loc, type.clone(shape), v));
}

} // namespace tessera::graph
