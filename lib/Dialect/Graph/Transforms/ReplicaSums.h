//===- ReplicaSums.h - gradients summed over the replicas -------*- C++ -*-===//
//
// graph-replicate sums each micro-batch's gradients over the replicas;
// with gradient accumulation graph-optimizer-update sums the accumulated
// gradients instead, once per weight update. Both group the sums the same
// way, here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_DIALECT_GRAPH_TRANSFORMS_REPLICASUMS_H
#define TESSERA_LIB_DIALECT_GRAPH_TRANSFORMS_REPLICASUMS_H

#include "mlir/IR/Builders.h"

#include <utility>

namespace tessera::graph {

/// Where a value is computed: (stage, ipu), or (-1, -1) when not placed.
std::pair<int64_t, int64_t> placementOf(mlir::Value v);

/// `values` summed over `replicas` replicas with graph.cross_replica_sum
/// (and divided by `replicas` when `reduction` is "mean"), built at `b`:
/// one sum per placement (`at[i]` is values[i]'s) covers all of its values,
/// one merged all-reduce whose ring pays its syncs once. The ops take that
/// placement and the backward pass's mark. Returns the sums in order.
llvm::SmallVector<mlir::Value> sumOverReplicas(mlir::OpBuilder &b, mlir::ValueRange values,
                                               llvm::ArrayRef<std::pair<int64_t, int64_t>> at,
                                               int64_t replicas, llvm::StringRef reduction);

} // namespace tessera::graph

#endif // TESSERA_LIB_DIALECT_GRAPH_TRANSFORMS_REPLICASUMS_H
