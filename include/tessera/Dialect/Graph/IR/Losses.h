//===- Losses.h - PyTorch's losses as graph ops ------------------*- C++ -*-===//
//
// One definition of each loss, with torch.nn.functional's semantics, for
// graph-build-loss (--loss) and for the importers' loss operators
// (aten::cross_entropy_loss and friends in a traced training step).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_IR_LOSSES_H
#define TESSERA_DIALECT_GRAPH_IR_LOSSES_H

#include "tessera/Dialect/Graph/IR/GraphEmitter.h"

#include "llvm/ADT/StringRef.h"

namespace tessera::graph {

enum class LossReduction { None, Mean, Sum };

/// Cross-entropy from logits (`fromLogits`) or NLL from log-probabilities:
/// `scores` N x C, `labels` N class indices (i64). Samples labelled
/// `ignoreIndex` count for nothing (and not in the mean's count); label
/// smoothing mixes the one-hot target with the uniform one. None: the
/// per-sample losses (0 where ignored).
mlir::Value buildClassLoss(GraphEmitter &e, mlir::Value scores, mlir::Value labels,
                           bool fromLogits, double labelSmoothing, int64_t ignoreIndex,
                           LossReduction reduction);

/// "mse", "l1", "bce-with-logits", "smooth-l1" (`parameter`: beta),
/// "huber" (delta), "soft-margin" (targets of -1 and 1), "kl-div" (pred
/// log-probabilities; `parameter` 1: the target is too) or
/// "kl-div-log-target" between `pred` and a `target` of its shape, as
/// torch.nn.functional's; None: elementwise.
mlir::Value buildRegressionLoss(GraphEmitter &e, llvm::StringRef kind, mlir::Value pred,
                                mlir::Value target, LossReduction reduction,
                                double parameter = 1.0);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_IR_LOSSES_H
