//===- IPUModel.cpp - execute a tile-mapped program on a software IPU ----===//
//
// Tile memories are one anonymous mapping of numTiles * bytesPerTile bytes
// (reserved, not committed: pages are touched only where the plan places
// data). Every address a step touches comes from the memory plan and the
// pieces' run decomposition (forEachRun), the same functions the compiler
// planned with -- but for weights, constants and the activations that live
// only within a run: on the host those sit in a compact staging area past
// the tiles (planStaging), where they stay in the host's caches or stream
// through them; the plan still gives them their bytes in the tiles' memory,
// so what fits and what a run computes are the same.
//
// A compute step is the exchange phase (each vertex gathers the operand
// regions it cannot read in place into its receive buffer), a barrier, and
// the compute phase (each vertex calls its kernel on its tile's buffers).
// Vertices on different tiles write disjoint memory, so both phases run on
// the host's threads without locks. A copy step writes each destination run
// from the matching source runs, also in parallel.
//
// Addresses are fixed once tile memory is reserved, so create() resolves
// every step into tables -- the exchange's row copies (merged where rows
// follow each other) and each vertex's kernel entry, loop offsets and
// buffer addresses -- and a run only walks the tables: no region arithmetic
// or allocation per step.
//
// Replicas each have their own tile memory (and staging area), one after
// another in the same reservation: the tables hold offsets, so a replica's
// step runs them from its own base. Replicas run each step in turn; an
// all-reduce step sums its variables over the replicas' memories.
//
// Cycles depend only on the program and the target, so they are counted once
// in create(), not per run.
//
//===----------------------------------------------------------------------===//

#include "tessera/Runtime/IPUModel.h"
#include "tessera/Support/Error.h"
#include "tessera/Runtime/Instances.h"

#include "tessera/Runtime/JIT.h"
#include "tessera/Runtime/PhasePool.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/Errno.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/xxhash.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <tuple>

using llvm::Expected;
namespace json = llvm::json;

namespace tessera::runtime {

namespace {

/// Bytes of each padding area (see Impl::paddingAreas): a row of padding
/// longer than this is copied in parts.
constexpr int64_t kPaddingAreaBytes = 4096;

Box wholeBox(const std::vector<int64_t> &shape) {
  return Box{std::vector<int64_t>(shape.size(), 0), shape};
}

/// A strided memref descriptor as MLIR's C interface lays it out:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}, row-major.
void appendDescriptor(llvm::SmallVectorImpl<int64_t> &d, const void *data,
                      llvm::ArrayRef<int64_t> sizes) {
  d.push_back(reinterpret_cast<int64_t>(data));
  d.push_back(reinterpret_cast<int64_t>(data));
  d.push_back(0);
  d.insert(d.end(), sizes.begin(), sizes.end());
  size_t first = d.size();
  d.resize(first + sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i)
    d[first + i] = d[first + i + 1] * sizes[i + 1];
}

/// Appends a row copy, extending the last one where the new rows continue
/// it: contiguously in both buffers, or as more rows at the same strides.
/// Entries before `mergeFrom` are left alone (another vertex's).
void appendRows(std::vector<RowCopy> &table, RowCopy r, size_t mergeFrom = 0) {
  if (r.rows == 1 && table.size() > mergeFrom) {
    RowCopy &last = table.back();
    if (last.rows == 1 && last.from + last.rowBytes == r.from &&
        last.to + last.rowBytes == r.to) {
      last.rowBytes += r.rowBytes;
      return;
    }
    if (last.rowBytes == r.rowBytes) {
      if (last.rows == 1) {
        last.fromStride = r.from - last.from;
        last.toStride = r.to - last.to;
        last.rows = 2;
        return;
      }
      if (r.from == last.from + last.rows * last.fromStride &&
          r.to == last.to + last.rows * last.toStride) {
        ++last.rows;
        return;
      }
    }
  }
  table.push_back(r);
}

/// Splits items [0, n) into consecutive chunks of about equal cost: enough
/// of them to balance `threads` threads, none cheaper than `minCost` (a
/// thread's wake-up is not worth less).
std::vector<size_t> chunkEnds(size_t n, llvm::function_ref<int64_t(size_t)> cost,
                              unsigned threads, int64_t minCost) {
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i)
    total += cost(i);
  int64_t target = std::max<int64_t>(minCost, total / (8 * std::max(threads, 1u)));
  std::vector<size_t> ends;
  int64_t acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += cost(i);
    if (acc >= target) {
      ends.push_back(i + 1);
      acc = 0;
    }
  }
  if (n > 0 && (ends.empty() || ends.back() != n))
    ends.push_back(n);
  return ends;
}

/// A compute step's vertices, resolved: per vertex its kernel's entry,
/// `words` int64s -- the loop offsets, then per operand (inputs, then
/// outputs) its buffer's offset in tile memory (or, negative, ~offset into
/// the running thread's scratch buffer) -- and its operands' memref
/// descriptors but for their addresses: one of the step's few `layouts`
/// (its kernel's operand shapes), operand k's at `descriptorAt[k]`.
struct VertexTable {
  /// Whether each vertex's exchange runs with it, just before it (see
  /// computeTable); then the rows land in a host thread's scratch buffer of
  /// `scratchBytes`, where the vertex reads them. Per vertex v and input i,
  /// at [v * numInputs + i]: `receiveEnds` ends the input's rows in the
  /// step's exchange table (they start where the previous entry ends), and
  /// `receive` says whether the thread copies them: not when its scratch
  /// already holds that region, received for an earlier vertex of the same
  /// chunk.
  bool fused = false;
  size_t numInputs = 0;
  std::vector<size_t> receiveEnds;
  std::vector<uint8_t> receive;
  int64_t scratchBytes = 0;
  unsigned numLoops = 0;
  size_t words = 0;
  std::vector<size_t> descriptorAt;
  size_t descriptorWords = 0;
  std::vector<std::vector<int64_t>> layouts;
  std::vector<uint32_t> layoutOf;
  std::vector<PackedEntry> entries;
  std::vector<int64_t> data;
  /// Per vertex v and operand k (inputs, then outputs), at
  /// [v * descriptorAt.size() + k]: the bytes of the operand's region, read
  /// or written from the address in `data` (see prefetchOperands); a
  /// region fits in a tile, so 32 bits hold it.
  std::vector<uint32_t> operandBytes;
  std::vector<size_t> chunks;
};

/// What one step does, resolved to addresses (offsets into tile memory).
struct StepTable {
  std::vector<RowCopy> exchange;
  std::vector<size_t> exchangeChunks;
  VertexTable vertices; ///< empty for a copy step
  /// Why the step cannot run (a kernel that does not take a vertex's
  /// regions), or empty.
  std::string error;
};

} // namespace

struct IPUModel::Impl {
  const Executable &executable;
  MachineProgram program;
  target::IPUTarget target;
  MemoryPlan plan;
  /// The replica being run's memory: its tiles, padding and staging area.
  char *memory = nullptr;
  size_t memoryBytes = 0; ///< per replica
  /// The reservation holding every replica's memory, one after another.
  char *reservation = nullptr;
  int64_t replicas = 1; ///< run here: the executable's, or an instance's share
  /// The other instances, when this process runs a share of the replicas:
  /// all-reduces span them.
  std::unique_ptr<InstanceGroup> instances;
  void selectReplica(int64_t r) { memory = reservation + r * memoryBytes; }
  /// Padded views' padding: per (element bytes, element bits), the offset
  /// from `memory` of kPaddingAreaBytes holding that element over and over,
  /// past the tiles' memory. Receiving padding copies rows from there.
  std::map<std::pair<int64_t, uint64_t>, int64_t> paddingAreas;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  llvm::StringMap<PackedEntry> entries;
  /// Each kernel's signature, read from its code.
  llvm::StringMap<KernelSignature> signatures;
  CostSummary cost;
  std::unique_ptr<PhasePool> pool;
  std::vector<StepTable> tables; ///< one per program step
  /// Host wall time each step's exchange and compute phases took, summed
  /// over `iterations` device iterations (the profile's host_* figures: where
  /// the simulation itself spends its time).
  std::vector<double> hostExchangeSeconds, hostComputeSeconds;
  int64_t iterations = 0;
  /// Micro-batches of the current weight update run so far, as the
  /// program's own counter (StateInfo::countsMicroBatches) has them.
  int64_t microBatch = 0;

  explicit Impl(const Executable &e) : executable(e) {}
  ~Impl() {
    if (reservation)
      munmap(reservation, memoryBytes * replicas);
  }

  /// Where a staged variable lives on the host (see planStaging): its piece
  /// on tile t at `at` + slot[t - firstTile] * pieceStride bytes from
  /// `memory` (the pieces in tile order).
  struct Staged {
    int64_t at = -1; ///< -1: in its tiles' memory
    int64_t firstTile = 0, pieceStride = 0;
    std::vector<uint32_t> slot;
  };
  std::vector<Staged> staged; ///< per variable (those with storage)
  int64_t stagingBytes = 0;

  char *address(int64_t tile, int64_t offset) {
    return memory + tile * plan.bytesPerTile + offset;
  }
  /// Where element `pieceOffset` of `var`'s piece on `tile` is stored.
  char *element(int64_t var, int64_t tile, int64_t pieceOffset) {
    int64_t s = program.storageIndex(var);
    int64_t bytes = pieceOffset * program.variables[var].elementBytes();
    if (const Staged &st = staged[s]; st.at >= 0)
      return memory + st.at + st.slot[tile - st.firstTile] * st.pieceStride + bytes;
    return address(tile, plan.variableOffset(s, tile)) + bytes;
  }
  /// Host buffer (region row-major) -> tiles.
  void scatter(int64_t var, const Box &region, const char *from) {
    int64_t eb = program.variables[var].elementBytes();
    Box inStorage;
    if (!forEachOverlap(program, var, region, inStorage, [&](const Overlap &o) {
          copyBox(from, inStorage, element(var, o.tile, 0), o.piece, o.part, eb);
        }))
      forEachRun(program, var, region, [&](const Run &r) {
        std::memcpy(element(var, r.tile, r.pieceOffset), from + r.regionOffset * eb,
                    r.count * eb);
      });
    copyToMirrors(var);
  }
  /// A mirrored variable's first copy -> its other copies (after a write).
  void copyToMirrors(int64_t var) {
    const TileMapping &m = program.storage(var).mapping;
    if (!m.isMirrored())
      return;
    int64_t eb = program.variables[var].elementBytes(), pieces = m.numPieces(), i = 0;
    std::vector<int64_t> firstCopy;
    m.forEachPiece([&](int64_t tile, const Box &box) {
      if (i++ < pieces)
        firstCopy.push_back(tile);
      else
        std::memcpy(element(var, tile, 0), element(var, firstCopy[(i - 1) % pieces], 0),
                    box.numElements() * eb);
    });
  }
  /// Tiles -> a buffer holding the region row-major.
  void gather(int64_t var, const Box &region, char *to) {
    int64_t eb = program.variables[var].elementBytes();
    // Piece by piece where the region is a box of the storage: one strided
    // copy per piece instead of one call per run.
    Box inStorage;
    if (forEachOverlap(program, var, region, inStorage, [&](const Overlap &o) {
          copyBox(element(var, o.tile, 0), o.piece, to, inStorage, o.part, eb);
        }))
      return;
    forEachRun(program, var, region, [&](const Run &r) {
      std::memcpy(to + r.regionOffset * eb, element(var, r.tile, r.pieceOffset),
                  r.count * eb);
    });
  }

  struct Vertex {
    int64_t tile;
    Box piece;
  };
  std::vector<Vertex> vertices(const ComputeSet &cs) const {
    std::vector<Vertex> vs;
    program.variables[cs.outputs[0]].mapping.forEachPiece(
        [&](int64_t tile, const Box &piece) {
          if (piece.numElements() > 0)
            vs.push_back({tile, piece});
        });
    return vs;
  }

  Expected<std::vector<Tensor>> runIteration(llvm::ArrayRef<Tensor> inputs);
  /// Appends the row copies that bring `region` of `var` into the buffer at
  /// `toOffset` (into tile memory, or into the scratch buffer for a fused
  /// step), row-major, merging only with rows from `mergeFrom` on.
  void gatherRows(int64_t var, const Box &region, int64_t toOffset,
                  std::vector<RowCopy> &rows, size_t mergeFrom);
  /// Which variables live in the staging area (sets `staged`, offsets from
  /// the area's start); returns the area's bytes.
  int64_t planStaging();
  StepTable computeTable(int64_t c);
  StepTable copyTable(const Copy &copy);
  /// Every replica's `dsts[i]` = the sum over the replicas (of every
  /// instance) of `srcs[i]`.
  llvm::Error runAllReduce(const AllReduce &reduce);
  void runExchange(const StepTable &t);
  void runVertices(const VertexTable &t, llvm::ArrayRef<RowCopy> exchange);
};

void IPUModel::Impl::gatherRows(int64_t var, const Box &region, int64_t toOffset,
                                std::vector<RowCopy> &rows, size_t mergeFrom) {
  const Variable &v = program.variables[var];
  int64_t eb = v.elementBytes();
  if (v.isPadded()) {
    // The interior's runs from their tiles, the padding from its area.
    int64_t area = paddingAreas.at({eb, v.padBits});
    forEachRun(program, var, region, [&](const Run &r) {
      int64_t to = toOffset + r.regionOffset * eb;
      if (r.tile != kPaddingTile) {
        appendRows(rows, RowCopy{element(var, r.tile, r.pieceOffset) - memory, to,
                                 r.count * eb, 1, 0, 0}, mergeFrom);
        return;
      }
      int64_t maxBytes = kPaddingAreaBytes / eb * eb;
      for (int64_t done = 0, bytes = r.count * eb; done < bytes; done += maxBytes)
        appendRows(rows, RowCopy{area, to + done, std::min(maxBytes, bytes - done), 1, 0, 0},
                   mergeFrom);
    });
    return;
  }
  Box inStorage;
  if (forEachOverlap(program, var, region, inStorage, [&](const Overlap &o) {
        int64_t from = element(var, o.tile, 0) - memory;
        forEachRowCopy(o.piece, inStorage, o.part, eb, [&](RowCopy r) {
          r.from += from;
          r.to += toOffset;
          appendRows(rows, r, mergeFrom);
        });
      }))
    return;
  forEachRun(program, var, region, [&](const Run &r) {
    appendRows(rows,
               RowCopy{element(var, r.tile, r.pieceOffset) - memory,
                       toOffset + r.regionOffset * eb, r.count * eb, 1, 0, 0},
               mergeFrom);
  });
}

namespace {
/// Variables larger than this stay in their tiles' memory: the staging
/// area is there to be reused while it is in the host's caches.
constexpr int64_t kMaxStagedBytes = 16 << 20;
} // namespace

int64_t IPUModel::Impl::planStaging() {
  // Tile memory is large, and a step writes its outputs at their own
  // offsets on up to every tile, 624 KiB apart: on the host, most of those
  // writes miss the caches, so each line is read from DRAM, written, and
  // later written back. Yet an activation defined and used within one run
  // (written first, by a step that does not read it) is seen by no one but
  // the steps that access it. On the host, such a variable lives in a
  // staging area instead: its pieces side by side, at a place no variable
  // live at any of the same steps takes -- the lowest such place, so that
  // the area's first bytes are reused by step after step and stay in the
  // host's caches. Weights and constants follow, each one's pieces side by
  // side. The memory plan still places every variable in its tiles'
  // memory, as on the chip; what a run computes is the same.
  size_t n = program.variables.size();
  staged.assign(n, Staged{});
  if (const char *off = std::getenv("TESSERA_NO_STAGING"); off && *off && *off != '0')
    return 0; // every variable in its tiles' memory (to rule staging out)
  // Eligible: written before it is read (not read where first written: an
  // update in place), and not the program's input or output.
  std::vector<VariableUses> uses = variableUses(program);
  std::vector<bool> eligible(n);
  for (size_t v = 0; v < n; ++v)
    eligible[v] = uses[v].firstWrite >= 0 &&
                  (uses[v].firstRead < 0 || uses[v].firstRead > uses[v].firstWrite);
  for (int64_t v : program.inputs)
    eligible[program.storageIndex(v)] = false;
  for (int64_t v : program.outputs)
    eligible[program.storageIndex(v)] = false;
  auto first = [&](int64_t v) { return uses[v].firstWrite; };
  auto last = [&](int64_t v) { return uses[v].lastUse; };
  std::vector<int64_t> order;
  for (size_t v = 0; v < n; ++v) {
    const Variable &var = program.variables[v];
    if (var.base < 0 && var.kind == VarKind::Activation && eligible[v])
      order.push_back(v);
  }
  llvm::stable_sort(order, [&](int64_t a, int64_t b) { return first(a) < first(b); });
  // A variable's pieces side by side, in tile order, 64-byte aligned.
  auto layout = [&](const Variable &var) {
    std::vector<int64_t> tiles;
    var.mapping.forEachPiece([&](int64_t tile, const Box &piece) {
      if (piece.numElements() > 0)
        tiles.push_back(tile);
    });
    llvm::sort(tiles);
    Staged st;
    st.pieceStride = (var.mapping.maxPieceElements() * var.elementBytes() + 63) / 64 * 64;
    if (!tiles.empty()) {
      st.firstTile = tiles.front();
      st.slot.assign(tiles.back() - tiles.front() + 1, 0);
      for (size_t k = 0; k < tiles.size(); ++k)
        st.slot[tiles[k] - st.firstTile] = k;
    }
    int64_t bytes = static_cast<int64_t>(tiles.size()) * st.pieceStride;
    return std::make_pair(std::move(st), bytes);
  };
  struct Placed {
    int64_t first, last, at, end;
  };
  std::vector<Placed> placed;
  int64_t areaBytes = 0;
  for (int64_t v : order) {
    auto [st, bytes] = layout(program.variables[v]);
    if (bytes == 0 || bytes > kMaxStagedBytes)
      continue;
    // The lowest offset clear of every placed variable live at once.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (const Placed &p : placed)
      if (p.first <= last(v) && first(v) <= p.last)
        taken.emplace_back(p.at, p.end);
    llvm::sort(taken);
    int64_t at = 0;
    for (auto [lo, hi] : taken) {
      if (at + bytes <= lo)
        break;
      at = std::max(at, hi);
    }
    placed.push_back({first(v), last(v), at, at + bytes});
    st.at = at;
    staged[v] = std::move(st);
    areaBytes = std::max(areaBytes, at + bytes);
  }
  // Then the weights and constants, one after another: a step reads its
  // weights as one stream instead of pieces 624 KiB apart.
  for (size_t v = 0; v < n; ++v) {
    const Variable &var = program.variables[v];
    if (var.base >= 0 || (var.kind != VarKind::Weight && var.kind != VarKind::Constant))
      continue;
    auto [st, bytes] = layout(var);
    if (bytes == 0)
      continue;
    st.at = areaBytes;
    staged[v] = std::move(st);
    areaBytes += bytes;
  }
  return areaBytes;
}

namespace {
/// Cost units for balancing: bytes for copies; for vertices their estimated
/// cycles on the target plus a call's overhead.
constexpr int64_t kMinChunkBytes = 32 * 1024;
constexpr int64_t kVertexCallCost = 400;
constexpr int64_t kMinChunkCycles = 20000;

int64_t copyCost(const RowCopy &r) { return r.rowBytes * r.rows + 64; }
/// Copy cost units per vertex cycle, to balance fused steps (about what the
/// host copies while the target computes a cycle of a vertex).
constexpr int64_t kCopyBytesPerCycle = 4;
/// Scratch a fused step's most repeated input may take for the regions a
/// thread keeps at once (a host core's L2 holds them), and their count.
constexpr int64_t kScratchSlotBytes = 256 * 1024;
constexpr int64_t kMaxSlots = 8;
} // namespace

StepTable IPUModel::Impl::computeTable(int64_t c) {
  const ComputeSet &cs = program.computeSets[c];
  StepTable t;
  VertexTable &vt = t.vertices;
  vt.numLoops = cs.loopRanges.size();
  vt.numInputs = cs.inputs.size();
  // The packed entry takes pointers to each loop offset and to a memref
  // descriptor per operand: {allocated, aligned, offset, sizes, strides}.
  std::vector<int64_t> ranks;
  for (const auto &in : cs.inputs)
    ranks.push_back(program.variables[in.var].shape.size());
  for (int64_t out : cs.outputs)
    ranks.push_back(program.variables[out].shape.size());
  vt.words = vt.numLoops + ranks.size();
  for (int64_t rank : ranks) {
    vt.descriptorAt.push_back(vt.descriptorWords);
    vt.descriptorWords += 3 + 2 * rank;
  }
  std::map<std::vector<int64_t>, uint32_t> layoutIndex;
  // The BSP order is every vertex's exchange, then every vertex. Each
  // vertex's exchange may instead run just before it, on the same thread,
  // while what it received is still in the host's cache, when no vertex
  // writes what another's exchange reads: the step's outputs are other
  // variables than its inputs (the memory plan keeps variables live at the
  // same step apart), so nothing is updated in place.
  //
  // A fused vertex also receives into its host thread's scratch buffer
  // rather than its tile's receive buffers: those are written and read only
  // by this vertex in this step (the memory plan gives them this step's
  // lifetime), so no later step can tell; the plan still reserves them, and
  // the scratch, reused by every vertex the thread runs, stays in the host's
  // cache instead of being fetched and written back for each tile. The
  // scratch holds each received input's largest region, one after another.
  vt.fused = llvm::none_of(cs.inputs, [&](const auto &in) {
    return llvm::any_of(cs.outputs, [&](int64_t out) {
      return program.storageIndex(out) == program.storageIndex(in.var);
    });
  });
  // Each vertex's operand regions, and for a fused step which distinct
  // region of its input each vertex receives (-1: none, it reads in place).
  //
  // A fused vertex also reads in place a region another tile holds dense
  // (a weight block that is a piece, or rows of one): as it reads its own
  // piece, from where the region is, instead of copying it into the
  // scratch first. Nothing writes it during the step (see above). Such
  // regions keep their ids: the vertices sharing one still run one after
  // another, so the host's caches still hold it for the next.
  size_t numInputs = cs.inputs.size();
  std::vector<Vertex> vs = vertices(cs);
  std::vector<Box> regions(vs.size() * numInputs);
  std::vector<int32_t> ids(vs.size() * numInputs, -1);
  std::vector<int64_t> inPlace(vs.size() * numInputs, -1); // offset into memory
  std::vector<std::map<std::vector<int64_t>, int32_t>> distinct(numInputs);
  std::vector<int64_t> repeatedBytes(numInputs, 0);
  for (size_t v = 0; v < vs.size(); ++v) {
    Box loops = cs.loopBox(vs[v].piece);
    for (size_t i = 0; i < numInputs; ++i) {
      const auto &in = cs.inputs[i];
      Box &region = regions[v * numInputs + i];
      region = in.map.region(loops, program.variables[in.var].shape);
      if (!vt.fused || isLocalPiece(program, in.var, region, vs[v].tile))
        continue;
      if (std::optional<PiecePart> at = denseRegionOnOneTile(program, in.var, region))
        inPlace[v * numInputs + i] = element(in.var, at->tile, at->pieceOffset) - memory;
      std::vector<int64_t> key(region.offsets.begin(), region.offsets.end());
      key.insert(key.end(), region.sizes.begin(), region.sizes.end());
      auto [it, added] = distinct[i].try_emplace(std::move(key), distinct[i].size());
      ids[v * numInputs + i] = it->second;
      if (!added)
        repeatedBytes[i] += region.numElements() * program.variables[in.var].elementBytes();
    }
  }
  // Vertices that receive the same region of an input (tiles sharing a
  // weight block, or an activation block) run one after another, so that a
  // thread receives it once into its scratch and the next vertices read it
  // there. They write disjoint memory, so any order is the BSP order.
  //
  // The input whose repeats carry the most bytes (`g`, a convolution's
  // weight blocks) gets up to kMaxSlots regions in the scratch at once, and
  // the vertices go in blocks of that many of its regions: within a block,
  // by the region of the input with the next most repeats (`h`, the
  // activation blocks), so each of those is received once per block rather
  // than once per region of g -- the loop blocking of a GEMM, for copies.
  std::vector<int64_t> maxBytes(numInputs, 0);
  for (size_t v = 0; v < vs.size(); ++v)
    for (size_t i = 0; i < numInputs; ++i)
      if (ids[v * numInputs + i] >= 0)
        maxBytes[i] = std::max(maxBytes[i], regions[v * numInputs + i].numElements() *
                                                program.variables[cs.inputs[i].var].elementBytes());
  int64_t g = -1, h = -1;
  for (size_t i = 0; i < numInputs; ++i) {
    if (repeatedBytes[i] == 0)
      continue;
    if (g < 0 || repeatedBytes[i] > repeatedBytes[g]) {
      h = g;
      g = i;
    } else if (h < 0 || repeatedBytes[i] > repeatedBytes[h]) {
      h = i;
    }
  }
  auto roundUp = [](int64_t n) { return (n + 63) / 64 * 64; };
  int64_t slots = 1;
  if (g >= 0 && h >= 0)
    slots = std::clamp<int64_t>(kScratchSlotBytes / std::max<int64_t>(roundUp(maxBytes[g]), 1), 1,
                                kMaxSlots);
  auto idOf = [&](size_t v, int64_t i) { return i < 0 ? -1 : ids[v * numInputs + i]; };
  std::vector<size_t> order(vs.size());
  std::iota(order.begin(), order.end(), 0);
  if (g >= 0)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      auto key = [&](size_t v) {
        int32_t gid = idOf(v, g);
        return std::make_tuple(gid < 0 ? -1 : gid / slots, idOf(v, h), gid);
      };
      return key(a) < key(b);
    });
  // Each received input's first slot in the scratch, then g's extra slots.
  std::vector<int64_t> scratchAt(numInputs, 0);
  int64_t slotBase = 0;
  for (size_t i = 0; i < numInputs; ++i) {
    scratchAt[i] = slotBase;
    slotBase += roundUp(maxBytes[i]);
  }
  auto slotOf = [&](int64_t i, int32_t id) -> int64_t {
    return i == g ? id % slots : 0;
  };

  std::vector<int64_t> cycles; // per vertex, to balance the chunks
  std::vector<int32_t> receiveIds;
  for (size_t v : order) {
    const Vertex &vx = vs[v];
    Box loops = cs.loopBox(vx.piece);
    const Kernel *kernel = cs.kernelFor(vx.piece.sizes);
    vt.entries.push_back(entries.lookup(kernel->symbol));
    cycles.push_back(kernel->cycles + kVertexCallCost);
    vt.data.insert(vt.data.end(), loops.offsets.begin(), loops.offsets.end());
    std::vector<int64_t> shapes; // every operand's sizes, in order
    for (size_t i = 0; i < numInputs; ++i) {
      const auto &in = cs.inputs[i];
      const Box &region = regions[v * numInputs + i];
      int32_t id = ids[v * numInputs + i];
      int64_t offset;
      if (inPlace[v * numInputs + i] >= 0) {
        offset = inPlace[v * numInputs + i];
        id = -1; // nothing to receive
      } else if (isLocalPiece(program, in.var, region, vx.tile)) {
        offset = region.numElements() ? element(in.var, vx.tile, 0) - memory
                                      : address(vx.tile, 0) - memory;
      } else if (vt.fused) {
        int64_t slot = slotOf(i, id);
        int64_t at = slot == 0 ? scratchAt[i] : slotBase + (slot - 1) * roundUp(maxBytes[i]);
        gatherRows(in.var, region, at, t.exchange, t.exchange.size());
        vt.scratchBytes = std::max(
            vt.scratchBytes, at + region.numElements() * program.variables[in.var].elementBytes());
        offset = ~at; // negative: an offset into the scratch buffer
      } else {
        offset = address(vx.tile, plan.receiveOffset(c, i, vx.tile)) - memory;
        gatherRows(in.var, region, offset, t.exchange, 0);
      }
      vt.data.push_back(offset);
      vt.operandBytes.push_back(region.numElements() *
                                program.variables[in.var].elementBytes());
      shapes.insert(shapes.end(), region.sizes.begin(), region.sizes.end());
      if (vt.fused) {
        vt.receiveEnds.push_back(t.exchange.size());
        receiveIds.push_back(id);
      }
    }
    for (int64_t out : cs.outputs) {
      vt.data.push_back(element(out, vx.tile, 0) - memory);
      vt.operandBytes.push_back(vx.piece.numElements() *
                                program.variables[out].elementBytes());
      shapes.insert(shapes.end(), vx.piece.sizes.begin(), vx.piece.sizes.end());
    }
    auto [layout, added] = layoutIndex.try_emplace(shapes, vt.layouts.size());
    if (added) {
      // The kernel's inputs are regions that depend on the vertex: each new
      // set of shapes is checked against what the kernel's code declares.
      const KernelSignature &signature = signatures.find(kernel->symbol)->second;
      const int64_t *regionSizes = shapes.data();
      for (size_t k = 0; k < ranks.size() && t.error.empty(); ++k) {
        std::string why = checkKernelRegion(
            signature, k, llvm::ArrayRef<int64_t>(regionSizes, static_cast<size_t>(ranks[k])));
        if (!why.empty())
          t.error = "compute set '" + cs.name + "': kernel '" + kernel->symbol + "' " + why;
        regionSizes += ranks[k];
      }
      llvm::SmallVector<int64_t, 64> d;
      const int64_t *sizes = shapes.data();
      for (int64_t rank : ranks) {
        appendDescriptor(d, nullptr, llvm::ArrayRef<int64_t>(sizes, rank));
        sizes += rank;
      }
      vt.layouts.emplace_back(d.begin(), d.end());
    }
    vt.layoutOf.push_back(layout->second);
  }

  // Which receives a thread makes: a region its scratch slot does not hold
  // yet from an earlier vertex of the same chunk (a chunk starts with an
  // empty scratch: it may run on any thread).
  auto markReceives = [&](llvm::ArrayRef<size_t> chunkEnds) {
    vt.receive.assign(receiveIds.size(), 0);
    std::vector<std::vector<int32_t>> held(numInputs);
    size_t chunk = 0;
    for (size_t v = 0; v < order.size(); ++v) {
      if (v == 0 || (chunk < chunkEnds.size() && v == chunkEnds[chunk])) {
        if (v != 0)
          ++chunk;
        for (size_t i = 0; i < numInputs; ++i)
          held[i].assign(static_cast<int64_t>(i) == g ? slots : 1, -1);
      }
      for (size_t i = 0, k = v * numInputs; i < numInputs; ++i, ++k) {
        int32_t id = receiveIds[k];
        if (id < 0)
          continue;
        int32_t &slot = held[i][slotOf(i, id)];
        vt.receive[k] = slot != id;
        slot = id;
      }
    }
  };
  if (vt.fused) {
    markReceives({});
    for (size_t v = 0; v < order.size(); ++v)
      for (size_t i = 0, k = v * numInputs; i < numInputs; ++i, ++k)
        if (vt.receive[k])
          for (size_t r = k ? vt.receiveEnds[k - 1] : 0; r < vt.receiveEnds[k]; ++r)
            cycles[v] += copyCost(t.exchange[r]) / kCopyBytesPerCycle;
  }
  unsigned threads = pool->threads();
  vt.chunks = chunkEnds(
      cycles.size(), [&](size_t i) { return cycles[i]; }, threads, kMinChunkCycles);
  if (vt.fused)
    markReceives(vt.chunks);
  t.exchangeChunks = chunkEnds(
      t.exchange.size(), [&](size_t i) { return copyCost(t.exchange[i]); }, threads,
      kMinChunkBytes);
  return t;
}

StepTable IPUModel::Impl::copyTable(const Copy &copy) {
  StepTable t;
  int64_t eb = program.variables[copy.src].elementBytes();
  for (const Segment &s : copySegments(program, copy))
    appendRows(t.exchange, RowCopy{element(copy.src, s.srcTile, s.srcOffset) - memory,
                                   element(copy.dst, s.dstTile, s.dstOffset) - memory,
                                   s.count * eb, 1, 0, 0});
  t.exchangeChunks = chunkEnds(
      t.exchange.size(), [&](size_t i) { return copyCost(t.exchange[i]); },
      pool->threads(), kMinChunkBytes);
  return t;
}

void IPUModel::Impl::runExchange(const StepTable &t) {
  if (t.vertices.fused)
    return; // with the vertices
  // Every row lands in distinct destination bytes: chunks are race-free.
  pool->run(t.exchangeChunks.size(), [&](size_t chunk) {
    size_t lo = chunk ? t.exchangeChunks[chunk - 1] : 0;
    for (size_t i = lo; i < t.exchangeChunks[chunk]; ++i)
      copyRows(memory, memory, t.exchange[i]);
  });
}

/// Receives are many short rows from other tiles' memory, mostly not in
/// the host's caches: the row this many ahead is prefetched while copying.
constexpr size_t kPrefetchRowsAhead = 8;

/// Starts loading the source bytes of `r` into the host's caches: up to 8
/// of its rows, up to 512 bytes of each (a receive's rows are mostly short;
/// a long one is a stream the hardware prefetcher follows).
static void prefetchSource(const char *memory, const RowCopy &r) {
  const char *row = memory + r.from;
  for (int64_t i = 0; i < std::min<int64_t>(r.rows, 8); ++i, row += r.fromStride)
    for (int64_t b = 0; b < std::min<int64_t>(r.rowBytes, 512); b += 64)
      __builtin_prefetch(row + b, /*rw=*/0, /*locality=*/3);
}

/// Bytes of one vertex's operands prefetched at most: a host core's L2
/// holds them next to the running vertex's.
constexpr int64_t kMaxPrefetchBytes = 256 * 1024;

/// Starts loading into the host's L2 the operands vertex `v` of `t` reads
/// and writes in tile memory (its weights and other resident inputs, the
/// regions it reads in place from other tiles, its output piece; not what
/// it receives, which lands in the thread's scratch). Each tile's memory
/// is touched once per step, so without this a vertex waits on a cache
/// miss at every line of them: measured on ResNet-50, the kernels ran at
/// about half their in-cache rate. Called before the previous vertex runs,
/// the loads overlap its compute.
static void prefetchOperands(const char *memory, const VertexTable &t, size_t v) {
  size_t numOperands = t.descriptorAt.size();
  const int64_t *address = &t.data[v * t.words + t.numLoops];
  int64_t budget = kMaxPrefetchBytes;
  for (size_t k = 0; k < numOperands && budget > 0; ++k) {
    if (address[k] < 0)
      continue; // in the scratch
    const char *data = memory + address[k];
    int64_t bytes = std::min<int64_t>(t.operandBytes[v * numOperands + k], budget);
    budget -= bytes;
    if (k < t.numInputs)
      for (int64_t b = 0; b < bytes; b += 64)
        __builtin_prefetch(data + b, /*rw=*/0, /*locality=*/2);
    else
      for (int64_t b = 0; b < bytes; b += 64)
        __builtin_prefetch(data + b, /*rw=*/1, /*locality=*/2);
  }
}

/// The calling host thread's scratch buffer for what fused vertices
/// receive, at least `bytes` long, 64-byte aligned.
static char *threadScratch(int64_t bytes) {
  thread_local std::unique_ptr<char[]> buffer;
  thread_local int64_t size = 0;
  if (size < bytes) {
    buffer.reset(new char[bytes + 64]);
    size = bytes;
  }
  return reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(buffer.get()) + 63) &
                                  ~uintptr_t(63));
}

void IPUModel::Impl::runVertices(const VertexTable &t,
                                 llvm::ArrayRef<RowCopy> exchange) {
  pool->run(t.chunks.size(), [&](size_t chunk) {
    // The packed entry's arguments point into these: each vertex fills in
    // its loop offsets, its kernel's descriptors (unless the previous
    // vertex's were the same) and its operands' addresses.
    llvm::SmallVector<int64_t, 16> loopOffsets(t.numLoops);
    llvm::SmallVector<int64_t, 128> descriptors(t.descriptorWords);
    llvm::SmallVector<void *, 32> args;
    for (int64_t &offset : loopOffsets)
      args.push_back(&offset);
    for (size_t at : t.descriptorAt)
      args.push_back(descriptors.data() + at);
    uint32_t layout = std::numeric_limits<uint32_t>::max();
    char *scratch = t.fused ? threadScratch(t.scratchBytes) : nullptr;
    size_t lo = chunk ? t.chunks[chunk - 1] : 0;
    for (size_t v = lo; v < t.chunks[chunk]; ++v) {
      if (t.fused)
        for (size_t k = v * t.numInputs; k < (v + 1) * t.numInputs; ++k)
          if (t.receive[k])
            for (size_t r = k ? t.receiveEnds[k - 1] : 0; r < t.receiveEnds[k]; ++r) {
              if (r + kPrefetchRowsAhead < exchange.size())
                prefetchSource(memory, exchange[r + kPrefetchRowsAhead]);
              copyRows(memory, scratch, exchange[r]);
            }
      const int64_t *w = &t.data[v * t.words];
      std::copy(w, w + t.numLoops, loopOffsets.begin());
      w += t.numLoops;
      if (t.layoutOf[v] != layout) {
        layout = t.layoutOf[v];
        std::copy(t.layouts[layout].begin(), t.layouts[layout].end(), descriptors.begin());
      }
      for (size_t k = 0; k < t.descriptorAt.size(); ++k) {
        char *data = w[k] >= 0 ? memory + w[k] : scratch + ~w[k];
        descriptors[t.descriptorAt[k]] = descriptors[t.descriptorAt[k] + 1] =
            reinterpret_cast<int64_t>(data);
      }
      if (v + 1 < t.chunks[chunk])
        prefetchOperands(memory, t, v + 1);
      t.entries[v](args.data());
    }
  });
}

IPUModel::IPUModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IPUModel::~IPUModel() = default;

Expected<std::unique_ptr<IPUModel>> IPUModel::create(const Executable &executable,
                                                     unsigned threads) {
  const ExecutableMetadata &meta = executable.metadata();
  if (!meta.program)
    return fail("this executable has no IPU program (damaged or forged; recompile the model)");
  auto impl = std::make_unique<Impl>(executable);
  impl->program = *meta.program;
  const MachineProgram &p = impl->program;

  auto target = target::makeTarget(
      meta.target, meta.numIPUs,
      meta.tilesPerIPU ? std::optional<int64_t>(meta.tilesPerIPU) : std::nullopt);
  if (!target)
    return fail("the executable's target is not usable: " +
                llvm::toString(target.takeError()));
  impl->target = *target;
  int64_t numTiles = target->totalTiles();
  if (auto err = p.verify(numTiles))
    return fail("the executable's program is invalid for " + target->describe() +
                ": " + llvm::toString(std::move(err)) + " (recompile the model)");

  if (auto err = checkProgramAgreesWithSignature(executable))
    return std::move(err);

  // The host's threads, for loading (the memory plan, each step's table)
  // and then for running.
  unsigned poolThreads = llvm::hardware_concurrency(threads).compute_thread_count();
  // Instances on one host share its cores: by default each takes its part
  // (threads waiting on the others' collectives would only slow them).
  if (threads == 0 && meta.share.count)
    poolThreads = std::max<unsigned>(1, poolThreads / meta.share.onThisHost);
  impl->pool = std::make_unique<PhasePool>(poolThreads);
  auto plan = planMemory(p, numTiles, target->bytesPerTile, nullptr, impl->pool.get());
  if (!plan)
    return plan.takeError();
  impl->plan = std::move(*plan);

  // Tile memory, then (a cache line on) one padding area per distinct
  // padding element.
  size_t tileBytes = static_cast<size_t>(numTiles) * target->bytesPerTile;
  for (const Variable &v : p.variables)
    if (v.isPadded())
      impl->paddingAreas.try_emplace({v.elementBytes(), v.padBits}, 0);
  int64_t areaAt = tileBytes + 64;
  for (auto &[key, offset] : impl->paddingAreas) {
    offset = areaAt;
    areaAt += kPaddingAreaBytes;
  }
  // Then, from a huge page's boundary, the staging area.
  constexpr int64_t kHugePage = 2 << 20;
  int64_t stagingAt = (areaAt + kHugePage - 1) / kHugePage * kHugePage;
  impl->stagingBytes = impl->planStaging();
  for (Impl::Staged &st : impl->staged)
    if (st.at >= 0)
      st.at += stagingAt;
  // Each replica's memory starts on a huge page's boundary too.
  impl->memoryBytes = (stagingAt + impl->stagingBytes + kHugePage - 1) / kHugePage * kHugePage;
  impl->replicas = meta.localReplicas();
  if (meta.share.count) {
    // Every instance must run the same program on its own replicas: the
    // first collective refuses a mismatch before anything runs.
    auto group = InstanceGroup::join(Instance{meta.share.instances, meta.share.instance,
                                              meta.replicas, meta.share.count,
                                              meta.share.first, meta.numIPUs});
    if (!group)
      return group.takeError();
    impl->instances = std::move(*group);
    if (auto err = impl->instances->checkSame(
            "executable (its program, code, weights and replicas per instance)",
            executable.fingerprint() + "/" + std::to_string(meta.replicas) + "/" +
                std::to_string(meta.share.count)))
      return std::move(err);
  }
  void *memory = mmap(nullptr, impl->memoryBytes * impl->replicas, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED)
    return fail("cannot reserve " + llvm::Twine(impl->memoryBytes * impl->replicas) +
                " bytes of tile memory for the IPU model: " + llvm::sys::StrError());
  impl->reservation = static_cast<char *>(memory);
  for (int64_t r = impl->replicas - 1; r >= 0; --r) {
    impl->selectReplica(r);
    // The staging area is dense (unlike tile memory, mostly untouched): huge
    // pages save the host's TLB a miss per 4 KiB of the weights' stream
    // (a hint; the kernel backs the 2 MiB-aligned stretches of the range).
    if (impl->stagingBytes > 0)
      madvise(impl->memory + stagingAt, impl->stagingBytes, MADV_HUGEPAGE);
    for (auto &[key, offset] : impl->paddingAreas) {
      auto [elementBytes, bits] = key;
      for (int64_t at = 0; at + elementBytes <= kPaddingAreaBytes; at += elementBytes)
        std::memcpy(impl->memory + offset + at, &bits, elementBytes); // little-endian
    }
  }

  bool anyKernel = llvm::any_of(p.computeSets, [](const ComputeSet &cs) {
    return !cs.kernels.empty();
  });
  if (anyKernel) {
    if (llvm::Error err = checkHostCPU(meta))
      return std::move(err);
    auto jit = createCodeJIT(executable.kernelObjects());
    if (!jit)
      return fail("cannot load the executable's code: " + llvm::toString(jit.takeError()));
    impl->jit = std::move(*jit);
    // Kernels are the executable's own vertex entries: nothing the process
    // defines (abort), not the host reference's entry, not a function
    // behind an entry. Each is called as its signature, which its code
    // records, says it may be: damaged or forged metadata cannot hand a
    // kernel operands it would read or write past.
    llvm::StringSet<> own;
    for (const std::string &name : definedFunctions(executable.kernelObjects()))
      own.insert(name);
    llvm::StringMap<uint64_t> data = definedData(executable.kernelObjects());
    auto forged = [&](const ComputeSet &cs, const Kernel &k, const llvm::Twine &why) {
      return fail("compute set '" + cs.name + "' names kernel '" + k.symbol + "', " + why +
                  " (damaged or forged; recompile the model)");
    };
    for (const ComputeSet &cs : p.computeSets)
      for (const Kernel &k : cs.kernels) {
        llvm::StringRef symbol = k.symbol;
        if (!own.contains(symbol) || symbol == meta.entry || !symbol.starts_with("vertex_") ||
            !symbol.ends_with("_entry"))
          return forged(cs, k, "which is not a vertex entry of the executable's code");
        if (!impl->entries.count(symbol)) {
          auto entry = lookupEntry(*impl->jit, symbol);
          if (!entry)
            return fail("compute set '" + cs.name + "': " + llvm::toString(entry.takeError()));
          std::string signatureSymbol = KernelSignature::symbolFor(symbol);
          auto size = data.find(signatureSymbol);
          auto address = impl->jit->lookup(signatureSymbol);
          // Far above any kernel's (a few dozen words), far below what a
          // copy could be hurt by.
          constexpr uint64_t kMaxSignatureBytes = 1 << 16;
          if (size == data.end() || size->second == 0 || size->second % 8 != 0 ||
              size->second > kMaxSignatureBytes || !address) {
            if (!address)
              llvm::consumeError(address.takeError());
            return forged(cs, k, "whose code records no signature");
          }
          std::vector<int64_t> words(size->second / 8);
          std::memcpy(words.data(), address->toPtr<const void *>(), size->second);
          llvm::Expected<KernelSignature> signature = KernelSignature::decode(words);
          if (!signature)
            return forged(cs, k, "whose code records " + llvm::toString(signature.takeError()));
          impl->entries[symbol] = *entry;
          impl->signatures[symbol] = std::move(*signature);
        }
        if (std::string why = checkKernelUse(p, cs, k, impl->signatures[symbol]); !why.empty())
          return forged(cs, k, "which " + why);
      }
  }

  // Weights and constants live in their pieces for the model's lifetime,
  // in every replica. So does state, which starts at its initial value; a
  // replica's index is its own.
  for (int64_t r = impl->replicas - 1; r >= 0; --r) {
    impl->selectReplica(r);
    for (size_t v = 0; v < p.variables.size(); ++v) {
      const Variable &var = p.variables[v];
      if (var.base < 0 && (var.kind == VarKind::Weight || var.kind == VarKind::Constant))
        impl->scatter(v, wholeBox(var.shape), executable.weight(var.weight).data());
    }
    for (size_t i = 0; i < meta.state.size(); ++i) {
      int64_t v = p.inputs[meta.inputs.size() + i];
      Tensor initial = meta.state[i].role == StateInfo::Role::ReplicaIndex
                           ? Tensor::scalar(meta.share.first + r)
                           : initialState(executable, i);
      if (initial.shape != p.variables[v].shape || initial.dtype != p.variables[v].dtype)
        return fail("state '" + meta.state[i].name + "' is " + meta.state[i].typeString() +
                    " but its program variable " +
                    typeString(p.variables[v].shape, p.variables[v].dtype) +
                    (meta.state[i].role == StateInfo::Role::ReplicaIndex
                         ? " (a replica index is an i64 scalar)"
                         : "") +
                    " (recompile the model)");
      impl->scatter(v, wholeBox(p.variables[v].shape), initial.data.data());
    }
  }

  // Each step's table depends only on the program and the plan: the steps
  // are resolved on the host's threads (most of the load time).
  impl->tables.resize(p.steps.size());
  impl->pool->run(p.steps.size(), [&](size_t s) {
    const Step &step = p.steps[s];
    if (step.kind == Step::Kind::Compute)
      impl->tables[s] = impl->computeTable(step.index);
    else if (step.kind == Step::Kind::Copy)
      impl->tables[s] = impl->copyTable(p.copies[step.index]);
    // An all-reduce has no table: it runs across the replicas.
  });
  for (const StepTable &table : impl->tables)
    if (!table.error.empty())
      return fail(table.error + " (damaged or forged; recompile the model)");
  impl->cost = estimateProgramCost(meta, p, impl->target, impl->pool.get());
  return std::unique_ptr<IPUModel>(new IPUModel(std::move(impl)));
}

Expected<std::vector<Tensor>> IPUModel::run(llvm::ArrayRef<Tensor> inputs) {
  Impl &m = *impl_;
  const ExecutableMetadata &meta = m.executable.metadata();
  if (auto err = checkInputs(meta, inputs))
    return std::move(err);
  // The program's own counter says which micro-batch commits; a run starts
  // where the last one left it (0 unless state was written mid-update).
  m.microBatch = 0;
  for (size_t i = 0; i < meta.state.size(); ++i)
    if (meta.state[i].countsMicroBatches) {
      Tensor counter = readStateAt(i);
      float value = 0;
      std::memcpy(&value, counter.data.data(), sizeof value);
      int64_t accumulation = std::max<int64_t>(meta.gradientAccumulation, 1);
      // Outside [0, G) the program never commits: any start will do.
      m.microBatch = value >= 0 && value < accumulation ? static_cast<int64_t>(value) : 0;
    }
  return runDeviceIterations(meta, inputs, [&](llvm::ArrayRef<Tensor> batch) {
    return m.runIteration(batch);
  });
}

Expected<std::vector<Tensor>> IPUModel::Impl::runIteration(llvm::ArrayRef<Tensor> inputs) {
  Impl &m = *this;
  const ExecutableMetadata &meta = m.executable.metadata();
  const MachineProgram &p = m.program;
  // Replica r's inputs are the r-th of the iteration's batches.
  for (int64_t r = 0; r < m.replicas; ++r) {
    m.selectReplica(r);
    for (size_t i = 0; i < inputs.size(); ++i) {
      size_t bytes = inputs[i].data.size() / m.replicas;
      m.scatter(p.inputs[i], wholeBox(p.variables[p.inputs[i]].shape),
                inputs[i].data.data() + r * bytes);
    }
  }
  using Clock = std::chrono::steady_clock;
  m.hostExchangeSeconds.resize(m.tables.size());
  m.hostComputeSeconds.resize(m.tables.size());
  // The update's steps and stores run on the last micro-batch of each
  // weight update only; the others keep the old state.
  int64_t accumulation = std::max<int64_t>(meta.gradientAccumulation, 1);
  bool commits = ++m.microBatch % accumulation == 0;
  for (size_t s = 0; s < m.tables.size(); ++s) {
    if (p.steps[s].perUpdate && !commits)
      continue;
    if (p.steps[s].kind == Step::Kind::AllReduce) {
      auto start = Clock::now();
      if (auto err = m.runAllReduce(p.allReduces[p.steps[s].index]))
        return std::move(err);
      m.hostExchangeSeconds[s] += std::chrono::duration<double>(Clock::now() - start).count();
      continue;
    }
    for (int64_t r = 0; r < m.replicas; ++r) {
      m.selectReplica(r);
      auto start = Clock::now();
      m.runExchange(m.tables[s]);
      auto exchanged = Clock::now();
      m.runVertices(m.tables[s].vertices, m.tables[s].exchange);
      m.hostExchangeSeconds[s] += std::chrono::duration<double>(exchanged - start).count();
      m.hostComputeSeconds[s] +=
          std::chrono::duration<double>(Clock::now() - exchanged).count();
    }
  }
  ++m.iterations;
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < meta.outputs.size(); ++i)
    outputs.push_back(Tensor::zeros(meta.outputs[i].dtype, hostShape(meta.outputs[i], m.replicas)));
  for (int64_t r = 0; r < m.replicas; ++r) {
    m.selectReplica(r);
    // Updated state moves into its resident variable for the next iteration.
    for (size_t i = 0; i < meta.state.size(); ++i) {
      const StateInfo &s = meta.state[i];
      if (s.update < 0 || (s.perUpdate && !commits))
        continue;
      std::vector<char> value(s.numElements() * dtypeSize(s.dtype));
      m.gather(p.outputs[s.update], wholeBox(s.shape), value.data());
      m.scatter(p.inputs[meta.inputs.size() + i], wholeBox(s.shape), value.data());
    }
    for (size_t i = 0; i < meta.outputs.size(); ++i) {
      size_t bytes = outputs[i].data.size() / m.replicas;
      m.gather(p.outputs[i], wholeBox(meta.outputs[i].shape), outputs[i].data.data() + r * bytes);
    }
  }
  m.selectReplica(0);
  return outputs;
}

namespace {
/// Element `i` of a float buffer of type `t`, and back (round to nearest).
double floatAt(const char *data, DType t, int64_t i) {
  switch (t) {
  case DType::F32: {
    float f;
    std::memcpy(&f, data + 4 * i, 4);
    return f;
  }
  case DType::F64: {
    double d;
    std::memcpy(&d, data + 8 * i, 8);
    return d;
  }
  default: {
    uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    const llvm::fltSemantics &sem =
        t == DType::F16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat();
    return llvm::APFloat(sem, llvm::APInt(16, bits)).convertToDouble();
  }
  }
}
void setFloatAt(char *data, DType t, int64_t i, double v) {
  switch (t) {
  case DType::F32: {
    float f = static_cast<float>(v);
    std::memcpy(data + 4 * i, &f, 4);
    return;
  }
  case DType::F64:
    std::memcpy(data + 8 * i, &v, 8);
    return;
  default: {
    llvm::APFloat a(v);
    bool lost;
    a.convert(t == DType::F16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    uint16_t bits = static_cast<uint16_t>(a.bitcastToAPInt().getZExtValue());
    std::memcpy(data + 2 * i, &bits, 2);
  }
  }
}
} // namespace

llvm::Error IPUModel::Impl::runAllReduce(const AllReduce &reduce) {
  for (auto [src, dst] : llvm::zip(reduce.srcs, reduce.dsts)) {
    const Variable &v = program.variables[src];
    Box all = wholeBox(v.shape);
    int64_t n = all.numElements();
    size_t bytes = n * v.elementBytes();
    std::vector<char> value(bytes);
    // Summed in replica order, in the tensor's type for f32 (as each ring
    // step adds in it) and through double for the narrower types: every
    // instance adds the same numbers in the same order, so all replicas hold
    // the same sum, bit for bit, as in one process running them all.
    std::vector<double> sum(v.dtype == DType::F32 ? 0 : n, 0.0);
    std::vector<float> sum32(v.dtype == DType::F32 ? n : 0, 0.0f);
    auto add = [&](const char *contribution) {
      if (v.dtype == DType::F32) {
        const float *f = reinterpret_cast<const float *>(contribution);
        for (int64_t i = 0; i < n; ++i)
          sum32[i] += f[i];
      } else {
        for (int64_t i = 0; i < n; ++i)
          sum[i] += floatAt(contribution, v.dtype, i);
      }
    };
    if (!instances) {
      // One process: each replica's value in turn (one tensor's bytes at a
      // time, however many replicas).
      for (int64_t r = 0; r < replicas; ++r) {
        selectReplica(r);
        gather(src, all, value.data());
        add(value.data());
      }
    } else {
      // Every instance's replicas, gathered in replica order (instance i
      // holds replicas [i x local, (i + 1) x local)).
      std::vector<char> local(bytes * replicas);
      for (int64_t r = 0; r < replicas; ++r) {
        selectReplica(r);
        gather(src, all, local.data() + r * bytes);
      }
      std::vector<char> everyReplica(local.size() * instances->self().numInstances);
      if (auto err = instances->allGather(local, everyReplica))
        return err;
      for (size_t at = 0; at + bytes <= everyReplica.size() && bytes; at += bytes)
        add(everyReplica.data() + at);
    }
    if (v.dtype == DType::F32)
      std::memcpy(value.data(), sum32.data(), n * 4);
    else
      for (int64_t i = 0; i < n; ++i)
        setFloatAt(value.data(), v.dtype, i, sum[i]);
    for (int64_t r = 0; r < replicas; ++r) {
      selectReplica(r);
      scatter(dst, all, value.data());
    }
  }
  selectReplica(0);
  return llvm::Error::success();
}

std::vector<Tensor> IPUModel::readState() {
  std::vector<Tensor> state;
  for (size_t i = 0; i < impl_->executable.metadata().state.size(); ++i)
    state.push_back(readStateAt(i));
  return state;
}

Tensor IPUModel::readStateAt(size_t index) { return readReplicaStateAt(0, index); }

Tensor IPUModel::readReplicaStateAt(int64_t replica, size_t index) {
  Impl &m = *impl_;
  if (replica < 0 || replica >= m.replicas)
    return Tensor();
  m.selectReplica(replica);
  const ExecutableMetadata &meta = m.executable.metadata();
  const StateInfo &info = meta.state.at(index);
  Tensor t = Tensor::zeros(info.dtype, info.shape);
  m.gather(m.program.inputs[meta.inputs.size() + index], wholeBox(t.shape), t.data.data());
  m.selectReplica(0);
  return t;
}

llvm::Error IPUModel::writeState(size_t index, const Tensor &value) {
  Impl &m = *impl_;
  const ExecutableMetadata &meta = m.executable.metadata();
  if (auto err = checkState(meta, index, value))
    return err;
  if (meta.state[index].role == StateInfo::Role::ReplicaIndex)
    return fail("'" + meta.state[index].name +
                "' is each replica's own index, which the runtime sets");
  // Every replica holds the same value (the replicas' weights stay equal).
  for (int64_t r = 0; r < m.replicas; ++r) {
    m.selectReplica(r);
    m.scatter(m.program.inputs[meta.inputs.size() + index], wholeBox(value.shape),
              value.data.data());
  }
  m.selectReplica(0);
  return llvm::Error::success();
}

const target::IPUTarget &IPUModel::target() const { return impl_->target; }
int64_t IPUModel::replicas() const { return impl_->replicas; }

llvm::Error IPUModel::checkInstancesAgree(llvm::StringRef options) {
  Impl &m = *impl_;
  if (!m.instances)
    return llvm::Error::success();
  const ExecutableMetadata &meta = m.executable.metadata();
  // Replica 0 of each instance: its state is every replica's but the index
  // (and the buffers, which start equal).
  std::string fingerprint = options.str();
  for (size_t i = 0; i < meta.state.size(); ++i) {
    if (meta.state[i].role == StateInfo::Role::ReplicaIndex)
      continue;
    Tensor t = readStateAt(i);
    fingerprint += "/" + meta.state[i].name + "=" +
                   llvm::utohexstr(llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
                       reinterpret_cast<const uint8_t *>(t.data.data()), t.data.size())));
  }
  return m.instances->checkSame("starting state or options (weights, optimizer state, learning "
                                "rate, seed, or the run's own options)",
                                fingerprint);
}
void IPUModel::resetHostTimes() {
  impl_->hostExchangeSeconds.assign(impl_->hostExchangeSeconds.size(), 0);
  impl_->hostComputeSeconds.assign(impl_->hostComputeSeconds.size(), 0);
  impl_->iterations = 0;
}

const CostSummary &IPUModel::cost() const { return impl_->cost; }
const MemoryPlan &IPUModel::memory() const { return impl_->plan; }

json::Value IPUModel::profileJSON() const {
  const Impl &m = *impl_;
  json::Array steps;
  int64_t exchange = 0, sync = 0, compute = 0;
  double hostExchange = 0, hostCompute = 0;
  for (size_t i = 0; i < m.cost.steps.size(); ++i) {
    const StepCost &s = m.cost.steps[i];
    // cost.steps is stream-in, the program's steps, stream-out.
    double perIteration = m.iterations ? 1e3 / m.iterations : 0;
    double hostExchangeMs = 0, hostComputeMs = 0;
    bool fused = i >= 1 && i - 1 < m.tables.size() && m.tables[i - 1].vertices.fused;
    if (i >= 1 && i - 1 < m.hostExchangeSeconds.size()) {
      hostExchangeMs = m.hostExchangeSeconds[i - 1] * perIteration;
      hostComputeMs = m.hostComputeSeconds[i - 1] * perIteration;
    }
    hostExchange += hostExchangeMs;
    hostCompute += hostComputeMs;
    json::Object step{{"name", s.name},
                      {"location", s.location},
                      {"cycles", s.total()},
                      {"exchange_cycles", s.exchangeCycles},
                      {"sync_cycles", s.syncCycles},
                      {"compute_cycles", s.computeCycles},
                      {"all_reduce_cycles", s.allReduceCycles},
                      {"exchange_bytes", s.exchangeBytes},
                      {"tiles_used", s.tilesUsed},
                      {"macs", s.macs},
                      {"host_exchange_ms", hostExchangeMs},
                      {"host_compute_ms", hostComputeMs},
                      {"host_fused", fused}};
    // A step of the update runs once per weight update: not in the
    // iteration's sums (`update_cycles` has them).
    if (s.perUpdate)
      step["per_update"] = true;
    steps.push_back(std::move(step));
    if (s.perUpdate)
      continue;
    exchange += s.exchangeCycles;
    sync += s.syncCycles;
    compute += s.computeCycles;
  }
  return json::Object{
      {"target", json::Object{{"name", m.target.name},
                              {"description", m.target.describe()},
                              {"num_ipus", m.target.numIPUs},
                              {"tiles_per_ipu", m.target.tilesPerIPU},
                              {"bytes_per_tile", m.target.bytesPerTile},
                              {"clock_hz", m.target.clockHz},
                              {"peak_flops_fp32", m.target.peakFlops(false)},
                              {"peak_flops_fp16", m.target.peakFlops(true)}}},
      {"cycles", m.cost.totalCycles},
      {"seconds", m.cost.seconds(m.target.clockHz)},
      {"exchange_cycles", exchange},
      {"sync_cycles", sync},
      {"compute_cycles", compute},
      {"all_reduce_cycles", m.cost.allReduceCycles()},
      {"update_cycles", m.cost.updateCycles},
      {"host_exchange_ms", hostExchange},
      {"host_compute_ms", hostCompute},
      {"host_staging_bytes", m.stagingBytes},
      {"steps", std::move(steps)},
      {"memory", memoryReportJSON(m.program, m.plan)}};
}

json::Value IPUModel::traceJSON() const {
  const Impl &m = *impl_;
  // One process per IPU (one for the whole model on a single IPU), one
  // track (thread) per phase kind in each; the host streams in process 0
  // with several IPUs. Times in microseconds at the target's clock.
  enum Track { Host = 1, Exchange, Sync, Compute };
  int64_t ipus = m.target.numIPUs;
  bool pipelined = m.executable.metadata().pipelineStages > 1;
  json::Array events;
  auto process = [&](int64_t pid, const std::string &label) {
    events.push_back(json::Object{{"name", "process_name"},
                                  {"ph", "M"},
                                  {"pid", pid},
                                  {"args", json::Object{{"name", label}}}});
  };
  auto name = [&](int64_t pid, int tid, const char *label) {
    events.push_back(json::Object{{"name", "thread_name"},
                                  {"ph", "M"},
                                  {"pid", pid},
                                  {"tid", tid},
                                  {"args", json::Object{{"name", label}}}});
  };
  int64_t hostPid = 1;
  if (ipus == 1) {
    process(1, "IPU model: " + m.target.describe());
    name(1, Host, "host streams");
  } else {
    hostPid = 0;
    process(0, "host: " + m.target.describe());
    name(0, Host, "host streams");
  }
  for (int64_t i = 0; i < ipus; ++i) {
    int64_t pid = ipus == 1 ? 1 : i + 1;
    if (ipus > 1)
      process(pid, "IPU " + std::to_string(i));
    name(pid, Exchange, "exchange");
    name(pid, Sync, "sync");
    name(pid, Compute, "compute");
  }
  double usPerCycle = 1e6 / m.target.clockHz;
  auto event = [&](const StepCost &s, int64_t pid, int tid, const char *phase, int64_t at,
                   int64_t cycles) {
    if (cycles <= 0)
      return;
    json::Object args{{"cycles", cycles}, {"phase", phase}};
    if (!s.location.empty())
      args["location"] = s.location;
    if (tid == Exchange || tid == Host)
      args["bytes"] = s.exchangeBytes;
    if (tid == Compute) {
      args["tiles"] = s.tilesUsed;
      if (s.macs)
        args["macs"] = s.macs;
    }
    events.push_back(json::Object{{"name", s.name},
                                  {"cat", phase},
                                  {"ph", "X"},
                                  {"pid", pid},
                                  {"tid", tid},
                                  {"ts", at * usPerCycle},
                                  {"dur", cycles * usPerCycle},
                                  {"args", std::move(args)}});
  };
  // In turn, a step starts when the one before ends; pipelined, each IPU's
  // steps (for one micro-batch) follow each other on its own clock from 0,
  // as the IPUs run them at once on different micro-batches.
  int64_t now = 0;
  std::vector<int64_t> clock(ipus, 0);
  for (const StepCost &s : m.cost.steps) {
    if (!s.ipus) {
      event(s, hostPid, Host, "stream", now, s.exchangeCycles);
      if (ipus == 1)
        event(s, 1, Sync, "sync", now + s.exchangeCycles, s.syncCycles);
      now += s.total();
      continue;
    }
    for (int64_t i = 0; i < ipus; ++i) {
      if (!(s.ipus >> i & 1) && ipus > 1)
        continue;
      int64_t pid = ipus == 1 ? 1 : i + 1;
      int64_t at = pipelined ? clock[i] : now;
      event(s, pid, Exchange, "exchange", at, s.exchangeCycles);
      event(s, pid, Sync, "sync", at + s.exchangeCycles, s.syncCycles);
      event(s, pid, Compute, "compute", at + s.exchangeCycles + s.syncCycles, s.computeCycles);
      // The ring over the IPU-Links, on the exchange track.
      event(s, pid, Exchange, "all-reduce",
            at + s.exchangeCycles + s.syncCycles + s.computeCycles, s.allReduceCycles);
      clock[i] = at + s.total();
    }
    if (!pipelined)
      now += s.total();
  }
  return json::Object{{"traceEvents", std::move(events)},
                      {"displayTimeUnit", "ns"},
                      {"otherData", json::Object{{"cycles", m.cost.totalCycles},
                                                 {"target", m.target.name}}}};
}

} // namespace tessera::runtime
