//===- ExecutableImage.cpp - a .tess file's header and checksum -----------===//

#include "tessera/Runtime/ExecutableImage.h"
#include "tessera/Runtime/Executable.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cstring>

namespace endian = llvm::support::endian;
using llvm::StringRef;

namespace tessera::runtime::image {

namespace {
uint64_t hash(StringRef bytes) { return llvm::xxh3_64bits(llvm::arrayRefFromStringRef(bytes)); }
} // namespace

void BlockHasher::feed(StringRef bytes) {
  while (!bytes.empty()) {
    if (partial_.empty() && bytes.size() >= kChecksumBlock) {
      hashes_.push_back(hash(bytes.take_front(kChecksumBlock)));
      bytes = bytes.drop_front(kChecksumBlock);
      continue;
    }
    size_t n = std::min(kChecksumBlock - partial_.size(), bytes.size());
    partial_.append(bytes.take_front(n));
    bytes = bytes.drop_front(n);
    if (partial_.size() == kChecksumBlock) {
      hashes_.push_back(hash(partial_));
      partial_.clear();
    }
  }
}

uint64_t BlockHasher::checksum(StringRef header) {
  if (!partial_.empty()) {
    hashes_.push_back(hash(partial_));
    partial_.clear();
  }
  std::string combined(header.take_front(kHeaderSize));
  std::memset(&combined[kChecksumAt], 0, 8);
  for (uint64_t h : hashes_) {
    char le[8];
    endian::write64le(le, h);
    combined.append(le, 8);
  }
  return hash(combined);
}

uint64_t fileChecksum(StringRef image) {
  BlockHasher hasher;
  hasher.feed(image.drop_front(kHeaderSize));
  return hasher.checksum(image);
}

std::optional<uint64_t> recordedChecksum(StringRef image) {
  if (image.size() < kHeaderSize || std::memcmp(image.data(), kMagic, sizeof(kMagic)) != 0 ||
      endian::read32le(image.data() + kVersionAt) != kExecutableFormatVersion ||
      endian::read32le(image.data() + kHeaderSizeAt) != kHeaderSize ||
      endian::read64le(image.data() + kFileSizeAt) != image.size())
    return std::nullopt;
  return endian::read64le(image.data() + kChecksumAt);
}

} // namespace tessera::runtime::image
