//===- FileUtils.h - writing output files safely ----------------*- C++ -*-===//

#ifndef TESSERA_RUNTIME_FILEUTILS_H
#define TESSERA_RUNTIME_FILEUTILS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace tessera::runtime {

/// Writes `data` to `path` through a temporary file in the same directory
/// and a rename, so a crash or a concurrent reader never sees a partial
/// file. A device or pipe (/dev/null, a FIFO) is written in place instead:
/// renaming over it would replace it.
llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef data);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_FILEUTILS_H
