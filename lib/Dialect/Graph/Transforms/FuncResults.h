//===- FuncResults.h - rewrite @main's results in training passes -*- C++ -*-===//
//
// The training passes add, drop and reorder @main's results with their
// attributes (graph.loss, graph.gradient_of, graph.state_update); these keep
// the return, the function type and the result attributes in step.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_DIALECT_GRAPH_TRANSFORMS_FUNCRESULTS_H
#define TESSERA_LIB_DIALECT_GRAPH_TRANSFORMS_FUNCRESULTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera::graph {

/// Each result's attribute dictionary (an empty one where it has none).
llvm::SmallVector<mlir::Attribute> resultAttrDicts(mlir::func::FuncOp func);

/// Makes `values` the results of single-block `func` (its return's operands),
/// with `attrs` (one dictionary each), and updates its type.
void setResults(mlir::func::FuncOp func, mlir::ValueRange values,
                llvm::ArrayRef<mlir::Attribute> attrs);

} // namespace tessera::graph

#endif // TESSERA_LIB_DIALECT_GRAPH_TRANSFORMS_FUNCRESULTS_H
