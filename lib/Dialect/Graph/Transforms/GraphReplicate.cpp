//===- GraphReplicate.cpp - one replica of a data-parallel program --------===//
//
// Replicas are the runtime's copies of one program; what makes them one
// training run is here: gradients summed over the replicas before any
// update reads them (so every replica applies the same update and the
// weights stay equal), and random numbers that differ per replica (each
// replica's dropout masks its own samples differently).
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/GraphEmitter.h"
#include "tessera/Dialect/Graph/IR/OpBuilding.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"

#include "ReplicaSums.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/ADT/MapVector.h"

#include <tuple>

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHREPLICATE
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;
using namespace tessera::graph;

namespace {

constexpr llvm::StringLiteral kReplicaIndexGlobal = "replica.index";

struct GraphReplicate : tessera::graph::impl::GraphReplicateBase<GraphReplicate> {
  using GraphReplicateBase::GraphReplicateBase;

  /// Sums every gradient result over the replicas.
  void reduceGradients(func::FuncOp main) {
    auto ret = cast<func::ReturnOp>(main.front().getTerminator());
    SmallVector<unsigned> results;
    SmallVector<Value> gradients;
    SmallVector<std::pair<int64_t, int64_t>> at;
    for (unsigned i = 0; i < main.getNumResults(); ++i) {
      if (!main.getResultAttr(i, "graph.gradient_of"))
        continue;
      results.push_back(i);
      gradients.push_back(ret.getOperand(i));
      at.push_back(placementOf(ret.getOperand(i)));
    }
    OpBuilder b(ret);
    for (auto [i, sum] : llvm::zip(results, sumOverReplicas(b, gradients, at, replicas, reduction)))
      ret.setOperand(i, sum);
  }

  /// Every random op draws from the seed plus this replica's index.
  LogicalResult reseedRandomOps(ModuleOp module, func::FuncOp main) {
    SmallVector<Operation *> randomOps;
    main.walk([&](Operation *op) {
      if (isa<RandomUniformOp, StochasticRoundOp>(op))
        randomOps.push_back(op);
    });
    if (randomOps.empty())
      return success();
    OpBuilder b = OpBuilder::atBlockBegin(&main.front());
    FailureOr<Value> index = loadI64StateGlobal(b, main, kReplicaIndexGlobal,
                                                kReplicaIndexAttrName, /*increment=*/false,
                                                module.getLoc(), "replication");
    if (failed(index))
      return failure();
    auto type = cast<RankedTensorType>(index->getType());
    b.setInsertionPointAfterValue(*index);
    Location loc = index->getLoc();
    // Seeds a golden-ratio step apart per replica: the generator mixes the
    // seed through splitmix64, so nearby seeds give unrelated streams.
    Value stride = createSplatConstant(b, loc, b.getI64Type(), {}, 0x9E3779B97F4A7C15LL);
    Value offset = MulOp::create(b, loc, type, *index, stride).getResult();
    llvm::DenseMap<Value, Value> reseeded;
    for (Operation *op : randomOps) {
      OpOperand &seed = op->getOpOperand(isa<StochasticRoundOp>(op) ? 1 : 0);
      // Added before the first op drawing from that seed: the seed is
      // defined before it, the offset at the top.
      Value &mixed = reseeded[seed.get()];
      if (!mixed) {
        OpBuilder sb(op);
        mixed = AddOp::create(sb, loc, type, seed.get(), offset).getResult();
      }
      seed.set(mixed);
    }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // As many as the IPUs of a Bow Pod1024 (runtime::kMaxReplicas).
    if (replicas < 1 || replicas > 1024) {
      module.emitError("replicas must be in [1, 1024], got ") << static_cast<int64_t>(replicas);
      return signalPassFailure();
    }
    if (reduction != "mean" && reduction != "sum") {
      module.emitError("the replicas' gradients combine by mean or sum, got '")
          << reduction << "'";
      return signalPassFailure();
    }
    if (replicas == 1)
      return;
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.isExternal())
      return;
    // With accumulation the optimizer sums the accumulated gradients,
    // once per weight update.
    if (accumulate <= 1)
      reduceGradients(main);
    if (failed(reseedRandomOps(module, main)))
      return signalPassFailure();
    // What the program was made one replica of (the 1/R of the mean is in
    // it): a module fed back in must be compiled for as many.
    module->setAttr(kReplicasAttrName, IntegerAttr::get(IntegerType::get(module.getContext(), 64),
                                                        replicas));
  }
};

} // namespace

std::pair<int64_t, int64_t> tessera::graph::placementOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return {-1, -1};
  return {placedStage(def).value_or(-1), placedIpu(def).value_or(-1)};
}

SmallVector<Value> tessera::graph::sumOverReplicas(OpBuilder &b, ValueRange values,
                                                   ArrayRef<std::pair<int64_t, int64_t>> at,
                                                   int64_t replicas, StringRef reduction) {
  llvm::MapVector<std::pair<int64_t, int64_t>, SmallVector<unsigned>> groups;
  for (auto [i, where] : llvm::enumerate(at))
    groups[where].push_back(i);
  SmallVector<Value> sums(values.begin(), values.end());
  UnitAttr unit = b.getUnitAttr();
  for (auto &[where, members] : groups) {
    SmallVector<Value> group;
    for (unsigned i : members)
      group.push_back(values[i]);
    Location loc = NameLoc::get(b.getStringAttr("cross_replica_sum"), group.front().getLoc());
    Block::iterator next = b.getInsertionPoint();
    Operation *anchor = next == b.getInsertionBlock()->end() ? nullptr : &*next;
    auto sum = CrossReplicaSumOp::create(b, loc, ValueRange(group).getTypes(), group);
    GraphEmitter e(b, loc);
    for (auto [i, reduced] : llvm::zip(members, sum.getResults()))
      sums[i] = reduction == "mean" ? e.mulScalar(reduced, 1.0 / static_cast<double>(replicas))
                                    : Value(reduced);
    // The sums (and their scales) run where their values are computed, as
    // part of the backward pass.
    for (Operation *op = sum; op && op != anchor; op = op->getNextNode()) {
      if (where.second >= 0)
        setPlacement(op, where.first, where.second);
      op->setAttr(kBackwardAttrName, unit);
    }
  }
  return sums;
}
