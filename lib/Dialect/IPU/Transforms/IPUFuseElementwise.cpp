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
// generator tiles for the multiply-accumulate rate. A chain that starts
// from a contraction's result stays that contraction's epilogue (the tile
// mapper runs it in the contraction's vertices, where the result is).
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/IPU/Transforms/Passes.h"

#include "tessera/Dialect/Graph/IR/Placement.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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

/// Whether `op` reads the result of a reduction (a convolution, a matmul)
/// that nothing else reads, directly, through a reshape or through a chain
/// of elementwise ops read once (which fusion makes one with it): the tile
/// mapper runs it as that reduction's epilogue, in the reduction's own
/// vertices, on the tiles that hold the result already.
bool isEpilogueOfReduction(linalg::GenericOp op) {
  for (Value in : op.getDpsInputs()) {
    Value result = in;
    while (result.hasOneUse() &&
           isa_and_present<tensor::ReshapeOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
               result.getDefiningOp()))
      result = result.getDefiningOp()->getOperand(0);
    if (!result.hasOneUse())
      continue;
    if (auto producer = result.getDefiningOp<linalg::LinalgOp>();
        producer && producer.getNumReductionLoops() > 0)
      return true;
    if (auto producer = result.getDefiningOp<linalg::GenericOp>();
        producer && allParallel(producer) && isEpilogueOfReduction(producer))
      return true;
  }
  return false;
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
    // Elementwise chains first, then what of them only a reduction reads:
    // a chain is judged whole (isEpilogueOfReduction), with the ops fused
    // into it gone.
    for (bool intoReductions : {false, true}) {
      linalg::ControlFusionFn control = [intoReductions](OpOperand *operand) {
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
        if (allParallel(consumer))
          return true;
        // A reduction that reads each element once (see the top), unless
        // the producer is a reduction's epilogue: computed where that
        // result is, it moves no more data than the reduction reading it.
        return intoReductions && consumer.getMatchingIndexingMap(operand).isPermutation() &&
               !isEpilogueOfReduction(producer);
      };
      RewritePatternSet patterns(&getContext());
      linalg::populateElementwiseOpsFusionPatterns(patterns, control);
      if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
        return signalPassFailure();
    }
  }
};

} // namespace
