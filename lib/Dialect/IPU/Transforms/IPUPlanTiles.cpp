//===- IPUPlanTiles.cpp - decide how each op runs on the tiles -----------===//
//
// Planning happens over the whole of @main, against a MachineProgram that
// grows as values are placed (so the cost of a candidate is measured with
// the same region arithmetic the IPU model executes, and the same
// CostModel). Each linalg.generic gets the mapping of its results that the
// cost model prefers among a grid of candidates; a reduction may first be
// split into partial results and a combining step, which is an IR change
// made here because its worth depends on how its parts are mapped. The
// decisions are then recorded as attributes (#ipu.plan on each generic,
// #ipu.mapping on inputs, weights and allocations) for ipu-map-tiles to
// apply; nothing else changes.
//
//===----------------------------------------------------------------------===//

#include "TilePlan.h"
#include "tessera/Codegen/VectorizeContractions.h"
#include "tessera/Dialect/Graph/IR/Placement.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/ThreadPool.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <set>

namespace tessera::ipu {
#define GEN_PASS_DEF_IPUPLANTILES
#include "tessera/Dialect/IPU/Transforms/Passes.h.inc"
} // namespace tessera::ipu

using namespace mlir;
using namespace tessera;
using namespace tessera::ipu::tiling;
using runtime::MachineProgram;


namespace {
/// How a reduction accumulates: `yield combine(out, f(ins))`, the output
/// read nowhere else. Splitting such a reduction into partial results and
/// combining them is exact up to the reassociation of `combine`.
struct Accumulation {
  StringRef combine;  ///< arith.addf, arith.maximumf, ...
  TypedAttr identity; ///< combine(identity, x) == x
};

std::optional<Accumulation> accumulationOf(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumReductionLoops() == 0)
    return std::nullopt;
  // A split keeps every loop but the one it slices: a body reading a
  // parallel loop's index (a scatter-add compares its rows with the
  // indices) reads the same, one reading a reduction loop's would not.
  auto iterators = op.getIteratorTypesArray();
  if (op.getRegion()
          .walk([&](linalg::IndexOp index) {
            return iterators[index.getDim()] == utils::IteratorType::reduction
                       ? WalkResult::interrupt()
                       : WalkResult::advance();
          })
          .wasInterrupted())
    return std::nullopt;
  Block &body = op.getRegion().front();
  BlockArgument out = body.getArguments().back();
  Operation *combine = body.getTerminator()->getOperand(0).getDefiningOp();
  if (!combine || combine->getNumOperands() != 2 || !out.hasOneUse() ||
      out.getUses().begin()->getOwner() != combine)
    return std::nullopt;
  Type t = out.getType();
  Builder b(op.getContext());
  if (isa<arith::AddFOp>(combine))
    return Accumulation{combine->getName().getStringRef(),
                        b.getFloatAttr(t, 0.0)};
  if (isa<arith::AddIOp>(combine))
    return Accumulation{combine->getName().getStringRef(),
                        b.getIntegerAttr(t, 0)};
  if (isa<arith::MaximumFOp, arith::MaxNumFOp>(combine))
    return Accumulation{
        combine->getName().getStringRef(),
        b.getFloatAttr(t, -std::numeric_limits<double>::infinity())};
  return std::nullopt;
}

/// A generic filling `empty` with the scalar `value`, everywhere.
linalg::GenericOp buildFill(OpBuilder &b, Location loc, Value empty, Value value) {
  auto type = cast<RankedTensorType>(empty.getType());
  return linalg::GenericOp::create(
      b, loc, TypeRange{type}, ValueRange{}, ValueRange{empty},
      ArrayRef<AffineMap>{b.getMultiDimIdentityMap(type.getRank())},
      SmallVector<utils::IteratorType>(type.getRank(), utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange) { linalg::YieldOp::create(nb, l, value); });
}

/// A generic folding `partials` [n x shape] over its leading dimension into
/// `init` [shape]: out = combine(partial, out) element by element.
linalg::GenericOp
buildCombine(OpBuilder &b, Location loc, Value partials, Value init,
             llvm::function_ref<Value(OpBuilder &, Location, Value partial, Value out)> combine) {
  auto outType = cast<RankedTensorType>(init.getType());
  unsigned rank = outType.getRank();
  SmallVector<AffineExpr> read{b.getAffineDimExpr(rank)};
  for (unsigned d = 0; d < rank; ++d)
    read.push_back(b.getAffineDimExpr(d));
  SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  MLIRContext *ctx = b.getContext();
  return linalg::GenericOp::create(
      b, loc, TypeRange{outType}, ValueRange{partials}, ValueRange{init},
      // The init is read at the first `rank` loops; built explicitly because
      // getMajorSubMap(0) of a scalar's map is null.
      ArrayRef<AffineMap>{AffineMap::get(rank + 1, 0, read, ctx),
                          AffineMap::get(rank + 1, 0, ArrayRef(read).drop_front(), ctx)},
      iterators, [&](OpBuilder &nb, Location l, ValueRange args) {
        linalg::YieldOp::create(nb, l, combine(nb, l, args[0], args[1]));
      });
}

/// The ops a reduction split into `pieces` partial results becomes.
struct SplitOps {
  linalg::GenericOp fill, partial, combine;
  SmallVector<Operation *> created; ///< every new op, in creation order
};

/// Splits reduction loop `loop` of `op` (range R, divisible by `pieces`)
/// into `pieces` slices: a generic computing the partial results
/// [pieces x output] from the identity (the slice index is a new parallel
/// loop, the last), then a generic combining them into `op`'s init. The new
/// ops are inserted before `op`, which is left in place.
SplitOps splitReduction(linalg::GenericOp op, const Accumulation &acc,
                        unsigned loop, int64_t pieces) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  OpBuilder b(op);
  unsigned n = op.getNumLoops();
  int64_t slice = op.getStaticLoopRanges()[loop] / pieces;
  // Old loop `loop` = new loop `loop` (within the slice) + slice * new loop n.
  SmallVector<AffineExpr> oldLoops;
  for (unsigned i = 0; i < n; ++i)
    oldLoops.push_back(i == loop ? b.getAffineDimExpr(i) +
                                       slice * b.getAffineDimExpr(n)
                                 : b.getAffineDimExpr(i));
  AffineMap toOld = AffineMap::get(n + 1, 0, oldLoops, ctx);
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<int64_t> partialShape{pieces};
  partialShape.append(outType.getShape().begin(), outType.getShape().end());
  auto partialType =
      RankedTensorType::get(partialShape, outType.getElementType());

  // The identity, everywhere.
  auto empty =
      tensor::EmptyOp::create(b, loc, partialShape, outType.getElementType());
  auto identity = arith::ConstantOp::create(b, loc, acc.identity);
  auto fill = buildFill(b, loc, empty, identity);

  // The partial results: the same body over one slice of the reduction.
  SmallVector<AffineMap> maps;
  for (OpOperand *in : op.getDpsInputOperands())
    maps.push_back(op.getMatchingIndexingMap(in).compose(toOld));
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  SmallVector<AffineExpr> partialOut{b.getAffineDimExpr(n)};
  for (AffineExpr e : out.getResults())
    partialOut.push_back(e.compose(toOld));
  maps.push_back(AffineMap::get(n + 1, 0, partialOut, ctx));
  // The slice's range appears only in sums (k' + slice * s): an
  // uninitialized operand indexed by k' alone gives linalg its range (as a
  // pooling window's shape operand does).
  SmallVector<Value> inputs(op.getDpsInputs());
  auto window = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{slice},
                                        outType.getElementType());
  inputs.push_back(window);
  maps.insert(maps.end() - 1,
              AffineMap::get(n + 1, 0, b.getAffineDimExpr(loop)));
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  iterators.push_back(utils::IteratorType::parallel);
  auto partial =
      linalg::GenericOp::create(b, loc, TypeRange{partialType}, inputs,
                                ValueRange{fill.getResult(0)}, maps, iterators);
  IRMapping none;
  op.getRegion().cloneInto(&partial.getRegion(), none);
  partial.getRegion().front().insertArgument(op.getNumDpsInputs(),
                                             outType.getElementType(), loc);

  // Combined into the op's own init (a bias, or its zeros).
  auto combine = buildCombine(b, loc, partial.getResult(0), op.getDpsInitOperand(0)->get(),
                              [&](OpBuilder &nb, Location l, Value in, Value out) {
                                OperationState state(l, acc.combine);
                                state.addOperands({out, in});
                                state.addTypes(in.getType());
                                return nb.create(state)->getResult(0);
                              });
  return {fill,
          partial,
          combine,
          {empty, identity, fill, window, partial, combine}};
}

/// Splits reduction loop `loop` of `op` (range R, divisible by `steps`)
/// into `steps` generics run one after another, step t adding slice t of
/// the reduction into the result of step t - 1 (the first into `op`'s
/// init): the serial splits of Poplar's planner, for a reduction whose
/// operands a tile cannot hold whole at once. Each step has the loops of
/// `op` with `loop` over one slice, plus a reduction loop u of range 1 so
/// that the slice reads at k + slice * (u + t), which stays a sum for t = 0
/// (a bare k would have to span the operand); an uninitialized operand
/// indexed by (k, u) gives linalg their ranges. The new ops are inserted
/// before `op`, which is left in place; the last step's result stands for
/// `op`'s.
SmallVector<linalg::GenericOp> splitReductionSerially(linalg::GenericOp op, unsigned loop,
                                                      int64_t steps,
                                                      SmallVector<Operation *> &created) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  OpBuilder b(op);
  unsigned n = op.getNumLoops();
  int64_t slice = op.getStaticLoopRanges()[loop] / steps;
  auto elementType = getElementTypeOrSelf(op->getResult(0).getType());
  auto window = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{slice, 1}, elementType);
  created.push_back(window);
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  iterators.push_back(utils::IteratorType::reduction);
  SmallVector<linalg::GenericOp> result;
  Value acc = op.getDpsInitOperand(0)->get();
  for (int64_t t = 0; t < steps; ++t) {
    SmallVector<AffineExpr> oldLoops;
    for (unsigned i = 0; i < n; ++i)
      oldLoops.push_back(i == loop ? b.getAffineDimExpr(i) +
                                         slice * (b.getAffineDimExpr(n) + t)
                                   : b.getAffineDimExpr(i));
    AffineMap toOld = AffineMap::get(n + 1, 0, oldLoops, ctx);
    SmallVector<AffineMap> maps;
    for (OpOperand *in : op.getDpsInputOperands())
      maps.push_back(op.getMatchingIndexingMap(in).compose(toOld));
    maps.push_back(AffineMap::get(
        n + 1, 0, {b.getAffineDimExpr(loop), b.getAffineDimExpr(n)}, ctx));
    // The output does not read the slice: the loops it reads are the same.
    maps.push_back(op.getMatchingIndexingMap(op.getDpsInitOperand(0)).compose(toOld));
    SmallVector<Value> inputs(op.getDpsInputs());
    inputs.push_back(window);
    auto step = linalg::GenericOp::create(b, loc, op->getResultTypes(), inputs,
                                          ValueRange{acc}, maps, iterators);
    IRMapping none;
    op.getRegion().cloneInto(&step.getRegion(), none);
    step.getRegion().front().insertArgument(op.getNumDpsInputs(), elementType, loc);
    created.push_back(step);
    result.push_back(step);
    acc = step->getResult(0);
  }
  return result;
}

/// Splits a gather by the rows of its table: `op`'s body reads `table`
/// (captured) with one tensor.extract whose index along dimension `dim`
/// is data-dependent. Each of `blocks` slices of that dimension (B rows,
/// the last possibly fewer but never none: the planner only asks for
/// counts that leave every block rows) becomes a slice of a new parallel
/// loop p of a partial generic, [blocks x output], whose body reads block p
/// only, `p * B + clamp(row - p * B)`, and yields zero for a row outside it; a
/// combining generic ORs the partials' bits into the output (one partial
/// holds each element, the others zero bits: bit-exact, -0.0 and NaNs
/// included). So every tile holds a block of rows of the table's columns
/// instead of all rows: tables whose one column is more than a tile holds
/// (200,000 rows of fp32) fit. Fails (nullopt, nothing created) for bodies
/// it does not understand.
std::optional<SplitOps> splitGatherByRows(linalg::GenericOp op, Value table, unsigned dim,
                                          int64_t blocks) {
  if (op.getNumDpsInits() != 1 || op->getNumResults() != 1 ||
      op.getNumReductionLoops() != 0)
    return std::nullopt;
  Block &body = op.getRegion().front();
  SmallVector<tensor::ExtractOp> extracts;
  for (Operation *user : table.getUsers())
    if (op->isProperAncestor(user)) {
      auto extract = dyn_cast<tensor::ExtractOp>(user);
      if (!extract || extract->getBlock() != &body)
        return std::nullopt;
      extracts.push_back(extract);
    }
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  Type element = outType.getElementType();
  // One extract; an element ORed as bytes; an output the body does not
  // read (the partials start uninitialized).
  if (extracts.size() != 1 || !element.isIntOrFloat() ||
      element.getIntOrFloatBitWidth() % 8 != 0 || !body.getArguments().back().use_empty())
    return std::nullopt;
  unsigned width = element.getIntOrFloatBitWidth();
  int64_t rows = cast<RankedTensorType>(table.getType()).getDimSize(dim);
  int64_t block = (rows + blocks - 1) / blocks;

  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  OpBuilder b(op);
  unsigned n = op.getNumLoops();
  SplitOps split;
  SmallVector<int64_t> partialShape{blocks};
  partialShape.append(outType.getShape().begin(), outType.getShape().end());
  auto partialType = RankedTensorType::get(partialShape, element);
  auto empty = tensor::EmptyOp::create(b, loc, partialShape, element);
  split.created.push_back(empty);

  // The partials: op's maps with the block loop n read by nothing but the
  // output's leading dimension.
  SmallVector<AffineMap> maps;
  for (OpOperand *in : op.getDpsInputOperands())
    maps.push_back(AffineMap::get(n + 1, 0, op.getMatchingIndexingMap(in).getResults(), ctx));
  SmallVector<AffineExpr> partialOut{b.getAffineDimExpr(n)};
  for (AffineExpr e : op.getMatchingIndexingMap(op.getDpsInitOperand(0)).getResults())
    partialOut.push_back(e);
  maps.push_back(AffineMap::get(n + 1, 0, partialOut, ctx));
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  iterators.push_back(utils::IteratorType::parallel);
  auto partial = linalg::GenericOp::create(b, loc, TypeRange{partialType}, op.getDpsInputs(),
                                           ValueRange{empty}, maps, iterators);
  IRMapping mapping;
  op.getRegion().cloneInto(&partial.getRegion(), mapping);
  split.created.push_back(partial);
  Block &newBody = partial.getRegion().front();
  auto extract = cast<tensor::ExtractOp>(mapping.lookup(extracts.front().getOperation()));
  {
    OpBuilder eb(extract);
    Value p = linalg::IndexOp::create(eb, loc, n);
    Value size = arith::ConstantIndexOp::create(eb, loc, block);
    Value base = arith::MulIOp::create(eb, loc, p, size);
    Value row = extract.getIndices()[dim];
    Value local = arith::SubIOp::create(eb, loc, row, base);
    Value zeroIndex = arith::ConstantIndexOp::create(eb, loc, 0);
    // One unsigned compare: a row before the block is a huge unsigned.
    Value inBlock = arith::CmpIOp::create(eb, loc, arith::CmpIPredicate::ult, local, size);
    Value safe = arith::SelectOp::create(eb, loc, inBlock, local, zeroIndex);
    extract.getIndicesMutable()[dim].set(arith::AddIOp::create(eb, loc, base, safe));
    // Zero what the block does not hold, at the yield (the body may go on
    // computing with the element).
    auto yield = cast<linalg::YieldOp>(newBody.getTerminator());
    OpBuilder yb(yield);
    Value zero = arith::ConstantOp::create(yb, loc, yb.getZeroAttr(element));
    yield->setOperand(0, arith::SelectOp::create(yb, loc, inBlock, yield->getOperand(0), zero));
  }

  // Zero bits, ORed with each block's partial.
  Type bits = b.getIntegerType(width);
  auto outEmpty = tensor::EmptyOp::create(b, loc, outType.getShape(), element);
  split.created.push_back(outEmpty);
  auto zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(element));
  split.created.push_back(zero);
  auto fill = buildFill(b, loc, outEmpty, zero);
  split.created.push_back(fill);
  auto combine = buildCombine(
      b, loc, partial.getResult(0), fill.getResult(0),
      [&](OpBuilder &nb, Location l, Value in, Value out) {
        auto asBits = [&](Value v) -> Value {
          return isa<FloatType>(element) ? arith::BitcastOp::create(nb, l, bits, v).getResult()
                                         : v;
        };
        Value ored = arith::OrIOp::create(nb, l, asBits(in), asBits(out));
        return isa<FloatType>(element) ? arith::BitcastOp::create(nb, l, element, ored).getResult()
                                       : ored;
      });
  split.created.push_back(combine);
  split.fill = fill;
  split.partial = partial;
  split.combine = combine;
  return split;
}

class Planner {
public:
  Planner(ModuleOp module, func::FuncOp main, const target::IPUTarget &target,
          double availableMemoryProportion)
      : module_(module), main_(main), target_(target), cost_(target),
        numTiles_(target.totalTiles()),
        budget_(static_cast<int64_t>(availableMemoryProportion * target.bytesPerTile)),
        windowTiles_(numTiles_), weightBytesOnTile_(numTiles_, 0),
        liveOnTile_(numTiles_, 0) {}

  /// What the planner did, for the pass's statistics.
  struct Counts {
    int64_t planned = 0, split = 0, epilogues = 0, overBudget = 0, mirrored = 0;
    int64_t costedCandidates = 0, boundedCandidates = 0;
  };
  const Counts &counts() const { return counts_; }
  /// Emit a remark on each op explaining its plan (the pass's `explain`).
  void explain() { explain_ = true; }
  /// Keep, per tile, the most bytes the planner takes it to hold during
  /// any step (recorded as ipu::kAssumedTileBytesAttrName).
  void recordAssumedMemory() { assumedOnTile_.assign(numTiles_, 0); }

  LogicalResult plan();
  /// Records the plans as attributes: #ipu.plan on each generic to run,
  /// #ipu.mapping on the leaves and allocations, ipu.padded_view on the
  /// inserts that became padded views.
  void record();

private:
  // Placement of values (variables of prog_).
  int64_t variableOf(Value v) const {
    auto it = vars_.find(v);
    return it == vars_.end() ? -1 : it->second;
  }
  int64_t addVariable(Value v, TileMapping mapping);
  int64_t addView(Value v, Value source);
  /// Places a value nobody placed yet (an input, weight or constant) with a
  /// linear mapping.
  int64_t placeLinear(Value v);
  /// The mapping an unplaced operand should take to sit where the vertices
  /// reading it through `access` need it, or nullopt when it cannot follow.
  std::optional<TileMapping> alignedMapping(Value v, const AccessMap &access,
                                            const Plan &plan,
                                            const TileMapping &out) const;
  /// `aligned` (an operand's mapping that follows the output's pieces)
  /// with its whole dimensions split over the blocks of tiles that read the
  /// same piece: every block reads the whole piece either way, but without
  /// this one tile per piece holds all of it (a weight's columns on the
  /// first row of tiles: a 2048 x 2048 weight put 256 KiB on tile 0).
  TileMapping spreadOverReaders(TileMapping aligned, const TileMapping &out,
                                int64_t elementBytes) const;
  /// A constant weight the op reads first, whose copies on other tiles
  /// never go stale: it may be mirrored (see mirroredMapping).
  bool isMirrorable(const Input &in) const;
  /// `aligned` with a copy of its pieces on every block of the output's
  /// tiles that reads them (the output's dimensions it does not follow):
  /// each tile then holds the weight region its vertex reads, loaded once
  /// with the program, instead of receiving it in every run. Unchanged when
  /// one block reads it all.
  static TileMapping mirroredMapping(TileMapping aligned, const TileMapping &out);
  bool isUnplacedLeaf(Value v) const {
    return variableOf(v) < 0 &&
           (isa<BlockArgument>(v) || v.getDefiningOp<ml_program::GlobalLoadConstOp>() ||
            deferredViews_.count(v));
  }
  /// Views that only insert or drop unit dimensions of a weight not placed
  /// yet (a convolution's weight with its group dimension), read by generics
  /// only: the weight is placed by its first reader's plan, through the
  /// view, like a weight it reads directly -- where that plan's vertices
  /// read it, not spread out linearly.
  llvm::MapVector<Value, Value> deferredViews_;
  /// Places a deferred view's weight with `mapping` (of the view's shape)
  /// and makes the view; or linearly when `mapping` is empty.
  void placeDeferredView(Value view, const std::optional<TileMapping> &mapping);
  /// Places an unplaced leaf, or a deferred view's weight, with `mapping`
  /// (of `v`'s shape).
  void placeAligned(Value v, const TileMapping &mapping) {
    if (deferredViews_.count(v))
      placeDeferredView(v, mapping);
    else
      addVariable(v, mapping);
  }

  /// Plans one generic: the best of its candidate grids (GridSearch), then
  /// its kernel's code counted on its tiles and its unplaced operands placed
  /// where it reads them.
  LogicalResult planGeneric(Plan &plan);
  friend class GridSearch;
  /// A tensor the body reads at data-dependent places (a gather's table)
  /// is held whole along those dimensions by every vertex's tile: fails,
  /// saying what is too big, when that is more than a tile holds.
  LogicalResult checkDataDependentReads(Plan &plan);
  /// Counts the code of `plan`'s kernel on each tile that runs it.
  void holdKernelCode(Plan &plan);
  /// Places `plan`'s operands no op placed yet where it reads them
  /// (mirrored, for a weight in `mirrorable`, when `mirror`).
  void placeOperands(Plan &plan, const std::vector<bool> &mirrorable, bool mirror);
  /// Plans one generic and places its results (the whole step for one op).
  /// `resultOf`: the op whose result's reader may be this op's epilogue
  /// (a split reduction's combining step finishes the original op's).
  LogicalResult planOp(linalg::GenericOp op, linalg::GenericOp resultOf = {});
  /// Epilogues planned with their producers (not ops of their own).
  DenseSet<Operation *> absorbed_;
  /// Fills whose insert became a padded view: no step, no memory.
  DenseSet<Operation *> paddingFills_;
  /// Makes the padded view of `insert` (see paddingInsertOf); fails when its
  /// source cannot be padded in place (a general reshape).
  LogicalResult addPaddedView(tensor::InsertSliceOp insert);
  /// Plans a reduction as it is or split into partial results over the
  /// tiles and a combining step, whichever the cost model prefers; the
  /// split rewrites the IR. Other ops go straight to planOp.
  LogicalResult planOpOrSplit(linalg::GenericOp op);
  /// Plans the three ops of a split (its combining step finishes `op`).
  LogicalResult planSplit(const SplitOps &split, linalg::GenericOp op) {
    if (failed(planOp(split.fill)) || failed(planOp(split.partial)))
      return failure();
    return planOp(split.combine, op);
  }
  /// Plans the steps of a serial split (the last finishes `op`).
  LogicalResult planSerialSteps(ArrayRef<linalg::GenericOp> chain, linalg::GenericOp op) {
    for (linalg::GenericOp step : chain)
      if (failed(planOp(step, step == chain.back() ? op : nullptr)))
        return failure();
    return success();
  }
  /// A planned split's cost: its two steps and the sync between them,
  /// whether both fit, and the memory the larger needs.
  struct SplitCost {
    int64_t cycles = 0;
    bool fits = false;
    int64_t memory = 0;
    int64_t partialCycles = 0, combineCycles = 0; ///< the two steps'
  };
  SplitCost splitCost(const SplitOps &split) const {
    const Plan &partial = plans_[planOf_.lookup(split.partial)];
    const Plan &combine = plans_[planOf_.lookup(split.combine)];
    return {partial.cycles + combine.cycles + cost_.stepSyncCycles(windowIPUs()),
            partial.fits && combine.fits, std::max(partial.memory, combine.memory),
            partial.cycles, combine.cycles};
  }
  /// `op`, planned as the ops that replace it, gives way to `with`.
  void replaceSplitOp(linalg::GenericOp op, ValueRange with) {
    op->replaceAllUsesWith(with);
    position_.erase(op);
    op->erase();
  }
  /// A gather whose table's one column is over the memory budget and whose
  /// unsplit plan does not fit, split by the table's rows
  /// (splitGatherByRows): the cheapest of the fewest blocks that fit and
  /// the next two counts; nullopt when `op` is no such gather, its columns
  /// fit whole, or no split could be planned. A table the step updates
  /// (trainable state) is split whatever its columns, into blocks that
  /// spread it over the window, as a weight is.
  std::optional<LogicalResult> planGatherByRows(linalg::GenericOp op);
  /// Whether `v` is state the step writes back: an argument of @main whose
  /// `graph.state` a result's `graph.state_update` names (a trainable
  /// weight, its optimizer state).
  bool isUpdatedState(Value v);
  /// The mapping of the state whose update `op` computes (its result is
  /// @main's result marked graph.state_update of a placed argument of the
  /// same shape, within the window), or nothing.
  std::optional<TileMapping> stateHomeOf(linalg::GenericOp op, ArrayRef<int64_t> shape);

  /// The planner's state, to try a plan and take it back. Plans are only
  /// appended, but for the mapping an init producer takes from its user,
  /// which `mappingUndo_` records.
  struct Snapshot {
    size_t numVariables, numPlans, numUndo;
    DenseMap<Value, int64_t> vars;
    llvm::StringMap<int64_t> globalVars;
    DenseMap<Operation *, size_t> planOf;
    std::vector<int64_t> weightBytesOnTile;
    std::vector<int64_t> lastUse, liveVars, liveElementBytes, liveOnTile;
    DenseMap<size_t, llvm::BitVector> codeTiles;
    int64_t unplacedLeafBytes;
    std::vector<int64_t> unplannedCodeOnIPU;
    DenseMap<int64_t, int64_t> linearCursor;
  };
  Snapshot snapshot() const {
    return {prog_.variables.size(),
            plans_.size(),
            mappingUndo_.size(),
            vars_,
            globalVars_,
            planOf_,
            weightBytesOnTile_,
            lastUse_,
            liveVars_,
            liveElementBytes_,
            liveOnTile_,
            codeTiles_,
            unplacedLeafBytes_,
            unplannedCodeOnIPU_,
            linearCursor_};
  }
  void restore(Snapshot s) {
    prog_.variables.resize(s.numVariables);
    while (mappingUndo_.size() > s.numUndo) {
      auto &[plan, mapping] = mappingUndo_.back();
      plans_[plan].mapping = std::move(mapping);
      mappingUndo_.pop_back();
    }
    plans_.resize(s.numPlans);
    vars_ = std::move(s.vars);
    globalVars_ = std::move(s.globalVars);
    planOf_ = std::move(s.planOf);
    weightBytesOnTile_ = std::move(s.weightBytesOnTile);
    lastUse_ = std::move(s.lastUse);
    liveVars_ = std::move(s.liveVars);
    liveElementBytes_ = std::move(s.liveElementBytes);
    liveOnTile_ = std::move(s.liveOnTile);
    codeTiles_ = std::move(s.codeTiles);
    unplacedLeafBytes_ = s.unplacedLeafBytes;
    unplannedCodeOnIPU_ = std::move(s.unplannedCodeOnIPU);
    linearCursor_ = std::move(s.linearCursor);
  }
  /// Takes a trial back: the planner's state, and the ops it created.
  void undoTrial(const Snapshot &before, ArrayRef<Operation *> created) {
    restore(before);
    for (Operation *op : llvm::reverse(created))
      op->erase();
  }
  std::vector<std::pair<size_t, TileMapping>> mappingUndo_;
  /// Per tile, the most bytes it was taken to hold during a step: what is
  /// live there, its share of the leaves not placed yet, and the step's
  /// receive buffers. Empty unless recorded (recordAssumedMemory).
  std::vector<int64_t> assumedOnTile_;
  /// Counts the step of `plan` (planned for good) in assumedOnTile_; with
  /// no plan, what is live between steps.
  void noteAssumedMemory(const Plan *plan);
  /// Set while planOpOrSplit compares options (cheaper costing).
  bool inTrial_ = false;
  bool explain_ = false;
  Counts counts_;


  ModuleOp module_;
  func::FuncOp main_;
  target::IPUTarget target_;
  target::CostModel cost_;
  int64_t numTiles_, budget_;
  /// The tiles the op being planned may use: its IPU's (graph.ipu, from
  /// graph-assign-stages; an op without one stays on the IPU of the op
  /// before it), or all of them.
  int64_t windowFirst_ = 0, windowTiles_;
  /// A linear mapping of `shape` over the window, from the window's next
  /// unused tile: values too small for every tile (biases, norms' scales,
  /// their optimizer state) each start where the last one ended, not all
  /// on the window's first tiles (BERT's training state put 98 of them on
  /// tile 0).
  TileMapping linearInWindow(ArrayRef<int64_t> shape, int64_t elementBytes) const {
    TileMapping m = TileMapping::linear(shape, elementBytes, windowTiles_);
    int64_t cursor = linearCursor_.lookup(windowFirst_);
    if (cursor + m.numPieces() > windowTiles_)
      cursor = 0;
    m.firstTile += windowFirst_ + cursor;
    return m;
  }
  /// Per window (by its first tile): where the next linear mapping starts.
  DenseMap<int64_t, int64_t> linearCursor_;
  int64_t windowIPUs() const { return windowTiles_ / target_.tilesPerIPU; }
  /// Moves the window to `op`'s IPU when it is placed on one.
  LogicalResult enterWindowOf(Operation *op);
  MachineProgram prog_;
  DenseMap<Value, int64_t> vars_;
  /// Weights loaded more than once share one variable.
  llvm::StringMap<int64_t> globalVars_;
  /// Bytes of weights placed on each tile so far (see weightOffset).
  std::vector<int64_t> weightBytesOnTile_;
  int64_t weightOffset(const TileMapping &out, const TileMapping &weight,
                       int64_t elementBytes);
  std::vector<Plan> plans_;
  DenseMap<Operation *, size_t> planOf_;

  // What each tile holds while an op runs: the variables placed so far
  // that are still read later (weights and inputs always), so that a plan
  // is chosen against the memory its tiles have left, not the budget alone.
  static constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
  /// Position of each op of @main's body; ops a split creates have none and
  /// count as the op being planned.
  DenseMap<Operation *, int64_t> position_;
  int64_t now_ = 0; ///< position of the op being planned
  /// Per variable: the position of its last reader (kForever for leaves);
  /// a view's readers count for the variable it views.
  std::vector<int64_t> lastUse_;
  /// Variables whose pieces are counted in liveOnTile_, and the element
  /// bytes of each variable (the planner's variables carry no dtype).
  std::vector<int64_t> liveVars_, liveElementBytes_;
  std::vector<int64_t> liveOnTile_;
  /// Per kernel (see holdKernelCode): the tiles whose liveOnTile_ counts its
  /// code, once each, as the allocator places it.
  DenseMap<size_t, llvm::BitVector> codeTiles_;
  /// Bytes of weights and inputs no op has placed yet: resident from the
  /// program's start wherever they go, so each tile is taken to hold its
  /// share of them already (weights are placed by their first reader,
  /// late layers' after the early layers are planned).
  int64_t unplacedLeafBytes_ = 0;
  /// Per IPU, vertex code the ops not planned yet will add, taken to be
  /// on every tile of the IPU they run on: code stays from the program's
  /// start, so a step holds the code of later steps' kernels too (as the
  /// allocator places it). Per op to plan, the code of the first op of its
  /// kind on its IPU (body and indexing maps: kernels are generic over
  /// shapes, and a network's repeated blocks share them), released when
  /// the op is planned and its own code counted on its tiles.
  std::vector<int64_t> unplannedCodeOnIPU_;
  struct CodeReserve {
    int64_t ipu = -1; ///< -1: every IPU (an op in no IPU's window)
    int64_t bytes = 0;
  };
  DenseMap<Operation *, CodeReserve> reservedCode_;
  void reserveCode(ArrayRef<Operation *> ops);
  /// Adds `bytes` to the reserve of `ipu` (-1: of every IPU).
  void addCodeReserve(int64_t ipu, int64_t bytes) {
    for (int64_t i = 0; i < static_cast<int64_t>(unplannedCodeOnIPU_.size()); ++i)
      if (ipu < 0 || ipu == i)
        unplannedCodeOnIPU_[i] += bytes;
  }
  /// `op` is planned (or absorbed, or no step at all): its reserve goes.
  void releaseCode(Operation *op) {
    auto it = reservedCode_.find(op);
    if (it == reservedCode_.end())
      return;
    addCodeReserve(it->second.ipu, -it->second.bytes);
    reservedCode_.erase(it);
  }
  int64_t unplannedCodeOn(int64_t tile) const {
    return unplannedCodeOnIPU_[tile / target_.tilesPerIPU];
  }
  int64_t lastUseOf(Value v);
  /// The variable that holds `var`'s elements (itself unless a view).
  int64_t storageOf(int64_t var) const {
    while (var >= 0 && prog_.variables[var].base >= 0)
      var = prog_.variables[var].base;
    return var;
  }
  /// `v` is `var` (a new variable, a view or an alias updated in place):
  /// `var`'s storage lives until `v`'s last reader too.
  void bind(Value v, int64_t var);
  void extendLife(int64_t var, int64_t until) {
    int64_t s = storageOf(var);
    if (s >= 0)
      lastUse_[s] = std::max(lastUse_[s], until);
  }
  /// Stops counting variables whose last reader ran before position `now`.
  void releaseDead(int64_t now);
};

int64_t Planner::lastUseOf(Value v) {
  if (isa<BlockArgument>(v) || v.getDefiningOp<ml_program::GlobalLoadConstOp>())
    return kForever;
  int64_t last = now_;
  for (Operation *user : v.getUsers()) {
    Operation *top = main_.getBody().front().findAncestorOpInBlock(*user);
    auto it = top ? position_.find(top) : position_.end();
    last = std::max(last, it == position_.end() ? now_ : it->second);
  }
  return last;
}

void Planner::bind(Value v, int64_t var) {
  vars_[v] = var;
  if (lastUse_.size() < prog_.variables.size())
    lastUse_.resize(prog_.variables.size(), -1);
  extendLife(var, lastUseOf(v));
}

void Planner::releaseDead(int64_t now) {
  llvm::erase_if(liveVars_, [&](int64_t var) {
    if (lastUse_[var] >= now)
      return false;
    prog_.variables[var].mapping.forEachPieceElements([&](int64_t tile, int64_t elements) {
      liveOnTile_[tile] -= elements * liveElementBytes_[var];
    });
    return true;
  });
}


int64_t Planner::addVariable(Value v, TileMapping mapping) {
  runtime::Variable var;
  auto type = cast<RankedTensorType>(v.getType());
  var.shape.assign(type.getShape().begin(), type.getShape().end());
  mapping.shape = var.shape;
  var.mapping = std::move(mapping);
  int64_t id = prog_.variables.size();
  prog_.variables.push_back(std::move(var));
  lastUse_.resize(prog_.variables.size(), -1);
  liveElementBytes_.resize(prog_.variables.size(), 0);
  liveElementBytes_[id] = elementBytes(type);
  prog_.variables[id].mapping.forEachPieceElements([&](int64_t tile, int64_t elements) {
    liveOnTile_[tile] += elements * liveElementBytes_[id];
  });
  liveVars_.push_back(id);
  bind(v, id);
  if ((isa<BlockArgument>(v) || v.getDefiningOp<ml_program::GlobalLoadConstOp>()) &&
      type.hasStaticShape())
    unplacedLeafBytes_ -= type.getNumElements() * liveElementBytes_[id];
  if (auto load = v.getDefiningOp<ml_program::GlobalLoadConstOp>())
    globalVars_[load.getGlobal().getLeafReference()] = id;
  return id;
}

int64_t Planner::addView(Value v, Value source) {
  int64_t src = variableOf(source);
  auto type = cast<RankedTensorType>(v.getType());
  llvm::Expected<runtime::Variable> var = runtime::makeView(prog_, src, type.getShape());
  if (!var) {
    // A reshape of a padded view other than by unit dimensions: never made
    // (paddingInsertOf admits only those), so the caller reports it.
    llvm::consumeError(var.takeError());
    return -1;
  }
  int64_t id = prog_.variables.size();
  prog_.variables.push_back(std::move(*var));
  bind(v, id);
  return id;
}

LogicalResult Planner::addPaddedView(tensor::InsertSliceOp insert) {
  int64_t src = variableOf(insert.getSource());
  auto fill = insert.getDest().getDefiningOp<linalg::GenericOp>();
  std::optional<uint64_t> bits =
      ipu::paddingBits(cast<TypedAttr>(constantFillValue(fill)->getValue()));
  if (!bits)
    return failure();
  SmallVector<int64_t> low(insert.getStaticOffsets()), high;
  for (auto [d, size] : llvm::enumerate(insert.getSourceType().getShape()))
    high.push_back(insert.getDestType().getDimSize(d) - low[d] - size);
  llvm::Expected<runtime::Variable> var = runtime::makePaddedView(prog_, src, low, high, *bits);
  if (!var) {
    llvm::consumeError(var.takeError());
    return failure();
  }
  prog_.variables.push_back(std::move(*var));
  bind(insert.getResult(), prog_.variables.size() - 1);
  return success();
}

void Planner::placeDeferredView(Value view, const std::optional<TileMapping> &mapping) {
  Value source = deferredViews_.lookup(view);
  if (variableOf(source) < 0) {
    if (!mapping) {
      placeLinear(source);
    } else {
      // The view's pieces are the weight's: the same non-unit dimensions
      // with the same chunks and tile strides.
      addVariable(source, mappingThroughUnitDims(
                              *mapping, cast<RankedTensorType>(source.getType()).getShape()));
    }
  }
  addView(view, source);
}

int64_t Planner::placeLinear(Value v) {
  if (int64_t id = variableOf(v); id >= 0)
    return id;
  if (deferredViews_.count(v)) {
    placeDeferredView(v, std::nullopt);
    return variableOf(v);
  }
  auto type = cast<RankedTensorType>(v.getType());
  TileMapping m = linearInWindow(type.getShape(), elementBytes(type));
  linearCursor_[windowFirst_] = m.firstTile - windowFirst_ + m.numPieces();
  return addVariable(v, std::move(m));
}

std::optional<TileMapping>
Planner::alignedMapping(Value v, const AccessMap &access, const Plan &plan,
                        const TileMapping &out) const {
  if (access.full)
    return std::nullopt;
  auto type = cast<RankedTensorType>(v.getType());
  TileMapping m;
  m.shape.assign(type.getShape().begin(), type.getShape().end());
  m.firstTile = out.firstTile;
  std::vector<bool> used(out.rank(), false);
  for (int64_t k = 0; k < type.getRank(); ++k) {
    int64_t dim = type.getDimSize(k);
    int64_t chunk = std::max<int64_t>(dim, 1), stride = 0;
    // Follows output dimension j when it reads exactly loop outputLoops[j].
    int64_t loop = -1, nonzero = 0;
    for (auto [i, c] : llvm::enumerate(access.coeffs[k]))
      if (c != 0) {
        ++nonzero;
        loop = c == 1 ? static_cast<int64_t>(i) : -2;
      }
    // A block of rows per slice of a loop (splitGatherByRows): follows
    // that loop's output dimension in blocks.
    int64_t block = 1;
    if (nonzero == 1 && loop == -2 && access.consts[k] == 0 && access.extent(k) > 1)
      for (auto [i, c] : llvm::enumerate(access.coeffs[k]))
        if (c == access.extent(k)) {
          loop = i;
          block = c;
        }
    if (nonzero == 1 && loop >= 0 && access.consts[k] == 0 && dim > 1) {
      for (int64_t j = 0; j < out.rank(); ++j) {
        if (plan.outputLoops[j] != loop || out.shape[j] != (dim + block - 1) / block)
          continue;
        if (used[j])
          return std::nullopt;
        used[j] = true;
        chunk = out.chunks[j] * block;
        stride = out.tileStrides[j];
      }
    } else if (nonzero == 2 && access.consts[k] == 0 && dim > 1) {
      // A split reduction's slice, k' + slice * s: follows output loop s
      // in blocks of `slice` when k' (coefficient 1) spans a whole slice.
      for (int64_t j = 0; j < out.rank(); ++j) {
        int64_t s = plan.outputLoops[j];
        int64_t slice = access.coeffs[k][s];
        if (slice <= 1 || used[j] || out.shape[j] * slice != dim)
          continue;
        bool inner =
            llvm::any_of(llvm::enumerate(access.coeffs[k]), [&](auto c) {
              return c.value() == 1 && static_cast<int64_t>(c.index()) != s &&
                     plan.loopRanges[c.index()] == slice;
            });
        if (!inner)
          continue;
        used[j] = true;
        chunk = out.chunks[j] * slice;
        stride = out.tileStrides[j];
      }
    }
    m.chunks.push_back(chunk);
    m.tileStrides.push_back(stride);
  }
  return m;
}

/// An operand's piece smaller than this stays whole on one tile of the
/// blocks reading it: spreading it saves little memory and makes every
/// reader gather it from several tiles.
constexpr int64_t kMinSpreadPieceBytes = 4096;

TileMapping Planner::spreadOverReaders(TileMapping aligned, const TileMapping &out,
                                       int64_t elementBytes) const {
  // The output's dimensions whose pieces all read the same operand piece.
  std::vector<int64_t> perDim = out.piecesPerDim();
  SmallVector<int64_t> blocks;
  for (int64_t j = 0; j < out.rank(); ++j)
    if (out.tileStrides[j] > 0 && perDim[j] > 1 &&
        !llvm::is_contained(aligned.tileStrides, out.tileStrides[j]))
      blocks.push_back(j);
  llvm::stable_sort(blocks, [&](int64_t a, int64_t b) { return perDim[a] > perDim[b]; });
  auto pieceBytes = [&] {
    int64_t n = elementBytes;
    for (int64_t k = 0; k < aligned.rank(); ++k)
      n *= std::min(aligned.chunks[k], aligned.shape[k]);
    return n;
  };
  for (int64_t j : blocks) {
    if (pieceBytes() < kMinSpreadPieceBytes)
      break;
    // The operand's longest dimension held whole: at most perDim[j] pieces
    // along it, on the first tiles of as many blocks.
    int64_t dim = -1;
    for (int64_t k = 0; k < aligned.rank(); ++k)
      if (aligned.tileStrides[k] == 0 && aligned.shape[k] > 1 &&
          (dim < 0 || aligned.shape[k] > aligned.shape[dim]))
        dim = k;
    if (dim >= 0) {
      aligned.chunks[dim] = (aligned.shape[dim] + perDim[j] - 1) / perDim[j];
      aligned.tileStrides[dim] = out.tileStrides[j];
      continue;
    }
    // Or a dimension that follows the output's pieces one level out (its
    // tile stride perDim[j] times j's: a split reduction's slice around
    // the rows): each piece in perDim[j] along it. Piece p then sits on
    // tile p * stride(j), the output piece (p / perDim[j], p % perDim[j])
    // of those two dimensions, so no two pieces share a tile.
    for (int64_t k = 0; k < aligned.rank(); ++k)
      if (aligned.tileStrides[k] == perDim[j] * out.tileStrides[j] &&
          aligned.chunks[k] >= perDim[j]) {
        aligned.chunks[k] = (aligned.chunks[k] + perDim[j] - 1) / perDim[j];
        aligned.tileStrides[k] = out.tileStrides[j];
        break;
      }
  }
  return aligned;
}

bool Planner::isMirrorable(const Input &in) const {
  if (variableOf(in.value) >= 0 || in.access.full || !in.access.extents.empty())
    return false;
  Value leaf = deferredViews_.lookup(in.value);
  if (!leaf)
    leaf = in.value;
  auto load = leaf.getDefiningOp<ml_program::GlobalLoadConstOp>();
  // A weight loaded before keeps that load's placement.
  return load && cast<RankedTensorType>(load.getType()).hasStaticShape() &&
         !globalVars_.count(load.getGlobal().getLeafReference());
}

TileMapping Planner::mirroredMapping(TileMapping aligned, const TileMapping &out) {
  // The blocks: the output's dimensions split over tiles that the operand
  // does not follow (as spreadOverReaders finds them), outermost first.
  std::vector<int64_t> perDim = out.piecesPerDim();
  for (int64_t j = 0; j < out.rank(); ++j)
    if (out.tileStrides[j] > 0 && perDim[j] > 1 &&
        !llvm::is_contained(aligned.tileStrides, out.tileStrides[j])) {
      aligned.mirrorCounts.push_back(perDim[j]);
      aligned.mirrorStrides.push_back(out.tileStrides[j]);
    }
  return aligned;
}

/// The share of the memory budget (availableMemoryProportion of a tile)
/// that weights -- placed, mirrored copies and an even share of those not
/// placed yet -- may take on the fullest tile for an op to mirror more
/// (0.4 of a tile at the default 0.6). Copies take the place of the
/// receive buffers the budget is for, but for the whole run: they trade
/// for exchange the memory later ops' activations and temporaries may
/// need, and the planner decides op by op, so they stop well short of the
/// tile's size; a smaller proportion (the out-of-memory advice) mirrors
/// less.
constexpr double kMaxMirroredWeightShareOfBudget = 2.0 / 3.0;
/// The most of that share one op's copies may take on a tile: a large
/// weight's copies (ResNet-50's 3x3 convolutions at batch 16: 99 KiB a tile
/// for 0.5% fewer cycles) would leave little for the ops after it.
constexpr double kMaxMirrorShareOfRoom = 0.25;
/// The price of a mirrored byte on a tile, in cycles saved: on ResNet-50 a
/// mirror saves 0.15-0.35 cycles per byte, and this takes the better half.
constexpr double kMirrorCyclesPerByte = 0.2;
/// The least share of an op's cycles a mirror must save.
constexpr double kMinMirrorSaving = 0.25;

/// Hashes `op`'s operations into `key` (structure, not values or
/// locations), the generic itself too when `withOp` (its types carry the
/// op's shapes); returns how many were hashed.
static int64_t hashOperations(linalg::GenericOp op, bool withOp, llvm::hash_code &key) {
  int64_t operations = 0;
  op->walk([&](Operation *o) {
    if (!withOp && o == op.getOperation())
      return;
    ++operations;
    key = llvm::hash_combine(
        key, OperationEquivalence::computeHash(o, OperationEquivalence::ignoreHashValue,
                                               OperationEquivalence::ignoreHashValue,
                                               OperationEquivalence::IgnoreLocations));
  });
  return operations;
}

/// Every this-many-th candidate grid is costed first: the best of them
/// that fits bounds the rest, and a candidate whose compute alone takes
/// longer is not costed (see GridSearch::choose).
constexpr size_t kBoundingStride = 8;
/// The odometer's grids costed per op at most (an op is planned several
/// times when its reduction may split): bounds compile time on
/// many-dimensional ops. The state's home and the kFinestGrids finest
/// grids come on top.
constexpr int64_t kMaxCandidatesCosted = 1000;
/// An op's grids with the smallest pieces, over every chunk size, costed
/// besides those (see finestGrids). ResNet-50's plans get better with more
/// of them up to 128 and no further (batch 1, contractions only: 437,063
/// device cycles without them, 432,119 with 16, 425,510 with 128 to 512;
/// every op: 420,568), for about 1.75 times the planner's time.
constexpr int64_t kFinestGrids = 128;
/// The most nodes finestGrids' search visits (a bound on compile time for
/// ops of many long dimensions; ResNet-50's and maxvit_t's need far fewer).
constexpr int64_t kMaxFinestGridNodes = 1000000;
/// The same cap while comparing an op with its reduction splits: the
/// comparison needs each option's rough cost, the chosen one is then
/// planned with the full bound.
constexpr int64_t kMaxCandidatesCostedInTrials = 300;
/// How much dearer (estimated) a reduction split with fewer slices may be
/// and still be chosen over the cheapest. The per-op estimate costs three
/// sample pieces and no broadcasts, so differences of a few percent are
/// within its error; fewer slices are a sure saving: each slice is a whole
/// output-sized partial sum written, exchanged and added, in temporary
/// memory. (On ResNet-50 the whole-program estimate falls too.)
constexpr double kSplitTolerance = 0.03;
/// The most serial steps a reduction is split into (each a compute set).
constexpr int64_t kMaxSerialSteps = 64;

/// Chunk sizes worth trying for a dimension: near-even splits in powers of
/// two and the whole dimension.
std::vector<int64_t> chunkCandidates(int64_t dim, int64_t maxPieces) {
  std::set<int64_t> chunks;
  for (int64_t p = 1; p <= std::min(dim, maxPieces); p *= 2)
    chunks.insert((dim + p - 1) / p);
  for (int64_t p : {3, 5, 6, 7, 12, 24, 48, 96})
    if (p <= std::min(dim, maxPieces))
      chunks.insert((dim + p - 1) / p);
  // Piece counts that divide the tile count (1472 = 64 x 23 on an IPU2): 23
  // or 46 pieces of one dimension times a power of two of others fill every
  // tile, where powers of two alone leave a third of them idle.
  for (int64_t p = maxPieces; p > 1; p /= 2) {
    if (p <= dim)
      chunks.insert((dim + p - 1) / p);
    if (p % 2 != 0)
      break;
  }
  if (dim <= maxPieces)
    chunks.insert(1);
  return {chunks.begin(), chunks.end()};
}

/// One op's search for its plan (Planner::planGeneric runs it): the
/// candidate grids of its output, each costed by the cost model on three
/// sample pieces on every thread the context has, and the best kept. What
/// costing needs of the op and of the planner's state is read once, here;
/// the search changes nothing the planner keeps but its counts (the
/// candidates' unplaced operands take variables of prog_ past the placed
/// ones, gone with each costing).
class GridSearch {
public:
  GridSearch(Planner &planner, Plan &plan);

  // The candidates, costed on every thread the context has: each costing
  // is independent of the others (a few microseconds each, up to a
  // thousand per op), and the best is then chosen in the candidates'
  // order, so the plan is the same on any number of threads.
  struct Candidate {
    std::vector<int64_t> chunks;
    const TileMapping *given = nullptr; ///< a whole mapping instead
    int64_t pieces = 0;
  };
  struct Score {
    bool fits = false;
    int64_t cycles = 0, memory = 0;
    int64_t mirroredBytes = 0; ///< on each tile holding a mirrored piece
  };
  using Scores = std::array<Score, 2>;
  struct Best {
    bool valid = false;
    Score score;
    const Candidate *candidate = nullptr;
    bool mirror = false; ///< with the candidate's mirrorable weights mirrored
  };

  /// Lists the candidates and costs them: the state's home, the odometer's
  /// grids and the finest grids, then, when none of those fits and the
  /// odometer stopped at `cap`, the grids needing the least memory.
  void run(int64_t cap);
  /// The best candidate costed (not `valid` when none could be).
  const Best &best() const { return best_; }
  /// The mapping of `candidate`.
  void mappingOf(const Candidate &candidate, TileMapping &m) const {
    if (candidate.given)
      m = *candidate.given;
    else
      gridOf(candidate.chunks, m);
  }
  /// Per input: a constant weight the op may mirror (Planner::isMirrorable).
  const std::vector<bool> &mirrorableWeights() const { return mirrorable; }

private:
  // One costing thread's scratch, kept across its candidates (allocating
  // it for each was a third of the planner's time), and the variables
  // (of prog_, numbered from `firstTentative`) its candidates' unplaced
  // leaves take: each thread writes only its own.
  struct Costing {
    TileMapping m;
    std::vector<int64_t> inVars, mirroredVars, perDim, first, central, last;
    std::map<std::vector<int64_t>, runtime::RemoteRead> viewReads;
    size_t firstTentative = 0, firstMirrored = 0;
  };

  // What the search reads of the planner, under the names the planner's
  // own code gives them (the costing moved here from it).
  Planner &planner_;
  MachineProgram &prog_;
  const target::IPUTarget &target_;
  const target::CostModel &cost_;
  const int64_t numTiles_, budget_, windowFirst_, windowTiles_, unplacedLeafBytes_;
  const std::vector<int64_t> &liveOnTile_;
  int64_t variableOf(Value v) const { return planner_.variableOf(v); }
  int64_t unplannedCodeOn(int64_t tile) const { return planner_.unplannedCodeOn(tile); }

  // The op: its output, operands and what costing a piece reads of them.
  Plan &plan;
  std::vector<int64_t> shape;
  int64_t rank;
  int64_t outElementBytes, outBytes;
  /// Candidate chunks per dimension of the output.
  std::vector<std::vector<int64_t>> cands;
  size_t placedVariables;
  std::optional<TileMapping> home;
  int64_t copyBack;
  target::VertexWork opWork;
  std::vector<int64_t> inputBytes;
  std::vector<bool> mirrorable;
  int64_t unplacedInputs = 0, mirrorableInputs = 0;
  int64_t mirrorCap = 0;

  /// The lists costed (`best_` points into them).
  std::vector<Candidate> listed_, leastMemory_;
  Best best_;

  /// The pieces of the grid of `grid`'s chunks.
  int64_t piecesOf(const std::vector<int64_t> &grid) const;
  // The grid of `chunks` in the window, row-major over the tiles.
  void gridOf(const std::vector<int64_t> &chunks, TileMapping &m) const;
  /// What a region of `var` costs tile `tile` to read. A general view's
  /// answers are kept in `c`, by (variable, tile, region): candidates that
  /// differ only in loops an input does not read ask again for the same
  /// region, and answering walks the view's runs. Only for variables placed
  /// before this op (the candidates' tentative leaves use their numbers
  /// with other mappings).
  runtime::RemoteRead remoteRead(Costing &c, int64_t var, const Box &region, int64_t tile);
  // The pieces a candidate is costed by: the first, a central and the last
  // (edges and holders differ). The central one is central in every
  // dimension: an operand placed with the pieces of index 0 along some
  // dimensions (a weight block, on the first of the tiles sharing it) is
  // local to the first piece, and to the middle one in row-major order,
  // but remote for most vertices.
  void findCostedPieces(Costing &c, const TileMapping &m) const;
  // What a vertex computing `piece` fills before it reads: its init's
  // constant, unless that starts its accumulators.
  int64_t fillBytesOf(const Box &piece) const;
  // No score of the candidate mapped by `m`, its costed pieces in `c`, has
  // fewer cycles: its slowest costed piece's compute, no padding read (a
  // score adds the padding's writes, the exchange, a state's copy back and
  // mirrors' price, none negative). It takes no operand's mapping or
  // region, which costing mostly is.
  int64_t computeBound(const Costing &c, const TileMapping &m) const;
  static constexpr int64_t kNoBound = std::numeric_limits<int64_t>::max();
  // Costs one candidate as it is (its first score) and with its mirrorable
  // weights mirrored (its second; not fitting when none is, or when the
  // copies would pass the cap): the two differ only in those weights'
  // reads and resident pieces, and share the rest of the costing. None
  // when its compute alone passes `bound`.
  std::optional<Scores> evaluate(Costing &c, const Candidate &candidate, int64_t bound);
  static constexpr size_t kMinCandidatesPerThread = 32, kCandidatesPerClaim = 8;
  // Costs the candidates numbered `which`, the threads taking runs of a
  // few consecutive ones in turn (consecutive candidates, differing in the
  // last dimensions the odometer turns, read the same regions of most
  // operands: each thread's view reads keep them), except those whose
  // compute alone passes `bound`: sets `costed` for the others. The bound
  // tightens as candidates that fit are costed (the fewest cycles of
  // those), on every thread. Each thread's unplaced leaves take variables
  // of their own, gone with the costing.
  void costAll(const std::vector<Candidate> &candidates, ArrayRef<size_t> which,
               int64_t initialBound, std::vector<Scores> &scores, std::vector<char> &costed);
  /// A score's cycles with its mirrored copies' memory priced in cycles
  /// (kMirrorCyclesPerByte: a Lagrangian price on memory), so that a plan
  /// pays for its memory only where it saves more.
  int64_t priced(const Score &score) const;
  /// Costs `candidates` (every one that could be chosen) and keeps the
  /// better of the best so far and theirs, taking each candidate in turn:
  /// one that fits, then the fewest priced cycles, then the fewest pieces;
  /// when none fits, the least memory.
  void choose(const std::vector<Candidate> &candidates);
};

GridSearch::GridSearch(Planner &planner, Plan &plan)
    : planner_(planner), prog_(planner.prog_), target_(planner.target_), cost_(planner.cost_),
      numTiles_(planner.numTiles_), budget_(planner.budget_),
      windowFirst_(planner.windowFirst_), windowTiles_(planner.windowTiles_),
      unplacedLeafBytes_(planner.unplacedLeafBytes_), liveOnTile_(planner.liveOnTile_),
      plan(plan) {
  auto outType = cast<RankedTensorType>(plan.op->getResult(0).getType());
  shape.assign(outType.getShape().begin(), outType.getShape().end());
  rank = shape.size();
  outElementBytes = elementBytes(outType);
  outBytes = outElementBytes;
  if (plan.epilogueWritesOwnResult())
    outBytes += elementBytes(plan.epilogue->getResult(0).getType());

  // Candidate chunks per dimension, including the chunks of inputs that the
  // output can follow so elementwise chains stay on their tiles.
  cands.resize(rank);
  for (int64_t j = 0; j < rank; ++j) {
    cands[j] = chunkCandidates(shape[j], windowTiles_);
    for (const Input &in : plan.inputs) {
      int64_t var = variableOf(in.value);
      if (var < 0 || prog_.variables[var].base >= 0 || in.access.full)
        continue;
      const TileMapping &m = prog_.variables[var].mapping;
      for (int64_t k = 0; k < m.rank(); ++k)
        if (in.access.coeffs[k][plan.outputLoops[j]] == 1 &&
            m.shape[k] == shape[j])
          cands[j].push_back(m.chunks[k]);
    }
    llvm::sort(cands[j]);
    cands[j].erase(std::unique(cands[j].begin(), cands[j].end()),
                   cands[j].end());
  }
  // The variables placed before this op; the candidates' tentative leaves
  // take the numbers after them.
  placedVariables = prog_.variables.size();
  // A state's update computed off its state's tiles is copied there after
  // the step (ProgramCost's state update): that copy counts against every
  // mapping but the state's own, which is a candidate too.
  home = planner.stateHomeOf(plan.op, shape);
  copyBack =
      home ? cost_.tileExchangeCycles(home->maxPieceElements() * outElementBytes, 1) : 0;
  // What costing a piece reads of the ops, read once.
  opWork = opVertexWork(plan, cost_);
  for (const Input &in : plan.inputs) {
    inputBytes.push_back(elementBytes(in.value.getType()));
    unplacedInputs += variableOf(in.value) < 0;
    mirrorable.push_back(planner.isMirrorable(in));
    mirrorableInputs += mirrorable.back();
  }
  // What mirrored weights may still add on the fullest tile of the window,
  // and what one op's copies may take of it.
  if (llvm::is_contained(mirrorable, true)) {
    auto window = planner.weightBytesOnTile_.begin() + windowFirst_;
    int64_t fullest = *std::max_element(window, window + windowTiles_);
    int64_t weightRoom = static_cast<int64_t>(kMaxMirroredWeightShareOfBudget * budget_);
    int64_t mirrorRoom = weightRoom - fullest - unplacedLeafBytes_ / numTiles_;
    mirrorCap = std::min(mirrorRoom, static_cast<int64_t>(kMaxMirrorShareOfRoom * weightRoom));
  }
}

int64_t GridSearch::piecesOf(const std::vector<int64_t> &grid) const {
  int64_t pieces = 1;
  for (int64_t j = 0; j < rank; ++j)
    pieces *= (shape[j] + grid[j] - 1) / grid[j];
  return pieces;
}

void GridSearch::gridOf(const std::vector<int64_t> &chunks, TileMapping &m) const {
  m.shape = shape;
  m.chunks = chunks;
  m.firstTile = windowFirst_;
  m.tileStrides.assign(rank, 0);
  int64_t stride = 1;
  for (int64_t j = rank - 1; j >= 0; --j) {
    int64_t n = (shape[j] + chunks[j] - 1) / chunks[j];
    m.tileStrides[j] = n > 1 ? stride : 0;
    stride *= n;
  }
}

runtime::RemoteRead GridSearch::remoteRead(Costing &c, int64_t var, const Box &region,
                                           int64_t tile) {
  const runtime::Variable &v = prog_.variables[var];
  if (static_cast<size_t>(var) >= placedVariables || v.base < 0 || v.isPadded())
    return runtime::remoteRead(prog_, var, region, tile);
  std::vector<int64_t> key{var, tile};
  key.insert(key.end(), region.offsets.begin(), region.offsets.end());
  key.insert(key.end(), region.sizes.begin(), region.sizes.end());
  auto [it, inserted] = c.viewReads.try_emplace(std::move(key));
  if (inserted)
    it->second = runtime::remoteRead(prog_, var, region, tile);
  return it->second;
}

void GridSearch::findCostedPieces(Costing &c, const TileMapping &m) const {
  c.perDim.resize(rank);
  c.first.assign(rank, 0);
  c.central.resize(rank);
  c.last.resize(rank);
  for (int64_t j = 0; j < rank; ++j) {
    c.perDim[j] = m.piecesAlong(j);
    c.central[j] = c.perDim[j] / 2;
    c.last[j] = c.perDim[j] - 1;
  }
}

int64_t GridSearch::fillBytesOf(const Box &piece) const {
  return plan.fillsInit() && !plan.fillFolded ? piece.numElements() * outElementBytes : 0;
}

int64_t GridSearch::computeBound(const Costing &c, const TileMapping &m) const {
  int64_t worst = 0;
  for (const std::vector<int64_t> *idx : {&c.first, &c.central, &c.last}) {
    Box piece = m.pieceBox(*idx);
    worst = std::max(worst, vertexCycles(plan, opWork, loopsOfPiece(plan, piece), cost_,
                                         fillBytesOf(piece)));
  }
  return worst;
}

std::optional<GridSearch::Scores> GridSearch::evaluate(Costing &c, const Candidate &candidate,
                                                       int64_t bound) {
  TileMapping &m = c.m;
  mappingOf(candidate, m);
  findCostedPieces(c, m);
  if (bound != kNoBound && computeBound(c, m) > bound)
    return std::nullopt;
  // Unplaced leaves take the mapping they would get with this plan, and
  // mirrorable weights their mirrored one too, in variables of their own.
  size_t tentative = c.firstTentative, mirrorSlot = c.firstMirrored;
  c.inVars.clear();
  c.mirroredVars.clear();
  int64_t tentativePieceBytes[2] = {0, 0}, tentativeBytes = 0, mirroredPieceBytes = 0;
  for (auto [in, canMirror] : llvm::zip(plan.inputs, mirrorable)) {
    int64_t var = variableOf(in.value), mirroredVar = var;
    if (var < 0) {
      runtime::Variable &v = prog_.variables[tentative];
      auto t = cast<RankedTensorType>(in.value.getType());
      int64_t bytes = elementBytes(t);
      v.shape.assign(t.getShape().begin(), t.getShape().end());
      auto aligned = planner_.alignedMapping(in.value, in.access, plan, m);
      v.mapping = aligned ? planner_.spreadOverReaders(*aligned, m, bytes)
                          : planner_.linearInWindow(v.shape, bytes);
      v.mapping.shape = v.shape;
      var = mirroredVar = tentative++;
      if (aligned && canMirror && mirrorCap > 0) {
        TileMapping mirrored = Planner::mirroredMapping(*aligned, m);
        if (mirrored.isMirrored()) {
          runtime::Variable &w = prog_.variables[mirrorSlot];
          w.shape = v.shape;
          w.mapping = std::move(mirrored);
          w.mapping.shape = w.shape;
          mirroredVar = mirrorSlot++;
          mirroredPieceBytes += w.mapping.maxPieceElements() * bytes;
        }
      }
      tentativePieceBytes[0] += v.mapping.maxPieceElements() * bytes;
      tentativePieceBytes[1] += prog_.variables[mirroredVar].mapping.maxPieceElements() * bytes;
      if (t.hasStaticShape() && (isa<BlockArgument>(in.value) ||
                                 in.value.getDefiningOp<ml_program::GlobalLoadConstOp>()))
        tentativeBytes += t.getNumElements() * bytes;
    }
    c.inVars.push_back(var);
    c.mirroredVars.push_back(mirroredVar);
  }
  // Mirrored, unless nothing is or the copies would pass the weights'
  // share, or take much of it for one op.
  int variants = mirroredPieceBytes > 0 && mirroredPieceBytes <= mirrorCap ? 2 : 1;
  // A step's exchange phase ends when its busiest tile is done, and so
  // does its compute phase: the step takes the slowest exchange plus the
  // slowest vertex, wherever each is (an edge piece may receive most,
  // a whole one compute longest).
  int64_t worstExchange[2] = {0, 0}, worstCompute[2] = {0, 0}, worstMemory[2] = {0, 0},
          worstTotal[2] = {0, 0};
  for (const std::vector<int64_t> *idx : {&c.first, &c.central, &c.last}) {
    Box piece = m.pieceBox(*idx);
    int64_t tile = m.tileOf(*idx);
    Box loops = loopsOfPiece(plan, piece);
    int64_t received[2] = {0, 0}, regions[2] = {0, 0}, padding[2] = {0, 0},
            memory[2] = {piece.numElements() * outBytes, piece.numElements() * outBytes};
    for (auto [in, var, mirroredVar, bytes] :
         llvm::zip(plan.inputs, c.inVars, c.mirroredVars, inputBytes)) {
      Box region = in.access.region(loops, prog_.variables[var].shape);
      runtime::RemoteRead read = remoteRead(c, var, region, tile);
      for (int k = 0; k < variants; ++k) {
        if (k == 1 && mirroredVar != var)
          read = remoteRead(c, mirroredVar, region, tile);
        if (read.local)
          continue;
        received[k] += read.bytes;
        regions[k] += read.regions;
        padding[k] += read.paddingBytes;
        memory[k] += region.numElements() * bytes;
      }
    }
    // The vertex writes the padding it reads itself, and its init's
    // constant unless that starts its accumulators.
    int64_t fill = fillBytesOf(piece);
    int64_t compute = vertexCycles(plan, opWork, loops, cost_, padding[0] + fill);
    for (int k = 0; k < variants; ++k) {
      // What the tile holds already, and (at most a piece of each) the
      // operands this plan would place.
      int64_t resident =
          liveOnTile_[tile] + tentativePieceBytes[k] +
          std::max<int64_t>(unplacedLeafBytes_ - tentativeBytes, 0) / numTiles_ +
          unplannedCodeOn(tile);
      if (k == 1 && padding[1] != padding[0])
        compute = vertexCycles(plan, opWork, loops, cost_, padding[1] + fill);
      worstExchange[k] = std::max(
          worstExchange[k],
          cost_.exchangePhaseCycles(cost_.tileExchangeCycles(received[k], regions[k])));
      worstCompute[k] = std::max(worstCompute[k], compute);
      worstMemory[k] = std::max(worstMemory[k], memory[k]);
      worstTotal[k] = std::max(worstTotal[k], resident + memory[k]);
    }
  }
  Scores scores;
  scores[1] = Score{false, 0, std::numeric_limits<int64_t>::max(), 0};
  for (int k = 0; k < variants; ++k) {
    Score &score = scores[k];
    score.cycles = worstExchange[k] + worstCompute[k];
    if (home && !(m.chunks == home->chunks && m.tileStrides == home->tileStrides &&
                  m.firstTile == home->firstTile))
      score.cycles += copyBack;
    // Temporaries within the budget (Poplar's availableMemoryProportion),
    // and everything within the tile.
    score.fits = worstMemory[k] <= budget_ && worstTotal[k] <= target_.bytesPerTile;
    score.memory = worstMemory[k];
    score.mirroredBytes = k == 1 ? mirroredPieceBytes : 0;
  }
  return scores;
}

void GridSearch::costAll(const std::vector<Candidate> &candidates, ArrayRef<size_t> which,
                         int64_t initialBound, std::vector<Scores> &scores,
                         std::vector<char> &costed) {
  std::atomic<int64_t> bound{initialBound};
  MLIRContext *ctx = plan.op.getContext();
  size_t threads = 1;
  if (ctx->isMultithreadingEnabled())
    threads = std::clamp<size_t>(which.size() / kMinCandidatesPerThread, 1,
                                 ctx->getNumThreads());
  size_t perThread = unplacedInputs + mirrorableInputs;
  prog_.variables.resize(placedVariables + threads * perThread);
  std::atomic<size_t> next{0};
  auto work = [&](size_t thread) {
    Costing c;
    c.firstTentative = placedVariables + thread * perThread;
    c.firstMirrored = c.firstTentative + unplacedInputs;
    for (size_t i; (i = next.fetch_add(kCandidatesPerClaim)) < which.size();)
      for (size_t k = i; k < std::min(i + kCandidatesPerClaim, which.size()); ++k) {
        if (std::optional<Scores> both =
                evaluate(c, candidates[which[k]], bound.load(std::memory_order_relaxed))) {
          scores[which[k]] = *both;
          costed[which[k]] = true;
          if (int64_t cycles = (*both)[0].cycles; (*both)[0].fits)
            for (int64_t was = bound.load(std::memory_order_relaxed);
                 cycles < was && !bound.compare_exchange_weak(was, cycles);)
              ;
        }
      }
  };
  if (threads == 1) {
    work(0);
  } else {
    // This thread works too, from the start: waiting for pool threads
    // to wake costs about a tenth of a millisecond, some thousands of
    // times per model.
    llvm::ThreadPoolTaskGroup others(ctx->getThreadPool());
    for (size_t thread = 1; thread < threads; ++thread)
      others.async([&work, thread] { work(thread); });
    work(0);
    others.wait();
  }
  prog_.variables.resize(placedVariables);
}

int64_t GridSearch::priced(const Score &score) const {
  return score.cycles + static_cast<int64_t>(kMirrorCyclesPerByte * score.mirroredBytes);
}

void GridSearch::choose(const std::vector<Candidate> &candidates) {
  // Every kBoundingStride-th candidate first (the state's home among
  // them): the fewest cycles of those that fit bound the others, which
  // are costed only when their compute alone does not pass it; the bound
  // tightens as each pass costs more of them. A candidate left out has
  // more cycles, mirrored or not, than one that fits: it could not be
  // chosen, nor lower the least cycles without mirrors below, and one
  // that ties the best is never left out. The choice is the one costing
  // them all makes, on any number of threads.
  std::vector<Scores> scores(candidates.size());
  std::vector<char> costed(candidates.size(), false);
  std::vector<size_t> first, rest;
  for (size_t i = 0; i < candidates.size(); ++i)
    (i % kBoundingStride == 0 ? first : rest).push_back(i);
  costAll(candidates, first, kNoBound, scores, costed);
  int64_t bound = kNoBound;
  for (size_t i : first)
    if (scores[i][0].fits)
      bound = std::min(bound, scores[i][0].cycles);
  costAll(candidates, rest, bound, scores, costed);
  planner_.counts_.costedCandidates += llvm::count(costed, true);
  planner_.counts_.boundedCandidates += llvm::count(costed, false);
  auto better = [&](const Score &score, int64_t pieces) {
    if (!best_.valid)
      return true;
    if (score.fits != best_.score.fits)
      return score.fits;
    if (!score.fits)
      return score.memory < best_.score.memory;
    if (priced(score) != priced(best_.score))
      return priced(score) < priced(best_.score);
    return pieces < best_.candidate->pieces;
  };
  // Mirrors are taken only where they save a good part of the op's
  // cycles: on an op its compute dominates, copies would take memory for
  // little.
  int64_t plainCycles = std::numeric_limits<int64_t>::max();
  for (auto [both, wasCosted] : llvm::zip(scores, costed))
    if (wasCosted && both[0].fits)
      plainCycles = std::min(plainCycles, both[0].cycles);
  for (auto [candidate, both, wasCosted] : llvm::zip(candidates, scores, costed)) {
    if (!wasCosted)
      continue;
    if (better(both[0], candidate.pieces))
      best_ = {true, both[0], &candidate, false};
    if (both[1].fits &&
        both[1].cycles <= (1.0 - kMinMirrorSaving) * static_cast<double>(plainCycles) &&
        better(both[1], candidate.pieces))
      best_ = {true, both[1], &candidate, true};
  }
}

void GridSearch::run(int64_t cap) {
  // The state's home first, then an odometer over the candidate lists,
  // pruned by the tile count.
  if (home)
    listed_.push_back({home->chunks, &*home, home->numPieces()});
  std::vector<int64_t> chunks(rank, 1);
  std::vector<size_t> at(rank, 0);
  int64_t counted = 0;
  bool exhausted = false;
  while (true) {
    for (int64_t j = 0; j < rank; ++j)
      chunks[j] = cands[j][at[j]];
    int64_t pieces = piecesOf(chunks);
    if (pieces <= windowTiles_) {
      ++counted;
      listed_.push_back({chunks, nullptr, pieces});
    }
    int64_t j = rank - 1;
    while (j >= 0 && ++at[j] == cands[j].size())
      at[j--] = 0;
    exhausted = j < 0;
    if (exhausted || counted == cap)
      break;
  }
  // The finest grids over every chunk size join the candidates: the lists
  // above hold few sizes, whose grids leave tiles idle or pieces uneven
  // (1,472 tiles are 64 x 23), and the odometer's order reaches its cap on
  // grids that cut the leading dimensions finest.
  {
    std::set<std::vector<int64_t>> seen;
    for (const Candidate &c : listed_)
      seen.insert(c.chunks);
    for (std::vector<int64_t> &grid :
         finestGrids(shape, windowTiles_, kFinestGrids, kMaxFinestGridNodes))
      if (!seen.count(grid)) {
        int64_t pieces = piecesOf(grid);
        listed_.push_back({std::move(grid), nullptr, pieces});
      }
  }
  choose(listed_);
  if (!best_.score.fits && !exhausted) {
    // The odometer's order reached its cap before any candidate fit (the
    // ones it costs first cut the leading dimensions finest: an embedding
    // at batch 48 never got to a plan whose table columns fit). Cost the
    // candidates needing the least memory instead -- each one's output
    // piece and input regions, whether or not they are local, an upper
    // bound that takes no exchange to compute.
    std::vector<std::pair<int64_t, std::vector<int64_t>>> byMemory;
    std::fill(at.begin(), at.end(), 0);
    constexpr int64_t kMaxEnumerated = 200000;
    for (int64_t seen = 0; seen < kMaxEnumerated; ++seen) {
      for (int64_t j = 0; j < rank; ++j)
        chunks[j] = cands[j][at[j]];
      if (piecesOf(chunks) <= windowTiles_) {
        Box loops;
        loops.offsets.assign(plan.loopRanges.size(), 0);
        loops.sizes.assign(plan.loopRanges.begin(), plan.loopRanges.end());
        int64_t bytes = outBytes;
        for (int64_t j = 0; j < rank; ++j) {
          loops.sizes[plan.outputLoops[j]] = std::min(chunks[j], shape[j]);
          bytes *= std::min(chunks[j], shape[j]);
        }
        for (const Input &in : plan.inputs) {
          auto type = cast<RankedTensorType>(in.value.getType());
          bytes += in.access.region(loops, type.getShape()).numElements() * elementBytes(type);
        }
        byMemory.emplace_back(bytes, chunks);
      }
      int64_t j = rank - 1;
      while (j >= 0 && ++at[j] == cands[j].size())
        at[j--] = 0;
      if (j < 0)
        break;
    }
    llvm::stable_sort(byMemory, [](const auto &a, const auto &b) { return a.first < b.first; });
    for (int64_t i = 0; i < std::min<int64_t>(cap, byMemory.size()); ++i) {
      int64_t pieces = piecesOf(byMemory[i].second);
      leastMemory_.push_back({std::move(byMemory[i].second), nullptr, pieces});
    }
    choose(leastMemory_);
  }
}

LogicalResult Planner::planGeneric(Plan &plan) {
  for (const Input &in : plan.inputs)
    if (!isUnplacedLeaf(in.value) && variableOf(in.value) < 0)
      return plan.op.emitError(
          "ipu-plan-tiles: an operand was not placed before "
          "its use (internal error)");
  // No grid helps a table too large for every tile: said before searching.
  if (failed(checkDataDependentReads(plan)))
    return failure();
  GridSearch search(*this, plan);
  search.run(inTrial_ ? kMaxCandidatesCostedInTrials : kMaxCandidatesCosted);
  const GridSearch::Best &best = search.best();
  if (!best.valid)
    return plan.op.emitError("ipu-plan-tiles: no way to split this op over ")
         << windowTiles_ << " tiles";
  search.mappingOf(*best.candidate, plan.mapping);
  plan.cycles = best.score.cycles;
  plan.fits = best.score.fits;
  plan.memory = best.score.memory;
  holdKernelCode(plan);
  placeOperands(plan, search.mirrorableWeights(), best.mirror);
  return success();
}

LogicalResult Planner::checkDataDependentReads(Plan &plan) {
  // A tensor the body reads at data-dependent places (a gather's table)
  // is held whole along those dimensions by every vertex's tile, placed
  // there or received: when that is more than a tile holds, no plan can
  // work, and the allocator's report would blame whichever tile
  // overflowed first. Say what is too big.
  for (const Input &in : plan.inputs) {
    if (!in.captured || in.access.full || in.access.extents.empty())
      continue;
    auto type = cast<RankedTensorType>(in.value.getType());
    int64_t bytes = elementBytes(type), wholeDims = 0, whole = 1;
    for (int64_t e : in.access.extents) {
      bytes *= e;
      if (e > 1) {
        ++wholeDims;
        whole = e;
      }
    }
    if (bytes <= target_.bytesPerTile)
      continue;
    std::string name = ipu::locationName(plan.op.getLoc(), "");
    InFlightDiagnostic error = plan.op.emitError("ipu-plan-tiles: ")
                               << (name.empty() ? "the op" : "'" + name + "'") << " reads "
                               << type << " at data-dependent places (a gather's table): "
                               << "every vertex's tile must hold " << bytes
                               << " bytes of it, more than a tile's "
                               << target_.bytesPerTile << " bytes";
    if (wholeDims == 1)
      error << ", and no split of the table's " << whole
            << " rows into blocks over the tiles fits either (the table is "
            << type.getNumElements() * elementBytes(type) << " bytes; the "
            << windowTiles_ << " tiles of its IPU hold " << windowTiles_ * target_.bytesPerTile
            << "): use more IPUs (--num-ipus) or a smaller table";
    else
      error << "; a table read at data-dependent places along several dimensions is "
               "not split by rows, so one of its slices must fit a tile";
    return error;
  }
  return success();
}

void Planner::holdKernelCode(Plan &plan) {
  // Its vertices' code stays on every tile that runs it, once per kernel:
  // a kernel like one planned before (the same body, epilogue and piece
  // shape; ipu-map-tiles shares those) adds nothing on the tiles that hold
  // it already.
  // A shape-generic kernel is its body, indexing maps, operands' element
  // types and ranks and its fill, whatever the op's shapes.
  bool generic = runsShapeGeneric(plan);
  llvm::hash_code key =
      generic ? llvm::hash_combine(plan.op.getIndexingMaps().getAsOpaquePointer(),
                                   plan.initFill.getAsOpaquePointer())
              : llvm::hash_combine_range(plan.mapping.chunks.begin(),
                                         plan.mapping.chunks.end());
  if (generic)
    for (Type t : plan.op->getOperandTypes())
      if (auto ranked = dyn_cast<RankedTensorType>(t))
        key = llvm::hash_combine(key, ranked.getElementType().getAsOpaquePointer(),
                                 ranked.getRank());
  for (linalg::GenericOp op : {plan.op, plan.epilogue})
    if (op)
      hashOperations(op, /*withOp=*/!generic, key);
  llvm::BitVector &tiles = codeTiles_[static_cast<size_t>(key)];
  if (tiles.empty())
    tiles.resize(numTiles_);
  int64_t bytes = vertexCodeBytes(plan, cost_);
  plan.mapping.forEachPieceElements([&](int64_t tile, int64_t) {
    if (!tiles.test(tile)) {
      tiles.set(tile);
      liveOnTile_[tile] += bytes;
    }
  });
}

void Planner::placeOperands(Plan &plan, const std::vector<bool> &mirrorable, bool mirror) {
  for (auto [in, canMirror] : llvm::zip(plan.inputs, mirrorable)) {
    if (variableOf(in.value) >= 0)
      continue;
    Value leaf = deferredViews_.lookup(in.value);
    if (!leaf)
      leaf = in.value;
    auto aligned = alignedMapping(in.value, in.access, plan, plan.mapping);
    // Mirrored as costed: a weight one block reads all of is placed as it
    // would be unmirrored.
    if (TileMapping mirrored;
        aligned && canMirror && mirror &&
        (mirrored = mirroredMapping(*aligned, plan.mapping)).isMirrored()) {
      int64_t bytes = elementBytes(in.value.getType());
      mirrored.forEachPieceElements([&](int64_t tile, int64_t elements) {
        weightBytesOnTile_[tile] += elements * bytes;
      });
      placeAligned(in.value, mirrored);
      continue;
    }
    if (!aligned) {
      placeLinear(in.value);
      continue;
    }
    // A weight loaded twice keeps the placement of its first load.
    if (auto load = leaf.getDefiningOp<ml_program::GlobalLoadConstOp>();
        load && globalVars_.count(load.getGlobal().getLeafReference())) {
      bind(leaf, globalVars_[load.getGlobal().getLeafReference()]);
      if (leaf != in.value)
        addView(in.value, leaf);
      continue;
    }
    TileMapping placed =
        spreadOverReaders(*aligned, plan.mapping, elementBytes(in.value.getType()));
    if (leaf.getDefiningOp<ml_program::GlobalLoadConstOp>())
      placed.firstTile +=
          weightOffset(plan.mapping, placed, elementBytes(in.value.getType()));
    placeAligned(in.value, placed);
  }
}

int64_t Planner::weightOffset(const TileMapping &out, const TileMapping &weight,
                            int64_t elementBytes) {
  // A weight follows some of the output's dims (a matmul's columns); its
  // pieces can sit on the output pieces of any one block of the other dims
  // (rows), each as near to the pieces that read it. Always taking block 0
  // puts every layer's weights on the same first tiles (a transformer's
  // overflow tile 0 while most tiles hold none): take the block whose tiles
  // hold the fewest weight bytes so far.
  std::vector<int64_t> perDim = out.piecesPerDim();
  std::vector<int64_t> blockDims;
  int64_t blocks = 1;
  for (size_t j = 0; j < perDim.size(); ++j)
    if (out.tileStrides[j] > 0 && perDim[j] > 1 &&
      !llvm::is_contained(weight.tileStrides, out.tileStrides[j])) {
    blockDims.push_back(j);
    blocks *= perDim[j];
    }
  std::vector<std::pair<int64_t, int64_t>> pieces; // tile, bytes
  int64_t lastTile = 0;
  weight.forEachPieceElements([&](int64_t tile, int64_t elements) {
    pieces.push_back({tile, elements * elementBytes});
    lastTile = std::max(lastTile, tile);
  });
  auto offsetOf = [&](int64_t block) {
    int64_t offset = 0;
    for (auto it = blockDims.rbegin(); it != blockDims.rend(); ++it) {
    offset += (block % perDim[*it]) * out.tileStrides[*it];
    block /= perDim[*it];
    }
    return offset;
  };
  // Try at most 64 blocks, spread over all of them.
  constexpr int64_t kMaxBlocksTried = 64;
  int64_t step = std::max<int64_t>(1, blocks / kMaxBlocksTried);
  int64_t bestOffset = 0, bestLoad = INT64_MAX;
  for (int64_t block = 0; block < blocks; block += step) {
    // A weight spread over some blocks (spreadOverReaders) spans more
    // tiles than one block's: only offsets that keep it on the chip.
    int64_t offset = offsetOf(block), load = 0;
    if (lastTile + offset >= windowFirst_ + windowTiles_)
      continue;
    for (auto [tile, bytes] : pieces)
      load = std::max(load, weightBytesOnTile_[tile + offset] + bytes);
    if (load < bestLoad) {
      bestLoad = load;
      bestOffset = offset;
    }
  }
  for (auto [tile, bytes] : pieces)
    weightBytesOnTile_[tile + bestOffset] += bytes;
  return bestOffset;
}

LogicalResult Planner::planOp(linalg::GenericOp generic, linalg::GenericOp resultOf) {
  Plan plan;
  if (failed(describe(generic, plan)))
    return failure();
  if (generic->getNumResults() == 1)
    std::tie(plan.epilogue, plan.epilogueReshape) =
        epilogueOf(generic, (resultOf ? resultOf : generic)->getResult(0));
  if (plan.epilogue &&
      failed(addEpilogueInputs(generic, (resultOf ? resultOf : generic)->getResult(0), plan,
                               [&](Value v) { return variableOf(v) >= 0 || isUnplacedLeaf(v); })))
    plan.epilogue = {}, plan.epilogueReshape = nullptr;
  // A producer whose only use is the init of a later generic takes that
  // generic's mapping and is updated in place by it.
  if (generic->getNumResults() == 1 && generic->hasOneUse()) {
    auto user = dyn_cast<linalg::GenericOp>(*generic->getUsers().begin());
    if (user && user->getNumResults() == 1 &&
        user.getDpsInitOperand(0)->get() == generic->getResult(0))
      plan.isInitProducer = true;
  }
  // This op's own init, if computed by a deferred producer (which may
  // itself be deferred: a reduction split into serial steps is a chain of
  // them, each updating the one before in place).
  if (generic.getNumDpsInits() == 1) {
    Value init = generic.getDpsInitOperand(0)->get();
    if (auto producer = init.getDefiningOp<linalg::GenericOp>();
        producer && planOf_.count(producer) &&
        plans_[planOf_[producer]].isInitProducer) {
      plan.initProducer = producer;
      if (std::optional<arith::ConstantOp> cst = constantFillValue(producer)) {
        plan.initFill = cst->getValue();
        plan.fillFolded = codegen::foldsFillIntoAccumulators(generic);
      }
    }
  }
  if (!plan.isInitProducer) {
    if (plan.readsInit && !plan.initProducer) {
      // Read the init like any other input, through the output map.
      for (OpOperand &o : generic.getDpsInitsMutable()) {
        Input input;
        input.value = o.get();
        input.map = generic.getMatchingIndexingMap(&o);
        input.access = toAccessMap(input.map);
        if (variableOf(input.value) < 0 && !isUnplacedLeaf(input.value))
          return generic.emitError("ipu-plan-tiles: an init that is not placed");
        plan.inputs.push_back(input);
      }
    }
    if (failed(planGeneric(plan)))
      return failure();
    if (plan.initProducer) {
      // The chain of deferred producers, this op's first: they all take
      // its mapping and share one variable, the first producer's result.
      SmallVector<linalg::GenericOp> chain{plan.initProducer};
      while (linalg::GenericOp next = plans_[planOf_[chain.back()]].initProducer)
        chain.push_back(next);
      int64_t var = addVariable(chain.back()->getResult(0), plan.mapping);
      bind(generic->getResult(0), var);
      for (linalg::GenericOp op : chain) {
        Plan &producer = plans_[planOf_[op]];
        mappingUndo_.emplace_back(planOf_[op], producer.mapping);
        producer.mapping = plan.mapping;
        bind(op->getResult(0), var);
        // The producer's inputs were waiting for this placement.
        for (const Input &in : producer.inputs)
          if (variableOf(in.value) < 0) {
            if (auto aligned = alignedMapping(in.value, in.access, producer,
                                              producer.mapping))
              placeAligned(in.value,
                           spreadOverReaders(*aligned, producer.mapping,
                                             elementBytes(in.value.getType())));
            else
              placeLinear(in.value);
          }
        // Its step runs with this mapping (a serial split's earlier steps
        // receive slices the last one may hold in place).
        if (!inTrial_)
          noteAssumedMemory(&producer);
      }
    } else {
      for (Value r : generic->getResults())
        addVariable(r, plan.mapping);
    }
    // The op this one finishes (a split's last step) has the readers.
    if (resultOf)
      extendLife(variableOf(generic->getResult(0)), lastUseOf(resultOf->getResult(0)));
    // The epilogue updates the op's result in place: one variable (seen
    // through the reshape, a view of it); or it writes its own, with the
    // same pieces.
    if (plan.epilogueWritesOwnResult()) {
      Value own = plan.epilogue->getResult(0);
      const TileMapping &sums = prog_.variables[variableOf(generic->getResult(0))].mapping;
      addVariable(own, mappingThroughUnitDims(
                           sums, cast<RankedTensorType>(own.getType()).getShape()));
      if (plan.epilogueReshape)
        addView(plan.epilogueReshape->getResult(0), generic->getResult(0));
    } else if (plan.epilogue) {
      if (plan.epilogueReshape) {
        addView(plan.epilogueReshape->getResult(0), generic->getResult(0));
        addView(plan.epilogue->getResult(0), generic->getResult(0));
      } else {
        bind(plan.epilogue->getResult(0), variableOf(generic->getResult(0)));
      }
    }
    if (plan.epilogue && !inTrial_) {
      absorbed_.insert(plan.epilogue);
      releaseCode(plan.epilogue);
      if (plan.epilogueReshape)
        absorbed_.insert(plan.epilogueReshape);
    }
  }
  if (!inTrial_ && !plan.isInitProducer && !plan.isEmpty)
    noteAssumedMemory(&plan);
  planOf_[generic] = plans_.size();
  plans_.push_back(std::move(plan));
  return success();
}

void Planner::noteAssumedMemory(const Plan *plan) {
  if (assumedOnTile_.empty())
    return;
  std::vector<int64_t> onTile = liveOnTile_;
  if (plan) {
    // The receive buffers: each vertex's regions of the operands it does
    // not hold, as the allocator gives them (it reads the rest in place).
    plan->mapping.forEachPiece([&](int64_t tile, const Box &piece) {
      Box loops = loopsOfPiece(*plan, piece);
      for (const Input &in : plan->inputs) {
        int64_t var = variableOf(in.value);
        if (var < 0)
          continue;
        Box region = in.access.region(loops, prog_.variables[var].shape);
        if (!runtime::isLocalPiece(prog_, var, region, tile))
          onTile[tile] += region.numElements() * elementBytes(in.value.getType());
      }
    });
  }
  int64_t share = std::max<int64_t>(unplacedLeafBytes_, 0) / numTiles_;
  for (int64_t tile = 0; tile < numTiles_; ++tile)
    assumedOnTile_[tile] =
        std::max(assumedOnTile_[tile], onTile[tile] + share + unplannedCodeOn(tile));
}

/// Operations an absorbed epilogue typically adds to its producer's kernel
/// (a residual add and a Relu, their generic and yield).
constexpr int64_t kEpilogueOperations = 4;

void Planner::reserveCode(ArrayRef<Operation *> ops) {
  // Kernels are generic over shapes: one per body and indexing maps (a
  // convolution's strides are in its maps), whatever the op's shapes, on
  // each IPU that runs it. An op runs on the IPU it is placed on, or the
  // one of the op before it (as enterWindowOf moves the window).
  unplannedCodeOnIPU_.assign(target_.numIPUs, 0);
  DenseSet<std::pair<int64_t, llvm::hash_code>> kinds;
  int64_t ipu = -1;
  auto reserve = [&](Operation *op, llvm::hash_code kind, int64_t bytes) {
    if (kinds.insert({ipu, kind}).second) {
      reservedCode_[op] = {ipu, reservedCode_.lookup(op).bytes + bytes};
      addCodeReserve(ipu, bytes);
    }
  };
  for (Operation *op : ops) {
    if (std::optional<int64_t> placed = graph::placedIpu(op);
        placed && *placed >= 0 && *placed < target_.numIPUs)
      ipu = *placed;
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic)
      continue;
    llvm::hash_code kind = llvm::hash_combine(generic.getIndexingMaps().getAsOpaquePointer(),
                                              generic.getIteratorTypes().getAsOpaquePointer());
    // The generic counts as an operation, as vertexCodeBytes counts it.
    int64_t operations = 1 + hashOperations(generic, /*withOp=*/false, kind);
    int64_t loops = generic.getNumLoops();
    if (generic.getNumReductionLoops() == 0) {
      reserve(op, kind, cost_.vertexCodeBytes(loops, operations));
      continue;
    }
    // A reduction may be split: over the tiles, a kernel with a loop more
    // for the partials and one combining them; or serially, the steps'
    // kernel and the last step's with the epilogue. Two kernels with a
    // loop more, each with an epilogue's few operations, cover both.
    reserve(op, kind, 2 * cost_.vertexCodeBytes(loops + 1, operations + kEpilogueOperations));
  }
}

bool Planner::isUpdatedState(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &main_.front())
    return false;
  auto state = main_.getArgAttrOfType<FlatSymbolRefAttr>(arg.getArgNumber(), graph::kStateAttrName);
  if (!state)
    return false;
  for (unsigned i = 0; i < main_.getNumResults(); ++i)
    if (main_.getResultAttrOfType<FlatSymbolRefAttr>(i, graph::kStateUpdateAttrName) == state)
      return true;
  return false;
}

std::optional<TileMapping> Planner::stateHomeOf(linalg::GenericOp op,
                                               ArrayRef<int64_t> shape) {
  if (op->getNumResults() != 1)
    return std::nullopt;
  Operation *ret = main_.front().getTerminator();
  for (OpOperand &use : op->getResult(0).getUses()) {
    if (use.getOwner() != ret)
      continue;
    auto state = main_.getResultAttrOfType<FlatSymbolRefAttr>(use.getOperandNumber(),
                                                              graph::kStateUpdateAttrName);
    if (!state)
      continue;
    for (BlockArgument arg : main_.getArguments()) {
      if (main_.getArgAttrOfType<FlatSymbolRefAttr>(arg.getArgNumber(), graph::kStateAttrName) != state)
        continue;
      int64_t var = variableOf(arg);
      if (var < 0 || prog_.variables[var].base >= 0)
        return std::nullopt;
      // A copy: costing candidates adds variables (and may move them).
      TileMapping m = prog_.variables[var].mapping;
      bool inWindow = m.numPieces() <= windowTiles_;
      m.forEachPieceElements([&](int64_t tile, int64_t) {
        inWindow &= tile >= windowFirst_ && tile < windowFirst_ + windowTiles_;
      });
      if (!inWindow || m.shape != std::vector<int64_t>(shape.begin(), shape.end()))
        return std::nullopt;
      return m;
    }
  }
  return std::nullopt;
}

std::optional<LogicalResult> Planner::planGatherByRows(linalg::GenericOp op) {
  // The table: a captured input read whole along one dimension (its rows,
  // at data-dependent places), the largest such.
  Plan described;
  {
    // planOp reports an op it cannot describe.
    ScopedDiagnosticHandler quiet(op.getContext(), [](Diagnostic &) { return success(); });
    if (failed(describe(op, described)))
      return std::nullopt;
  }
  Value table;
  unsigned dim = 0;
  int64_t columnBytes = 0;
  for (const Input &in : described.inputs) {
    if (!in.captured || in.access.full || in.access.extents.empty())
      continue;
    auto type = cast<RankedTensorType>(in.value.getType());
    SmallVector<unsigned> whole;
    for (auto [k, e] : llvm::enumerate(in.access.extents))
      if (e > 1 && llvm::all_of(in.access.coeffs[k], [](int64_t c) { return c == 0; }))
        whole.push_back(k);
    int64_t bytes = whole.size() == 1 ? type.getDimSize(whole[0]) * elementBytes(type) : 0;
    if (bytes > columnBytes) {
      table = in.value;
      dim = whole[0];
      columnBytes = bytes;
    }
  }
  // A table the step updates is read whole (the optimizer's update, the
  // gradient's scatter-add) every step: held in whole columns, on as many
  // tiles as it has columns (BERT's 128-wide tokens on 128 tiles, each
  // 122 KB), the update's exchange and memory pile up there. Spread it
  // over the window in row blocks instead, as a weight is.
  if (!table)
    return std::nullopt;
  auto tableType = cast<RankedTensorType>(table.getType());
  int64_t rows = tableType.getDimSize(dim);
  // A column of a kilobyte or less updates in a few hundred cycles, less
  // than the combining step a split adds to every lookup (BERT's 2-row
  // segment table stays whole).
  constexpr int64_t kMinSpreadColumnBytes = 1024;
  bool spread = rows >= 2 && columnBytes > kMinSpreadColumnBytes && isUpdatedState(table);
  // A column that fits the budget is read whole: no split to weigh.
  if (!spread && columnBytes <= budget_)
    return std::nullopt;
  Snapshot before = snapshot();
  inTrial_ = true;
  // The table is a variable, not a temporary: a column over the budget
  // but within a tile stays whole where the plan placing it there fits
  // (no partials to combine).
  if (!spread && columnBytes <= target_.bytesPerTile) {
    bool fits;
    {
      ScopedDiagnosticHandler quiet(op.getContext(), [](Diagnostic &) { return success(); });
      // An init producer is planned with its user, not here: nothing to
      // check, so no shortcut.
      fits = succeeded(planOp(op)) && !plans_.back().isInitProducer && plans_.back().fits;
    }
    restore(before);
    if (fits) {
      inTrial_ = false;
      return std::nullopt;
    }
  }
  // Few blocks of rows (each block is an output-sized partial to
  // combine): counts up to 8, then a quarter more each time (2, 3, ... 8,
  // 10, 13, 17, ...), not only powers of two -- 250,000 rows of 768 take 5
  // blocks on an ipu2, where doubling went to 8. The fewest that fit
  // and the next two are costed (a block count that divides the columns
  // over the tiles better may be cheaper); the cheapest is taken.
  //
  // A table spread for its update also tries the counts that fill the
  // window with blocks of 1, 2, ... 16 columns (BERT's 128 columns: 11
  // blocks of one column on 1,408 tiles), and takes, of the counts leaving
  // no tile more than a tenth over its even share of the table (the
  // update's time and memory follow the largest piece, times the table's
  // gradient and optimizer state: BERT-base's table with Adam did not fit
  // at a quarter over), the cheapest lookup; else the smallest largest
  // piece. (The smallest piece is not the aim: 137 blocks of BERT-base's
  // tokens make every lookup combine 137 partials.)
  int64_t columns = tableType.getNumElements() / rows;
  int64_t evenShare = (tableType.getNumElements() + windowTiles_ - 1) / windowTiles_;
  // (A piece of 0: the table was not placed, nothing known.)
  auto balanced = [&](int64_t piece) { return piece > 0 && 10 * piece <= 11 * evenShare; };
  std::vector<int64_t> counts;
  for (int64_t blocks = 2; blocks <= std::min(rows, windowTiles_);
       blocks = blocks < 8 ? blocks + 1 : blocks + (blocks + 3) / 4)
    counts.push_back(blocks);
  if (spread)
    for (int64_t width = 1; width <= std::min<int64_t>(columns, 16); ++width)
      if (int64_t blocks = windowTiles_ / ((columns + width - 1) / width);
          blocks >= 2 && blocks <= rows)
        counts.push_back(blocks);
  llvm::sort(counts);
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  int64_t bestBlocks = 0, bestCycles = 0, bestPiece = 0;
  int64_t triesLeft = -1; // after the first that fits
  for (int64_t blocks : counts) {
    if (triesLeft == 0)
      break;
    // Every block holds rows: ceil(rows / B) blocks of B (10 rows in 6
    // blocks of 2 would leave the sixth empty).
    int64_t block = (rows + blocks - 1) / blocks;
    if ((rows + block - 1) / block != blocks)
      continue;
    std::optional<SplitOps> split = splitGatherByRows(op, table, dim, blocks);
    if (!split)
      break;
    std::optional<SplitCost> cost;
    int64_t piece = 0; // the table's largest piece, as this split places it
    {
      ScopedDiagnosticHandler quiet(op.getContext(), [](Diagnostic &) { return success(); });
      if (succeeded(planSplit(*split, op))) {
        cost = splitCost(*split);
        if (int64_t var = storageOf(variableOf(table)); var >= 0)
          piece = prog_.variables[var].mapping.maxPieceElements();
      }
    }
    undoTrial(before, split->created);
    if (triesLeft > 0)
      --triesLeft;
    if (!cost || !cost->fits)
      continue;
    if (triesLeft < 0 && !spread)
      triesLeft = 2;
    bool better = !bestBlocks;
    if (!better && spread && balanced(piece) != balanced(bestPiece))
      better = balanced(piece);
    else if (!better && spread && !balanced(piece))
      better = piece < bestPiece || (piece == bestPiece && cost->cycles < bestCycles);
    else if (!better)
      better = cost->cycles < bestCycles;
    if (better) {
      bestBlocks = blocks;
      bestCycles = cost->cycles;
      bestPiece = piece;
    }
  }
  inTrial_ = false;
  if (bestBlocks == 0)
    return std::nullopt; // planned as it is: it fits, or says why it cannot
  if (explain_) {
    InFlightDiagnostic remark = op.emitRemark();
    remark << "gather split into " << bestBlocks << " blocks of "
           << (rows + bestBlocks - 1) / bestBlocks << " rows of its table (";
    if (spread)
      remark << "a table the step updates, spread over the tiles)";
    else
      remark << "one column is " << columnBytes << " bytes, over the memory budget of "
             << budget_ << ")";
  }
  ++counts_.split;
  std::optional<SplitOps> split = splitGatherByRows(op, table, dim, bestBlocks);
  if (failed(planSplit(*split, op)))
    return failure();
  replaceSplitOp(op, split->combine->getResults());
  return success();
}

LogicalResult Planner::planOpOrSplit(linalg::GenericOp op) {
  // Nothing to compute: the (empty) result is placed and the op becomes
  // an allocation.
  if (llvm::any_of(op->getResultTypes(), [](Type t) {
        auto type = cast<RankedTensorType>(t);
        return type.hasStaticShape() && type.getNumElements() == 0;
      })) {
    Plan plan;
    plan.op = op;
    plan.isEmpty = true;
    for (Value r : op->getResults())
      placeLinear(r);
    planOf_[op] = plans_.size();
    plans_.push_back(std::move(plan));
    return success();
  }
  if (std::optional<LogicalResult> planned = planGatherByRows(op))
    return *planned;
  std::optional<Accumulation> acc = accumulationOf(op);
  if (!acc)
    return planOp(op);
  // The reduction loop to split: the longest (a convolution's input
  // channels, a matmul's k, a pooling window's rows).
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  auto iterators = op.getIteratorTypesArray();
  int64_t loop = -1;
  for (auto [i, it] : llvm::enumerate(iterators))
    if (it == utils::IteratorType::reduction &&
        (loop < 0 || ranges[i] > ranges[loop]))
      loop = i;
  int64_t range = ranges[loop];

  // The op as it is.
  Snapshot before = snapshot();
  inTrial_ = true;
  if (failed(planOp(op))) {
    inTrial_ = false;
    return failure();
  }
  int64_t bestCycles = plans_.back().cycles, bestPieces = 1;
  int64_t bestMemory = plans_.back().memory;
  bool bestFits = plans_.back().fits;
  // Among options that fit, the cheapest; when none does, the one needing
  // the least memory (the likeliest to fit the tile after all).
  auto better = [&](bool fits, int64_t cycles, int64_t memory) {
    if (fits != bestFits)
      return fits;
    return fits ? cycles < bestCycles : memory < bestMemory;
  };
  const int64_t unsplitCycles = bestCycles;
  const bool unsplitFits = bestFits;
  // Every option that fits, by increasing slices: (slices, cycles).
  SmallVector<std::pair<int64_t, int64_t>> fitting;
  if (bestFits)
    fitting.emplace_back(1, bestCycles);
  restore(before);

  // The options weighed, for the explanation: each split's cycles, those
  // of its partial sums and combining steps.
  std::string weighedText;
  llvm::raw_string_ostream weighed(weighedText);
  // Split into slices of at least 4 iterations; each split pays the
  // combining step and one more sync. More slices cost less exchange per
  // vertex and more combining: the cost falls, then rises, so the search
  // stops at the first fitting split that is worse than the one before.
  int64_t previousCycles = -1;
  for (int64_t pieces = 2; pieces <= range / 4 && pieces <= windowTiles_;
       pieces *= 2) {
    if (range % pieces != 0)
      break;
    SplitOps split = splitReduction(op, *acc, loop, pieces);
    std::optional<SplitCost> planned;
    {
      // A split the planner cannot place is just not a candidate.
      ScopedDiagnosticHandler quiet(op.getContext(),
                                    [](Diagnostic &) { return success(); });
      if (succeeded(planSplit(split, op)))
        planned = splitCost(split);
    }
    undoTrial(before, split.created);
    if (!planned)
      continue;
    auto [cycles, fits, memory, partialCycles, combineCycles] = *planned;
    if (explain_)
      weighed << "; " << pieces << " partial results: " << cycles << " (" << partialCycles
              << " partial sums + " << combineCycles << " combining + sync"
              << (fits ? "" : "; over the memory budget") << ")";
    if (better(fits, cycles, memory)) {
      bestCycles = cycles;
      bestFits = fits;
      bestMemory = memory;
      bestPieces = pieces;
    }
    if (fits)
      fitting.emplace_back(pieces, cycles);
    if (fits && previousCycles >= 0 && cycles > previousCycles)
      break;
    previousCycles = fits ? cycles : -1;
  }
  // Serial steps, when no option above fits the memory budget: each step
  // reads 1/steps of the operands per vertex, for one more exchange and
  // sync per step; the fewest steps that fit (or, when none fits, the
  // option needing the least memory).
  int64_t bestSteps = 1;
  if (!bestFits && op.getDpsInitOperand(0)->get().getDefiningOp<linalg::GenericOp>()) {
    for (int64_t steps = 2; steps <= range / 4 && steps <= kMaxSerialSteps; steps *= 2) {
      if (range % steps != 0)
        break;
      SmallVector<Operation *> created;
      SmallVector<linalg::GenericOp> chain =
          splitReductionSerially(op, loop, steps, created);
      bool planned;
      {
        ScopedDiagnosticHandler quiet(op.getContext(),
                                      [](Diagnostic &) { return success(); });
        planned = succeeded(planSerialSteps(chain, op));
      }
      int64_t cycles = 0, memory = 0;
      bool fits = false;
      if (planned) {
        // Every step runs the last one's plan on another slice.
        const Plan &last = plans_[planOf_[chain.back()]];
        cycles = steps * last.cycles + (steps - 1) * cost_.stepSyncCycles(windowIPUs());
        fits = last.fits;
        memory = last.memory;
      }
      undoTrial(before, created);
      if (explain_ && planned)
        weighed << "; " << steps << " serial steps: " << cycles
                << (fits ? "" : " (over the memory budget)");
      if (planned && better(fits, cycles, memory)) {
        bestSteps = steps;
        bestCycles = cycles;
        bestFits = fits;
        bestMemory = memory;
      }
      if (fits)
        break;
    }
  }
  inTrial_ = false;
  if (bestSteps > 1) {
    if (explain_)
      op.emitRemark() << "split into " << bestSteps << " serial steps along reduction loop "
                      << loop << " (" << range << " iterations): " << bestCycles
                      << " estimated cycles; no parallel split fits the memory budget"
                      << (bestFits ? "" : ", nor does this: it needs the least memory")
                      << "; weighed: unsplit " << unsplitCycles << weighedText;
    ++counts_.split;
    SmallVector<Operation *> created;
    SmallVector<linalg::GenericOp> chain =
        splitReductionSerially(op, loop, bestSteps, created);
    if (failed(planSerialSteps(chain, op)))
      return failure();
    replaceSplitOp(op, chain.back()->getResults());
    return success();
  }
  // The fewest slices within kSplitTolerance of the cheapest.
  if (bestFits)
    for (auto [pieces, cycles] : fitting)
      if (cycles <= bestCycles * (1 + kSplitTolerance)) {
        bestPieces = pieces;
        break;
      }
  if (explain_) {
    int64_t chosenCycles = bestPieces == 1 ? unsplitCycles : bestCycles;
    for (auto [pieces, cycles] : fitting)
      if (pieces == bestPieces)
        chosenCycles = cycles;
    op.emitRemark() << (bestPieces == 1 ? "not split" : "split into " +
                                                          std::to_string(bestPieces) +
                                                          " partial results")
                    << " along reduction loop " << loop << " (" << range << " iterations): "
                    << chosenCycles << " estimated cycles, against " << unsplitCycles
                    << " unsplit" << (unsplitFits ? "" : " (over the memory budget)")
                    << (weighedText.empty() ? "" : "; weighed:" + weighedText.substr(1));
  }
  if (bestPieces == 1)
    return planOp(op);
  ++counts_.split;
  SplitOps split = splitReduction(op, *acc, loop, bestPieces);
  if (failed(planSplit(split, op)))
    return failure();
  replaceSplitOp(op, split.combine->getResults());
  return success();
}

LogicalResult Planner::enterWindowOf(Operation *op) {
  std::optional<int64_t> ipu = graph::placedIpu(op);
  if (!ipu)
    return success();
  if (*ipu < 0 || *ipu >= target_.numIPUs)
    return op->emitError("ipu-plan-tiles: the op is placed on IPU ")
           << *ipu << " but the target has " << target_.numIPUs
           << " (compile with --num-ipus " << *ipu + 1 << " or more)";
  windowFirst_ = *ipu * target_.tilesPerIPU;
  windowTiles_ = target_.tilesPerIPU;
  return success();
}

LogicalResult Planner::plan() {
  Block &body = main_.getBody().front();
  // Inserts update their destination in place: a destination shared (CSE
  // merges identical pads' fills) is recomputed for each.
  SmallVector<tensor::InsertSliceOp> inserts(
      body.getOps<tensor::InsertSliceOp>());
  for (tensor::InsertSliceOp insert : inserts) {
    Value dest = insert.getDest();
    Operation *def = dest.getDefiningOp();
    if (dest.hasOneUse() || !def || !isPure(def) || def->getNumResults() != 1)
      continue;
    OpBuilder b(insert);
    insert.getDestMutable().assign(b.clone(*def)->getResult(0));
  }
  // Likewise a reduction accumulates into its init: a fill shared by several
  // (CSE merges the zero fills of convolutions and matmuls) is made again
  // for each, so that each folds its own into its vertices instead of
  // reading a fill materialized by a step of its own.
  for (auto generic : llvm::to_vector(body.getOps<linalg::GenericOp>())) {
    if (generic.getNumDpsInits() != 1 || generic.getNumReductionLoops() == 0)
      continue;
    // Fills are generalized by ipu-prepare-for-mapping.
    OpOperand *init = generic.getDpsInitOperand(0);
    auto fill = init->get().getDefiningOp<linalg::GenericOp>();
    if (!fill || init->get().hasOneUse() || !constantFillValue(fill))
      continue;
    OpBuilder b(generic);
    init->assign(b.clone(*fill)->getResult(0));
  }
  // Over a copy of the op list: splitting a reduction inserts ops before
  // the one being planned (planned on the spot) and erases it.
  SmallVector<Operation *> ops;
  for (Operation &op : body) {
    position_[&op] = ops.size();
    ops.push_back(&op);
  }
  reserveCode(ops);
  // Weights (each global once) and inputs, all resident before any op runs.
  {
    llvm::StringSet<> globals;
    auto bytesOf = [](Value v) -> int64_t {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      return type && type.hasStaticShape() ? type.getNumElements() * elementBytes(type) : 0;
    };
    for (BlockArgument arg : main_.getArguments())
      unplacedLeafBytes_ += bytesOf(arg);
    for (auto load : body.getOps<ml_program::GlobalLoadConstOp>())
      if (globals.insert(load.getGlobal().getLeafReference()).second)
        unplacedLeafBytes_ += bytesOf(load.getResult());
  }
  for (Operation *opPtr : ops) {
    Operation &op = *opPtr;
    now_ = position_.lookup(opPtr);
    releaseDead(now_);
    noteAssumedMemory(nullptr);
    if (failed(enterWindowOf(opPtr)))
      return failure();
    if (isa<func::ReturnOp>(op)) {
      for (Value v : op.getOperands())
        if (variableOf(v) < 0)
          placeLinear(v);
      continue;
    }
    if (isa<arith::ConstantOp, ml_program::GlobalLoadConstOp, tensor::EmptyOp>(
            op))
      continue;
    if (absorbed_.contains(&op))
      continue;
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      // A padding fill waits for its insert, which may make it a padded
      // view and the fill nothing.
      if (paddingInsertOf(generic)) {
        paddingFills_.insert(generic);
        continue;
      }
      if (failed(planOpOrSplit(generic)))
        return failure();
      releaseCode(generic);
      continue;
    }
    if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
      placeLinear(insert.getSource());
      if (Operation *fill = insert.getDest().getDefiningOp();
          fill && paddingFills_.contains(fill)) {
        if (succeeded(addPaddedView(insert))) {
          releaseCode(fill);
          continue;
        }
        // Padded for real: the fill is a step after all.
        paddingFills_.erase(fill);
        if (failed(planOpOrSplit(cast<linalg::GenericOp>(fill))))
          return failure();
        releaseCode(fill);
      }
      Value dest = insert.getDest();
      if (!dest.hasOneUse())
        return insert.emitError(
            "ipu-plan-tiles: an insert into a value that has "
            "other uses");
      if (dest.getDefiningOp<tensor::EmptyOp>() && variableOf(dest) < 0)
        placeLinear(dest);
      if (variableOf(dest) < 0)
        return insert.emitError("ipu-plan-tiles: insert destination not placed");
      bind(insert.getResult(), variableOf(dest));
      continue;
    }
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
      if (!llvm::all_of(slice.getStaticStrides(),
                        [](int64_t s) { return s == 1; }) ||
          slice.getSourceType().getRank() != slice.getType().getRank())
        return slice.emitError(
            "ipu-plan-tiles: slices need unit strides and the "
            "source's rank (run ipu-prepare-for-mapping first)");
      placeLinear(slice.getSource());
      placeLinear(slice.getResult());
      continue;
    }
    if (isa<tensor::ReshapeOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
            op)) {
      Value source = op.getOperand(0), view = op.getResult(0);
      if (variableOf(source) < 0 && source.getDefiningOp<ml_program::GlobalLoadConstOp>() &&
          differsByUnitDims(cast<RankedTensorType>(source.getType()).getShape(),
                            cast<RankedTensorType>(view.getType()).getShape()) &&
          !view.use_empty() &&
          llvm::all_of(view.getUsers(), [](Operation *u) { return isa<linalg::GenericOp>(u); })) {
        deferredViews_[view] = source;
        continue;
      }
      placeLinear(source);
      if (addView(view, source) < 0)
        return op.emitError("ipu-plan-tiles: a reshape of a padded value other than by "
                            "unit dimensions (internal error: padded views are only "
                            "made for values generics read)");
      continue;
    }
    if (auto sum = dyn_cast<ipu::CrossReplicaSumOp>(op)) {
      // Each sum lies where its input does: every tile sums the piece it
      // holds with the other replicas' (a view's sum is placed linearly).
      for (auto [in, out] : llvm::zip(sum.getInputs(), sum.getResults())) {
        placeLinear(in);
        const runtime::Variable &v = prog_.variables[variableOf(in)];
        if (v.base < 0 && !v.isPadded())
          addVariable(out, v.mapping);
        else
          placeLinear(out);
      }
      continue;
    }
    bool onTensors = llvm::any_of(op.getResultTypes(),
                                  [](Type t) { return isa<TensorType>(t); });
    if (onTensors)
      return op.emitError("ipu-plan-tiles: cannot place '")
             << op.getName()
             << "' on tiles (expected linalg.generic, inserts, "
                "reshapes; run ipu-prepare-for-mapping first)";
  }
  // Inputs nobody reads are still streamed somewhere.
  for (BlockArgument arg : main_.getArguments())
    placeLinear(arg);
  for (auto [view, source] : deferredViews_)
    if (variableOf(view) < 0)
      placeLinear(view);
  noteAssumedMemory(nullptr);
  return success();
}


void Planner::record() {
  MLIRContext *ctx = module_.getContext();
  if (!assumedOnTile_.empty())
    module_->setAttr(ipu::kAssumedTileBytesAttrName,
                     DenseI64ArrayAttr::get(ctx, assumedOnTile_));
  auto mappingOf = [&](Value v) {
    return ipu::toAttr(ctx, prog_.variables[variableOf(v)].mapping);
  };
  for (BlockArgument arg : main_.getArguments())
    if (variableOf(arg) >= 0)
      main_.setArgAttr(arg.getArgNumber(), ipu::kMappingAttrName, mappingOf(arg));
  for (Operation &op : main_.getBody().front()) {
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      // Absorbed epilogues and padding fills have no plan of their own.
      auto it = planOf_.find(generic);
      if (it == planOf_.end())
        continue;
      const Plan &plan = plans_[it->second];
      // An op without elements is only allocations, placed as leaves are.
      ipu::MappingAttr mapping = plan.isEmpty ? mappingOf(generic->getResult(0))
                                              : ipu::toAttr(ctx, plan.mapping);
      generic->setAttr(ipu::kPlanAttrName,
                       ipu::PlanAttr::get(ctx, mapping, static_cast<bool>(plan.epilogue),
                                          static_cast<bool>(plan.initProducer)));
      ++counts_.planned;
      counts_.epilogues += plan.epilogue ? 1 : 0;
      counts_.overBudget += plan.fits ? 0 : 1;
      if (explain_ && plan.isInitProducer)
        generic.emitRemark() << generic->getAttr(ipu::kPlanAttrName)
                             << ": its reader's mapping (the reader updates it in place)";
      else if (explain_ && !plan.isEmpty)
        generic.emitRemark() << generic->getAttr(ipu::kPlanAttrName) << ": " << plan.cycles
                             << " estimated cycles on its slowest vertex"
                             << (plan.fits ? "" : "; nothing fit the memory budget");
      continue;
    }
    if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
      if (int64_t var = variableOf(insert.getResult());
          var >= 0 && prog_.variables[var].isPadded())
        insert->setAttr(ipu::kPaddedViewAttrName, UnitAttr::get(ctx));
      continue;
    }
    if (auto sum = dyn_cast<ipu::CrossReplicaSumOp>(op)) {
      SmallVector<Attribute> mappings;
      for (Value r : sum.getResults())
        mappings.push_back(mappingOf(r));
      sum->setAttr(ipu::kResultMappingsAttrName, ArrayAttr::get(ctx, mappings));
      continue;
    }
    if (isa<ml_program::GlobalLoadConstOp, tensor::EmptyOp, tensor::ExtractSliceOp>(op) &&
        variableOf(op.getResult(0)) >= 0) {
      op.setAttr(ipu::kMappingAttrName, mappingOf(op.getResult(0)));
      const TileMapping &m = prog_.variables[variableOf(op.getResult(0))].mapping;
      if (!m.isMirrored())
        continue;
      Builder b(ctx);
      op.setAttr(ipu::kMirrorsAttrName,
                 b.getDictionaryAttr({b.getNamedAttr("counts", b.getDenseI64ArrayAttr(m.mirrorCounts)),
                                      b.getNamedAttr("tile_strides",
                                                     b.getDenseI64ArrayAttr(m.mirrorStrides))}));
      ++counts_.mirrored;
      if (explain_)
        op.emitRemark() << "mirrored: a copy on each of " << m.numCopies()
                        << " blocks of the tiles that read it, loaded once instead of "
                           "received in every run";
    }
  }
}

struct IPUPlanTiles : tessera::ipu::impl::IPUPlanTilesBase<IPUPlanTiles> {
  using IPUPlanTilesBase::IPUPlanTilesBase;
  /// Fills (generalized: a generic of scalars into an empty tensor), empty
  /// tensors and constants.
  static bool isCheapToClone(Operation *op) {
    if (isa<linalg::FillOp, tensor::EmptyOp, arith::ConstantOp>(op))
      return true;
    auto generic = dyn_cast<linalg::GenericOp>(op);
    return generic && llvm::all_of(generic.getDpsInputs(), [](Value in) {
             return !isa<ShapedType>(in.getType());
           }) && llvm::all_of(generic.getDpsInits(), [](Value init) {
             return init.getDefiningOp<tensor::EmptyOp>() != nullptr;
           });
  }

  /// A value that is both an input and the init of one op (CSE merges a
  /// zero constant operand with a matmul's zero fill) would need two
  /// regions on the same tiles; each op gets its own copy of the init's
  /// producer instead (a fill, an empty tensor or a constant: cheap).
  static void separateInitsFromInputs(func::FuncOp main) {
    main.walk([](linalg::LinalgOp op) {
      for (OpOperand &init : op.getDpsInitsMutable()) {
        Value v = init.get();
        bool alsoInput = llvm::any_of(op.getDpsInputOperands(), [&](OpOperand *in) {
          return in->get() == v;
        });
        Operation *producer = v.getDefiningOp();
        if (!alsoInput || !producer || !isCheapToClone(producer))
          continue;
        OpBuilder b(op);
        init.set(b.clone(*producer)->getResult(cast<OpResult>(v).getResultNumber()));
      }
    });
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (availableMemoryProportion <= 0 || availableMemoryProportion > 1) {
      module.emitError("--available-memory-proportion must be in (0, 1], got ")
          << availableMemoryProportion;
      return signalPassFailure();
    }
    FailureOr<target::IPUTarget> target = ipu::getTarget(module);
    if (failed(target))
      return signalPassFailure();
    FailureOr<func::FuncOp> main = mainToMap(module, getArgument());
    if (failed(main))
      return signalPassFailure();
    // A loop of size 0 has no tiling: such ops compute nothing and
    // fold-empty-tensors replaces them by what they give.
    WalkResult empty = main->walk([](linalg::LinalgOp op) {
      if (!llvm::is_contained(op.getStaticLoopRanges(), 0))
        return WalkResult::advance();
      op.emitOpError("has a loop of size 0 (it computes nothing), which has no tiling: "
                     "fold-empty-tensors replaces such ops on tensors with static shapes "
                     "by their inits; run it before ipu-plan-tiles, as the linalg "
                     "pipeline does");
      return WalkResult::interrupt();
    });
    if (empty.wasInterrupted())
      return signalPassFailure();
    separateInitsFromInputs(*main);
    Planner planner(module, *main, *target, availableMemoryProportion);
    if (explain)
      planner.explain();
    if (recordAssumedMemory)
      planner.recordAssumedMemory();
    if (failed(planner.plan()))
      return signalPassFailure();
    planner.record();
    numPlanned += planner.counts().planned;
    numSplit += planner.counts().split;
    numEpilogues += planner.counts().epilogues;
    numOverBudget += planner.counts().overBudget;
    numMirrored += planner.counts().mirrored;
    numCostedCandidates += planner.counts().costedCandidates;
    numBoundedCandidates += planner.counts().boundedCandidates;
  }
};

} // namespace

