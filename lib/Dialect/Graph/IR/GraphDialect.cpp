//===- GraphDialect.cpp - graph dialect registration ---------------------===//

#include "tessera/Dialect/Graph/IR/Graph.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessera::graph;

#include "tessera/Dialect/Graph/IR/GraphDialect.cpp.inc"
#include "tessera/Dialect/Graph/IR/GraphEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tessera/Dialect/Graph/IR/GraphAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "tessera/Dialect/Graph/IR/GraphOps.cpp.inc"

void GraphDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tessera/Dialect/Graph/IR/GraphAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "tessera/Dialect/Graph/IR/GraphOps.cpp.inc"
      >();
}

Operation *GraphDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                             Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
