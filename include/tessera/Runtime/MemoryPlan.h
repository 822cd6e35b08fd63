//===- MemoryPlan.h - place a program's data in tile memory -----*- C++ -*-===//
//
// Liveness-based allocation of every variable, every vertex's exchange
// (receive) buffer and the vertices' code into each tile's bytes. The
// compiler runs it to prove a program fits (and to report where it does not);
// the runtime runs the same deterministic plan to place data in its tile
// memories, so both agree byte for byte. No MLIR here.
//
// A variable takes one offset on every tile that holds a piece of it (as
// Poplar lays out variables); code sits at the top of each tile's memory.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_MEMORYPLAN_H
#define TESSERA_RUNTIME_MEMORYPLAN_H

#include "tessera/Runtime/MachineProgram.h"

#include "llvm/Support/JSON.h"

#include <optional>

namespace tessera::runtime {

/// Bytes by what they hold (the categories of the out-of-memory report).
struct MemoryByCategory {
  int64_t weights = 0;     ///< weights and constants
  int64_t activations = 0; ///< inputs and values computed on the device
  int64_t temporaries = 0; ///< exchange receive buffers
  int64_t code = 0;        ///< vertex code
  int64_t total() const { return weights + activations + temporaries + code; }
};

struct MemoryPlan {
  int64_t bytesPerTile = 0;
  /// Per variable: byte offset of its piece on every tile that holds one
  /// (-1 for views).
  std::vector<int64_t> variableOffset;
  /// [compute set][input]: byte offset of the per-tile receive buffer, or -1
  /// where every vertex reads that input in place.
  std::vector<std::vector<int64_t>> exchangeOffset;
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
  /// For an allocation during the program: its name, how many tiles it
  /// spans and the offset it would take (the same on all of them).
  std::string placing;
  int64_t spanTiles = 0, offset = 0;
  std::string message() const;
  llvm::json::Value toJSON() const;
};

/// Plans `program` on `numTiles` tiles of `bytesPerTile`. On overflow returns
/// an error whose message is `report->message()` and fills `report`.
llvm::Expected<MemoryPlan> planMemory(const MachineProgram &program,
                                      int64_t numTiles, int64_t bytesPerTile,
                                      OutOfMemory *report = nullptr);

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
