//===- IPUStashActivations.cpp - a pipeline's activation stashes ----------===//
//
// Marks the copies of each forward activation the backward pass reads: one
// per micro-batch in flight in its stage.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/IPU/IR/IPU.h"
#include "tessera/Dialect/IPU/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera::ipu {
#define GEN_PASS_DEF_IPUSTASHACTIVATIONS
#include "tessera/Dialect/IPU/Transforms/Passes.h.inc"
} // namespace tessera::ipu

using namespace mlir;
using namespace tessera;

namespace {

struct IPUStashActivations
    : tessera::ipu::impl::IPUStashActivationsBase<IPUStashActivations> {
  using IPUStashActivationsBase::IPUStashActivationsBase;

  void runOnOperation() override {
    if (pipelineStages <= 1)
      return;
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main || main.getBody().empty())
      return;
    Block &body = main.getBody().front();
    DenseMap<Operation *, int64_t> position;
    int64_t backwardFrom = -1;
    for (auto [i, op] : llvm::enumerate(body)) {
      position[&op] = i;
      if (backwardFrom < 0 && op.hasAttr(graph::kBackwardAttrName))
        backwardFrom = i;
    }
    if (backwardFrom < 0)
      return; // inference: nothing is stashed
    // Whether `v` is read, directly or through views, from the backward
    // pass on.
    std::function<bool(Value)> readByBackward = [&](Value v) {
      for (Operation *user : v.getUsers()) {
        if (isa<ipu::ViewOp>(user) && llvm::any_of(user->getResults(), readByBackward))
          return true;
        // A result returned to the host (the predictions) is not stashed.
        if (isa<func::ReturnOp>(user))
          continue;
        Operation *inBody = body.findAncestorOpInBlock(*user);
        if (inBody && position.lookup(inBody) >= backwardFrom)
          return true;
      }
      return false;
    };
    for (auto cs : llvm::to_vector(body.getOps<ipu::ComputeSetOp>())) {
      if (position.lookup(cs) >= backwardFrom)
        break;
      int64_t stage = graph::placedStage(cs).value_or(0);
      int64_t inFlight = std::max<int64_t>(2 * (pipelineStages - stage) - 1, 1);
      SmallVector<int64_t> copies;
      bool any = false;
      for (Value r : cs->getResults()) {
        bool stashed = inFlight > 1 && readByBackward(r);
        copies.push_back(stashed ? inFlight : 1);
        any |= stashed;
      }
      if (any)
        cs->setAttr(ipu::kStashCopiesAttrName,
                    DenseI64ArrayAttr::get(cs.getContext(), copies));
    }
  }
};

} // namespace
