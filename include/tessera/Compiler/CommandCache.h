//===- CommandCache.h - a cache hit without loading the compiler -*- C++ -*-===//
//
// `tessera-compile` is two programs: a front end that links LLVM's support
// library only, and the compiler it starts on a miss. A command line that
// compiled (or hit the executable cache) once is recorded in the cache
// under a key of its own, the *command key*: its arguments, the contents of
// the files they name, the TESSERA_ environment, the host CPU and the
// compiler's files. Run again, the front end finds the record, checks the
// entry it names against the checksum recorded with it, and copies it to
// the output (after one such hit, a second record keyed by the files'
// stamps rather than their contents skips reading the model too), without loading MLIR, LLVM's code generators or the model
// importers: a hit costs reading the model and copying the executable.
// Anything else (no record, a record or an entry that does not check out, a
// command that must print more than the hit) goes to the compiler, whose
// executable cache (ExecutableCache.h) is the authority; a record only
// names one of its entries.
//
// Everything here needs LLVM's support library and nothing else: the front
// end compiles it in statically.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COMPILER_COMMANDCACHE_H
#define TESSERA_COMPILER_COMMANDCACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// The xxh3-128 hash of `bytes` as 32 hex digits: the form of every cache
/// key, and of the hashes of what they cover.
std::string hashHex(llvm::StringRef bytes);

/// What the front end reads of a tessera-compile command line.
struct CacheCommand {
  std::string outputPath; ///< -o
  std::string cacheDir;   ///< --cache-dir, else $TESSERA_CACHE_DIR
  /// Every argument, as given (the output path's value left out: the same
  /// compile into another file is the same executable).
  std::vector<std::string> arguments;
  /// The existing regular files the arguments name, whole (the model) or
  /// after an '=' (`--constant-input x=x.npy`), outputs left out.
  std::vector<std::string> files;
};

/// Reads `arguments` (argv without the program name). Nothing when the
/// command's answer cannot be a cache lookup: no cache directory, no
/// explicit `-o` file (or `-o -`), the model on standard input, response
/// files (`@file`) or `--`.
std::optional<CacheCommand> readCacheCommand(llvm::ArrayRef<std::string> arguments,
                                             std::optional<std::string> cacheDirFromEnv);

/// What a cache key takes of the model at `path`: a line with the xxh3-128
/// hash of its bytes, and one per external data file an ONNX model there
/// names (by their "location" entries, beside the model) with its hash, or
/// "missing". An error when `path` cannot be read.
llvm::Expected<std::string> modelKeyMaterial(llvm::StringRef path);

/// The xxh3-128 hash (32 hex digits) of the file at `path` and of any
/// external data files an ONNX model there names (by their "location"
/// entries, beside the model); a missing external file hashes as
/// "missing". An error when `path` cannot be read.
llvm::Expected<std::string> hashModelFile(llvm::StringRef path);

/// The compiler a front end in `<root>/bin` starts (`<root>/libexec/
/// tessera-compile`) and the shared libraries of ours it loads, by content;
/// the MLIR and LLVM libraries by path, size and time.
std::string compilerFilesIdentity(llvm::StringRef root);

/// `<root>` of the running program (`<root>/bin/tessera-compile` or
/// `<root>/libexec/tessera-compile`).
std::string programRoot();

/// The command key (32 hex digits) of `command` run by the compiler with
/// `compilerIdentity`, from the contents of the files it names; an error
/// when one cannot be read. `namesExternalData` is set when an ONNX model
/// among them names external data files.
llvm::Expected<std::string> commandKey(const CacheCommand &command,
                                       llvm::StringRef compilerIdentity,
                                       bool *namesExternalData = nullptr);

/// The files a command names as the file system stamps them (device,
/// inode, size, modification and change times), and whether each last
/// changed before `settledBefore`: a file changing while it was read could
/// otherwise keep the stamp it was read with.
struct FileStamps {
  std::string text;
  bool settled = true;
};
FileStamps fileStamps(const CacheCommand &command,
                      std::chrono::system_clock::time_point settledBefore);

/// The key of `command` from its files' stamps instead of their contents,
/// as ccache's direct mode: recorded only after a hit by content, when the
/// files had settled and kept their stamps while they were read and name
/// no external data, so a stamped hit reads no model at all.
std::string stampedCommandKey(const CacheCommand &command, llvm::StringRef compilerIdentity,
                              const FileStamps &stamps);

/// Where the record of `key` lives in `cacheDir`.
std::string commandRecordPath(llvm::StringRef cacheDir, llvm::StringRef key);

/// The front end's lookup: when `cacheDir` records `key` and the entry it
/// names is trusted (runtime::whyUntrusted) and has the recorded checksum,
/// copies it to `outputPath` atomically and returns the entry's path.
/// Nothing otherwise (the compiler then decides, and says why).
std::optional<std::string> copyRecordedExecutable(llvm::StringRef cacheDir,
                                                  llvm::StringRef key,
                                                  llvm::StringRef outputPath);

/// Records in `cacheDir` that the command with `key` builds the cache entry
/// `entryPath` (with the checksum its header records).
llvm::Error recordCommand(llvm::StringRef cacheDir, llvm::StringRef key,
                          llvm::StringRef entryPath);

} // namespace tessera

#endif // TESSERA_COMPILER_COMMANDCACHE_H
