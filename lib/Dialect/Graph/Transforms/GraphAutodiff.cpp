//===- GraphAutodiff.cpp - reverse-mode gradients of @main's loss --------===//
//
// Reverse mode over one block: find the ops on a path from a trainable
// weight to the loss (forward activity, then the loss's dependencies), then
// visit them from last to first, asking each op's rule for its operands'
// gradients and summing the contributions a value receives from its users.
// The backward ops are appended before the return, so the block stays in
// program order and the forward values they reuse are already defined.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"

#include "FuncResults.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "graph-autodiff"

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHAUTODIFF
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;

namespace tessera::graph {
namespace {

/// The global a load reads, for both forms of load.
ml_program::GlobalOp loadedGlobal(Operation *op, SymbolTable &symbols) {
  if (auto load = dyn_cast<ml_program::GlobalLoadConstOp>(op))
    return symbols.lookup<ml_program::GlobalOp>(load.getGlobal().getLeafReference());
  if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op))
    return symbols.lookup<ml_program::GlobalOp>(load.getGlobal().getLeafReference());
  return {};
}

struct GraphAutodiff : impl::GraphAutodiffBase<GraphAutodiff> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    auto main = symbols.lookup<func::FuncOp>("main");
    if (!main || main.getBody().getBlocks().size() != 1) {
      module.emitError("graph-autodiff needs a @main function of one block");
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(main.front().getTerminator());
    std::optional<unsigned> lossIndex;
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      if (main.getResultAttr(i, "graph.loss"))
        lossIndex = i;
    if (!lossIndex) {
      main.emitError("@main has no result marked graph.loss: build a loss "
                     "first (graph-build-loss; tessera-compile --train --loss)");
      return signalPassFailure();
    }
    Value loss = ret.getOperand(*lossIndex);
    auto lossType = cast<RankedTensorType>(loss.getType());
    if (lossType.getRank() != 0 || !isa<FloatType>(lossType.getElementType())) {
      main.emitError("the loss must be a float scalar, got ") << lossType;
      return signalPassFailure();
    }

    // Trainable weights, and forward activity: values that depend on one.
    llvm::StringSet<> frozen;
    for (const std::string &name : freeze)
      frozen.insert(name);
    llvm::StringSet<> frozenSeen;
    llvm::MapVector<ml_program::GlobalOp, SmallVector<Value>> weightLoads;
    DenseSet<Value> active;
    for (Operation &op : main.front().without_terminator()) {
      if (auto global = loadedGlobal(&op, symbols)) {
        auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
        if (frozen.contains(global.getSymName())) {
          frozenSeen.insert(global.getSymName());
          continue;
        }
        // Buffers (running statistics) and hyperparameters are state that
        // is not trained.
        if (!type || !isa<FloatType>(type.getElementType()) ||
            global->hasAttr("graph.hyperparameter") ||
            global->hasAttr("graph.buffer"))
          continue;
        weightLoads[global].push_back(op.getResult(0));
        active.insert(op.getResult(0));
        continue;
      }
      for (auto [i, operand] : llvm::enumerate(op.getOperands()))
        if (active.contains(operand) && isDifferentiableOperand(&op, i)) {
          active.insert(op.result_begin(), op.result_end());
          break;
        }
    }
    for (const std::string &name : freeze)
      if (!frozenSeen.contains(name)) {
        main.emitError("--freeze names '")
            << name << "', which is not a weight the model reads";
        return signalPassFailure();
      }
    if (!active.contains(loss)) {
      main.emitError("the loss does not depend on any trainable weight");
      return signalPassFailure();
    }

    // Backward, from the loss to the weights.
    Operation *lastForward = ret->getPrevNode();
    OpBuilder builder(ret);
    DenseMap<Value, Value> grads;
    {
      GraphEmitter e(builder, loss.getLoc());
      // With loss scaling (graph-loss-scaling) the backward pass starts
      // from the scale: every gradient is the scale times the true one.
      if (main->hasAttr(kLossScaleAttrName)) {
        auto scalar = RankedTensorType::get({}, builder.getF32Type());
        Value scale = ml_program::GlobalLoadOp::create(
            builder, loss.getLoc(), scalar,
            FlatSymbolRefAttr::get(builder.getContext(), kLossScaleGlobal));
        grads[loss] = lossType.getElementType().isF32()
                          ? scale
                          : e.cast(scale, lossType.getElementType());
      } else {
        grads[loss] = e.splat(lossType.getElementType(), {}, 1.0);
      }
    }
    auto accumulate = [&](Value v, Value g, Location loc) {
      auto [it, inserted] = grads.try_emplace(v, g);
      if (!inserted) {
        GraphEmitter e(builder, loc);
        it->second = e.add(it->second, g);
      }
    };
    bool failed = false;
    SmallVector<Operation *> forward;
    for (Operation &op : main.front().without_terminator())
      forward.push_back(&op);
    for (Operation *op : llvm::reverse(forward)) {
      if (op->getNumResults() == 0 || isa<ml_program::GlobalLoadConstOp,
                                          ml_program::GlobalLoadOp>(op))
        continue;
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(grads.lookup(r));
        any |= static_cast<bool>(resultGrads.back());
      }
      bool needed = llvm::any_of(llvm::enumerate(op->getOperands()), [&](auto it) {
        return active.contains(it.value()) &&
               isDifferentiableOperand(op, it.index());
      });
      if (!any || !needed)
        continue;
      if (!hasGradientRule(op)) {
        op->emitError("no gradient rule for '")
            << op->getName() << "': it lies between a trainable weight and "
            << "the loss (freeze the weights before it with --freeze, or "
               "file an issue)";
        failed = true;
        continue;
      }
      // The gradient runs where the op runs (its stage and IPU).
      Operation *lastBefore = ret->getPrevNode();
      llvm::scope_exit placeGradient([&] {
        Block &body = main.front();
        placeLike(op, lastBefore ? std::next(lastBefore->getIterator()) : body.begin(),
                  ret->getIterator());
      });
      GraphEmitter e(builder, op->getLoc());
      SmallVector<Value> operandGrads(op->getNumOperands());
      if (mlir::failed(buildGradient(e, op, resultGrads, operandGrads)) ||
          e.failed()) {
        op->emitError("could not build the gradient of '")
            << op->getName() << "' (unsupported attributes for training)";
        failed = true;
        continue;
      }
      for (auto [i, operand] : llvm::enumerate(op->getOperands()))
        if (operandGrads[i] && active.contains(operand))
          accumulate(operand, operandGrads[i], op->getLoc());
    }
    if (failed)
      return signalPassFailure();

    // One gradient result per weight: the sum over its loads.
    SmallVector<Value> results(ret.getOperands());
    SmallVector<Attribute> resultAttrs = resultAttrDicts(main);
    int64_t count = 0;
    for (auto &[global, loads] : weightLoads) {
      Value total;
      for (Value load : loads)
        if (Value g = grads.lookup(load)) {
          GraphEmitter e(builder, global.getLoc());
          total = total ? e.add(total, g) : g;
        }
      if (!total)
        continue; // reaches the loss only through buffers' operands
      results.push_back(total);
      resultAttrs.push_back(builder.getDictionaryAttr(
          {builder.getNamedAttr("graph.gradient_of",
                                FlatSymbolRefAttr::get(global.getSymNameAttr())),
           builder.getNamedAttr(
               "graph.name",
               builder.getStringAttr(global.getSymName() + ".grad"))}));
      ++count;
    }
    LLVM_DEBUG(llvm::dbgs() << "graph-autodiff: " << count
                            << " gradients, " << grads.size()
                            << " values with a gradient\n");
    // Marked as the backward pass (graph-recompute reads it); constants
    // need no mark and stay free to fold and merge.
    for (Operation &op : llvm::make_range(
             lastForward ? std::next(lastForward->getIterator()) : main.front().begin(),
             ret->getIterator()))
      if (op.getNumOperands() > 0) {
        op.setAttr(kBackwardAttrName, builder.getUnitAttr());
        op.setLoc(markBackward(op.getLoc()));
      }
    setResults(main, results, resultAttrs);
    completePlacement(main.front());
  }
};

} // namespace
} // namespace tessera::graph
