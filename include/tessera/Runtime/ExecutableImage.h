//===- ExecutableImage.h - a .tess file's header and checksum ---*- C++ -*-===//
//
// The bytes of a `.tess` before anything reads its sections: the header's
// layout and the checksum that covers every byte of the file. Apart from
// the rest of the format so that a program that only checks or copies
// executables (tessera-compile's cache front end) needs LLVM's support
// library and nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_EXECUTABLEIMAGE_H
#define TESSERA_RUNTIME_EXECUTABLEIMAGE_H

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::runtime::image {

constexpr char kMagic[8] = {'T', 'E', 'S', 'S', 'E', 'R', 'A', '\0'};
constexpr size_t kHeaderSize = 128;

// Header fields (byte offsets).
enum : size_t {
  kVersionAt = 8,      // u32
  kHeaderSizeAt = 12,  // u32
  kFileSizeAt = 16,    // u64
  kChecksumAt = 24,    // u64
  kMetaOffsetAt = 32,  // u64, then size at 40
  kCodeOffsetAt = 48,  // u64, then size at 56
  kWeightOffsetAt = 64 // u64, then size at 72
};

/// The checksum hashes the bytes after the header in blocks of this size,
/// then the header (its checksum field zeroed) with the blocks' hashes: a
/// writer that produces the file in pieces (the weights first, while the
/// compile goes on) hashes each block as it passes, with no image of the
/// whole file in memory.
constexpr size_t kChecksumBlock = size_t(1) << 20;

/// Hashes what follows the header, fed in file order in pieces of any size.
class BlockHasher {
public:
  void feed(llvm::StringRef bytes);
  /// The checksum of a file with `header` and the bytes fed so far.
  uint64_t checksum(llvm::StringRef header);

private:
  std::vector<uint64_t> hashes_;
  std::string partial_;
};

/// The checksum of a whole image. It covers every byte but the checksum
/// field itself, so header damage is caught too.
uint64_t fileChecksum(llvm::StringRef image);

/// The checksum the header of `image` records, when `image` starts like an
/// executable of this format version and is as long as its header says;
/// nothing otherwise. An undamaged image's equals fileChecksum(image).
std::optional<uint64_t> recordedChecksum(llvm::StringRef image);

} // namespace tessera::runtime::image

#endif // TESSERA_RUNTIME_EXECUTABLEIMAGE_H
