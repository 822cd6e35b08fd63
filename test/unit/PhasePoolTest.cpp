//===- PhasePoolTest.cpp - fork-join phases of the IPU model -------------===//

#include "tessera/Runtime/PhasePool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

using namespace tessera::runtime;

namespace {

// Every index of every phase runs exactly once, and a phase has finished
// when run() returns (the next phase sees all of its writes).
TEST(PhasePool, RunsEveryChunkOncePerPhase) {
  for (unsigned threads : {1u, 2u, 4u}) {
    PhasePool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    std::vector<int> counts(97, 0), expected(97, 0);
    for (int phase = 0; phase < 500; ++phase) {
      size_t n = 1 + phase % counts.size();
      pool.run(n, [&](size_t i) { ++counts[i]; });
      for (size_t i = 0; i < n; ++i)
        ++expected[i];
      // Reading every count right after run() checks the barrier.
      ASSERT_EQ(counts, expected) << threads << " threads, phase " << phase;
    }
  }
}

// Phases that take different times on different threads still join.
TEST(PhasePool, UnevenChunksJoin) {
  PhasePool pool(3);
  std::atomic<int64_t> sum{0};
  for (int phase = 0; phase < 50; ++phase) {
    std::vector<int64_t> out(8, 0);
    pool.run(out.size(), [&](size_t i) {
      int64_t s = 0;
      for (int64_t k = 0; k < int64_t(i) * 20000; ++k)
        s += k % 7;
      out[i] = s + 1;
    });
    for (int64_t v : out)
      ASSERT_GT(v, 0) << "a chunk had not finished when run() returned";
    sum += out[7];
  }
  EXPECT_GT(sum.load(), 0);
}

TEST(PhasePool, EmptyPhaseReturns) {
  PhasePool pool(2);
  bool called = false;
  pool.run(0, [&](size_t) { called = true; });
  EXPECT_FALSE(called);
}

} // namespace
