//===- ReportTest.cpp - the report page's data -----------------------------===//
//
// report.json's figures are the memory plan's and the estimate's: each
// tile's peak and categories, items whose bytes add up to what the plan
// placed, the chip's liveness agreeing with the items, and for a program
// that does not fit, the tile the error names over its capacity.
//
//===----------------------------------------------------------------------===//

#include "ProgramBuilder.h"
#include "tessera/Report/Report.h"
#include "tessera/Runtime/FileUtils.h"
#include "tessera/Runtime/ProgramCost.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

using namespace tessera;
using namespace tessera::runtime;
using test_programs::Builder;

namespace {

/// x (input) on tiles 0-1, w (weight) on tiles 0-1, y = f(x, w), z reads y
/// whole (a receive buffer on each tile), the outputs y and z.
Builder smallProgram() {
  Builder b;
  TileMapping m;
  m.shape = {8};
  m.chunks = {4};
  m.tileStrides = {1};
  int64_t x = b.var("x", {8}, VarKind::Input, m);
  int64_t w = b.var("w", {8}, VarKind::Weight, m);
  int64_t y = b.var("y", {8}, VarKind::Activation, m);
  int64_t z = b.var("z", {8}, VarKind::Activation, m);
  b.compute({x, w}, y, false, 300);
  b.compute({y}, z, /*full=*/true, 500);
  b.p.inputs = {x};
  b.p.outputs = {y, z};
  return b;
}

target::IPUTarget smallTarget(int64_t tiles) {
  auto t = target::makeTarget("ipu2", 1, tiles);
  EXPECT_TRUE(static_cast<bool>(t));
  return *t;
}

int64_t runBytesOn(const llvm::json::Array &runs, int64_t tile) {
  for (const llvm::json::Value &r : runs) {
    const llvm::json::Array &run = *r.getAsArray();
    int64_t first = *run[0].getAsInteger(), count = *run[1].getAsInteger();
    if (tile >= first && tile < first + count)
      return *run[2].getAsInteger();
  }
  return 0;
}

std::vector<int64_t> ints(const llvm::json::Array *a) {
  std::vector<int64_t> out;
  for (const llvm::json::Value &v : *a)
    out.push_back(*v.getAsInteger());
  return out;
}

TEST(Report, FiguresAreThePlansAndTheEstimates) {
  Builder b = smallProgram();
  target::IPUTarget target = smallTarget(4);
  report::ReportSource source;
  source.program = &b.p;
  source.target = target;
  auto built = report::buildReport(source);
  ASSERT_TRUE(static_cast<bool>(built)) << llvm::toString(built.takeError());
  const llvm::json::Object &r = *built->getAsObject();
  EXPECT_EQ(r.getString("format"), "tessera-report");
  EXPECT_EQ(r.getBoolean("fits"), true);
  EXPECT_EQ(r.get("out_of_memory"), nullptr);

  auto plan = planMemory(b.p, 4, target.bytesPerTile);
  ASSERT_TRUE(static_cast<bool>(plan));
  const llvm::json::Object &memory = *r.getObject("memory");
  EXPECT_EQ(ints(memory.getArray("peak_bytes")), plan->peakBytes);
  std::vector<int64_t> code = ints(memory.getArray("code"));
  for (int64_t t = 0; t < 4; ++t) {
    EXPECT_EQ(code[t], plan->peakByCategory[t].code);
    EXPECT_EQ(ints(memory.getArray("temporaries"))[t], plan->peakByCategory[t].temporaries);
  }
  EXPECT_EQ(code[0], 800);
  EXPECT_EQ(code[2], 0);

  // Items: x, w, y, z (16 bytes on each of tiles 0-1) and z's receive
  // buffers (32 bytes on each), each with its live steps.
  const llvm::json::Array &items = *r.getArray("items");
  ASSERT_EQ(items.size(), 5u);
  int64_t itemBytes = 0;
  for (const llvm::json::Value &v : items) {
    const llvm::json::Object &item = *v.getAsObject();
    int64_t sum = 0;
    for (int64_t t = 0; t < 4; ++t)
      sum += runBytesOn(*item.getArray("tiles"), t);
    EXPECT_EQ(sum, item.getInteger("bytes"));
    itemBytes += sum;
    if (item.getString("name") == "y") {
      EXPECT_EQ(item.getInteger("birth"), 0);
      EXPECT_EQ(item.getInteger("death"), 1); // an output: to the end
      EXPECT_EQ(item.getString("kind"), "activation");
    }
    if (item.getString("kind") == "receive buffer") {
      EXPECT_EQ(item.getString("category"), "temporaries");
      EXPECT_EQ(item.getInteger("birth"), 1);
      EXPECT_EQ(item.getInteger("bytes"), 64);
    }
  }
  // The chip's live bytes per step: the code (800 on each of tiles 0-1)
  // throughout; step 0 without z and its receive buffers (born at step 1),
  // step 1 without x (last read at step 0).
  const llvm::json::Object &liveness = *r.getObject("liveness");
  std::vector<int64_t> chip = ints(liveness.getArray("chip"));
  ASSERT_EQ(chip.size(), 2u);
  EXPECT_EQ(chip[0], itemBytes - 32 - 64 + 1600);
  EXPECT_EQ(chip[1], itemBytes - 32 + 1600);
  EXPECT_EQ(liveness.getInteger("peak_step"), 1);

  // Steps: the estimate's, with the program's phases and plans.
  ExecutableMetadata none;
  CostSummary cost = estimateProgramCost(none, b.p, target);
  const llvm::json::Array &steps = *r.getArray("steps");
  ASSERT_EQ(steps.size(), cost.steps.size());
  for (size_t i = 0; i < steps.size(); ++i)
    EXPECT_EQ(steps[i].getAsObject()->getInteger("cycles"), cost.steps[i].total());
  const llvm::json::Object &cs0 = *steps[1].getAsObject();
  EXPECT_EQ(cs0.getString("phase"), "forward");
  EXPECT_EQ(cs0.getObject("plan")->getInteger("vertices"), 2);
  EXPECT_EQ(r.getObject("estimate")->getInteger("cycles"), cost.totalCycles);
}

TEST(Report, AProgramThatDoesNotFitShowsWhatEachTileWouldNeed) {
  Builder b = smallProgram();
  target::IPUTarget target = smallTarget(4);
  target.bytesPerTile = 512; // less than tile 0's code and data
  report::ReportSource source;
  source.program = &b.p;
  source.target = target;
  auto built = report::buildReport(source);
  ASSERT_TRUE(static_cast<bool>(built)) << llvm::toString(built.takeError());
  const llvm::json::Object &r = *built->getAsObject();
  EXPECT_EQ(r.getBoolean("fits"), false);
  const llvm::json::Object *oom = r.getObject("out_of_memory");
  ASSERT_TRUE(oom);
  int64_t tile = *oom->getInteger("tile");
  std::vector<int64_t> peak = ints(r.getObject("memory")->getArray("peak_bytes"));
  EXPECT_GT(peak[tile], 512);
  EXPECT_NE(r.getString("error")->find("out of tile memory"), llvm::StringRef::npos);
}

TEST(Report, ThePageInlinesTheDataWhereNoTagCanEndIt) {
  Builder b = smallProgram();
  b.p.variables[0].name = "</script><script>alert(1)</script>";
  report::ReportSource source;
  source.program = &b.p;
  source.target = smallTarget(4);
  auto built = report::buildReport(source);
  ASSERT_TRUE(static_cast<bool>(built));
  std::string page = report::renderReportPage(*built);
  EXPECT_EQ(page.find("alert(1)</script>"), std::string::npos);
  EXPECT_NE(page.find("\\u003c/script>\\u003cscript>alert(1)"), std::string::npos);
  EXPECT_EQ(page.find("/*TESSERA_REPORT_DATA*/"), std::string::npos);
  EXPECT_NE(page.find("<!DOCTYPE html>"), std::string::npos);
}

TEST(Report, WrittenAndReadBack) {
  Builder b = smallProgram();
  report::ReportSource source;
  source.program = &b.p;
  source.target = smallTarget(4);
  auto built = report::buildReport(source);
  ASSERT_TRUE(static_cast<bool>(built));
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tessera-report-test", dir));
  ASSERT_FALSE(static_cast<bool>(report::writeReport(dir, *built)));
  auto read = report::readReport(dir);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(*read, *built);
  // Something else in report.json is refused, naming the file.
  llvm::SmallString<128> data(dir);
  llvm::sys::path::append(data, report::kReportData);
  ASSERT_FALSE(static_cast<bool>(runtime::writeFileAtomically(data, "{\"format\": \"x\"}")));
  auto bad = report::readReport(dir);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("is not a Tessera report"), std::string::npos);
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
