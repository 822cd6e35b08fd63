//===- GraphLossScaling.cpp - the loss scale as state ---------------------===//
//
// Only creates the scale and marks @main: graph-autodiff seeds the
// backward pass with it and graph-optimizer-update unscales the gradients
// (and, automatic, adjusts it and skips non-finite updates).
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"

#include <cmath>
#include <cstdlib>

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHLOSSSCALING
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;
using namespace tessera::graph;

namespace {

struct GraphLossScaling : tessera::graph::impl::GraphLossScalingBase<GraphLossScaling> {
  using GraphLossScalingBase::GraphLossScalingBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (scale.empty())
      return;
    bool automatic = scale == "auto";
    double initial = 1.0;
    if (!automatic) {
      char *end = nullptr;
      initial = std::strtod(scale.c_str(), &end);
      if (end == scale.c_str() || *end != '\0' || !(initial > 0) || !std::isfinite(initial)) {
        module.emitError("--loss-scaling ") << scale << ": give a positive number or auto";
        return signalPassFailure();
      }
    }
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("graph-loss-scaling needs a @main function");
      return signalPassFailure();
    }
    // The backward pass starts from the scale in the loss's type: an fp16
    // loss holds at most 65504.
    bool half = false;
    main.walk([&](Operation *op) {
      for (Type t : op->getResultTypes())
        if (auto r = dyn_cast<RankedTensorType>(t))
          half |= r.getElementType().isF16();
    });
    if (half && initial > 65504) {
      module.emitError("--loss-scaling ")
          << scale << ": an fp16 loss holds at most 65504; give a smaller scale";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    b.setInsertionPoint(main);
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    auto makeGlobal = [&](StringRef name, double value, StringRef marker) {
      auto global = ml_program::GlobalOp::create(
          b, main.getLoc(), name, scalar, /*is_mutable=*/true,
          DenseElementsAttr::get(scalar, static_cast<float>(value)), b.getStringAttr("private"));
      global->setAttr(marker, b.getUnitAttr());
      return global;
    };
    for (StringRef name : {kLossScaleGlobal, kSkippedUpdatesGlobal})
      if (module.lookupSymbol(name)) {
        module.emitError("the model already has a global named ") << name;
        return signalPassFailure();
      }
    // A static scale is a hyperparameter (changeable between runs); an
    // automatic one, state the program updates.
    makeGlobal(kLossScaleGlobal, initial,
               automatic ? "graph.buffer" : "graph.hyperparameter");
    if (automatic)
      makeGlobal(kSkippedUpdatesGlobal, 0.0, "graph.buffer");
    main->setAttr(kLossScaleAttrName, b.getStringAttr(automatic ? "auto" : "static"));
  }
};

} // namespace
