//===- IPUMapTiles.cpp - place tensors on tiles, ops into compute sets ---===//
//
// Planning happens first, over the whole of @main, against a MachineProgram
// that grows as values are placed (so the cost of a candidate is measured
// with the same region arithmetic the IPU model executes). The IR is then
// rewritten in one sweep: compute sets, copies, views, allocations, and one
// outlined vertex kernel per distinct piece shape of each compute set.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/IPU/Transforms/Passes.h"
#include "tessera/Target/CostModel.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineExprVisitor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"

#include <set>

namespace tessera::ipu {
#define GEN_PASS_DEF_IPUMAPTILES
#include "tessera/Dialect/IPU/Transforms/Passes.h.inc"
} // namespace tessera::ipu

using namespace mlir;
using namespace tessera;
using runtime::AccessMap;
using runtime::Box;
using runtime::MachineProgram;
using runtime::TileMapping;

namespace {

int64_t elementBytes(Type t) {
  Type e = getElementTypeOrSelf(t);
  if (e.isIndex())
    return 8;
  return std::max<int64_t>(1, (e.getIntOrFloatBitWidth() + 7) / 8);
}

/// `map` as an AccessMap; `full` (read whole) when it is not a box read.
AccessMap toAccessMap(AffineMap map) {
  if (std::optional<AccessMap> box = ipu::toBoxAccess(map))
    return *box;
  AccessMap a;
  a.coeffs.assign(map.getNumResults(),
                  std::vector<int64_t>(map.getNumDims(), 0));
  a.consts.assign(map.getNumResults(), 0);
  a.full = true;
  return a;
}

/// The constant `op` fills its result with, when it only does that: no
/// tensor inputs, the init not read, a constant yielded (a reduction's zeros,
/// the identity of a split reduction's partials).
std::optional<arith::ConstantOp> constantFillValue(linalg::GenericOp op) {
  if (op->getNumResults() != 1 || op.hasIndexSemantics() ||
      llvm::any_of(op.getDpsInputs(),
                   [](Value in) { return isa<ShapedType>(in.getType()); }) ||
      op.payloadUsesValueFromOperand(op.getDpsInitOperand(0)))
    return std::nullopt;
  Value yielded = op.getRegion().front().getTerminator()->getOperand(0);
  // A generalized linalg.fill yields its scalar operand's block argument.
  if (auto arg = dyn_cast<BlockArgument>(yielded);
      arg && arg.getOwner() == &op.getRegion().front() &&
      arg.getArgNumber() < op.getNumDpsInputs())
    yielded = op.getDpsInputOperand(arg.getArgNumber())->get();
  if (auto cst = yielded.getDefiningOp<arith::ConstantOp>())
    return cst;
  return std::nullopt;
}

/// How the body of `op` reads `captured`, a tensor defined above it, as a
/// map in the loops with extents: dimension k follows loop l when every
/// tensor.extract of it takes `linalg.index l` there (a gather's columns);
/// other dimensions are read whole (a gather's rows, at data-dependent
/// places). `full` when no dimension follows a loop or the body uses the
/// tensor otherwise.
void capturedAccess(linalg::GenericOp op, Value captured, AffineMap &map,
                    AccessMap &access) {
  auto type = cast<RankedTensorType>(captured.getType());
  int64_t rank = type.getRank();
  constexpr int64_t kUnseen = -2, kWhole = -1;
  SmallVector<int64_t> follows(rank, kUnseen);
  bool onlyExtracts = true;
  for (Operation *user : captured.getUsers()) {
    if (!op->isProperAncestor(user))
      continue;
    auto extract = dyn_cast<tensor::ExtractOp>(user);
    if (!extract) {
      onlyExtracts = false;
      break;
    }
    for (auto [k, index] : llvm::enumerate(extract.getIndices())) {
      auto loop = index.getDefiningOp<linalg::IndexOp>();
      int64_t l = loop && loop->getParentOp() == op.getOperation()
                      ? static_cast<int64_t>(loop.getDim())
                      : kWhole;
      follows[k] = follows[k] == kUnseen || follows[k] == l ? l : kWhole;
    }
  }
  MLIRContext *ctx = op.getContext();
  unsigned numLoops = op.getNumLoops();
  SmallVector<AffineExpr> exprs;
  SmallVector<int64_t> extents;
  for (int64_t k = 0; k < rank; ++k) {
    bool follow = onlyExtracts && follows[k] >= 0;
    exprs.push_back(follow ? getAffineDimExpr(follows[k], ctx)
                           : getAffineConstantExpr(0, ctx));
    extents.push_back(follow ? 1 : type.getDimSize(k));
  }
  map = AffineMap::get(numLoops, 0, exprs, ctx);
  access = toAccessMap(map);
  if (llvm::all_of(exprs, [](AffineExpr e) { return isa<AffineConstantExpr>(e); })) {
    access.full = true;
    return;
  }
  access.extents.assign(extents.begin(), extents.end());
}

struct Input {
  Value value;
  AffineMap map; ///< in the generic's loops (a constant map for `full`)
  AccessMap access;
  bool captured = false; ///< read inside the body, not an operand
};

/// What the planner decided for one linalg.generic.
struct Plan {
  linalg::GenericOp op;
  std::vector<int64_t> loopRanges, outputLoops;
  std::vector<Input> inputs; ///< compute-set inputs, in order
  TileMapping mapping;       ///< of the results
  /// The generic whose only use is as this op's init: it takes this op's
  /// mapping and this op updates its result in place. When it only fills
  /// with a constant, it is no compute set of its own: each vertex of this
  /// op fills its output piece first (as poplibs' convolution vertices zero
  /// their partials), saving a step, its sync and a pass over the memory.
  linalg::GenericOp initProducer;
  TypedAttr initFill; ///< the constant, when this op's vertices fill
  bool fillsInit() const { return static_cast<bool>(initFill); }
  bool isInitProducer = false;
  bool readsInit = false; ///< the body reads the outs block arguments
  int64_t macs = 0;
  /// The chosen mapping's cost: worst vertex's exchange + compute cycles,
  /// and whether its buffers fit the memory budget.
  int64_t cycles = 0;
  bool fits = true;
  /// The results have no elements: no compute set, only allocations.
  bool isEmpty = false;
  /// An elementwise op applied to each output piece by the same vertices,
  /// right after this op (the Relu after a convolution, see epilogueOf):
  /// the compute set's result is the epilogue's, and this op's result is
  /// never in tile memory.
  linalg::GenericOp epilogue;
  /// A reshape between this op and its epilogue that only drops or adds
  /// unit dimensions (a convolution's group dimension): the epilogue's
  /// result is then a view of the compute set's.
  Operation *epilogueReshape = nullptr;
  /// The epilogue's operand that is this op's result; its others are
  /// inputs of the compute set, `inputs[epilogueInputs[k]]` for the k-th.
  unsigned epilogueResultOperand = 0;
  std::vector<size_t> epilogueInputs;
};

/// `map`, whose results index a tensor of shape `from`, indexing instead
/// its reshape to `to`, which only adds or drops unit dimensions.
AffineMap reshapedMap(AffineMap map, ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  SmallVector<AffineExpr> exprs;
  size_t j = 0;
  for (int64_t d : to) {
    if (d == 1) {
      exprs.push_back(getAffineConstantExpr(0, map.getContext()));
      continue;
    }
    while (from[j] == 1)
      ++j;
    exprs.push_back(map.getResult(j++));
  }
  return AffineMap::get(map.getNumDims(), map.getNumSymbols(), exprs, map.getContext());
}

/// Whether `a` and `b` hold the same dimensions but for unit ones.
bool differsByUnitDims(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  auto nonUnit = [](ArrayRef<int64_t> shape) {
    SmallVector<int64_t> dims;
    for (int64_t d : shape)
      if (d != 1)
        dims.push_back(d);
    return dims;
  };
  return nonUnit(a) == nonUnit(b);
}

/// The insert that pads a value with `fill`'s constant, when it can be a
/// padded view (virtual padding): `fill` fills the insert's destination and
/// nothing else, the insert writes its whole source at static offsets, and
/// only generics read the padded result, as inputs.
tensor::InsertSliceOp paddingInsertOf(linalg::GenericOp fill) {
  if (!constantFillValue(fill) || !fill->hasOneUse())
    return {};
  auto insert = dyn_cast<tensor::InsertSliceOp>(*fill->getUsers().begin());
  if (!insert || insert.getDest() != fill->getResult(0) ||
      insert.getSourceType().getRank() != insert.getDestType().getRank() ||
      !insert.getSourceType().hasStaticShape() || !insert.getDestType().hasStaticShape() ||
      llvm::any_of(insert.getStaticOffsets(), ShapedType::isDynamic) ||
      !llvm::all_of(insert.getStaticStrides(), [](int64_t s) { return s == 1; }) ||
      llvm::ArrayRef(insert.getStaticSizes()) != insert.getSourceType().getShape())
    return {};
  // Readers: generics, as inputs, directly or through reshapes that only
  // insert or drop unit dimensions (a convolution's group dimension).
  std::function<bool(Value)> readByGenericsOnly = [&](Value v) {
    if (v.use_empty())
      return false;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto reader = dyn_cast<linalg::GenericOp>(user)) {
        if (reader.isDpsInit(&use))
          return false;
        continue;
      }
      if (!isa<tensor::ReshapeOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(user) ||
          !differsByUnitDims(cast<RankedTensorType>(v.getType()).getShape(),
                             cast<RankedTensorType>(user->getResult(0).getType()).getShape()) ||
          !readByGenericsOnly(user->getResult(0)))
        return false;
    }
    return true;
  };
  return readByGenericsOnly(insert.getResult()) ? insert : tensor::InsertSliceOp();
}

/// The op `reduction`'s result's only reader, when it can run as an
/// epilogue of the vertices computing that result: an all-parallel generic
/// reading that result element for element (identity maps, the result's
/// type and shape) and any other inputs at the same indices or broadcast
/// along some (a residual Add and its Relu, a bias), into an output it does
/// not read, with only constants from outside its body.
/// Not for ops without reductions: ipu-fuse-elementwise fuses those chains
/// before.
std::pair<linalg::GenericOp, Operation *> epilogueOf(linalg::GenericOp reduction,
                                                     Value result) {
  if (reduction.getNumReductionLoops() == 0 || !result.hasOneUse())
    return {};
  // Through a reshape of unit dimensions only.
  Operation *reshape = *result.getUsers().begin();
  if (isa<tensor::ReshapeOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(reshape) &&
      reshape->getResult(0).hasOneUse() &&
      cast<RankedTensorType>(reshape->getResult(0).getType()).hasStaticShape() &&
      differsByUnitDims(cast<RankedTensorType>(result.getType()).getShape(),
                        cast<RankedTensorType>(reshape->getResult(0).getType()).getShape()))
    result = reshape->getResult(0);
  else
    reshape = nullptr;
  auto user = dyn_cast<linalg::GenericOp>(*result.getUsers().begin());
  if (!user || user->getBlock() != reduction->getBlock() || user.getNumDpsInits() != 1 ||
      user->getNumResults() != 1 || user.getNumLoops() != user.getNumParallelLoops() ||
      user.hasIndexSemantics() || user.payloadUsesValueFromOperand(user.getDpsInitOperand(0)) ||
      user->getResult(0).getType() != result.getType() ||
      llvm::count(user.getDpsInputs(), result) != 1)
    return {};
  // The result and the output element for element; other operands at
  // those indices or broadcast along some (a bias).
  for (OpOperand &operand : user->getOpOperands()) {
    AffineMap map = user.getMatchingIndexingMap(&operand);
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    bool elementForElement = operand.get() == result || user.isDpsInit(&operand);
    if (elementForElement ? !map.isIdentity()
                          : !type || !type.hasStaticShape() || !map.isProjectedPermutation())
      return {};
  }
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(user.getRegion(), captured);
  if (!llvm::all_of(captured, [](Value v) { return v.getDefiningOp<arith::ConstantOp>(); }))
    return {};
  return {user, reshape};
}

/// How a reduction accumulates: `yield combine(out, f(ins))`, the output
/// read nowhere else. Splitting such a reduction into partial results and
/// combining them is exact up to the reassociation of `combine`.
struct Accumulation {
  StringRef combine;  ///< arith.addf, arith.maximumf, ...
  TypedAttr identity; ///< combine(identity, x) == x
};

std::optional<Accumulation> accumulationOf(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumReductionLoops() == 0 ||
      op.hasIndexSemantics())
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
  AffineMap fillOut = b.getMultiDimIdentityMap(partialShape.size());
  auto fill = linalg::GenericOp::create(
      b, loc, TypeRange{partialType}, ValueRange{}, ValueRange{empty},
      ArrayRef<AffineMap>{fillOut},
      SmallVector<utils::IteratorType>(partialShape.size(),
                                       utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange) {
        linalg::YieldOp::create(nb, l, identity.getResult());
      });

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
  unsigned rank = outType.getRank();
  SmallVector<AffineExpr> read{b.getAffineDimExpr(rank)};
  for (unsigned d = 0; d < rank; ++d)
    read.push_back(b.getAffineDimExpr(d));
  SmallVector<utils::IteratorType> combineIterators(
      rank, utils::IteratorType::parallel);
  combineIterators.push_back(utils::IteratorType::reduction);
  auto combine = linalg::GenericOp::create(
      b, loc, TypeRange{outType}, ValueRange{partial.getResult(0)},
      ValueRange{op.getDpsInitOperand(0)->get()},
      // The init is read at the first `rank` loops; built explicitly because
      // getMajorSubMap(0) of a scalar's map is null.
      ArrayRef<AffineMap>{AffineMap::get(rank + 1, 0, read, ctx),
                          AffineMap::get(rank + 1, 0, ArrayRef(read).drop_front(),
                                         ctx)},
      combineIterators, [&](OpBuilder &nb, Location l, ValueRange args) {
        OperationState state(l, acc.combine);
        state.addOperands({args[1], args[0]});
        state.addTypes(args[0].getType());
        linalg::YieldOp::create(nb, l, nb.create(state)->getResult(0));
      });
  return {fill,
          partial,
          combine,
          {empty, identity, fill, window, partial, combine}};
}

class Planner {
public:
  Planner(ModuleOp module, func::FuncOp main, const target::IPUTarget &target,
          double amp)
      : module_(module), main_(main), target_(target), cost_(target),
        numTiles_(target.totalTiles()),
        budget_(static_cast<int64_t>(amp * target.bytesPerTile)),
        weightBytesOnTile_(numTiles_, 0) {}

  LogicalResult plan();
  LogicalResult rewrite();

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

  LogicalResult describe(linalg::GenericOp op, Plan &plan);
  LogicalResult planGeneric(Plan &plan);
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
  /// Makes the epilogue's operands other than `resultOf`'s result inputs of
  /// `plan`, read at the output's indices; fails (no epilogue) when one is
  /// not placed before `generic`, where the compute set goes.
  LogicalResult addEpilogueInputs(linalg::GenericOp generic, linalg::GenericOp resultOf,
                                  Plan &plan);
  /// Plans a reduction as it is or split into partial results over the
  /// tiles and a combining step, whichever the cost model prefers; the
  /// split rewrites the IR. Other ops go straight to planOp.
  LogicalResult planOpOrSplit(linalg::GenericOp op);

  /// The planner's state, to try a plan and take it back. Plans are only
  /// appended, but for the mapping an init producer takes from its user,
  /// which `mappingUndo_` records.
  struct Snapshot {
    size_t numVariables, numPlans, numUndo;
    DenseMap<Value, int64_t> vars;
    llvm::StringMap<int64_t> globalVars;
    DenseMap<Operation *, size_t> planOf;
    std::vector<int64_t> weightBytesOnTile;
  };
  Snapshot snapshot() const {
    return {prog_.variables.size(),
            plans_.size(),
            mappingUndo_.size(),
            vars_,
            globalVars_,
            planOf_,
            weightBytesOnTile_};
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
  }
  std::vector<std::pair<size_t, TileMapping>> mappingUndo_;
  /// Set while planOpOrSplit compares options (cheaper costing).
  bool inTrial_ = false;
  /// A vertex of `plan` running `loops`, writing `fillBytes` of constants
  /// first (its output's initial value, an input's padding).
  int64_t vertexCycles(const Plan &plan, const Box &loops, int64_t fillBytes = 0) const;
  int64_t codeBytes(const Plan &plan) const;

  // Rewriting.
  LogicalResult emitComputeSet(Plan &plan, OpBuilder &b);
  FailureOr<func::FuncOp>
  outlineKernel(Plan &plan, ArrayRef<int64_t> pieceSizes, StringRef name);

  ModuleOp module_;
  func::FuncOp main_;
  target::IPUTarget target_;
  target::CostModel cost_;
  int64_t numTiles_, budget_;
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
  int64_t computeSets_ = 0;
  /// Outlined kernels by their text less the name (structuralKey).
  llvm::StringMap<std::string> kernelByBody_;
  /// Results of rewritten ops -> their replacements (plans hold the former).
  DenseMap<Value, Value> replaced_;
  Value resolve(Value v) const {
    auto it = replaced_.find(v);
    return it == replaced_.end() ? v : it->second;
  }
  void replace(Operation *op, ValueRange with) {
    for (auto [from, to] : llvm::zip(op->getResults(), with))
      replaced_[from] = to;
    op->replaceAllUsesWith(with);
  }
};

int64_t Planner::addVariable(Value v, TileMapping mapping) {
  runtime::Variable var;
  auto type = cast<RankedTensorType>(v.getType());
  var.shape.assign(type.getShape().begin(), type.getShape().end());
  mapping.shape = var.shape;
  var.mapping = std::move(mapping);
  int64_t id = prog_.variables.size();
  prog_.variables.push_back(std::move(var));
  vars_[v] = id;
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
  vars_[v] = id;
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
  vars_[insert.getResult()] = prog_.variables.size();
  prog_.variables.push_back(std::move(*var));
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
      TileMapping m;
      m.firstTile = mapping->firstTile;
      SmallVector<std::pair<int64_t, int64_t>> nonUnit;
      for (int64_t j = 0; j < mapping->rank(); ++j)
        if (mapping->shape[j] != 1)
          nonUnit.push_back({mapping->chunks[j], mapping->tileStrides[j]});
      auto it = nonUnit.begin();
      for (int64_t d : cast<RankedTensorType>(source.getType()).getShape()) {
        auto [chunk, stride] = d != 1 ? *it++ : std::make_pair(int64_t(1), int64_t(0));
        m.chunks.push_back(chunk);
        m.tileStrides.push_back(stride);
      }
      addVariable(source, m);
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
  return addVariable(
      v, TileMapping::linear(type.getShape(), elementBytes(type), numTiles_));
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
    if (nonzero == 1 && loop >= 0 && access.consts[k] == 0 && dim > 1) {
      for (int64_t j = 0; j < out.rank(); ++j) {
        if (plan.outputLoops[j] != loop || out.shape[j] != dim)
          continue;
        if (used[j])
          return std::nullopt;
        used[j] = true;
        chunk = out.chunks[j];
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

LogicalResult Planner::describe(linalg::GenericOp op, Plan &plan) {
  plan.op = op;
  for (Type t : op->getResultTypes())
    if (!cast<RankedTensorType>(t).hasStaticShape())
      return op.emitError("ipu-map-tiles needs static shapes");
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  plan.loopRanges.assign(ranges.begin(), ranges.end());
  for (int64_t r : plan.loopRanges)
    if (ShapedType::isDynamic(r))
      return op.emitError("ipu-map-tiles needs static loop ranges");
  // Every output reads the same projected permutation of parallel loops.
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!outMap.isProjectedPermutation())
    return op.emitError("ipu-map-tiles: outputs must be indexed by a projected "
                        "permutation of the loops");
  for (OpOperand &init : op.getDpsInitsMutable())
    if (op.getMatchingIndexingMap(&init) != outMap)
      return op.emitError("ipu-map-tiles: outputs with different indexing maps "
                          "are not supported");
  for (AffineExpr e : outMap.getResults()) {
    unsigned d = cast<AffineDimExpr>(e).getPosition();
    if (op.getIteratorTypesArray()[d] != utils::IteratorType::parallel)
      return op.emitError(
          "ipu-map-tiles: an output indexed by a reduction loop");
    plan.outputLoops.push_back(d);
  }
  for (OpOperand *in : op.getDpsInputOperands()) {
    if (!isa<RankedTensorType>(in->get().getType())) {
      // Scalars are cloned into the kernel: they must be constants.
      if (!matchPattern(in->get(), m_Constant()))
        return op.emitError(
            "ipu-map-tiles: a scalar operand that is not a constant");
      continue;
    }
    // Uninitialized operands (a pooling window's shape) need no data: the
    // kernel makes its own.
    if (in->get().getDefiningOp<tensor::EmptyOp>())
      continue;
    Input input;
    input.value = in->get();
    input.map = op.getMatchingIndexingMap(in);
    input.access = toAccessMap(input.map);
    // An operand indexed by no loop is not sliced by tiling: read it whole.
    if (!input.access.full &&
        llvm::none_of(
            input.map.getResults(),
            [](AffineExpr e) { return !isa<AffineConstantExpr>(e); }) &&
        cast<RankedTensorType>(input.value.getType()).getNumElements() > 1)
      input.access.full = true;
    plan.inputs.push_back(input);
  }
  plan.readsInit = llvm::any_of(op.getDpsInitsMutable(), [&](OpOperand &o) {
    return op.payloadUsesValueFromOperand(&o);
  });
  // Tensors the body reads at data-dependent places (gathers, resizes).
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(op.getRegion(), captured);
  for (Value v : captured) {
    if (isa<RankedTensorType>(v.getType())) {
      Input input;
      input.value = v;
      input.captured = true;
      capturedAccess(op, v, input.map, input.access);
      plan.inputs.push_back(input);
    } else if (!matchPattern(v, m_Constant())) {
      return op.emitError("ipu-map-tiles: the body reads a non-constant scalar "
                          "defined outside it");
    }
  }
  // Contractions: a reduction loop and a multiply in the body.
  bool hasReduction = op.getNumReductionLoops() > 0;
  bool multiplies = false;
  op.getRegion().walk([&](Operation *o) {
    multiplies |= isa<arith::MulFOp, arith::MulIOp>(o);
  });
  if (hasReduction && multiplies) {
    int64_t macs = 1;
    for (int64_t r : plan.loopRanges)
      macs *= r;
    plan.macs = macs;
  }
  return success();
}

/// Vector instructions per element of an elementwise body, as the cost
/// model weighs each operation (transcendentals and divisions take several).
static int64_t bodyInstructions(linalg::GenericOp op, const target::CostModel &cost) {
  using Instruction = target::CostModel::Instruction;
  int64_t instructions = 0;
  op.getRegion().walk([&](Operation *o) {
    if (isa<linalg::YieldOp, linalg::IndexOp, arith::ConstantOp>(o))
      return;
    bool transcendental = isa<math::MathDialect>(o->getDialect()) || isa<arith::DivFOp>(o);
    instructions += cost.instructionCycles(transcendental ? Instruction::Transcendental
                                                          : Instruction::Simple);
  });
  return std::max<int64_t>(instructions, 1);
}

int64_t Planner::vertexCycles(const Plan &plan, const Box &loops, int64_t fillBytes) const {
  target::VertexWork work;
  work.iterations = loops.numElements();
  // Rows of the output piece: the vertex's inner loop runs along the
  // output's last dimension, set up again for each row.
  for (size_t k = 0; k + 1 < plan.outputLoops.size(); ++k)
    work.rows *= loops.sizes[plan.outputLoops[k]];
  Type elem = getElementTypeOrSelf(plan.op->getResult(0).getType());
  work.elementBytes = elementBytes(elem);
  work.halfPrecision = elem.isF16() || elem.isBF16();
  work.contraction = plan.macs > 0;
  if (!work.contraction)
    work.instructions = bodyInstructions(plan.op, cost_);
  if (plan.epilogue) {
    work.epilogueElements = 1;
    for (int64_t l : plan.outputLoops)
      work.epilogueElements *= loops.sizes[l];
    work.epilogueInstructions = bodyInstructions(plan.epilogue, cost_);
  }
  work.fillBytes = fillBytes;
  return cost_.vertexCycles(work);
}

int64_t Planner::codeBytes(const Plan &plan) const {
  int64_t ops = 0;
  for (linalg::GenericOp op : {plan.op, plan.epilogue})
    if (op)
      op.getRegion().walk([&](Operation *) { ++ops; });
  return cost_.vertexCodeBytes(plan.loopRanges.size(), ops);
}

/// Grids costed per op at most (an op is planned several times when its
/// reduction may split): bounds compile time on many-dimensional ops.
constexpr int64_t kMaxCandidatesCosted = 1000;
/// The same bound while comparing an op with its reduction splits: the
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

LogicalResult Planner::planGeneric(Plan &plan) {
  auto outType = cast<RankedTensorType>(plan.op->getResult(0).getType());
  std::vector<int64_t> shape(outType.getShape().begin(),
                             outType.getShape().end());
  int64_t rank = shape.size();
  int64_t outBytes = elementBytes(outType);
  for (const Input &in : plan.inputs)
    if (!isUnplacedLeaf(in.value) && variableOf(in.value) < 0)
      return plan.op.emitError(
          "ipu-map-tiles: an operand was not placed before "
          "its use (internal error)");

  // Candidate chunks per dimension, including the chunks of inputs that the
  // output can follow so elementwise chains stay on their tiles.
  std::vector<std::vector<int64_t>> cands(rank);
  for (int64_t j = 0; j < rank; ++j) {
    cands[j] = chunkCandidates(shape[j], numTiles_);
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

  struct Best {
    bool valid = false, fits = false;
    int64_t cycles = 0, memory = 0, pieces = 0;
    TileMapping mapping;
  } best;
  std::vector<int64_t> chunks(rank, 1);
  // Odometer over the candidate lists, pruned by the tile count.
  std::vector<size_t> at(rank, 0);
  int64_t evaluated = 0;
  while (true) {
    int64_t pieces = 1;
    for (int64_t j = 0; j < rank; ++j) {
      chunks[j] = cands[j][at[j]];
      pieces *= (shape[j] + chunks[j] - 1) / chunks[j];
    }
    if (pieces <= numTiles_) {
      ++evaluated;
      TileMapping m;
      m.shape = shape;
      m.chunks = chunks;
      m.tileStrides.assign(rank, 0);
      int64_t stride = 1;
      for (int64_t j = rank - 1; j >= 0; --j) {
        int64_t n = (shape[j] + chunks[j] - 1) / chunks[j];
        m.tileStrides[j] = n > 1 ? stride : 0;
        stride *= n;
      }
      // Unplaced leaves take the mapping they would get with this plan.
      size_t tentative = prog_.variables.size();
      std::vector<int64_t> inVars;
      for (const Input &in : plan.inputs) {
        int64_t var = variableOf(in.value);
        if (var < 0) {
          runtime::Variable v;
          auto t = cast<RankedTensorType>(in.value.getType());
          v.shape.assign(t.getShape().begin(), t.getShape().end());
          auto aligned = alignedMapping(in.value, in.access, plan, m);
          v.mapping = aligned ? *aligned
                              : TileMapping::linear(v.shape, elementBytes(t),
                                                    numTiles_);
          v.mapping.shape = v.shape;
          var = prog_.variables.size();
          prog_.variables.push_back(std::move(v));
        }
        inVars.push_back(var);
      }
      // Cost the first, a central and the last piece: edges and holders
      // differ. The central one is central in every dimension: an operand
      // placed with the pieces of index 0 along some dimensions (a weight
      // block, on the first of the tiles sharing it) is local to the first
      // piece, and to the middle one in row-major order, but remote for
      // most vertices.
      std::vector<int64_t> perDim = m.piecesPerDim();
      std::vector<int64_t> first(rank, 0), central(rank), last(rank);
      for (int64_t j = 0; j < rank; ++j) {
        central[j] = perDim[j] / 2;
        last[j] = perDim[j] - 1;
      }
      int64_t worstCycles = 0, worstMemory = 0;
      for (const std::vector<int64_t> &idx : {first, central, last}) {
        Box piece = m.pieceBox(idx);
        int64_t tile = m.tileOf(idx);
        Box loops;
        loops.offsets.assign(plan.loopRanges.size(), 0);
        loops.sizes.assign(plan.loopRanges.begin(), plan.loopRanges.end());
        for (int64_t j = 0; j < rank; ++j) {
          loops.offsets[plan.outputLoops[j]] = piece.offsets[j];
          loops.sizes[plan.outputLoops[j]] = piece.sizes[j];
        }
        int64_t received = 0, regions = 0, padding = 0,
                memory = piece.numElements() * outBytes;
        for (auto [in, var] : llvm::zip(plan.inputs, inVars)) {
          const runtime::Variable &v = prog_.variables[var];
          Box region = in.access.region(loops, v.shape);
          int64_t bytes = elementBytes(in.value.getType());
          if (!runtime::isLocalPiece(prog_, var, region, tile)) {
            received += runtime::remoteBytes(prog_, var, region, tile);
            regions += runtime::remoteRegions(prog_, var, region, tile);
            padding += runtime::paddingBytes(prog_, var, region);
            memory += region.numElements() * bytes;
          }
        }
        int64_t exchange =
            cost_.exchangePhaseCycles(cost_.tileExchangeCycles(received, regions));
        // The vertex writes the padding it reads itself.
        worstCycles =
            std::max(worstCycles, exchange + vertexCycles(plan, loops, padding));
        worstMemory = std::max(worstMemory, memory);
      }
      prog_.variables.resize(tentative);
      bool fits = worstMemory <= budget_;
      auto better = [&] {
        if (!best.valid)
          return true;
        if (fits != best.fits)
          return fits;
        if (!fits)
          return worstMemory < best.memory;
        if (worstCycles != best.cycles)
          return worstCycles < best.cycles;
        return pieces < best.pieces;
      };
      if (better()) {
        best.valid = true;
        best.fits = fits;
        best.cycles = worstCycles;
        best.memory = worstMemory;
        best.pieces = pieces;
        best.mapping = m;
      }
    }
    int64_t j = rank - 1;
    while (j >= 0 && ++at[j] == cands[j].size())
      at[j--] = 0;
    if (j < 0 || evaluated == (inTrial_ ? kMaxCandidatesCostedInTrials
                                         : kMaxCandidatesCosted))
      break;
  }
  if (!best.valid)
    return plan.op.emitError("ipu-map-tiles: no way to split this op over ")
           << numTiles_ << " tiles";
  plan.mapping = best.mapping;
  plan.cycles = best.cycles;
  plan.fits = best.fits;
  // Place unplaced operands where this plan reads them.
  for (const Input &in : plan.inputs) {
    if (variableOf(in.value) >= 0)
      continue;
    Value leaf = deferredViews_.lookup(in.value);
    if (!leaf)
      leaf = in.value;
    if (auto aligned =
            alignedMapping(in.value, in.access, plan, plan.mapping)) {
      // A weight loaded twice keeps the placement of its first load.
      if (auto load = leaf.getDefiningOp<ml_program::GlobalLoadConstOp>();
          load && globalVars_.count(load.getGlobal().getLeafReference())) {
        vars_[leaf] = globalVars_[load.getGlobal().getLeafReference()];
        if (leaf != in.value)
          addView(in.value, leaf);
        continue;
      }
      TileMapping placed = *aligned;
      if (leaf.getDefiningOp<ml_program::GlobalLoadConstOp>())
        placed.firstTile +=
            weightOffset(plan.mapping, placed, elementBytes(in.value.getType()));
      placeAligned(in.value, placed);
    } else {
      placeLinear(in.value);
    }
  }
  return success();
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
  weight.forEachPiece([&](int64_t tile, const runtime::Box &box) {
    pieces.push_back({tile, box.numElements() * elementBytes});
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
    int64_t offset = offsetOf(block), load = 0;
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

LogicalResult Planner::addEpilogueInputs(linalg::GenericOp generic,
                                         linalg::GenericOp resultOf, Plan &plan) {
  Value result = plan.epilogueReshape ? plan.epilogueReshape->getResult(0)
                                      : resultOf->getResult(0);
  // The output's indices in the op's loops, as indices of the epilogue's
  // operands (through the reshape).
  AffineMap outMap = generic.getMatchingIndexingMap(generic.getDpsInitOperand(0));
  if (plan.epilogueReshape)
    outMap = reshapedMap(outMap,
                         cast<RankedTensorType>(generic->getResult(0).getType()).getShape(),
                         cast<RankedTensorType>(result.getType()).getShape());
  std::vector<Input> inputs;
  for (OpOperand *operand : plan.epilogue.getDpsInputOperands()) {
    Value v = operand->get();
    if (v == result) {
      plan.epilogueResultOperand = operand->getOperandNumber();
      continue;
    }
    bool before = isa<BlockArgument>(v) ||
                  (v.getDefiningOp()->getBlock() == generic->getBlock() &&
                   v.getDefiningOp()->isBeforeInBlock(generic));
    if (!before || (variableOf(v) < 0 && !isUnplacedLeaf(v)))
      return failure();
    Input in;
    in.value = v;
    in.map = plan.epilogue.getMatchingIndexingMap(operand).compose(outMap);
    in.access = toAccessMap(in.map);
    inputs.push_back(in);
  }
  for (Input &in : inputs) {
    plan.epilogueInputs.push_back(plan.inputs.size());
    plan.inputs.push_back(std::move(in));
  }
  return success();
}

LogicalResult Planner::planOp(linalg::GenericOp generic, linalg::GenericOp resultOf) {
  Plan plan;
  if (failed(describe(generic, plan)))
    return failure();
  if (generic->getNumResults() == 1)
    std::tie(plan.epilogue, plan.epilogueReshape) =
        epilogueOf(generic, (resultOf ? resultOf : generic)->getResult(0));
  if (plan.epilogue && failed(addEpilogueInputs(generic, resultOf ? resultOf : generic, plan)))
    plan.epilogue = {}, plan.epilogueReshape = nullptr;
  // A producer whose only use is the init of a later generic takes that
  // generic's mapping and is updated in place by it.
  if (generic->getNumResults() == 1 && generic->hasOneUse()) {
    auto user = dyn_cast<linalg::GenericOp>(*generic->getUsers().begin());
    if (user && user->getNumResults() == 1 &&
        user.getDpsInitOperand(0)->get() == generic->getResult(0))
      plan.isInitProducer = true;
  }
  if (!plan.isInitProducer) {
    // This op's own init, if computed by a deferred producer.
    Value init = generic.getDpsInitOperand(0)->get();
    if (auto producer = init.getDefiningOp<linalg::GenericOp>();
        producer && planOf_.count(producer) &&
        plans_[planOf_[producer]].isInitProducer) {
      plan.initProducer = producer;
      if (std::optional<arith::ConstantOp> cst = constantFillValue(producer))
        plan.initFill = cst->getValue();
    }
    if (plan.readsInit && !plan.initProducer) {
      // Read the init like any other input, through the output map.
      for (OpOperand &o : generic.getDpsInitsMutable()) {
        Input input;
        input.value = o.get();
        input.map = generic.getMatchingIndexingMap(&o);
        input.access = toAccessMap(input.map);
        if (variableOf(input.value) < 0 && !isUnplacedLeaf(input.value))
          return generic.emitError("ipu-map-tiles: an init that is not placed");
        plan.inputs.push_back(input);
      }
    }
    if (failed(planGeneric(plan)))
      return failure();
    if (plan.initProducer) {
      Plan &producer = plans_[planOf_[plan.initProducer]];
      mappingUndo_.emplace_back(planOf_[plan.initProducer], producer.mapping);
      producer.mapping = plan.mapping;
      int64_t var = addVariable(plan.initProducer->getResult(0), plan.mapping);
      vars_[generic->getResult(0)] = var;
      // The producer's inputs were waiting for this placement.
      for (const Input &in : producer.inputs)
        if (variableOf(in.value) < 0) {
          if (auto aligned = alignedMapping(in.value, in.access, producer,
                                            producer.mapping))
            placeAligned(in.value, *aligned);
          else
            placeLinear(in.value);
        }
    } else {
      for (Value r : generic->getResults())
        addVariable(r, plan.mapping);
    }
    // The epilogue updates the op's result in place: one variable (seen
    // through the reshape, a view of it).
    if (plan.epilogue) {
      if (plan.epilogueReshape) {
        addView(plan.epilogueReshape->getResult(0), generic->getResult(0));
        addView(plan.epilogue->getResult(0), generic->getResult(0));
      } else {
        vars_[plan.epilogue->getResult(0)] = variableOf(generic->getResult(0));
      }
      if (!inTrial_) {
        absorbed_.insert(plan.epilogue);
        if (plan.epilogueReshape)
          absorbed_.insert(plan.epilogueReshape);
      }
    }
  }
  planOf_[generic] = plans_.size();
  plans_.push_back(std::move(plan));
  return success();
}

LogicalResult Planner::planOpOrSplit(linalg::GenericOp op) {
  // Nothing to compute: the (empty) result is placed and the op becomes
  // an allocation.
  if (llvm::any_of(op->getResultTypes(), [](Type t) {
        return cast<RankedTensorType>(t).getNumElements() == 0;
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
  bool bestFits = plans_.back().fits;
  // Every option that fits, by increasing slices: (slices, cycles).
  SmallVector<std::pair<int64_t, int64_t>> fitting;
  if (bestFits)
    fitting.emplace_back(1, bestCycles);
  restore(before);

  // Split into slices of at least 4 iterations; each split pays the
  // combining step and one more sync. More slices cost less exchange per
  // vertex and more combining: the cost falls, then rises, so the search
  // stops at the first fitting split that is worse than the one before.
  int64_t previousCycles = -1;
  for (int64_t pieces = 2; pieces <= range / 4 && pieces <= numTiles_;
       pieces *= 2) {
    if (range % pieces != 0)
      break;
    SplitOps split = splitReduction(op, *acc, loop, pieces);
    bool planned;
    {
      // A split the planner cannot place is just not a candidate.
      ScopedDiagnosticHandler quiet(op.getContext(),
                                    [](Diagnostic &) { return success(); });
      planned = succeeded(planOp(split.fill)) &&
                succeeded(planOp(split.partial)) &&
                succeeded(planOp(split.combine, op));
    }
    int64_t cycles = 0;
    bool fits = planned;
    if (planned) {
      const Plan &partial = plans_[planOf_[split.partial]];
      const Plan &combine = plans_[planOf_[split.combine]];
      cycles = partial.cycles + combine.cycles + cost_.stepSyncCycles();
      fits = partial.fits && combine.fits;
    }
    restore(before);
    for (Operation *created : llvm::reverse(split.created))
      created->erase();
    if (!planned)
      continue;
    if ((fits && !bestFits) || (fits == bestFits && cycles < bestCycles)) {
      bestCycles = cycles;
      bestFits = fits;
      bestPieces = pieces;
    }
    if (fits)
      fitting.emplace_back(pieces, cycles);
    if (fits && previousCycles >= 0 && cycles > previousCycles)
      break;
    previousCycles = fits ? cycles : -1;
  }
  inTrial_ = false;
  // The fewest slices within kSplitTolerance of the cheapest.
  if (bestFits)
    for (auto [pieces, cycles] : fitting)
      if (cycles <= bestCycles * (1 + kSplitTolerance)) {
        bestPieces = pieces;
        break;
      }
  if (bestPieces == 1)
    return planOp(op);
  SplitOps split = splitReduction(op, *acc, loop, bestPieces);
  if (failed(planOp(split.fill)) || failed(planOp(split.partial)) ||
      failed(planOp(split.combine, op)))
    return failure();
  op->replaceAllUsesWith(split.combine->getResults());
  op->erase();
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
  for (Operation &op : body)
    ops.push_back(&op);
  for (Operation *opPtr : ops) {
    Operation &op = *opPtr;
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
      continue;
    }
    if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
      placeLinear(insert.getSource());
      if (Operation *fill = insert.getDest().getDefiningOp();
          fill && paddingFills_.contains(fill)) {
        if (succeeded(addPaddedView(insert)))
          continue;
        // Padded for real: the fill is a step after all.
        paddingFills_.erase(fill);
        if (failed(planOpOrSplit(cast<linalg::GenericOp>(fill))))
          return failure();
      }
      Value dest = insert.getDest();
      if (!dest.hasOneUse())
        return insert.emitError(
            "ipu-map-tiles: an insert into a value that has "
            "other uses");
      if (dest.getDefiningOp<tensor::EmptyOp>() && variableOf(dest) < 0)
        placeLinear(dest);
      if (variableOf(dest) < 0)
        return insert.emitError("ipu-map-tiles: insert destination not placed");
      vars_[insert.getResult()] = variableOf(dest);
      continue;
    }
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
      if (!llvm::all_of(slice.getStaticStrides(),
                        [](int64_t s) { return s == 1; }) ||
          slice.getSourceType().getRank() != slice.getType().getRank())
        return slice.emitError(
            "ipu-map-tiles: slices need unit strides and the "
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
        return op.emitError("ipu-map-tiles: a reshape of a padded value other than by "
                            "unit dimensions (internal error: padded views are only "
                            "made for values generics read)");
      continue;
    }
    bool onTensors = llvm::any_of(op.getResultTypes(),
                                  [](Type t) { return isa<TensorType>(t); });
    if (onTensors)
      return op.emitError("ipu-map-tiles: cannot place '")
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
  return success();
}

FailureOr<func::FuncOp> Planner::outlineKernel(Plan &plan,
                                               ArrayRef<int64_t> pieceSizes,
                                               StringRef name) {
  linalg::GenericOp op = plan.op;
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  int64_t numLoops = plan.loopRanges.size();
  Box loops;
  loops.offsets.assign(numLoops, 0);
  loops.sizes.assign(plan.loopRanges.begin(), plan.loopRanges.end());
  for (auto [j, l] : llvm::enumerate(plan.outputLoops))
    loops.sizes[l] = pieceSizes[j];

  // Signature: loop offsets, input regions, output pieces.
  SmallVector<Type> argTypes(numLoops, IndexType::get(ctx));
  SmallVector<RankedTensorType> inTypes;
  for (const Input &in : plan.inputs) {
    auto t = cast<RankedTensorType>(resolve(in.value).getType());
    Box region = in.access.region(loops, t.getShape());
    inTypes.push_back(RankedTensorType::get(region.sizes, t.getElementType()));
    argTypes.push_back(MemRefType::get(region.sizes, t.getElementType()));
  }
  SmallVector<RankedTensorType> outTypes;
  for (Type r : op->getResultTypes()) {
    auto t = RankedTensorType::get(pieceSizes, getElementTypeOrSelf(r));
    outTypes.push_back(t);
    argTypes.push_back(MemRefType::get(pieceSizes, t.getElementType()));
  }
  OpBuilder mb(module_.getBodyRegion());
  mb.setInsertionPointToEnd(module_.getBody());
  auto func =
      func::FuncOp::create(mb, loc, name, FunctionType::get(ctx, argTypes, {}));
  func->setAttr(ipu::kVertexAttrName, UnitAttr::get(ctx));
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);

  // Input regions may be the producer's own tile memory (a local piece is
  // not copied), so they are read-only; only the output pieces are written.
  auto argTensor = [&](unsigned argIndex, RankedTensorType type,
                       bool writable) -> Value {
    return bufferization::ToTensorOp::create(b, loc, type,
                                             entry->getArgument(argIndex),
                                             /*restrict=*/true, writable);
  };
  // Placeholders of full shape stand for the operands while tiling; each
  // slice tiling takes of them is then replaced by the region argument.
  IRMapping mapping;
  DenseMap<Value, unsigned> placeholderInput;
  SmallVector<Operation *> placeholders;
  SmallVector<Value> inArgs;
  for (auto [i, in] : llvm::enumerate(plan.inputs)) {
    Value value = resolve(in.value);
    Value arg = argTensor(numLoops + i, inTypes[i], /*writable=*/false);
    inArgs.push_back(arg);
    // Whole inputs (captured, or read through a map that is not a box) are
    // the argument itself: tiling slices it inside the kernel if it must.
    if (in.captured || in.access.full) {
      if (!mapping.contains(value))
        mapping.map(value, arg);
      continue;
    }
    auto t = cast<RankedTensorType>(value.getType());
    auto ph = tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType());
    placeholders.push_back(ph);
    placeholderInput[ph] = i;
    if (!mapping.contains(value))
      mapping.map(value, ph.getResult());
  }
  DenseSet<Value> localPlaceholders;
  for (OpOperand *in : op.getDpsInputOperands()) {
    if (mapping.contains(in->get()) ||
        !in->get().getDefiningOp<tensor::EmptyOp>())
      continue;
    auto t = cast<RankedTensorType>(in->get().getType());
    auto ph = tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType());
    placeholders.push_back(ph);
    localPlaceholders.insert(ph);
    mapping.map(in->get(), ph.getResult());
  }
  // Scalar constants used as operands or in the body.
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(op.getRegion(), captured);
  for (Value v : op->getOperands())
    captured.insert(v);
  for (Value v : captured)
    if (!mapping.contains(v) && !isa<RankedTensorType>(v.getType()))
      mapping.map(v, b.clone(*v.getDefiningOp())->getResult(0));
  // The inits: output placeholders (read only when the body reads them and
  // they are not inputs already).
  SmallVector<Value> outArgs;
  for (auto [k, t] : llvm::enumerate(outTypes))
    outArgs.push_back(
        argTensor(numLoops + plan.inputs.size() + k, t, /*writable=*/true));
  for (OpOperand &init : op.getDpsInitsMutable()) {
    if (mapping.contains(init.get()))
      continue;
    auto t = cast<RankedTensorType>(init.get().getType());
    auto ph = tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType());
    placeholders.push_back(ph);
    mapping.map(init.get(), ph.getResult());
  }
  auto clone = cast<linalg::GenericOp>(b.clone(*op, mapping));
  // A tensor both read as an operand and captured by the body (an add
  // fused with a resize of its own operand) was mapped to the operand's
  // placeholder: the body's reads take the captured region instead.
  for (auto [i, in] : llvm::enumerate(plan.inputs)) {
    if (!in.captured)
      continue;
    Value mapped = mapping.lookupOrNull(resolve(in.value));
    if (mapped && mapped != inArgs[i])
      mapped.replaceUsesWithIf(inArgs[i], [&](OpOperand &use) {
        return clone->isProperAncestor(use.getOwner());
      });
  }

  SmallVector<OpFoldResult> offsets, sizes;
  for (int64_t l = 0; l < numLoops; ++l) {
    bool isOutput = llvm::is_contained(plan.outputLoops, l);
    offsets.push_back(isOutput ? OpFoldResult(entry->getArgument(l))
                               : OpFoldResult(b.getIndexAttr(0)));
    sizes.push_back(b.getIndexAttr(loops.sizes[l]));
  }
  FailureOr<TilingResult> tiled =
      cast<TilingInterface>(clone.getOperation())
          .getTiledImplementation(b, offsets, sizes);
  if (failed(tiled) || tiled->tiledOps.size() != 1)
    return op.emitError(
        "ipu-map-tiles: could not tile this op (internal error)");
  auto tiledOp = cast<linalg::GenericOp>(tiled->tiledOps.front());

  // Operands: slices of input placeholders -> region arguments.
  for (OpOperand &operand : tiledOp->getOpOperands()) {
    Value v = operand.get();
    if (!isa<RankedTensorType>(v.getType()))
      continue;
    bool isInit = tiledOp.isDpsInit(&operand);
    Value source = v;
    if (auto slice = v.getDefiningOp<tensor::ExtractSliceOp>())
      source = slice.getSource();
    if (isInit) {
      unsigned k = operand.getOperandNumber() - tiledOp.getNumDpsInputs();
      // An init that is a separate input (a reduction's zeros, shared by
      // other readers) is copied into the output piece, which the op then
      // accumulates into: the input region itself is never written.
      Value replacement = outArgs[k];
      if (plan.fillsInit()) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(tiledOp);
        Value value = arith::ConstantOp::create(b, loc, plan.initFill);
        replacement = linalg::FillOp::create(b, loc, ValueRange{value},
                                             ValueRange{outArgs[k]})
                          ->getResult(0);
      }
      if (auto it = placeholderInput.find(source);
          it != placeholderInput.end()) {
        Value region = inArgs[it->second];
        if (region.getType() != v.getType())
          return op.emitError("ipu-map-tiles: init region ")
                 << v.getType() << " differs from " << region.getType()
                 << " (internal error)";
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(tiledOp);
        replacement =
            linalg::CopyOp::create(b, loc, region, outArgs[k]).getResult(0);
      }
      if (replacement.getType() != v.getType())
        return op.emitError("ipu-map-tiles: init region ")
               << v.getType() << " differs from " << replacement.getType()
               << " (internal error)";
      operand.set(replacement);
      continue;
    }
    if (llvm::is_contained(inArgs, source))
      continue;
    if (localPlaceholders.contains(source)) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(tiledOp);
      auto t = cast<RankedTensorType>(v.getType());
      operand.set(
          tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType()));
      continue;
    }
    auto it = placeholderInput.find(source);
    if (it == placeholderInput.end())
      return op.emitError("ipu-map-tiles: an operand of the tiled op is not a "
                          "region of an input (internal error)");
    const Input &input = plan.inputs[it->second];
    Value arg = inArgs[it->second];
    AffineMap map = tiledOp.getMatchingIndexingMap(&operand);
    if (map != input.map)
      return op.emitError("ipu-map-tiles: an input read through the map ")
             << AffineMapAttr::get(map) << " was planned for "
             << AffineMapAttr::get(input.map) << " (internal error)";
    // Tiling takes the slice of an operand read at coeffs * loop + consts
    // from coeffs * offsets, consts left out, with an extent of
    // coeffs * (sizes - 1) + consts + 1, and keeps the op's map. The planned
    // region (AccessMap::region, which the IPU model hands the vertex) starts
    // at coeffs * offsets + consts and holds only what the op reads,
    // coeffs * (sizes - 1) + 1: the kernel reads it through the map less
    // its constants. (A strided slice's generic reads stride * i + offset.)
    auto sliceType = cast<RankedTensorType>(v.getType());
    auto argType = cast<RankedTensorType>(arg.getType());
    SmallVector<AffineExpr> shifted;
    bool regionsAgree = sliceType.getRank() == argType.getRank() &&
                        sliceType.hasStaticShape() &&
                        sliceType.getElementType() == argType.getElementType();
    for (auto [j, e] : llvm::enumerate(map.getResults())) {
      shifted.push_back(e - input.access.consts[j]);
      if (regionsAgree)
        regionsAgree = sliceType.getDimSize(j) - input.access.consts[j] ==
                       argType.getDimSize(j);
    }
    if (!regionsAgree)
      return op.emitError("ipu-map-tiles: input region ")
             << v.getType() << " of the tiled op, less the map's constants "
             << ArrayRef<int64_t>(input.access.consts)
             << ", differs from the planned " << arg.getType()
             << " (internal error)";
    operand.set(arg);
    if (llvm::any_of(input.access.consts, [](int64_t c) { return c != 0; })) {
      SmallVector<AffineMap> maps = tiledOp.getIndexingMapsArray();
      maps[operand.getOperandNumber()] =
          simplifyAffineMap(AffineMap::get(map.getNumDims(),
                                           map.getNumSymbols(), shifted,
                                           map.getContext()));
      tiledOp.setIndexingMapsAttr(b.getAffineMapArrayAttr(maps));
    }
  }
  // Captured tensors read in part (a gather's table, by the columns of the
  // piece): the argument holds only the region, so the body's indices,
  // which tiling made global, shift by the region's offsets.
  for (auto [i, in] : llvm::enumerate(plan.inputs)) {
    if (!in.captured || in.access.full)
      continue;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(tiledOp);
    SmallVector<Value> regionOffsets;
    for (auto [k, row] : llvm::enumerate(in.access.coeffs)) {
      Value offset;
      if (in.access.consts[k] != 0)
        offset = arith::ConstantIndexOp::create(b, loc, in.access.consts[k]);
      for (auto [l, c] : llvm::enumerate(row)) {
        if (c == 0 || !llvm::is_contained(plan.outputLoops, static_cast<int64_t>(l)))
          continue;
        Value term = entry->getArgument(l);
        if (c != 1)
          term = arith::MulIOp::create(b, loc, term,
                                       arith::ConstantIndexOp::create(b, loc, c));
        offset = offset ? arith::AddIOp::create(b, loc, offset, term).getResult() : term;
      }
      regionOffsets.push_back(offset);
    }
    tiledOp.getRegion().walk([&](tensor::ExtractOp extract) {
      if (extract.getTensor() != inArgs[i])
        return;
      b.setInsertionPoint(extract);
      for (auto [k, offset] : llvm::enumerate(regionOffsets))
        if (offset)
          extract.getIndicesMutable()[k].set(arith::SubIOp::create(
              b, loc, extract.getIndices()[k], offset));
    });
  }
  SmallVector<Value> results(tiledOp->getResults());
  if (plan.epilogue) {
    // The epilogue's body on the piece, in place: element for element.
    Value piece = results.front();
    auto type = cast<RankedTensorType>(piece.getType());
    IRMapping constants;
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(plan.epilogue.getRegion(), captured);
    for (Value v : captured)
      constants.map(v, b.clone(*v.getDefiningOp())->getResult(0));
    // Operands in the epilogue's order: the piece, and the regions of its
    // other inputs.
    AffineMap id = b.getMultiDimIdentityMap(type.getRank());
    // Piece indices -> the epilogue's (its shape may lack unit dimensions).
    AffineMap toEpilogue = reshapedMap(
        id, cast<RankedTensorType>(op->getResult(0).getType()).getShape(),
        cast<RankedTensorType>(plan.epilogue->getResult(0).getType()).getShape());
    SmallVector<Value> ins;
    SmallVector<AffineMap> maps;
    for (size_t k = 0, other = 0; k < plan.epilogue.getNumDpsInputs(); ++k) {
      if (k == plan.epilogueResultOperand) {
        ins.push_back(piece);
        maps.push_back(id);
        continue;
      }
      Value region = inArgs[plan.epilogueInputs[other++]];
      ins.push_back(region);
      // -> this operand's (its region starts where the piece's indices map).
      maps.push_back(
          plan.epilogue.getMatchingIndexingMap(plan.epilogue.getDpsInputOperand(k))
              .compose(toEpilogue));
    }
    maps.push_back(id);
    auto epilogue = linalg::GenericOp::create(
        b, loc, TypeRange{type}, ins, ValueRange{piece}, maps,
        SmallVector<utils::IteratorType>(type.getRank(), utils::IteratorType::parallel));
    plan.epilogue.getRegion().cloneInto(&epilogue.getRegion(), constants);
    results = {epilogue->getResult(0)};
  }
  for (auto [k, result] : llvm::enumerate(results)) {
    auto store = bufferization::MaterializeInDestinationOp::create(
        b, loc, Type(), result,
        entry->getArgument(numLoops + plan.inputs.size() + k));
    store.setRestrict(true);
    store.setWritable(true);
  }
  func::ReturnOp::create(b, loc);
  clone->erase();
  // Dead slices and placeholders go; canonicalization later tidies the rest.
  SmallVector<Operation *> dead;
  func.walk([&](tensor::ExtractSliceOp s) {
    if (s->use_empty())
      dead.push_back(s);
  });
  for (Operation *d : dead)
    d->erase();
  for (Operation *p : placeholders)
    if (p->use_empty())
      p->erase();
  return func;
}

/// The kernel's signature and body as text, without its name: equal keys
/// mean the same code.
std::string structuralKey(func::FuncOp kernel) {
  std::string key;
  llvm::raw_string_ostream os(key);
  StringAttr name = kernel.getSymNameAttr();
  kernel.setSymName("vertex");
  kernel->print(os, OpPrintingFlags().printGenericOpForm());
  kernel.setSymNameAttr(name);
  return key;
}

LogicalResult Planner::emitComputeSet(Plan &plan, OpBuilder &b) {
  linalg::GenericOp op = plan.op;
  std::string name = "cs" + std::to_string(computeSets_++);
  // Distinct piece shapes: per dimension the chunk and the remainder.
  std::vector<std::vector<int64_t>> perDim;
  for (int64_t j = 0; j < plan.mapping.rank(); ++j) {
    int64_t dim = plan.mapping.shape[j], chunk = plan.mapping.chunks[j];
    std::vector<int64_t> sizes{std::min(dim, chunk)};
    if (dim % chunk != 0 && dim > chunk)
      sizes.push_back(dim % chunk);
    perDim.push_back(sizes);
  }
  std::vector<std::vector<int64_t>> shapes{{}};
  for (const auto &sizes : perDim) {
    std::vector<std::vector<int64_t>> next;
    for (const auto &s : shapes)
      for (int64_t n : sizes) {
        auto t = s;
        t.push_back(n);
        next.push_back(t);
      }
    shapes = std::move(next);
  }
  SmallVector<Attribute> kernels;
  SmallVector<int64_t> cycles;
  for (auto [k, shape] : llvm::enumerate(shapes)) {
    std::string kernelName = "vertex_" + name + "_" + std::to_string(k);
    FailureOr<func::FuncOp> kernel = outlineKernel(plan, shape, kernelName);
    if (failed(kernel))
      return failure();
    (*kernel)->setAttr("ipu.code_bytes", b.getI64IntegerAttr(codeBytes(plan)));
    // Ops that compute the same thing on the same shapes (the repeated
    // blocks of a network) share one kernel: less to compile, and its code
    // is stored once on a tile that runs both.
    std::string body = structuralKey(*kernel);
    auto [it, isNew] = kernelByBody_.try_emplace(body, kernelName);
    if (!isNew)
      (*kernel)->erase();
    kernels.push_back(FlatSymbolRefAttr::get(b.getContext(), it->second));
    Box loops;
    loops.offsets.assign(plan.loopRanges.size(), 0);
    loops.sizes.assign(plan.loopRanges.begin(), plan.loopRanges.end());
    for (auto [j, l] : llvm::enumerate(plan.outputLoops))
      loops.sizes[l] = shape[j];
    int64_t fillBytes = 0;
    if (plan.fillsInit()) {
      fillBytes = elementBytes(op->getResult(0).getType());
      for (int64_t n : shape)
        fillBytes *= n;
    }
    cycles.push_back(vertexCycles(plan, loops, fillBytes));
  }
  SmallVector<Value> inputs;
  SmallVector<Attribute> maps, extents;
  SmallVector<int64_t> full;
  bool hasExtents = false;
  for (auto [i, in] : llvm::enumerate(plan.inputs)) {
    inputs.push_back(resolve(in.value));
    maps.push_back(AffineMapAttr::get(in.map));
    if (in.access.full)
      full.push_back(i);
    extents.push_back(b.getDenseI64ArrayAttr(in.access.extents));
    hasExtents |= !in.access.extents.empty();
  }
  SmallVector<Value> inits;
  if (plan.initProducer)
    inits.push_back(op.getDpsInitOperand(0)->get());
  b.setInsertionPoint(op);
  auto cs = ipu::ComputeSetOp::create(
      b, op.getLoc(), op->getResultTypes(), inputs, inits, name,
      plan.loopRanges, plan.outputLoops, b.getArrayAttr(maps), full,
      hasExtents ? b.getArrayAttr(extents) : ArrayAttr(), b.getArrayAttr(kernels), cycles,
      plan.macs,
      ipu::toAttr(b.getContext(), plan.mapping));
  replace(op, cs->getResults());
  if (plan.epilogue) {
    ValueRange result = cs->getResults();
    if (plan.epilogueReshape) {
      auto view = ipu::ViewOp::create(b, op.getLoc(), plan.epilogue->getResult(0).getType(),
                                      cs->getResult(0));
      result = view->getResults();
    }
    replace(plan.epilogue, result);
    plan.epilogue->erase();
    if (plan.epilogueReshape)
      plan.epilogueReshape->erase();
  }
  op->erase();
  return success();
}

LogicalResult Planner::rewrite() {
  MLIRContext *ctx = module_.getContext();
  // Placements of leaves, as attributes.
  auto mappingOf = [&](Value v) {
    int64_t id = variableOf(v);
    return ipu::toAttr(ctx, prog_.variables[id].mapping);
  };
  for (BlockArgument arg : main_.getArguments())
    if (variableOf(arg) >= 0)
      main_.setArgAttr(arg.getArgNumber(), ipu::kMappingAttrName,
                       mappingOf(arg));
  SmallVector<Operation *> ops;
  for (Operation &op : main_.getBody().front())
    ops.push_back(&op);
  OpBuilder b(ctx);
  for (Operation *op : ops) {
    if (absorbed_.contains(op))
      continue; // erased with its producer's compute set
    if (auto load = dyn_cast<ml_program::GlobalLoadConstOp>(op)) {
      if (variableOf(load.getResult()) >= 0)
        load->setAttr(ipu::kMappingAttrName, mappingOf(load.getResult()));
      continue;
    }
    if (paddingFills_.contains(op))
      continue; // erased with its insert
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      // A fill its user's vertices do (Plan::fillsInit) is only memory.
      bool filledByUser = false;
      if (plans_[planOf_[generic]].isInitProducer) {
        auto user = dyn_cast<linalg::GenericOp>(*generic->getUsers().begin());
        filledByUser = user && planOf_.count(user) &&
                       plans_[planOf_[user]].initProducer == generic &&
                       plans_[planOf_[user]].fillsInit();
      }
      if (plans_[planOf_[generic]].isEmpty || filledByUser) {
        b.setInsertionPoint(generic);
        SmallVector<Value> allocs;
        for (Value r : generic->getResults())
          allocs.push_back(ipu::AllocOp::create(b, generic.getLoc(), r.getType(),
                                                mappingOf(r)));
        replace(generic, allocs);
        generic->erase();
        continue;
      }
      if (failed(emitComputeSet(plans_[planOf_[generic]], b)))
        return failure();
      continue;
    }
    if (auto empty = dyn_cast<tensor::EmptyOp>(op)) {
      if (variableOf(empty.getResult()) >= 0 && !empty->use_empty()) {
        b.setInsertionPoint(empty);
        auto alloc = ipu::AllocOp::create(b, empty.getLoc(), empty.getType(),
                                          mappingOf(empty.getResult()));
        replace(empty, alloc->getResults());
      }
      continue;
    }
    if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
      b.setInsertionPoint(insert);
      if (int64_t var = variableOf(insert.getResult());
          var >= 0 && prog_.variables[var].isPadded()) {
        // Virtual padding: a view of the source (as addPaddedView made
        // it), the fill gone. (Forgotten as it goes: ops made here may
        // reuse its address.)
        const runtime::Variable &padded = prog_.variables[var];
        auto fill = insert.getDest().getDefiningOp<linalg::GenericOp>();
        auto value = cast<TypedAttr>(constantFillValue(fill)->getValue());
        auto view = ipu::PadViewOp::create(b, insert.getLoc(), insert.getType(),
                                           insert.getSource(), padded.padLow,
                                           padded.padHigh, value);
        replace(insert, view->getResults());
        insert.erase();
        Value init = fill.getDpsInitOperand(0)->get();
        paddingFills_.erase(fill);
        fill->erase();
        if (Operation *empty = init.getDefiningOp<tensor::EmptyOp>(); empty && empty->use_empty())
          empty->erase();
        continue;
      }
      int64_t rank = insert.getSourceType().getRank();
      if (insert.getSourceType().getRank() != insert.getDestType().getRank())
        return insert.emitError("ipu-map-tiles: rank-reducing inserts are not "
                                "supported");
      auto copy = ipu::CopyOp::create(
          b, insert.getLoc(), insert.getType(), insert.getSource(),
          insert.getDest(), SmallVector<int64_t>(rank, 0),
          insert.getSourceType().getShape(), insert.getStaticOffsets());
      replace(insert, copy->getResults());
      insert.erase();
      continue;
    }
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
      b.setInsertionPoint(slice);
      auto alloc = ipu::AllocOp::create(b, slice.getLoc(), slice.getType(),
                                        mappingOf(slice.getResult()));
      auto copy = ipu::CopyOp::create(
          b, slice.getLoc(), slice.getType(), slice.getSource(),
          alloc.getResult(), slice.getStaticOffsets(),
          slice.getType().getShape(),
          SmallVector<int64_t>(slice.getType().getRank(), 0));
      replace(slice, copy->getResults());
      slice.erase();
      continue;
    }
    if (isa<tensor::ReshapeOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
            op)) {
      b.setInsertionPoint(op);
      auto view = ipu::ViewOp::create(
          b, op->getLoc(), op->getResult(0).getType(), op->getOperand(0));
      replace(op, view->getResults());
      op->erase();
      continue;
    }
  }
  // Leftovers: empties used only as kernel-local inits, shape constants.
  SmallVector<Operation *> dead;
  for (Operation &op : llvm::reverse(main_.getBody().front()))
    if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty() && isPure(&op))
      dead.push_back(&op);
  for (Operation *op : dead)
    if (op->use_empty())
      op->erase();
  return success();
}

struct IPUMapTiles : tessera::ipu::impl::IPUMapTilesBase<IPUMapTiles> {
  using IPUMapTilesBase::IPUMapTilesBase;
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
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("ipu-map-tiles: the module has no @main");
      return signalPassFailure();
    }
    if (!main.getBody().hasOneBlock()) {
      main.emitError(
          "ipu-map-tiles: @main must be a single block (no control flow)");
      return signalPassFailure();
    }
    separateInitsFromInputs(main);
    Planner planner(module, main, *target, availableMemoryProportion);
    if (failed(planner.plan()) || failed(planner.rewrite()))
      return signalPassFailure();
  }
};

} // namespace
