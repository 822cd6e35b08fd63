//===- TargetTest.cpp - IPU machine descriptions -------------------------===//

#include "tessera/Target/CostModel.h"
#include "tessera/Target/IPUTarget.h"

#include <gtest/gtest.h>

#include <random>

using namespace tessera::target;

namespace {

TEST(Target, Ipu2MatchesThePublishedChip) {
  auto t = makeTarget("ipu2");
  ASSERT_TRUE(static_cast<bool>(t));
  EXPECT_EQ(t->tilesPerIPU, 1472);
  EXPECT_EQ(t->bytesPerTile, 624 * 1024);
  // 897 MiB of SRAM per chip, ~250 TFLOPS fp16 and ~62.5 fp32.
  EXPECT_EQ(t->memoryPerIPU(), 1472LL * 624 * 1024);
  EXPECT_NEAR(t->peakFlops(true) / 1e12, 250.6, 1.0);
  EXPECT_NEAR(t->peakFlops(false) / 1e12, 62.6, 0.5);
}

TEST(Target, OptionsScaleAndShrinkTheMachine) {
  auto t = makeTarget("bow", 4, 64);
  ASSERT_TRUE(static_cast<bool>(t));
  EXPECT_EQ(t->totalTiles(), 256);
  EXPECT_EQ(t->describe().substr(0, 33), "bow: 4 IPUs x 64 tiles x 624 KiB,");
  auto ipu1 = makeTarget("ipu1");
  ASSERT_TRUE(static_cast<bool>(ipu1));
  EXPECT_EQ(ipu1->bytesPerTile, 256 * 1024);
}

TEST(Target, OutOfRangeOptionsAreErrors) {
  auto unknown = makeTarget("ipu9");
  ASSERT_FALSE(static_cast<bool>(unknown));
  EXPECT_EQ(llvm::toString(unknown.takeError()),
            "unknown target 'ipu9'; targets are ipu1, ipu2, bow");
  auto tiles = makeTarget("ipu2", 1, 2000);
  ASSERT_FALSE(static_cast<bool>(tiles));
  EXPECT_NE(llvm::toString(tiles.takeError()).find("between 1 and 1472"),
            std::string::npos);
  auto ipus = makeTarget("ipu2", 0);
  ASSERT_FALSE(static_cast<bool>(ipus));
  llvm::consumeError(ipus.takeError());
}

} // namespace

// The cost model's formulas against the machine's limits: whatever the
// work, no vertex beats the MAC or vector rate, no exchange beats the
// exchange rate, and a phase that moves nothing is free. Random works with
// a fixed seed.
TEST(CostModel, NoEstimateBeatsTheMachine) {
  auto t = makeTarget("ipu2");
  ASSERT_TRUE(static_cast<bool>(t));
  CostModel cost(*t);
  std::mt19937_64 rng(7);
  auto draw = [&](int64_t hi) {
    return std::uniform_int_distribution<int64_t>(0, hi)(rng);
  };
  for (int i = 0; i < 1000; ++i) {
    VertexWork w;
    w.iterations = draw(1 << 20);
    w.rows = 1 + draw(256);
    w.elementBytes = draw(1) ? 4 : 2;
    w.halfPrecision = w.elementBytes == 2;
    w.contraction = draw(1);
    w.instructions = 1 + draw(8);
    int64_t cycles = cost.vertexCycles(w);
    EXPECT_GE(cycles, t->vertexOverheadCycles + w.rows * t->vertexCyclesPerRow);
    if (w.contraction) {
      int64_t rate = w.halfPrecision ? t->f16MacsPerCycle : t->f32MacsPerCycle;
      EXPECT_GE(cycles * rate, w.iterations) << "faster than the MAC rate";
    } else {
      int64_t lanes = t->vectorBytesPerCycle / w.elementBytes;
      EXPECT_GE(cycles * lanes, w.iterations * w.instructions) << "faster than the vector unit";
    }
    int64_t bytes = draw(1 << 20), regions = draw(1000);
    int64_t tile = cost.tileExchangeCycles(bytes, regions);
    EXPECT_GE(tile * t->exchangeBytesPerCycle, bytes) << "faster than the exchange";
    int64_t phase = cost.exchangePhaseCycles(tile);
    EXPECT_EQ(phase, tile == 0 ? 0 : tile + t->exchangeOverheadCycles);
  }
  EXPECT_EQ(cost.exchangePhaseCycles(0, 0), 0);
  // Links bound an exchange between IPUs: 320 GB/s at 1.33 GHz is about 240
  // bytes per cycle for the whole chip, far below its tiles' 1472 x 4.
  int64_t linkBytes = 240 * 100000;
  EXPECT_GE(cost.exchangePhaseCycles(1, linkBytes), 99000);
}

// Instructions whose operands do not change along a row (a gather's index
// arithmetic) run once per row, but never cost more than per element: a
// row of one element is no cheaper per row than the vector unit.
TEST(CostModel, RowInvariantInstructionsRunOncePerRow) {
  auto t = makeTarget("ipu2");
  ASSERT_TRUE(static_cast<bool>(t));
  CostModel cost(*t);
  VertexWork perElement;
  perElement.iterations = 128 * 64;
  perElement.rows = 128;
  perElement.instructions = 2 + 10;
  VertexWork perRow = perElement;
  perRow.instructions = 2;
  perRow.rowInstructions = 10;
  int64_t lanes = t->vectorBytesPerCycle / 4;
  EXPECT_EQ(cost.vertexCycles(perElement) - cost.vertexCycles(perRow),
            128 * 64 * 10 / lanes - 128 * 10);
  // One element per row: the vector unit's rate, as if per element.
  perElement.iterations = perRow.iterations = 128;
  EXPECT_EQ(cost.vertexCycles(perRow), cost.vertexCycles(perElement));
}

TEST(CostModel, TheSyncBetweenStepsSpansEveryIPU) {
  auto one = makeTarget("ipu2"), four = makeTarget("ipu2", 4);
  ASSERT_TRUE(one && four);
  EXPECT_EQ(CostModel(*one).stepSyncCycles(), one->syncCycles);
  EXPECT_EQ(CostModel(*four).stepSyncCycles(), four->globalSyncCycles);
  EXPECT_EQ(CostModel(*four).chipSyncCycles(), four->syncCycles);
  // Host transfers at the host link's rate: 64 GB/s at 1.33 GHz.
  EXPECT_NEAR(CostModel(*one).hostTransferCycles(64000000), 1330000, 1);
}

TEST(CostModel, AllReducesRingOverTheReplicas) {
  auto target = makeTarget("ipu2");
  ASSERT_TRUE(static_cast<bool>(target));
  CostModel cost(*target);
  EXPECT_EQ(cost.allReduceCycles(1 << 20, 1), 0); // one replica: nothing to sum
  EXPECT_EQ(cost.allReduceCycles(0, 16), 0);
  // A ring of R replicas: 2(R-1) steps, each a sync and 1/R of the bytes.
  int64_t two = cost.allReduceCycles(100 << 20, 2), sixteen = cost.allReduceCycles(100 << 20, 16);
  EXPECT_GT(two, 0);
  // Bandwidth-bound: 2(R-1)/R of the bytes, so 16 replicas take under twice 2's.
  EXPECT_GT(sixteen, two);
  EXPECT_LT(sixteen, 2 * two);
  // 100 MiB over half of 320 GB/s, twice (reduce-scatter, all-gather):
  // about 1.3 ms at 16 replicas.
  double seconds = sixteen / target->clockHz;
  EXPECT_GT(seconds, 1.0e-3);
  EXPECT_LT(seconds, 1.6e-3);
  // Latency-bound for small tensors: the syncs dominate.
  EXPECT_GE(cost.allReduceCycles(4, 16), 30 * target->globalSyncCycles);
}
