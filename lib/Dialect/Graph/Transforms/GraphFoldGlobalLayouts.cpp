//===- GraphFoldGlobalLayouts.cpp - move weights at compile time ---------===//

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"

#include <cstring>

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
      payload.getType().getElementTypeBitWidth() % 8 != 0)
    return {};
  return payload;
}

/// Bytes of `data` (shape `inShape`, elements of `elementSize` bytes) with
/// dimensions permuted by `perm`.
std::vector<char> transposeBytes(ArrayRef<char> data, ArrayRef<int64_t> inShape,
                                 ArrayRef<int64_t> perm, size_t elementSize) {
  size_t rank = inShape.size();
  SmallVector<int64_t> inStrides(rank, 1), outShape(rank), srcStride(rank);
  for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * inShape[d + 1];
  for (size_t d = 0; d < rank; ++d) {
    outShape[d] = inShape[perm[d]];
    srcStride[d] = inStrides[perm[d]];
  }
  std::vector<char> out(data.size());
  int64_t n = numElements(inShape);
  SmallVector<int64_t> idx(rank, 0);
  int64_t src = 0;
  for (int64_t lin = 0; lin < n; ++lin) {
    std::memcpy(out.data() + lin * elementSize, data.data() + src * elementSize,
                elementSize);
    // Advance the output index odometer, tracking the source offset.
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      src += srcStride[d];
      if (++idx[d] < outShape[d])
        break;
      src -= srcStride[d] * outShape[d];
      idx[d] = 0;
    }
  }
  return out;
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
        std::vector<char> bytes = transposeBytes(
            payload.getRawHandle().getBlob()->getData(),
            payload.getType().getShape(), transpose.getPerm(), elementSize);
        AsmResourceBlob blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
            bytes, elementSize, /*dataIsMutable=*/false);
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
