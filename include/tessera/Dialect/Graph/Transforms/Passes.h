//===- Passes.h - graph dialect passes --------------------------*- C++ -*-===//
//
// Passes over the graph dialect. Each is declared in Passes.td, implemented in
// a file of the same name, and registered by registerGraphPasses().
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_TRANSFORMS_PASSES_H
#define TESSERA_DIALECT_GRAPH_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace tessera::graph {
class GraphDialect;

/// Why graph-precision's options (--precision, --partials-type; an empty
/// partials type: the precision's) are wrong, or empty when they are not:
/// an unknown value, or a partials type that contradicts the precision's
/// second number. One check for the pass and the compiler's request.
std::string checkPrecisionOptions(llvm::StringRef precision, llvm::StringRef partialsType);

#define GEN_PASS_DECL
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_TRANSFORMS_PASSES_H
