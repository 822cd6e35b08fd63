//===- ScatterAdd.h - the scatter-add form of linalg.generic ----*- C++ -*-===//
//
// graph.scatter_add lowers (GraphToLinalg's ScatterAddPattern) to a
// linalg.generic whose loops are the result's dimensions (parallel) and the
// index positions (reductions), reading the indices and the updates and
// accumulating
//
//   out += (row(index) == linalg.index(axis)) ? update : 0
//
// The planner costs it as the sparse loop codegen-sparse-scatter-adds makes
// of it (indices x the other dimensions, not rows x columns x indices);
// both recognize it here, on tensors or buffers, in @main or tiled into a
// vertex (where the compared position is linalg.index(axis) plus the
// piece's offset).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_CODEGEN_SCATTERADD_H
#define TESSERA_CODEGEN_SCATTERADD_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace tessera::codegen {

struct ScatterAddForm {
  unsigned axis = 0;       ///< the result dimension (and loop) indices select
  unsigned resultRank = 0; ///< loops [0, resultRank) are the result's
  /// The body's row an index names (computed from the index element only),
  /// the position it is compared with, and the accumulating add.
  mlir::Value row, position;
  mlir::Operation *add = nullptr;
};

/// `op` in scatter-add form, or nullopt. Its indexing maps are projections
/// (the indices read by the reduction loops, the updates by the result's
/// loops but `axis` and the reductions, the output by the result's loops).
std::optional<ScatterAddForm> matchScatterAdd(mlir::linalg::GenericOp op);

} // namespace tessera::codegen

#endif // TESSERA_CODEGEN_SCATTERADD_H
