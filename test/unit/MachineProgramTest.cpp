//===- MachineProgramTest.cpp - mappings, runs, JSON, verification -------===//

#include "tessera/Runtime/MachineProgram.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <numeric>
#include <map>
#include <random>
#include <set>

using namespace tessera::runtime;

namespace {

std::vector<int64_t> unflatten(int64_t flat, llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

int64_t flatten(llvm::ArrayRef<int64_t> idx, llvm::ArrayRef<int64_t> shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    f = f * shape[d] + idx[d];
  return f;
}

/// Where element `idx` of a mapped tensor lives: (tile, offset in piece).
std::pair<int64_t, int64_t> locate(const TileMapping &m, const std::vector<int64_t> &idx) {
  std::vector<int64_t> piece;
  for (size_t d = 0; d < idx.size(); ++d)
    piece.push_back(idx[d] / m.chunks[d]);
  Box box = m.pieceBox(piece);
  std::vector<int64_t> local;
  for (size_t d = 0; d < idx.size(); ++d)
    local.push_back(idx[d] - box.offsets[d]);
  return {m.tileOf(piece), flatten(local, box.sizes)};
}

/// Per element of the region (row-major): (tile, piece offset), brute force.
std::vector<std::pair<int64_t, int64_t>>
referenceElements(const MachineProgram &p, int64_t var, const Box &region) {
  const Variable &v = p.variables[var];
  const Variable &base = p.storage(var);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t i = 0; i < region.numElements(); ++i) {
    std::vector<int64_t> r = unflatten(i, region.sizes);
    for (size_t d = 0; d < r.size(); ++d)
      r[d] += region.offsets[d];
    int64_t flat = flatten(r, v.shape);
    out.push_back(locate(base.mapping, unflatten(flat, base.shape)));
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>>
runElements(const MachineProgram &p, int64_t var, const Box &region, int64_t &runs) {
  std::vector<std::pair<int64_t, int64_t>> out;
  runs = 0;
  forEachRun(p, var, region, [&](const Run &r) {
    ++runs;
    EXPECT_EQ(r.regionOffset, static_cast<int64_t>(out.size()));
    EXPECT_GT(r.count, 0);
    for (int64_t k = 0; k < r.count; ++k)
      out.emplace_back(r.tile, r.pieceOffset + k);
  });
  return out;
}

std::vector<int64_t> randomShape(std::mt19937 &rng, int rank, int maxDim) {
  std::vector<int64_t> s;
  for (int d = 0; d < rank; ++d)
    s.push_back(1 + rng() % maxDim);
  return s;
}

/// A random grid: random chunks, pieces on tiles in a random dimension
/// order (row-major over a permutation of the dimensions) from a random
/// first tile.
TileMapping randomMapping(std::mt19937 &rng, const std::vector<int64_t> &shape,
                          int64_t &tilesNeeded) {
  TileMapping m;
  m.shape = shape;
  for (int64_t s : shape)
    m.chunks.push_back(1 + rng() % s);
  std::vector<int64_t> n = m.piecesPerDim(), order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  m.tileStrides.assign(shape.size(), 0);
  int64_t stride = 1;
  for (int64_t d : order) {
    m.tileStrides[d] = stride;
    stride *= n[d];
  }
  m.firstTile = rng() % 5;
  tilesNeeded = m.firstTile + stride;
  return m;
}

/// A random row-major reshape of `shape`: the same elements, other dims.
std::vector<int64_t> randomReshape(std::mt19937 &rng, const std::vector<int64_t> &shape) {
  int64_t total = 1;
  for (int64_t s : shape)
    total *= s;
  std::vector<int64_t> out;
  while (total > 1 && out.size() < 4) {
    std::vector<int64_t> divisors;
    for (int64_t d = 1; d <= total; ++d)
      if (total % d == 0)
        divisors.push_back(d);
    int64_t d = divisors[rng() % divisors.size()];
    out.push_back(d);
    total /= d;
  }
  if (total > 1)
    out.push_back(total);
  if (rng() % 3 == 0)
    out.insert(out.begin() + rng() % (out.size() + 1), 1);
  return out;
}

Box randomRegion(std::mt19937 &rng, const std::vector<int64_t> &shape) {
  Box b;
  for (int64_t s : shape) {
    bool whole = rng() % 3 == 0;
    int64_t lo = whole ? 0 : rng() % s;
    int64_t size = whole ? s : 1 + rng() % (s - lo);
    b.offsets.push_back(lo);
    b.sizes.push_back(size);
  }
  return b;
}

TEST(MachineProgram, LinearMappingSplitsTheOutermostDimensionsThatGiveEnoughPieces) {
  // 2x3x224x224 f32 on 1472 tiles: one row of 224 floats (896 B) per piece,
  // 1344 pieces on tiles 0..1343.
  TileMapping m = TileMapping::linear({2, 3, 224, 224}, 4, 1472);
  EXPECT_EQ(m.chunks, (std::vector<int64_t>{1, 1, 1, 224}));
  EXPECT_EQ(m.numPieces(), 1344);
  EXPECT_EQ(m.tileStrides, (std::vector<int64_t>{672, 224, 1, 0}));
  EXPECT_FALSE(static_cast<bool>(m.verify(1472)));
  auto last = m.pieceOnTile(1343);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->offsets, (llvm::SmallVector<int64_t, 6>{1, 2, 223, 0}));
  EXPECT_FALSE(m.pieceOnTile(1344).has_value());

  // 1000 floats: pieces of at least 128 bytes (32 floats), the last short.
  TileMapping v = TileMapping::linear({1000}, 4, 1472);
  EXPECT_EQ(v.chunks, (std::vector<int64_t>{32}));
  EXPECT_EQ(v.numPieces(), 32);
  EXPECT_EQ(v.pieceBox({31}).sizes, (llvm::SmallVector<int64_t, 6>{8}));
  EXPECT_EQ(v.maxPieceElements(), 32);

  // Few tiles: as many pieces as tiles, no more.
  TileMapping few = TileMapping::linear({64, 100}, 4, 6);
  EXPECT_LE(few.numPieces(), 6);
  EXPECT_EQ(few.numPieces(), 6);
  EXPECT_FALSE(static_cast<bool>(few.verify(6)));

  // Scalars and tensors under two grains stay whole on tile 0.
  for (auto shape : {std::vector<int64_t>{}, std::vector<int64_t>{3, 5}}) {
    TileMapping s = TileMapping::linear(shape, 4, 1472);
    EXPECT_EQ(s.numPieces(), 1);
    EXPECT_EQ(s.tileOf(std::vector<int64_t>(shape.size(), 0)), 0);
  }
}

TEST(MachineProgram, PieceBoxesCoverTheTensorOnDistinctTiles) {
  TileMapping m;
  m.shape = {5, 7};
  m.chunks = {2, 3};
  m.tileStrides = {1, 3}; // column-major piece order
  m.firstTile = 4;
  EXPECT_EQ(m.piecesPerDim(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(m.pieceBox({2, 2}), (Box{{4, 6}, {1, 1}}));
  EXPECT_EQ(m.tileOf({2, 1}), 4 + 2 + 3);
  int64_t covered = 0;
  m.forEachPiece([&](int64_t tile, const Box &box) {
    covered += box.numElements();
    auto back = m.pieceOnTile(tile);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, box);
  });
  EXPECT_EQ(covered, 35);
  EXPECT_FALSE(static_cast<bool>(m.verify(13)));
  // Tile 13 is past a 13-tile machine.
  EXPECT_TRUE(static_cast<bool>(m.verify(12)));
  llvm::consumeError(m.verify(12));
  m.tileStrides = {1, 1}; // pieces collide
  llvm::Error err = m.verify(100);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("two pieces on tile"), std::string::npos);
}

TEST(MachineProgram, ForEachPieceVisitsEachPieceBoxAndTileInRowMajorOrder) {
  // Remainders in two dimensions, an unsplit one (stride 0), a chunk larger
  // than its dimension and pieces in column-major tile order: what the
  // walk steps in place must be pieceBox and tileOf of each piece.
  TileMapping m;
  m.shape = {5, 3, 7, 2};
  m.chunks = {2, 3, 3, 4};
  m.tileStrides = {1, 0, 3, 0};
  m.firstTile = 6;
  std::vector<int64_t> n = m.piecesPerDim();
  ASSERT_EQ(n, (std::vector<int64_t>{3, 1, 3, 1}));
  std::vector<std::pair<int64_t, Box>> expected;
  for (int64_t a = 0; a < n[0]; ++a)
    for (int64_t c = 0; c < n[2]; ++c) {
      std::vector<int64_t> piece{a, 0, c, 0};
      expected.emplace_back(m.tileOf(piece), m.pieceBox(piece));
    }
  std::vector<std::pair<int64_t, Box>> visited;
  m.forEachPiece([&](int64_t tile, const Box &box) { visited.emplace_back(tile, box); });
  EXPECT_EQ(visited, expected);
  EXPECT_EQ(visited.back().second, (Box{{4, 0, 6, 0}, {1, 3, 1, 2}}));
}

TEST(MachineProgram, MirroredPiecesAreCopiesOnTheTilesOfEveryBlock) {
  // Two pieces of rows, on tiles 1 and 5, each copied onto the next three
  // tiles: every tile of 1..8 holds one piece's copy.
  TileMapping m;
  m.shape = {6, 8};
  m.chunks = {3, 8};
  m.tileStrides = {4, 0};
  m.firstTile = 1;
  m.mirrorCounts = {4};
  m.mirrorStrides = {1};
  EXPECT_EQ(m.numPieces(), 2);
  EXPECT_EQ(m.numCopies(), 4);
  std::vector<std::pair<int64_t, Box>> visited;
  m.forEachPiece([&](int64_t tile, const Box &box) { visited.emplace_back(tile, box); });
  Box top{{0, 0}, {3, 8}}, bottom{{3, 0}, {3, 8}};
  // The first copy in piece order, then the others copy by copy.
  std::vector<std::pair<int64_t, Box>> expected = {{1, top}, {5, bottom}, {2, top}, {6, bottom},
                                                   {3, top}, {7, bottom}, {4, top}, {8, bottom}};
  EXPECT_EQ(visited, expected);
  for (auto [tile, box] : expected) {
    std::optional<Box> held = m.pieceOnTile(tile);
    ASSERT_TRUE(held.has_value()) << tile;
    EXPECT_EQ(*held, box) << tile;
  }
  EXPECT_FALSE(m.pieceOnTile(0).has_value());
  EXPECT_FALSE(m.pieceOnTile(9).has_value());
  EXPECT_EQ(m.tileOf({1, 0}), 5); // the first copy's
  EXPECT_FALSE(static_cast<bool>(m.verify(9)));
  auto expectError = [](TileMapping bad, int64_t tiles, const std::string &message) {
    llvm::Error err = bad.verify(tiles);
    ASSERT_TRUE(static_cast<bool>(err)) << message;
    std::string got = llvm::toString(std::move(err));
    EXPECT_NE(got.find(message), std::string::npos) << got;
  };
  expectError(m, 8, "outside [0, 8)");
  TileMapping colliding = m;
  colliding.mirrorCounts = {2};
  colliding.mirrorStrides = {4}; // the copy of the top piece lands on tile 5
  expectError(colliding, 16, "two pieces on tile 5");
  TileMapping single = m;
  single.mirrorCounts = {1};
  expectError(single, 16, "needs 2 to 16 copies");
  TileMapping unpaired = m;
  unpaired.mirrorStrides.clear();
  expectError(unpaired, 16, "1 mirror counts and 0 mirror strides");
}

// forEachPieceElements walks what forEachPiece walks, in its order, giving
// each piece's element count: over random grids, edge pieces and mirrors.
TEST(MachineProgram, ForEachPieceElementsCountsEachPieceForEachPieceVisits) {
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 500; ++trial) {
    TileMapping m;
    int64_t rank = pick(0, 4), stride = 1;
    for (int64_t d = 0; d < rank; ++d) {
      m.shape.push_back(pick(0, 9));
      m.chunks.push_back(pick(1, 5));
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      m.tileStrides.insert(m.tileStrides.begin(), stride);
      stride *= m.piecesAlong(d);
    }
    if (pick(0, 1)) {
      m.mirrorCounts = {pick(2, 3)};
      m.mirrorStrides = {stride};
    }
    std::vector<std::pair<int64_t, int64_t>> boxes, counts;
    m.forEachPiece([&](int64_t tile, const Box &box) { boxes.push_back({tile, box.numElements()}); });
    m.forEachPieceElements([&](int64_t tile, int64_t n) { counts.push_back({tile, n}); });
    ASSERT_EQ(counts, boxes) << "trial " << trial;
  }
}

TEST(MachineProgram, PieceShapesAreEveryPiecesShapeOnceInKernelOrder) {
  // 5 x 7 in chunks of 2 x 3: rows of 2 and a remainder of 1, columns of 3
  // and a remainder of 1; a compute set's kernels come in this order.
  TileMapping m;
  m.shape = {5, 7, 4};
  m.chunks = {2, 3, 4};
  m.tileStrides = {3, 1, 0};
  std::vector<std::vector<int64_t>> expected{{2, 3, 4}, {2, 1, 4}, {1, 3, 4}, {1, 1, 4}};
  EXPECT_EQ(m.pieceShapes(), expected);
  std::set<std::vector<int64_t>> seen;
  m.forEachPiece([&](int64_t, const Box &box) { seen.emplace(box.sizes.begin(), box.sizes.end()); });
  EXPECT_EQ(seen, std::set<std::vector<int64_t>>(expected.begin(), expected.end()));
  // A chunk larger than its dimension gives the dimension; a scalar has one
  // (empty) shape.
  m.shape = {3};
  m.chunks = {8};
  m.tileStrides = {0};
  EXPECT_EQ(m.pieceShapes(), (std::vector<std::vector<int64_t>>{{3}}));
  m.shape = m.chunks = m.tileStrides = {};
  EXPECT_EQ(m.pieceShapes(), (std::vector<std::vector<int64_t>>{{}}));
}

TEST(MachineProgram, AccessMapRegionsClampIntoTheOperand) {
  // A 3x3 convolution window with padding 1: rows oh*2 + kh - 1.
  AccessMap map;
  map.coeffs = {{2, 1}};
  map.consts = {-1};
  Box loops{{0, 0}, {4, 3}};
  EXPECT_EQ(map.region(loops, {8}), (Box{{0}, {8}}));
  Box tail{{3, 0}, {1, 3}};
  EXPECT_EQ(map.region(tail, {7}), (Box{{5}, {2}}));
  AccessMap full;
  full.full = true;
  EXPECT_EQ(full.region(loops, {3, 4}), (Box{{0, 0}, {3, 4}}));
}

TEST(MachineProgram, AccessMapExtentsReadWindowsPerIteration) {
  // A gather's table [64, 8] under loops (n, d): rows whole (extent 64),
  // columns following d.
  AccessMap table;
  table.coeffs = {{0, 0}, {0, 1}};
  table.consts = {0, 0};
  table.extents = {64, 1};
  EXPECT_EQ(table.region(Box{{0, 2}, {16, 2}}, {64, 8}), (Box{{0, 2}, {64, 2}}));
  // A block of 10 rows per iteration of loop 0, the last block clamped.
  AccessMap blocks;
  blocks.coeffs = {{10, 0}};
  blocks.consts = {0};
  blocks.extents = {10};
  EXPECT_EQ(blocks.region(Box{{1, 0}, {2, 4}}, {35}), (Box{{10}, {20}}));
  EXPECT_EQ(blocks.region(Box{{3, 0}, {1, 4}}, {35}), (Box{{30}, {5}}));
}

TEST(MachineProgram, RunsMatchABruteForceWalkOverRandomGridsRegionsAndViews) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 3000; ++trial) {
    MachineProgram p;
    Variable base;
    base.name = "base";
    base.shape = randomShape(rng, rng() % 5, 9);
    int64_t tiles = 0;
    base.mapping = randomMapping(rng, base.shape, tiles);
    p.variables.push_back(base);
    int64_t var = 0;
    if (trial % 2) {
      Variable view;
      view.name = "view";
      view.shape = randomReshape(rng, base.shape);
      if (trial % 4 == 3) {
        // Only unit dimensions inserted or dropped (a convolution's group
        // dimension): the queries' shortcut for such views.
        view.shape.clear();
        for (int64_t s : base.shape)
          if (s != 1 || rng() % 2)
            view.shape.push_back(s);
        view.shape.insert(view.shape.begin() + rng() % (view.shape.size() + 1), 1);
      }
      view.base = 0;
      p.variables.push_back(view);
      var = 1;
    }
    ASSERT_FALSE(static_cast<bool>(p.verify(tiles + 1)));
    Box region = randomRegion(rng, p.variables[var].shape);
    int64_t runs = 0;
    auto got = runElements(p, var, region, runs);
    auto want = referenceElements(p, var, region);
    ASSERT_EQ(got, want) << "trial " << trial;

    // Runs are maximal but for region row ends: at most one per contiguous
    // segment of the reference plus one per row.
    int64_t segments = 0, rows = 1;
    for (size_t i = 0; i < want.size(); ++i)
      segments += i == 0 || want[i].first != want[i - 1].first ||
                  want[i].second != want[i - 1].second + 1;
    for (size_t d = 0; d + 1 < region.sizes.size(); ++d)
      rows *= region.sizes[d];
    EXPECT_LE(runs, segments + rows);

    // Gathering piece by piece (forEachOverlap + copyBox) reads the same
    // elements in the same order as the runs.
    Box inStorage;
    std::vector<int64_t> gathered(region.numElements(), -1);
    bool boxed = forEachOverlap(p, var, region, inStorage, [&](const Overlap &o) {
      std::vector<int64_t> piece(o.piece.numElements());
      for (size_t i = 0; i < piece.size(); ++i)
        piece[i] = o.tile * 1000000 + static_cast<int64_t>(i);
      copyBox(reinterpret_cast<const char *>(piece.data()), o.piece,
              reinterpret_cast<char *>(gathered.data()), inStorage, o.part, 8);
    });
    if (var == 0 || trial % 4 == 3) {
      ASSERT_TRUE(boxed) << "trial " << trial;
    }
    if (boxed) {
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(gathered[i], want[i].first * 1000000 + want[i].second)
            << "trial " << trial << " element " << i;
    }

    // rowCount counts the rows forEachRowCopy copies; remoteRead's regions sum
    // it over the pieces other tiles hold (runs where not boxed).
    std::vector<std::pair<int64_t, int64_t>> rowsPerTile; // tile, rows
    if (boxed) {
      forEachOverlap(p, var, region, inStorage, [&](const Overlap &o) {
        int64_t rows = 0;
        forEachRowCopy(o.piece, inStorage, o.part, 4,
                       [&](const RowCopy &r) { rows += r.rows; });
        ASSERT_EQ(rowCount(o.piece, inStorage, o.part), rows) << "trial " << trial;
        rowsPerTile.push_back({o.tile, rows});
      });
    } else {
      forEachRun(p, var, region, [&](const tessera::runtime::Run &r) { rowsPerTile.push_back({r.tile, 1}); });
    }
    for (int64_t tile = 0; tile <= tiles; ++tile) {
      int64_t remote = 0;
      for (auto [t, rows] : rowsPerTile)
        remote += t != tile ? rows : 0;
      ASSERT_EQ(remoteRead(p, var, region, tile).regions, remote)
          << "trial " << trial << " tile " << tile;
    }

    // denseRegionOnOneTile agrees with "one tile holds the region's
    // elements one after another" (exactly, where the region is a box of
    // the storage; never wrongly otherwise).
    bool dense = !want.empty();
    for (size_t i = 1; dense && i < want.size(); ++i)
      dense = want[i].first == want[0].first &&
              want[i].second == want[0].second + static_cast<int64_t>(i);
    std::optional<PiecePart> part = denseRegionOnOneTile(p, var, region);
    if (part) {
      ASSERT_TRUE(dense) << "trial " << trial;
      EXPECT_EQ(part->tile, want[0].first) << "trial " << trial;
      EXPECT_EQ(part->pieceOffset, want[0].second) << "trial " << trial;
    } else if (boxed) {
      ASSERT_FALSE(dense) << "trial " << trial;
    }

    // isLocalPiece agrees with "the region is the piece, element for element".
    for (int64_t tile = 0; tile <= tiles; ++tile) {
      auto piece = base.mapping.pieceOnTile(tile);
      bool local = piece && piece->numElements() == region.numElements();
      for (size_t i = 0; local && i < want.size(); ++i)
        local = want[i].first == tile && want[i].second == static_cast<int64_t>(i);
      ASSERT_EQ(isLocalPiece(p, var, region, tile), local)
          << "trial " << trial << " tile " << tile;
      int64_t remote = 0;
      for (auto [t, off] : want)
        remote += t != tile;
      EXPECT_EQ(remoteRead(p, var, region, tile).bytes, remote * 4);
    }
  }
}

TEST(MachineProgram, ViewRegionsEqualToAPieceAreLocal) {
  // A 4x6 tensor in row pieces, seen as 24 elements and as 2x12.
  MachineProgram p;
  Variable x;
  x.name = "x";
  x.shape = {4, 6};
  x.mapping.shape = x.shape;
  x.mapping.chunks = {1, 6};
  x.mapping.tileStrides = {1, 0};
  p.variables.push_back(x);
  Variable flat;
  flat.shape = {24};
  flat.base = 0;
  p.variables.push_back(flat);
  Variable wide;
  wide.shape = {2, 12};
  wide.base = 0;
  p.variables.push_back(wide);
  EXPECT_TRUE(isLocalPiece(p, 1, Box{{12}, {6}}, 2));
  EXPECT_FALSE(isLocalPiece(p, 1, Box{{12}, {6}}, 1));
  EXPECT_FALSE(isLocalPiece(p, 1, Box{{11}, {6}}, 2));
  EXPECT_TRUE(isLocalPiece(p, 2, Box{{1, 0}, {1, 6}}, 2));
  EXPECT_FALSE(isLocalPiece(p, 2, Box{{1, 0}, {1, 12}}, 2));
  EXPECT_TRUE(isLocalPiece(p, 0, Box{{3, 0}, {1, 6}}, 3));
  EXPECT_EQ(remoteRead(p, 2, Box{{1, 0}, {1, 12}}, 2).bytes, 24);
}

/// A small program with every feature: views, full and affine operands,
/// two kernels (a short last piece), a copy.
MachineProgram sampleProgram() {
  MachineProgram p;
  auto add = [&](const char *name, std::vector<int64_t> shape, VarKind kind,
                 int64_t tiles) {
    Variable v;
    v.name = name;
    v.shape = shape;
    v.kind = kind;
    v.mapping = TileMapping::linear(shape, 4, tiles, 16);
    p.variables.push_back(v);
    return static_cast<int64_t>(p.variables.size() - 1);
  };
  int64_t x = add("x", {10, 4}, VarKind::Input, 4);
  int64_t w = add("w", {4}, VarKind::Weight, 4);
  p.variables[w].weight = 0;
  int64_t y = add("y", {10, 4}, VarKind::Activation, 4);
  Variable yv;
  yv.name = "y.flat";
  yv.shape = {40};
  yv.base = y;
  p.variables.push_back(yv);
  int64_t z = add("z", {44}, VarKind::Activation, 4);
  ComputeSet cs;
  cs.name = "cs0";
  cs.location = "mul \"/m\"";
  cs.loopRanges = {10, 4};
  cs.outputLoops = {0, 1};
  AccessMap id;
  id.coeffs = {{1, 0}, {0, 1}};
  id.consts = {0, 0};
  AccessMap full;
  full.full = true;
  cs.inputs = {{x, id}, {w, full}};
  cs.outputs = {y};
  TileMapping ym = p.variables[y].mapping;
  cs.kernels.push_back({"k_full", {ym.chunks[0], 4}, 100, 512});
  if (10 % ym.chunks[0])
    cs.kernels.push_back({"k_tail", {10 % ym.chunks[0], 4}, 50, 512});
  cs.macs = 40;
  p.computeSets.push_back(cs);
  Copy c;
  c.src = 3;
  c.dst = z;
  c.srcRegion = Box{{0}, {40}};
  c.dstOffsets = {2};
  c.location = "pad \"/p\"";
  p.copies.push_back(c);
  p.steps = {{Step::Kind::Compute, 0}, {Step::Kind::Copy, 0}};
  p.inputs = {x};
  p.outputs = {z};
  return p;
}

std::string text(const llvm::json::Value &v) {
  std::string s;
  llvm::raw_string_ostream(s) << v;
  return s;
}

/// The program a JSON text describes (parsed, then read).
llvm::Expected<MachineProgram> reparse(const std::string &json) {
  auto parsed = llvm::json::parse(json);
  if (!parsed)
    return parsed.takeError();
  return MachineProgram::fromJSON(*parsed);
}

TEST(MachineProgram, JSONRoundTrips) {
  MachineProgram p = sampleProgram();
  ASSERT_FALSE(static_cast<bool>(p.verify(4)));
  std::string first = text(p.toJSON());
  auto back = reparse(first);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(text(back->toJSON()), first);
  EXPECT_EQ(back->variables[3].base, 2);
  EXPECT_EQ(back->copies[0].location, "pad \"/p\"");
  EXPECT_EQ(back->stepName(1), "copy0");
  EXPECT_EQ(back->stepLocation(0), "mul \"/m\"");
  EXPECT_FALSE(static_cast<bool>(back->verify(4)));
}

/// That `bad` fails verification on 4 tiles with an error containing
/// `message`.
void expectError(const MachineProgram &bad, const std::string &message) {
  llvm::Error err = bad.verify(4);
  ASSERT_TRUE(static_cast<bool>(err)) << message;
  std::string got = llvm::toString(std::move(err));
  EXPECT_NE(got.find(message), std::string::npos) << got;
}

TEST(MachineProgram, MirroredWeightsRoundTripAreReadInPlaceAndNeverWritten) {
  MachineProgram p = sampleProgram();
  // w, one piece on tile 0, copied onto tiles 1..3: each vertex of cs0
  // reads all of w, which its tile now holds.
  TileMapping &w = p.variables[1].mapping;
  ASSERT_EQ(w.numPieces(), 1);
  ASSERT_EQ(w.firstTile, 0);
  w.mirrorCounts = {4};
  w.mirrorStrides = {1};
  ASSERT_FALSE(static_cast<bool>(p.verify(4)));
  std::string first = text(p.toJSON());
  EXPECT_NE(first.find("\"mirror_counts\":[4]"), std::string::npos) << first;
  auto back = reparse(first);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(text(back->toJSON()), first);
  EXPECT_EQ(back->variables[1].mapping.mirrorStrides, (std::vector<int64_t>{1}));
  for (int64_t tile = 0; tile < 4; ++tile) {
    EXPECT_TRUE(isLocalPiece(*back, 1, Box{{0}, {4}}, tile)) << tile;
    EXPECT_TRUE(remoteRead(*back, 1, Box{{0}, {4}}, tile).local) << tile;
  }
  // Only weights and constants are mirrored, and no step writes them.
  MachineProgram activation = p;
  activation.variables[4].mapping.mirrorCounts = {2};
  activation.variables[4].mapping.mirrorStrides = {1};
  activation.variables[4].mapping.firstTile = 0;
  activation.variables[4].mapping.chunks = {44};
  expectError(activation, "is a mirrored activation; only weights and constants");
  MachineProgram written = activation;
  written.variables[4].kind = VarKind::Constant;
  written.variables[4].weight = 1;
  expectError(written, "writes variable 4 ('z'), which is mirrored");
  MachineProgram outside = p;
  outside.variables[1].mapping.mirrorCounts = {3};
  outside.variables[1].mapping.mirrorStrides = {2}; // tiles 0, 2 and 4
  expectError(outside, "on tile 4, outside [0, 4)");
  MachineProgram tooMany = p;
  tooMany.variables[1].mapping.mirrorCounts = {5};
  expectError(tooMany, "needs 2 to 4 copies");
}

TEST(MachineProgram, AllReduceStepsRoundTripAndAreChecked) {
  MachineProgram p = sampleProgram();
  // y (the compute set's output) summed over the replicas into a new
  // variable mapped like it.
  Variable sum = p.variables[2];
  sum.name = "y_sum";
  p.variables.push_back(sum);
  int64_t dst = p.variables.size() - 1;
  p.allReduces.push_back({{2}, {dst}, "cross_replica_sum"});
  p.steps.push_back({Step::Kind::AllReduce, 0});
  ASSERT_FALSE(static_cast<bool>(p.verify(4)));
  std::string first = text(p.toJSON());
  auto back = reparse(first);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(text(back->toJSON()), first);
  EXPECT_EQ(back->stepName(2), "allreduce0");
  EXPECT_EQ(back->stepLocation(2), "cross_replica_sum");
  // The sum's destination is written at the step, its source read there.
  std::vector<VariableUses> uses = variableUses(*back);
  EXPECT_EQ(uses[dst].firstWrite, 2);
  EXPECT_EQ(uses[2].lastUse, 2);
  MachineProgram unpaired = p;
  unpaired.allReduces[0].dsts.clear();
  expectError(unpaired, "must pair one or more sources with as many destinations");
  MachineProgram onto = p;
  onto.allReduces[0].dsts = {2};
  expectError(onto, "reads variable 2 ('y'), which it also writes");
  MachineProgram other = p;
  other.allReduces[0].dsts = {4}; // z: another shape
  expectError(other, "of another shape or type");
  MachineProgram input = p;
  input.allReduces[0].dsts = {0}; // x: the program's input
  expectError(input, "which is not an activation of the program");
  MachineProgram missing = p;
  missing.steps.back().index = 1;
  expectError(missing, "names all-reduce 1, which does not exist");
}

TEST(MachineProgram, PerUpdateStepsFeedOnlyTheCommittedStateAndAreChecked) {
  // cs0 writes y, copy0 copies its view into z. With z an output stored
  // only when a weight update commits, both steps run once per update.
  MachineProgram p = sampleProgram();
  markPerUpdateSteps(p, {0});
  EXPECT_TRUE(p.steps[0].perUpdate);
  EXPECT_TRUE(p.steps[1].perUpdate);
  ASSERT_FALSE(static_cast<bool>(p.verify(4)));
  EXPECT_FALSE(static_cast<bool>(checkPerUpdateOutputs(p, {0})));
  // z returned every micro-batch (not committed state) would go stale.
  llvm::Error staleOutput = checkPerUpdateOutputs(p, {});
  ASSERT_TRUE(static_cast<bool>(staleOutput));
  EXPECT_NE(llvm::toString(std::move(staleOutput)).find("output 0 is returned every micro-batch"),
            std::string::npos);
  std::string first = text(p.toJSON());
  EXPECT_NE(first.find("\"per_update\":true"), std::string::npos);
  auto back = reparse(first);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_TRUE(back->steps[0].perUpdate && back->steps[1].perUpdate);
  EXPECT_EQ(text(back->toJSON()), first);
  // y is also an output read every micro-batch (a loss): cs0 runs every
  // micro-batch, the copy once per update.
  MachineProgram both = sampleProgram();
  both.outputs.push_back(2);
  markPerUpdateSteps(both, {0});
  EXPECT_FALSE(both.steps[0].perUpdate);
  EXPECT_TRUE(both.steps[1].perUpdate);
  // z also returned as an output of every micro-batch: nothing is skipped.
  MachineProgram twice = sampleProgram();
  twice.outputs.push_back(twice.outputs[0]);
  markPerUpdateSteps(twice, {0});
  EXPECT_FALSE(twice.steps[0].perUpdate || twice.steps[1].perUpdate);
  // Without committed state nothing is skipped.
  MachineProgram none = sampleProgram();
  markPerUpdateSteps(none, {});
  EXPECT_FALSE(none.steps[0].perUpdate || none.steps[1].perUpdate);
  // A step of every micro-batch may not read what a per-update step wrote:
  // it would read a stale value.
  MachineProgram stale = sampleProgram();
  stale.steps[0].perUpdate = true;
  llvm::Error err = stale.verify(4);
  ASSERT_TRUE(static_cast<bool>(err));
  std::string message = llvm::toString(std::move(err));
  EXPECT_NE(message.find("step 1 runs every micro-batch but reads variable 3 ('y.flat'), which "
                         "step 0 writes once per weight update"),
            std::string::npos)
      << message;
}

TEST(MachineProgram, AccessExtentsRoundTripAndAreChecked) {
  MachineProgram p = sampleProgram();
  // w [4] read whole through an extent rather than `full`.
  AccessMap &w = p.computeSets[0].inputs[1].map;
  w.full = false;
  w.coeffs = {{0, 0}};
  w.consts = {0};
  w.extents = {4};
  ASSERT_FALSE(static_cast<bool>(p.verify(4)));
  std::string first = text(p.toJSON());
  auto back = reparse(first);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->computeSets[0].inputs[1].map.extents, (std::vector<int64_t>{4}));
  EXPECT_EQ(text(back->toJSON()), first);
  for (auto [extents, message] :
       {std::pair<std::vector<int64_t>, std::string>{{0}, "extents must be in [1, 2^32]"},
        {{4, 1}, "2 extents for a rank-1 operand"}}) {
    w.extents = extents;
    llvm::Error err = p.verify(4);
    ASSERT_TRUE(static_cast<bool>(err));
    EXPECT_NE(llvm::toString(std::move(err)).find(message), std::string::npos) << message;
  }
}

TEST(MachineProgram, FromJSONNamesTheBadField) {
  std::string good = text(sampleProgram().toJSON());
  auto expectError = [&](const std::string &from, const std::string &to,
                         const std::string &message) {
    std::string bad = good;
    size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    auto parsed = llvm::json::parse(bad);
    ASSERT_TRUE(static_cast<bool>(parsed)) << bad;
    auto p = MachineProgram::fromJSON(*parsed);
    ASSERT_FALSE(static_cast<bool>(p)) << bad;
    std::string got = llvm::toString(p.takeError());
    EXPECT_NE(got.find(message), std::string::npos) << got;
  };
  expectError("\"chunks\":", "\"chunkz\":", "variables[0].mapping.chunks is missing");
  expectError("\"dtype\":\"f32\"", "\"dtype\":\"f33\"", "variables[0].dtype is not an element type");
  expectError("\"kind\":\"input\"", "\"kind\":\"banana\"", "variables[0].kind must be");
  expectError("\"outputs\":[2]", "\"outputs\":[7]", "output 0 names variable 7");
  expectError("\"steps\":[{\"compute\":0}", "\"steps\":[{\"compute\":3}", "step 0 names compute set 3");
  expectError("\"base\":2", "\"base\":3", "itself a view");
  expectError("\"base\":2", "\"base\":-7", "variables[3].mapping must be an object");
  expectError("\"consts\":[0,0]", "\"consts\":[0]", "1 constants for a rank-2 operand");
  expectError("\"sizes\":[40]", "\"sizes\":[43]", "out of bounds");
  expectError("\"coeffs\":[[1,0],[0,1]]", "\"coeffs\":[[1,0],[0,\"a\"]]",
              "compute_sets[0].inputs[0].coeffs[1][1] must be an integer");
}

TEST(MachineProgram, FromJSONSurvivesCorruption) {
  std::string good = text(sampleProgram().toJSON());
  std::mt19937 rng(7);
  int parsedOk = 0, rejected = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    std::string bad = good;
    for (int k = 0, n = 1 + rng() % 3; k < n; ++k) {
      size_t at = rng() % bad.size();
      switch (rng() % 3) {
      case 0:
        bad[at] = "0123456789-[]{},:\"x"[rng() % 19];
        break;
      case 1:
        bad.erase(at, 1 + rng() % 8);
        break;
      default:
        bad.insert(at, std::to_string(static_cast<int64_t>(rng()) - (1LL << 31)));
      }
    }
    auto json = llvm::json::parse(bad);
    if (!json) {
      llvm::consumeError(json.takeError());
      continue;
    }
    auto p = MachineProgram::fromJSON(*json);
    if (!p) {
      ++rejected;
      llvm::consumeError(p.takeError());
      continue;
    }
    ++parsedOk;
    // Whatever parses must be safe to verify and, if it verifies, to walk.
    if (llvm::Error err = p->verify(4)) {
      llvm::consumeError(std::move(err));
      continue;
    }
    for (size_t v = 0; v < p->variables.size(); ++v) {
      Box whole{std::vector<int64_t>(p->variables[v].shape.size(), 0),
                p->variables[v].shape};
      if (whole.numElements() < 100000)
        forEachRun(*p, v, whole, [](const tessera::runtime::Run &) {});
    }
  }
  EXPECT_GT(rejected, 100);
}

TEST(MachineProgram, VerifyReportsMissingKernelsAndBadCopies) {
  MachineProgram p = sampleProgram();
  p.computeSets[0].kernels.pop_back();
  llvm::Error err = p.verify(4);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("has no kernel for output pieces of"),
            std::string::npos);

  p = sampleProgram();
  p.copies[0].dstOffsets = {5};
  err = p.verify(4);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("copy 0: region"), std::string::npos);

  p = sampleProgram();
  err = p.verify(2); // the mappings need 4 tiles
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("variable 0 ('x')"), std::string::npos);
}

} // namespace

TEST(MachineProgram, PaddedViewRunsAreTheInteriorsAndPaddingOverRandomGridsAndRegions) {
  std::mt19937 rng(4321);
  int64_t countedByPiece = 0; // regions forEachPaddedOverlap took
  for (int trial = 0; trial < 2000; ++trial) {
    MachineProgram p;
    Variable base;
    base.name = "base";
    base.shape = randomShape(rng, 1 + rng() % 4, 7);
    int64_t tiles = 0;
    base.mapping = randomMapping(rng, base.shape, tiles);
    p.variables.push_back(base);
    int64_t source = 0;
    if (trial % 2) {
      // Padding a view that inserts a unit dimension (a convolution's
      // output seen without its group dimension, or with one).
      auto view = makeView(p, 0, [&] {
        std::vector<int64_t> s = base.shape;
        s.insert(s.begin() + rng() % (s.size() + 1), 1);
        return s;
      }());
      ASSERT_TRUE(static_cast<bool>(view));
      p.variables.push_back(*view);
      source = 1;
    }
    std::vector<int64_t> low, high;
    for (size_t d = 0; d < p.variables[source].shape.size(); ++d) {
      low.push_back(rng() % 3);
      high.push_back(rng() % 3);
    }
    auto padded = makePaddedView(p, source, low, high, 0x40000000);
    ASSERT_TRUE(static_cast<bool>(padded)) << llvm::toString(padded.takeError());
    int64_t var = p.variables.size();
    p.variables.push_back(*padded);
    // And seen with one more unit dimension in front.
    std::vector<int64_t> outer = p.variables[var].shape;
    outer.insert(outer.begin(), 1);
    auto view = makeView(p, var, outer);
    ASSERT_TRUE(static_cast<bool>(view)) << llvm::toString(view.takeError());
    p.variables.push_back(*view);
    ASSERT_FALSE(static_cast<bool>(p.verify(tiles + 1))) << "trial " << trial;

    for (int64_t v : {var, var + 1}) {
      const Variable &pv = p.variables[v];
      std::vector<int64_t> interior = pv.interiorShape();
      Box region = randomRegion(rng, pv.shape);
      // Brute force: padding, or the base element of the interior's flat index.
      std::vector<std::pair<int64_t, int64_t>> want;
      for (int64_t i = 0; i < region.numElements(); ++i) {
        std::vector<int64_t> r = unflatten(i, region.sizes);
        bool inside = true;
        for (size_t d = 0; d < r.size(); ++d) {
          r[d] += region.offsets[d] - pv.padLow[d];
          inside &= r[d] >= 0 && r[d] < interior[d];
        }
        want.push_back(inside ? locate(base.mapping,
                                       unflatten(flatten(r, interior), base.shape))
                              : std::make_pair(kPaddingTile, int64_t(0)));
      }
      int64_t runs = 0;
      std::vector<std::pair<int64_t, int64_t>> got;
      forEachRun(p, v, region, [&](const tessera::runtime::Run &r) {
        ++runs;
        EXPECT_EQ(r.regionOffset, static_cast<int64_t>(got.size()));
        for (int64_t k = 0; k < r.count; ++k)
          got.emplace_back(r.tile, r.tile == kPaddingTile ? 0 : r.pieceOffset + k);
      });
      ASSERT_EQ(got, want) << "trial " << trial;
      // The cost estimate's count of the same exchange, per storage piece
      // instead of per row: per tile, the same elements and runs.
      std::map<int64_t, std::pair<int64_t, int64_t>> byRun, byPiece;
      forEachRun(p, v, region, [&](const tessera::runtime::Run &r) {
        if (r.tile != kPaddingTile) {
          byRun[r.tile].first += r.count;
          ++byRun[r.tile].second;
        }
      });
      if (forEachPaddedOverlap(p, v, region, [&](const Overlap &o, int64_t runs) {
            byPiece[o.tile].first += o.part.numElements();
            byPiece[o.tile].second += runs;
          })) {
        ++countedByPiece;
        EXPECT_EQ(byPiece, byRun) << "trial " << trial;
      }
      Box inStorage;
      EXPECT_FALSE(forEachOverlap(p, v, region, inStorage, [](const Overlap &) {}));
      int64_t padding = llvm::count_if(want, [](auto w) { return w.first == kPaddingTile; });
      EXPECT_EQ(paddingBytes(p, v, region), padding * 4) << "trial " << trial;
      for (int64_t tile = 0; tile <= tiles; ++tile) {
        // Padding is never received: only the interior's remote elements are.
        int64_t remote = 0;
        for (auto [t, off] : want)
          remote += t != tile && t != kPaddingTile;
        EXPECT_EQ(remoteRead(p, v, region, tile).bytes, remote * 4) << "trial " << trial;
        EXPECT_LE(remoteRead(p, v, region, tile).regions, remote) << "trial " << trial;
        EXPECT_EQ(remoteRead(p, v, region, tile).regions > 0, remote > 0) << "trial " << trial;
        auto piece = base.mapping.pieceOnTile(tile);
        bool local = piece && piece->numElements() == region.numElements();
        for (size_t i = 0; local && i < want.size(); ++i)
          local = want[i].first == tile && want[i].second == static_cast<int64_t>(i);
        EXPECT_EQ(isLocalPiece(p, v, region, tile), local) << "trial " << trial;
      }
    }
  }
  // Most padded views keep their base's last dimension (not one padded
  // after a unit dimension appended last).
  EXPECT_GT(countedByPiece, 1000);
}

TEST(MachineProgram, PaddedViewsRoundTripAndAreOnlyRead) {
  MachineProgram p;
  Variable x;
  x.name = "x";
  x.shape = {4, 6};
  x.mapping = TileMapping::linear(x.shape, 4, 2);
  p.variables.push_back(x);
  auto padded = makePaddedView(p, 0, {1, 2}, {1, 0}, 0xff800000); // -inf
  ASSERT_TRUE(static_cast<bool>(padded));
  EXPECT_EQ(padded->shape, (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(padded->interiorShape(), (std::vector<int64_t>{4, 6}));
  p.variables.push_back(*padded);
  // A general reshape of a padded view is not a view of anything stored.
  EXPECT_FALSE(static_cast<bool>(makeView(p, 1, {48})));
  // Nor can padding pad again, or a general reshape be padded in place.
  EXPECT_FALSE(static_cast<bool>(makePaddedView(p, 1, {0, 0}, {0, 0}, 0)));
  auto flat = makeView(p, 0, {24});
  ASSERT_TRUE(static_cast<bool>(flat));
  p.variables.push_back(*flat);
  EXPECT_FALSE(static_cast<bool>(makePaddedView(p, 2, {1}, {1}, 0)));

  ASSERT_FALSE(static_cast<bool>(p.verify(2)));
  auto back = MachineProgram::fromJSON(p.toJSON());
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->variables[1].padLow, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(back->variables[1].padHigh, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(back->variables[1].padBits, 0xff800000u);
  EXPECT_EQ(back->variables[1].base, 0);

  // Streams and copies move stored elements: a padded view is neither.
  p.outputs = {1};
  llvm::Error err = p.verify(2);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("padded view"), std::string::npos);
  p.outputs = {};
  // Padding that leaves no interior of the base's shape is refused.
  p.variables[1].padHigh = {1, 1};
  err = p.verify(2);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("pads"), std::string::npos);
}

namespace {
TEST(MachineProgram, KernelSignaturesRoundTripAndRefuseMalformedWords) {
  // Two loop offsets, an f32 [2, ?] input and an f16 [2, 3] output.
  KernelSignature s;
  s.loopOffsets = 2;
  s.buffers = {{32, {2, KernelSignature::kDynamic}}, {16, {2, 3}}};
  std::vector<int64_t> words = s.encode();
  EXPECT_EQ(words, (std::vector<int64_t>{2, 2, 32, 2, 2, -1, 16, 2, 2, 3}));
  auto back = KernelSignature::decode(words);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->encode(), words);
  EXPECT_EQ(KernelSignature::symbolFor("vertex_cs3_0_entry"), "vertex_cs3_0_signature");
  // Truncated, trailing words, a rank or element size out of range, a
  // negative count: each is an error, never a read past the words.
  std::vector<std::vector<int64_t>> bad = {
      {}, {2}, {2, 2, 32, 2, 2}, {2, 1, 32, 1, 4, 9}, {2, 1, 32, 65, 1},
      {2, 1, 0, 1, 4}, {2, 1, 128, 1, 4}, {-1, 0}, {0, -3}, {0, 1, 32, 1, -2}};
  for (const auto &w : bad) {
    auto d = KernelSignature::decode(w);
    EXPECT_FALSE(static_cast<bool>(d)) << w.size();
    if (!d)
      llvm::consumeError(d.takeError());
  }
}

TEST(MachineProgram, KernelUsesAreCheckedAgainstTheSignature) {
  MachineProgram p;
  Variable x, y;
  x.name = "x";
  x.shape = {4, 6};
  x.dtype = DType::F32;
  y = x;
  y.name = "y";
  p.variables = {x, y};
  ComputeSet cs;
  cs.name = "cs0";
  cs.loopRanges = {4, 6};
  cs.outputLoops = {0, 1};
  cs.inputs = {{0, {}}};
  cs.outputs = {1};
  Kernel k{"vertex_cs0_0_entry", {2, 6}, 1, 1};
  KernelSignature s;
  s.loopOffsets = 2;
  s.buffers = {{32, {2, 6}}, {32, {KernelSignature::kDynamic, 6}}};
  EXPECT_EQ(checkKernelUse(p, cs, k, s), "");
  EXPECT_EQ(checkKernelRegion(s, 0, {2, 6}), "");
  EXPECT_EQ(checkKernelRegion(s, 0, {3, 6}), "takes buffer 0 of shape 2x6, not a region of 3x6");
  KernelSignature fewer = s;
  fewer.loopOffsets = 1;
  EXPECT_EQ(checkKernelUse(p, cs, k, fewer), "takes 1 loop offsets and 2 buffers, not 2 and 2");
  KernelSignature half = s;
  half.buffers[1].elementBits = 16;
  EXPECT_NE(checkKernelUse(p, cs, k, half).find("16-bit elements for variable 'y'"),
            std::string::npos);
  KernelSignature small = s;
  small.buffers[1].sizes = {1, 6};
  EXPECT_EQ(checkKernelUse(p, cs, k, small), "takes buffer 1 of shape 1x6, not a region of 2x6");
}
} // namespace
