//===- GraphFoldGlobalLayouts.cpp - move weights at compile time ---------===//

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"

#include <algorithm>
#include <cstdint>

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHFOLDGLOBALLAYOUTS
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;

namespace tessera::graph {
namespace {

/// The payload of an immutable global with byte-sized elements, or null.
DenseResourceElementsAttr foldablePayload(ml_program::GlobalOp global) {
  if (!global || global.getIsMutable())
    return {};
  auto payload = dyn_cast_if_present<DenseResourceElementsAttr>(
      global.getValue().value_or(Attribute()));
  if (!payload || !payload.getRawHandle().getBlob() ||
      !llvm::is_contained({8u, 16u, 32u, 64u},
                          payload.getType().getElementTypeBitWidth()))
    return {};
  return payload;
}

/// Transposes elements of type T. A 2-D transpose (the Gemm/Linear case,
/// hundreds of MB for VGG) goes through cache-sized tiles; other
/// permutations walk the output with an odometer over source strides.
template <typename T>
void transposeTyped(MLIRContext *ctx, const T *in, T *out,
                    ArrayRef<int64_t> inShape, ArrayRef<int64_t> perm) {
  size_t rank = inShape.size();
  if (rank == 2 && perm[0] == 1) {
    int64_t rows = inShape[0], cols = inShape[1];
    constexpr int64_t kTile = 64;
    // Row bands are independent: spread them over the context's threads.
    parallelFor(ctx, 0, (rows + kTile - 1) / kTile, [&](size_t band) {
      int64_t r0 = band * kTile;
      for (int64_t c0 = 0; c0 < cols; c0 += kTile)
        for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
          for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
            out[c * rows + r] = in[r * cols + c];
    });
    return;
  }
  SmallVector<int64_t> inStrides(rank, 1), outShape(rank), srcStride(rank);
  for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * inShape[d + 1];
  for (size_t d = 0; d < rank; ++d) {
    outShape[d] = inShape[perm[d]];
    srcStride[d] = inStrides[perm[d]];
  }
  int64_t n = numElements(inShape);
  SmallVector<int64_t> idx(rank, 0);
  int64_t src = 0;
  for (int64_t lin = 0; lin < n; ++lin) {
    out[lin] = in[src];
    // Advance the output index odometer, tracking the source offset.
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      src += srcStride[d];
      if (++idx[d] < outShape[d])
        break;
      src -= srcStride[d] * outShape[d];
      idx[d] = 0;
    }
  }
}

/// `data` (shape `inShape`, elements of `elementSize` bytes) with dimensions
/// permuted by `perm`, written straight into a new blob.
AsmResourceBlob transposeBlob(MLIRContext *ctx, ArrayRef<char> data,
                              ArrayRef<int64_t> inShape, ArrayRef<int64_t> perm,
                              size_t elementSize) {
  AsmResourceBlob blob =
      HeapAsmResourceBlob::allocate(data.size(), elementSize, /*dataIsMutable=*/true);
  MutableArrayRef<char> out = blob.getMutableData();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    transposeTyped(ctx, reinterpret_cast<const T *>(data.data()),
                   reinterpret_cast<T *>(out.data()), inShape, perm);
  };
  switch (elementSize) {
  case 1:
    run(uint8_t());
    break;
  case 2:
    run(uint16_t());
    break;
  case 4:
    run(uint32_t());
    break;
  default:
    run(uint64_t());
    break;
  }
  return blob;
}

struct GraphFoldGlobalLayouts
    : impl::GraphFoldGlobalLayoutsBase<GraphFoldGlobalLayouts> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    // Program order: a reshape folded first exposes the transpose after it.
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<TransposeOp, ReshapeOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      auto load =
          op->getOperand(0).getDefiningOp<ml_program::GlobalLoadConstOp>();
      if (!load)
        continue;
      auto global = symbols.lookup<ml_program::GlobalOp>(
          load.getGlobal().getLeafReference());
      DenseResourceElementsAttr payload = foldablePayload(global);
      if (!payload)
        continue;
      auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
      if (!resultType.hasStaticShape())
        continue;

      DenseResourceElementsAttr moved;
      std::string suffix;
      if (isa<ReshapeOp>(op)) {
        // Same bytes, new shape: share the blob.
        moved = DenseResourceElementsAttr::get(resultType,
                                               payload.getRawHandle());
        suffix = ".reshaped";
      } else {
        auto transpose = cast<TransposeOp>(op);
        size_t elementSize = payload.getType().getElementTypeBitWidth() / 8;
        AsmResourceBlob blob = transposeBlob(
            &getContext(), payload.getRawHandle().getBlob()->getData(),
            payload.getType().getShape(), transpose.getPerm(), elementSize);
        moved = DenseResourceElementsAttr::get(
            resultType, (global.getSymName() + ".T").str(), std::move(blob));
        suffix = ".T";
      }

      OpBuilder builder(global);
      builder.setInsertionPointAfter(global);
      auto newGlobal = ml_program::GlobalOp::create(
          builder, global.getLoc(), (global.getSymName() + suffix).str(),
          resultType, /*is_mutable=*/false, moved,
          builder.getStringAttr("private"));
      symbols.insert(newGlobal); // renames on a clash
      builder.setInsertionPoint(op);
      Value replacement = ml_program::GlobalLoadConstOp::create(
          builder, op->getLoc(), resultType,
          FlatSymbolRefAttr::get(newGlobal.getSymNameAttr()));
      op->getResult(0).replaceAllUsesWith(replacement);
      op->erase();
      if (load->use_empty())
        load->erase();
    }
  }
};

} // namespace
} // namespace tessera::graph
