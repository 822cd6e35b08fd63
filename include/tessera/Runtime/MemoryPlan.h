//===- MemoryPlan.h - place a program's data in tile memory -----*- C++ -*-===//
//
// Liveness-based allocation of every variable, every vertex's exchange
// (receive) buffer and the vertices' code into each tile's bytes. The
// compiler runs it to prove a program fits (and to report where it does not);
// the runtime runs the same deterministic plan to place data in its tile
// memories, so both agree byte for byte. No MLIR here.
//
// Each tile's memory is laid out on its own, as Poplar does: a variable's
// piece takes the lowest offset free on its tile, so what one tile holds
// never pushes another tile's data up. Code sits at the top of each tile's
// memory, the weights below it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_MEMORYPLAN_H
#define TESSERA_RUNTIME_MEMORYPLAN_H

#include "tessera/Runtime/MachineProgram.h"

#include "llvm/Support/JSON.h"

#include <optional>

namespace tessera::runtime {

class PhasePool;

/// Bytes by what they hold (the categories of the out-of-memory report).
struct MemoryByCategory {
  int64_t weights = 0;     ///< weights and constants
  int64_t activations = 0; ///< inputs and values computed on the device
  int64_t temporaries = 0; ///< exchange receive buffers
  int64_t code = 0;        ///< vertex code
  int64_t total() const { return weights + activations + temporaries + code; }
};

/// Where one allocation sits on each tile of its span.
struct TileOffsets {
  int64_t firstTile = 0;
  /// From firstTile on, one per tile (-1 on tiles it does not span); a
  /// single entry when the offset is the same on every tile.
  std::vector<int32_t> offsets;
  bool empty() const { return offsets.empty(); }
  int64_t on(int64_t tile) const {
    return offsets.size() == 1 ? offsets[0] : offsets[tile - firstTile];
  }
};

struct MemoryPlan {
  int64_t bytesPerTile = 0;
  /// Per variable: byte offsets of its pieces (empty for views and for
  /// variables without elements).
  std::vector<TileOffsets> variables;
  /// [compute set][input]: byte offsets of the per-tile receive buffers,
  /// empty where every vertex reads that input in place.
  std::vector<std::vector<TileOffsets>> receiveBuffers;
  /// The byte offset of `var`'s piece on `tile` (0 for a variable with no
  /// elements); `var` is a storage variable.
  int64_t variableOffset(int64_t var, int64_t tile) const {
    return variables[var].empty() ? 0 : variables[var].on(tile);
  }
  /// Whether some vertex of compute set `cs` receives its input `input`.
  bool receives(int64_t cs, int64_t input) const { return !receiveBuffers[cs][input].empty(); }
  int64_t receiveOffset(int64_t cs, int64_t input, int64_t tile) const {
    return receiveBuffers[cs][input].on(tile);
  }
  /// Per tile: peak bytes in use and, at that peak, by category.
  std::vector<int64_t> peakBytes;
  std::vector<MemoryByCategory> peakByCategory;
};

/// Why a program does not fit: the first allocation that overflowed.
/// How an out-of-memory report begins (OutOfMemory::message), so that a
/// caller can tell it from other failures.
inline constexpr llvm::StringLiteral kOutOfTileMemory = "out of tile memory";

struct OutOfMemory {
  int64_t tile = 0;
  int64_t needed = 0, available = 0;
  std::string step; ///< the step being allocated for, with its location
  struct Item {
    std::string name;
    std::string category; ///< "weights", "activations", "temporaries", "code"
    int64_t bytes;
  };
  /// What is live on that tile at that point, largest first (all of it; the
  /// message shows the first few).
  std::vector<Item> live;
  MemoryByCategory byCategory;
  /// For an allocation during the program: its name, its bytes on `tile`
  /// and the largest run of free bytes there below the weights and code
  /// (what it did not fit in when the tile's free bytes are in pieces).
  std::string placing;
  int64_t placingBytes = 0, largestFree = 0;
  std::string message() const;
  llvm::json::Value toJSON() const;
};

/// What the plan places and when, for reports (the report page's memory
/// and liveness views): every allocation with its live steps and its bytes
/// per tile, whether or not the program fits.
struct MemoryLayout {
  struct Item {
    std::string name;
    std::string category; ///< "weights", "activations" or "temporaries"
    /// The storage variable it holds, or -1 for a receive buffer.
    int64_t variable = -1;
    /// A receive buffer's compute set and input, else -1.
    int64_t computeSet = -1, input = -1;
    /// Steps it is live in, inclusive (weights: the whole program).
    int64_t birth = 0, death = 0;
    /// (tile, bytes), bytes > 0; a stashed variable's copies included.
    std::vector<std::pair<int64_t, int64_t>> perTile;
  };
  std::vector<Item> items;
  /// Per tile: the vertex code it holds, for the whole program.
  std::vector<int64_t> code;
  int64_t steps = 0;
};

/// Plans `program` on `numTiles` tiles of `bytesPerTile`. On overflow returns
/// an error whose message is `report->message()` and fills `report`. With a
/// `pool`, the receive buffers are sized on its threads (the same plan).
/// With a `layout`, fills it with what the plan places (also on overflow:
/// then it is what the program would need).
llvm::Expected<MemoryPlan> planMemory(const MachineProgram &program,
                                      int64_t numTiles, int64_t bytesPerTile,
                                      OutOfMemory *report = nullptr,
                                      PhasePool *pool = nullptr,
                                      MemoryLayout *layout = nullptr);

/// `v` with thousands separated by commas, as reports print counts.
std::string withCommas(int64_t v);

/// One line, as tessera-compile --summary prints it: the fullest tile's
/// peak bytes against the mean over all tiles (how evenly a plan spreads).
void printTileMemory(const MemoryPlan &plan, llvm::raw_ostream &os);

/// Per-tile usage and totals by category, for profiles and --report.
llvm::json::Value memoryReportJSON(const MachineProgram &program,
                                   const MemoryPlan &plan);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_MEMORYPLAN_H
