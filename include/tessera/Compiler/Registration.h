//===- Registration.h - what Tessera's tools register -----------*- C++ -*-===//
//
// One place that lists the dialects and passes Tessera's tools load, so
// tessera-opt, tessera-compile and the Python module agree (and only what is
// needed is linked in and registered).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COMPILER_REGISTRATION_H
#define TESSERA_COMPILER_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace tessera {

/// Tessera's dialects and the upstream ones its IR uses.
void registerTesseraDialects(mlir::DialectRegistry &registry);

/// Tessera's passes and pipelines plus the upstream passes its pipelines use
/// (canonicalize, cse, symbol-dce, inline, ...). Idempotent.
void registerTesseraPasses();

} // namespace tessera

#endif // TESSERA_COMPILER_REGISTRATION_H
