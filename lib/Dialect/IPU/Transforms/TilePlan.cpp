//===- TilePlan.cpp - what the tile planner and its rewrite share --------===//

#include "TilePlan.h"

#include "tessera/Codegen/ScatterAdd.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"

#include <functional>
#include <set>
#include <tuple>

using namespace mlir;

namespace tessera::ipu::tiling {

FailureOr<func::FuncOp> mainToMap(ModuleOp module, StringRef pass) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return module.emitError(pass) << ": the module has no @main";
  if (!main.getBody().hasOneBlock())
    return main.emitError(pass) << ": @main must be a single block (no control flow)";
  return main;
}

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
/// tensor.extract of it takes `linalg.index l` there (a gather's columns),
/// or follows it in blocks of B when the index is `l * B + x` (a gather
/// split by rows: block l of the table, read at data-dependent places
/// within it); other dimensions are read whole (a gather's rows, at
/// data-dependent places). `full` when no dimension follows a loop or the
/// body uses the tensor otherwise.
static void capturedAccess(linalg::GenericOp op, Value captured, AffineMap &map,
                    AccessMap &access) {
  auto type = cast<RankedTensorType>(captured.getType());
  int64_t rank = type.getRank();
  constexpr int64_t kUnseen = -2, kWhole = -1;
  // Per dimension: the loop it follows (or kUnseen/kWhole), and the block.
  SmallVector<std::pair<int64_t, int64_t>> follows(rank, {kUnseen, 1});
  auto loopOf = [&](Value v) -> int64_t {
    auto index = v.getDefiningOp<linalg::IndexOp>();
    return index && index->getParentOp() == op.getOperation()
               ? static_cast<int64_t>(index.getDim())
               : kWhole;
  };
  // `l * B + x`, either way round: (l, B), else (kWhole, 1).
  auto blockOf = [&](Value v) -> std::pair<int64_t, int64_t> {
    auto add = v.getDefiningOp<arith::AddIOp>();
    if (!add)
      return {kWhole, 1};
    for (Value term : {add.getLhs(), add.getRhs()}) {
      auto mul = term.getDefiningOp<arith::MulIOp>();
      if (!mul)
        continue;
      IntegerAttr block;
      if (loopOf(mul.getLhs()) >= 0 && matchPattern(mul.getRhs(), m_Constant(&block)) &&
          block.getInt() > 0)
        return {loopOf(mul.getLhs()), block.getInt()};
    }
    return {kWhole, 1};
  };
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
      std::pair<int64_t, int64_t> f{loopOf(index), 1};
      if (f.first < 0)
        f = blockOf(index);
      follows[k] = follows[k].first == kUnseen || follows[k] == f
                       ? f
                       : std::pair<int64_t, int64_t>{kWhole, 1};
    }
  }
  MLIRContext *ctx = op.getContext();
  unsigned numLoops = op.getNumLoops();
  SmallVector<AffineExpr> exprs;
  SmallVector<int64_t> extents;
  for (int64_t k = 0; k < rank; ++k) {
    auto [loop, block] = follows[k];
    bool follow = onlyExtracts && loop >= 0;
    exprs.push_back(follow ? getAffineDimExpr(loop, ctx) * block
                           : getAffineConstantExpr(0, ctx));
    extents.push_back(follow ? block : type.getDimSize(k));
  }
  map = AffineMap::get(numLoops, 0, exprs, ctx);
  access = toAccessMap(map);
  if (llvm::all_of(exprs, [](AffineExpr e) { return isa<AffineConstantExpr>(e); })) {
    access.full = true;
    return;
  }
  access.extents.assign(extents.begin(), extents.end());
}
/// its reshape to `to`, which only adds or drops unit dimensions.
///
/// A unit dimension of `to` keeps the index of the unit dimension of `from`
/// at its place (both are 0), so that the map reads the same whether a
/// dimension is 1 or not: a batch of 1 (N x 1 x C x H x W convolution
/// output -> N x C x H x W) indexes like a batch of 2, and kernels compiled
/// for one serve the other. Other unit dimensions of `to` read 0.
AffineMap reshapedMap(AffineMap map, ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  SmallVector<AffineExpr> exprs;
  size_t j = 0;
  for (int64_t d : to) {
    if (d == 1) {
      bool paired = j < from.size() && from[j] == 1;
      exprs.push_back(paired ? map.getResult(j++)
                             : getAffineConstantExpr(0, map.getContext()));
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
/// shape, and its type or another: Plan::epilogueWritesOwnResult) and any
/// other inputs at the same indices or broadcast
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
      cast<RankedTensorType>(user->getResult(0).getType()).getShape() !=
          cast<RankedTensorType>(result.getType()).getShape() ||
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


bool Plan::epilogueWritesOwnResult() const {
  linalg::GenericOp reduction = op, reader = epilogue;
  return reader && getElementTypeOrSelf(reader->getResult(0).getType()) !=
                       getElementTypeOrSelf(reduction->getResult(0).getType());
}

TileMapping mappingThroughUnitDims(const TileMapping &mapping, llvm::ArrayRef<int64_t> shape) {
  TileMapping out;
  out.shape.assign(shape.begin(), shape.end());
  out.firstTile = mapping.firstTile;
  out.mirrorCounts = mapping.mirrorCounts;
  out.mirrorStrides = mapping.mirrorStrides;
  size_t s = 0;
  for (int64_t size : shape) {
    if (size == 1) {
      out.chunks.push_back(1);
      out.tileStrides.push_back(0);
      continue;
    }
    while (s < mapping.shape.size() && mapping.shape[s] == 1)
      ++s;
    assert(s < mapping.shape.size() && mapping.shape[s] == size &&
           "a reshape by unit dimensions only");
    out.chunks.push_back(mapping.chunks[s]);
    out.tileStrides.push_back(mapping.tileStrides[s]);
    ++s;
  }
  return out;
}

/// Counts `op`'s body operations (see BodyOperations); with `inner` -1,
/// every one runs per element.
static BodyOperations countBodyOperations(linalg::GenericOp op, int64_t inner) {
  // Values that change along `inner`: its index, the operands whose maps
  // read it, and what is computed from them.
  llvm::DenseSet<Value> varying;
  Block &body = op.getRegion().front();
  if (inner >= 0)
    for (OpOperand &operand : op->getOpOperands())
      if (op.getMatchingIndexingMap(&operand).isFunctionOfDim(inner))
        varying.insert(body.getArgument(operand.getOperandNumber()));
  BodyOperations count;
  op.getRegion().walk([&](Operation *o) {
    if (isa<linalg::YieldOp>(o))
      return;
    // Operations in nested regions (a loop's, a branch's) count as
    // varying: their block arguments are not tracked.
    auto index = dyn_cast<linalg::IndexOp>(o);
    bool changes =
        inner < 0 || o->getNumRegions() != 0 || o->getParentOp() != op.getOperation() ||
        (index && static_cast<int64_t>(index.getDim()) == inner) ||
        llvm::any_of(o->getOperands(), [&](Value v) { return varying.contains(v); });
    if (changes)
      for (Value r : o->getResults())
        varying.insert(r);
    if (isa<linalg::IndexOp, arith::ConstantOp, arith::BitcastOp>(o))
      return;
    bool transcendental = isa<math::MathDialect>(o->getDialect()) || isa<arith::DivFOp>(o);
    ++(changes ? (transcendental ? count.elementTranscendental : count.elementSimple)
               : (transcendental ? count.rowTranscendental : count.rowSimple));
  });
  return count;
}

/// Vector instructions of `simple` and `transcendental` operations
/// (transcendentals and divisions take several).
static int64_t instructions(const target::CostModel &cost, int64_t simple,
                            int64_t transcendental) {
  using Instruction = target::CostModel::Instruction;
  return simple * cost.instructionCycles(Instruction::Simple) +
         transcendental * cost.instructionCycles(Instruction::Transcendental);
}

/// Instructions per element of a body that runs every operation per
/// element (at least the store of each).
static int64_t elementInstructions(const BodyOperations &body, const target::CostModel &cost) {
  return std::max<int64_t>(
      1, instructions(cost, body.elementSimple + body.rowSimple,
                      body.elementTranscendental + body.rowTranscendental));
}

LogicalResult describe(linalg::GenericOp op, Plan &plan) {
  plan.op = op;
  if (std::optional<codegen::ScatterAddForm> scatter = codegen::matchScatterAdd(op)) {
    plan.scatterAxis = scatter->axis;
    plan.scatterRank = scatter->resultRank;
  }
  for (Type t : op->getResultTypes())
    if (!cast<RankedTensorType>(t).hasStaticShape())
      return op.emitError("tile mapping needs static shapes");
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  plan.loopRanges.assign(ranges.begin(), ranges.end());
  for (int64_t r : plan.loopRanges)
    if (ShapedType::isDynamic(r))
      return op.emitError("tile mapping needs static loop ranges");
  // Every output reads the same projected permutation of parallel loops.
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!outMap.isProjectedPermutation())
    return op.emitError("tile mapping: outputs must be indexed by a projected "
                        "permutation of the loops");
  for (OpOperand &init : op.getDpsInitsMutable())
    if (op.getMatchingIndexingMap(&init) != outMap)
      return op.emitError("tile mapping: outputs with different indexing maps "
                          "are not supported");
  for (AffineExpr e : outMap.getResults()) {
    unsigned d = cast<AffineDimExpr>(e).getPosition();
    if (op.getIteratorTypesArray()[d] != utils::IteratorType::parallel)
      return op.emitError(
          "tile mapping: an output indexed by a reduction loop");
    plan.outputLoops.push_back(d);
  }
  for (OpOperand *in : op.getDpsInputOperands()) {
    if (!isa<RankedTensorType>(in->get().getType())) {
      // Scalars are cloned into the kernel: they must be constants.
      if (!matchPattern(in->get(), m_Constant()))
        return op.emitError(
            "tile mapping: a scalar operand that is not a constant");
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
      return op.emitError("tile mapping: the body reads a non-constant scalar "
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
  // Without reductions the vertex's innermost loop runs along the output's
  // last dimension.
  plan.body = countBodyOperations(
      op, !hasReduction && !plan.outputLoops.empty() ? plan.outputLoops.back() : -1);
  return success();
}

target::VertexWork opVertexWork(const Plan &plan, const target::CostModel &cost) {
  target::VertexWork work;
  Type elem = getElementTypeOrSelf(plan.op->getResult(0).getType());
  work.elementBytes = elementBytes(elem);
  work.contraction = plan.macs > 0;
  // A contraction runs at the rate of what it multiplies: fp16 operands
  // adding into f32 partials (fp16.32) take the AMP's fp16 rate.
  Type multiplied = elem;
  if (linalg::GenericOp op = plan.op; work.contraction && op.getNumDpsInputs() > 0)
    multiplied = getElementTypeOrSelf(op.getDpsInputOperand(0)->get().getType());
  work.halfPrecision = multiplied.isF16() || multiplied.isBF16();
  if (!work.contraction) {
    // At least the store of each element.
    work.instructions = std::max<int64_t>(
        1, instructions(cost, plan.body.elementSimple, plan.body.elementTranscendental));
    work.rowInstructions = instructions(cost, plan.body.rowSimple, plan.body.rowTranscendental);
  }
  // A scatter's: per index, its update's body (see vertexCycles).
  if (plan.scatterAxis >= 0)
    work.instructions = elementInstructions(plan.body, cost);
  if (plan.epilogue)
    work.epilogueInstructions = elementInstructions(countBodyOperations(plan.epilogue, -1), cost);
  return work;
}

int64_t vertexCycles(const Plan &plan, const Box &loops, const target::CostModel &cost,
                     int64_t fillBytes) {
  return vertexCycles(plan, opVertexWork(plan, cost), loops, cost, fillBytes);
}

int64_t vertexCycles(const Plan &plan, const target::VertexWork &ofOp, const Box &loops,
                     const target::CostModel &cost, int64_t fillBytes) {
  target::VertexWork work = ofOp;
  work.iterations = loops.numElements();
  // Rows of the output piece: the vertex's inner loop runs along the
  // output's last dimension, set up again for each row.
  for (size_t k = 0; k + 1 < plan.outputLoops.size(); ++k)
    work.rows *= loops.sizes[plan.outputLoops[k]];
  if (plan.epilogue) {
    work.epilogueElements = 1;
    for (int64_t l : plan.outputLoops)
      work.epilogueElements *= loops.sizes[l];
  }
  work.fillBytes = fillBytes;
  if (plan.scatterAxis >= 0) {
    // codegen-sparse-scatter-adds' loop: each index read and its row
    // computed once, and at worst (every index in this piece's rows) its
    // update added along the piece's other dimensions.
    int64_t indices = 1, row = 1;
    for (size_t l = plan.scatterRank; l < plan.loopRanges.size(); ++l)
      indices *= loops.sizes[l];
    for (int64_t l = 0; l < plan.scatterRank; ++l)
      if (l != plan.scatterAxis)
        row *= loops.sizes[l];
    work.rows = indices;
    work.iterations = indices * (row + ofOp.instructions);
    work.instructions = 1;
  }
  return cost.vertexCycles(work);
}

runtime::Box loopsOfPiece(const Plan &plan, const runtime::Box &piece) {
  runtime::Box loops;
  loops.offsets.assign(plan.loopRanges.size(), 0);
  loops.sizes.assign(plan.loopRanges.begin(), plan.loopRanges.end());
  for (auto [j, loop] : llvm::enumerate(plan.outputLoops)) {
    loops.offsets[loop] = piece.offsets[j];
    loops.sizes[loop] = piece.sizes[j];
  }
  return loops;
}

int64_t vertexCodeBytes(const Plan &plan, const target::CostModel &cost) {
  int64_t ops = 0;
  for (linalg::GenericOp op : {plan.op, plan.epilogue})
    if (op)
      op.getRegion().walk([&](Operation *) { ++ops; });
  return cost.vertexCodeBytes(plan.loopRanges.size(), ops);
}

LogicalResult addEpilogueInputs(linalg::GenericOp generic, Value result, Plan &plan,
                                llvm::function_ref<bool(Value)> canRead) {
  if (plan.epilogueReshape)
    result = plan.epilogueReshape->getResult(0);
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
    if (!before || !canRead(v))
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


/// Whether `plan`'s kernels can read piece sizes from the descriptors at
/// all: ops that read boxes of their operands (inputs that only give a
/// shape, tensor.empty, become empties of the piece's sizes), and no
/// scatter.
static bool readsSizesFromDescriptors(const Plan &plan) {
  if (plan.scatterAxis >= 0 || plan.outputLoops.empty())
    return false;
  return llvm::none_of(plan.inputs,
                       [](const Input &in) { return in.captured || in.access.full; });
}

bool runsShapeGeneric(const Plan &plan) {
  linalg::GenericOp op = plan.op;
  return op.getNumReductionLoops() == 0 && !plan.epilogue &&
         readsSizesFromDescriptors(plan);
}

std::optional<std::pair<size_t, size_t>> inputDimOfLoop(const Plan &plan, int64_t loop) {
  for (auto [i, in] : llvm::enumerate(plan.inputs)) {
    if (in.captured || in.access.full)
      continue;
    for (auto [k, row] : llvm::enumerate(in.access.coeffs)) {
      bool exactly = row[loop] == 1;
      for (auto [l, c] : llvm::enumerate(row))
        exactly &= static_cast<int64_t>(l) == loop || c == 0;
      if (exactly)
        return std::make_pair(i, k);
    }
  }
  return std::nullopt;
}

std::vector<bool> loopsReadFromDescriptor(const Plan &plan) {
  size_t numLoops = plan.loopRanges.size();
  std::vector<bool> dynamic(numLoops, false);
  if (!readsSizesFromDescriptors(plan))
    return dynamic;
  for (size_t l = 0; l < numLoops; ++l)
    dynamic[l] = llvm::is_contained(plan.outputLoops, static_cast<int64_t>(l)) ||
                 (plan.loopRanges[l] > 1 && inputDimOfLoop(plan, static_cast<int64_t>(l)));
  return dynamic;
}

std::vector<std::vector<int64_t>> finestGrids(llvm::ArrayRef<int64_t> shape, int64_t tiles,
                                              int64_t count, int64_t maxNodes) {
  if (count <= 0)
    return {};
  const size_t rank = shape.size();
  std::vector<std::vector<int64_t>> chunkSizes(rank);
  std::vector<double> elementsAfter(rank + 1, 1.0); // of dimensions j.. on
  for (size_t j = rank; j-- > 0;) {
    std::set<int64_t> sizes;
    for (int64_t p = 1; p <= std::min(shape[j], tiles); ++p)
      sizes.insert((shape[j] + p - 1) / p);
    chunkSizes[j].assign(sizes.begin(), sizes.end());
    elementsAfter[j] = elementsAfter[j + 1] * static_cast<double>(shape[j]);
  }
  // A max-heap of (piece elements, search order, chunks): the count finest.
  using Found = std::tuple<int64_t, int64_t, std::vector<int64_t>>;
  std::vector<Found> finest;
  std::vector<int64_t> chunks(rank);
  int64_t found = 0, nodes = 0;
  std::function<void(size_t, int64_t, int64_t)> search = [&](size_t j, int64_t pieces,
                                                             int64_t elements) {
    if (++nodes > maxNodes)
      return;
    if (static_cast<int64_t>(finest.size()) == count &&
        static_cast<double>(elements) * elementsAfter[j] / static_cast<double>(tiles / pieces) >=
            static_cast<double>(std::get<0>(finest.front())))
      return;
    if (j == rank) {
      finest.emplace_back(elements, found++, chunks);
      std::push_heap(finest.begin(), finest.end());
      if (static_cast<int64_t>(finest.size()) > count) {
        std::pop_heap(finest.begin(), finest.end());
        finest.pop_back();
      }
      return;
    }
    for (int64_t chunk : chunkSizes[j]) {
      int64_t more = pieces * ((shape[j] + chunk - 1) / chunk);
      if (more > tiles)
        continue;
      chunks[j] = chunk;
      search(j + 1, more, elements * chunk);
    }
  };
  search(0, 1, 1);
  std::sort_heap(finest.begin(), finest.end());
  std::vector<std::vector<int64_t>> grids;
  for (Found &f : finest)
    grids.push_back(std::move(std::get<2>(f)));
  return grids;
}

} // namespace tessera::ipu::tiling
