//===- MemoryPlanTest.cpp - liveness-based tile memory allocation --------===//

#include "ProgramBuilder.h"
#include "tessera/Runtime/MemoryPlan.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace tessera::runtime;
using test_programs::Builder;

namespace {

TEST(MemoryPlan, DeadVariablesMemoryIsReused) {
  Builder b;
  int64_t x = b.onTile("x", 256, VarKind::Input);
  int64_t a = b.onTile("a", 256, VarKind::Activation);
  int64_t c = b.onTile("b", 256, VarKind::Activation);
  int64_t d = b.onTile("c", 256, VarKind::Activation);
  b.compute({x}, a);
  b.compute({a}, c);
  b.compute({c}, d);
  b.p.inputs = {x};
  b.p.outputs = {d};
  auto plan = planMemory(b.p, 4, 64 * 1024);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  // x dies after step 0, a after step 1: b reuses x's bytes and c a's.
  EXPECT_EQ(plan->variableOffset(x, 0), 0);
  EXPECT_EQ(plan->variableOffset(a, 0), 1024);
  EXPECT_EQ(plan->variableOffset(c, 0), 0);
  EXPECT_EQ(plan->variableOffset(d, 0), 1024);
  EXPECT_EQ(plan->peakBytes[0], 2048);
  EXPECT_EQ(plan->peakByCategory[0].activations, 2048);
  EXPECT_EQ(plan->peakBytes[1], 0);
  // Every input is read in place: no receive buffers.
  for (size_t cs = 0; cs < b.p.computeSets.size(); ++cs)
    EXPECT_FALSE(plan->receives(cs, 0));
}

TEST(MemoryPlan, StashedCopiesAreAllPlaced) {
  // A pipelined step's activation stashed for 3 micro-batches in flight
  // (Variable::copies) takes three times its bytes for its whole life; the
  // copies survive the program's JSON round trip.
  Builder b;
  int64_t x = b.onTile("x", 256, VarKind::Input);
  int64_t a = b.onTile("a", 256, VarKind::Activation);
  int64_t c = b.onTile("b", 256, VarKind::Activation);
  b.p.variables[a].copies = 3;
  b.compute({x}, a);
  b.compute({a}, c);
  b.p.inputs = {x};
  b.p.outputs = {c};
  auto plan = planMemory(b.p, 4, 64 * 1024);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ(plan->peakByCategory[0].activations, 3 * 1024 + 1024);
  auto back = MachineProgram::fromJSON(b.p.toJSON());
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->variables[a].copies, 3);
  EXPECT_EQ(back->variables[c].copies, 1);
}

TEST(MemoryPlan, ViewsKeepTheirBaseAliveAndWeightsLiveThroughout) {
  Builder b;
  int64_t x = b.onTile("x", 64, VarKind::Input);
  int64_t w = b.onTile("w", 64, VarKind::Weight);
  int64_t a = b.onTile("a", 64, VarKind::Activation);
  Variable view;
  view.name = "a.view";
  view.shape = {8, 8};
  view.base = a;
  b.p.variables.push_back(view);
  int64_t av = b.p.variables.size() - 1;
  int64_t c = b.onTile("c", 64, VarKind::Activation);
  int64_t d = b.var("d", {8, 8}, VarKind::Activation, TileMapping::singleTile({8, 8}, 0));
  b.compute({x, w}, a);
  b.compute({x}, c); // a stays live: its view is read next
  b.compute({av}, d);
  b.p.inputs = {x};
  b.p.outputs = {d};
  auto plan = planMemory(b.p, 1, 64 * 1024);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_TRUE(plan->variables[av].empty());
  auto off = [&](int64_t v) { return plan->variableOffset(v, 0); };
  // a (via its view) is live at step 2 with d: they must not overlap; c is
  // live with a too; w is never reused.
  auto disjoint = [&](int64_t u, int64_t v) {
    return off(u) + 256 <= off(v) || off(v) + 256 <= off(u);
  };
  EXPECT_TRUE(disjoint(a, d));
  EXPECT_TRUE(disjoint(a, c));
  EXPECT_TRUE(disjoint(w, d));
  EXPECT_TRUE(disjoint(w, c));
  EXPECT_EQ(plan->peakByCategory[0].weights, 256);
}

TEST(MemoryPlan, WeightsStackBelowTheCodeAndLeaveTheBottomToShortLivedData) {
  // Two weights on overlapping tile sets ({0, 1} and {1, 2}) and an
  // activation over all three tiles. Among the activations, w1 on tile 1
  // would push a to above it on every tile; from the top it does not.
  Builder b;
  int64_t x = b.var("x", {3, 64}, VarKind::Input,
                    TileMapping{{3, 64}, {1, 64}, {1, 0}, 0});
  int64_t w0 = b.var("w0", {2, 64}, VarKind::Weight,
                     TileMapping{{2, 64}, {1, 64}, {1, 0}, 0});
  int64_t w1 = b.var("w1", {2, 64}, VarKind::Weight,
                     TileMapping{{2, 64}, {1, 64}, {1, 0}, 1});
  int64_t a = b.var("a", {3, 64}, VarKind::Activation,
                    TileMapping{{3, 64}, {1, 64}, {1, 0}, 0});
  b.compute({x}, a, false, /*codeBytes=*/1000);
  b.p.inputs = {x};
  b.p.outputs = {a};
  const int64_t bytes = 4096;
  auto plan = planMemory(b.p, 3, bytes);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  // Code 1000 B (8-aligned below it: 3096 - 256 = 2840), then w0; w1
  // goes below w0 on tile 1 and right below the code on tile 2.
  EXPECT_EQ(plan->variableOffset(w0, 0), 2840);
  EXPECT_EQ(plan->variableOffset(w0, 1), 2840);
  EXPECT_EQ(plan->variableOffset(w1, 1), 2840 - 256);
  EXPECT_EQ(plan->variableOffset(w1, 2), 2840);
  for (int64_t tile = 0; tile < 3; ++tile) {
    EXPECT_EQ(plan->variableOffset(x, tile), 0);
    EXPECT_EQ(plan->variableOffset(a, tile), 256);
  }

  // Too little room under the code for both weights on tile 1.
  auto tight = planMemory(b.p, 3, 1000 + 256 + 255);
  ASSERT_FALSE(static_cast<bool>(tight));
  std::string message = llvm::toString(tight.takeError());
  EXPECT_NE(message.find("tile 1"), std::string::npos) << message;
  EXPECT_NE(message.find("program start"), std::string::npos) << message;
}

TEST(MemoryPlan, ReceiveBuffersForOperandsNotReadInPlace) {
  Builder b;
  // x on tiles 0 and 1 (4 elements each); y like x reads x in place; z reads
  // x whole, so both vertices receive 32 bytes.
  TileMapping m;
  m.shape = {8};
  m.chunks = {4};
  m.tileStrides = {1};
  int64_t x = b.var("x", {8}, VarKind::Input, m);
  int64_t y = b.var("y", {8}, VarKind::Activation, m);
  int64_t z = b.var("z", {8}, VarKind::Activation, m);
  b.compute({x}, y);
  b.compute({x}, z, /*full=*/true, /*codeBytes=*/1000);
  b.p.inputs = {x};
  b.p.outputs = {y, z};
  auto plan = planMemory(b.p, 2, 4096);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_FALSE(plan->receives(0, 0));
  ASSERT_TRUE(plan->receives(1, 0));
  for (int64_t tile = 0; tile < 2; ++tile) {
    int64_t recv = plan->receiveOffset(1, 0, tile);
    ASSERT_GE(recv, 0);
    EXPECT_EQ(recv % 8, 0);
    // The buffer is live with x, y and z at step 1.
    for (int64_t v : {x, y, z})
      EXPECT_TRUE(recv + 32 <= plan->variableOffset(v, tile) ||
                  plan->variableOffset(v, tile) + 16 <= recv);
  }
  EXPECT_EQ(plan->peakByCategory[1].temporaries, 32);
  EXPECT_EQ(plan->peakByCategory[1].code, 1000);
  EXPECT_EQ(plan->peakBytes[1], 16 * 3 + 32 + 1000);

  llvm::json::Value report = memoryReportJSON(b.p, *plan);
  const llvm::json::Object *o = report.getAsObject();
  ASSERT_TRUE(o);
  EXPECT_EQ(o->getInteger("tiles_used"), 2);
  EXPECT_EQ(o->getObject("max")->getInteger("bytes"), 16 * 3 + 32 + 1000);
  EXPECT_EQ(o->getObject("total")->getInteger("temporaries"), 64);
}

TEST(MemoryPlan, OverflowNamesTheTileAndTheLargestVariable) {
  Builder b;
  TileMapping m;
  m.shape = {4, 1000};
  m.chunks = {1, 1000};
  m.tileStrides = {1, 0};
  m.firstTile = 2;
  int64_t x = b.var("x", {4, 1000}, VarKind::Input, m);
  int64_t w = b.var("w", {4, 1000}, VarKind::Weight, m);
  int64_t big = b.var("big", {4, 1000}, VarKind::Activation, m);
  b.compute({x, w}, big, false, 512);
  b.p.inputs = {x};
  b.p.outputs = {big};
  // Each tile needs 3 x 4000 bytes + 512 of code; give it 10 KiB.
  OutOfMemory report;
  auto plan = planMemory(b.p, 8, 10 * 1024, &report);
  ASSERT_FALSE(static_cast<bool>(plan));
  std::string message = llvm::toString(plan.takeError());
  EXPECT_EQ(message, report.message());
  EXPECT_GE(report.tile, 2);
  EXPECT_LE(report.tile, 5);
  EXPECT_EQ(report.available, 10 * 1024);
  EXPECT_EQ(report.needed, 3 * 4000 + 512);
  EXPECT_EQ(report.step, "cs0 (op \"/n0\")");
  ASSERT_EQ(report.live.size(), 4u);
  EXPECT_EQ(report.live.back().category, "code");
  EXPECT_EQ(report.byCategory.weights, 4000);
  EXPECT_EQ(report.byCategory.activations, 8000);
  EXPECT_NE(message.find("out of tile memory: tile " + std::to_string(report.tile) +
                         " needs 12,512 bytes, has 10,240 (10 KiB) at cs0 (op \"/n0\")"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("activations 'big' 4,000 B"), std::string::npos) << message;
  EXPECT_NE(message.find("Try: more IPUs (--num-ipus)"), std::string::npos);
  EXPECT_TRUE(report.toJSON().getAsObject()->getString("message").has_value());

  // What comes from the host overflows before any step.
  auto tiny = planMemory(b.p, 8, 6000, &report);
  ASSERT_FALSE(static_cast<bool>(tiny));
  EXPECT_NE(llvm::toString(tiny.takeError()).find("at program start"), std::string::npos);
}

TEST(MemoryPlan, EachTileTakesItsOwnLowestFreeOffset) {
  // 'p' fills tile 0's bottom 3,000 bytes; 'z' (1,000 B on tiles 0 and 1)
  // goes above it on tile 0 and at the bottom of tile 1, below the 2,000 B
  // weight 'w'. With one offset on both tiles (3,000), tile 1 would need
  // 6,000 of its 4,096 bytes.
  Builder b;
  int64_t w = b.onTile("w", 500, VarKind::Weight, /*tile=*/1);
  int64_t p = b.onTile("p", 750, VarKind::Input, /*tile=*/0);
  TileMapping two;
  two.shape = {2, 250};
  two.chunks = {1, 250};
  two.tileStrides = {1, 0};
  int64_t z = b.var("z", {2, 250}, VarKind::Activation, two);
  b.compute({}, z);
  b.p.inputs = {p};
  b.p.outputs = {z, p};
  auto plan = planMemory(b.p, 2, 4096);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ(plan->variableOffset(w, 1), 4096 - 2000);
  EXPECT_EQ(plan->variableOffset(p, 0), 0);
  EXPECT_EQ(plan->variableOffset(z, 0), 3000);
  EXPECT_EQ(plan->variableOffset(z, 1), 0);
  EXPECT_EQ(plan->peakBytes[1], 3000);
}

TEST(MemoryPlan, OverflowWithFreeBytesInPiecesSaysSo) {
  // On one tile of 4,096 B: p1, p2, p3 (1,000 B each) from the host, q
  // (1,000 B) above them; p2 dies after step 0, leaving a 1,000 B hole
  // between p1 and p3, and 96 B are free at the top. r (1,048 B) at step 1
  // fits in neither, though the tile would hold 4,048 B.
  Builder b;
  int64_t p1 = b.onTile("p1", 250, VarKind::Input);
  int64_t p2 = b.onTile("p2", 250, VarKind::Input);
  int64_t p3 = b.onTile("p3", 250, VarKind::Input);
  int64_t q = b.onTile("q", 250, VarKind::Activation);
  int64_t r = b.onTile("r", 262, VarKind::Activation);
  b.compute({p2}, q);
  b.compute({q}, r, /*full=*/true);
  b.p.inputs = {p1, p2, p3};
  b.p.outputs = {p1, p3, r};
  OutOfMemory report;
  auto plan = planMemory(b.p, 1, 4096, &report);
  ASSERT_FALSE(static_cast<bool>(plan));
  std::string message = llvm::toString(plan.takeError());
  EXPECT_EQ(report.tile, 0) << message;
  // r would go above q: its top is past the tile's end.
  EXPECT_EQ(report.needed, 4000 + 1048) << message;
  EXPECT_EQ(report.byCategory.total(), 4048) << message;
  EXPECT_EQ(report.step, "cs1 (op \"/n1\")");
  EXPECT_NE(message.find("those 4,048 B would fit, but the free bytes are in pieces, the "
                         "largest 1,000 B, and 'r' needs 1,048 B in one"),
            std::string::npos)
      << message;

  // With the bytes the report says it needs, r fits above q.
  auto fits = planMemory(b.p, 1, report.needed);
  ASSERT_TRUE(static_cast<bool>(fits)) << llvm::toString(fits.takeError());
  EXPECT_EQ(fits->variableOffset(r, 0), 4000);
  EXPECT_EQ(fits->variableOffset(q, 0), 3000);
}

} // namespace
