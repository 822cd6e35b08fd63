//===- Placement.h - where ops run; the training passes' marks -*- C++ -*-===//
//
// graph-assign-stages puts two attributes on every op of @main: its
// pipeline stage and its IPU (stages follow the program's order; several
// stages may share an IPU, as a tied output head shares the embeddings').
// Importers set them from user annotations first (PopART's __ipu_number and
// __pipeline_stage), the training passes copy them from each forward op to
// the ops computing its gradient and update, lowering copies them onto the
// linalg ops of each graph op, and ipu-plan-tiles maps each op onto its
// IPU's tiles.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_IR_PLACEMENT_H
#define TESSERA_DIALECT_GRAPH_IR_PLACEMENT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <optional>

namespace tessera::graph {

inline constexpr llvm::StringLiteral kStageAttrName = "graph.stage";
inline constexpr llvm::StringLiteral kIpuAttrName = "graph.ipu";
/// On a state store (graph-optimizer-update) and then its @main result
/// (graph-externalize-state): the value changes only when a weight update
/// commits, on the last micro-batch of a gradient accumulation.
inline constexpr llvm::StringLiteral kPerUpdateAttrName = "graph.per_update";
/// On the global counting a weight update's micro-batches so far.
inline constexpr llvm::StringLiteral kMicroBatchCounterAttrName = "graph.micro_batch_counter";
/// On the ops graph-autodiff adds: the backward pass.
inline constexpr llvm::StringLiteral kBackwardAttrName = "graph.backward";
/// The same mark in their locations (`loc(fused<"graph.backward">[...])`),
/// which, unlike an attribute, outlives the rewrites down to the machine
/// program (reports split a training step's cycles with it).
mlir::Location markBackward(mlir::Location loc);
bool isBackwardLocation(mlir::Location loc);
/// On an op whose results graph-recompute keeps (a user's checkpoint).
inline constexpr llvm::StringLiteral kCheckpointAttrName = "graph.checkpoint";
/// On @main when its loss is scaled (graph-loss-scaling): "static" or
/// "auto"; the scale is the f32 scalar global kLossScaleGlobal.
inline constexpr llvm::StringLiteral kLossScaleAttrName = "graph.loss_scale";
inline constexpr llvm::StringLiteral kLossScaleGlobal = "optimizer.loss_scale";
/// On the i64 scalar global holding the replica's index (graph-replicate),
/// which the runtime sets per replica.
inline constexpr llvm::StringLiteral kReplicaIndexAttrName = "graph.replica_index";
/// On a module graph-replicate made one of R replicas: R.
inline constexpr llvm::StringLiteral kReplicasAttrName = "graph.replicas";
/// Automatic loss scaling's count of updates skipped for inf/nan gradients.
inline constexpr llvm::StringLiteral kSkippedUpdatesGlobal = "optimizer.skipped_updates";
/// On the ops graph-recompute adds: a forward op computed again in the
/// backward pass. Never merged with the op it repeats (CSE compares
/// attributes), kept through lowering.
inline constexpr llvm::StringLiteral kRecomputedAttrName = "graph.recomputed";
/// On the module: the type matmuls and convolutions of 16-bit floats add
/// their partial sums in (PopTorch's setPartialsType). Absent, or f32: f32,
/// rounded once to the result's type, Poplar's default; f16 (graph-precision
/// with fp16.16 or --partials-type half): the result's own type. Sums
/// (reductions, means, normalisations' statistics) add in f32 either way.
inline constexpr llvm::StringLiteral kPartialsTypeAttrName = "graph.partials_type";
/// On @main's arguments and results (graph-externalize-state): the state an
/// argument holds (a weight, optimizer state, a buffer) and the result
/// that replaces it after the step, both naming the state's global.
inline constexpr llvm::StringLiteral kStateAttrName = "graph.state";
inline constexpr llvm::StringLiteral kStateUpdateAttrName = "graph.state_update";

/// The IPU `op` is placed on, when it is placed.
inline std::optional<int64_t> placedIpu(mlir::Operation *op) {
  if (auto a = op->getAttrOfType<mlir::IntegerAttr>(kIpuAttrName))
    return a.getInt();
  return std::nullopt;
}
/// The pipeline stage `op` is placed in, when it is placed.
inline std::optional<int64_t> placedStage(mlir::Operation *op) {
  if (auto a = op->getAttrOfType<mlir::IntegerAttr>(kStageAttrName))
    return a.getInt();
  return std::nullopt;
}

inline void setPlacement(mlir::Operation *op, int64_t stage, int64_t ipu) {
  mlir::Builder b(op->getContext());
  op->setAttr(kStageAttrName, b.getI64IntegerAttr(stage));
  op->setAttr(kIpuAttrName, b.getI64IntegerAttr(ipu));
}

/// Gives the ops in [begin, end) that have no placement `from`'s: the ops
/// a rewrite of `from` (its import, its gradient) inserted there.
void placeLike(mlir::Operation *from, mlir::Block::iterator begin, mlir::Block::iterator end);

/// Places the ops of a placed block that a rewrite added without a
/// placement (a loss, an optimizer's update): each with the latest stage
/// among the placed ops computing its tensor operands, or its scalar ones
/// when it has no other. An update reads its gradient, placed where the
/// weight's forward reader runs, and scalars every update shares (the
/// clipping coefficient, loss scaling's verdict, Adam's bias corrections)
/// that depend on every gradient: the gradient decides. Failing that, the
/// op before it; failing that (weights, constants, casts at the top of the
/// function), its earliest placed reader. Nothing when the block has no
/// placed op.
void completePlacement(mlir::Block &block);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_IR_PLACEMENT_H
