//===- GraphRecompute.cpp - recompute activations in the backward pass ----===//
//
// Checkpoints are chosen (user marks, every layer's results, each stage's
// inputs, or, automatically, the candidate whose training step has the
// lowest peak of live activations); every other forward value a backward
// op reads is computed again from them, once, before its first backward
// reader.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/Analysis/Layers.h"
#include "tessera/Dialect/Graph/Analysis/ModelStats.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"
#include "tessera/Target/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHRECOMPUTE
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;
using namespace tessera::graph;

namespace {

bool isBackward(Operation *op) { return op->hasAttr(kBackwardAttrName); }

/// The forward ops of `body` that compute something (weights and constants
/// are kept whatever the choice), in order; empty when nothing is trained.
SmallVector<Operation *> forwardOps(Block &body) {
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator()) {
    if (isBackward(&op))
      return forward;
    if (op.getNumOperands() > 0 && op.getNumResults() > 0)
      forward.push_back(&op);
  }
  return {};
}

/// Which forward ops' results are kept.
using Keep = std::vector<bool>;

/// Computes every forward value a backward op of `body` reads, unless
/// kept, again before its first backward reader; returns the ops added.
int64_t recompute(Block &body, ArrayRef<Operation *> forward, const Keep &keep) {
  DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(forward))
    index[op] = i;
  IRMapping clones;
  OpBuilder b(body.getParent()->getContext());
  int64_t added = 0;
  std::function<Value(Value)> recomputed = [&](Value v) -> Value {
    Operation *def = v.getDefiningOp();
    auto it = def ? index.find(def) : index.end();
    if (it == index.end() || keep[it->second])
      return v;
    if (Value c = clones.lookupOrNull(v))
      return c;
    for (Value operand : def->getOperands())
      recomputed(operand);
    Operation *copy = b.clone(*def, clones);
    copy->removeAttr(kCheckpointAttrName);
    copy->setAttr(kRecomputedAttrName, b.getUnitAttr());
    ++added;
    return clones.lookup(v);
  };
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (!isBackward(&op))
      continue;
    b.setInsertionPoint(&op);
    for (OpOperand &use : op.getOpOperands())
      if (Value r = recomputed(use.get()); r != use.get())
        use.set(r);
  }
  return added;
}

/// The most bytes of computed values (not weights, inputs or constants)
/// live at once in `body`, each from its op to its last reader.
int64_t peakLiveBytes(Block &body) {
  DenseMap<Operation *, int64_t> position;
  int64_t n = 0;
  for (Operation &op : body)
    position[&op] = n++;
  std::vector<int64_t> delta(n + 1, 0);
  for (Operation &op : body) {
    if (op.getNumOperands() == 0)
      continue;
    for (Value r : op.getResults()) {
      int64_t last = position[&op];
      for (Operation *user : r.getUsers())
        if (Operation *inBody = body.findAncestorOpInBlock(*user))
          last = std::max(last, position[inBody]);
      delta[position[&op]] += tensorBytes(r.getType());
      delta[last + 1] -= tensorBytes(r.getType());
    }
  }
  int64_t live = 0, peak = 0;
  for (int64_t d : delta)
    peak = std::max(peak, live += d);
  return peak;
}

struct GraphRecompute : tessera::graph::impl::GraphRecomputeBase<GraphRecompute> {
  using GraphRecomputeBase::GraphRecomputeBase;

  void runOnOperation() override;

private:
  /// The checkpoints of the non-automatic modes, added to `keep`.
  LogicalResult modeCheckpoints(ModuleOp module, ArrayRef<Operation *> forward, Keep &keep);
  /// auto: of the candidates (every layer's results; the forward ops cut
  /// into k segments of equal activation bytes, each segment's last op
  /// kept), the one whose step has the lowest peak of live bytes, measured
  /// on a copy of @main; nullopt when none beats keeping everything.
  std::optional<Keep> bestCheckpoints(func::FuncOp main, ArrayRef<Operation *> forward,
                                      const Keep &user);
};

/// Keeps the forward ops with a result read by a forward op for which
/// `apart(defining index, reading index)` holds.
template <typename Apart>
void keepReadOutside(ArrayRef<Operation *> forward, Keep &keep, Apart apart) {
  DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(forward))
    index[op] = i;
  for (auto [i, op] : llvm::enumerate(forward))
    for (Operation *user : op->getUsers())
      if (auto it = index.find(user);
          it != index.end() && apart(static_cast<int64_t>(i), it->second))
        keep[i] = true;
}

LogicalResult GraphRecompute::modeCheckpoints(ModuleOp module, ArrayRef<Operation *> forward,
                                              Keep &keep) {
  if (mode == "checkpoint-every-layer") {
    Layers layers = findLayers(forward);
    if (layers.names.empty())
      return module.emitError("--recompute checkpoint-every-layer: found no repeated layers in "
                              "the model's op names (ONNX node names or TorchScript module "
                              "paths with an index, such as 'encoder/layer.0'); use --recompute "
                              "auto or mark checkpoints");
    for (size_t i = 0; i < forward.size(); ++i)
      if (layers.layerOf[i] < 0)
        keep[i] = true;
    keepReadOutside(forward, keep, [&](int64_t def, int64_t user) {
      return layers.layerOf[def] != layers.layerOf[user];
    });
  } else if (mode == "stage-inputs") {
    auto stageOf = [&](int64_t i) { return placedStage(forward[i]).value_or(0); };
    int64_t last = 0;
    for (size_t i = 0; i < forward.size(); ++i)
      last = std::max(last, stageOf(i));
    for (size_t i = 0; i < forward.size(); ++i)
      if (stageOf(i) == last)
        keep[i] = true;
    keepReadOutside(forward, keep,
                    [&](int64_t def, int64_t user) { return stageOf(def) != stageOf(user); });
  }
  return success();
}

std::optional<Keep> GraphRecompute::bestCheckpoints(func::FuncOp main,
                                                    ArrayRef<Operation *> forward,
                                                    const Keep &user) {
  std::vector<Keep> candidates;
  if (Layers layers = findLayers(forward); !layers.names.empty()) {
    Keep keep = user;
    for (size_t i = 0; i < forward.size(); ++i)
      keep[i] = keep[i] || layers.layerOf[i] < 0;
    keepReadOutside(forward, keep, [&](int64_t def, int64_t reader) {
      return layers.layerOf[def] != layers.layerOf[reader];
    });
    candidates.push_back(std::move(keep));
  }
  std::vector<int64_t> prefix(forward.size() + 1, 0);
  for (auto [i, op] : llvm::enumerate(forward)) {
    prefix[i + 1] = prefix[i];
    for (Value r : op->getResults())
      prefix[i + 1] += tensorBytes(r.getType());
  }
  int64_t n = forward.size(), total = prefix.back();
  for (int64_t k = 2; k <= std::min<int64_t>(n, 256); k = k < 8 ? k + 1 : k * 3 / 2) {
    Keep keep = user;
    for (int64_t j = 1; j < k; ++j) {
      // The op whose results reach j/k of the bytes ends segment j.
      int64_t end = std::lower_bound(prefix.begin() + 1, prefix.end(), total * j / k) -
                    prefix.begin();
      keep[std::clamp<int64_t>(end - 1, 0, n - 1)] = true;
    }
    candidates.push_back(std::move(keep));
  }
  // Measured on a copy of @main: the step as it would be, per tile. Each
  // recomputed op is a vertex whose code its tiles hold too: on many tiles
  // that outweighs the activations it saves (a 4-layer encoder at
  // micro-batch 4 on 1472 tiles: +26% peak with every layer recomputed).
  auto target = tessera::target::makeTarget(targetName, 1, std::nullopt);
  tessera::target::CostModel cost(target ? *target : tessera::target::IPUTarget());
  if (!target)
    llvm::consumeError(target.takeError());
  auto measure = [&](const Keep *keep) {
    func::FuncOp copy = main.clone();
    Block &body = copy.getBody().front();
    int64_t code = 0;
    if (keep) {
      SmallVector<Operation *> copied = forwardOps(body);
      recompute(body, copied, *keep);
      for (Operation &op : body)
        if (op.hasAttr(kRecomputedAttrName))
          if (auto t = dyn_cast<RankedTensorType>(op.getResult(0).getType()))
            code += cost.vertexCodeBytes(t.getRank(), /*operations=*/4);
    }
    int64_t peak = peakLiveBytes(body) / std::max<int64_t>(tiles, 1) + code;
    copy.erase();
    return peak;
  };
  int64_t bestPeak = measure(nullptr);
  std::optional<Keep> best;
  for (const Keep &keep : candidates)
    if (int64_t peak = measure(&keep); peak < bestPeak) {
      bestPeak = peak;
      best = keep;
    }
  return best;
}

void GraphRecompute::runOnOperation() {
  ModuleOp module = getOperation();
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main || main.getBody().getBlocks().size() != 1)
    return; // nothing trained here
  if (mode != "none" && mode != "checkpoint-every-layer" && mode != "stage-inputs" &&
      mode != "auto") {
    module.emitError("graph-recompute: mode is '")
        << mode << "'; use none, checkpoint-every-layer, stage-inputs or auto";
    return signalPassFailure();
  }
  Block &body = main.getBody().front();
  SmallVector<Operation *> forward = forwardOps(body);
  if (forward.empty())
    return;
  Keep keep(forward.size(), false);
  bool userCheckpoints = false;
  for (auto [i, op] : llvm::enumerate(forward))
    if (op->hasAttr(kCheckpointAttrName))
      keep[i] = userCheckpoints = true;
  if (mode == "auto") {
    std::optional<Keep> best = bestCheckpoints(main, forward, keep);
    if (!best)
      return; // keeping everything has the lowest peak
    keep = std::move(*best);
  } else if (failed(modeCheckpoints(module, forward, keep))) {
    return signalPassFailure();
  } else if (mode == "none" && !userCheckpoints) {
    return;
  }
  numCheckpoints = llvm::count(keep, true);
  numRecomputed = recompute(body, forward, keep);
}

} // namespace
