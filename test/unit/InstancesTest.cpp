//===- InstancesTest.cpp - tessera-launch's instances, without MPI ---------===//
//
// Where an instance stands (PopDist's environment), which rows of a run are
// its own, and what the estimate charges an all-reduce past one IPU-Link
// domain. The collectives themselves run in test/tools/launch.py and
// test/python/test_distributed.py, over mpirun.

#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/Instances.h"
#include "tessera/Target/CostModel.h"
#include "tessera/Target/IPUTarget.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

using namespace tessera::runtime;

namespace {

/// Sets PopDist's variables for one test, and clears them after.
struct Environment {
  static constexpr const char *kNames[] = {
      "POPDIST_NUM_INSTANCES",       "POPDIST_INSTANCE_INDEX",
      "POPDIST_NUM_TOTAL_REPLICAS",  "POPDIST_NUM_LOCAL_REPLICAS",
      "POPDIST_REPLICA_INDEX_OFFSET", "POPDIST_NUM_IPUS_PER_REPLICA"};
  Environment() { clear(); }
  ~Environment() { clear(); }
  void clear() {
    for (const char *name : kNames)
      unsetenv(name);
  }
  void set(const char *name, const char *value) { setenv(name, value, 1); }
};

TEST(Instance, NoneOutsideALaunch) {
  Environment env;
  auto instance = Instance::fromEnvironment();
  ASSERT_TRUE(static_cast<bool>(instance));
  EXPECT_FALSE(instance->has_value());
}

TEST(Instance, ReadsPopDistsVariables) {
  Environment env;
  env.set("POPDIST_NUM_INSTANCES", "4");
  env.set("POPDIST_INSTANCE_INDEX", "2");
  env.set("POPDIST_NUM_TOTAL_REPLICAS", "8");
  auto instance = Instance::fromEnvironment();
  ASSERT_TRUE(static_cast<bool>(instance)) << llvm::toString(instance.takeError());
  ASSERT_TRUE(instance->has_value());
  EXPECT_EQ((*instance)->localReplicas, 2);
  EXPECT_EQ((*instance)->replicaOffset, 4);
}

TEST(Instance, RefusesVariablesThatDoNotAddUp) {
  Environment env;
  env.set("POPDIST_NUM_INSTANCES", "2");
  env.set("POPDIST_INSTANCE_INDEX", "1");
  env.set("POPDIST_NUM_TOTAL_REPLICAS", "3");
  auto odd = Instance::fromEnvironment();
  ASSERT_FALSE(static_cast<bool>(odd));
  EXPECT_NE(llvm::toString(odd.takeError()).find("is not a multiple of POPDIST_NUM_INSTANCES"),
            std::string::npos);
  env.set("POPDIST_NUM_TOTAL_REPLICAS", "4");
  env.set("POPDIST_REPLICA_INDEX_OFFSET", "3");
  auto shifted = Instance::fromEnvironment();
  ASSERT_FALSE(static_cast<bool>(shifted));
  EXPECT_NE(llvm::toString(shifted.takeError()).find("would run replicas 2 to 3"),
            std::string::npos);
  env.set("POPDIST_INSTANCE_INDEX", "two");
  auto garbled = Instance::fromEnvironment();
  ASSERT_FALSE(static_cast<bool>(garbled));
  EXPECT_NE(llvm::toString(garbled.takeError()).find("POPDIST_INSTANCE_INDEX='two'"),
            std::string::npos);
}

TEST(Instance, KeepsItsReplicasRowsOfEveryIteration) {
  // 4 replicas of micro-batch 2, 2 iterations: rows [iteration][replica][2].
  ExecutableMetadata m;
  m.replicas = 4;
  m.deviceIterations = 2;
  m.share.first = 2;
  m.share.count = 2;
  m.share.instances = 2;
  m.share.instance = 1;
  TensorInfo info;
  info.name = "x";
  info.dtype = DType::I32;
  info.shape = {2, 3};
  Tensor whole = Tensor::zeros(DType::I32, {16, 3});
  for (int32_t row = 0; row < 16; ++row)
    for (int32_t c = 0; c < 3; ++c)
      std::memcpy(whole.data.data() + (row * 3 + c) * 4, &row, 4);
  Tensor mine = localBatches(m, info, whole);
  ASSERT_EQ(mine.shape, (std::vector<int64_t>{8, 3}));
  std::vector<int32_t> rows;
  for (int64_t r = 0; r < 8; ++r) {
    int32_t v;
    std::memcpy(&v, mine.data.data() + r * 12, 4);
    rows.push_back(v);
  }
  EXPECT_EQ(rows, (std::vector<int32_t>{4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_EQ(m.localReplicas(), 2);
  m.share = {};
  EXPECT_EQ(localBatches(m, info, whole).data, whole.data);
}

TEST(AllReduceCost, WithinADomainIsOneRingAndBeyondAddsGWLinks) {
  auto target = tessera::target::makeTarget("ipu2", 1, std::nullopt);
  ASSERT_TRUE(static_cast<bool>(target));
  tessera::target::CostModel cost(*target);
  constexpr int64_t kBytes = 100 << 20;
  // One Pod64 of one-IPU replicas: IPU-Links only.
  EXPECT_EQ(cost.allReduceGWLinkCycles(kBytes, 64), 0);
  EXPECT_GT(cost.allReduceCycles(kBytes, 64), cost.allReduceCycles(kBytes, 16));
  // Four Pod64s: the domains' ring over GW-Links, whose 6.25 GB/s per IPU
  // make it dearer than the 64-replica ring's per-byte share.
  int64_t gw = cost.allReduceGWLinkCycles(kBytes, 256);
  EXPECT_GT(gw, 0);
  EXPECT_EQ(cost.allReduceCycles(kBytes, 256), cost.allReduceCycles(kBytes, 64) + gw);
  EXPECT_EQ(cost.allReduceCycles(kBytes, 1), 0);
}

} // namespace
