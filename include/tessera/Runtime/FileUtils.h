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
/// renaming over it would replace it.
llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef data);

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
