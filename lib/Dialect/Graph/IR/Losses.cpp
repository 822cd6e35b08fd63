//===- Losses.cpp - PyTorch's losses as graph ops -------------------------===//

#include "tessera/Dialect/Graph/IR/Losses.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/Sequence.h"

using namespace mlir;

namespace tessera::graph {

Value buildClassLoss(GraphEmitter &e, Value scores, Value labels, bool fromLogits,
                     double labelSmoothing, int64_t ignoreIndex, LossReduction reduction) {
  OpBuilder &b = e.builder();
  ArrayRef<int64_t> shape = shapeOf(scores);
  int64_t n = shape[0], c = shape[1];
  Type f = cast<RankedTensorType>(scores.getType()).getElementType();
  Value logp = fromLogits ? e.logSoftmax(scores, 1) : scores;
  SmallVector<double> classIds(c);
  for (int64_t i = 0; i < c; ++i)
    classIds[i] = i;
  Value ids = e.constant(b.getI64Type(), {1, c}, classIds);
  Value onehot = e.cast(e.equal(e.reshape(labels, {n, 1}), ids), f);
  Value target = onehot;
  if (labelSmoothing > 0)
    target = e.addScalar(e.mulScalar(onehot, 1.0 - labelSmoothing), labelSmoothing / c);
  Value keep =
      e.cast(e.notEqual(labels, e.splat(b.getI64Type(), {}, double(ignoreIndex))), f);
  Value perSample = e.mul(e.neg(e.reduceSum(e.mul(target, logp), {1}, false)), keep);
  if (reduction == LossReduction::None)
    return perSample;
  Value total = e.reduceSum(perSample, {0}, false);
  return reduction == LossReduction::Mean ? e.div(total, e.reduceSum(keep, {0}, false))
                                          : total;
}

Value buildRegressionLoss(GraphEmitter &e, StringRef kind, Value pred, Value target,
                          LossReduction reduction, double parameter) {
  Value per;
  if (kind == "mse") {
    Value d = e.sub(pred, target);
    per = e.mul(d, d);
  } else if (kind == "l1") {
    per = e.abs(e.sub(pred, target));
  } else if (kind == "smooth-l1" || kind == "huber") {
    // |d| < p: 0.5 d^2 / p (smooth L1) or 0.5 d^2 (Huber); else |d| - 0.5 p
    // (smooth L1) or p (|d| - 0.5 p) (Huber). Smooth L1 with beta 0 is L1.
    Value d = e.abs(e.sub(pred, target));
    if (kind == "smooth-l1" && parameter == 0) {
      per = d;
    } else {
      Value quadratic = e.mulScalar(e.mul(d, d), kind == "huber" ? 0.5 : 0.5 / parameter);
      Value linear = e.addScalar(d, -0.5 * parameter);
      if (kind == "huber")
        linear = e.mulScalar(linear, parameter);
      per = e.select(e.less(d, e.scalar(d, parameter)), quadratic, linear);
    }
  } else if (kind == "soft-margin") {
    // log(1 + exp(-y x)), softplus for stability.
    per = e.softplus(e.neg(e.mul(target, pred)));
  } else if (kind == "kl-div" || kind == "kl-div-log-target") {
    // target (log target - pred), 0 where the target is 0 (xlogy); with a
    // log target: exp(target) (target - pred).
    if (kind == "kl-div-log-target") {
      per = e.mul(e.exp(target), e.sub(target, pred));
    } else {
      Value zero = e.scalar(target, 0.0);
      Value positive = e.greater(target, zero);
      Value safe = e.select(positive, target, e.scalar(target, 1.0));
      per = e.select(positive, e.mul(target, e.sub(e.log(safe), pred)), zero);
    }
  } else {
    // max(x, 0) - x * y + log(1 + exp(-|x|)), stable for any x.
    Value zero = e.scalar(pred, 0.0);
    per = e.add(e.sub(e.max(pred, zero), e.mul(pred, target)),
                e.log(e.addScalar(e.exp(e.neg(e.abs(pred))), 1.0)));
  }
  if (reduction == LossReduction::None)
    return per;
  ArrayRef<int64_t> shape = shapeOf(pred);
  SmallVector<int64_t> all =
      llvm::to_vector(llvm::seq<int64_t>(0, static_cast<int64_t>(shape.size())));
  Value total = e.reduceSum(per, all, false);
  if (reduction == LossReduction::Sum)
    return total;
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  Type f = cast<RankedTensorType>(pred.getType()).getElementType();
  return e.div(total, e.splat(f, {}, double(count)));
}

} // namespace tessera::graph
