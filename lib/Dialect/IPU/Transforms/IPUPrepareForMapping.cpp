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

/// A strided extract_slice -> a unit-stride slice (a copy, see
/// ipu-map-tiles) of the dimensions that are only narrowed, then a copying
/// generic reading `offset + stride * i`, so each vertex reads just its
/// region. (A generic cannot narrow a dimension with offset 0 and stride 1:
/// linalg reads that as the loop's bound.)
struct StridedSliceToGeneric : OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExtractSliceOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getOffsets().empty() || !op.getSizes().empty() ||
        !op.getStrides().empty())
      return rewriter.notifyMatchFailure(op, "dynamic slice");
    if (llvm::all_of(op.getStaticStrides(), [](int64_t s) { return s == 1; }))
      return rewriter.notifyMatchFailure(op, "unit strides: a copy");
    Location loc = op.getLoc();
    RankedTensorType result = op.getType();
    RankedTensorType sourceType = op.getSourceType();
    int64_t srcRank = sourceType.getRank();
    llvm::SmallBitVector dropped = op.getDroppedDims();
    // Step 1: narrow unit-stride dimensions (keeping rank).
    SmallVector<int64_t> offsets(op.getStaticOffsets()), strides(op.getStaticStrides());
    SmallVector<int64_t> narrowOffsets(srcRank, 0), narrowSizes(sourceType.getShape());
    bool narrows = false;
    for (int64_t d = 0; d < srcRank; ++d) {
      int64_t size = op.getStaticSizes()[d];
      if (strides[d] == 1 && size != sourceType.getDimSize(d)) {
        narrowOffsets[d] = offsets[d];
        narrowSizes[d] = size;
        offsets[d] = 0;
        narrows = true;
      }
    }
    Value source = op.getSource();
    if (narrows) {
      SmallVector<int64_t> ones(srcRank, 1);
      source = tensor::ExtractSliceOp::create(
          rewriter, loc, RankedTensorType::get(narrowSizes, result.getElementType()),
          source, ValueRange{}, ValueRange{}, ValueRange{}, narrowOffsets,
          narrowSizes, ones);
    }
    // Step 2: the strided read as a generic.
    MLIRContext *ctx = getContext();
    SmallVector<AffineExpr> exprs;
    int64_t resultDim = 0;
    for (int64_t d = 0; d < srcRank; ++d) {
      if (dropped.test(d)) {
        exprs.push_back(getAffineConstantExpr(offsets[d], ctx));
        continue;
      }
      exprs.push_back(getAffineDimExpr(resultDim++, ctx) * strides[d] + offsets[d]);
    }
    int64_t rank = result.getRank();
    auto inMap = AffineMap::get(rank, 0, exprs, ctx);
    auto outMap = AffineMap::getMultiDimIdentityMap(rank, ctx);
    Value init = tensor::EmptyOp::create(rewriter, loc, result.getShape(),
                                         result.getElementType());
    SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{result}, ValueRange{source}, ValueRange{init},
        ArrayRef<AffineMap>{inMap, outMap}, iterators,
        [](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, args[0]);
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// An input read through a map that is not a box (a reversed dimension)
/// becomes a tensor.extract at the map's indices: the tile mapper then hands
/// each vertex the whole input rather than a region tiling cannot express.
struct NonBoxReadToExtract : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    OpOperand *bad = nullptr;
    for (OpOperand *in : op.getDpsInputOperands())
      if (isa<RankedTensorType>(in->get().getType()) &&
          !tessera::ipu::toBoxAccess(op.getMatchingIndexingMap(in))) {
        bad = in;
        break;
      }
    if (!bad)
      return failure();
    unsigned index = bad->getOperandNumber();
    AffineMap map = op.getMatchingIndexingMap(bad);
    Value source = bad->get();
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    for (OpOperand *in : op.getDpsInputOperands())
      if (in != bad) {
        inputs.push_back(in->get());
        maps.push_back(op.getMatchingIndexingMap(in));
      }
    for (OpOperand &init : op.getDpsInitsMutable())
      maps.push_back(op.getMatchingIndexingMap(&init));
    auto generic = linalg::GenericOp::create(
        rewriter, op.getLoc(), op->getResultTypes(), inputs, op.getOutputs(), maps,
        op.getIteratorTypesArray());
    Region &region = generic.getRegion();
    rewriter.inlineRegionBefore(op.getRegion(), region, region.end());
    Block &body = region.front();
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&body);
    SmallVector<Value> loops;
    for (unsigned d = 0; d < map.getNumDims(); ++d)
      loops.push_back(linalg::IndexOp::create(rewriter, op.getLoc(), d));
    SmallVector<Value> indices;
    for (AffineExpr e : map.getResults())
      indices.push_back(affine::AffineApplyOp::create(
          rewriter, op.getLoc(), AffineMap::get(map.getNumDims(), 0, e), loops));
    Value element = tensor::ExtractOp::create(rewriter, op.getLoc(), source, indices);
    rewriter.replaceAllUsesWith(body.getArgument(index), element);
    body.eraseArgument(index);
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// A contraction reading an input at a stride along a loop that indexes
/// nothing else in that dimension (a 1x1 convolution of stride 2 reads rows
/// `2 * oh`) -> the strided elements taken first (a strided slice, below a
/// copying generic), which the contraction then reads densely. The tile
/// mapper hands each vertex its operand's region as a box, and a box read
/// at stride s holds the skipped elements too: a stride-2 1x1
/// convolution's tiles would each receive 4x the input they use. The
/// slice's own step reads its elements where they lie (it follows its
/// input's mapping), and the contraction receives only what it uses -- the
/// input subsampling poplibs applies before a strided convolution.
/// Ops without a reduction are left alone: a strided read is what a
/// strided slice's copy is for.
struct SubsampleStridedReads : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!llvm::is_contained(op.getIteratorTypesArray(), utils::IteratorType::reduction))
      return rewriter.notifyMatchFailure(op, "not a reduction");
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (llvm::any_of(ranges, ShapedType::isDynamic))
      return rewriter.notifyMatchFailure(op, "dynamic loop ranges");
    MLIRContext *ctx = getContext();
    for (OpOperand *in : op.getDpsInputOperands()) {
      auto type = dyn_cast<RankedTensorType>(in->get().getType());
      if (!type || !type.hasStaticShape())
        continue;
      AffineMap map = op.getMatchingIndexingMap(in);
      std::optional<tessera::runtime::AccessMap> access = tessera::ipu::toBoxAccess(map);
      if (!access || access->full)
        continue;
      int64_t rank = type.getRank();
      SmallVector<int64_t> offsets(rank, 0), sizes(type.getShape()), strides(rank, 1);
      SmallVector<AffineExpr> exprs(map.getResults());
      bool subsamples = false;
      for (int64_t k = 0; k < rank; ++k) {
        // One loop at a stride s > 1; any other loop has one iteration.
        int64_t loop = -1;
        bool other = false;
        for (auto [l, c] : llvm::enumerate(access->coeffs[k])) {
          if (c == 0 || ranges[l] == 1)
            continue;
          if (c > 1 && loop < 0)
            loop = l;
          else
            other = true;
        }
        int64_t start = access->consts[k];
        if (loop < 0 || other || start < 0)
          continue;
        int64_t stride = access->coeffs[k][loop];
        if (start + stride * (ranges[loop] - 1) >= type.getDimSize(k))
          continue;
        offsets[k] = start;
        sizes[k] = ranges[loop];
        strides[k] = stride;
        AffineExpr e = getAffineDimExpr(loop, ctx);
        for (auto [l, c] : llvm::enumerate(access->coeffs[k]))
          if (c != 0 && static_cast<int64_t>(l) != loop)
            e = e + getAffineDimExpr(l, ctx) * c;
        exprs[k] = e;
        subsamples = true;
      }
      if (!subsamples)
        continue;
      auto sliceType = RankedTensorType::get(sizes, type.getElementType());
      Value slice = tensor::ExtractSliceOp::create(rewriter, op.getLoc(), sliceType,
                                                   in->get(), ValueRange{}, ValueRange{},
                                                   ValueRange{}, offsets, sizes, strides);
      SmallVector<AffineMap> maps = op.getIndexingMapsArray();
      maps[in->getOperandNumber()] = AffineMap::get(map.getNumDims(), 0, exprs, ctx);
      rewriter.modifyOpInPlace(op, [&] {
        in->set(slice);
        op.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
      });
      return success();
    }
    return rewriter.notifyMatchFailure(op, "no strided reads");
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
    patterns.add<StridedSliceToGeneric, SplatConstantToFill>(ctx);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    // Generalize last: the patterns above create fills.
    RewritePatternSet generalize(ctx);
    linalg::populateLinalgNamedOpsGeneralizationPatterns(generalize);
    if (failed(applyPatternsGreedily(module, std::move(generalize))))
      return signalPassFailure();
    // After generalization: convolutions are generics by now. The slices
    // subsampling creates become copying generics here too.
    RewritePatternSet reads(ctx);
    reads.add<NonBoxReadToExtract, SubsampleStridedReads, StridedSliceToGeneric>(ctx);
    if (failed(applyPatternsGreedily(module, std::move(reads))))
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
