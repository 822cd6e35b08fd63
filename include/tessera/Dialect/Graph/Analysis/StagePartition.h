//===- StagePartition.h - a chain of ops cut into pipeline stages -*- C++ -*-===//
//
// Automatic stage assignment (graph-assign-stages --pipeline auto) cuts the
// model's ops, in program order, into contiguous stages, one per IPU. A
// contiguous cut of a topological order only sends values forward, so every
// cut is a valid pipeline, and the best one is found exactly by dynamic
// programming over (stage, end of stage): O(stages x ops^2) evaluations of
// a stage's cost, each O(1) from prefix sums.
//
// The cost of a cut is the cost model's: the slowest stage's cycles (a
// pipeline runs at the pace of its slowest stage), each stage's cycles
// being its ops' plus receiving its inputs over the IPU-Links, under each
// IPU's memory. No MLIR here: the items are numbers the pass computes, so
// gtest checks the optimum against brute force on random chains.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_ANALYSIS_STAGEPARTITION_H
#define TESSERA_DIALECT_GRAPH_ANALYSIS_STAGEPARTITION_H

#include <cstdint>
#include <optional>
#include <vector>

namespace tessera::graph {

/// One op of the chain, as the partition sees it.
struct StageItem {
  /// Estimated cycles of the op on one IPU (forward, plus backward and
  /// weight update when training).
  int64_t cycles = 0;
  /// Bytes the op keeps on its IPU for the whole program: the weights it
  /// reads first (times the copies training keeps: gradients, optimizer
  /// state).
  int64_t residentBytes = 0;
  /// Bytes of its result that a pipelined training stage stashes for the
  /// backward pass, once per micro-batch in flight (0 for inference).
  int64_t stashBytes = 0;
  /// Bytes of the values defined before this op and read by it or later:
  /// what a stage that starts here receives over the IPU-Links.
  int64_t crossingBytes = 0;
  /// Bytes of its result that the backward pass computes again instead
  /// (graph-recompute): held for one micro-batch at a time.
  int64_t recomputedBytes = 0;
};

/// What a stage may cost.
struct StageLimits {
  int64_t numStages = 1;
  /// Memory of one IPU available to a stage.
  int64_t bytesPerStage = 0;
  /// The link rate (bytes per cycle) a stage's inputs arrive at.
  double linkBytesPerCycle = 1;
  /// Micro-batches in flight in stage s of a pipeline, whose stashes it
  /// holds (2 (P - s) - 1 in PopART's schedule; 1 without pipelining).
  /// Empty: one for every stage.
  std::vector<int64_t> stashDepth;
  /// Whether a stage stashes the inputs it receives, once per micro-batch
  /// in flight, to compute its forward pass again from them (recomputation:
  /// PopART's pipeline mode).
  bool stashInputs = false;
};

/// A stage's cost under a cut.
struct StageCost {
  int64_t begin = 0, end = 0; ///< items [begin, end)
  int64_t cycles = 0;
  int64_t bytes = 0;
  bool fits = true;
};

/// The cycles and bytes of stage `stage` holding items [begin, end).
StageCost stageCost(const std::vector<StageItem> &items, const StageLimits &limits,
                    int64_t stage, int64_t begin, int64_t end);

/// The cut of `items` into `limits.numStages` non-empty contiguous stages
/// whose slowest stage is fastest, each stage within `bytesPerStage` (ties:
/// the smaller total cycles, then the earlier cuts). nullopt when no cut
/// fits (or there are fewer items than stages).
std::optional<std::vector<StageCost>> partitionStages(const std::vector<StageItem> &items,
                                                      const StageLimits &limits);

/// A cut's value: its slowest stage's cycles.
int64_t slowestStageCycles(const std::vector<StageCost> &stages);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_ANALYSIS_STAGEPARTITION_H
