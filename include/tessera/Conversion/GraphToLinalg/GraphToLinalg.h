//===- GraphToLinalg.h - graph ops to linalg/tensor/arith/math --*- C++ -*-===//

#ifndef TESSERA_CONVERSION_GRAPHTOLINALG_GRAPHTOLINALG_H
#define TESSERA_CONVERSION_GRAPHTOLINALG_GRAPHTOLINALG_H

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace tessera {

/// Patterns lowering every graph op to linalg, tensor, arith and math.
void populateGraphToLinalgPatterns(mlir::RewritePatternSet &patterns);

} // namespace tessera

#endif // TESSERA_CONVERSION_GRAPHTOLINALG_GRAPHTOLINALG_H
