//===- MachineProgram.cpp - a tile-mapped program for the IPU model ------===//
//
// Grid mappings, access maps, the run decomposition of regions that both the
// exchange (runtime) and the exchange cost model (compiler) use, the
// program's JSON form and its verifier.
//
// Everything per tile is derived from the grids on demand: nothing here
// allocates per element, and forEachRun costs O(runs), not O(elements).
//
//===----------------------------------------------------------------------===//

#include "tessera/Runtime/MachineProgram.h"
#include "tessera/Support/Error.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

using llvm::Expected;
using llvm::StringRef;
namespace json = llvm::json;

namespace tessera::runtime {

namespace {

int64_t product(llvm::ArrayRef<int64_t> v) {
  int64_t p = 1;
  for (int64_t x : v)
    p *= x;
  return p;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Row-major strides of `shape`.
std::vector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

std::string shapeString(llvm::ArrayRef<int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

/// Limits that keep every product and offset computed from a program far
/// from int64 overflow, so a hostile or damaged program is an error, not
/// undefined behaviour.
constexpr int64_t kMaxElements = int64_t(1) << 48;
constexpr int64_t kMaxCoefficient = int64_t(1) << 32;

} // namespace

//===----------------------------------------------------------------------===//
// Box, TileMapping
//===----------------------------------------------------------------------===//

TileMapping TileMapping::singleTile(llvm::ArrayRef<int64_t> shape, int64_t tile) {
  TileMapping m;
  m.shape = shape.vec();
  for (int64_t s : shape)
    m.chunks.push_back(std::max<int64_t>(s, 1));
  m.tileStrides.assign(shape.size(), 0);
  m.firstTile = tile;
  return m;
}

TileMapping TileMapping::linear(llvm::ArrayRef<int64_t> shape, int64_t elementBytes,
                                int64_t numTiles, int64_t grainBytes) {
  int64_t rank = shape.size();
  int64_t total = product(shape);
  elementBytes = std::max<int64_t>(elementBytes, 1);
  grainBytes = std::max<int64_t>(grainBytes, 1);
  if (rank == 0 || total == 0 || numTiles <= 1 || total * elementBytes < 2 * grainBytes)
    return singleTile(shape, 0);

  // Split dimension k: dimensions before it in chunks of 1, dimension k in
  // chunks of c, the ones after whole, so every piece is a contiguous
  // row-major range. Keep the k that gives the most pieces (ties: the
  // outermost, whose pieces are the largest contiguous ranges).
  int64_t bestK = -1, bestChunk = 0, bestPieces = 1;
  int64_t outer = 1;
  for (int64_t k = 0; k < rank && outer <= numTiles; outer *= shape[k], ++k) {
    int64_t inner = product(shape.drop_front(k + 1));
    int64_t minChunk = ceilDiv(grainBytes, inner * elementBytes);
    if (minChunk > shape[k])
      continue; // pieces of this split would be smaller than the grain
    int64_t tilesEach = numTiles / outer;
    int64_t chunk = std::max(minChunk, ceilDiv(shape[k], tilesEach));
    int64_t pieces = outer * ceilDiv(shape[k], chunk);
    if (pieces > bestPieces) {
      bestK = k;
      bestChunk = chunk;
      bestPieces = pieces;
    }
  }
  if (bestK < 0)
    return singleTile(shape, 0);

  TileMapping m;
  m.shape = shape.vec();
  for (int64_t d = 0; d < rank; ++d)
    m.chunks.push_back(d < bestK ? 1 : d == bestK ? bestChunk : std::max<int64_t>(shape[d], 1));
  std::vector<int64_t> pieces = m.piecesPerDim();
  m.tileStrides = rowMajorStrides(pieces);
  for (int64_t d = 0; d < rank; ++d)
    if (pieces[d] == 1)
      m.tileStrides[d] = 0; // unsplit: say so
  m.firstTile = 0;
  return m;
}

std::vector<int64_t> TileMapping::piecesPerDim() const {
  std::vector<int64_t> n;
  n.reserve(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    n.push_back(piecesAlong(d));
  return n;
}

int64_t TileMapping::numPieces() const { return product(piecesPerDim()); }

int64_t TileMapping::numCopies() const { return product(mirrorCounts); }

int64_t TileMapping::tileOf(llvm::ArrayRef<int64_t> piece) const {
  int64_t t = firstTile;
  for (size_t d = 0; d < piece.size(); ++d)
    t += piece[d] * tileStrides[d];
  return t;
}

Box TileMapping::pieceBox(llvm::ArrayRef<int64_t> piece) const {
  Box b;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t lo = std::min(piece[d] * chunks[d], shape[d]);
    b.offsets.push_back(lo);
    b.sizes.push_back(std::min(lo + chunks[d], shape[d]) - lo);
  }
  return b;
}

namespace {
/// Calls fn(tile, piece index) for every piece in row-major piece order,
/// and then (mirrored) for every other copy of them, copy after copy.
void forEachPieceIndex(const TileMapping &m,
                       llvm::function_ref<void(int64_t, llvm::ArrayRef<int64_t>)> fn) {
  llvm::SmallVector<int64_t, 8> n, p(m.shape.size(), 0);
  for (size_t d = 0; d < m.shape.size(); ++d)
    n.push_back(m.piecesAlong(d));
  int64_t count = product(n);
  // The copies' tile offsets: the first copy's, then each mirror index's.
  llvm::SmallVector<int64_t, 8> offsets{0};
  std::vector<int64_t> mirror(m.mirrorCounts.size(), 0);
  for (int64_t copy = 1, copies = m.numCopies(); copy < copies; ++copy) {
    for (int64_t k = static_cast<int64_t>(mirror.size()) - 1; k >= 0; --k) {
      if (++mirror[k] < m.mirrorCounts[k])
        break;
      mirror[k] = 0;
    }
    int64_t offset = 0;
    for (size_t k = 0; k < mirror.size(); ++k)
      offset += mirror[k] * m.mirrorStrides[k];
    offsets.push_back(offset);
  }
  for (int64_t offset : offsets) {
    std::fill(p.begin(), p.end(), 0);
    for (int64_t i = 0; i < count; ++i) {
      fn(m.tileOf(p) + offset, p);
      for (int64_t d = static_cast<int64_t>(p.size()) - 1; d >= 0; --d) {
        if (++p[d] < n[d])
          break;
        p[d] = 0;
      }
    }
  }
}
} // namespace

void TileMapping::forEachPiece(
    llvm::function_ref<void(int64_t tile, const Box &)> fn) const {
  forEachPieceIndex(*this, [&](int64_t tile, llvm::ArrayRef<int64_t> p) {
    fn(tile, pieceBox(p));
  });
}

void TileMapping::forEachPieceElements(
    llvm::function_ref<void(int64_t tile, int64_t elements)> fn) const {
  forEachPieceIndex(*this, [&](int64_t tile, llvm::ArrayRef<int64_t> p) {
    int64_t elements = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t lo = std::min(p[d] * chunks[d], shape[d]);
      elements *= std::min(lo + chunks[d], shape[d]) - lo;
    }
    fn(tile, elements);
  });
}

std::optional<Box> TileMapping::pieceOnTile(int64_t tile) const {
  // The planner asks this for every operand of every candidate it costs:
  // no heap allocation on the way.
  // The piece dimensions, then the mirror dimensions (whose index picks a
  // copy, not a box).
  llvm::SmallVector<int64_t, 8> n, strides(tileStrides.begin(), tileStrides.end());
  for (size_t d = 0; d < shape.size(); ++d)
    n.push_back(piecesAlong(d));
  n.append(mirrorCounts.begin(), mirrorCounts.end());
  strides.append(mirrorStrides.begin(), mirrorStrides.end());
  // Decode the tile greedily, largest stride first: exact for the mixed-radix
  // strides every mapping the compiler builds has. Re-encoding checks it; a
  // mapping with unusual strides falls back to a scan of its pieces.
  llvm::SmallVector<int64_t, 8> order(n.size());
  std::iota(order.begin(), order.end(), 0);
  // A stable insertion sort by decreasing stride (ranks are small).
  for (size_t i = 1; i < order.size(); ++i)
    for (size_t j = i; j > 0 && strides[order[j]] > strides[order[j - 1]]; --j)
      std::swap(order[j], order[j - 1]);
  llvm::SmallVector<int64_t, 8> p(n.size(), 0);
  int64_t rest = tile - firstTile;
  for (int64_t d : order) {
    if (strides[d] <= 0 || n[d] == 1)
      continue;
    p[d] = std::min(std::max<int64_t>(rest / strides[d], 0), n[d] - 1);
    rest -= p[d] * strides[d];
  }
  llvm::ArrayRef<int64_t> piece = llvm::ArrayRef(p).take_front(shape.size());
  int64_t encoded = tileOf(piece);
  for (size_t k = 0; k < mirrorCounts.size(); ++k)
    encoded += p[shape.size() + k] * mirrorStrides[k];
  if (rest == 0 && encoded == tile)
    return pieceBox(piece);
  bool greedyIsExact = llvm::all_of(strides, [](int64_t s) { return s >= 0; });
  if (greedyIsExact) {
    // Strides sorted descending with each at least the span of the smaller
    // ones (row-major and its permutations) decode exactly: a miss is final.
    bool mixedRadix = true;
    int64_t span = 1;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      if (n[*it] == 1)
        continue;
      if (strides[*it] < span)
        mixedRadix = false;
      span = strides[*it] * n[*it];
    }
    if (mixedRadix)
      return std::nullopt;
  }
  std::optional<Box> found;
  forEachPiece([&](int64_t t, const Box &b) {
    if (t == tile && !found)
      found = b;
  });
  return found;
}

std::vector<std::vector<int64_t>> TileMapping::pieceShapes() const {
  std::vector<std::vector<int64_t>> shapes{{}};
  for (int64_t j = 0; j < rank(); ++j) {
    std::vector<int64_t> sizes{std::min(shape[j], chunks[j])};
    if (shape[j] > chunks[j] && shape[j] % chunks[j] != 0)
      sizes.push_back(shape[j] % chunks[j]);
    std::vector<std::vector<int64_t>> next;
    for (const std::vector<int64_t> &s : shapes)
      for (int64_t n : sizes) {
        next.push_back(s);
        next.back().push_back(n);
      }
    shapes = std::move(next);
  }
  return shapes;
}

int64_t TileMapping::maxPieceElements() const {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    n *= std::min(chunks[d], shape[d]);
  return n;
}

llvm::Error TileMapping::verify(int64_t numTiles) const {
  size_t rank = shape.size();
  if (chunks.size() != rank || tileStrides.size() != rank)
    return fail("mapping of a rank-" + llvm::Twine(rank) + " tensor has " +
                llvm::Twine(chunks.size()) + " chunk sizes and " +
                llvm::Twine(tileStrides.size()) + " tile strides");
  for (size_t d = 0; d < rank; ++d) {
    if (shape[d] < 0 || shape[d] > kMaxElements)
      return fail("mapping has a bad shape " + shapeString(shape));
    if (chunks[d] < 1)
      return fail("mapping chunk " + llvm::Twine(d) + " is " + llvm::Twine(chunks[d]) +
                  "; chunks must be at least 1");
    if (tileStrides[d] < -numTiles || tileStrides[d] > numTiles)
      return fail("mapping tile stride " + llvm::Twine(d) + " (" +
                  llvm::Twine(tileStrides[d]) + ") is outside the machine's " +
                  llvm::Twine(numTiles) + " tiles");
  }
  if (firstTile < 0 || firstTile >= numTiles)
    return fail("mapping's first tile " + llvm::Twine(firstTile) + " is not in [0, " +
                llvm::Twine(numTiles) + ")");
  if (mirrorCounts.size() != mirrorStrides.size())
    return fail("mapping has " + llvm::Twine(mirrorCounts.size()) + " mirror counts and " +
                llvm::Twine(mirrorStrides.size()) + " mirror strides");
  for (size_t k = 0; k < mirrorCounts.size(); ++k)
    if (mirrorCounts[k] < 2 || mirrorCounts[k] > numTiles || mirrorStrides[k] < 1 ||
        mirrorStrides[k] >= numTiles)
      return fail("mapping's mirror " + llvm::Twine(k) + " (" + llvm::Twine(mirrorCounts[k]) +
                  " copies, tile stride " + llvm::Twine(mirrorStrides[k]) +
                  ") needs 2 to " + llvm::Twine(numTiles) + " copies and a stride in [1, " +
                  llvm::Twine(numTiles) + ")");
  std::vector<int64_t> n = piecesPerDim();
  n.insert(n.end(), mirrorCounts.begin(), mirrorCounts.end());
  int64_t pieces = 1;
  for (int64_t x : n) {
    pieces *= x;
    if (pieces > numTiles)
      return fail("mapping of " + shapeString(shape) + " in chunks " +
                  shapeString(chunks) +
                  (isMirrored() ? " with " + std::to_string(numCopies()) + " copies" : "") +
                  " has more pieces than the " + llvm::Twine(numTiles) + " tiles");
  }
  llvm::BitVector used(numTiles);
  std::string error;
  forEachPiece([&](int64_t tile, const Box &box) {
    if (!error.empty())
      return;
    if (tile < 0 || tile >= numTiles)
      error = "mapping places piece at " + shapeString(box.offsets) + " on tile " +
              std::to_string(tile) + ", outside [0, " + std::to_string(numTiles) + ")";
    else if (used[tile])
      error = "mapping places two pieces on tile " + std::to_string(tile);
    else
      used.set(tile);
  });
  if (!error.empty())
    return fail(error);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// AccessMap, ComputeSet
//===----------------------------------------------------------------------===//

Box AccessMap::region(const Box &loops, llvm::ArrayRef<int64_t> operandShape) const {
  Box r;
  if (full) {
    r.offsets.assign(operandShape.size(), 0);
    r.sizes.assign(operandShape.begin(), operandShape.end());
    return r;
  }
  bool empty = llvm::any_of(loops.sizes, [](int64_t s) { return s <= 0; });
  for (size_t j = 0; j < operandShape.size(); ++j) {
    int64_t lo = consts[j], size = extent(j);
    for (size_t i = 0; i < loops.offsets.size(); ++i) {
      lo += coeffs[j][i] * loops.offsets[i];
      size += coeffs[j][i] * (loops.sizes[i] - 1);
    }
    // Reads outside the operand (padding) are the kernel's business: the
    // region is what exists.
    int64_t hi = std::min(lo + size, operandShape[j]);
    lo = std::clamp<int64_t>(lo, 0, operandShape[j]);
    r.offsets.push_back(lo);
    r.sizes.push_back(empty ? 0 : std::max<int64_t>(hi - lo, 0));
  }
  return r;
}

Box ComputeSet::loopBox(const Box &outputPiece) const {
  Box b;
  b.offsets.assign(loopRanges.size(), 0);
  b.sizes.assign(loopRanges.begin(), loopRanges.end());
  for (size_t j = 0; j < outputLoops.size(); ++j) {
    b.offsets[outputLoops[j]] = outputPiece.offsets[j];
    b.sizes[outputLoops[j]] = outputPiece.sizes[j];
  }
  return b;
}

std::vector<int64_t> KernelSignature::encode() const {
  std::vector<int64_t> words = {loopOffsets, static_cast<int64_t>(buffers.size())};
  for (const Buffer &b : buffers) {
    words.push_back(b.elementBits);
    words.push_back(static_cast<int64_t>(b.sizes.size()));
    words.insert(words.end(), b.sizes.begin(), b.sizes.end());
  }
  return words;
}

llvm::Expected<KernelSignature> KernelSignature::decode(llvm::ArrayRef<int64_t> words) {
  auto fail = [] {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "a kernel signature that does not decode");
  };
  // Bounds far above any kernel's, far below what could overflow.
  constexpr int64_t kMaxCount = 1 << 16, kMaxRank = 64;
  size_t at = 0;
  auto next = [&](int64_t lo, int64_t hi) -> std::optional<int64_t> {
    if (at >= words.size() || words[at] < lo || words[at] > hi)
      return std::nullopt;
    return words[at++];
  };
  KernelSignature s;
  std::optional<int64_t> loops = next(0, kMaxCount), count = next(0, kMaxCount);
  if (!loops || !count)
    return fail();
  s.loopOffsets = *loops;
  for (int64_t k = 0; k < *count; ++k) {
    std::optional<int64_t> bits = next(1, 64), rank = next(0, kMaxRank);
    if (!bits || !rank)
      return fail();
    Buffer b;
    b.elementBits = *bits;
    for (int64_t d = 0; d < *rank; ++d) {
      std::optional<int64_t> size = next(kDynamic, std::numeric_limits<int64_t>::max());
      if (!size)
        return fail();
      b.sizes.push_back(*size);
    }
    s.buffers.push_back(std::move(b));
  }
  if (at != words.size())
    return fail();
  return s;
}

std::string KernelSignature::symbolFor(llvm::StringRef entrySymbol) {
  entrySymbol.consume_back("_entry");
  return (entrySymbol + "_signature").str();
}

std::string checkKernelUse(const MachineProgram &program, const ComputeSet &cs,
                           const Kernel &kernel, const KernelSignature &signature) {
  size_t inputs = cs.inputs.size(), buffers = inputs + cs.outputs.size();
  if (signature.loopOffsets != static_cast<int64_t>(cs.loopRanges.size()) ||
      signature.buffers.size() != buffers)
    return "takes " + std::to_string(signature.loopOffsets) + " loop offsets and " +
           std::to_string(signature.buffers.size()) + " buffers, not " +
           std::to_string(cs.loopRanges.size()) + " and " + std::to_string(buffers);
  for (size_t k = 0; k < buffers; ++k) {
    const Variable &var =
        program.variables[k < inputs ? cs.inputs[k].var : cs.outputs[k - inputs]];
    const KernelSignature::Buffer &b = signature.buffers[k];
    if (b.sizes.size() != var.shape.size() ||
        b.elementBits != static_cast<int64_t>(8 * var.elementBytes()))
      return "takes buffer " + std::to_string(k) + " of rank " + std::to_string(b.sizes.size()) +
             " and " + std::to_string(b.elementBits) + "-bit elements for variable '" +
             var.name + "' of rank " + std::to_string(var.shape.size()) + " and " +
             std::to_string(8 * var.elementBytes()) + "-bit elements";
    if (k >= inputs)
      if (std::string why = checkKernelRegion(signature, k, kernel.pieceSizes); !why.empty())
        return why;
  }
  return "";
}

std::string checkKernelRegion(const KernelSignature &signature, size_t k,
                              llvm::ArrayRef<int64_t> sizes) {
  const std::vector<int64_t> &declared = signature.buffers[k].sizes;
  bool fits = declared.size() == sizes.size();
  for (size_t d = 0; fits && d < sizes.size(); ++d)
    fits = declared[d] == KernelSignature::kDynamic || declared[d] == sizes[d];
  if (fits)
    return "";
  auto list = [](llvm::ArrayRef<int64_t> v) {
    std::string text;
    for (int64_t x : v)
      text += (text.empty() ? "" : "x") + (x == KernelSignature::kDynamic ? "?" : std::to_string(x));
    return text;
  };
  return "takes buffer " + std::to_string(k) + " of shape " + list(declared) +
         ", not a region of " + list(sizes);
}

const Kernel *ComputeSet::kernelFor(llvm::ArrayRef<int64_t> pieceSizes) const {
  for (const Kernel &k : kernels)
    if (llvm::ArrayRef(k.pieceSizes) == pieceSizes)
      return &k;
  return nullptr;
}

llvm::StringRef varKindName(VarKind k) {
  switch (k) {
  case VarKind::Input:
    return "input";
  case VarKind::Weight:
    return "weight";
  case VarKind::Activation:
    return "activation";
  case VarKind::Constant:
    return "constant";
  }
  return "activation";
}

//===----------------------------------------------------------------------===//
// Runs
//===----------------------------------------------------------------------===//

const Variable &MachineProgram::storage(int64_t var) const {
  return variables[storageIndex(var)];
}

int64_t MachineProgram::storageIndex(int64_t var) const {
  int64_t base = variables[var].base;
  return base >= 0 ? base : var;
}

std::string MachineProgram::stepName(size_t step) const {
  const Step &s = steps[step];
  switch (s.kind) {
  case Step::Kind::Compute:
    return computeSets[s.index].name.empty() ? "cs" + std::to_string(s.index)
                                             : computeSets[s.index].name;
  case Step::Kind::Copy:
    return "copy" + std::to_string(s.index);
  case Step::Kind::AllReduce:
    return "allreduce" + std::to_string(s.index);
  }
  return "";
}

std::string MachineProgram::stepLocation(size_t step) const {
  const Step &s = steps[step];
  switch (s.kind) {
  case Step::Kind::Compute:
    return computeSets[s.index].location;
  case Step::Kind::Copy:
    return copies[s.index].location;
  case Step::Kind::AllReduce:
    return allReduces[s.index].location;
  }
  return "";
}

namespace {

/// Walks a storage variable's elements in row-major order from flat index
/// `s`, `count` of them, as runs within its pieces (the regionOffsets
/// starting at `regionOffset`).
class StorageWalker {
public:
  explicit StorageWalker(const Variable &base)
      : m(base.mapping), shape(base.shape), strides(rowMajorStrides(base.shape)),
        ppd(m.piecesPerDim()), idx(shape.size()), lo(shape.size()), end(shape.size()) {}

  void walk(int64_t s, int64_t count, int64_t regionOffset,
            llvm::function_ref<void(const Run &)> fn) {
    int64_t rank = shape.size();
    if (rank == 0) {
      fn(Run{m.firstTile, 0, regionOffset, 1});
      return;
    }
    while (count > 0) {
      // Unflatten s, find its piece.
      int64_t rem = s;
      for (int64_t d = 0; d < rank; ++d) {
        idx[d] = rem / strides[d];
        rem -= idx[d] * strides[d];
      }
      int64_t tile = m.firstTile, pieceOffset = 0, pieceStride = 1;
      for (int64_t d = rank - 1; d >= 0; --d) {
        int64_t p = std::min(idx[d] / m.chunks[d], ppd[d] - 1);
        tile += p * m.tileStrides[d];
        lo[d] = p * m.chunks[d];
        end[d] = std::min(lo[d] + m.chunks[d], shape[d]);
        pieceOffset += (idx[d] - lo[d]) * pieceStride;
        pieceStride *= end[d] - lo[d];
      }
      // k0: the outermost dimension after which the piece spans the base
      // whole; from idx, the piece continues in flat order to the end of
      // its extent in k0.
      int64_t k0 = rank - 1;
      while (k0 > 0 && lo[k0] == 0 && end[k0] == shape[k0])
        --k0;
      int64_t innerOffset = 0;
      for (int64_t d = k0 + 1; d < rank; ++d)
        innerOffset += idx[d] * strides[d];
      int64_t extent = (end[k0] - idx[k0]) * strides[k0] - innerOffset;
      int64_t n = std::min(extent, count);
      fn(Run{tile, pieceOffset, regionOffset, n});
      s += n;
      regionOffset += n;
      count -= n;
    }
  }

private:
  const TileMapping &m;
  const std::vector<int64_t> &shape;
  std::vector<int64_t> strides, ppd, idx, lo, end;
};

/// forEachRun for a padded view: row by row (the last dimension), the
/// padding before the interior, the interior's runs, the padding after.
void forEachPaddedRun(const MachineProgram &program, int64_t var, const Box &region,
                      llvm::function_ref<void(const Run &)> fn) {
  const Variable &v = program.variables[var];
  StorageWalker walker(program.storage(var));
  std::vector<int64_t> interior = v.interiorShape();
  std::vector<int64_t> istrides = rowMajorStrides(interior);
  int64_t rank = v.shape.size(), last = rank - 1;
  int64_t width = region.sizes[last];
  int64_t c0 = std::clamp<int64_t>(v.padLow[last] - region.offsets[last], 0, width);
  int64_t c1 = std::clamp<int64_t>(v.padLow[last] + interior[last] - region.offsets[last],
                                   c0, width);
  int64_t rows = product(llvm::ArrayRef(region.sizes).take_front(last));
  std::vector<int64_t> outer(last, 0);
  for (int64_t row = 0, at = 0; row < rows; ++row, at += width) {
    bool inside = c1 > c0;
    int64_t s = region.offsets[last] + c0 - v.padLow[last];
    for (int64_t d = 0; d < last && inside; ++d) {
      int64_t i = region.offsets[d] + outer[d] - v.padLow[d];
      inside = i >= 0 && i < interior[d];
      s += i * istrides[d];
    }
    if (!inside) {
      fn(Run{kPaddingTile, 0, at, width});
    } else {
      if (c0 > 0)
        fn(Run{kPaddingTile, 0, at, c0});
      // The interior's flat order is the base's (a unit-dimension reshape).
      walker.walk(s, c1 - c0, at + c0, fn);
      if (c1 < width)
        fn(Run{kPaddingTile, 0, at + c1, width - c1});
    }
    for (int64_t d = last - 1; d >= 0; --d) {
      if (++outer[d] < region.sizes[d])
        break;
      outer[d] = 0;
    }
  }
}

} // namespace

std::vector<int64_t> Variable::interiorShape() const {
  std::vector<int64_t> interior = shape;
  for (size_t d = 0; d < padLow.size() && d < interior.size(); ++d)
    interior[d] -= padLow[d] + (d < padHigh.size() ? padHigh[d] : 0);
  return interior;
}

void forEachRun(const MachineProgram &program, int64_t var, const Box &region,
                llvm::function_ref<void(const Run &)> fn) {
  const Variable &v = program.variables[var];
  if (region.numElements() == 0)
    return;
  if (v.isPadded())
    return forEachPaddedRun(program, var, region, fn);
  int64_t rank = v.shape.size();
  StorageWalker walker(program.storage(var));
  if (program.storage(var).shape.empty())
    return walker.walk(0, 1, 0, fn);

  // The region as rows: dimensions m.. merged into one run of `rowLength`
  // elements, where every dimension after `mergeDim` is covered whole.
  int64_t mergeDim = rank - 1;
  while (mergeDim > 0 && region.offsets[mergeDim] == 0 &&
         region.sizes[mergeDim] == v.shape[mergeDim])
    --mergeDim;
  std::vector<int64_t> vstrides = rowMajorStrides(v.shape);
  int64_t rowLength = rank == 0 ? 1 : region.sizes[mergeDim] * vstrides[mergeDim];
  int64_t rows = product(llvm::ArrayRef(region.sizes).take_front(std::max<int64_t>(mergeDim, 0)));
  std::vector<int64_t> outer(std::max<int64_t>(mergeDim, 0), 0);
  int64_t regionOffset = 0;
  for (int64_t row = 0; row < rows; ++row) {
    // Flat start of this row in the view = flat start in the base (views
    // are row-major reshapes).
    int64_t s = 0;
    for (int64_t d = 0; d < mergeDim; ++d)
      s += (region.offsets[d] + outer[d]) * vstrides[d];
    if (rank > 0)
      s += region.offsets[mergeDim] * vstrides[mergeDim];
    walker.walk(s, rowLength, regionOffset, fn);
    regionOffset += rowLength;
    for (int64_t d = mergeDim - 1; d >= 0; --d) {
      if (++outer[d] < region.sizes[d])
        break;
      outer[d] = 0;
    }
  }
}

namespace {

/// The region of the base that `region` of a shape differing from it only
/// by unit dimensions reads, or nullopt when the shapes differ otherwise.
std::optional<Box> unitDimRegionInBase(llvm::ArrayRef<int64_t> shape, const Variable &base,
                                       const Box &region) {
  Box out;
  size_t b = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    while (b < base.shape.size() && base.shape[b] == 1) {
      out.offsets.push_back(0);
      out.sizes.push_back(1);
      ++b;
    }
    if (b == base.shape.size() || base.shape[b] != shape[d])
      return std::nullopt;
    out.offsets.push_back(region.offsets[d]);
    out.sizes.push_back(region.sizes[d]);
    ++b;
  }
  for (; b < base.shape.size(); ++b) {
    if (base.shape[b] != 1)
      return std::nullopt;
    out.offsets.push_back(0);
    out.sizes.push_back(1);
  }
  return out;
}

/// For a view that only inserts or drops unit dimensions of its base (a
/// convolution's group dimension), the region of the base it reads; nullopt
/// for any other view. Lets the hot queries below skip the run walk.
std::optional<Box> baseRegionOfUnitDimView(const MachineProgram &program, int64_t var,
                                           const Box &region) {
  const Variable &v = program.variables[var];
  if (v.isPadded())
    return std::nullopt;
  return unitDimRegionInBase(v.shape, program.storage(var), region);
}

/// For a padded view: the part of `region` inside the interior, as a region
/// of the base (sizes 0 when the region is all padding).
Box interiorRegionInBase(const MachineProgram &program, int64_t var, const Box &region) {
  const Variable &v = program.variables[var];
  std::vector<int64_t> interior = v.interiorShape();
  Box inInterior;
  bool empty = false;
  for (size_t d = 0; d < interior.size(); ++d) {
    int64_t lo = std::clamp<int64_t>(region.offsets[d] - v.padLow[d], 0, interior[d]);
    int64_t hi = std::clamp<int64_t>(region.offsets[d] + region.sizes[d] - v.padLow[d], lo,
                                     interior[d]);
    inInterior.offsets.push_back(lo);
    inInterior.sizes.push_back(hi - lo);
    empty |= hi == lo;
  }
  const Variable &base = program.storage(var);
  if (empty) {
    Box none;
    none.offsets.assign(base.shape.size(), 0);
    none.sizes.assign(base.shape.size(), 0);
    return none;
  }
  // makePaddedView and verify() keep the interior a unit-dimension reshape.
  return *unitDimRegionInBase(interior, base, inInterior);
}

} // namespace

namespace {
/// A view of `source`'s storage with its name, type and kind, shapeless.
Variable viewOf(const MachineProgram &program, int64_t source) {
  const Variable &src = program.variables[source];
  Variable view;
  view.name = src.name;
  view.dtype = src.dtype;
  view.kind = src.kind;
  view.base = program.storageIndex(source);
  return view;
}
} // namespace

Expected<Variable> makeView(const MachineProgram &program, int64_t source,
                            llvm::ArrayRef<int64_t> shape) {
  const Variable &src = program.variables[source];
  Variable view = viewOf(program, source);
  view.shape.assign(shape.begin(), shape.end());
  if (!src.isPadded()) {
    if (product(shape) != product(src.shape))
      return fail("a view of " + shapeString(src.shape) + " as " + shapeString(shape) +
                  " changes the element count");
    return view;
  }
  // Padded: the same non-unit dimensions, each with its padding.
  view.padLow.assign(shape.size(), 0);
  view.padHigh.assign(shape.size(), 0);
  size_t s = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    while (s < src.shape.size() && src.shape[s] == 1)
      ++s;
    if (s == src.shape.size() || src.shape[s] != shape[d])
      return fail("a padded view of " + shapeString(src.shape) + " can only be seen as " +
                  "a shape differing from it by unit dimensions, not " + shapeString(shape));
    view.padLow[d] = src.padLow[s];
    view.padHigh[d] = src.padHigh[s];
    ++s;
  }
  for (; s < src.shape.size(); ++s)
    if (src.shape[s] != 1)
      return fail("a padded view of " + shapeString(src.shape) + " can only be seen as " +
                  "a shape differing from it by unit dimensions, not " + shapeString(shape));
  view.padBits = src.padBits;
  return view;
}

Expected<Variable> makePaddedView(const MachineProgram &program, int64_t source,
                                  llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high,
                                  uint64_t padBits) {
  const Variable &src = program.variables[source];
  const Variable &base = program.storage(source);
  if (src.isPadded() || low.size() != src.shape.size() || high.size() != src.shape.size())
    return fail("padding " + shapeString(src.shape) + ": needs an unpadded variable and " +
                "one low and one high count per dimension");
  Box all(std::vector<int64_t>(src.shape.size(), 0), src.shape);
  if (src.base >= 0 && !unitDimRegionInBase(src.shape, base, all))
    return fail("padding " + shapeString(src.shape) + ": a view that reshapes its base " +
                "other than by unit dimensions cannot be padded in place");
  Variable view = viewOf(program, source);
  view.padLow.assign(low.begin(), low.end());
  view.padHigh.assign(high.begin(), high.end());
  view.padBits = padBits;
  for (size_t d = 0; d < src.shape.size(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return fail("padding " + shapeString(src.shape) + ": negative padding");
    view.shape.push_back(src.shape[d] + low[d] + high[d]);
  }
  return view;
}

std::vector<Segment> copySegments(const MachineProgram &p, const Copy &c) {
  std::vector<Run> src, dst;
  forEachRun(p, c.src, c.srcRegion, [&](const Run &r) { src.push_back(r); });
  forEachRun(p, c.dst, Box{c.dstOffsets, c.srcRegion.sizes},
             [&](const Run &r) { dst.push_back(r); });
  std::vector<Segment> segments;
  size_t s = 0;
  for (const Run &d : dst) {
    int64_t pos = d.regionOffset, end = d.regionOffset + d.count;
    while (pos < end) {
      while (src[s].regionOffset + src[s].count <= pos)
        ++s;
      int64_t n = std::min(end, src[s].regionOffset + src[s].count) - pos;
      segments.push_back({d.tile, d.pieceOffset + (pos - d.regionOffset), src[s].tile,
                          src[s].pieceOffset + (pos - src[s].regionOffset), n});
      pos += n;
    }
  }
  return segments;
}

bool forEachOverlap(const MachineProgram &program, int64_t var, const Box &region,
                    Box &regionInStorage, llvm::function_ref<void(const Overlap &)> fn) {
  if (program.variables[var].base < 0) {
    regionInStorage = region;
  } else if (std::optional<Box> inBase = baseRegionOfUnitDimView(program, var, region)) {
    regionInStorage = std::move(*inBase);
  } else {
    return false;
  }
  if (regionInStorage.numElements() == 0)
    return true;
  const TileMapping &m = program.storage(var).mapping;
  int64_t rank = m.rank();
  const Box &r = regionInStorage;
  // On the stack: the planner and the cost estimate ask this per candidate
  // piece and operand.
  llvm::SmallVector<int64_t, 8> first(rank), last(rank), idx(rank);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t pieces = m.piecesAlong(d);
    first[d] = std::min(r.offsets[d] / m.chunks[d], pieces - 1);
    last[d] = std::min((r.offsets[d] + r.sizes[d] - 1) / m.chunks[d], pieces - 1);
  }
  idx = first;
  // One Overlap reused for every piece: this runs per vertex and operand in
  // the IPU model, so it allocates nothing per piece.
  Overlap o;
  o.piece.offsets.resize(rank);
  o.piece.sizes.resize(rank);
  o.part.offsets.resize(rank);
  o.part.sizes.resize(rank);
  while (true) {
    o.tile = m.firstTile;
    for (int64_t d = 0; d < rank; ++d) {
      o.tile += idx[d] * m.tileStrides[d];
      int64_t pieceLo = idx[d] * m.chunks[d];
      int64_t pieceHi = std::min(pieceLo + m.chunks[d], m.shape[d]);
      o.piece.offsets[d] = pieceLo;
      o.piece.sizes[d] = pieceHi - pieceLo;
      int64_t lo = std::max(r.offsets[d], pieceLo);
      int64_t hi = std::min(r.offsets[d] + r.sizes[d], pieceHi);
      o.part.offsets[d] = lo;
      o.part.sizes[d] = hi - lo;
    }
    fn(o);
    int64_t d = rank - 1;
    while (d >= 0 && ++idx[d] > last[d]) {
      idx[d] = first[d];
      --d;
    }
    if (d < 0)
      break;
  }
  return true;
}

bool forEachPaddedOverlap(const MachineProgram &program, int64_t var, const Box &region,
                          llvm::function_ref<void(const Overlap &, int64_t runs)> fn) {
  const Variable &v = program.variables[var];
  if (!v.isPadded())
    return false;
  std::vector<int64_t> interior = v.interiorShape();
  const Variable &base = program.storage(var);
  // A row of the view is then a row of the base (forEachPaddedRun walks
  // rows; makePaddedView and verify() keep the interior a unit-dimension
  // reshape of the base).
  if (interior.empty() || base.shape.empty() || base.shape.back() != interior.back())
    return false;
  Box inBase = interiorRegionInBase(program, var, region);
  if (inBase.numElements() == 0)
    return true;
  Box inStorage;
  return forEachOverlap(program, program.storageIndex(var), inBase, inStorage,
                        [&](const Overlap &o) {
                          int64_t runs = 1;
                          for (size_t d = 0; d + 1 < o.part.sizes.size(); ++d)
                            runs *= o.part.sizes[d];
                          fn(o, runs);
                        });
}

namespace {
/// The outermost dimension of `part`'s contiguous rows: the dimensions
/// after it, which both buffers hold whole, merge into the row.
int64_t rowDimension(const Box &fromBox, const Box &toBox, const Box &part) {
  int64_t inner = static_cast<int64_t>(part.sizes.size()) - 1;
  while (inner > 0 && part.sizes[inner] == fromBox.sizes[inner] &&
         part.sizes[inner] == toBox.sizes[inner])
    --inner;
  return inner;
}
} // namespace

void forEachRowCopy(const Box &fromBox, const Box &toBox, const Box &part,
                    int64_t elementBytes, llvm::function_ref<void(const RowCopy &)> fn) {
  int64_t rank = part.sizes.size();
  if (part.numElements() == 0)
    return;
  if (rank == 0) {
    fn(RowCopy{0, 0, elementBytes, 1, 0, 0});
    return;
  }
  // Inner dimensions both buffers hold whole merge into one contiguous row.
  int64_t inner = rowDimension(fromBox, toBox, part), run = 1;
  for (int64_t d = inner; d < rank; ++d)
    run *= part.sizes[d];
  llvm::SmallVector<int64_t, 8> fromStrides(rank, 1), toStrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) {
    fromStrides[d] = fromStrides[d + 1] * fromBox.sizes[d + 1];
    toStrides[d] = toStrides[d + 1] * toBox.sizes[d + 1];
  }
  int64_t f = 0, t = 0;
  for (int64_t d = 0; d <= inner; ++d) {
    f += (part.offsets[d] - fromBox.offsets[d]) * fromStrides[d];
    t += (part.offsets[d] - toBox.offsets[d]) * toStrides[d];
  }
  for (int64_t d = 0; d < inner; ++d) {
    fromStrides[d] *= elementBytes;
    toStrides[d] *= elementBytes;
  }
  RowCopy r{f * elementBytes, t * elementBytes, run * elementBytes, 1, 0, 0};
  if (inner == 0) {
    fn(r);
    return;
  }
  // The dimension just outside the row is the copy's row stride; the ones
  // further out are walked as an odometer, one RowCopy per position.
  int64_t rowDim = inner - 1;
  r.rows = part.sizes[rowDim];
  r.fromStride = fromStrides[rowDim];
  r.toStride = toStrides[rowDim];
  if (r.rows > 1 && r.fromStride == r.rowBytes && r.toStride == r.rowBytes) {
    r.rowBytes *= r.rows; // rows that follow each other in both buffers
    r.rows = 1;
  }
  llvm::SmallVector<int64_t, 8> idx(rowDim, 0);
  while (true) {
    fn(r);
    int64_t d = rowDim - 1;
    for (; d >= 0; --d) {
      r.from += fromStrides[d];
      r.to += toStrides[d];
      if (++idx[d] < part.sizes[d])
        break;
      r.from -= fromStrides[d] * part.sizes[d];
      r.to -= toStrides[d] * part.sizes[d];
      idx[d] = 0;
    }
    if (d < 0)
      break;
  }
}

int64_t rowCount(const Box &fromBox, const Box &toBox, const Box &part) {
  // The same merging as forEachRowCopy, counted instead of walked.
  if (part.numElements() == 0)
    return 0;
  int64_t inner = rowDimension(fromBox, toBox, part);
  int64_t rows = 1;
  for (int64_t d = 0; d < inner; ++d)
    rows *= part.sizes[d];
  return rows;
}

void copyBox(const char *from, const Box &fromBox, char *to, const Box &toBox,
             const Box &part, int64_t elementBytes) {
  forEachRowCopy(fromBox, toBox, part, elementBytes,
                 [&](const RowCopy &r) { copyRows(from, to, r); });
}

void forEachAccess(const MachineProgram &program, const Step &step,
                   llvm::function_ref<void(int64_t var, bool write)> fn) {
  if (step.kind == Step::Kind::Compute) {
    const ComputeSet &cs = program.computeSets[step.index];
    for (const auto &in : cs.inputs)
      fn(in.var, /*write=*/false);
    for (int64_t out : cs.outputs)
      fn(out, /*write=*/true);
  } else if (step.kind == Step::Kind::Copy) {
    fn(program.copies[step.index].src, /*write=*/false);
    fn(program.copies[step.index].dst, /*write=*/true);
  } else {
    const AllReduce &ar = program.allReduces[step.index];
    for (int64_t src : ar.srcs)
      fn(src, /*write=*/false);
    for (int64_t dst : ar.dsts)
      fn(dst, /*write=*/true);
  }
}

llvm::Error checkPerUpdateOutputs(const MachineProgram &program,
                                  llvm::ArrayRef<size_t> perUpdateOutputs) {
  std::set<int64_t> written; // storage written by per-update steps
  for (const Step &step : program.steps)
    if (step.perUpdate)
      forEachAccess(program, step, [&](int64_t var, bool write) {
        if (write)
          written.insert(program.storageIndex(var));
      });
  for (auto [i, v] : llvm::enumerate(program.outputs))
    if (!llvm::is_contained(perUpdateOutputs, i) && written.count(program.storageIndex(v)))
      return llvm::createStringError("program: output " + std::to_string(i) +
                                     " is returned every micro-batch but written by a step "
                                     "that runs once per weight update");
  return llvm::Error::success();
}

std::vector<VariableUses> variableUses(const MachineProgram &program) {
  std::vector<VariableUses> uses(program.variables.size());
  for (size_t t = 0; t < program.steps.size(); ++t)
    forEachAccess(program, program.steps[t], [&](int64_t var, bool write) {
      VariableUses &u = uses[program.storageIndex(var)];
      int64_t &first = write ? u.firstWrite : u.firstRead;
      if (first < 0)
        first = t;
      u.lastUse = std::max<int64_t>(u.lastUse, t);
    });
  return uses;
}

void markPerUpdateSteps(MachineProgram &program, llvm::ArrayRef<size_t> perUpdateOutputs) {
  // Storage read every micro-batch: by the other outputs, then by every
  // step not marked. A step is per-update when it writes something and
  // nothing it writes is read so; taken backwards to a fixed point (a
  // value read before it is written would be another iteration's).
  std::vector<bool> everyIteration(program.variables.size(), false);
  for (auto [i, v] : llvm::enumerate(program.outputs))
    if (!llvm::is_contained(perUpdateOutputs, i))
      everyIteration[program.storageIndex(v)] = true;
  for (Step &step : program.steps)
    step.perUpdate = !perUpdateOutputs.empty();
  for (bool changed = true; changed;) {
    changed = false;
    for (Step &step : llvm::reverse(program.steps)) {
      if (!step.perUpdate)
        continue;
      bool writes = false, readEveryIteration = false;
      forEachAccess(program, step, [&](int64_t var, bool write) {
        writes |= write;
        readEveryIteration |= write && everyIteration[program.storageIndex(var)];
      });
      if (writes && !readEveryIteration)
        continue;
      step.perUpdate = false;
      changed = true;
      forEachAccess(program, step, [&](int64_t var, bool write) {
        if (!write)
          everyIteration[program.storageIndex(var)] = true;
      });
    }
  }
}

namespace {
/// The piece of `var`'s storage on `tile`, if any: computed once by
/// remoteRead for the questions below.
std::optional<Box> storagePieceOnTile(const MachineProgram &program, int64_t var,
                                      int64_t tile) {
  return program.storage(var).mapping.pieceOnTile(tile);
}

bool isLocalPieceGiven(const MachineProgram &program, int64_t var, const Box &region,
                       int64_t tile, const std::optional<Box> &piece) {
  if (region.numElements() == 0)
    return true;
  const Variable &v = program.variables[var];
  if (!piece || piece->numElements() != region.numElements())
    return false;
  if (v.isPadded()) {
    // Read in place only if the region is all interior and the piece.
    Box inBase = interiorRegionInBase(program, var, region);
    return inBase.numElements() == region.numElements() && *piece == inBase;
  }
  if (v.base < 0)
    return *piece == region;
  if (std::optional<Box> inBase = baseRegionOfUnitDimView(program, var, region))
    return *piece == *inBase;
  // A view: the region read in row-major order must be the piece's storage,
  // element for element.
  bool local = true;
  forEachRun(program, var, region, [&](const Run &r) {
    if (r.tile != tile || r.pieceOffset != r.regionOffset)
      local = false;
  });
  return local;
}

int64_t remoteBytesGiven(const MachineProgram &program, int64_t var, const Box &region,
                         int64_t tile, const std::optional<Box> &piece) {
  const Variable &v = program.variables[var];
  // A padded view's padding is no one's data: only its interior moves.
  std::optional<Box> inBase =
      v.base < 0     ? std::optional<Box>(region)
      : v.isPadded() ? std::optional<Box>(interiorRegionInBase(program, var, region))
                     : baseRegionOfUnitDimView(program, var, region);
  if (inBase) {
    // A tile holds at most one piece, so what is local is the region's
    // intersection with that piece: O(rank), where the planner asks this
    // for every candidate it costs.
    int64_t local = 0;
    if (piece) {
      local = 1;
      for (size_t d = 0; d < inBase->sizes.size() && local; ++d) {
        int64_t lo = std::max(inBase->offsets[d], piece->offsets[d]);
        int64_t hi = std::min(inBase->offsets[d] + inBase->sizes[d],
                              piece->offsets[d] + piece->sizes[d]);
        local *= std::max<int64_t>(0, hi - lo);
      }
    }
    return (inBase->numElements() - local) * v.elementBytes();
  }
  int64_t elements = 0;
  forEachRun(program, var, region, [&](const Run &r) {
    if (r.tile != tile)
      elements += r.count;
  });
  return elements * program.variables[var].elementBytes();
}

int64_t remoteRegionsGiven(const MachineProgram &program, int64_t var, const Box &region,
                           int64_t tile, const std::optional<Box> &piece);
} // namespace

bool isLocalPiece(const MachineProgram &program, int64_t var, const Box &region,
                  int64_t tile) {
  return isLocalPieceGiven(program, var, region, tile,
                           storagePieceOnTile(program, var, tile));
}

RemoteRead remoteRead(const MachineProgram &program, int64_t var, const Box &region,
                      int64_t tile) {
  RemoteRead read;
  const Variable &v = program.variables[var];
  if (v.base < 0 || v.isPadded() || baseRegionOfUnitDimView(program, var, region)) {
    // Each answer in O(rank), from one look for the tile's piece.
    std::optional<Box> piece = storagePieceOnTile(program, var, tile);
    read.local = isLocalPieceGiven(program, var, region, tile, piece);
    if (!read.local) {
      read.bytes = remoteBytesGiven(program, var, region, tile, piece);
      read.regions = remoteRegionsGiven(program, var, region, tile, piece);
      read.paddingBytes = paddingBytes(program, var, region);
    }
    return read;
  }
  if (region.numElements() == 0)
    return read;
  // A general view: one walk of its runs answers all four.
  std::optional<Box> piece = program.storage(var).mapping.pieceOnTile(tile);
  bool inPlace = piece && piece->numElements() == region.numElements();
  int64_t elements = 0;
  forEachRun(program, var, region, [&](const Run &r) {
    if (r.tile != tile || r.pieceOffset != r.regionOffset)
      inPlace = false;
    if (r.tile != tile) {
      elements += r.count;
      ++read.regions;
    }
  });
  read.local = inPlace;
  if (read.local)
    return read;
  read.bytes = elements * v.elementBytes();
  return read;
}

std::optional<PiecePart> denseRegionOnOneTile(const MachineProgram &program, int64_t var,
                                              const Box &region) {
  if (region.numElements() == 0 || program.variables[var].isPadded())
    return std::nullopt;
  std::optional<PiecePart> found;
  int64_t overlaps = 0;
  Box inStorage;
  bool boxed = forEachOverlap(program, var, region, inStorage, [&](const Overlap &o) {
    if (++overlaps > 1)
      return;
    // Dense within the piece: every dimension after the part's outermost
    // one of extent > 1 is whole.
    int64_t rank = o.part.sizes.size(), d = 0;
    while (d < rank && o.part.sizes[d] == 1)
      ++d;
    for (int64_t e = d + 1; e < rank; ++e)
      if (o.part.sizes[e] != o.piece.sizes[e])
        return;
    int64_t offset = 0;
    for (int64_t e = 0; e < rank; ++e)
      offset = offset * o.piece.sizes[e] + (o.part.offsets[e] - o.piece.offsets[e]);
    found = PiecePart{o.tile, offset};
  });
  if (!boxed || overlaps != 1)
    return std::nullopt;
  return found;
}

int64_t paddingBytes(const MachineProgram &program, int64_t var, const Box &region) {
  const Variable &v = program.variables[var];
  if (!v.isPadded())
    return 0;
  int64_t interior = interiorRegionInBase(program, var, region).numElements();
  return (region.numElements() - interior) * v.elementBytes();
}

namespace {
int64_t remoteRegionsGiven(const MachineProgram &program, int64_t var, const Box &region,
                           int64_t tile, const std::optional<Box> &piece) {
  if (region.numElements() == 0)
    return 0;
  const Variable &v = program.variables[var];
  std::optional<Box> inBase =
      v.base < 0     ? std::optional<Box>(region)
      : v.isPadded() ? std::optional<Box>(interiorRegionInBase(program, var, region))
                     : baseRegionOfUnitDimView(program, var, region);
  if (inBase && inBase->numElements() == 0)
    return 0;
  if (!inBase) {
    int64_t regions = 0;
    forEachRun(program, var, region, [&](const Run &r) { regions += r.tile != tile; });
    return regions;
  }
  // In O(rank), where the planner asks for every candidate it costs.
  // rowCount merges a dimension into the row when the region holds exactly
  // one piece's extent in it; then only one piece overlaps there, so the
  // merged dimensions are the same for every overlapped piece. Each piece
  // contributes the product of its overlap's sizes outside the row, and
  // those sum, dimension by dimension, to the region's sizes.
  const Box &r = *inBase;
  const TileMapping &m = program.storage(var).mapping;
  int64_t rank = r.sizes.size();
  if (rank == 0)
    return piece ? 0 : 1;
  auto wholePiece = [&](int64_t d) {
    int64_t lo = r.offsets[d] / m.chunks[d] * m.chunks[d];
    return r.offsets[d] == lo &&
           r.sizes[d] == std::min(m.chunks[d], m.shape[d] - lo);
  };
  int64_t inner = rank - 1;
  while (inner > 0 && wholePiece(inner))
    --inner;
  // Each piece the region overlaps along `inner` (the row's dimension) is
  // a row of its own.
  int64_t all = (r.offsets[inner] + r.sizes[inner] - 1) / m.chunks[inner] -
                r.offsets[inner] / m.chunks[inner] + 1,
          local = 0;
  for (int64_t d = 0; d < inner; ++d)
    all *= r.sizes[d];
  if (piece) {
    local = 1;
    for (int64_t d = 0; d < rank && local; ++d) {
      int64_t lo = std::max(r.offsets[d], piece->offsets[d]);
      int64_t hi = std::min(r.offsets[d] + r.sizes[d], piece->offsets[d] + piece->sizes[d]);
      local *= std::max<int64_t>(0, hi - lo) > 0 ? (d < inner ? hi - lo : 1) : 0;
    }
  }
  return all - local;
}
} // namespace

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

namespace {

bool sameGrid(const TileMapping &a, const TileMapping &b) {
  return a.shape == b.shape && a.chunks == b.chunks && a.tileStrides == b.tileStrides &&
         a.firstTile == b.firstTile;
}

/// Every check that needs no machine: indices, ranks, shapes, access maps,
/// copies. `numTiles` adds the mapping and kernel checks.
llvm::Error verifyProgram(const MachineProgram &p, std::optional<int64_t> numTiles) {
  int64_t numVars = p.variables.size();
  auto varName = [&](int64_t i) {
    return "variable " + std::to_string(i) + " ('" + p.variables[i].name + "')";
  };
  // Shapes first: view checks multiply out their bases' shapes.
  for (int64_t i = 0; i < numVars; ++i) {
    int64_t elements = 1;
    for (int64_t s : p.variables[i].shape) {
      if (s < 0 || s > kMaxElements || (s && elements > kMaxElements / s))
        return fail("program: " + varName(i) + " has a bad shape " +
                    shapeString(p.variables[i].shape));
      elements *= s;
    }
  }
  for (int64_t i = 0; i < numVars; ++i) {
    const Variable &v = p.variables[i];
    int64_t elements = product(v.shape);
    if (v.base >= 0) {
      if (v.base >= numVars)
        return fail("program: " + varName(i) + " is a view of variable " +
                    llvm::Twine(v.base) + ", which does not exist");
      const Variable &b = p.variables[v.base];
      if (b.base >= 0)
        return fail("program: " + varName(i) + " is a view of " + varName(v.base) +
                    ", itself a view; views must name the storage variable");
      if (v.isPadded()) {
        bool ok = v.padLow.size() == v.shape.size() && v.padHigh.size() == v.shape.size() &&
                  b.dtype == v.dtype;
        for (size_t d = 0; ok && d < v.shape.size(); ++d)
          ok = v.padLow[d] >= 0 && v.padHigh[d] >= 0 &&
               v.padLow[d] + v.padHigh[d] <= v.shape[d];
        if (ok) {
          std::vector<int64_t> interior = v.interiorShape();
          Box all(std::vector<int64_t>(interior.size(), 0), interior);
          ok = unitDimRegionInBase(interior, b, all).has_value();
        }
        if (!ok)
          return fail("program: " + varName(i) + " (" + typeString(v.shape, v.dtype) +
                      ") pads " + varName(v.base) + " (" + typeString(b.shape, b.dtype) +
                      "): its padding needs one low and one high count per dimension, "
                      "and what it leaves must be the base but for unit dimensions");
        continue;
      }
      if (!v.padHigh.empty())
        return fail("program: " + varName(i) + " has high padding but no low padding");
      if (product(b.shape) != elements || b.dtype != v.dtype)
        return fail("program: " + varName(i) + " (" + typeString(v.shape, v.dtype) +
                    ") is a view of " + varName(v.base) + " (" +
                    typeString(b.shape, b.dtype) + "): element counts or types differ");
      continue;
    }
    if (v.base != -1)
      return fail("program: " + varName(i) + " has base " + llvm::Twine(v.base) +
                  "; use -1 for a variable with its own storage");
    if (v.isPadded() || !v.padHigh.empty())
      return fail("program: " + varName(i) + " has padding but no base; only views pad");
    if (v.mapping.shape != v.shape)
      return fail("program: " + varName(i) + " is " + shapeString(v.shape) +
                  " but its mapping is for " + shapeString(v.mapping.shape));
    if (v.mapping.chunks.size() != v.shape.size() ||
        v.mapping.tileStrides.size() != v.shape.size())
      return fail("program: " + varName(i) + ": mapping chunks and tile strides need " +
                  llvm::Twine(v.shape.size()) + " entries");
    for (size_t d = 0; d < v.shape.size(); ++d)
      if (v.mapping.chunks[d] < 1)
        return fail("program: " + varName(i) + ": mapping chunk " + llvm::Twine(d) +
                    " must be at least 1");
    if (numTiles)
      if (auto err = v.mapping.verify(*numTiles))
        return fail("program: " + varName(i) + ": " + llvm::toString(std::move(err)));
    if ((v.kind == VarKind::Weight || v.kind == VarKind::Constant) && v.weight < 0)
      return fail("program: " + varName(i) + " is a " + varKindName(v.kind) +
                  " without a weight index");
    if (v.mapping.isMirrored() && v.kind != VarKind::Weight && v.kind != VarKind::Constant)
      return fail("program: " + varName(i) + " is a mirrored " + varKindName(v.kind) +
                  "; only weights and constants have copies on other tiles");
  }
  auto checkVar = [&](int64_t var, const llvm::Twine &where) -> llvm::Error {
    if (var < 0 || var >= numVars)
      return fail("program: " + where + " names variable " + llvm::Twine(var) +
                  "; there are " + llvm::Twine(numVars));
    return llvm::Error::success();
  };
  // Padded views are read by vertices only: streams and copies move stored
  // elements.
  auto checkStored = [&](int64_t var, const llvm::Twine &where) -> llvm::Error {
    if (auto err = checkVar(var, where))
      return err;
    if (p.variables[var].isPadded())
      return fail("program: " + where + " is " + varName(var) +
                  ", a padded view; only compute sets read those");
    return llvm::Error::success();
  };
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (auto err = checkStored(p.inputs[i], "input " + llvm::Twine(i)))
      return err;
  for (size_t i = 0; i < p.outputs.size(); ++i)
    if (auto err = checkStored(p.outputs[i], "output " + llvm::Twine(i)))
      return err;

  for (size_t c = 0; c < p.computeSets.size(); ++c) {
    const ComputeSet &cs = p.computeSets[c];
    std::string where = "compute set " + std::to_string(c) + " ('" + cs.name + "')";
    int64_t loops = cs.loopRanges.size();
    for (int64_t r : cs.loopRanges)
      if (r < 0 || r > kMaxElements)
        return fail("program: " + where + " has a bad loop range " +
                    shapeString(cs.loopRanges));
    if (cs.outputs.empty())
      return fail("program: " + where + " has no outputs");
    for (size_t o = 0; o < cs.outputs.size(); ++o) {
      if (auto err = checkVar(cs.outputs[o], where + " output " + llvm::Twine(o)))
        return err;
      const Variable &v = p.variables[cs.outputs[o]];
      if (v.base >= 0)
        return fail("program: " + where + " writes " + varName(cs.outputs[o]) +
                    ", a view; outputs must be storage variables");
      if (v.shape.size() != cs.outputLoops.size())
        return fail("program: " + where + " output " + llvm::Twine(o) + " has rank " +
                    llvm::Twine(v.shape.size()) + " but " +
                    llvm::Twine(cs.outputLoops.size()) + " output loops");
      if (!sameGrid(v.mapping, p.variables[cs.outputs[0]].mapping))
        return fail("program: " + where + " output " + llvm::Twine(o) +
                    " is not mapped like output 0");
    }
    std::vector<bool> seen(loops, false);
    const Variable &out0 = p.variables[cs.outputs[0]];
    for (size_t j = 0; j < cs.outputLoops.size(); ++j) {
      int64_t l = cs.outputLoops[j];
      if (l < 0 || l >= loops || seen[l])
        return fail("program: " + where + " output loop " + llvm::Twine(j) + " (" +
                    llvm::Twine(l) + ") is not a distinct loop of " + llvm::Twine(loops));
      seen[l] = true;
      if (out0.shape[j] != cs.loopRanges[l])
        return fail("program: " + where + " output dimension " + llvm::Twine(j) +
                    " is " + llvm::Twine(out0.shape[j]) + " but loop " + llvm::Twine(l) +
                    " runs " + llvm::Twine(cs.loopRanges[l]));
    }
    for (size_t i = 0; i < cs.inputs.size(); ++i) {
      const ComputeSet::Operand &in = cs.inputs[i];
      std::string at = where + " input " + std::to_string(i);
      if (auto err = checkVar(in.var, at))
        return err;
      if (in.map.full)
        continue;
      size_t rank = p.variables[in.var].shape.size();
      if (in.map.coeffs.size() != rank || in.map.consts.size() != rank)
        return fail("program: " + at + ": the access map has " +
                    llvm::Twine(in.map.coeffs.size()) + " rows and " +
                    llvm::Twine(in.map.consts.size()) + " constants for a rank-" +
                    llvm::Twine(rank) + " operand");
      for (size_t j = 0; j < rank; ++j) {
        if (in.map.coeffs[j].size() != static_cast<size_t>(loops))
          return fail("program: " + at + ": access map row " + llvm::Twine(j) + " has " +
                      llvm::Twine(in.map.coeffs[j].size()) + " coefficients for " +
                      llvm::Twine(loops) + " loops");
        for (int64_t c : in.map.coeffs[j])
          if (c < 0 || c > kMaxCoefficient)
            return fail("program: " + at + ": access map coefficients must be in [0, 2^32]");
        if (std::abs(in.map.consts[j]) > kMaxCoefficient)
          return fail("program: " + at + ": access map constant out of range");
      }
      if (!in.map.extents.empty() && in.map.extents.size() != rank)
        return fail("program: " + at + ": the access map has " +
                    llvm::Twine(in.map.extents.size()) + " extents for a rank-" +
                    llvm::Twine(rank) + " operand");
      for (int64_t e : in.map.extents)
        if (e < 1 || e > kMaxCoefficient)
          return fail("program: " + at + ": access map extents must be in [1, 2^32]");
    }
    for (size_t k = 0; k < cs.kernels.size(); ++k) {
      const Kernel &kern = cs.kernels[k];
      if (kern.symbol.empty() || kern.pieceSizes.size() != cs.outputLoops.size() ||
          kern.cycles < 0 || kern.codeBytes < 0)
        return fail("program: " + where + " kernel " + llvm::Twine(k) +
                    " needs a symbol, one piece size per output dimension and "
                    "non-negative cycles and code bytes");
    }
    if (numTiles)
      for (const auto &sizes : out0.mapping.pieceShapes())
        if (product(sizes) > 0 && !cs.kernelFor(sizes))
          return fail("program: " + where + " has no kernel for output pieces of " +
                      shapeString(sizes));
  }

  for (size_t c = 0; c < p.copies.size(); ++c) {
    const Copy &cp = p.copies[c];
    std::string where = "copy " + std::to_string(c);
    if (auto err = checkStored(cp.src, where + " source"))
      return err;
    if (auto err = checkStored(cp.dst, where + " destination"))
      return err;
    const Variable &src = p.variables[cp.src], &dst = p.variables[cp.dst];
    if (src.dtype != dst.dtype)
      return fail("program: " + where + " copies " + dtypeName(src.dtype) + " into " +
                  dtypeName(dst.dtype));
    if (p.storageIndex(cp.src) == p.storageIndex(cp.dst))
      return fail("program: " + where + " copies variable storage onto itself");
    size_t rank = src.shape.size();
    if (cp.srcRegion.offsets.size() != rank || cp.srcRegion.sizes.size() != rank ||
        cp.dstOffsets.size() != dst.shape.size() || dst.shape.size() != rank)
      return fail("program: " + where + ": region and offsets must match the ranks of " +
                  varName(cp.src) + " and " + varName(cp.dst));
    for (size_t d = 0; d < rank; ++d) {
      int64_t o = cp.srcRegion.offsets[d], s = cp.srcRegion.sizes[d], t = cp.dstOffsets[d];
      if (o < 0 || s < 0 || o > src.shape[d] || s > src.shape[d] - o || t < 0 ||
          t > dst.shape[d] || s > dst.shape[d] - t)
        return fail("program: " + where + ": region at " +
                    shapeString(cp.srcRegion.offsets) + " of size " +
                    shapeString(cp.srcRegion.sizes) + " into offsets " +
                    shapeString(cp.dstOffsets) + " is out of bounds of " +
                    shapeString(src.shape) + " -> " + shapeString(dst.shape));
    }
  }

  for (size_t a = 0; a < p.allReduces.size(); ++a) {
    const AllReduce &ar = p.allReduces[a];
    std::string where = "all-reduce " + std::to_string(a);
    // Pairs are summed one after another: a destination must be no one
    // else's source or destination, nor anything the program is given.
    std::set<int64_t> written;
    for (int64_t dst : ar.dsts)
      if (dst >= 0 && dst < numVars && !written.insert(p.storageIndex(dst)).second)
        return fail("program: " + where + " writes " + varName(dst) + " twice");
    for (int64_t src : ar.srcs)
      if (src >= 0 && src < numVars && written.count(p.storageIndex(src)))
        return fail("program: " + where + " reads " + varName(src) +
                    ", which it also writes");
    for (int64_t dst : ar.dsts)
      if (dst >= 0 && dst < numVars &&
          (p.variables[p.storageIndex(dst)].kind != VarKind::Activation ||
           llvm::is_contained(p.inputs, dst)))
        return fail("program: " + where + " writes " + varName(dst) +
                    ", which is not an activation of the program");
    if (ar.srcs.size() != ar.dsts.size() || ar.srcs.empty())
      return fail("program: " + where + " must pair one or more sources with as many "
                  "destinations");
    for (auto [src, dst] : llvm::zip(ar.srcs, ar.dsts)) {
      if (auto err = checkStored(src, where + " source"))
        return err;
      if (auto err = checkStored(dst, where + " destination"))
        return err;
      const Variable &from = p.variables[src], &to = p.variables[dst];
      if (from.shape != to.shape || from.dtype != to.dtype)
        return fail("program: " + where + " reduces " + varName(src) + " into " +
                    varName(dst) + " of another shape or type");
      if (from.dtype != DType::F32 && from.dtype != DType::F16 &&
          from.dtype != DType::BF16 && from.dtype != DType::F64)
        return fail("program: " + where + " sums " + varName(src) + " of type " +
                    dtypeName(from.dtype) + "; it sums floats only");
      if (p.storageIndex(src) == p.storageIndex(dst))
        return fail("program: " + where + " reduces " + varName(src) + " onto itself");
    }
  }

  for (size_t s = 0; s < p.steps.size(); ++s) {
    const Step &st = p.steps[s];
    size_t limit = st.kind == Step::Kind::Compute ? p.computeSets.size()
                   : st.kind == Step::Kind::Copy  ? p.copies.size()
                                                  : p.allReduces.size();
    if (st.index < 0 || static_cast<size_t>(st.index) >= limit)
      return fail("program: step " + llvm::Twine(s) + " names " +
                  (st.kind == Step::Kind::Compute ? "compute set "
                   : st.kind == Step::Kind::Copy  ? "copy "
                                                  : "all-reduce ") +
                  llvm::Twine(st.index) + ", which does not exist");
  }
  // A mirrored variable's copies are written once, when it is loaded: no
  // step may write it.
  for (size_t s = 0; s < p.steps.size(); ++s) {
    std::optional<int64_t> mirrored;
    forEachAccess(p, p.steps[s], [&](int64_t var, bool write) {
      if (write && p.storage(var).mapping.isMirrored() && !mirrored)
        mirrored = var;
    });
    if (mirrored)
      return fail("program: step " + llvm::Twine(s) + " writes " + varName(*mirrored) +
                  ", which is mirrored: its copies on other tiles would go stale");
  }
  // A step skipped between weight updates leaves its results stale: only
  // other such steps may read them.
  std::map<int64_t, size_t> perUpdateWrites; // storage -> writing step
  for (size_t s = 0; s < p.steps.size(); ++s)
    if (p.steps[s].perUpdate)
      forEachAccess(p, p.steps[s], [&](int64_t var, bool write) {
        if (write)
          perUpdateWrites.emplace(p.storageIndex(var), s);
      });
  for (size_t s = 0; s < p.steps.size() && !perUpdateWrites.empty(); ++s) {
    if (p.steps[s].perUpdate)
      continue;
    std::optional<std::pair<int64_t, size_t>> stale;
    forEachAccess(p, p.steps[s], [&](int64_t var, bool write) {
      auto it = perUpdateWrites.find(p.storageIndex(var));
      if (!write && it != perUpdateWrites.end() && !stale)
        stale = {var, it->second};
    });
    if (stale)
      return fail("program: step " + llvm::Twine(s) + " runs every micro-batch but reads " +
                  varName(stale->first) + ", which step " + llvm::Twine(stale->second) +
                  " writes once per weight update");
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error MachineProgram::verify(int64_t numTiles) const {
  if (numTiles < 1)
    return fail("program: the machine has no tiles");
  return verifyProgram(*this, numTiles);
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//
//
// {"variables": [{"name", "dtype", "shape", "kind", "base"?, "weight"?,
//                 "mapping"?: {"chunks", "strides", "first"}}],
//  "compute_sets": [{"name", "location", "loops", "output_loops",
//                    "inputs": [{"var", "coeffs", "consts", "extents"?} |
//                               {"var", "full": true}],
//                    "outputs", "macs",
//                    "kernels": [{"symbol", "sizes", "cycles", "code_bytes"}]}],
//  "copies": [{"src", "dst", "offsets", "sizes", "dst_offsets", "location"}],
//  "steps": [{"compute": i} | {"copy": i}],
//  "inputs": [...], "outputs": [...]}

namespace {

json::Array ints(llvm::ArrayRef<int64_t> v) { return json::Array(v); }

/// Reads a program, remembering the first problem with the path of the
/// field at fault ("variables[3].mapping.chunks[1]").
class Reader {
public:
  bool failed() const { return !error_.empty(); }
  llvm::Error takeError() { return fail("malformed program: " + error_); }

  void problem(const std::string &path, const llvm::Twine &what) {
    if (error_.empty())
      error_ = path + " " + what.str();
  }

  const json::Object *object(const json::Value *v, const std::string &path) {
    const json::Object *o = v ? v->getAsObject() : nullptr;
    if (!o)
      problem(path, "must be an object");
    return o;
  }
  const json::Array *array(const json::Object &o, StringRef key, const std::string &path,
                           bool optional = false) {
    const json::Value *v = o.get(key);
    if (!v && optional)
      return nullptr;
    const json::Array *a = v ? v->getAsArray() : nullptr;
    if (!a)
      problem(path + "." + key.str(), v ? "must be an array" : "is missing");
    return a;
  }
  int64_t integer(const json::Value *v, const std::string &path) {
    std::optional<int64_t> i = v ? v->getAsInteger() : std::nullopt;
    if (!i) {
      problem(path, v ? "must be an integer" : "is missing");
      return 0;
    }
    return *i;
  }
  int64_t integer(const json::Object &o, StringRef key, const std::string &path,
                  std::optional<int64_t> defaultValue = std::nullopt) {
    const json::Value *v = o.get(key);
    if (!v && defaultValue)
      return *defaultValue;
    return integer(v, path + "." + key.str());
  }
  std::string string(const json::Object &o, StringRef key, const std::string &path,
                     bool optional = false) {
    const json::Value *v = o.get(key);
    if (!v && optional)
      return "";
    std::optional<StringRef> s = v ? v->getAsString() : std::nullopt;
    if (!s) {
      problem(path + "." + key.str(), v ? "must be a string" : "is missing");
      return "";
    }
    return s->str();
  }
  std::vector<int64_t> integers(const json::Object &o, StringRef key,
                                const std::string &path) {
    std::vector<int64_t> out;
    if (const json::Array *a = array(o, key, path))
      for (size_t i = 0; i < a->size(); ++i)
        out.push_back(integer(&(*a)[i], path + "." + key.str() + "[" +
                                            std::to_string(i) + "]"));
    return out;
  }

private:
  std::string error_;
};

std::string at(StringRef list, size_t i) {
  return list.str() + "[" + std::to_string(i) + "]";
}

} // namespace

json::Value MachineProgram::toJSON() const {
  json::Array vars;
  for (const Variable &v : variables) {
    json::Object o{{"name", v.name},
                   {"dtype", dtypeName(v.dtype)},
                   {"shape", ints(v.shape)},
                   {"kind", varKindName(v.kind)}};
    if (v.isPadded()) {
      o["pad_low"] = ints(v.padLow);
      o["pad_high"] = ints(v.padHigh);
      o["pad_bits"] = static_cast<int64_t>(v.padBits);
    }
    if (v.copies != 1)
      o["copies"] = v.copies;
    if (v.base >= 0) {
      o["base"] = v.base;
    } else {
      json::Object m{{"chunks", ints(v.mapping.chunks)},
                     {"strides", ints(v.mapping.tileStrides)},
                     {"first", v.mapping.firstTile}};
      if (v.mapping.isMirrored()) {
        m["mirror_counts"] = ints(v.mapping.mirrorCounts);
        m["mirror_strides"] = ints(v.mapping.mirrorStrides);
      }
      o["mapping"] = std::move(m);
    }
    if (v.weight >= 0)
      o["weight"] = v.weight;
    vars.push_back(std::move(o));
  }
  json::Array sets;
  for (const ComputeSet &cs : computeSets) {
    json::Array ins, kernelList;
    for (const ComputeSet::Operand &in : cs.inputs) {
      json::Object o{{"var", in.var}};
      if (in.map.full) {
        o["full"] = true;
      } else {
        json::Array rows;
        for (const auto &row : in.map.coeffs)
          rows.push_back(ints(row));
        o["coeffs"] = std::move(rows);
        o["consts"] = ints(in.map.consts);
        if (!in.map.extents.empty())
          o["extents"] = ints(in.map.extents);
      }
      ins.push_back(std::move(o));
    }
    for (const Kernel &k : cs.kernels)
      kernelList.push_back(json::Object{{"symbol", k.symbol},
                                        {"sizes", ints(k.pieceSizes)},
                                        {"cycles", k.cycles},
                                        {"code_bytes", k.codeBytes}});
    sets.push_back(json::Object{{"name", cs.name},
                                {"location", cs.location},
                                {"loops", ints(cs.loopRanges)},
                                {"output_loops", ints(cs.outputLoops)},
                                {"inputs", std::move(ins)},
                                {"outputs", ints(cs.outputs)},
                                {"kernels", std::move(kernelList)},
                                {"macs", cs.macs}});
  }
  json::Array copyList;
  for (const Copy &c : copies)
    copyList.push_back(json::Object{{"src", c.src},
                                    {"dst", c.dst},
                                    {"offsets", ints(c.srcRegion.offsets)},
                                    {"sizes", ints(c.srcRegion.sizes)},
                                    {"dst_offsets", ints(c.dstOffsets)},
                                    {"location", c.location}});
  json::Array reduceList;
  for (const AllReduce &a : allReduces)
    reduceList.push_back(json::Object{
        {"srcs", ints(a.srcs)}, {"dsts", ints(a.dsts)}, {"location", a.location}});
  json::Array stepList;
  for (const Step &s : steps) {
    json::Object step{{s.kind == Step::Kind::Compute ? "compute"
                       : s.kind == Step::Kind::Copy  ? "copy"
                                                     : "all_reduce",
                       s.index}};
    if (s.perUpdate)
      step["per_update"] = true;
    if (s.backward)
      step["backward"] = true;
    stepList.push_back(std::move(step));
  }
  return json::Object{{"variables", std::move(vars)},
                      {"compute_sets", std::move(sets)},
                      {"copies", std::move(copyList)},
                      {"all_reduces", std::move(reduceList)},
                      {"steps", std::move(stepList)},
                      {"inputs", ints(inputs)},
                      {"outputs", ints(outputs)},
                      {"resident_inputs", residentInputs}};
}

Expected<MachineProgram> MachineProgram::fromJSON(const json::Value &value) {
  Reader r;
  MachineProgram p;
  const json::Object *root = r.object(&value, "program");
  if (!root)
    return r.takeError();

  if (const json::Array *vars = r.array(*root, "variables", "program"))
    for (size_t i = 0; i < vars->size() && !r.failed(); ++i) {
      std::string path = at("variables", i);
      const json::Object *o = r.object(&(*vars)[i], path);
      if (!o)
        break;
      Variable v;
      v.name = r.string(*o, "name", path);
      std::string dtype = r.string(*o, "dtype", path);
      if (!r.failed()) {
        auto d = parseDType(dtype);
        if (!d) {
          llvm::consumeError(d.takeError());
          r.problem(path + ".dtype", "is not an element type: '" + dtype + "'");
        } else {
          v.dtype = *d;
        }
      }
      v.shape = r.integers(*o, "shape", path);
      std::string kind = r.string(*o, "kind", path);
      if (kind == "input")
        v.kind = VarKind::Input;
      else if (kind == "weight")
        v.kind = VarKind::Weight;
      else if (kind == "activation")
        v.kind = VarKind::Activation;
      else if (kind == "constant")
        v.kind = VarKind::Constant;
      else
        r.problem(path + ".kind", "must be input, weight, activation or constant");
      v.base = r.integer(*o, "base", path, -1);
      v.weight = r.integer(*o, "weight", path, -1);
      v.copies = r.integer(*o, "copies", path, 1);
      if (v.copies < 1 || v.copies > 1024)
        r.problem(path + ".copies", "must be 1 to 1024");
      if (o->get("pad_low")) {
        v.padLow = r.integers(*o, "pad_low", path);
        v.padHigh = r.integers(*o, "pad_high", path);
        v.padBits = static_cast<uint64_t>(r.integer(*o, "pad_bits", path, 0));
      }
      if (v.base < 0) {
        const json::Object *m = r.object(o->get("mapping"), path + ".mapping");
        if (!m)
          break;
        v.mapping.shape = v.shape;
        v.mapping.chunks = r.integers(*m, "chunks", path + ".mapping");
        v.mapping.tileStrides = r.integers(*m, "strides", path + ".mapping");
        v.mapping.firstTile = r.integer(*m, "first", path + ".mapping");
        if (m->get("mirror_counts") || m->get("mirror_strides")) {
          v.mapping.mirrorCounts = r.integers(*m, "mirror_counts", path + ".mapping");
          v.mapping.mirrorStrides = r.integers(*m, "mirror_strides", path + ".mapping");
        }
      }
      p.variables.push_back(std::move(v));
    }

  if (const json::Array *sets = r.array(*root, "compute_sets", "program"))
    for (size_t c = 0; c < sets->size() && !r.failed(); ++c) {
      std::string path = at("compute_sets", c);
      const json::Object *o = r.object(&(*sets)[c], path);
      if (!o)
        break;
      ComputeSet cs;
      cs.name = r.string(*o, "name", path);
      cs.location = r.string(*o, "location", path, /*optional=*/true);
      cs.loopRanges = r.integers(*o, "loops", path);
      cs.outputLoops = r.integers(*o, "output_loops", path);
      cs.outputs = r.integers(*o, "outputs", path);
      cs.macs = r.integer(*o, "macs", path, 0);
      if (const json::Array *ins = r.array(*o, "inputs", path))
        for (size_t i = 0; i < ins->size() && !r.failed(); ++i) {
          std::string ipath = path + "." + at("inputs", i);
          const json::Object *io = r.object(&(*ins)[i], ipath);
          if (!io)
            break;
          ComputeSet::Operand in;
          in.var = r.integer(*io, "var", ipath);
          in.map.full = io->getBoolean("full").value_or(false);
          if (!in.map.full) {
            if (const json::Array *rows = r.array(*io, "coeffs", ipath))
              for (size_t j = 0; j < rows->size() && !r.failed(); ++j) {
                std::string rpath = ipath + "." + at("coeffs", j);
                const json::Array *row = (*rows)[j].getAsArray();
                if (!row) {
                  r.problem(rpath, "must be an array");
                  break;
                }
                std::vector<int64_t> coeffs;
                for (size_t k = 0; k < row->size(); ++k)
                  coeffs.push_back(r.integer(&(*row)[k], rpath + "[" + std::to_string(k) + "]"));
                in.map.coeffs.push_back(std::move(coeffs));
              }
            in.map.consts = r.integers(*io, "consts", ipath);
            if (io->get("extents"))
              in.map.extents = r.integers(*io, "extents", ipath);
          }
          cs.inputs.push_back(std::move(in));
        }
      if (const json::Array *ks = r.array(*o, "kernels", path))
        for (size_t k = 0; k < ks->size() && !r.failed(); ++k) {
          std::string kpath = path + "." + at("kernels", k);
          const json::Object *ko = r.object(&(*ks)[k], kpath);
          if (!ko)
            break;
          Kernel kern;
          kern.symbol = r.string(*ko, "symbol", kpath);
          kern.pieceSizes = r.integers(*ko, "sizes", kpath);
          kern.cycles = r.integer(*ko, "cycles", kpath, 0);
          kern.codeBytes = r.integer(*ko, "code_bytes", kpath, 0);
          cs.kernels.push_back(std::move(kern));
        }
      p.computeSets.push_back(std::move(cs));
    }

  if (const json::Array *cps = r.array(*root, "copies", "program"))
    for (size_t c = 0; c < cps->size() && !r.failed(); ++c) {
      std::string path = at("copies", c);
      const json::Object *o = r.object(&(*cps)[c], path);
      if (!o)
        break;
      Copy cp;
      cp.src = r.integer(*o, "src", path);
      cp.dst = r.integer(*o, "dst", path);
      cp.srcRegion = Box(r.integers(*o, "offsets", path), r.integers(*o, "sizes", path));
      cp.dstOffsets = r.integers(*o, "dst_offsets", path);
      cp.location = r.string(*o, "location", path, /*optional=*/true);
      p.copies.push_back(std::move(cp));
    }

  // Absent in programs without replicas (and in those written before).
  if (root->get("all_reduces"))
    if (const json::Array *ars = r.array(*root, "all_reduces", "program"))
      for (size_t a = 0; a < ars->size() && !r.failed(); ++a) {
        std::string path = at("all_reduces", a);
        const json::Object *o = r.object(&(*ars)[a], path);
        if (!o)
          break;
        AllReduce ar;
        ar.srcs = r.integers(*o, "srcs", path);
        ar.dsts = r.integers(*o, "dsts", path);
        ar.location = r.string(*o, "location", path, /*optional=*/true);
        p.allReduces.push_back(std::move(ar));
      }

  if (const json::Array *steps = r.array(*root, "steps", "program"))
    for (size_t s = 0; s < steps->size() && !r.failed(); ++s) {
      std::string path = at("steps", s);
      const json::Object *o = r.object(&(*steps)[s], path);
      if (!o)
        break;
      if (o->get("compute"))
        p.steps.push_back({Step::Kind::Compute, r.integer(*o, "compute", path)});
      else if (o->get("copy"))
        p.steps.push_back({Step::Kind::Copy, r.integer(*o, "copy", path)});
      else if (o->get("all_reduce"))
        p.steps.push_back({Step::Kind::AllReduce, r.integer(*o, "all_reduce", path)});
      else
        r.problem(path, "must be {\"compute\": index}, {\"copy\": index} or "
                        "{\"all_reduce\": index}");
      if (const json::Value *flag = o->get("per_update"); flag && !r.failed()) {
        if (!flag->getAsBoolean())
          r.problem(path + ".per_update", "must be true or false");
        else
          p.steps.back().perUpdate = *flag->getAsBoolean();
      }
      if (const json::Value *flag = o->get("backward"); flag && !r.failed()) {
        if (!flag->getAsBoolean())
          r.problem(path + ".backward", "must be true or false");
        else
          p.steps.back().backward = *flag->getAsBoolean();
      }
    }

  if (!r.failed())
    p.inputs = r.integers(*root, "inputs", "program");
  if (!r.failed())
    p.outputs = r.integers(*root, "outputs", "program");
  if (r.failed())
    return r.takeError();
  p.residentInputs = root->getInteger("resident_inputs").value_or(0);
  if (p.residentInputs < 0 || p.residentInputs > static_cast<int64_t>(p.inputs.size()))
    return llvm::createStringError("program: resident_inputs " +
                                   llvm::Twine(p.residentInputs) + " is not in [0, " +
                                   llvm::Twine(p.inputs.size()) + "]");
  // Indices and ranks are checked here so that no later use of a parsed
  // program can index out of bounds; tile ranges need the machine (verify).
  if (auto err = verifyProgram(p, std::nullopt))
    return std::move(err);
  return p;
}

} // namespace tessera::runtime
