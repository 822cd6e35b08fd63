//===- ModelStats.h - what a graph-dialect model contains -------*- C++ -*-===//
//
// Counts of ops by kind, parameters held in ml_program globals, and the
// floating-point work of one execution. tessera-compile --summary prints it;
// the cost model builds on opFlops().
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_ANALYSIS_MODELSTATS_H
#define TESSERA_DIALECT_GRAPH_ANALYSIS_MODELSTATS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::graph {

struct ModelStats {
  struct Value {
    std::string name;
    std::string type;
  };
  std::vector<Value> inputs, outputs;
  /// Graph ops by mnemonic, most frequent first.
  std::vector<std::pair<std::string, int64_t>> opCounts;
  int64_t numOps = 0;
  int64_t numGlobals = 0;
  int64_t parameters = 0;     ///< elements in ml_program globals
  int64_t parameterBytes = 0; ///< their storage size
  /// Floating-point operations (a multiply-accumulate counts as two).
  double flops = 0;
  double convFlops = 0;   ///< of which in graph.conv
  double matmulFlops = 0; ///< of which in graph.matmul
};

/// Bytes of a statically shaped tensor of integers or floats (index,
/// complex and dynamic shapes count as 0).
int64_t tensorBytes(mlir::Type type);

/// FLOPs of one op, or 0 for data movement and unknown ops. Shapes must be
/// static (dynamic dims count as 0).
double opFlops(mlir::Operation *op);

/// Statistics of the module's `main` function (or its only function).
ModelStats computeModelStats(mlir::ModuleOp module);

/// Human-readable summary, a few lines.
void printModelStats(const ModelStats &stats, llvm::raw_ostream &os);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_ANALYSIS_MODELSTATS_H
