//===- CostModel.h - the cycle formulas of an IPU target --------*- C++ -*-===//
//
// Every cycle figure Tessera gives comes from these formulas, one per
// mechanism of the machine: ipu-map-tiles costs its candidate plans with
// them, and the program estimate (ProgramCost.h) sums them over a compiled
// program for tessera-compile --summary, the executable's cost summary and
// the IPU model's cycle accounting. A better figure for the chip changes
// here (or its rate in IPUTarget) and every user of an estimate follows.
//
// No MLIR: the runtime uses it. What an op's body costs per iteration is the
// caller's to count (in instructions, see `instructionCycles`).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TARGET_COSTMODEL_H
#define TESSERA_TARGET_COSTMODEL_H

#include "tessera/Target/IPUTarget.h"

#include <cstdint>

namespace tessera::target {

/// What one vertex computes, as the formulas need it.
struct VertexWork {
  /// Iterations of the vertex's loop nest (its piece of the op's loops).
  int64_t iterations = 0;
  /// Rows of its output piece: runs of the output's innermost dimension,
  /// each paying the inner loop's set-up.
  int64_t rows = 1;
  /// Bytes of one element of the result: the vector lanes a non-contraction
  /// body runs on.
  int64_t elementBytes = 4;
  /// fp16 or bf16 multiply-accumulates: the AMP's fp16 rate.
  bool halfPrecision = false;
  /// A contraction: one multiply-accumulate per iteration at the tile's MAC
  /// rate. Otherwise `instructions` per iteration on the vector unit.
  bool contraction = false;
  int64_t instructions = 1;
  /// Instructions of a non-contraction body whose operands do not change
  /// along a row (a gather's index arithmetic, a broadcast operand's
  /// function): computed once per row, outside the inner loop, in scalar
  /// registers, unless that costs more than running them per element.
  int64_t rowInstructions = 0;
  /// An elementwise epilogue the same vertex applies to its output piece
  /// (the Relu after a convolution): elements and instructions per element.
  int64_t epilogueElements = 0;
  int64_t epilogueInstructions = 0;
  /// Bytes of constants the vertex writes into its own memory first: its
  /// output's initial value, a padded input's padding.
  int64_t fillBytes = 0;
};

class CostModel {
public:
  explicit CostModel(const IPUTarget &target) : target_(target) {}
  const IPUTarget &target() const { return target_; }

  /// Kinds of body operation, by what one costs on the vector unit.
  enum class Instruction { Simple, Transcendental };
  /// Vector instructions one operation of `kind` takes per element.
  int64_t instructionCycles(Instruction kind) const {
    return kind == Instruction::Transcendental ? target_.transcendentalInstructions : 1;
  }

  /// One vertex's cycles on its tile: launch, per-row set-up, the work at
  /// the MAC rate or the vector rate, the epilogue and the constant fills.
  int64_t vertexCycles(const VertexWork &work) const;

  /// Cycles for a vertex to write `bytes` of a constant with vector stores.
  int64_t fillCycles(int64_t bytes) const {
    return ceilDiv(bytes, target_.vectorBytesPerCycle);
  }

  /// One tile's share of an exchange phase: `bytes` sent (or received) in
  /// `regions` contiguous regions, each setting a new address.
  int64_t tileExchangeCycles(int64_t bytes, int64_t regions) const {
    return ceilDiv(bytes, target_.exchangeBytesPerCycle) +
           regions * target_.exchangeCyclesPerRegion;
  }
  /// An exchange phase whose busiest tile needs `busiestTileCycles` and
  /// whose busiest IPU sends or receives `busiestLinkBytes` over its
  /// IPU-Links: the slower of the two plus the phase's fixed cost. Free when
  /// nothing moves.
  int64_t exchangePhaseCycles(int64_t busiestTileCycles, int64_t busiestLinkBytes = 0) const;

  /// The barrier that ends a program step among `ipus` IPUs (all of the
  /// target's by default): across IPUs when the step spans several, the
  /// chip's own when its vertices and exchange stay on one (as Poplar syncs
  /// internally then; a sharded model's steps are such).
  int64_t stepSyncCycles(int64_t ipus = -1) const {
    if (ipus < 0)
      ipus = target_.numIPUs;
    return ipus > 1 ? target_.globalSyncCycles : target_.syncCycles;
  }
  /// The barrier around a host transfer or a state update (one chip's).
  int64_t chipSyncCycles() const { return target_.syncCycles; }
  /// A cross-replica all-reduce of `bytes` on each IPU over `replicas`
  /// replicas, as a ring (reduce-scatter, then all-gather): 2(R-1) steps,
  /// each sending 1/R of the bytes to the next replica over half the chip's
  /// IPU-Links (the other half face the previous one) and ending in a sync
  /// across IPUs. Free with one replica. Replicas beyond one IPU-Link domain
  /// (target.ipuLinkDomainIPUs) reduce hierarchically: a reduce-scatter
  /// within each domain over IPU-Links, an all-reduce of each IPU's shard
  /// between domains over GW-Links (a ring of D domains: 2(D-1) steps of
  /// 1/D of the shard), and an all-gather within the domain.
  int64_t allReduceCycles(int64_t bytes, int64_t replicas) const;
  /// The part of allReduceCycles spent on GW-Links (0 within one domain).
  int64_t allReduceGWLinkCycles(int64_t bytes, int64_t replicas) const;
  /// Moving `bytes` between the host and the IPUs over the host link.
  int64_t hostTransferCycles(int64_t bytes) const;

  /// An op's cycles on one IPU before its tiles are planned (stage
  /// assignment's estimate): its multiply-accumulates at the MAC rate or
  /// its other `vectorOps` at the vector rate, and its operand and result
  /// `bytes` once through the exchange, all spread evenly over the IPU's
  /// tiles, plus a step's sync. A bound the planned program approaches
  /// (its layers run at 1.5-3x it), the same for every op, so stages
  /// balanced on it stay balanced.
  int64_t opRooflineCycles(double macs, double vectorOps, int64_t bytes,
                           bool halfPrecision) const;

  /// Tile memory a vertex's code takes: a loop nest of `loops` dimensions
  /// around a body of `operations`.
  int64_t vertexCodeBytes(int64_t loops, int64_t operations) const {
    return target_.vertexCodeBaseBytes + loops * target_.vertexCodeBytesPerLoop +
           operations * target_.vertexCodeBytesPerOperation;
  }

private:
  static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
  IPUTarget target_;
};

} // namespace tessera::target

#endif // TESSERA_TARGET_COSTMODEL_H
