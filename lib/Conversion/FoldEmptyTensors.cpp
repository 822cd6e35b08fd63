//===- FoldEmptyTensors.cpp - ops over zero-size tensors ------------------===//
//
// An op over a zero-size tensor computes nothing: a structured op with an
// empty loop runs its body zero times, so its results are its inits; any
// other pure op whose results are empty yields `tensor.empty`. Done once,
// here, so that the planner, the tile mapper and codegen never see a loop
// of size 0 (which has no tiling) and need no case of their own for it.
//
//===----------------------------------------------------------------------===//

#include "tessera/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessera {
#define GEN_PASS_DEF_FOLDEMPTYTENSORS
#include "tessera/Conversion/Passes.h.inc"
} // namespace tessera

using namespace mlir;

namespace {

bool isEmptyTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() && tensor.getNumElements() == 0;
}

/// A structured op with a loop of size 0: its results are its inits.
struct ZeroTripStructuredOp : OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;
  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "not on tensors");
    if (!llvm::is_contained(op.getStaticLoopRanges(), 0))
      return rewriter.notifyMatchFailure(op, "no empty loop");
    SmallVector<Value> inits;
    for (OpOperand &init : op.getDpsInitsMutable())
      inits.push_back(init.get());
    rewriter.replaceOp(op, inits);
    return success();
  }
};

/// A pure op whose results are all empty tensors: `tensor.empty`s.
struct EmptyResults : RewritePattern {
  EmptyResults(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (isa<tensor::EmptyOp>(op) || op->getNumResults() == 0 ||
        !llvm::all_of(op->getResultTypes(), isEmptyTensor) || !isPure(op))
      return rewriter.notifyMatchFailure(op, "not a pure op with only empty results");
    SmallVector<Value> empties;
    for (Type type : op->getResultTypes()) {
      auto tensor = cast<RankedTensorType>(type);
      empties.push_back(tensor::EmptyOp::create(rewriter, op->getLoc(), tensor.getShape(),
                                                tensor.getElementType(),
                                                tensor.getEncoding()));
    }
    rewriter.replaceOp(op, empties);
    return success();
  }
};

/// Padding an empty tensor: every element is the pad value.
struct PadOfNothing : OpRewritePattern<tensor::PadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::PadOp pad, PatternRewriter &rewriter) const override {
    if (!isEmptyTensor(pad.getSourceType()) || isEmptyTensor(pad.getResultType()))
      return rewriter.notifyMatchFailure(pad, "not an empty source into a non-empty result");
    Value value = pad.getConstantPaddingValue();
    if (!value)
      return rewriter.notifyMatchFailure(pad, "the pad value depends on the position");
    RankedTensorType type = pad.getResultType();
    if (!type.hasStaticShape())
      return rewriter.notifyMatchFailure(pad, "dynamic result");
    Value empty = tensor::EmptyOp::create(rewriter, pad.getLoc(), type.getShape(),
                                          type.getElementType(), type.getEncoding());
    rewriter.replaceOpWithNewOp<linalg::FillOp>(pad, value, empty);
    return success();
  }
};

/// Inserting nothing leaves the destination as it is.
struct InsertNothing : OpRewritePattern<tensor::InsertSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::InsertSliceOp insert,
                                PatternRewriter &rewriter) const override {
    if (!isEmptyTensor(insert.getSourceType()))
      return rewriter.notifyMatchFailure(insert, "inserts something");
    rewriter.replaceOp(insert, insert.getDest());
    return success();
  }
};

/// A concatenation's empty operands add nothing to it.
struct ConcatOfNothing : OpRewritePattern<tensor::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ConcatOp concat,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> kept;
    for (Value input : concat.getInputs())
      if (!isEmptyTensor(input.getType()))
        kept.push_back(input);
    if (kept.size() == concat.getInputs().size() || kept.empty())
      return rewriter.notifyMatchFailure(concat, "no empty operand, or only empty ones");
    if (kept.size() == 1 && kept.front().getType() == concat.getType()) {
      rewriter.replaceOp(concat, kept.front());
      return success();
    }
    rewriter.replaceOpWithNewOp<tensor::ConcatOp>(concat, concat.getType(), concat.getDim(),
                                                  kept);
    return success();
  }
};

struct FoldEmptyTensors : tessera::impl::FoldEmptyTensorsBase<FoldEmptyTensors> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ZeroTripStructuredOp, EmptyResults, PadOfNothing, InsertNothing,
                 ConcatOfNothing>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
