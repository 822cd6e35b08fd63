//===- OpBuilding.cpp - importers' way of creating graph ops -------------===//

#include "tessera/Dialect/Graph/IR/OpBuilding.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
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
  // A shape whose element count passes any IPU system's (or overflows)
  // comes from a model's sizes, never from a real tensor: refused before
  // folds or later passes size anything by it.
  constexpr int64_t kMaxElements = int64_t(1) << 36;
  for (Type type : op->getResultTypes()) {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (!ranked || !ranked.hasStaticShape())
      continue;
    int64_t elements = 1;
    for (int64_t size : ranked.getShape()) {
      if (size > 0 && elements > kMaxElements / size) {
        op->emitError("result of shape ")
            << formatShape(ranked.getShape())
            << " has more elements than any IPU system holds (at most 2^36)";
        op->erase();
        return failure();
      }
      elements *= size;
    }
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

namespace {
/// Creates OpT with an inferred result type; see finishCreatedOp.
template <typename OpT, typename... Args>
FailureOr<Value> createInferred(OpBuilder &builder, Location loc,
                                Args &&...args) {
  return finishCreatedOp(
      builder, OpT::create(builder, loc, placeholderResultType(builder.getContext()),
                           std::forward<Args>(args)...));
}
} // namespace

FailureOr<TrainingBatchNorm>
createTrainingBatchNorm(OpBuilder &builder, Location loc, Value input,
                        Value scale, Value bias, Value runningMean,
                        Value runningVar, double momentum, double epsilon) {
  auto type = cast<RankedTensorType>(input.getType());
  int64_t rank = type.getRank();
  if (rank < 2) {
    emitError(loc) << "batch norm input must be N x C x ..., got "
                   << formatShape(type.getShape());
    return failure();
  }
  SmallVector<int64_t> axes{0}, keptShape(rank, 1);
  int64_t count = type.getDimSize(0);
  for (int64_t d = 2; d < rank; ++d) {
    axes.push_back(d);
    count *= type.getDimSize(d);
  }
  keptShape[1] = type.getDimSize(1);
  if (count <= 1) {
    emitError(loc) << "batch norm in training mode needs more than one value "
                      "per channel, got input "
                   << formatShape(type.getShape())
                   << " (use a micro-batch larger than 1)";
    return failure();
  }
  Type elem = type.getElementType();
  auto scalar = [&](double v) { return createSplatConstant(builder, loc, elem, {}, v); };
  auto mean = [&](Value v) {
    return createInferred<ReduceMeanOp>(builder, loc, v,
                                        builder.getDenseI64ArrayAttr(axes),
                                        builder.getBoolAttr(false));
  };
  TESSERA_ASSIGN_OR_FAIL(batchMean, mean(input));
  TESSERA_ASSIGN_OR_FAIL(meanKept, createReshape(builder, loc, batchMean, keptShape));
  TESSERA_ASSIGN_OR_FAIL(centered, createInferred<SubOp>(builder, loc, input, meanKept));
  TESSERA_ASSIGN_OR_FAIL(squared, createInferred<MulOp>(builder, loc, centered, centered));
  TESSERA_ASSIGN_OR_FAIL(batchVar, mean(squared));
  TESSERA_ASSIGN_OR_FAIL(
      output, createInferred<BatchNormOp>(builder, loc, input, scale, bias,
                                          batchMean, batchVar,
                                          builder.getF64FloatAttr(epsilon)));
  auto moveTowards = [&](Value old, Value batch) -> FailureOr<Value> {
    TESSERA_ASSIGN_OR_FAIL(kept, createInferred<MulOp>(builder, loc, old, scalar(1 - momentum)));
    TESSERA_ASSIGN_OR_FAIL(added, createInferred<MulOp>(builder, loc, batch, scalar(momentum)));
    return createInferred<AddOp>(builder, loc, kept, added);
  };
  TESSERA_ASSIGN_OR_FAIL(unbiasedVar,
                         createInferred<MulOp>(builder, loc, batchVar,
                                               scalar(double(count) / double(count - 1))));
  TESSERA_ASSIGN_OR_FAIL(newMean, moveTowards(runningMean, batchMean));
  TESSERA_ASSIGN_OR_FAIL(newVar, moveTowards(runningVar, unbiasedVar));
  return TrainingBatchNorm{output, batchMean, batchVar, newMean, newVar};
}

bool storeBackToGlobal(OpBuilder &builder, Location loc, Value loaded,
                       Value value,
                       function_ref<void(Value from, Value to)> replaced) {
  Operation *load = loaded.getDefiningOp();
  if (!load || !isa<ml_program::GlobalLoadConstOp, ml_program::GlobalLoadOp>(load))
    return false;
  auto symbol = isa<ml_program::GlobalLoadConstOp>(load)
                    ? cast<ml_program::GlobalLoadConstOp>(load).getGlobalAttr()
                    : cast<ml_program::GlobalLoadOp>(load).getGlobalAttr();
  auto global =
      SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(load, symbol);
  if (!global || global.getType() != value.getType())
    return false;
  if (!global.getIsMutable()) {
    global.setIsMutable(true);
    global->setAttr("graph.buffer", builder.getUnitAttr());
    // Constant loads of an immutable global become loads of the variable.
    Operation *scope = SymbolTable::getNearestSymbolTable(global);
    SmallVector<ml_program::GlobalLoadConstOp> constLoads;
    scope->walk([&](ml_program::GlobalLoadConstOp l) {
      if (l.getGlobalAttr().getLeafReference() == global.getSymNameAttr())
        constLoads.push_back(l);
    });
    for (auto l : constLoads) {
      OpBuilder b(l);
      auto replacement = ml_program::GlobalLoadOp::create(
          b, l.getLoc(), l.getType(), l.getGlobalAttr());
      l.getResult().replaceAllUsesWith(replacement.getResult());
      replaced(l.getResult(), replacement.getResult());
      l.erase();
    }
  }
  ml_program::GlobalStoreOp::create(builder, loc, symbol, value);
  return true;
}

FailureOr<Value> loadI64StateGlobal(OpBuilder &builder, func::FuncOp func, StringRef name,
                                   StringRef marker, bool increment, Location at,
                                   StringRef purpose) {
  ModuleOp module = func->getParentOfType<ModuleOp>();
  auto type = RankedTensorType::get({}, builder.getI64Type());
  Block &entry = func.getBody().front();
  for (Operation &op : entry)
    if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op);
        load && load.getGlobal().getLeafReference() == name)
      return load.getResult();
  if (module.lookupSymbol(name)) {
    emitError(at) << purpose << " needs the global '" << name
                  << "', which the model already uses for something else";
    return failure();
  }
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  b.setInsertionPoint(func);
  auto global = ml_program::GlobalOp::create(
      b, func.getLoc(), name, type, /*is_mutable=*/true,
      DenseElementsAttr::get(type, ArrayRef<Attribute>{b.getI64IntegerAttr(0)}),
      b.getStringAttr("private"));
  global->setAttr(marker, b.getUnitAttr());
  b.setInsertionPointToStart(&entry);
  Location loc = NameLoc::get(b.getStringAttr(name), func.getLoc());
  Value current = ml_program::GlobalLoadOp::create(
      b, loc, type, FlatSymbolRefAttr::get(global.getSymNameAttr()));
  if (increment) {
    // Stored right after its only load: every later reader uses `current`.
    Value one = createSplatConstant(b, loc, b.getI64Type(), {}, 1);
    Value next = AddOp::create(b, loc, type, current, one).getResult();
    ml_program::GlobalStoreOp::create(
        b, loc, FlatSymbolRefAttr::get(global.getSymNameAttr()), next);
  }
  return current;
}

namespace {
/// The program's random state (seed, counter) and a stream number no other
/// random op of the function has.
struct RandomKey {
  Value seed, counter;
  int64_t stream;
};
FailureOr<RandomKey> randomKey(OpBuilder &builder, Location loc) {
  Operation *parent = builder.getInsertionBlock()->getParentOp();
  auto func = dyn_cast<func::FuncOp>(parent);
  if (!func)
    func = parent->getParentOfType<func::FuncOp>();
  if (!func || func.getBody().empty()) {
    emitError(loc) << "random numbers need an enclosing function";
    return failure();
  }
  TESSERA_ASSIGN_OR_FAIL(seed, loadI64StateGlobal(builder, func, "rng.seed",
                                                  "graph.hyperparameter",
                                                  /*increment=*/false, loc,
                                                  "random numbers"));
  TESSERA_ASSIGN_OR_FAIL(counter, loadI64StateGlobal(builder, func, "rng.counter",
                                                     "graph.buffer",
                                                     /*increment=*/true, loc,
                                                     "random numbers"));
  int64_t stream = 0;
  func.walk([&](Operation *op) { stream += isa<RandomUniformOp, StochasticRoundOp>(op); });
  return RandomKey{seed, counter, stream};
}
} // namespace

FailureOr<Value> createStochasticRound(OpBuilder &builder, Location loc, Value input) {
  TESSERA_ASSIGN_OR_FAIL(key, randomKey(builder, loc));
  auto type = cast<RankedTensorType>(input.getType());
  auto op = StochasticRoundOp::create(builder, loc, type.clone(builder.getF16Type()), input,
                                      key.seed, key.counter,
                                      builder.getI64IntegerAttr(key.stream));
  return finishCreatedOp(builder, op);
}

FailureOr<Value> createRandomUniform(OpBuilder &builder, Location loc,
                                     Type elementType, ArrayRef<int64_t> shape,
                                     double low, double high) {
  TESSERA_ASSIGN_OR_FAIL(key, randomKey(builder, loc));
  Value seed = key.seed, counter = key.counter;
  int64_t stream = key.stream;
  auto op = RandomUniformOp::create(
      builder, loc, RankedTensorType::get(shape, elementType), seed, counter,
      builder.getI64IntegerAttr(stream), builder.getF64FloatAttr(low),
      builder.getF64FloatAttr(high));
  return finishCreatedOp(builder, op);
}

FailureOr<Dropout> createDropout(OpBuilder &builder, Location loc, Value input,
                                 double ratio) {
  auto type = cast<RankedTensorType>(input.getType());
  if (!(ratio >= 0 && ratio < 1)) {
    emitError(loc) << "dropout ratio must be in [0, 1), got " << ratio;
    return failure();
  }
  Type elem = type.getElementType();
  TESSERA_ASSIGN_OR_FAIL(u, createRandomUniform(builder, loc, elem, type.getShape(), 0, 1));
  TESSERA_ASSIGN_OR_FAIL(
      mask, createInferred<GreaterEqualOp>(builder, loc, u,
                                           createSplatConstant(builder, loc, elem, {}, ratio)));
  TESSERA_ASSIGN_OR_FAIL(
      scaled, createInferred<MulOp>(builder, loc, input,
                                    createSplatConstant(builder, loc, elem, {}, 1 / (1 - ratio))));
  TESSERA_ASSIGN_OR_FAIL(
      output, createInferred<SelectOp>(builder, loc, mask, scaled,
                                       createSplatConstant(builder, loc, elem, {}, 0)));
  return Dropout{output, mask};
}

} // namespace tessera::graph
