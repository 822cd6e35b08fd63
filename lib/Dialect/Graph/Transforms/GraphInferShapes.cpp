//===- GraphInferShapes.cpp - propagate static shapes --------------------===//

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHINFERSHAPES
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;

namespace tessera::graph {
namespace {

struct GraphInferShapes : impl::GraphInferShapesBase<GraphInferShapes> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    WalkResult walk = func.walk([&](InferTypeOpInterface op) {
      SmallVector<Type> inferred;
      if (failed(op.inferReturnTypes(
              op->getContext(), op->getLoc(), op->getOperands(),
              op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
              op->getRegions(), inferred)))
        return WalkResult::interrupt();
      for (auto [result, type] : llvm::zip(op->getResults(), inferred))
        if (result.getType() != type)
          result.setType(type);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    // The signature follows what the body now returns.
    for (Block &block : func.getBody())
      if (auto ret = dyn_cast<func::ReturnOp>(block.getTerminator()))
        func.setType(FunctionType::get(func.getContext(),
                                       func.getArgumentTypes(),
                                       ret.getOperandTypes()));
  }
};

} // namespace
} // namespace tessera::graph
