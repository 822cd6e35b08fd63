//===- OrderLoopsForVectors.cpp - vectorizable innermost loops ------------===//

#include "tessera/Codegen/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace tessera {
#define GEN_PASS_DEF_ORDERLOOPSFORVECTORS
#include "tessera/Codegen/Passes.h.inc"
} // namespace tessera

using namespace mlir;

namespace {

/// The new loop order of `op` (position i runs old loop perm[i]), or empty
/// when the op is best left as it is.
SmallVector<unsigned> vectorFriendlyOrder(linalg::GenericOp op) {
  if (op.getNumReductionLoops() == 0 || op.getNumDpsInits() == 0)
    return {};
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (out.getNumResults() == 0)
    return {};
  auto last = dyn_cast<AffineDimExpr>(out.getResults().back());
  if (!last)
    return {};
  unsigned inner = last.getPosition();
  auto iterators = op.getIteratorTypesArray();
  SmallVector<unsigned> perm;
  for (unsigned i = 0; i < iterators.size(); ++i)
    if (iterators[i] == utils::IteratorType::parallel && i != inner)
      perm.push_back(i);
  for (unsigned i = 0; i < iterators.size(); ++i)
    if (iterators[i] == utils::IteratorType::reduction)
      perm.push_back(i);
  perm.push_back(inner);
  bool identity = llvm::all_of(llvm::enumerate(perm),
                               [](auto p) { return p.index() == p.value(); });
  return identity ? SmallVector<unsigned>{} : perm;
}

struct OrderLoopsForVectors
    : tessera::impl::OrderLoopsForVectorsBase<OrderLoopsForVectors> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Named contractions (the host reference path keeps linalg.matmul,
    // convolutions, ...) are generalized first.
    SmallVector<linalg::LinalgOp> named;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (!isa<linalg::GenericOp>(op) && op.getNumReductionLoops() > 0)
        named.push_back(op);
    });
    for (linalg::LinalgOp op : named) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op))) {
        op.emitError("codegen: could not generalize this op (internal error)");
        return signalPassFailure();
      }
    }
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    for (linalg::GenericOp op : ops) {
      SmallVector<unsigned> perm = vectorFriendlyOrder(op);
      if (perm.empty())
        continue;
      rewriter.setInsertionPoint(op);
      if (failed(linalg::interchangeGenericOp(rewriter, op, perm))) {
        op.emitError("codegen: could not interchange this op's loops (internal error)");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
