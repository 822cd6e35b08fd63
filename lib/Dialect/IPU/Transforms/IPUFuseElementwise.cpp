//===- IPUFuseElementwise.cpp - one compute set per elementwise chain ----===//
//
// Each linalg.generic becomes a compute set: a step of its own, a sync, and a
// pass over its operands' and result's tile memory. A chain of elementwise
// ops (ResNet's residual Add and the Relu after it) is one op's worth of
// work per element, so it is fused into one generic first, with upstream
// linalg's elementwise fusion restricted to producers read once by a reader
// that reads each of their elements once: an all-parallel reader, or a
// reduction reading them through a permutation of all its loops (a batch
// norm's sum of squared deviations, a softmax's sum of exponentials), whose
// body then computes each element as it adds it in. A reader that reads
// an element many times (a matmul's or a convolution's operand) would
// compute it as many times, and stop being a contraction the code
// generator tiles for the multiply-accumulate rate.
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
    // Reductions the importers' lowering makes named (linalg.reduce) become
    // generics, which the fusion takes as readers (ipu-prepare-for-mapping
    // would make them generics next anyway).
    SmallVector<linalg::ReduceOp> reduces;
    getOperation()->walk([&](linalg::ReduceOp op) { reduces.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::ReduceOp op : reduces) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op)))
        return signalPassFailure();
    }
    linalg::ControlFusionFn control = [](OpOperand *operand) {
      auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
      auto consumer = dyn_cast<linalg::GenericOp>(operand->getOwner());
      // A fused op keeps no mark: a recomputed op (graph-recompute) fused
      // could be merged by CSE with the fusion of the ops it repeats.
      auto recomputed = [](Operation *op) {
        return op->hasAttr(tessera::graph::kRecomputedAttrName);
      };
      if (!producer || !consumer || !producer->hasOneUse() || !allParallel(producer) ||
          recomputed(producer) || recomputed(consumer))
        return false;
      // The reader reads each element once (see the top).
      return allParallel(consumer) || consumer.getMatchingIndexingMap(operand).isPermutation();
    };
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
