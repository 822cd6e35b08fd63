//===- StagePartitionTest.cpp - automatic stage assignment's optimum ------===//
//
// partitionStages must find the cut the cost model rates best: checked
// against every cut of random chains, with and without memory limits.

#include "tessera/Dialect/Graph/Analysis/StagePartition.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

using namespace tessera::graph;

namespace {

/// Every cut of `items` into `limits.numStages` non-empty stages: the best
/// (slowest stage, total) over those that fit, or nullopt.
std::optional<std::pair<int64_t, int64_t>> bruteForce(const std::vector<StageItem> &items,
                                                      const StageLimits &limits) {
  std::optional<std::pair<int64_t, int64_t>> best;
  std::vector<int64_t> begins;
  std::function<void(int64_t)> recurse = [&](int64_t from) {
    if (static_cast<int64_t>(begins.size()) == limits.numStages) {
      int64_t slowest = 0, total = 0;
      for (size_t s = 0; s < begins.size(); ++s) {
        int64_t end = s + 1 < begins.size() ? begins[s + 1] : items.size();
        StageCost c = stageCost(items, limits, s, begins[s], end);
        if (!c.fits)
          return;
        slowest = std::max(slowest, c.cycles);
        total += c.cycles;
      }
      std::pair<int64_t, int64_t> v{slowest, total};
      if (!best || v < *best)
        best = v;
      return;
    }
    // The next stage starts after the previous one's first item and leaves
    // one item for each later stage.
    int64_t later = limits.numStages - begins.size() - 1;
    for (int64_t b = from; b < static_cast<int64_t>(items.size()) - later; ++b) {
      begins.push_back(b);
      recurse(b + 1);
      begins.pop_back();
    }
  };
  begins.push_back(0);
  recurse(1);
  return best;
}

TEST(StagePartition, OptimalOnRandomChains) {
  std::mt19937 rng(20261126);
  int checkedInfeasible = 0, checkedFeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    int64_t n = std::uniform_int_distribution<int64_t>(1, 11)(rng);
    StageLimits limits;
    limits.numStages = std::uniform_int_distribution<int64_t>(1, 5)(rng);
    limits.linkBytesPerCycle = std::uniform_int_distribution<int64_t>(1, 8)(rng);
    limits.stashInputs = trial % 2 == 1;
    for (int64_t s = 0; s < limits.numStages; ++s)
      limits.stashDepth.push_back(2 * (limits.numStages - s) - 1);
    std::vector<StageItem> items(n);
    for (StageItem &item : items) {
      item.cycles = std::uniform_int_distribution<int64_t>(0, 1000)(rng);
      item.residentBytes = std::uniform_int_distribution<int64_t>(0, 500)(rng);
      item.stashBytes = std::uniform_int_distribution<int64_t>(0, 100)(rng);
      item.recomputedBytes = std::uniform_int_distribution<int64_t>(0, 100)(rng);
      item.crossingBytes = std::uniform_int_distribution<int64_t>(0, 400)(rng);
    }
    // From roomy to tight: some chains have no cut that fits.
    limits.bytesPerStage = std::uniform_int_distribution<int64_t>(300, 6000)(rng);

    auto expected = bruteForce(items, limits);
    auto cut = partitionStages(items, limits);
    ASSERT_EQ(expected.has_value(), cut.has_value()) << "trial " << trial;
    if (!cut) {
      ++checkedInfeasible;
      continue;
    }
    ++checkedFeasible;
    ASSERT_EQ(static_cast<int64_t>(cut->size()), limits.numStages);
    int64_t total = 0;
    for (size_t s = 0; s < cut->size(); ++s) {
      const StageCost &c = (*cut)[s];
      EXPECT_LT(c.begin, c.end) << "trial " << trial << ": empty stage " << s;
      EXPECT_EQ(c.begin, s == 0 ? 0 : (*cut)[s - 1].end);
      EXPECT_TRUE(c.fits);
      total += c.cycles;
    }
    EXPECT_EQ(cut->back().end, n);
    EXPECT_EQ(slowestStageCycles(*cut), expected->first) << "trial " << trial;
    EXPECT_EQ(total, expected->second) << "trial " << trial;
  }
  // Both outcomes were exercised.
  EXPECT_GT(checkedFeasible, 100);
  EXPECT_GT(checkedInfeasible, 10);
}

TEST(StagePartition, BalancesAnEvenChain) {
  // Eight equal layers on four IPUs: two each, whatever the link rate.
  std::vector<StageItem> items(8, StageItem{100, 10, 0, 16});
  StageLimits limits;
  limits.numStages = 4;
  limits.bytesPerStage = 1000;
  limits.linkBytesPerCycle = 4;
  auto cut = partitionStages(items, limits);
  ASSERT_TRUE(cut);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ((*cut)[s].end - (*cut)[s].begin, 2);
    EXPECT_EQ((*cut)[s].cycles, s == 0 ? 200 : 204); // 16 bytes in at 4 per cycle
  }
}

TEST(StagePartition, MemoryMovesTheCut) {
  // The fastest cut puts both heavy weights on one IPU; they do not fit
  // together, so the optimum under memory is slower.
  std::vector<StageItem> items = {{10, 600, 0, 0}, {10, 600, 0, 0}, {100, 0, 0, 0}};
  StageLimits limits;
  limits.numStages = 2;
  limits.bytesPerStage = 1000;
  auto cut = partitionStages(items, limits);
  ASSERT_TRUE(cut);
  EXPECT_EQ((*cut)[0].end, 1);
  EXPECT_EQ(slowestStageCycles(*cut), 110);
  limits.bytesPerStage = 500;
  EXPECT_FALSE(partitionStages(items, limits));
}

} // namespace
