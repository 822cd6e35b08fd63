//===- IPUPrepareForMapping.cpp - forms the tile mapper plans ------------===//
//
// The tile mapper plans linalg.generic ops and moves data with copies and
// views. This pass rewrites everything else linalg-on-tensors may hold into
// those forms, so ipu-map-tiles has few cases and each is tested here.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/IPU/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessera::ipu {
#define GEN_PASS_DEF_IPUPREPAREFORMAPPING
#include "tessera/Dialect/IPU/Transforms/Passes.h.inc"
} // namespace tessera::ipu

using namespace mlir;

namespace {

/// extract_slice (any static offsets and strides) -> a copying generic that
/// reads `offset + stride * i`: a vertex per output piece reads just its
/// region, and strided slices need no special exchange.
struct ExtractSliceToGeneric : OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExtractSliceOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getOffsets().empty() || !op.getSizes().empty() ||
        !op.getStrides().empty())
      return rewriter.notifyMatchFailure(op, "dynamic slice");
    RankedTensorType result = op.getType();
    int64_t srcRank = op.getSourceType().getRank();
    llvm::SmallBitVector dropped = op.getDroppedDims();
    MLIRContext *ctx = getContext();
    SmallVector<AffineExpr> exprs;
    int64_t resultDim = 0;
    for (int64_t d = 0; d < srcRank; ++d) {
      int64_t offset = op.getStaticOffsets()[d], stride = op.getStaticStrides()[d];
      if (dropped.test(d)) {
        exprs.push_back(getAffineConstantExpr(offset, ctx));
        continue;
      }
      exprs.push_back(getAffineDimExpr(resultDim++, ctx) * stride + offset);
    }
    int64_t rank = result.getRank();
    auto inMap = AffineMap::get(rank, 0, exprs, ctx);
    auto outMap = AffineMap::getMultiDimIdentityMap(rank, ctx);
    Value init = tensor::EmptyOp::create(rewriter, op.getLoc(), result.getShape(),
                                         result.getElementType());
    SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        rewriter, op.getLoc(), TypeRange{result}, ValueRange{op.getSource()},
        ValueRange{init}, ArrayRef<AffineMap>{inMap, outMap}, iterators,
        [](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, args[0]);
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// A splat tensor constant -> a fill, computed on the tiles that use it.
struct SplatConstantToFill : OpRewritePattern<arith::ConstantOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ConstantOp op,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(op.getType());
    auto splat = dyn_cast<SplatElementsAttr>(op.getValue());
    if (!type || !splat)
      return failure();
    // Shapes for tensor.reshape stay constants: they are not data.
    if (type.getElementType().isIndex())
      return failure();
    Value scalar = arith::ConstantOp::create(rewriter, op.getLoc(),
                                             splat.getSplatValue<TypedAttr>());
    Value empty = tensor::EmptyOp::create(rewriter, op.getLoc(), type.getShape(),
                                          type.getElementType());
    rewriter.replaceOpWithNewOp<linalg::FillOp>(op, scalar, empty);
    return success();
  }
};

struct IPUPrepareForMapping
    : tessera::ipu::impl::IPUPrepareForMappingBase<IPUPrepareForMapping> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    // Non-splat tensor constants become globals, placed like weights.
    SymbolTable symbols(module);
    int counter = 0;
    SmallVector<arith::ConstantOp> constants;
    module.walk([&](arith::ConstantOp c) {
      auto type = dyn_cast<RankedTensorType>(c.getType());
      if (type && !type.getElementType().isIndex() &&
          !isa<SplatElementsAttr>(c.getValue()) &&
          !c->getParentOfType<linalg::LinalgOp>())
        constants.push_back(c);
    });
    for (arith::ConstantOp c : constants) {
      OpBuilder b(module.getBodyRegion());
      b.setInsertionPointToStart(module.getBody());
      std::string name = "__constant_" + std::to_string(counter++);
      while (symbols.lookup(name))
        name = "__constant_" + std::to_string(counter++);
      auto global = ml_program::GlobalOp::create(
          b, c.getLoc(), name, c.getType(), /*isMutable=*/false,
          cast<ElementsAttr>(c.getValue()), b.getStringAttr("private"));
      symbols.insert(global);
      b.setInsertionPoint(c);
      Value load = ml_program::GlobalLoadConstOp::create(
          b, c.getLoc(), c.getType(), FlatSymbolRefAttr::get(global.getSymNameAttr()));
      c.replaceAllUsesWith(load);
      c.erase();
    }

    RewritePatternSet patterns(ctx);
    linalg::populateDecomposePadPatterns(patterns);
    tensor::populateDecomposeTensorConcatPatterns(patterns);
    patterns.add<ExtractSliceToGeneric, SplatConstantToFill>(ctx);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    // Generalize last: the patterns above create fills.
    RewritePatternSet generalize(ctx);
    linalg::populateLinalgNamedOpsGeneralizationPatterns(generalize);
    if (failed(applyPatternsGreedily(module, std::move(generalize))))
      return signalPassFailure();

    module.walk([&](tensor::InsertSliceOp insert) {
      if (!insert.getOffsets().empty() || !insert.getSizes().empty() ||
          !llvm::all_of(insert.getStaticStrides(), [](int64_t s) { return s == 1; })) {
        insert.emitError("ipu-prepare-for-mapping: inserts need static offsets, "
                         "sizes and unit strides");
        signalPassFailure();
      }
    });
  }
};

} // namespace
