//===- Graph.h - the graph dialect ------------------------------*- C++ -*-===//
//
// The graph dialect: framework-neutral tensor operators on value-semantic
// ranked tensors. Include this header to use the dialect's ops; shape rules
// the ops share with the importers live in ShapeUtils.h.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_IR_GRAPH_H
#define TESSERA_DIALECT_GRAPH_IR_GRAPH_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tessera/Dialect/Graph/IR/GraphDialect.h.inc"
#include "tessera/Dialect/Graph/IR/GraphEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tessera/Dialect/Graph/IR/GraphAttrs.h.inc"

#define GET_OP_CLASSES
#include "tessera/Dialect/Graph/IR/GraphOps.h.inc"

#endif // TESSERA_DIALECT_GRAPH_IR_GRAPH_H
