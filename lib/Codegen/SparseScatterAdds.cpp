//===- SparseScatterAdds.cpp - multiUpdateAdd for scatter-add generics ----===//

#include "tessera/Codegen/Passes.h"
#include "tessera/Codegen/ScatterAdd.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

namespace tessera {
#define GEN_PASS_DEF_SPARSESCATTERADDS
#include "tessera/Codegen/Passes.h.inc"
} // namespace tessera

using namespace mlir;

namespace tessera::codegen {

namespace {

/// Whether `v`, in `op`'s body, is computed from the block argument `from`,
/// constants and values defined outside `op` only; the ops that compute it
/// are appended to `slice` in order.
bool computedFrom(Value v, BlockArgument from, linalg::GenericOp op,
                  SmallVectorImpl<Operation *> &slice) {
  if (v == from)
    return true;
  if (isa<BlockArgument>(v))
    return !op->isAncestor(cast<BlockArgument>(v).getOwner()->getParentOp());
  Operation *def = v.getDefiningOp();
  if (!op->isProperAncestor(def))
    return true;
  if (def->getNumRegions() != 0 || !isPure(def) || isa<linalg::IndexOp>(def))
    return false;
  for (Value operand : def->getOperands())
    if (!computedFrom(operand, from, op, slice))
      return false;
  if (!llvm::is_contained(slice, def))
    slice.push_back(def);
  return true;
}

/// linalg.index(axis), or an affine.apply adding values defined outside
/// `op` to it (tiling's offset of a piece).
bool isPosition(Value v, unsigned &axis, linalg::GenericOp op) {
  if (auto index = v.getDefiningOp<linalg::IndexOp>()) {
    axis = index.getDim();
    return true;
  }
  auto apply = v.getDefiningOp<affine::AffineApplyOp>();
  if (!apply || apply.getAffineMap().getNumResults() != 1)
    return false;
  int found = 0;
  for (Value operand : apply.getMapOperands()) {
    if (auto index = operand.getDefiningOp<linalg::IndexOp>()) {
      axis = index.getDim();
      ++found;
    } else if (op->isAncestor(operand.getParentRegion()->getParentOp())) {
      return false;
    }
  }
  // A sum: every operand with coefficient one.
  AffineExpr e = apply.getAffineMap().getResult(0);
  std::function<bool(AffineExpr)> isSum = [&](AffineExpr x) {
    if (auto bin = dyn_cast<AffineBinaryOpExpr>(x))
      return bin.getKind() == AffineExprKind::Add && isSum(bin.getLHS()) && isSum(bin.getRHS());
    return isa<AffineDimExpr, AffineSymbolExpr>(x);
  };
  return found == 1 && isSum(e);
}

bool isPureDims(AffineMap map) {
  return llvm::all_of(map.getResults(), [](AffineExpr e) { return isa<AffineDimExpr>(e); });
}

} // namespace

std::optional<ScatterAddForm> matchScatterAdd(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 || op->getNumResults() > 1 ||
      !op.hasIndexSemantics())
    return std::nullopt;
  auto iterators = op.getIteratorTypesArray();
  unsigned n = iterators.size(), rank = 0;
  while (rank < n && iterators[rank] == utils::IteratorType::parallel)
    ++rank;
  if (rank == 0 || rank == n ||
      llvm::any_of(ArrayRef(iterators).drop_front(rank),
                   [](utils::IteratorType t) { return t != utils::IteratorType::reduction; }))
    return std::nullopt;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineMap idxMap = maps[0], updMap = maps[1], outMap = maps[2];
  if (!isPureDims(idxMap) || !isPureDims(updMap) || !isPureDims(outMap) ||
      outMap.getNumResults() != rank)
    return std::nullopt;
  for (unsigned d = 0; d < rank; ++d)
    if (outMap.getDimPosition(d) != d)
      return std::nullopt;
  for (AffineExpr e : idxMap.getResults())
    if (cast<AffineDimExpr>(e).getPosition() < rank)
      return std::nullopt;

  Block &body = op.getRegion().front();
  BlockArgument idx = body.getArgument(0), upd = body.getArgument(1), out = body.getArgument(2);
  Operation *add = body.getTerminator()->getOperand(0).getDefiningOp();
  if (!add || !isa<arith::AddFOp, arith::AddIOp>(add))
    return std::nullopt;
  Value term = add->getOperand(0) == out ? add->getOperand(1)
               : add->getOperand(1) == out ? add->getOperand(0)
                                           : Value();
  auto select = term ? term.getDefiningOp<arith::SelectOp>() : nullptr;
  if (!select || select.getTrueValue() != upd ||
      !(matchPattern(select.getFalseValue(), m_AnyZeroFloat()) ||
        matchPattern(select.getFalseValue(), m_Zero())))
    return std::nullopt;
  auto cmp = select.getCondition().getDefiningOp<arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
    return std::nullopt;
  for (auto [rowValue, positionValue] :
       {std::pair(cmp.getLhs(), cmp.getRhs()), std::pair(cmp.getRhs(), cmp.getLhs())}) {
    unsigned axis = 0;
    SmallVector<Operation *> slice;
    if (!isPosition(positionValue, axis, op) || axis >= rank ||
        !computedFrom(rowValue, idx, op, slice))
      continue;
    // The updates do not depend on the row they go to.
    if (llvm::any_of(updMap.getResults(),
                     [&](AffineExpr e) { return cast<AffineDimExpr>(e).getPosition() == axis; }))
      return std::nullopt;
    ScatterAddForm form;
    form.axis = axis;
    form.resultRank = rank;
    form.row = rowValue;
    form.position = positionValue;
    form.add = add;
    return form;
  }
  return std::nullopt;
}

namespace {

/// The generic on buffers as a loop over the index positions: each index
/// read once, its row's updates added when the row is in the buffer.
LogicalResult rewriteSparse(linalg::GenericOp op, const ScatterAddForm &form) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic) || !op.hasPureBufferSemantics())
    return failure();
  Location loc = op.getLoc();
  OpBuilder b(op);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Value idxBuf = op.getDpsInputs()[0], updBuf = op.getDpsInputs()[1],
        outBuf = op.getDpsInits()[0];
  Block &body = op.getRegion().front();
  unsigned n = ranges.size();

  // The piece's first row: the compared position at linalg.index(axis) = 0.
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value first = zero;
  if (auto apply = form.position.getDefiningOp<affine::AffineApplyOp>()) {
    SmallVector<Value> operands;
    for (Value v : apply.getMapOperands())
      operands.push_back(v.getDefiningOp<linalg::IndexOp>() ? zero : v);
    first = affine::AffineApplyOp::create(b, loc, apply.getAffineMap(), operands);
  }
  Value rows = arith::ConstantIndexOp::create(b, loc, ranges[form.axis]);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);

  SmallVector<Value> ivs(n);
  // for iv in [0, range): body(builder inside the loop, iv).
  auto loop = [&](OpBuilder &ob, int64_t range,
                  llvm::function_ref<void(OpBuilder &, Value)> body) {
    auto forOp = scf::ForOp::create(ob, loc, zero, arith::ConstantIndexOp::create(ob, loc, range),
                                    one);
    OpBuilder inner = OpBuilder::atBlockBegin(forOp.getBody());
    body(inner, forOp.getInductionVar());
  };
  auto loadAt = [&](OpBuilder &nb, Value buffer, AffineMap map) {
    SmallVector<Value> indices;
    for (AffineExpr e : map.getResults())
      indices.push_back(ivs[cast<AffineDimExpr>(e).getPosition()]);
    return memref::LoadOp::create(nb, loc, buffer, indices).getResult();
  };
  // Loops over the index positions, in the dense form's order.
  std::function<void(OpBuilder &, unsigned)> overIndices = [&](OpBuilder &nb, unsigned d) {
    if (d < n)
      return loop(nb, ranges[d], [&](OpBuilder &inner, Value iv) {
        ivs[d] = iv;
        overIndices(inner, d + 1);
      });
    // The row this index names, computed as the body computes it.
    IRMapping mapping;
    mapping.map(body.getArgument(0), loadAt(nb, idxBuf, maps[0]));
    SmallVector<Operation *> slice;
    computedFrom(form.row, body.getArgument(0), op, slice);
    for (Operation *o : slice)
      nb.clone(*o, mapping);
    Value local = arith::SubIOp::create(nb, loc, mapping.lookupOrDefault(form.row), first);
    Value inPiece = arith::AndIOp::create(
        nb, loc, arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::sge, local, zero),
        arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::slt, local, rows));
    auto ifOp = scf::IfOp::create(nb, loc, inPiece, /*withElseRegion=*/false);
    OpBuilder then = ifOp.getThenBodyBuilder();
    ivs[form.axis] = local;
    // Its updates, over the result's other dimensions.
    std::function<void(OpBuilder &, unsigned)> overRow = [&](OpBuilder &rb, unsigned r) {
      if (r == form.axis)
        return overRow(rb, r + 1);
      if (r < form.resultRank)
        return loop(rb, ranges[r], [&](OpBuilder &inner, Value iv) {
          ivs[r] = iv;
          overRow(inner, r + 1);
        });
      SmallVector<Value> outIndices;
      for (unsigned k = 0; k < form.resultRank; ++k)
        outIndices.push_back(ivs[k]);
      Value current = memref::LoadOp::create(rb, loc, outBuf, outIndices);
      IRMapping addMapping;
      addMapping.map(body.getArgument(2), current);
      Value term = form.add->getOperand(0) == body.getArgument(2) ? form.add->getOperand(1)
                                                                   : form.add->getOperand(0);
      addMapping.map(term, loadAt(rb, updBuf, maps[1]));
      Value sum = rb.clone(*form.add, addMapping)->getResult(0);
      memref::StoreOp::create(rb, loc, sum, outBuf, outIndices);
    };
    overRow(then, 0);
  };
  overIndices(b, form.resultRank);
  op->erase();
  return success();
}

struct SparseScatterAdds : tessera::impl::SparseScatterAddsBase<SparseScatterAdds> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, ScatterAddForm>> found;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<ScatterAddForm> form = matchScatterAdd(op))
        found.emplace_back(op, *form);
    });
    for (auto &[op, form] : found)
      (void)rewriteSparse(op, form); // dynamic shapes or tensors: left dense
  }
};

} // namespace

} // namespace tessera::codegen
