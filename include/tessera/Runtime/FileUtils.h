//===- FileUtils.h - writing output files safely ----------------*- C++ -*-===//

#ifndef TESSERA_RUNTIME_FILEUTILS_H
#define TESSERA_RUNTIME_FILEUTILS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>

namespace tessera::runtime {

/// Writes `data` to `path` through a temporary file in the same directory
/// and a rename, so a crash or a concurrent reader never sees a partial
/// file. A device or pipe (/dev/null, a FIFO) is written in place instead:
/// renaming over it would replace it. The file is created with `mode`
/// (less the umask); files that hold code pass kCodeFileMode.
llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef data,
                                unsigned mode = 0666);

/// The mode of files holding native code (executables, cache entries):
/// writable by their owner only, whatever the umask allows.
constexpr unsigned kCodeFileMode = 0644;

/// Why the code stored at `path` (a file, or a directory of cache entries)
/// may have been put there by someone else, as ssh's StrictModes judges a
/// key file: it is writable by its group or by others, or owned by another
/// user than this process's (root's are trusted); for a directory, also
/// any directory above it in which others could replace it (writable by
/// group or others without the sticky bit, or owned by another user).
/// Empty when only this user (or root) can have written what is there. A
/// path that does not exist yet is judged by the directories above it.
std::string whyUntrusted(llvm::StringRef path);

/// The error refusing the cache directory or entry `path` because of `why`
/// (whyUntrusted's text), with the fix.
std::string untrustedCacheMessage(llvm::StringRef path, llvm::StringRef why);

/// The whole of the regular file `path`. A device, pipe or directory is an
/// error naming it: /dev/zero would be read until memory runs out.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readRegularFile(llvm::StringRef path);

/// Out of memory (LLVM's allocators, operator new) and failures to get
/// system resources (a thread) become "<tool>: error: out of memory ..."
/// and exit status 1, after removing the temporary files of outputs being
/// written (writeFileAtomically), instead of an abort. Every tool calls it
/// first thing in main.
void installResourceErrorHandlers(const char *tool);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_FILEUTILS_H
