//===- TilePlannerTest.cpp - ipu-plan-tiles against the cost model -------===//
//
// The planner's decisions are data (#ipu.plan), applied by ipu-map-tiles, so
// a test can apply other plans to the same ops and compare estimates. These
// pin what the planner must guarantee whatever its search does: every op it
// plans gets a plan that fits the target's tiles, an elementwise op after a
// contraction runs as its epilogue, and no plan is estimated slower than
// running every op on one tile (the plan nobody would pick, but always
// valid).
//
//===----------------------------------------------------------------------===//

#include "tessera/Compiler/Registration.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/IPU/Transforms/Passes.h"
#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Runtime/ProgramCost.h"

#include "TilePlan.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <tuple>

using namespace mlir;
using namespace tessera;

namespace {

constexpr int64_t kTiles = 64;

/// A matmul of MxK by KxN into zeros, then a Relu, on a 64-tile ipu2.
std::string matmulRelu(int64_t m, int64_t n, int64_t k) {
  auto t = [](int64_t a, int64_t b) {
    return "tensor<" + std::to_string(a) + "x" + std::to_string(b) + "xf32>";
  };
  return R"(module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = )" +
         std::to_string(kTiles) + R"(, bytes_per_tile = 638976>} {
  func.func @main(%x: )" + t(m, k) + ", %w: " + t(k, n) + ") -> " + t(m, n) + R"( {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : )" + t(m, n) + R"(
    %init = linalg.fill ins(%zero : f32) outs(%e : )" + t(m, n) + ") -> " + t(m, n) + R"(
    %y = linalg.matmul ins(%x, %w : )" + t(m, k) + ", " + t(k, n) + ") outs(%init : " +
         t(m, n) + ") -> " + t(m, n) + R"(
    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%y : )" + t(m, n) + ") outs(%e : " + t(m, n) + R"() {
    ^bb0(%a: f32, %o: f32):
      %v = arith.maximumf %a, %zero : f32
      linalg.yield %v : f32
    } -> )" + t(m, n) + R"(
    return %r : )" + t(m, n) + R"(
  }
})";
}

/// Two layers, relu(relu(x W1) W2), of MxK, KxH and HxN, on 64 ipu2 tiles
/// (as `ipus` IPUs): the second weight is placed only when its matmul is
/// planned.
std::string twoLayers(int64_t m, int64_t k, int64_t h, int64_t n, int64_t ipus = 1) {
  auto t = [](int64_t a, int64_t b) {
    return "tensor<" + std::to_string(a) + "x" + std::to_string(b) + "xf32>";
  };
  auto layer = [&](const std::string &out, const std::string &in, const std::string &w,
                   int64_t rows, int64_t inner, int64_t cols) {
    std::string y = t(rows, cols);
    return "    %e" + out + " = tensor.empty() : " + y + "\n    %i" + out +
           " = linalg.fill ins(%zero : f32) outs(%e" + out + " : " + y + ") -> " + y +
           "\n    %m" + out + " = linalg.matmul ins(" + in + ", " + w + " : " +
           t(rows, inner) + ", " + t(inner, cols) + ") outs(%i" + out + " : " + y + ") -> " +
           y + "\n    %" + out +
           " = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, "
           "affine_map<(d0, d1) -> (d0, d1)>], iterator_types = [\"parallel\", "
           "\"parallel\"]} ins(%m" + out + " : " + y + ") outs(%e" + out + " : " + y +
           ") {\n    ^bb0(%a: f32, %o: f32):\n      %v = arith.maximumf %a, %zero : f32\n"
           "      linalg.yield %v : f32\n    } -> " + y + "\n";
  };
  return R"(module attributes {ipu.target = #ipu.target<"ipu2", ipus = )" +
         std::to_string(ipus) + ", tiles_per_ipu = " + std::to_string(kTiles / ipus) +
         R"(, bytes_per_tile = 638976>} {
  func.func @main(%x: )" + t(m, k) + ", %w1: " + t(k, h) + ", %w2: " + t(h, n) + ") -> " +
         t(m, n) + " {\n    %zero = arith.constant 0.0 : f32\n" +
         layer("h", "%x", "%w1", m, k, h) + layer("y", "%h", "%w2", m, h, n) +
         "    return %y : " + t(m, n) + "\n  }\n}";
}

class TilePlanner : public ::testing::Test {
protected:
  TilePlanner() {
    DialectRegistry registry;
    registerTesseraDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  OwningOpRef<ModuleOp> parse(const std::string &text) {
    return parseSourceString<ModuleOp>(text, &context);
  }
  /// Runs ipu-prepare-for-mapping and ipu-plan-tiles.
  LogicalResult plan(ModuleOp module) {
    PassManager pm(&context);
    pm.addPass(ipu::createIPUPrepareForMapping());
    pm.addPass(ipu::createIPUPlanTiles());
    return pm.run(module);
  }
  /// Applies the plans and estimates one iteration of the program.
  int64_t applyAndEstimate(ModuleOp module) {
    PassManager pm(&context);
    pm.addPass(ipu::createIPUMapTiles());
    if (failed(pm.run(module)))
      return -1;
    FailureOr<runtime::MachineProgram> program = ipu::exportMachineProgram(module);
    FailureOr<target::IPUTarget> target = ipu::getTarget(module);
    if (failed(program) || failed(target))
      return -1;
    runtime::ExecutableMetadata metadata;
    return runtime::estimateProgramCost(metadata, *program, *target).totalCycles;
  }

  MLIRContext context;
};

TEST_F(TilePlanner, PlansFitTheTilesAndAbsorbTheRelu) {
  OwningOpRef<ModuleOp> module = parse(matmulRelu(128, 96, 64));
  ASSERT_TRUE(module);
  ASSERT_TRUE(succeeded(plan(*module)));
  int64_t planned = 0, withEpilogue = 0;
  module->walk([&](linalg::GenericOp op) {
    auto attr = op->getAttrOfType<ipu::PlanAttr>(ipu::kPlanAttrName);
    if (!attr)
      return; // the Relu, absorbed
    ++planned;
    withEpilogue += attr.getEpilogue();
    runtime::TileMapping mapping =
        ipu::fromAttr(attr.getMapping(), cast<RankedTensorType>(op->getResult(0).getType()).getShape());
    llvm::Error err = mapping.verify(kTiles);
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    EXPECT_GT(mapping.numPieces(), 1) << "a 128x96 matmul on one tile";
  });
  EXPECT_GE(planned, 1);
  EXPECT_EQ(withEpilogue, 1);
}

TEST_F(TilePlanner, NoPlanIsSlowerThanOneTile) {
  for (auto [m, n, k] : {std::tuple{8, 8, 8}, {64, 32, 16}, {128, 128, 64}, {7, 13, 5},
                         {256, 64, 256}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    OwningOpRef<ModuleOp> chosen = parse(matmulRelu(m, n, k));
    OwningOpRef<ModuleOp> oneTile = parse(matmulRelu(m, n, k));
    ASSERT_TRUE(chosen && oneTile);
    ASSERT_TRUE(succeeded(plan(*chosen)) && succeeded(plan(*oneTile)));
    // The same decisions but each op's results whole on tile 0.
    oneTile->walk([&](linalg::GenericOp op) {
      auto attr = op->getAttrOfType<ipu::PlanAttr>(ipu::kPlanAttrName);
      if (!attr)
        return;
      auto shape = cast<RankedTensorType>(op->getResult(0).getType()).getShape();
      auto whole = ipu::MappingAttr::get(&context, shape,
                                         SmallVector<int64_t>(shape.size(), 0), 0);
      op->setAttr(ipu::kPlanAttrName, ipu::PlanAttr::get(&context, whole, attr.getEpilogue(),
                                                         attr.getInPlace()));
    });
    int64_t planned = applyAndEstimate(*chosen), single = applyAndEstimate(*oneTile);
    ASSERT_GT(planned, 0);
    ASSERT_GT(single, 0);
    EXPECT_LE(planned, single);
  }
}

// The planner keeps each step's output piece and receive buffers under
// available-memory-proportion x bytes per tile, costing a few sample pieces
// of each candidate: on every tile of the applied program, for every step,
// that holds; and the allocator places the whole program. Shapes that fit
// unsplit, split over the tiles, and only in serial steps (1024 x 1024 x
// 1024 on 64 tiles: 12 MB of operands, 40 MB of tiles).
TEST_F(TilePlanner, StepMemoryStaysUnderTheBudgetOnEveryTile) {
  const double budget = 0.6 * 638976;
  for (auto [m, n, k] : {std::tuple{64, 32, 16}, {256, 64, 256}, {7, 13, 5},
                         {512, 512, 512}, {1024, 1024, 1024}, {96, 2048, 768}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    OwningOpRef<ModuleOp> module = parse(matmulRelu(m, n, k));
    ASSERT_TRUE(module);
    ASSERT_TRUE(succeeded(plan(*module)));
    PassManager pm(&context);
    pm.addPass(ipu::createIPUMapTiles());
    ASSERT_TRUE(succeeded(pm.run(*module)));
    FailureOr<runtime::MachineProgram> program = ipu::exportMachineProgram(*module);
    ASSERT_TRUE(succeeded(program));
    for (const runtime::ComputeSet &cs : program->computeSets) {
      const runtime::Variable &out = program->variables[cs.outputs[0]];
      int64_t worst = 0;
      out.mapping.forEachPiece([&](int64_t tile, const runtime::Box &piece) {
        int64_t bytes = piece.numElements() * out.elementBytes();
        runtime::Box loops = cs.loopBox(piece);
        for (const auto &in : cs.inputs) {
          const runtime::Variable &v = program->variables[in.var];
          runtime::Box region = in.map.region(loops, v.shape);
          if (!runtime::isLocalPiece(*program, in.var, region, tile))
            bytes += region.numElements() * v.elementBytes();
        }
        worst = std::max(worst, bytes);
      });
      EXPECT_LE(worst, budget) << cs.name;
    }
    llvm::Expected<runtime::MemoryPlan> memory =
        runtime::planMemory(*program, kTiles, 638976);
    EXPECT_TRUE(static_cast<bool>(memory))
        << (memory ? "" : llvm::toString(memory.takeError()));
  }
}

// What the planner chose plans against -- per tile, the most bytes it
// took the tile to hold during a step (record-assumed-memory) -- is at
// least what the allocator then places there: the plans' memory checks
// stand for the program that runs. Shapes that fit unsplit, split over the
// tiles, in serial steps, two layers whose second weight is placed late,
// and two layers on two IPUs (code, and the reserve for it, per IPU).
TEST_F(TilePlanner, AssumesAtLeastWhatTheAllocatorPlacesOnEveryTile) {
  std::vector<std::pair<std::string, std::string>> programs;
  for (auto [m, n, k] : {std::tuple{64, 32, 16}, {7, 13, 5}, {512, 512, 512},
                         {1024, 1024, 1024}, {96, 2048, 768}})
    programs.emplace_back("matmul " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                              std::to_string(k),
                          matmulRelu(m, n, k));
  for (auto [m, k, h, n] : {std::tuple{128, 256, 512, 64}, {1024, 512, 1024, 256}, {7, 13, 5, 3}})
    programs.emplace_back("two layers " + std::to_string(m) + "x" + std::to_string(k) + "x" +
                              std::to_string(h) + "x" + std::to_string(n),
                          twoLayers(m, k, h, n));
  // A layer per IPU (as a pipeline's stages are placed): each IPU's tiles
  // hold only its own layer's code.
  programs.emplace_back("two layers on two IPUs", twoLayers(1024, 512, 1024, 256, /*ipus=*/2));
  for (const auto &[name, text] : programs) {
    SCOPED_TRACE(name);
    OwningOpRef<ModuleOp> module = parse(text);
    ASSERT_TRUE(module);
    if (name == "two layers on two IPUs") {
      // The first layer's ops (to its Relu) on IPU 0, the second's on 1.
      int64_t ipu = 0;
      module->walk([&](func::FuncOp main) {
        for (Operation &op : main.getBody().front()) {
          op.setAttr(graph::kIpuAttrName, IntegerAttr::get(IntegerType::get(&context, 64), ipu));
          if (isa<linalg::GenericOp>(op))
            ipu = 1;
        }
      });
    }
    PassManager pm(&context);
    pm.addPass(ipu::createIPUPrepareForMapping());
    ipu::IPUPlanTilesOptions options;
    options.recordAssumedMemory = true;
    pm.addPass(ipu::createIPUPlanTiles(options));
    ASSERT_TRUE(succeeded(pm.run(*module)));
    auto assumed = (*module)->getAttrOfType<DenseI64ArrayAttr>(ipu::kAssumedTileBytesAttrName);
    ASSERT_TRUE(assumed);
    ASSERT_EQ(assumed.size(), kTiles);
    PassManager apply(&context);
    apply.addPass(ipu::createIPUMapTiles());
    ASSERT_TRUE(succeeded(apply.run(*module)));
    FailureOr<runtime::MachineProgram> program = ipu::exportMachineProgram(*module);
    ASSERT_TRUE(succeeded(program));
    llvm::Expected<runtime::MemoryPlan> memory = runtime::planMemory(*program, kTiles, 638976);
    ASSERT_TRUE(static_cast<bool>(memory)) << llvm::toString(memory.takeError());
    int64_t used = 0;
    for (int64_t tile = 0; tile < kTiles; ++tile) {
      const runtime::MemoryByCategory &at = memory->peakByCategory[tile];
      EXPECT_GE(assumed[tile], memory->peakBytes[tile])
          << "tile " << tile << " at its peak: code " << at.code << ", activations "
          << at.activations << ", temporaries " << at.temporaries << ", weights " << at.weights;
      used += memory->peakBytes[tile] > 0;
    }
    EXPECT_GT(used, 1) << "a plan on one tile checks little";
  }
}

// finestGrids against every grid of every piece count: the same piece sizes
// in the same order (the count smallest), each grid within the tiles. On
// ResNet-50's layer1.0/downsample at batch 16 the finest is 2.7% over an
// even share of 1,472 tiles (20 channels x 8 rows x 56 of 16x256x56x56).
TEST(FinestGrids, AreTheSmallestPiecesOfAllGridsThatFit) {
  auto piecesOf = [](const std::vector<int64_t> &shape, const std::vector<int64_t> &chunks) {
    int64_t pieces = 1;
    for (size_t j = 0; j < shape.size(); ++j)
      pieces *= (shape[j] + chunks[j] - 1) / chunks[j];
    return pieces;
  };
  auto elementsOf = [](const std::vector<int64_t> &chunks) {
    return std::accumulate(chunks.begin(), chunks.end(), int64_t{1}, std::multiplies<>());
  };
  for (auto [shape, tiles, count] :
       {std::tuple{std::vector<int64_t>{4, 6, 5}, int64_t{7}, int64_t{5}},
        {{16, 9, 13, 2}, 64, 40},
        {{1, 64, 56, 56}, 1472, 16},
        {{3}, 8, 4},
        {{5, 7}, 1, 3}}) {
    SCOPED_TRACE(::testing::PrintToString(shape) + " on " + std::to_string(tiles));
    // Every grid, by brute force.
    std::vector<int64_t> all;
    std::vector<int64_t> chunks(shape.size(), 1);
    std::function<void(size_t)> each = [&](size_t j) {
      if (j == shape.size()) {
        if (piecesOf(shape, chunks) <= tiles)
          all.push_back(elementsOf(chunks));
        return;
      }
      // The chunk of each piece count (another chunk with as many pieces
      // only makes them larger).
      std::set<int64_t> sizes;
      for (int64_t p = 1; p <= shape[j]; ++p)
        sizes.insert((shape[j] + p - 1) / p);
      for (int64_t c : sizes) {
        chunks[j] = c;
        each(j + 1);
      }
    };
    each(0);
    std::sort(all.begin(), all.end());
    std::vector<std::vector<int64_t>> finest =
        tessera::ipu::tiling::finestGrids(shape, tiles, count, 1000000);
    ASSERT_EQ(static_cast<int64_t>(finest.size()), std::min<int64_t>(count, all.size()));
    for (size_t i = 0; i < finest.size(); ++i) {
      EXPECT_LE(piecesOf(shape, finest[i]), tiles);
      EXPECT_EQ(elementsOf(finest[i]), all[i]) << "grid " << i;
    }
  }
  EXPECT_TRUE(tessera::ipu::tiling::finestGrids({4, 4}, 16, 0, 1000000).empty());
  std::vector<std::vector<int64_t>> resnet =
      tessera::ipu::tiling::finestGrids({16, 256, 56, 56}, 1472, 1, 1000000);
  ASSERT_EQ(resnet.size(), 1u);
  EXPECT_EQ(resnet[0], (std::vector<int64_t>{1, 20, 8, 56}));
}

// The node bound cuts the search short: what it returns still fits the
// tiles, and it is not the whole search's answer (the bound is what keeps
// compile time in check on ops of many long dimensions).
TEST(FinestGrids, StopAfterTheNodeBound) {
  std::vector<int64_t> shape{16, 256, 56, 56};
  std::vector<std::vector<int64_t>> whole =
      tessera::ipu::tiling::finestGrids(shape, 1472, 16, 1000000);
  std::vector<std::vector<int64_t>> cut = tessera::ipu::tiling::finestGrids(shape, 1472, 16, 20);
  ASSERT_EQ(whole.size(), 16u);
  EXPECT_LE(cut.size(), 16u);
  EXPECT_NE(cut, whole);
  for (const std::vector<int64_t> &grid : cut) {
    int64_t pieces = 1;
    for (size_t j = 0; j < shape.size(); ++j)
      pieces *= (shape[j] + grid[j] - 1) / grid[j];
    EXPECT_LE(pieces, 1472);
  }
}

} // namespace
