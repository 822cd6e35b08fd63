//===- IPUMapTiles.cpp - apply the tile plans: compute sets and vertices --===//
//
// Applies the #ipu.plan ipu-plan-tiles recorded on each linalg.generic of
// @main, in one sweep and without a cost model's choices: each generic
// becomes an ipu.compute_set over its plan's mapping (with the elementwise
// reader its plan absorbs as an epilogue, and its init updated in place when
// the plan says so), with one outlined vertex kernel per distinct piece
// shape, shared by every compute set whose kernel is the same code; inserts
// become copies or padded views, slices copies, reshapes views, and empty
// tensors and constant fills that vertices do themselves allocations. The
// kernels' cycles come from the target's CostModel.
//
//===----------------------------------------------------------------------===//

#include "TilePlan.h"
#include "tessera/Codegen/VectorizeContractions.h"
#include "tessera/Dialect/Graph/IR/Placement.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/RegionUtils.h"

namespace tessera::ipu {
#define GEN_PASS_DEF_IPUMAPTILES
#include "tessera/Dialect/IPU/Transforms/Passes.h.inc"
} // namespace tessera::ipu

using namespace mlir;
using namespace tessera;
using namespace tessera::ipu::tiling;


namespace {

class TileMapper {
public:
  TileMapper(ModuleOp module, func::FuncOp main, const target::IPUTarget &target)
      : module_(module), main_(main), cost_(target), numTiles_(target.totalTiles()) {}

  /// Rebuilds each generic's Plan from the op and its #ipu.plan; fails with
  /// an error on the op when a plan cannot apply.
  LogicalResult readPlans();
  LogicalResult rewrite();

  /// What the rewrite made, for the pass's statistics.
  int64_t numComputeSets = 0, numKernels = 0, numSharedKernels = 0;

private:
  LogicalResult readPlan(linalg::GenericOp op, ipu::PlanAttr attr, Plan &plan);
  LogicalResult emitComputeSet(Plan &plan, OpBuilder &b);
  FailureOr<func::FuncOp> outlineKernel(Plan &plan, ArrayRef<int64_t> pieceSizes,
                                        const std::vector<bool> &rangeFromDescriptor,
                                        StringRef name);

  ModuleOp module_;
  func::FuncOp main_;
  target::CostModel cost_;
  int64_t numTiles_;
  DenseMap<Operation *, Plan> plans_;
  /// Generics whose results initialize a generic planned in place.
  DenseSet<Operation *> initProducers_;
  /// Epilogues (and reshapes before them) done by their producer's vertices.
  DenseSet<Operation *> absorbed_;
  int64_t computeSets_ = 0;
  /// Outlined kernels by structuralHash.
  DenseMap<llvm::hash_code, SmallVector<func::FuncOp, 1>> kernels_;
  /// The kernel outlined before that is the same code as `kernel`, or
  /// `kernel`, now known.
  func::FuncOp findOrAddKernel(func::FuncOp kernel);
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

LogicalResult TileMapper::readPlan(linalg::GenericOp op, ipu::PlanAttr attr, Plan &plan) {
  if (failed(describe(op, plan)))
    return failure();
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  ipu::MappingAttr mapping = attr.getMapping();
  if (mapping.getChunks().size() != static_cast<size_t>(type.getRank()) ||
      mapping.getTileStrides().size() != static_cast<size_t>(type.getRank()))
    return op.emitError("ipu-map-tiles: the plan's mapping has rank ")
           << mapping.getChunks().size() << ", the op's results " << type.getRank();
  plan.mapping = ipu::fromAttr(mapping, type.getShape());
  plan.isEmpty = llvm::any_of(op->getResultTypes(), [](Type t) {
    return cast<RankedTensorType>(t).getNumElements() == 0;
  });
  // The runtime's check of a mapping: chunks, strides, and every piece on
  // its own tile of the target.
  if (!plan.isEmpty)
    if (llvm::Error err = plan.mapping.verify(numTiles_))
      return op.emitError("ipu-map-tiles: the plan's ") << llvm::toString(std::move(err));
  if (attr.getEpilogue()) {
    if (op->getNumResults() == 1)
      std::tie(plan.epilogue, plan.epilogueReshape) = epilogueOf(op, op->getResult(0));
    if (!plan.epilogue)
      return op.emitError("ipu-map-tiles: the plan fuses an epilogue, but the op's result "
                          "has no elementwise reader that can be one");
    if (failed(addEpilogueInputs(op, op->getResult(0), plan, [](Value) { return true; })))
      return op.emitError("ipu-map-tiles: the plan's epilogue reads a value defined after "
                          "the op");
    absorbed_.insert(plan.epilogue);
    if (plan.epilogueReshape)
      absorbed_.insert(plan.epilogueReshape);
  }
  plan.isInitProducer = initProducers_.contains(op);
  if (attr.getInPlace()) {
    Value init = op.getDpsInitOperand(0)->get();
    auto producer = init.getDefiningOp<linalg::GenericOp>();
    if (op->getNumResults() != 1 || !producer || !producer->hasAttr(ipu::kPlanAttrName) ||
        !init.hasOneUse())
      return op.emitError("ipu-map-tiles: the plan updates the init in place, but it is not "
                          "the result of a planned linalg.generic used only here");
    plan.initProducer = producer;
    if (std::optional<arith::ConstantOp> cst = constantFillValue(producer))
      plan.initFill = cst->getValue();
  } else if (plan.readsInit && !plan.isInitProducer) {
    // Read the init like any other input, through the output map.
    for (OpOperand &o : op.getDpsInitsMutable()) {
      Input input;
      input.value = o.get();
      input.map = op.getMatchingIndexingMap(&o);
      input.access = toAccessMap(input.map);
      plan.inputs.push_back(input);
    }
  }
  return success();
}

LogicalResult TileMapper::readPlans() {
  Block &body = main_.getBody().front();
  for (auto op : body.getOps<linalg::GenericOp>()) {
    auto attr = op->getAttrOfType<ipu::PlanAttr>(ipu::kPlanAttrName);
    if (attr && attr.getInPlace())
      if (auto producer = op.getDpsInitOperand(0)->get().getDefiningOp<linalg::GenericOp>())
        initProducers_.insert(producer);
  }
  for (auto op : body.getOps<linalg::GenericOp>()) {
    Attribute attr = op->getAttr(ipu::kPlanAttrName);
    if (!attr)
      continue; // an epilogue or a padding fill (checked by rewrite)
    auto plan = dyn_cast<ipu::PlanAttr>(attr);
    if (!plan)
      return op.emitError("ipu-map-tiles: '") << ipu::kPlanAttrName << "' must be an #ipu.plan";
    if (failed(readPlan(op, plan, plans_[op])))
      return failure();
  }
  return success();
}

/// Whether `kernel`'s init fill becomes its accumulators' first value (the
/// reduction it feeds is register-tiled, codegen::foldsFillIntoAccumulators):
/// then no vertex pass writes it, and the vertex's estimate charges none.
static bool fillIsFolded(func::FuncOp kernel) {
  WalkResult found = kernel.walk([&](linalg::FillOp fill) {
    for (Operation *user : fill->getResult(0).getUsers())
      if (auto reduction = dyn_cast<linalg::GenericOp>(user))
        if (reduction.getNumDpsInits() == 1 &&
            reduction.getDpsInitOperand(0)->get() == fill->getResult(0) &&
            codegen::foldsFillIntoAccumulators(reduction))
          return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found.wasInterrupted();
}

/// Outlines one vertex kernel of a plan (TileMapper::outlineKernel): a
/// function of the loop offsets, the input regions and the output pieces
/// that computes one piece of the op, then its epilogue. The op is cloned
/// onto placeholders of its operands' full shapes, tiled to the piece by
/// its TilingInterface, and the slices tiling takes of the placeholders
/// become the region arguments.
class KernelOutliner {
public:
  /// `inputs`: the values of `plan.inputs`, as rewritten so far.
  KernelOutliner(ModuleOp module, Plan &plan, ArrayRef<Value> inputs,
                 ArrayRef<int64_t> pieceSizes, const std::vector<bool> &rangeFromDescriptor)
      : module_(module), plan(plan), inputs(inputs), pieceSizes(pieceSizes),
        rangeFromDescriptor(rangeFromDescriptor), op(plan.op), ctx(op.getContext()),
        loc(op.getLoc()), numLoops(plan.loopRanges.size()) {}

  FailureOr<func::FuncOp> outline(StringRef name);

private:
  /// The kernel's signature, and the function with its entry block.
  void createFunction(StringRef name);
  /// Input regions may be the producer's own tile memory (a local piece is
  /// not copied), so they are read-only; only the output pieces are written.
  Value argTensor(unsigned argIndex, RankedTensorType type, bool writable);
  /// Clones the op onto placeholders of its operands (and the body's
  /// scalar constants).
  void cloneOntoPlaceholders();
  /// Tiles the clone to the piece at the loop offsets.
  LogicalResult tile();
  /// The tiled op's operands: slices of input placeholders -> region
  /// arguments; inits -> the output pieces (filled or copied first).
  LogicalResult bindOperands();
  LogicalResult bindInit(OpOperand &operand, Value source);
  LogicalResult bindInput(OpOperand &operand, Value source);
  /// Captured tensors read in part: their indices shift by the region's
  /// offsets.
  void shiftCapturedIndices();
  /// The pieces to store: the tiled op's, after the epilogue if any.
  SmallVector<Value> applyEpilogue();
  /// Stores the pieces, returns, and erases what tiling left unused.
  void finish(ArrayRef<Value> results);

  ModuleOp module_;
  Plan &plan;
  ArrayRef<Value> inputs;
  ArrayRef<int64_t> pieceSizes;
  const std::vector<bool> &rangeFromDescriptor;
  linalg::GenericOp op;
  MLIRContext *ctx;
  Location loc;
  int64_t numLoops;
  /// The loop box of one piece (at offset 0).
  Box loops;
  /// Generic over some loops' ranges (read from the descriptor).
  bool generic = false;
  SmallVector<RankedTensorType> inTypes, outTypes;
  func::FuncOp func;
  Block *entry = nullptr;
  std::optional<OpBuilder> builder;
  /// Operand placeholders while tiling; which input each stands for;
  /// those of inputs that only give a shape.
  IRMapping mapping;
  DenseMap<Value, unsigned> placeholderInput;
  SmallVector<Operation *> placeholders;
  DenseSet<Value> localPlaceholders;
  /// The region and output-piece arguments, as tensors.
  SmallVector<Value> inArgs, outArgs;
  linalg::GenericOp clone, tiledOp;
};

FailureOr<func::FuncOp> KernelOutliner::outline(StringRef name) {
  loops = loopsOfPiece(plan, Box(SmallVector<int64_t>(pieceSizes.size(), 0), pieceSizes));
  createFunction(name);
  cloneOntoPlaceholders();
  if (failed(tile()) || failed(bindOperands()))
    return failure();
  shiftCapturedIndices();
  finish(applyEpilogue());
  return func;
}

void KernelOutliner::createFunction(StringRef name) {
  // Signature: loop offsets, input regions, output pieces. A kernel generic
  // over some of its loops' ranges (loopsReadFromDescriptor) has a dynamic
  // size wherever they show: the output's dimensions and the inputs' that
  // those loops index.
  generic = llvm::is_contained(rangeFromDescriptor, true);
  auto readsDynamicLoop = [&](ArrayRef<int64_t> row) {
    for (auto [l, c] : llvm::enumerate(row))
      if (c != 0 && rangeFromDescriptor[l])
        return true;
    return false;
  };
  SmallVector<Type> argTypes(numLoops, IndexType::get(ctx));
  for (auto [i, in] : llvm::enumerate(plan.inputs)) {
    auto t = cast<RankedTensorType>(inputs[i].getType());
    Box region = in.access.region(loops, t.getShape());
    SmallVector<int64_t> sizes(region.sizes.begin(), region.sizes.end());
    for (auto [k, row] : llvm::enumerate(in.access.coeffs))
      if (readsDynamicLoop(row))
        sizes[k] = ShapedType::kDynamic;
    // A captured tensor read in blocks (a gather split by its table's
    // rows) whose last block is shorter: pieces of one output shape read
    // regions of two shapes, so that size comes from the descriptor (the
    // body reads it at data-dependent places, never as a loop bound).
    if (in.captured && !in.access.full)
      for (auto [k, row] : llvm::enumerate(in.access.coeffs))
        if (llvm::any_of(row, [](int64_t c) { return c != 0; }) &&
            t.getDimSize(k) % in.access.extent(k) != 0)
          sizes[k] = ShapedType::kDynamic;
    inTypes.push_back(RankedTensorType::get(sizes, t.getElementType()));
    argTypes.push_back(MemRefType::get(sizes, t.getElementType()));
  }
  SmallVector<int64_t> outSizes(pieceSizes);
  for (auto [j, l] : llvm::enumerate(plan.outputLoops))
    if (rangeFromDescriptor[l])
      outSizes[j] = ShapedType::kDynamic;
  SmallVector<Type> resultElements(op->getResultTypes());
  // An epilogue of another type writes a piece of its own, after the op's.
  if (plan.epilogueWritesOwnResult())
    resultElements.push_back(plan.epilogue->getResult(0).getType());
  for (Type r : resultElements) {
    auto t = RankedTensorType::get(outSizes, getElementTypeOrSelf(r));
    outTypes.push_back(t);
    argTypes.push_back(MemRefType::get(outSizes, t.getElementType()));
  }
  OpBuilder mb(module_.getBodyRegion());
  mb.setInsertionPointToEnd(module_.getBody());
  func =
      func::FuncOp::create(mb, loc, name, FunctionType::get(ctx, argTypes, {}));
  func->setAttr(ipu::kVertexAttrName, UnitAttr::get(ctx));
  entry = func.addEntryBlock();
  builder.emplace(OpBuilder::atBlockBegin(entry));
}

Value KernelOutliner::argTensor(unsigned argIndex, RankedTensorType type, bool writable) {
  return bufferization::ToTensorOp::create(*builder, loc, type, entry->getArgument(argIndex),
                                           /*restrict=*/true, writable);
}

void KernelOutliner::cloneOntoPlaceholders() {
  OpBuilder &b = *builder;
  // Placeholders of full shape stand for the operands while tiling; each
  // slice tiling takes of them is then replaced by the region argument.
  for (auto [i, in] : llvm::enumerate(plan.inputs)) {
    Value value = inputs[i];
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
  clone = cast<linalg::GenericOp>(b.clone(*op, mapping));
  // The plan is the compute set's, not the kernel's: kernels that differ
  // only in it are the same code.
  clone->removeAttr(ipu::kPlanAttrName);
  // A tensor both read as an operand and captured by the body (an add
  // fused with a resize of its own operand) was mapped to the operand's
  // placeholder: the body's reads take the captured region instead.
  for (auto [i, in] : llvm::enumerate(plan.inputs)) {
    if (!in.captured)
      continue;
    Value mapped = mapping.lookupOrNull(inputs[i]);
    if (mapped && mapped != inArgs[i])
      mapped.replaceUsesWithIf(inArgs[i], [&](OpOperand &use) {
        return clone->isProperAncestor(use.getOwner());
      });
  }

}

LogicalResult KernelOutliner::tile() {
  OpBuilder &b = *builder;
  SmallVector<OpFoldResult> offsets, sizes;
  for (int64_t l = 0; l < numLoops; ++l) {
    auto output = llvm::find(plan.outputLoops, l);
    bool isOutput = output != plan.outputLoops.end();
    offsets.push_back(isOutput ? OpFoldResult(entry->getArgument(l))
                               : OpFoldResult(b.getIndexAttr(0)));
    // A dynamic range: the output piece's size, or a reduction's from the
    // input dimension that gives it.
    if (rangeFromDescriptor[l] && isOutput) {
      sizes.push_back(
          tensor::DimOp::create(b, loc, outArgs.front(), output - plan.outputLoops.begin())
              .getResult());
    } else if (rangeFromDescriptor[l]) {
      auto [input, dim] = *inputDimOfLoop(plan, l);
      sizes.push_back(tensor::DimOp::create(b, loc, inArgs[input], dim).getResult());
    } else {
      sizes.push_back(b.getIndexAttr(loops.sizes[l]));
    }
  }
  FailureOr<TilingResult> tiled =
      cast<TilingInterface>(clone.getOperation())
          .getTiledImplementation(b, offsets, sizes);
  if (failed(tiled) || tiled->tiledOps.size() != 1)
    return op.emitError(
        "ipu-map-tiles: could not tile this op (internal error)");
  tiledOp = cast<linalg::GenericOp>(tiled->tiledOps.front());
  return success();
}

LogicalResult KernelOutliner::bindOperands() {
  for (OpOperand &operand : tiledOp->getOpOperands()) {
    Value v = operand.get();
    if (!isa<RankedTensorType>(v.getType()))
      continue;
    Value source = v;
    if (auto slice = v.getDefiningOp<tensor::ExtractSliceOp>())
      source = slice.getSource();
    if (failed(tiledOp.isDpsInit(&operand) ? bindInit(operand, source)
                                           : bindInput(operand, source)))
      return failure();
  }
  return success();
}

LogicalResult KernelOutliner::bindInit(OpOperand &operand, Value source) {
  OpBuilder &b = *builder;
  Value v = operand.get();
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
  return success();
}

LogicalResult KernelOutliner::bindInput(OpOperand &operand, Value source) {
  OpBuilder &b = *builder;
  Value v = operand.get();
  if (llvm::is_contained(inArgs, source))
    return success();
  if (localPlaceholders.contains(source)) {
    // An input that only gives a shape: an empty of the slice's sizes
    // (dynamic where they follow a size read from the descriptor).
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(tiledOp);
    auto t = cast<RankedTensorType>(v.getType());
    auto slice = v.getDefiningOp<tensor::ExtractSliceOp>();
    SmallVector<OpFoldResult> sizes =
        slice ? slice.getMixedSizes() : getAsIndexOpFoldResult(ctx, t.getShape());
    operand.set(tensor::EmptyOp::create(b, loc, sizes, t.getElementType()));
    return success();
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
                      (generic || sliceType.hasStaticShape()) &&
                      sliceType.getElementType() == argType.getElementType();
  for (auto [j, e] : llvm::enumerate(map.getResults())) {
    shifted.push_back(e - input.access.consts[j]);
    // A shape-generic kernel's sizes that follow the piece are dynamic on
    // both sides (the slice's come from the output's sizes).
    int64_t slice = sliceType.getDimSize(j), region = argType.getDimSize(j);
    if (regionsAgree)
      regionsAgree = ShapedType::isDynamic(slice) || ShapedType::isDynamic(region)
                         ? ShapedType::isDynamic(slice) == ShapedType::isDynamic(region)
                         : slice - input.access.consts[j] == region;
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
  return success();
}

void KernelOutliner::shiftCapturedIndices() {
  OpBuilder &b = *builder;
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
}

SmallVector<Value> KernelOutliner::applyEpilogue() {
  OpBuilder &b = *builder;
  SmallVector<Value> results(tiledOp->getResults());
  if (plan.epilogue) {
    // The epilogue's body on the piece, element for element: in place, or
    // into its own piece (the last output argument).
    Value piece = results.front();
    bool own = plan.epilogueWritesOwnResult();
    Value into = own ? argTensor(numLoops + plan.inputs.size() + results.size(),
                                 outTypes.back(), /*writable=*/true)
                     : piece;
    auto type = cast<RankedTensorType>(into.getType());
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
    size_t other = 0;
    for (int64_t k = 0; k < plan.epilogue.getNumDpsInputs(); ++k) {
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
        b, loc, TypeRange{type}, ins, ValueRange{into}, maps,
        SmallVector<utils::IteratorType>(type.getRank(), utils::IteratorType::parallel));
    plan.epilogue.getRegion().cloneInto(&epilogue.getRegion(), constants);
    if (own)
      results.push_back(epilogue->getResult(0));
    else
      results = {epilogue->getResult(0)};
  }
  return results;
}

void KernelOutliner::finish(ArrayRef<Value> results) {
  OpBuilder &b = *builder;
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
}

FailureOr<func::FuncOp> TileMapper::outlineKernel(Plan &plan,
                                               ArrayRef<int64_t> pieceSizes,
                                               const std::vector<bool> &rangeFromDescriptor,
                                               StringRef name) {
  SmallVector<Value> inputs;
  for (const Input &in : plan.inputs)
    inputs.push_back(resolve(in.value));
  return KernelOutliner(module_, plan, inputs, pieceSizes, rangeFromDescriptor).outline(name);
}


/// A hash of what makes a kernel's code: its signature and attributes, and
/// each op's name, attributes and types in order (not its values'
/// identities or its locations). Kernels that are the same code hash alike.
llvm::hash_code structuralHash(func::FuncOp kernel) {
  llvm::hash_code hash =
      llvm::hash_combine(kernel.getFunctionType(), kernel->getDiscardableAttrDictionary());
  kernel.getBody().walk([&](Operation *op) {
    hash = llvm::hash_combine(
        hash, OperationEquivalence::computeHash(op, OperationEquivalence::ignoreHashValue,
                                                OperationEquivalence::ignoreHashValue,
                                                OperationEquivalence::IgnoreLocations));
  });
  return hash;
}

/// Whether two kernels are the same code but for their names (as CSE
/// compares ops: OperationEquivalence, regions included).
bool sameKernel(func::FuncOp a, func::FuncOp b) {
  return a.getFunctionType() == b.getFunctionType() &&
         a->getDiscardableAttrDictionary() == b->getDiscardableAttrDictionary() &&
         a.getSymVisibilityAttr() == b.getSymVisibilityAttr() &&
         OperationEquivalence::isRegionEquivalentTo(&a.getBody(), &b.getBody(),
                                                    OperationEquivalence::IgnoreLocations);
}

func::FuncOp TileMapper::findOrAddKernel(func::FuncOp kernel) {
  SmallVector<func::FuncOp, 1> &bucket = kernels_[structuralHash(kernel)];
  for (func::FuncOp known : bucket)
    if (sameKernel(known, kernel))
      return known;
  bucket.push_back(kernel);
  return kernel;
}

LogicalResult TileMapper::emitComputeSet(Plan &plan, OpBuilder &b) {
  linalg::GenericOp op = plan.op;
  std::string name = "cs" + std::to_string(computeSets_++);
  // A kernel per distinct piece shape; a kernel generic over the shapes is
  // one function under each.
  std::vector<std::vector<int64_t>> shapes = plan.mapping.pieceShapes();
  SmallVector<Attribute> kernels;
  SmallVector<int64_t> cycles;
  std::vector<bool> rangeFromDescriptor = loopsReadFromDescriptor(plan);
  bool generic = llvm::is_contained(rangeFromDescriptor, true);
  bool foldsFill = false; // the current kernel's
  for (auto [k, shape] : llvm::enumerate(shapes)) {
    if (generic && !kernels.empty()) {
      // The same function runs every piece shape.
      kernels.push_back(kernels.front());
    } else {
      std::string kernelName = "vertex_" + name + "_" + std::to_string(k);
      FailureOr<func::FuncOp> kernel = outlineKernel(plan, shape, rangeFromDescriptor, kernelName);
      if (failed(kernel))
        return failure();
      (*kernel)->setAttr("ipu.code_bytes", b.getI64IntegerAttr(vertexCodeBytes(plan, cost_)));
      // Ops that compute the same thing on the same shapes (the repeated
      // blocks of a network), or the same body when generic over shapes,
      // share one kernel: less to compile, and its code is stored once on
      // a tile that runs both.
      func::FuncOp shared = findOrAddKernel(*kernel);
      bool isNew = shared == *kernel;
      if (!isNew)
        (*kernel)->erase();
      ++(isNew ? numKernels : numSharedKernels);
      kernels.push_back(FlatSymbolRefAttr::get(shared.getSymNameAttr()));
      foldsFill = plan.fillsInit() && fillIsFolded(shared);
    }
    Box loops = loopsOfPiece(plan, Box(SmallVector<int64_t>(shape.size(), 0), shape));
    int64_t fillBytes = 0;
    if (plan.fillsInit() && !foldsFill) {
      fillBytes = elementBytes(op->getResult(0).getType());
      for (int64_t n : shape)
        fillBytes *= n;
    }
    cycles.push_back(vertexCycles(plan, loops, cost_, fillBytes));
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
  SmallVector<Type> resultTypes(op->getResultTypes());
  bool ownEpilogueResult = plan.epilogueWritesOwnResult();
  if (ownEpilogueResult)
    resultTypes.push_back(cast<RankedTensorType>(op->getResult(0).getType())
                              .clone(getElementTypeOrSelf(plan.epilogue->getResult(0))));
  auto cs = ipu::ComputeSetOp::create(
      b, op.getLoc(), resultTypes, inputs, inits, name,
      plan.loopRanges, plan.outputLoops, b.getArrayAttr(maps), full,
      hasExtents ? b.getArrayAttr(extents) : ArrayAttr(), b.getArrayAttr(kernels), cycles,
      plan.macs,
      ipu::toAttr(b.getContext(), plan.mapping));
  // Its stage, and whether it is of the backward pass (ipu-stash-activations).
  for (StringRef mark : {graph::kStageAttrName, graph::kBackwardAttrName})
    if (Attribute a = op->getAttr(mark))
      cs->setAttr(mark, a);
  replace(op, cs->getResults().take_front(op->getNumResults()));
  if (plan.epilogue) {
    ValueRange result = cs->getResults().take_back(1);
    if (plan.epilogueReshape) {
      auto view = ipu::ViewOp::create(b, op.getLoc(), plan.epilogue->getResult(0).getType(),
                                      result.front());
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

LogicalResult TileMapper::rewrite() {
  MLIRContext *ctx = module_.getContext();
  auto mappingAttrOf = [&](Operation *op) -> FailureOr<ipu::MappingAttr> {
    if (auto m = op->getAttrOfType<ipu::MappingAttr>(ipu::kMappingAttrName))
      return m;
    return op->emitError("ipu-map-tiles: '")
           << op->getName() << "' has no #ipu.mapping (run ipu-plan-tiles first)";
  };
  SmallVector<Operation *> ops;
  for (Operation &op : main_.getBody().front())
    ops.push_back(&op);
  OpBuilder b(ctx);
  for (Operation *op : ops) {
    if (absorbed_.contains(op))
      continue; // erased with its producer's compute set
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      auto it = plans_.find(generic);
      if (it == plans_.end()) {
        // A fill a padded view replaces is erased with its insert.
        tensor::InsertSliceOp insert = paddingInsertOf(generic);
        if (insert && insert->hasAttr(ipu::kPaddedViewAttrName))
          continue;
        return generic.emitError("ipu-map-tiles: linalg.generic has no #ipu.plan (run "
                                 "ipu-plan-tiles first)");
      }
      Plan &plan = it->second;
      // A fill its user's vertices do (Plan::fillsInit) is only memory.
      bool filledByUser = false;
      if (plan.isInitProducer) {
        auto user = cast<linalg::GenericOp>(*generic->getUsers().begin());
        filledByUser = plans_.count(user) && plans_[user].fillsInit();
      }
      if (plan.isEmpty || filledByUser) {
        b.setInsertionPoint(generic);
        SmallVector<Value> allocs;
        for (Value r : generic->getResults())
          allocs.push_back(ipu::AllocOp::create(b, generic.getLoc(), r.getType(),
                                                ipu::toAttr(ctx, plan.mapping)));
        replace(generic, allocs);
        generic->erase();
        continue;
      }
      if (failed(emitComputeSet(plan, b)))
        return failure();
      ++numComputeSets;
      continue;
    }
    if (auto empty = dyn_cast<tensor::EmptyOp>(op)) {
      if (auto mapping = empty->getAttrOfType<ipu::MappingAttr>(ipu::kMappingAttrName);
          mapping && !empty->use_empty()) {
        b.setInsertionPoint(empty);
        auto alloc = ipu::AllocOp::create(b, empty.getLoc(), empty.getType(), mapping);
        replace(empty, alloc->getResults());
      }
      continue;
    }
    if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
      b.setInsertionPoint(insert);
      if (insert->hasAttr(ipu::kPaddedViewAttrName)) {
        // Virtual padding: a view of the source, the fill gone.
        auto fill = insert.getDest().getDefiningOp<linalg::GenericOp>();
        if (!fill || paddingInsertOf(fill) != insert)
          return insert.emitError("ipu-map-tiles: a padded view needs a destination filled "
                                  "with a constant, read only by generics");
        auto value = cast<TypedAttr>(constantFillValue(fill)->getValue());
        SmallVector<int64_t> low(insert.getStaticOffsets()), high;
        for (auto [d, size] : llvm::enumerate(insert.getSourceType().getShape()))
          high.push_back(insert.getDestType().getDimSize(d) - low[d] - size);
        auto view = ipu::PadViewOp::create(b, insert.getLoc(), insert.getType(),
                                           insert.getSource(), low, high, value);
        replace(insert, view->getResults());
        insert.erase();
        Value init = fill.getDpsInitOperand(0)->get();
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
      FailureOr<ipu::MappingAttr> mapping = mappingAttrOf(slice);
      if (failed(mapping))
        return failure();
      b.setInsertionPoint(slice);
      auto alloc = ipu::AllocOp::create(b, slice.getLoc(), slice.getType(), *mapping);
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

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<target::IPUTarget> target = ipu::getTarget(module);
    if (failed(target))
      return signalPassFailure();
    FailureOr<func::FuncOp> main = mainToMap(module, getArgument());
    if (failed(main))
      return signalPassFailure();
    TileMapper mapper(module, *main, *target);
    if (failed(mapper.readPlans()) || failed(mapper.rewrite()))
      return signalPassFailure();
    numComputeSets += mapper.numComputeSets;
    numKernels += mapper.numKernels;
    numSharedKernels += mapper.numSharedKernels;
  }
};

} // namespace
