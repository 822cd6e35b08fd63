//===- ExecutableCache.cpp - offline executable cache --------------------===//

#include "tessera/Compiler/ExecutableCache.h"
#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/FileUtils.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <set>

using llvm::StringRef;

namespace tessera {

namespace {
llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

std::string hex(llvm::XXH128_hash_t h) {
  return llvm::utohexstr(h.high64, /*LowerCase=*/true, 16) +
         llvm::utohexstr(h.low64, /*LowerCase=*/true, 16);
}

llvm::XXH128_hash_t hashBytes(StringRef bytes) {
  return llvm::xxh3_128bits(llvm::arrayRefFromStringRef(bytes));
}

/// Copies `from` to `to` through a temporary file in `to`'s directory.
llvm::Error atomicCopy(StringRef from, StringRef to) {
  auto data = llvm::MemoryBuffer::getFile(from, false, false);
  if (!data)
    return fail("cannot read '" + from + "': " + data.getError().message());
  return runtime::writeFileAtomically(to, (*data)->getBuffer());
}
} // namespace

llvm::Expected<std::string> computeCacheKey(StringRef modelPath,
                                            StringRef optionsText,
                                            StringRef compilerPath) {
  std::string material;
  llvm::raw_string_ostream os(material);
  auto model = llvm::MemoryBuffer::getFileOrSTDIN(modelPath, false, false);
  if (!model)
    return fail("cannot read '" + modelPath + "': " + model.getError().message());
  StringRef bytes = (*model)->getBuffer();
  os << "model " << hex(hashBytes(bytes)) << "\n";
  // External data files are named by "location" entries of the model's
  // tensors (protobuf: key "location", then the value string); hash them
  // too. One scan of the bytes for the serialized key finds them all.
  StringRef dir = llvm::sys::path::parent_path(modelPath);
  std::set<std::string> files;
  static constexpr char kLocationKey[] = "\x0a\x08location\x12";
  for (size_t at = bytes.find(kLocationKey); at != StringRef::npos;
       at = bytes.find(kLocationKey, at + 1)) {
    size_t p = at + sizeof(kLocationKey) - 1;
    uint64_t length = 0;
    for (int shift = 0; p < bytes.size() && shift < 35; shift += 7) {
      uint8_t b = bytes[p++];
      length |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        break;
    }
    if (length > 0 && length < 4096 && p + length <= bytes.size())
      files.insert(bytes.substr(p, length).str());
  }
  for (const std::string &name : files) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    auto data = llvm::MemoryBuffer::getFile(path, false, false);
    // A missing file is the importer's error to report, with context.
    os << "data " << name << " "
       << (data ? hex(hashBytes((*data)->getBuffer())) : std::string("missing"))
       << "\n";
  }
  os << "options " << optionsText << "\n";
  // The compiler build: its own binary, so any rebuilt compiler misses.
  auto compiler = llvm::MemoryBuffer::getFile(compilerPath, false, false);
  if (!compiler)
    return fail("cannot read the compiler '" + compilerPath +
                "': " + compiler.getError().message());
  os << "compiler " << hex(hashBytes((*compiler)->getBuffer())) << "\n";
  return hex(hashBytes(material));
}

CacheLookup lookupExecutable(StringRef dir, StringRef key, StringRef outPath) {
  CacheLookup result;
  llvm::SmallString<256> entry(dir);
  llvm::sys::path::append(entry, key + ".tess");
  result.entryPath = entry.str().str();
  if (!llvm::sys::fs::exists(entry))
    return result;
  auto exe = runtime::Executable::load(entry);
  if (!exe) {
    result.outcome = CacheOutcome::Damaged;
    result.detail = llvm::toString(exe.takeError());
    return result;
  }
  if ((*exe)->metadata().cacheKey != key) {
    result.outcome = CacheOutcome::KeyMismatch;
    result.detail = "stored key " + (*exe)->metadata().cacheKey;
    return result;
  }
  // A hard link costs nothing and is atomic through the rename; copy when
  // the output is on another file system.
  llvm::SmallString<256> tmp;
  if (!llvm::sys::fs::createUniqueFile(outPath + ".tmp-%%%%%%", tmp)) {
    llvm::sys::fs::remove(tmp);
    if (!llvm::sys::fs::create_hard_link(entry, tmp)) {
      if (!llvm::sys::fs::rename(tmp, outPath)) {
        result.outcome = CacheOutcome::Hit;
        return result;
      }
      llvm::sys::fs::remove(tmp);
    }
  }
  if (llvm::Error err = atomicCopy(entry, outPath)) {
    result.outcome = CacheOutcome::Damaged;
    result.detail = llvm::toString(std::move(err));
    return result;
  }
  result.outcome = CacheOutcome::Hit;
  return result;
}

llvm::Error storeExecutable(StringRef dir, StringRef key, StringRef path) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return fail("cannot create the cache directory '" + dir + "': " + ec.message());
  llvm::SmallString<256> entry(dir);
  llvm::sys::path::append(entry, key + ".tess");
  return atomicCopy(path, entry);
}

} // namespace tessera
