//===- VectorizeContractions.h - which reductions are register-tiled -*- C++ -*-===//
//
// codegen-vectorize-contractions turns each `out = combine(out, a [* b])`
// reduction it recognizes into register tiles whose accumulators start at
// the value of the fill just before it: that fill then costs no pass over
// the output. The planner's vertex estimates ask the same question of a
// vertex's reduction while it is still on tensors, so that they charge the
// fill exactly where the code makes it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_CODEGEN_VECTORIZECONTRACTIONS_H
#define TESSERA_CODEGEN_VECTORIZECONTRACTIONS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace tessera::codegen {

/// Whether codegen-vectorize-contractions register-tiles `op` (on buffers,
/// or on tensors once bufferized: static shapes keep static strides) and
/// folds a fill of its output just before it into its accumulators.
bool foldsFillIntoAccumulators(mlir::linalg::GenericOp op);

} // namespace tessera::codegen

#endif // TESSERA_CODEGEN_VECTORIZECONTRACTIONS_H
