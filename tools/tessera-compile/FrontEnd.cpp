//===- FrontEnd.cpp - tessera-compile: a cache hit, or the compiler -------===//
//
// What `tessera-compile` runs first. A command line the compiler has built
// (or found in the executable cache) before, with the same model, files,
// environment, host CPU and compiler, is recorded in the cache; this front
// end finds the record and copies the executable it names, checked against
// its recorded checksum, to the output. It links LLVM's support library
// statically and nothing else, so the hit loads no MLIR and no LLVM shared
// library. Any other command line runs the compiler in
// `<root>/libexec/tessera-compile`, which takes the same arguments (see
// include/tessera/Compiler/CommandCache.h).
//
//===----------------------------------------------------------------------===//

#include "tessera/Compiler/CommandCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

/// The entry `command` was recorded with, copied to its output: by its
/// files' stamps, or else by their contents (then recorded by stamps too,
/// for the next run). Nothing when neither is recorded or checks out.
static std::optional<std::string> lookUp(const tessera::CacheCommand &command,
                                         llvm::StringRef root) {
  // A file whose last change is this recent could still be being written
  // (and file systems with 2-second times could hide the write).
  auto settledBefore = std::chrono::system_clock::now() - std::chrono::seconds(3);
  std::string identity = tessera::compilerFilesIdentity(root);
  tessera::FileStamps before = tessera::fileStamps(command, settledBefore);
  std::string stamped = tessera::stampedCommandKey(command, identity, before);
  if (before.settled)
    if (std::optional<std::string> entry =
            tessera::copyRecordedExecutable(command.cacheDir, stamped, command.outputPath))
      return entry;
  bool external = false;
  llvm::Expected<std::string> key = tessera::commandKey(command, identity, &external);
  if (!key) {
    llvm::consumeError(key.takeError()); // the compiler says what it cannot read
    return std::nullopt;
  }
  std::optional<std::string> entry =
      tessera::copyRecordedExecutable(command.cacheDir, *key, command.outputPath);
  // The contents read were the stamped ones if the stamps did not move.
  if (entry && before.settled && !external &&
      tessera::fileStamps(command, settledBefore).text == before.text)
    llvm::consumeError(tessera::recordCommand(command.cacheDir, stamped, *entry));
  return entry;
}

int main(int argc, char **argv) {
  std::string root = tessera::programRoot();
  std::vector<std::string> arguments(argv + 1, argv + argc);
  std::optional<std::string> cacheDirFromEnv;
  if (const char *dir = std::getenv("TESSERA_CACHE_DIR"))
    cacheDirFromEnv = dir;
  if (std::optional<tessera::CacheCommand> command =
          tessera::readCacheCommand(arguments, cacheDirFromEnv);
      command && !root.empty())
    if (std::optional<std::string> entry = lookUp(*command, root)) {
      std::fprintf(stderr, "tessera-compile: cache hit: %s -> %s\n", entry->c_str(),
                   command->outputPath.c_str());
      return 0;
    }
  if (root.empty()) {
    std::fprintf(stderr, "tessera-compile: error: cannot find where this program is "
                         "(/proc/self/exe), so not where the compiler is\n");
    return 1;
  }
  llvm::SmallString<256> compiler(root);
  llvm::sys::path::append(compiler, "libexec", "tessera-compile");
  ::execv(compiler.c_str(), argv);
  std::fprintf(stderr,
               "tessera-compile: error: cannot start the compiler '%s': %s (rebuild Tessera: "
               "scripts/build.sh)\n",
               compiler.c_str(), std::strerror(errno));
  return 1;
}
