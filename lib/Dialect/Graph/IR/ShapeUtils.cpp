//===- ShapeUtils.cpp - shape rules shared by ops and importers ----------===//

#include "tessera/Dialect/Graph/IR/ShapeUtils.h"
#include "mlir/IR/BuiltinTypeInterfaces.h"

#include <algorithm>

namespace tessera::graph {

static_assert(kDynamicDim == mlir::ShapedType::kDynamic,
              "shape helpers and MLIR must agree on the unknown-dim marker");

std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  llvm::SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t r = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (l == 1) {
      result[i] = r;
    } else if (r == 1) {
      result[i] = l;
    } else if (l == kDynamicDim) {
      result[i] = r;
    } else if (r == kDynamicDim || l == r) {
      result[i] = l;
    } else {
      return std::nullopt;
    }
  }
  return result;
}

bool isBroadcastableTo(llvm::ArrayRef<int64_t> from,
                       llvm::ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t f = from[i], t = to[i + offset];
    if (f != 1 && f != t && f != kDynamicDim && t != kDynamicDim)
      return false;
  }
  return true;
}

std::optional<int64_t> windowOutputSize(int64_t input, int64_t kernel,
                                        int64_t stride, int64_t padLow,
                                        int64_t padHigh, int64_t dilation,
                                        bool ceilMode) {
  if (input == kDynamicDim)
    return kDynamicDim;
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t padded = input + padLow + padHigh;
  if (padded < span || stride <= 0)
    return std::nullopt;
  int64_t steps = padded - span;
  int64_t out = (ceilMode ? (steps + stride - 1) / stride : steps / stride) + 1;
  // With ceil mode, a last window that would start inside the trailing
  // padding is dropped (PyTorch and ONNX agree on this).
  if (ceilMode && (out - 1) * stride >= input + padLow)
    --out;
  return out;
}

int64_t sliceOutputSize(int64_t start, int64_t limit, int64_t stride) {
  if (stride > 0)
    return std::max<int64_t>(0, (limit - start + stride - 1) / stride);
  return std::max<int64_t>(0, (start - limit + (-stride) - 1) / (-stride));
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == kDynamicDim)
      return kDynamicDim;
    n *= d;
  }
  return n;
}

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += 'x';
    s += shape[i] == kDynamicDim ? "?" : std::to_string(shape[i]);
  }
  return s;
}


llvm::SmallVector<double> windowCounts(int64_t in, int64_t out, int64_t kernel,
                                       int64_t stride, int64_t padLow,
                                       int64_t padHigh,
                                 int64_t dilation, bool includePad) {
  llvm::SmallVector<double> counts;
  int64_t lo = includePad ? -padLow : 0, hi = includePad ? in + padHigh : in;
  for (int64_t o = 0; o < out; ++o) {
    int64_t c = 0;
    for (int64_t r = 0; r < kernel; ++r) {
      int64_t pos = o * stride - padLow + r * dilation;
      c += pos >= lo && pos < hi;
    }
    counts.push_back(std::max<int64_t>(c, 1));
  }
  return counts;
}

} // namespace tessera::graph
