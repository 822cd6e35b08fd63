//===- GraphAssignStages.cpp - pipeline stages and IPUs for @main's ops ---===//
//
// Three sources of placement (annotations, layers-per-ipu, the cost model)
// give one result: graph.stage and graph.ipu on every op, checked, with
// @main's ops ordered by stage so that each stage is one contiguous run.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/Analysis/Layers.h"
#include "tessera/Dialect/Graph/Analysis/ModelStats.h"
#include "tessera/Dialect/Graph/Analysis/StagePartition.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"
#include "tessera/Target/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHASSIGNSTAGES
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;
using namespace tessera;
using namespace tessera::graph;

namespace {

/// Ops without operands (weights, constants): placed with their readers.
bool isLeaf(Operation *op) { return op->getNumOperands() == 0; }

/// The global an op's operand loads, if it is a weight.
std::optional<StringRef> loadedGlobal(Value v) {
  if (auto load = v.getDefiningOp<ml_program::GlobalLoadConstOp>())
    return load.getGlobal().getLeafReference().getValue();
  if (auto load = v.getDefiningOp<ml_program::GlobalLoadOp>())
    return load.getGlobal().getLeafReference().getValue();
  return std::nullopt;
}

struct GraphAssignStages
    : tessera::graph::impl::GraphAssignStagesBase<GraphAssignStages> {
  using GraphAssignStagesBase::GraphAssignStagesBase;

  void runOnOperation() override;

private:
  /// Each compute op's IPU and stage, by the chosen source (`ops` are
  /// @main's ops that are not leaves, in program order).
  LogicalResult placeByAnnotations(ArrayRef<Operation *> ops, std::vector<int64_t> &stage,
                                   std::vector<int64_t> &ipu);
  LogicalResult placeByLayers(ArrayRef<Operation *> ops, std::vector<int64_t> &stage,
                              std::vector<int64_t> &ipu);
  LogicalResult placeByBlocks(ArrayRef<Operation *> ops, std::vector<int64_t> &stage,
                              std::vector<int64_t> &ipu);
  LogicalResult placeByCost(ArrayRef<Operation *> ops, std::vector<int64_t> &stage,
                            std::vector<int64_t> &ipu);
  /// Whether the training step recomputes each stage from its stashed
  /// inputs (graph-recompute's stage-inputs): the stage then stashes its
  /// inputs rather than its ops' results, and runs its forward twice. The
  /// other modes are costed as none: checkpoint-every-layer stashes each
  /// layer's checkpoints per micro-batch in flight, and auto may keep
  /// everything, so counting every result is the bound that holds.
  bool recomputes() const { return training && recompute == "stage-inputs"; }
  /// The partition's view of the ops, and its limits.
  std::vector<StageItem> stageItems(ArrayRef<Operation *> ops) const;
  StageLimits stageLimits(int64_t numStages) const;
  std::optional<target::IPUTarget> target_;
};

/// Stages numbered in program order, a new one each time the IPU changes.
void stagesFromIpus(ArrayRef<int64_t> ipu, std::vector<int64_t> &stage) {
  stage.assign(ipu.size(), 0);
  for (size_t i = 1; i < ipu.size(); ++i)
    stage[i] = stage[i - 1] + (ipu[i] != ipu[i - 1] ? 1 : 0);
}

LogicalResult GraphAssignStages::placeByAnnotations(ArrayRef<Operation *> ops,
                                                    std::vector<int64_t> &stage,
                                                    std::vector<int64_t> &ipu) {
  int64_t currentStage = 0, currentIpu = 0;
  for (auto [i, op] : llvm::enumerate(ops)) {
    auto s = placedStage(op);
    auto p = placedIpu(op);
    if (s && !p)
      return op->emitError("graph-assign-stages: the op has a pipeline stage (")
             << *s << ") but no IPU: annotate both (__pipeline_stage and __ipu_number)";
    if (p) {
      currentIpu = *p;
      // PopTorch's AutoStage.SameAsIpu.
      currentStage = s ? *s : *p;
    }
    stage[i] = currentStage;
    ipu[i] = currentIpu;
  }
  return success();
}

LogicalResult GraphAssignStages::placeByLayers(ArrayRef<Operation *> ops,
                                               std::vector<int64_t> &stage,
                                               std::vector<int64_t> &ipu) {
  auto module = getOperation();
  Layers layers = findLayers(ops);
  int64_t numLayers = layers.names.size();
  std::string list = llvm::join(llvm::map_range(layersPerIpu,
                                                [](int64_t n) { return std::to_string(n); }),
                                ",");
  if (numLayers == 0)
    return module.emitError("--layers-per-ipu ")
           << list
           << ": found no repeated layers in the model's op names (ONNX node names or "
              "TorchScript module paths with an index, such as 'encoder/layer.0'); annotate "
              "the model (__ipu_number) or use --pipeline auto";
  if (static_cast<int64_t>(layersPerIpu.size()) != numIPUs)
    return module.emitError("--layers-per-ipu ")
           << list << " has " << layersPerIpu.size() << " entries but --num-ipus is " << static_cast<int64_t>(numIPUs)
           << ": give one per IPU";
  int64_t fixed = 0, wildcards = 0;
  for (int64_t n : layersPerIpu) {
    if (n < -1)
      return module.emitError("--layers-per-ipu ")
             << list << ": " << n << " is not a layer count (0 or more, or -1 for the rest)";
    n < 0 ? ++wildcards : fixed += n;
  }
  auto span = "'" + layers.names.front() + "' ... '" + layers.names.back() + "'";
  if (fixed > numLayers || (wildcards == 0 && fixed != numLayers))
    return module.emitError("--layers-per-ipu ")
           << list << " places " << fixed << " layers but the model has " << numLayers << " ("
           << span << ")" << (wildcards ? "" : "; use -1 on an IPU to take the rest");
  // Layer k's IPU: wildcards share the rest, the first ones one more.
  std::vector<int64_t> layerIpu;
  int64_t rest = numLayers - fixed, wildcard = 0;
  for (auto [k, n] : llvm::enumerate(layersPerIpu)) {
    int64_t count = n;
    if (n < 0) {
      count = rest / wildcards + (wildcard < rest % wildcards ? 1 : 0);
      ++wildcard;
    }
    layerIpu.insert(layerIpu.end(), count, k);
  }
  // Before the first layer: IPU 0 (the embeddings). Between layers: the
  // layer of the op before. After the last: its IPU, but from an output
  // head reading a weight the embeddings read on, IPU 0 again.
  auto isLayerOp = [&](int64_t l) { return l >= 0; };
  int64_t firstLayerOp = llvm::find_if(layers.layerOf, isLayerOp) - layers.layerOf.begin();
  int64_t lastLayerOp =
      layers.layerOf.rend() - llvm::find_if(llvm::reverse(layers.layerOf), isLayerOp) - 1;
  llvm::StringSet<> embeddingWeights;
  int64_t current = 0;
  bool tiedHead = false;
  for (auto [i, op] : llvm::enumerate(ops)) {
    int64_t at = i;
    auto readsEmbeddingWeight = [&] {
      return llvm::any_of(op->getOperands(), [&](Value v) {
        auto g = loadedGlobal(v);
        return g && embeddingWeights.contains(*g);
      });
    };
    if (layers.layerOf[i] >= 0) {
      current = layerIpu[layers.layerOf[i]];
    } else if (at < firstLayerOp) {
      for (Value v : op->getOperands())
        if (auto g = loadedGlobal(v))
          embeddingWeights.insert(*g);
    } else if (at > lastLayerOp && !tiedHead && readsEmbeddingWeight()) {
      tiedHead = true;
      current = 0;
    }
    ipu[i] = current;
  }
  stagesFromIpus(ipu, stage);
  return success();
}

/// `name`'s path components ('/' and '.' separate them).
SmallVector<std::string> pathOf(StringRef name) {
  SmallVector<std::string> parts;
  for (StringRef part : llvm::split(name, '/'))
    for (StringRef piece : llvm::split(part, '.'))
      if (!piece.empty() && piece != "__module")
        parts.push_back(piece.str());
  return parts;
}

LogicalResult GraphAssignStages::placeByBlocks(ArrayRef<Operation *> ops,
                                               std::vector<int64_t> &stage,
                                               std::vector<int64_t> &ipu) {
  auto module = getOperation();
  struct BlockRule {
    SmallVector<std::string> path;
    int64_t ipu, stage;
    bool started = false;
  };
  std::vector<BlockRule> parsed;
  for (const std::string &spec : blocks) {
    auto [path, where] = StringRef(spec).rsplit('=');
    auto [ipuText, stageText] = where.split(':');
    BlockRule block;
    block.path = pathOf(path);
    bool bad = block.path.empty() || ipuText.getAsInteger(10, block.ipu) || block.ipu < 0;
    block.stage = block.ipu;
    if (!stageText.empty())
      bad |= stageText.getAsInteger(10, block.stage) || block.stage < 0;
    if (bad)
      return module.emitError("graph-assign-stages: block '")
             << spec << "' is not PATH=IPU or PATH=IPU:STAGE (a module path, such as "
             << "encoder.layers.2=1)";
    parsed.push_back(std::move(block));
  }
  int64_t currentStage = 0, currentIpu = 0;
  for (auto [i, op] : llvm::enumerate(ops)) {
    SmallVector<std::string> name = pathOf(nameOf(op->getLoc()));
    // The block with the longest path the op lies under starts here.
    BlockRule *match = nullptr;
    for (BlockRule &block : parsed)
      if (block.path.size() <= name.size() &&
          std::equal(block.path.begin(), block.path.end(), name.begin()) &&
          (!match || block.path.size() > match->path.size()))
        match = &block;
    if (match && !match->started) {
      match->started = true;
      currentStage = match->stage;
      currentIpu = match->ipu;
    }
    // An op the model places itself (a tessera.Block, an annotation) starts
    // its placement as a block does, and takes precedence over a rule.
    if (std::optional<int64_t> placed = placedIpu(op)) {
      currentIpu = *placed;
      currentStage = placedStage(op).value_or(*placed);
    }
    stage[i] = currentStage;
    ipu[i] = currentIpu;
  }
  for (const BlockRule &block : parsed)
    if (!block.started)
      return module.emitError("graph-assign-stages: no op of the model lies under block '")
             << llvm::join(block.path, ".") << "' (its module path; op names are the "
             << "model's module paths, see --mlir-print-debuginfo)";
  return success();
}

std::vector<StageItem> GraphAssignStages::stageItems(ArrayRef<Operation *> ops) const {
  target::CostModel cost(*target_);
  std::vector<StageItem> items(ops.size());
  DenseMap<Operation *, int64_t> indexOf;
  for (auto [i, op] : llvm::enumerate(ops))
    indexOf[op] = i;
  llvm::StringSet<> counted;
  // crossing[k] gathers the bytes of values defined before item k and read
  // at k or later: +bytes after the definition, -bytes after the last read.
  std::vector<int64_t> delta(ops.size() + 1, 0);
  for (auto [i, op] : llvm::enumerate(ops)) {
    StageItem &item = items[i];
    int64_t bytes = 0;
    bool half = false;
    for (Value v : op->getOperands()) {
      bytes += tensorBytes(v.getType());
      if (auto t = dyn_cast<RankedTensorType>(v.getType()))
        half |= t.getElementType().isF16() || t.getElementType().isBF16();
      if (auto g = loadedGlobal(v); g && counted.insert(*g).second) {
        item.residentBytes += tensorBytes(v.getType()) * weightCopies;
        // Its update, once per weight update: a share of every micro-batch.
        if (training && updateOpsPerElement > 0)
          if (auto t = dyn_cast<RankedTensorType>(v.getType()); t && t.hasStaticShape())
            item.cycles += cost.opRooflineCycles(
                               0, static_cast<double>(t.getNumElements()) * updateOpsPerElement,
                               tensorBytes(t) * weightCopies, false) /
                           std::max<int64_t>(microBatches, 1);
      }
    }
    int64_t resultBytes = 0;
    for (Value r : op->getResults())
      resultBytes += tensorBytes(r.getType());
    bytes += resultBytes;
    double flops = opFlops(op);
    bool contraction = isa<MatmulOp, ConvOp>(op);
    double macs = contraction ? flops / 2 : 0, vectorOps = contraction ? 0 : flops;
    // Backward is about twice the forward (a gradient per operand);
    // recomputation runs the forward once more.
    item.cycles += cost.opRooflineCycles(macs, vectorOps, bytes, half) *
                   (training ? (recomputes() ? 4 : 3) : 1);
    // Stashed per micro-batch in flight, or (recomputed from the stage's
    // stashed inputs) held for the micro-batch whose backward runs.
    (recomputes() ? item.recomputedBytes : item.stashBytes) = training ? resultBytes : 0;
    for (Value r : op->getResults()) {
      int64_t last = -1;
      for (Operation *user : r.getUsers())
        if (auto it = indexOf.find(user); it != indexOf.end())
          last = std::max(last, it->second);
      if (last > static_cast<int64_t>(i)) {
        delta[i + 1] += tensorBytes(r.getType());
        delta[last + 1] -= tensorBytes(r.getType());
      }
    }
  }
  int64_t crossing = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    crossing += delta[k];
    items[k].crossingBytes = crossing;
  }
  return items;
}

StageLimits GraphAssignStages::stageLimits(int64_t numStages) const {
  StageLimits limits;
  limits.numStages = numStages;
  limits.bytesPerStage =
      static_cast<int64_t>(residentShare * target_->tilesPerIPU * target_->bytesPerTile);
  limits.linkBytesPerCycle = target_->ipuLinkBytesPerSecond / target_->clockHz;
  for (int64_t s = 0; s < numStages; ++s)
    limits.stashDepth.push_back(pipelined ? 2 * (numStages - s) - 1 : 1);
  limits.stashInputs = recomputes();
  return limits;
}

LogicalResult GraphAssignStages::placeByCost(ArrayRef<Operation *> ops,
                                             std::vector<int64_t> &stage,
                                             std::vector<int64_t> &ipu) {
  auto module = getOperation();
  std::vector<StageItem> items = stageItems(ops);
  StageLimits limits = stageLimits(numIPUs);
  if (static_cast<int64_t>(ops.size()) < numIPUs)
    return module.emitError("--pipeline auto: the model has ")
           << ops.size() << " ops, fewer than the " << static_cast<int64_t>(numIPUs)
           << " IPUs to place them on; use fewer IPUs (--num-ipus)";
  auto cut = partitionStages(items, limits);
  if (!cut) {
    // Say how far the fastest cut is from fitting, stage by stage.
    StageLimits roomy = limits;
    roomy.bytesPerStage = std::numeric_limits<int64_t>::max();
    auto fastest = partitionStages(items, roomy);
    InFlightDiagnostic diag =
        module.emitError("--pipeline auto: no cut of the model into ")
        << static_cast<int64_t>(numIPUs) << " stages fits each IPU's " << limits.bytesPerStage
        << " bytes for weights" << (training ? " with their gradients and optimizer state, "
                                              "activation stashes"
                                            : "")
        << " and inputs received (" << static_cast<int64_t>(std::lround(residentShare * 100))
        << "% of its memory; the rest holds code and temporaries)";
    if (fastest)
      for (auto [s, c] : llvm::enumerate(*fastest))
        if (c.bytes > limits.bytesPerStage)
          diag << "; the fastest cut's stage " << s << " (IPU " << s << ") would need "
               << c.bytes << " bytes";
    // Recomputation shrinks a pipeline's stashes; sharded, a stage holds one
    // micro-batch either way.
    diag << "; use more IPUs (--num-ipus)"
         << (!training || recomputes() || !pipelined
                 ? (training ? " or an optimizer with less state" : "")
                 : ", recomputation (--recompute stage-inputs: each stage stashes only its "
                   "inputs) or an optimizer with less state");
    return diag;
  }
  for (auto [s, c] : llvm::enumerate(*cut))
    for (int64_t i = c.begin; i < c.end; ++i) {
      stage[i] = s;
      ipu[i] = s;
    }
  return success();
}

void GraphAssignStages::runOnOperation() {
  ModuleOp module = getOperation();
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main || main.getBody().getBlocks().size() != 1) {
    module.emitError("graph-assign-stages: the module needs a @main function of one block");
    return signalPassFailure();
  }
  if (residentShare <= 0 || residentShare > 1) {
    module.emitError("graph-assign-stages: resident-share is ")
        << static_cast<double>(residentShare) << "; it must be in (0, 1]";
    return signalPassFailure();
  }
  if (pipeline != "manual" && pipeline != "auto") {
    module.emitError("graph-assign-stages: pipeline is '")
        << pipeline << "'; use manual (annotations or layers-per-ipu) or auto";
    return signalPassFailure();
  }
  auto target = target::makeTarget(targetName, numIPUs,
                                   tilesPerIPU > 0 ? std::optional<int64_t>(tilesPerIPU)
                                                   : std::nullopt);
  if (!target) {
    module.emitError("graph-assign-stages: ") << llvm::toString(target.takeError());
    return signalPassFailure();
  }
  target_ = *target;

  Block &body = main.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (!isLeaf(&op))
      ops.push_back(&op);
  std::vector<int64_t> stage(ops.size(), 0), ipu(ops.size(), 0);
  LogicalResult placed = pipeline == "auto"       ? placeByCost(ops, stage, ipu)
                         : !layersPerIpu.empty() ? placeByLayers(ops, stage, ipu)
                         : !blocks.empty()       ? placeByBlocks(ops, stage, ipu)
                                                 : placeByAnnotations(ops, stage, ipu);
  if (failed(placed))
    return signalPassFailure();

  // Stages numbered densely in their order (annotations may skip numbers):
  // the pipeline's depth counts from them.
  if (llvm::all_of(stage, [](int64_t s) { return s >= 0; })) {
    std::vector<int64_t> used(stage.begin(), stage.end());
    llvm::sort(used);
    used.erase(std::unique(used.begin(), used.end()), used.end());
    for (int64_t &s : stage)
      s = llvm::lower_bound(used, s) - used.begin();
  }
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (ipu[i] < 0 || ipu[i] >= numIPUs) {
      op->emitError("graph-assign-stages: the op is placed on IPU ")
          << ipu[i] << " but there " << (numIPUs == 1 ? "is 1 IPU" : "are ")
          << (numIPUs == 1 ? "" : std::to_string(static_cast<int64_t>(numIPUs)) + " IPUs")
          << " (IPUs count from 0); raise --num-ipus or change the annotation";
      return signalPassFailure();
    }
    if (stage[i] < 0) {
      op->emitError("graph-assign-stages: the op's pipeline stage is ")
          << stage[i] << "; stages count from 0";
      return signalPassFailure();
    }
    setPlacement(op, stage[i], ipu[i]);
  }
  // A stage runs on one IPU; values only flow to the same or a later stage.
  DenseMap<int64_t, Operation *> stageHead;
  for (Operation *op : ops) {
    Operation *head = stageHead.try_emplace(*placedStage(op), op).first->second;
    if (*placedIpu(head) != *placedIpu(op)) {
      InFlightDiagnostic diag = op->emitError("graph-assign-stages: the op is on IPU ")
                                << *placedIpu(op) << " but its pipeline stage "
                                << *placedStage(op) << " runs on IPU " << *placedIpu(head)
                                << "; a stage runs on one IPU: give the op another stage";
      diag.attachNote(head->getLoc()) << "the stage's first op";
      return signalPassFailure();
    }
  }
  for (Operation *op : ops)
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || isLeaf(def) || def->getBlock() != &body)
        continue;
      if (*placedStage(def) > *placedStage(op)) {
        InFlightDiagnostic diag =
            op->emitError("graph-assign-stages: the op in pipeline stage ")
            << *placedStage(op) << " (IPU " << *placedIpu(op)
            << ") reads a value computed in the later stage " << *placedStage(def) << " (IPU "
            << *placedIpu(def) << "); stages must follow the data: give the op a stage at "
            << "least " << *placedStage(def);
        diag.attachNote(def->getLoc()) << "the value is computed here";
        return signalPassFailure();
      }
    }
  // Weights and constants sit with their earliest reader, whatever an
  // importer stamped on them (stages were renumbered since).
  for (Operation &op : body.without_terminator())
    if (isLeaf(&op)) {
      op.removeAttr(kStageAttrName);
      op.removeAttr(kIpuAttrName);
    }
  completePlacement(body);
  // Each stage one contiguous run of ops: a stable sort by stage keeps
  // every definition before its uses, since values only flow forward.
  SmallVector<Operation *> order;
  for (Operation &op : body.without_terminator())
    order.push_back(&op);
  llvm::stable_sort(order, [](Operation *a, Operation *b) {
    return *placedStage(a) < *placedStage(b);
  });
  for (Operation *op : order)
    op->moveBefore(body.getTerminator());

  // The stages for the compile report: each stage's IPU, ops and the cost
  // model's figures.
  SmallVector<Operation *> sorted;
  for (Operation &op : body.without_terminator())
    if (!isLeaf(&op))
      sorted.push_back(&op);
  std::vector<StageItem> items = stageItems(sorted);
  int64_t numStages = sorted.empty() ? 0 : *placedStage(sorted.back()) + 1;
  StageLimits limits = stageLimits(std::max<int64_t>(numStages, 1));
  Builder b(module.getContext());
  SmallVector<Attribute> report;
  size_t begin = 0;
  for (int64_t s = 0; s < numStages; ++s) {
    size_t end = begin;
    while (end < sorted.size() && *placedStage(sorted[end]) == s)
      ++end;
    StageCost c = stageCost(items, limits, s, begin, end);
    report.push_back(b.getDictionaryAttr({
        b.getNamedAttr("stage", b.getI64IntegerAttr(s)),
        b.getNamedAttr("ipu", b.getI64IntegerAttr(*placedIpu(sorted[begin]))),
        b.getNamedAttr("ops", b.getI64IntegerAttr(end - begin)),
        b.getNamedAttr("cycles", b.getI64IntegerAttr(c.cycles)),
        b.getNamedAttr("bytes", b.getI64IntegerAttr(c.bytes)),
    }));
    begin = end;
  }
  module->setAttr("graph.stages", b.getArrayAttr(report));
}

} // namespace
