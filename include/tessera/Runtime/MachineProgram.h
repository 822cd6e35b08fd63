//===- MachineProgram.h - a tile-mapped program for the IPU model -*- C++ -*-===//
//
// What the compiler hands the IPU model: every tensor as a variable placed on
// tiles by a regular grid mapping, and a sequence of bulk-synchronous steps
// (compute sets of vertices, copies). Per-tile facts (which piece a tile
// holds, which region of an operand a vertex reads, which tiles that region
// comes from) are computed from the grids, never stored per tile, so a
// program for 1472 tiles stays a few kilobytes of JSON.
//
// The compiler (ipu-map-tiles' cost model, ipu-allocate-memory) and the
// runtime (exchange copies, memory placement, cycle accounting) share this
// code, so what the compiler plans is exactly what the model executes.
// No MLIR here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_MACHINEPROGRAM_H
#define TESSERA_RUNTIME_MACHINEPROGRAM_H

#include "tessera/Runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace tessera::runtime {

/// A hyper-rectangle of a tensor: element offsets and sizes per dimension.
/// Inline storage for the ranks of real models: boxes are made per piece
/// and per vertex by the million, and a heap allocation each dominated the
/// IPU model's load time.
struct Box {
  llvm::SmallVector<int64_t, 6> offsets, sizes;
  Box() = default;
  Box(llvm::ArrayRef<int64_t> offsets, llvm::ArrayRef<int64_t> sizes)
      : offsets(offsets.begin(), offsets.end()), sizes(sizes.begin(), sizes.end()) {}
  /// Inline: the planner and the cost estimate ask it in their inner loops.
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t size : sizes)
      n *= size;
    return n;
  }
  bool operator==(const Box &o) const {
    return offsets == o.offsets && sizes == o.sizes;
  }
};

/// A regular grid of pieces over a tensor. Piece p (a multi-index, one entry
/// per dimension) covers [p[d]*chunks[d], min((p[d]+1)*chunks[d], shape[d]))
/// in every dimension d and lives on tile firstTile + sum(p[d]*tileStrides[d]).
/// Distinct pieces live on distinct tiles. A piece is stored densely,
/// row-major in its own box, in its tile's memory.
///
/// A mirrored mapping (a constant read by several blocks of tiles: a
/// convolution's weights, read by every block of output positions) also
/// holds whole copies of its pieces: for every index m with m[k] <
/// mirrorCounts[k], piece p has a copy on tile tileOf(p) + sum(m[k] *
/// mirrorStrides[k]). Every copy is stored and holds the same values; a
/// tile reading a piece it holds a copy of reads it in place. Copies and
/// pieces all live on distinct tiles.
struct TileMapping {
  std::vector<int64_t> shape, chunks, tileStrides;
  int64_t firstTile = 0;
  /// Empty unless mirrored (one entry per mirror dimension, counts > 1).
  std::vector<int64_t> mirrorCounts, mirrorStrides;

  /// Everything on one tile.
  static TileMapping singleTile(llvm::ArrayRef<int64_t> shape, int64_t tile);
  /// Poplar's linear mapping: consecutive row-major pieces of at least
  /// `grainBytes` on consecutive tiles (splitting the outermost dimensions
  /// that give enough pieces), at most `numTiles` of them.
  static TileMapping linear(llvm::ArrayRef<int64_t> shape, int64_t elementBytes,
                            int64_t numTiles, int64_t grainBytes = 128);

  int64_t rank() const { return shape.size(); }
  /// Pieces along dimension d (at least 1): inline, as the planner and the
  /// cost estimate ask it per piece without building piecesPerDim().
  int64_t piecesAlong(size_t d) const {
    return std::max<int64_t>(1, (shape[d] + chunks[d] - 1) / chunks[d]);
  }
  std::vector<int64_t> piecesPerDim() const;
  /// Pieces of one copy.
  int64_t numPieces() const;
  /// Copies of every piece: 1 unless mirrored.
  int64_t numCopies() const;
  bool isMirrored() const { return !mirrorCounts.empty(); }
  /// The tile of piece `piece`'s first copy.
  int64_t tileOf(llvm::ArrayRef<int64_t> piece) const;
  Box pieceBox(llvm::ArrayRef<int64_t> piece) const;
  /// Calls fn(tile, box) for every piece in row-major piece order, and then
  /// (mirrored) for every other copy of them, copy after copy.
  void forEachPiece(llvm::function_ref<void(int64_t tile, const Box &)> fn) const;
  /// The same walk giving each piece's element count only: no Box per
  /// piece, for the planner's per-tile memory accounting.
  void forEachPieceElements(llvm::function_ref<void(int64_t tile, int64_t elements)> fn) const;
  /// The piece a tile holds (a copy of it, mirrored), if any.
  std::optional<Box> pieceOnTile(int64_t tile) const;
  /// Elements of the largest piece.
  int64_t maxPieceElements() const;
  /// The distinct shapes of its pieces: per dimension the chunk and, when
  /// it does not divide the dimension, the remainder, combined in row-major
  /// order of those choices (the order of a compute set's kernels).
  std::vector<std::vector<int64_t>> pieceShapes() const;
  /// Checks sizes, strides and that pieces (and their copies) land on
  /// distinct tiles in [0, numTiles).
  llvm::Error verify(int64_t numTiles) const;
};

/// How a compute set's operand is indexed by its loops: operand dimension j
/// reads from sum_i coeffs[j][i] * loop[i] + consts[j], `extents[j]`
/// elements (1 when `extents` is empty). Coefficients are >= 0, so a box of
/// loop iterations reads a box of the operand. An extent spanning a
/// dimension (with zero coefficients) reads it whole: the rows of a gather's
/// table, which the vertex reads at data-dependent places, while its
/// columns follow the output's. `full` operands (read at data-dependent
/// places in every dimension, e.g. a resize's source) are read whole by
/// every vertex.
struct AccessMap {
  std::vector<std::vector<int64_t>> coeffs;
  std::vector<int64_t> consts;
  std::vector<int64_t> extents;
  bool full = false;
  int64_t extent(size_t j) const { return extents.empty() ? 1 : extents[j]; }
  /// The operand region read by the loop box [offsets, offsets + sizes).
  Box region(const Box &loops, llvm::ArrayRef<int64_t> operandShape) const;
};

enum class VarKind { Input, Weight, Activation, Constant };
llvm::StringRef varKindName(VarKind k);

struct Variable {
  std::string name; ///< source name (graph.name, weight symbol, op location)
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  VarKind kind = VarKind::Activation;
  /// >= 0 for a view: a row-major reshape of variable `base` (which is not a
  /// view itself); the view has no storage or mapping of its own.
  int64_t base = -1;
  TileMapping mapping; ///< unused for views
  int64_t weight = -1; ///< Weight/Constant: index into the executable's weights
  /// A padded view (virtual padding: a convolution reads its input without
  /// a padded copy of it): `padLow[d]` elements before and `padHigh[d]`
  /// after the interior in every dimension d read as the element whose
  /// bytes are `padBits` (little-endian); the interior, `shape` less the
  /// padding, is its base reshaped, differing only by unit dimensions.
  /// Empty for every other variable.
  std::vector<int64_t> padLow, padHigh;
  uint64_t padBits = 0;
  bool isPadded() const { return !padLow.empty(); }
  /// Copies of the variable a tile holds: a pipelined training step's
  /// activation read by the backward pass is stashed once per micro-batch
  /// in flight in its stage (ipu-stash-activations). The IPU model runs
  /// the micro-batches in turn and uses the first copy; memory planning
  /// places them all, as the chip needs them.
  int64_t copies = 1;
  /// `shape` less the padding (`shape` itself when not padded).
  std::vector<int64_t> interiorShape() const;
  int64_t elementBytes() const { return dtypeSize(dtype); }
};

/// One compiled vertex: the kernel for output pieces of `pieceSizes`.
/// Its packed entry takes void** args: a pointer to an int64 offset per loop
/// dimension (the piece's first iteration; 0 for loops not split), then one
/// memref descriptor per input, then per output, each of the region's shape.
struct Kernel {
  std::string symbol; ///< packed entry in the executable's code
  std::vector<int64_t> pieceSizes;
  int64_t cycles = 0;    ///< estimated on one tile, six workers
  int64_t codeBytes = 0; ///< estimated tile memory the code takes
};

/// A vertex kernel's signature as its code records it: the constant
/// `<kernel>_signature` (int64 words) that codegen emits beside each packed
/// entry `<kernel>_entry`. The runtime checks every use of a kernel against
/// it, so metadata that is damaged or forged behind a valid checksum cannot
/// make a kernel read or write past the operands it is handed.
struct KernelSignature {
  static constexpr int64_t kDynamic = -1;
  struct Buffer {
    int64_t elementBits = 0;
    std::vector<int64_t> sizes; ///< kDynamic where the kernel reads it
  };
  int64_t loopOffsets = 0;
  std::vector<Buffer> buffers; ///< inputs, then outputs
  /// [loopOffsets, buffers, then per buffer: elementBits, rank, sizes...]
  std::vector<int64_t> encode() const;
  static llvm::Expected<KernelSignature> decode(llvm::ArrayRef<int64_t> words);
  /// The data symbol holding the signature of packed entry `entrySymbol`
  /// (`vertex_cs3_0_entry` -> `vertex_cs3_0_signature`).
  static std::string symbolFor(llvm::StringRef entrySymbol);
};

struct ComputeSet {
  std::string name;     ///< "cs3"
  std::string location; ///< source op, for reports
  std::vector<int64_t> loopRanges;
  /// Output dimension j is loop outputLoops[j]; every output shares the
  /// mapping of outputs[0], whose pieces are the vertices' work.
  std::vector<int64_t> outputLoops;
  struct Operand {
    int64_t var;
    AccessMap map;
  };
  std::vector<Operand> inputs;
  std::vector<int64_t> outputs;
  std::vector<Kernel> kernels;
  int64_t macs = 0; ///< multiply-accumulates of the whole op (0 if not a contraction)
  /// The loop box of the vertex that computes output piece `box`.
  Box loopBox(const Box &outputPiece) const;
  /// The kernel for an output piece of these sizes, or nullptr.
  const Kernel *kernelFor(llvm::ArrayRef<int64_t> pieceSizes) const;
};

/// Copies `srcRegion` of `src` into `dst` at `dstOffsets` (same sizes), in
/// place: a step with only an exchange phase (pad, concat, slices).
struct Copy {
  int64_t src, dst;
  Box srcRegion;
  std::vector<int64_t> dstOffsets;
  std::string location; ///< source op, for reports (may be empty)
};

/// A cross-replica all-reduce: after it, `dsts[i]` holds the sum over the
/// replicas of `srcs[i]` in every replica (same shapes and float types).
/// One step reduces many variables, as Poplar merges a training step's
/// gradient all-reduces into one collective: the ring's syncs are paid once.
struct AllReduce {
  std::vector<int64_t> srcs, dsts;
  std::string location; ///< source op, for reports (may be empty)
};

struct Step {
  enum class Kind { Compute, Copy, AllReduce } kind;
  int64_t index; ///< into computeSets, copies or allReduces
  /// Runs only on the last micro-batch of each weight update (gradient
  /// accumulation): it computes nothing but what the committed update
  /// stores (markPerUpdateSteps), so on the other micro-batches, which
  /// keep the old state, it is skipped, as Poplar runs the update outside
  /// the accumulation loop.
  bool perUpdate = false;
  /// Of the backward pass (graph-autodiff's ops): for reports, which split
  /// a training step's cycles into forward, backward and update.
  bool backward = false;
};

struct MachineProgram {
  std::vector<Variable> variables;
  std::vector<ComputeSet> computeSets;
  std::vector<Copy> copies;
  std::vector<AllReduce> allReduces;
  std::vector<Step> steps;
  /// Variables bound to the executable's inputs and outputs, in order.
  std::vector<int64_t> inputs, outputs;
  /// The last `residentInputs` inputs are state that persists on the device
  /// between runs (a training step's weights): memory keeps them for the
  /// whole program instead of reusing their bytes after their last read.
  int64_t residentInputs = 0;

  /// The variable holding `var`'s storage (itself unless a view).
  const Variable &storage(int64_t var) const;
  /// Index of that variable.
  int64_t storageIndex(int64_t var) const;
  /// "cs3" (the compute set's name), "copy2" or "allreduce0", and the
  /// step's source op.
  std::string stepName(size_t step) const;
  std::string stepLocation(size_t step) const;
  /// Checks indices, shapes, mappings and kernels against `numTiles`.
  llvm::Error verify(int64_t numTiles) const;
  llvm::json::Value toJSON() const;
  static llvm::Expected<MachineProgram> fromJSON(const llvm::json::Value &v);
};

/// One contiguous run of a region of a variable as stored: `count` elements
/// starting at element `pieceOffset` of the piece on `tile`, which land at
/// element `regionOffset` of the region's dense row-major buffer. A padded
/// view's padding has no storage: its runs have tile kPaddingTile and are
/// `count` copies of the view's padding element.
struct Run {
  int64_t tile, pieceOffset, regionOffset, count;
};
constexpr int64_t kPaddingTile = -1;

/// A view of `source` (a variable or a view) in `shape`: a row-major reshape
/// of its storage, or, for a padded source, that padding seen through a
/// reshape that only inserts or drops unit dimensions.
llvm::Expected<Variable> makeView(const MachineProgram &program, int64_t source,
                                  llvm::ArrayRef<int64_t> shape);
/// `source` (a variable, or a view of one that only inserts or drops unit
/// dimensions) padded with `low` and `high` elements of `padBits` per
/// dimension.
llvm::Expected<Variable> makePaddedView(const MachineProgram &program, int64_t source,
                                        llvm::ArrayRef<int64_t> low,
                                        llvm::ArrayRef<int64_t> high, uint64_t padBits);

/// Calls fn for every run of `region` of variable `var` (a view or not), in
/// the region's row-major order.
void forEachRun(const MachineProgram &program, int64_t var, const Box &region,
                llvm::function_ref<void(const Run &)> fn);

/// One piece of a copy: `count` elements from a source piece to a
/// destination piece.
struct Segment {
  int64_t dstTile, dstOffset, srcTile, srcOffset, count;
};
/// The segments of `copy`: its destination runs matched with its source
/// runs (both walk the same region shape in row-major order, so region
/// offsets correspond).
std::vector<Segment> copySegments(const MachineProgram &program, const Copy &copy);

/// The part of one storage piece that a region covers, in the storage's
/// coordinates (for a view, its base's).
struct Overlap {
  int64_t tile;
  Box piece, part;
};

/// For a variable, or a view that only inserts or drops unit dimensions:
/// sets `regionInStorage` to the region in the storage's coordinates (same
/// row-major order) and calls fn for every piece the region overlaps: work
/// O(pieces overlapped), not O(runs). Returns false, calling nothing, for
/// any other view (use forEachRun).
bool forEachOverlap(const MachineProgram &program, int64_t var, const Box &region,
                    Box &regionInStorage, llvm::function_ref<void(const Overlap &)> fn);
/// For a padded view whose base keeps its last dimension (a convolution's
/// input with virtual padding): calls fn with every storage piece the
/// interior part of `region` overlaps and the runs forEachRun gives that
/// piece, one per row of its part (forEachRun walks a padded view row by
/// row): the same runs and bytes, in O(pieces overlapped). Returns false,
/// calling nothing, for any other variable.
bool forEachPaddedOverlap(const MachineProgram &program, int64_t var, const Box &region,
                          llvm::function_ref<void(const Overlap &, int64_t runs)> fn);

/// `rows` rows of `rowBytes` bytes each, `fromStride` and `toStride` bytes
/// apart, starting `from` and `to` bytes into two buffers.
struct RowCopy {
  int64_t from, to, rowBytes, rows, fromStride, toStride;
};

/// The row copies that copy box `part` between two dense row-major buffers
/// holding boxes `fromBox` and `toBox` (each containing `part`),
/// `elementBytes` each: dimensions both buffers hold whole merge into one
/// row.
void forEachRowCopy(const Box &fromBox, const Box &toBox, const Box &part,
                    int64_t elementBytes, llvm::function_ref<void(const RowCopy &)> fn);

namespace detail {
/// Copies `rows` rows of exactly `N` bytes (a fixed-size move per row).
template <int64_t N>
inline void copyFixedRows(const char *src, char *dst, const RowCopy &r) {
  for (int64_t i = 0; i < r.rows; ++i, src += r.fromStride, dst += r.toStride)
    std::memcpy(dst, src, N);
}
/// Copies `rows` rows of n bytes, K <= n <= 2K, as two overlapping
/// fixed-size moves each.
template <int64_t K>
inline void copyShortRows(const char *src, char *dst, const RowCopy &r) {
  int64_t tail = r.rowBytes - K;
  for (int64_t i = 0; i < r.rows; ++i, src += r.fromStride, dst += r.toStride) {
    char a[K], b[K];
    std::memcpy(a, src, K);
    std::memcpy(b, src + tail, K);
    std::memcpy(dst, a, K);
    std::memcpy(dst + tail, b, K);
  }
}
} // namespace detail

/// Performs one row copy between the buffers `from` and `to`. Short rows (a
/// convolution window's, single elements of a column) are most of an
/// exchange's rows: the row length is dispatched on once per RowCopy, and
/// each row is one or two fixed-size moves rather than a libc call.
inline void copyRows(const char *from, char *to, const RowCopy &r) {
  const char *src = from + r.from;
  char *dst = to + r.to;
  int64_t n = r.rowBytes;
  switch (n) {
  case 4:
    return detail::copyFixedRows<4>(src, dst, r);
  case 8:
    return detail::copyFixedRows<8>(src, dst, r);
  case 16:
    return detail::copyFixedRows<16>(src, dst, r);
  case 32:
    return detail::copyFixedRows<32>(src, dst, r);
  case 64:
    return detail::copyFixedRows<64>(src, dst, r);
  default:
    break;
  }
  if (n > 64) {
    for (int64_t i = 0; i < r.rows; ++i, src += r.fromStride, dst += r.toStride)
      std::memcpy(dst, src, n);
  } else if (n >= 32) {
    detail::copyShortRows<32>(src, dst, r);
  } else if (n >= 16) {
    detail::copyShortRows<16>(src, dst, r);
  } else if (n >= 8) {
    detail::copyShortRows<8>(src, dst, r);
  } else if (n >= 4) {
    detail::copyShortRows<4>(src, dst, r);
  } else {
    for (int64_t i = 0; i < r.rows; ++i, src += r.fromStride, dst += r.toStride)
      for (int64_t k = 0; k < n; ++k)
        dst[k] = src[k];
  }
}

/// The number of contiguous rows forEachRowCopy copies `part` in (rows
/// merged where they follow each other in both buffers), without walking
/// them.
int64_t rowCount(const Box &fromBox, const Box &toBox, const Box &part);

/// Copies box `part` between two dense row-major buffers holding boxes
/// `fromBox` and `toBox` (each containing `part`), `elementBytes` each.
void copyBox(const char *from, const Box &fromBox, char *to, const Box &toBox,
             const Box &part, int64_t elementBytes);

/// Why `kernel` of `cs` cannot run with `signature` (empty when it can):
/// one loop offset per loop, a buffer per input and output of the
/// variable's rank and element size, output pieces of the kernel's piece
/// sizes. Input regions, which depend on the vertex, are checked with
/// checkKernelRegion.
std::string checkKernelUse(const MachineProgram &program, const ComputeSet &cs,
                           const Kernel &kernel, const KernelSignature &signature);
/// Why buffer `k` of `signature` cannot take a region of `sizes` (empty when
/// it can).
std::string checkKernelRegion(const KernelSignature &signature, size_t k,
                              llvm::ArrayRef<int64_t> sizes);

/// When the program's steps access a storage variable (through any view):
/// the first step that writes it, the first that reads it, and the last
/// that does either; -1 where none does.
struct VariableUses {
  int64_t firstWrite = -1, firstRead = -1, lastUse = -1;
};
/// Per variable (views' entries stay -1: their uses count for their base).
std::vector<VariableUses> variableUses(const MachineProgram &program);
/// Calls fn(var, write) for each variable `step` reads (write false) and
/// writes (write true).
void forEachAccess(const MachineProgram &program, const Step &step,
                   llvm::function_ref<void(int64_t var, bool write)> fn);
/// Marks Step::perUpdate on every step whose results only feed the
/// program outputs at `perUpdateOutputs` (indices into `outputs`: state
/// stored only when a weight update commits), through other such steps:
/// the steps of the optimizer's update, which the runtime runs once per
/// weight update (and steps whose results nothing reads). Clears the mark
/// of every other step.
void markPerUpdateSteps(MachineProgram &program, llvm::ArrayRef<size_t> perUpdateOutputs);
/// Fails when an output other than those at `perUpdateOutputs` is written
/// by a per-update step: it would be returned (or copied back) stale on the
/// micro-batches that skip the step.
llvm::Error checkPerUpdateOutputs(const MachineProgram &program,
                                  llvm::ArrayRef<size_t> perUpdateOutputs);

/// Whether `region` of `var` is exactly the piece `tile` holds (same
/// elements in the same order), so a vertex on `tile` reads it in place.
bool isLocalPiece(const MachineProgram &program, int64_t var, const Box &region,
                  int64_t tile);

/// Where `region` of `var` lies when one tile holds all of it, dense and
/// row-major (it is a piece, or a block of rows of one): that tile and the
/// region's first element's offset in the tile's piece (in elements), so a
/// vertex on another tile may read it where it is, as a vertex reads its
/// own piece. std::nullopt otherwise (several tiles hold it, it is strided
/// within the piece, it has padding, or `var` is a view other than one
/// inserting or dropping unit dimensions).
struct PiecePart {
  int64_t tile, pieceOffset;
};
std::optional<PiecePart> denseRegionOnOneTile(const MachineProgram &program, int64_t var,
                                              const Box &region);

/// Bytes of `region` of `var` in a padded view's padding: no tile holds
/// them, so no exchange brings them; the vertex reading the region writes
/// them into its receive buffer itself (0 for any other variable).
int64_t paddingBytes(const MachineProgram &program, int64_t var, const Box &region);

/// What a vertex on `tile` reading `region` of `var` gets: whether it reads
/// in place (isLocalPiece), and otherwise the bytes of the region other
/// tiles hold and send it, the contiguous regions they come in (of the
/// source's storage and of the row-major receive buffer: the exchange's
/// per-region cost), and the padding it writes itself (paddingBytes). One
/// look for the tile's piece, or one walk of the region's runs where `var`
/// is a general view (a transpose's reshape): the planner asks this for
/// every input of every candidate it costs.
struct RemoteRead {
  bool local = true;
  int64_t bytes = 0, regions = 0, paddingBytes = 0;
};
RemoteRead remoteRead(const MachineProgram &program, int64_t var, const Box &region,
                      int64_t tile);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_MACHINEPROGRAM_H
