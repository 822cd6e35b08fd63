//===- StagePartition.cpp - a chain of ops cut into pipeline stages -------===//

#include "tessera/Dialect/Graph/Analysis/StagePartition.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::graph {

namespace {

/// Prefix sums of the items' additive figures.
struct Prefix {
  std::vector<int64_t> cycles, resident, stash, recomputed;
  explicit Prefix(const std::vector<StageItem> &items)
      : cycles(items.size() + 1, 0), resident(items.size() + 1, 0),
        stash(items.size() + 1, 0), recomputed(items.size() + 1, 0) {
    for (size_t i = 0; i < items.size(); ++i) {
      cycles[i + 1] = cycles[i] + items[i].cycles;
      resident[i + 1] = resident[i] + items[i].residentBytes;
      stash[i + 1] = stash[i] + items[i].stashBytes;
      recomputed[i + 1] = recomputed[i] + items[i].recomputedBytes;
    }
  }
};

StageCost costFromPrefix(const std::vector<StageItem> &items, const Prefix &p,
                         const StageLimits &limits, int64_t stage, int64_t begin,
                         int64_t end) {
  StageCost c;
  c.begin = begin;
  c.end = end;
  int64_t depth = static_cast<size_t>(stage) < limits.stashDepth.size()
                      ? limits.stashDepth[stage]
                      : 1;
  int64_t received = begin > 0 ? items[begin].crossingBytes : 0;
  c.cycles = p.cycles[end] - p.cycles[begin] +
             static_cast<int64_t>(std::ceil(received / limits.linkBytesPerCycle));
  c.bytes = p.resident[end] - p.resident[begin] + depth * (p.stash[end] - p.stash[begin]) +
            p.recomputed[end] - p.recomputed[begin] +
            (limits.stashInputs ? depth : 1) * received;
  c.fits = c.bytes <= limits.bytesPerStage;
  return c;
}

} // namespace

StageCost stageCost(const std::vector<StageItem> &items, const StageLimits &limits,
                    int64_t stage, int64_t begin, int64_t end) {
  return costFromPrefix(items, Prefix(items), limits, stage, begin, end);
}

int64_t slowestStageCycles(const std::vector<StageCost> &stages) {
  int64_t slowest = 0;
  for (const StageCost &s : stages)
    slowest = std::max(slowest, s.cycles);
  return slowest;
}

namespace {

/// The cut of items [0, n) into `limits.numStages` non-empty stages that
/// fit, minimising `combine`d stage cycles (max: the slowest stage; sum,
/// with every stage within `cap`: the total), or nullopt.
template <typename Combine>
std::optional<std::vector<StageCost>> bestCut(const std::vector<StageItem> &items,
                                              const Prefix &prefix, const StageLimits &limits,
                                              int64_t cap, Combine combine) {
  int64_t n = items.size(), stages = limits.numStages;
  constexpr int64_t none = std::numeric_limits<int64_t>::max();
  // best[s][j]: the best cut of items [0, j) into stages 0..s; from[s][j]
  // the start of its last stage.
  std::vector<std::vector<int64_t>> best(stages, std::vector<int64_t>(n + 1, none));
  std::vector<std::vector<int64_t>> from(stages, std::vector<int64_t>(n + 1, -1));
  for (int64_t s = 0; s < stages; ++s) {
    // Stage s ends at j, leaving an item for each later stage.
    for (int64_t j = s + 1; j <= n - (stages - 1 - s); ++j) {
      // Stage 0 starts at item 0; stage s > 0 after s items at least.
      int64_t firstStart = s == 0 ? 0 : s, lastStart = s == 0 ? 0 : j - 1;
      for (int64_t i = firstStart; i <= lastStart; ++i) {
        if (s > 0 && best[s - 1][i] == none)
          continue;
        StageCost c = costFromPrefix(items, prefix, limits, s, i, j);
        if (!c.fits || c.cycles > cap)
          continue;
        int64_t v = s == 0 ? c.cycles : combine(best[s - 1][i], c.cycles);
        if (v < best[s][j]) {
          best[s][j] = v;
          from[s][j] = i;
        }
      }
    }
  }
  if (best[stages - 1][n] == none)
    return std::nullopt;
  std::vector<StageCost> cut(stages);
  int64_t end = n;
  for (int64_t s = stages - 1; s >= 0; --s) {
    int64_t begin = from[s][end];
    cut[s] = costFromPrefix(items, prefix, limits, s, begin, end);
    end = begin;
  }
  return cut;
}

} // namespace

std::optional<std::vector<StageCost>> partitionStages(const std::vector<StageItem> &items,
                                                      const StageLimits &limits) {
  if (limits.numStages < 1 || static_cast<int64_t>(items.size()) < limits.numStages)
    return std::nullopt;
  Prefix prefix(items);
  constexpr int64_t noCap = std::numeric_limits<int64_t>::max();
  // The slowest stage as fast as it can be; then, among the cuts that
  // achieve it, the least total work (a max-then-sum order has no optimal
  // substructure, so it takes a second pass under the first's bound).
  auto fastest = bestCut(items, prefix, limits, noCap,
                         [](int64_t a, int64_t b) { return std::max(a, b); });
  if (!fastest)
    return std::nullopt;
  return bestCut(items, prefix, limits, slowestStageCycles(*fastest),
                 [](int64_t a, int64_t b) { return a + b; });
}

} // namespace tessera::graph
