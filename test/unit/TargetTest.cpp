//===- TargetTest.cpp - IPU machine descriptions -------------------------===//

#include "tessera/Target/IPUTarget.h"

#include <gtest/gtest.h>

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
