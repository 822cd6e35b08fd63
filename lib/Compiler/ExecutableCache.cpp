//===- ExecutableCache.cpp - offline executable cache --------------------===//

#include "tessera/Compiler/ExecutableCache.h"
#include "tessera/Support/Error.h"
#include "tessera/Compiler/CommandCache.h"
#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/FileUtils.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <set>

using llvm::StringRef;

namespace tessera {

namespace {
/// Temporary files of compiles killed before their rename ("X.tess.tmp-
/// abc123"): removed once they are older than any compile still running
/// could be (an hour).
void removeStaleTemporaries(StringRef dir) {
  auto cutoff = std::chrono::system_clock::now() - std::chrono::hours(1);
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    if (!llvm::StringRef(it->path()).contains(".tmp-"))
      continue;
    llvm::sys::fs::file_status status;
    if (llvm::sys::fs::status(it->path(), status) ||
        status.type() != llvm::sys::fs::file_type::regular_file)
      continue;
    if (status.getLastModificationTime() < cutoff)
      llvm::sys::fs::remove(it->path());
  }
}
} // namespace

llvm::Expected<std::string> computeCacheKey(StringRef modelPath,
                                            StringRef optionsText,
                                            StringRef compilerPath) {
  llvm::Expected<std::string> model = modelKeyMaterial(modelPath);
  if (!model)
    return model.takeError();
  std::string material = *model;
  llvm::raw_string_ostream os(material);
  os << "options " << optionsText << "\n";
  // The compiler build: its own binary, so any rebuilt compiler misses.
  auto compiler = llvm::MemoryBuffer::getFile(compilerPath, false, false);
  if (!compiler)
    return fail("cannot read the compiler '" + compilerPath +
                "': " + compiler.getError().message());
  os << "compiler " << hashHex((*compiler)->getBuffer()) << "\n";
  return hashHex(material);
}

llvm::Error checkCacheTrusted(StringRef dir) {
  llvm::SmallString<256> kernels(dir), commands(dir);
  llvm::sys::path::append(kernels, "kernels");
  llvm::sys::path::append(commands, "commands");
  for (StringRef path : {dir, StringRef(kernels), StringRef(commands)})
    if (std::string why = runtime::whyUntrusted(path); !why.empty())
      return fail(runtime::untrustedCacheMessage(path, why));
  return llvm::Error::success();
}

CacheLookup lookupExecutable(StringRef dir, StringRef key, StringRef outPath) {
  CacheLookup result;
  llvm::SmallString<256> entry(dir);
  llvm::sys::path::append(entry, key + ".tess");
  result.entryPath = entry.str().str();
  if (!llvm::sys::fs::exists(entry))
    return result;
  if (std::string why = runtime::whyUntrusted(entry); !why.empty()) {
    result.outcome = CacheOutcome::Untrusted;
    result.detail = runtime::untrustedCacheMessage(entry, why);
    return result;
  }
  // The output is a copy, never a hard link: an output edited in place
  // must not change the entry (and every other output of the model). The
  // copy itself is what is checked, then renamed into place, so a damaged
  // or changing entry cannot become the output.
  auto data = llvm::MemoryBuffer::getFile(entry, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!data) {
    result.outcome = CacheOutcome::Damaged;
    result.detail = "cannot read it: " + data.getError().message();
    return result;
  }
  int fd = -1;
  llvm::SmallString<256> tmp;
  // A .tess is code: writable by its owner only (runtime::kCodeFileMode).
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          outPath + ".tmp-%%%%%%", fd, tmp, llvm::sys::fs::OF_None, runtime::kCodeFileMode)) {
    result.outcome = CacheOutcome::Damaged;
    result.detail = "cannot write next to '" + outPath.str() + "': " + ec.message();
    return result;
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << (*data)->getBuffer();
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      result.outcome = CacheOutcome::Damaged;
      result.detail = "cannot write '" + tmp.str().str() + "' (disk full?)";
      return result;
    }
  }
  auto discard = [&](CacheOutcome outcome, std::string detail) {
    llvm::sys::fs::remove(tmp);
    result.outcome = outcome;
    result.detail = std::move(detail);
    return result;
  };
  auto exe = runtime::Executable::load(tmp);
  if (!exe)
    return discard(CacheOutcome::Damaged, llvm::toString(exe.takeError()));
  if ((*exe)->metadata().cacheKey != key)
    return discard(CacheOutcome::KeyMismatch,
                   "stored key " + (*exe)->metadata().cacheKey);
  if (std::error_code ec = llvm::sys::fs::rename(tmp, outPath))
    return discard(CacheOutcome::Damaged,
                   "cannot rename the copy into '" + outPath.str() + "': " + ec.message());
  result.outcome = CacheOutcome::Hit;
  return result;
}

llvm::Expected<std::string> cacheEntryPath(StringRef dir, StringRef key) {
  using namespace llvm::sys::fs;
  if (std::error_code ec = create_directories(
          dir, /*IgnoreExisting=*/true,
          static_cast<perms>(owner_all | group_read | group_exe | others_read | others_exe)))
    return fail("cannot create the cache directory '" + dir + "': " + ec.message());
  llvm::SmallString<256> entry(dir);
  llvm::sys::path::append(entry, key + ".tess");
  return entry.str().str();
}

void removeStaleCacheTemporaries(StringRef dir) {
  removeStaleTemporaries(dir);
  // The kernel cache's objects and the command records are written the
  // same way, beside them.
  for (StringRef folder : {"kernels", "commands"}) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, folder);
    removeStaleTemporaries(path);
  }
}

} // namespace tessera
