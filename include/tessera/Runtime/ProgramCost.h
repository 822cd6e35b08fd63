//===- ProgramCost.h - the estimated cycles of a compiled program -*- C++ -*-===//
//
// One iteration of a tile-mapped program, costed phase by phase as the chip
// would spend it: each step's exchange (the busiest tile's traffic, or the
// busiest IPU's links), its sync and its compute (the slowest vertex), plus
// the host streams and a training step's state updates. The formulas are
// the target's CostModel; this walks the program to feed them. The same
// estimate serves tessera-compile --summary, the executable's cost summary
// and the IPU model's cycle counts. It reads only the program and its
// signature, never tile memory. No MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_PROGRAMCOST_H
#define TESSERA_RUNTIME_PROGRAMCOST_H

#include "tessera/Target/IPUTarget.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace tessera::runtime {

struct ExecutableMetadata;
struct MachineProgram;
class PhasePool;

struct StepCost {
  std::string name;     ///< "cs3", "copy2", "stream-in", "stream-out"
  std::string location; ///< source op
  int64_t exchangeCycles = 0, syncCycles = 0, computeCycles = 0;
  /// A cross-replica all-reduce's ring over the IPU-Links, its syncs included
  /// (and, past one IPU-Link domain, its GW-Link ring between domains).
  int64_t allReduceCycles = 0;
  /// The part of allReduceCycles on GW-Links (not in total(): included above).
  int64_t gwLinkCycles = 0;
  int64_t exchangeBytes = 0; ///< moved between tiles (all tiles)
  int64_t tilesUsed = 0;     ///< tiles running a vertex
  int64_t macs = 0;
  /// The IPUs whose tiles the step runs on or exchanges between (bit i:
  /// IPU i); none for the host streams.
  uint64_t ipus = 0;
  /// Runs once per weight update, not every iteration (Step::perUpdate,
  /// and the copy-back of the state a committed update stores).
  bool perUpdate = false;
  int64_t total() const {
    return exchangeCycles + syncCycles + computeCycles + allReduceCycles;
  }
};

/// The cost of one device iteration (a run is deviceIterations of them).
struct CostSummary {
  /// stream-in, each program step, stream-out, state-update (training),
  /// and with gradient accumulation state-update-committed
  std::vector<StepCost> steps;
  /// One iteration: the steps in turn, or pipelined (metadata's
  /// pipelineStages > 1) the host streams and the slowest IPU's steps,
  /// since each IPU runs its stages on another micro-batch meanwhile. The
  /// per-update steps are not in it.
  int64_t totalCycles = 0;
  /// The steps that run once per weight update (gradient accumulation's
  /// optimizer step and its stores), in turn.
  int64_t updateCycles = 0;
  /// Per IPU: the cycles of the steps it takes part in, one iteration.
  std::vector<int64_t> ipuCycles;
  /// Pipelined: filling and draining the pipeline, (stages - 1) times the
  /// slowest IPU's cycles, once per weight update (training) or per run.
  int64_t fillCycles = 0;
  /// `iterations` iterations (a weight update's micro-batches, or a run's
  /// device iterations), the pipeline's fill and flush included.
  int64_t cyclesFor(int64_t iterations) const { return totalCycles * iterations + fillCycles; }
  /// One weight update of `accumulation` micro-batches: theirs, the
  /// pipeline's fill, and the update once.
  int64_t cyclesPerUpdate(int64_t accumulation) const {
    return cyclesFor(accumulation) + updateCycles;
  }
  double seconds(double clockHz) const { return totalCycles / clockHz; }
  /// Sums over the steps of every iteration (not the per-update ones).
  int64_t computeCycles() const;
  int64_t exchangeCycles() const;
  int64_t syncCycles() const;
  int64_t allReduceCycles() const;
  int64_t gwLinkCycles() const;
  /// Every step but the host streams.
  int64_t deviceCycles() const;
};

/// The estimate of one iteration of `program` (the program of `metadata`,
/// whose signature sizes the host streams) on `target`. Steps are costed
/// on `pool`'s threads when one is given.
CostSummary estimateProgramCost(const ExecutableMetadata &metadata,
                                const MachineProgram &program,
                                const target::IPUTarget &target,
                                PhasePool *pool = nullptr);

/// The estimate as tessera-compile --summary prints it: cycles and
/// samples/s per iteration (and per weight update when gradients
/// accumulate), the split into compute, exchange, sync and all-reduce, the share of the
/// chip's fp32 peak, and the `topSteps` costliest steps with the ops they
/// come from.
void printCostSummary(const CostSummary &cost, const ExecutableMetadata &metadata,
                      const target::IPUTarget &target, llvm::raw_ostream &os,
                      size_t topSteps = 10);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_PROGRAMCOST_H
