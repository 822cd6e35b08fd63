//===- IPUTarget.h - the IPU machine descriptions ---------------*- C++ -*-===//
//
// The numbers of each IPU generation the compiler plans for and the IPU
// model runs with, in one place (see shared/IPU_MODEL.md for their sources):
// a user picks a target by name and a better figure changes here only.
// The formulas that turn them into cycles are CostModel.h's. No MLIR: the
// runtime uses these too.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TARGET_IPUTARGET_H
#define TESSERA_TARGET_IPUTARGET_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::target {

struct IPUTarget {
  std::string name;              ///< "ipu1", "ipu2", "bow"
  int64_t numIPUs = 1;
  int64_t tilesPerIPU = 0;
  int64_t bytesPerTile = 0;
  double clockHz = 0;
  int64_t workersPerTile = 6;
  int64_t f16MacsPerCycle = 0;   ///< per tile, AMP
  int64_t f32MacsPerCycle = 0;   ///< per tile
  int64_t loadBytesPerCycle = 16;
  int64_t exchangeBytesPerCycle = 4; ///< send or receive, per tile
  int64_t tilesPerSupertile = 2;
  int64_t syncCycles = 0;        ///< on-chip
  int64_t globalSyncCycles = 0;  ///< across IPUs
  double ipuLinkBytesPerSecond = 0; ///< per chip, all links
  /// IPUs that IPU-Links join directly (a Pod64 rack of IPU-Machines);
  /// beyond, replicas reach each other over GW-Links.
  int64_t ipuLinkDomainIPUs = 64;
  /// GW-Link bandwidth per chip, both directions: an IPU-Machine's two
  /// 100 Gb/s GW-Links shared by its four IPUs.
  double gwLinkBytesPerSecond = 0;
  double hostLinkBytesPerSecond = 0;
  int64_t randomBitsPerCycle = 64; ///< per tile
  // Cost-model rates (per tile) for vertices that are not contractions and
  // for the fixed costs of each phase.
  int64_t vectorBytesPerCycle = 8;   ///< 64-bit SIMD: 2 fp32 or 4 fp16 lanes
  int64_t vertexOverheadCycles = 60; ///< launch + loop setup per vertex
  /// Per row of a vertex's output (each run of its innermost dimension):
  /// the inner loop's set-up -- the row's addresses and repeat count -- as
  /// poplibs' two-dimensional vertices charge it. A piece cut into short
  /// rows pays it often.
  int64_t vertexCyclesPerRow = 4;
  int64_t exchangeOverheadCycles = 30; ///< per exchange phase, once synced
  /// Per contiguous region a tile sends or receives in an exchange: its
  /// exchange code sets a new address for each (an element-by-element
  /// gather costs this per element, a long row once).
  int64_t exchangeCyclesPerRegion = 1;

  /// Vector instructions a transcendental function (exp, tanh, ...) or a
  /// division takes per element, against one for the arithmetic.
  int64_t transcendentalInstructions = 4;
  /// Tile memory a vertex's code takes: a base, a loop per dimension of its
  /// nest, and its body's operations (from typical poplibs vertex sizes).
  int64_t vertexCodeBaseBytes = 256;
  int64_t vertexCodeBytesPerLoop = 48;
  int64_t vertexCodeBytesPerOperation = 32;

  int64_t totalTiles() const { return numIPUs * tilesPerIPU; }
  int64_t memoryPerIPU() const { return tilesPerIPU * bytesPerTile; }
  /// Peak FLOPs per second of all IPUs (a MAC is two FLOPs).
  double peakFlops(bool f16) const {
    return 2.0 * (f16 ? f16MacsPerCycle : f32MacsPerCycle) * totalTiles() * clockHz;
  }
  /// One line: "ipu2: 1 IPU x 1472 tiles x 624 KiB, 1.33 GHz, 62.6 TFLOPS fp32".
  std::string describe() const;
};

/// The targets Tessera knows, by name.
std::vector<std::string> targetNames();

/// `name` with `numIPUs` IPUs and, optionally, fewer tiles per IPU (as
/// Poplar's IPUModel allows: small models of the chip make out-of-memory
/// tests cheap). Out-of-range values are errors saying what is allowed.
llvm::Expected<IPUTarget> makeTarget(llvm::StringRef name, int64_t numIPUs = 1,
                                     std::optional<int64_t> tilesPerIPU = std::nullopt);

} // namespace tessera::target

#endif // TESSERA_TARGET_IPUTARGET_H
