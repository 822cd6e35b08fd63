//===- GraphRequireStaticShapes.cpp - reject dynamic shapes --------------===//

#include "tessera/Dialect/Graph/Transforms/Passes.h"

#include "mlir/IR/BuiltinTypes.h"

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHREQUIRESTATICSHAPES
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;

namespace tessera::graph {
namespace {

bool isDynamic(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  return shaped && !shaped.hasStaticShape();
}

struct GraphRequireStaticShapes
    : impl::GraphRequireStaticShapesBase<GraphRequireStaticShapes> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    bool failed = false;
    for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
      if (!isDynamic(arg.getType()))
        continue;
      auto name = func.getArgAttrOfType<StringAttr>(i, "graph.name");
      func.emitError() << "input " << (name ? name.str() : std::to_string(i))
                       << " has type " << arg.getType()
                       << " with unknown dims; give its shape with "
                          "--input-shape "
                       << (name ? name.str() : "NAME") << "=DxDx...";
      failed = true;
    }
    func.walk([&](Operation *op) {
      for (Type t : op->getResultTypes()) {
        if (isDynamic(t)) {
          op->emitError() << "result type " << t
                          << " is not static; the IPU needs every size at "
                             "compile time";
          failed = true;
          return;
        }
      }
    });
    if (failed)
      signalPassFailure();
  }
};

} // namespace
} // namespace tessera::graph
