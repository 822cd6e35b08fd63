//===- Error.h - the one way the libraries report a failure -----*- C++ -*-===//
//
// Every library returns an llvm::Error whose message names the place and
// what to do; they build it here instead of each file defining its own.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SUPPORT_ERROR_H
#define TESSERA_SUPPORT_ERROR_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace tessera {

/// An error carrying `message` (no error code: the message is for the user).
inline llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace tessera

#endif // TESSERA_SUPPORT_ERROR_H
