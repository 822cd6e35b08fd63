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

  /// Sums every gradient result over the replicas, one op per placement.
  void reduceGradients(func::FuncOp main) {
    auto ret = cast<func::ReturnOp>(main.front().getTerminator());
    // Gradients grouped by where they are computed: (stage, ipu).
    llvm::MapVector<std::pair<int64_t, int64_t>, SmallVector<unsigned>> groups;
    for (unsigned i = 0; i < main.getNumResults(); ++i) {
      if (!main.getResultAttr(i, "graph.gradient_of"))
        continue;
      Operation *def = ret.getOperand(i).getDefiningOp();
      std::pair<int64_t, int64_t> at{-1, -1};
      if (def)
        at = {placedStage(def).value_or(-1), placedIpu(def).value_or(-1)};
      groups[at].push_back(i);
    }
    OpBuilder b(ret);
    UnitAttr unit = b.getUnitAttr();
    for (auto &[at, results] : groups) {
      SmallVector<Value> gradients;
      for (unsigned i : results)
        gradients.push_back(ret.getOperand(i));
      Location loc = NameLoc::get(b.getStringAttr("cross_replica_sum"),
                                  gradients.front().getLoc());
      auto begin = std::prev(Block::iterator(ret));
      auto sum = CrossReplicaSumOp::create(b, loc, ValueRange(gradients).getTypes(),
                                           gradients);
      GraphEmitter e(b, loc);
      for (auto [i, reduced] : llvm::zip(results, sum.getResults())) {
        Value g = reduced;
        if (reduction == "mean")
          g = e.mulScalar(g, 1.0 / static_cast<double>(replicas));
        ret.setOperand(i, g);
      }
      // The sums run where their gradients do, as part of the backward pass.
      for (Operation &op : llvm::make_range(std::next(begin), Block::iterator(ret))) {
        if (at.second >= 0)
          setPlacement(&op, at.first, at.second);
        op.setAttr(kBackwardAttrName, unit);
      }
    }
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
    if (module.lookupSymbol(kReplicaIndexGlobal)) {
      module.emitError("replication needs the global '")
          << kReplicaIndexGlobal << "', which the model already uses for something else";
      return failure();
    }
    auto type = RankedTensorType::get({}, IntegerType::get(module.getContext(), 64));
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    mb.setInsertionPoint(main);
    auto global = ml_program::GlobalOp::create(
        mb, main.getLoc(), kReplicaIndexGlobal, type, /*is_mutable=*/true,
        DenseElementsAttr::get(type, ArrayRef<Attribute>{mb.getI64IntegerAttr(0)}),
        mb.getStringAttr("private"));
    global->setAttr(kReplicaIndexAttrName, mb.getUnitAttr());
    OpBuilder b = OpBuilder::atBlockBegin(&main.front());
    Location loc = NameLoc::get(b.getStringAttr(kReplicaIndexGlobal), main.getLoc());
    Value index = ml_program::GlobalLoadOp::create(
        b, loc, type, FlatSymbolRefAttr::get(global.getSymNameAttr()));
    // Seeds a golden-ratio step apart per replica: the generator mixes the
    // seed through splitmix64, so nearby seeds give unrelated streams.
    Value stride = createSplatConstant(b, loc, b.getI64Type(), {}, 0x9E3779B97F4A7C15LL);
    Value offset = MulOp::create(b, loc, type, index, stride).getResult();
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
    if (replicas < 1 || replicas > 64) {
      module.emitError("replicas must be in [1, 64], got ") << static_cast<int64_t>(replicas);
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
