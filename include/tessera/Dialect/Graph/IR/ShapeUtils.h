//===- ShapeUtils.h - shape rules shared by ops and importers ---*- C++ -*-===//
//
// Pure functions over shapes (vectors of dimension sizes, where
// mlir::ShapedType::kDynamic marks an unknown size). The graph ops' type
// inference, the importers and the cost model all use these, so a rule such
// as "how big is a strided convolution's output" is written once.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_IR_SHAPEUTILS_H
#define TESSERA_DIALECT_GRAPH_IR_SHAPEUTILS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <optional>
#include <string>

namespace tessera::graph {

/// Marker for an unknown dimension; equal to mlir::ShapedType::kDynamic.
constexpr int64_t kDynamicDim = INT64_MIN;

/// NumPy broadcast of two shapes, aligned at the trailing dimension.
/// Returns std::nullopt when two known sizes differ and neither is 1.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// True if `from` broadcasts to exactly `to` (the direction of Expand).
bool isBroadcastableTo(llvm::ArrayRef<int64_t> from,
                       llvm::ArrayRef<int64_t> to);

/// Output size of one spatial dim of a convolution or pooling window.
/// Returns std::nullopt if the (padded) input is smaller than the window.
std::optional<int64_t> windowOutputSize(int64_t input, int64_t kernel,
                                        int64_t stride, int64_t padLow,
                                        int64_t padHigh, int64_t dilation,
                                        bool ceilMode);

/// For each output position of a 1-D pooling window, the number of window
/// elements inside the input (or, with `includePad`, inside the padded
/// input); at least 1. Average pooling divides by these, and its gradient
/// too.
llvm::SmallVector<double> windowCounts(int64_t in, int64_t out, int64_t kernel,
                                       int64_t stride, int64_t padLow,
                                       int64_t padHigh, int64_t dilation,
                                       bool includePad);

/// Number of elements a strided slice (see graph.slice) selects.
int64_t sliceOutputSize(int64_t start, int64_t limit, int64_t stride);

/// Product of the sizes, or kDynamicDim if any is unknown.
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// Formats a shape as "1x3x224x224" ("?" for unknown dims).
std::string formatShape(llvm::ArrayRef<int64_t> shape);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_IR_SHAPEUTILS_H
