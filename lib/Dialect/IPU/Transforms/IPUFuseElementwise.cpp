//===- IPUFuseElementwise.cpp - one compute set per elementwise chain ----===//
//
// Each linalg.generic becomes a compute set: a step of its own, a sync, and a
// pass over its operands' and result's tile memory. A chain of elementwise
// ops (ResNet's residual Add and the Relu after it) is one op's worth of
// work per element, so it is fused into one generic first, with upstream
// linalg's elementwise fusion restricted to producers read once by an
// all-parallel reader.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/IPU/Transforms/Passes.h"

#include "tessera/Dialect/Graph/IR/Placement.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessera::ipu {
#define GEN_PASS_DEF_IPUFUSEELEMENTWISE
#include "tessera/Dialect/IPU/Transforms/Passes.h.inc"
} // namespace tessera::ipu

using namespace mlir;

namespace {

bool allParallel(linalg::GenericOp op) {
  return op.getNumLoops() == op.getNumParallelLoops();
}

struct IPUFuseElementwise
    : tessera::ipu::impl::IPUFuseElementwiseBase<IPUFuseElementwise> {
  void runOnOperation() override {
    linalg::ControlFusionFn control = [](OpOperand *operand) {
      auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
      auto consumer = dyn_cast<linalg::GenericOp>(operand->getOwner());
      // A fused op keeps no mark: a recomputed op (graph-recompute) fused
      // could be merged by CSE with the fusion of the ops it repeats.
      auto recomputed = [](Operation *op) {
        return op->hasAttr(tessera::graph::kRecomputedAttrName);
      };
      return producer && consumer && producer->hasOneUse() && allParallel(producer) &&
             allParallel(consumer) && !recomputed(producer) && !recomputed(consumer);
    };
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
