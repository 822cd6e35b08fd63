//===- ExecutableCache.h - offline executable cache -------------*- C++ -*-===//
//
// A directory of `<key>.tess` files (`--cache-dir` / TESSERA_CACHE_DIR), as
// PopTorch's executable cache. The key hashes the model's bytes (and any
// external data files it names), every option that changes code, and the
// compiler build itself, so a rebuilt compiler or a changed option misses.
// Entries are written atomically (temporary file + rename); on load the
// executable's checksum and stored key are verified, and a damaged or
// mismatched entry is reported and recompiled.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COMPILER_EXECUTABLECACHE_H
#define TESSERA_COMPILER_EXECUTABLECACHE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace tessera {

/// The cache key (32 hex digits) of compiling `modelPath` with the options
/// described by `optionsText` using the compiler binary `compilerPath`.
llvm::Expected<std::string> computeCacheKey(llvm::StringRef modelPath,
                                            llvm::StringRef optionsText,
                                            llvm::StringRef compilerPath);

enum class CacheOutcome { Hit, Miss, Damaged, KeyMismatch, Untrusted };

/// A cache holds native code that Tessera runs: the cache directory `dir`
/// its kernel cache (`dir/kernels`) and its command records
/// (`dir/commands`, CommandCache.h) must be writable by this user
/// alone (runtime::whyUntrusted), or this error names the path, why, and
/// the fix. Checked before anything in the cache is read.
llvm::Error checkCacheTrusted(llvm::StringRef dir);


struct CacheLookup {
  CacheOutcome outcome = CacheOutcome::Miss;
  std::string entryPath;
  std::string detail; ///< why a damaged or mismatched entry was rejected
};

/// Looks `key` up in `dir`; on a verified hit, copies the entry to `outPath`
/// atomically. An entry someone else could have written is Untrusted (the
/// detail says why) and is not read.
CacheLookup lookupExecutable(llvm::StringRef dir, llvm::StringRef key,
                             llvm::StringRef outPath);

/// Where the executable of `key` is stored in `dir` (`<key>.tess`), the
/// directory created if missing. The compile writes it atomically beside
/// its output (runtime::ExecutableWriter). A directory it creates is
/// writable by its owner only.
llvm::Expected<std::string> cacheEntryPath(llvm::StringRef dir, llvm::StringRef key);

/// Removes the temporary files of compiles killed before their rename,
/// from `dir`, its kernel cache and its command records, once they are an
/// hour old.
void removeStaleCacheTemporaries(llvm::StringRef dir);

} // namespace tessera

#endif // TESSERA_COMPILER_EXECUTABLECACHE_H
