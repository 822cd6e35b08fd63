//===- ShapeUtilsTest.cpp - shape rules shared by ops and importers ------===//

#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include <gtest/gtest.h>

using namespace tessera::graph;
using llvm::SmallVector;

namespace {

TEST(ShapeUtils, BroadcastAlignsTrailingDims) {
  auto r = broadcastShapes({4, 1, 3}, {5, 1});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (SmallVector<int64_t>{4, 5, 3}));
  EXPECT_EQ(*broadcastShapes({}, {2, 3}), (SmallVector<int64_t>{2, 3}));
}

TEST(ShapeUtils, BroadcastRejectsMismatch) {
  EXPECT_FALSE(broadcastShapes({2, 3}, {4}).has_value());
}

TEST(ShapeUtils, BroadcastKeepsDynamicDims) {
  auto r = broadcastShapes({kDynamicDim, 3}, {1, 3});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)[0], kDynamicDim);
  // A known size other than 1 wins over an unknown one.
  EXPECT_EQ((*broadcastShapes({kDynamicDim}, {7}))[0], 7);
}

TEST(ShapeUtils, BroadcastableToIsOneDirectional) {
  EXPECT_TRUE(isBroadcastableTo({3}, {4, 3}));
  EXPECT_TRUE(isBroadcastableTo({1, 3}, {4, 3}));
  EXPECT_FALSE(isBroadcastableTo({4, 3}, {3}));
  EXPECT_FALSE(isBroadcastableTo({2}, {4, 3}));
}

TEST(ShapeUtils, WindowOutputMatchesPyTorch) {
  // ResNet stem: 224, k7, s2, p3 -> 112; maxpool k3 s2 p1 -> 56.
  EXPECT_EQ(windowOutputSize(224, 7, 2, 3, 3, 1, false), 112);
  EXPECT_EQ(windowOutputSize(112, 3, 2, 1, 1, 1, false), 56);
  // Dilation widens the window.
  EXPECT_EQ(windowOutputSize(10, 3, 1, 0, 0, 2, false), 6);
  // Window larger than the padded input.
  EXPECT_FALSE(windowOutputSize(2, 3, 1, 0, 0, 1, false).has_value());
}

TEST(ShapeUtils, CeilModeDropsWindowsStartingInPadding) {
  // torch.nn.MaxPool2d(3, 2, ceil_mode=True) on 112 (SqueezeNet) -> 56.
  EXPECT_EQ(windowOutputSize(112, 3, 2, 0, 0, 1, true), 56);
  EXPECT_EQ(windowOutputSize(6, 2, 2, 0, 0, 1, true), 3);
  EXPECT_EQ(windowOutputSize(5, 2, 2, 0, 0, 1, true), 3);
  // 4 + pad 1: the last window would start in the trailing padding.
  EXPECT_EQ(windowOutputSize(4, 2, 2, 1, 1, 1, true), 3);
  EXPECT_EQ(windowOutputSize(4, 3, 2, 1, 1, 1, false), 2);
}

TEST(ShapeUtils, SliceSizes) {
  EXPECT_EQ(sliceOutputSize(0, 10, 3), 4);
  EXPECT_EQ(sliceOutputSize(9, -1, -1), 10);
  EXPECT_EQ(sliceOutputSize(5, 5, 1), 0);
  EXPECT_EQ(sliceOutputSize(5, 2, 1), 0);
}

TEST(ShapeUtils, NumElementsAndFormat) {
  EXPECT_EQ(numElements({2, 3, 4}), 24);
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({2, kDynamicDim}), kDynamicDim);
  EXPECT_EQ(formatShape({1, kDynamicDim, 224}), "1x?x224");
}

} // namespace
