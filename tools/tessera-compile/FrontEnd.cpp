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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

int main(int argc, char **argv) {
  std::string root = tessera::programRoot();
  std::vector<std::string> arguments(argv + 1, argv + argc);
  std::optional<std::string> cacheDirFromEnv;
  if (const char *dir = std::getenv("TESSERA_CACHE_DIR"))
    cacheDirFromEnv = dir;
  if (std::optional<tessera::CacheCommand> command =
          tessera::readCacheCommand(arguments, cacheDirFromEnv);
      command && !root.empty()) {
    llvm::Expected<std::string> key =
        tessera::commandKey(*command, tessera::compilerFilesIdentity(root));
    if (!key) {
      llvm::consumeError(key.takeError()); // the compiler says what it cannot read
    } else if (std::optional<std::string> entry = tessera::copyRecordedExecutable(
                   command->cacheDir, *key, command->outputPath)) {
      std::fprintf(stderr, "tessera-compile: cache hit: %s -> %s\n", entry->c_str(),
                   command->outputPath.c_str());
      return 0;
    }
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
