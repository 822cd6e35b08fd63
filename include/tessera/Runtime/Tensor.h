//===- Tensor.h - host tensors for the runtime and its tools ----*- C++ -*-===//
//
// A dense row-major host tensor (element type, shape, bytes) and the file
// formats users hand to tessera-run: NumPy .npy and .npz (stored, not
// compressed). No MLIR here: the runtime must not need it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TENSOR_H
#define TESSERA_RUNTIME_TENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::runtime {

/// Element types, named as in MLIR (f32, i64, i1, ...).
enum class DType { F32, F64, F16, BF16, I64, I32, I16, I8, U8, U16, U32, U64, Bool };

llvm::StringRef dtypeName(DType t);
llvm::Expected<DType> parseDType(llvm::StringRef mlirName);

/// The most elements a tensor read from a file (an executable's metadata,
/// a .npy or .npz) may have: the bound the compiler puts on declared
/// shapes, 2^36 (256 GiB of f32).
constexpr int64_t kMaxTensorElements = int64_t(1) << 36;
/// The element count of `shape`, or nothing when a dimension is negative or
/// the count exceeds kMaxTensorElements (checked before it can overflow).
std::optional<int64_t> boundedNumElements(llvm::ArrayRef<int64_t> shape);
size_t dtypeSize(DType t);
/// Whether tile memory holds `a` and `b` alike: the same type, or integers
/// of one width (the machine program is signless; the executable's
/// signature says which of its integers are unsigned).
bool sameStorage(DType a, DType b);
/// Elements of a shape, and "1x3x224x224xf32" for a shape and type.
int64_t numElements(const std::vector<int64_t> &shape);
std::string typeString(const std::vector<int64_t> &shape, DType t);

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t numElements() const { return runtime::numElements(shape); }
  std::string typeString() const { return runtime::typeString(shape, dtype); }

  /// A tensor of `shape` and `dtype`, all bytes zero.
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
  /// A 0-d tensor holding `v` (f32 or i64).
  static Tensor scalar(float v);
  static Tensor scalar(int64_t v);
};

/// Reads a .npy file (little-endian, C order).
llvm::Expected<Tensor> readNpy(llvm::StringRef path);
llvm::Expected<Tensor> parseNpy(llvm::StringRef bytes, llvm::StringRef what);
/// Reads every array of an uncompressed .npz, by name (without ".npy").
llvm::Expected<std::map<std::string, Tensor>> readNpz(llvm::StringRef path);
/// The same from bytes in memory; `what` names them in messages.
llvm::Expected<std::map<std::string, Tensor>> parseNpz(llvm::StringRef bytes,
                                                       llvm::StringRef what);
std::string serializeNpy(const Tensor &t);
/// Writes arrays as an uncompressed .npz, atomically (temp file + rename).
llvm::Error writeNpz(llvm::StringRef path,
                     const std::vector<std::pair<std::string, Tensor>> &arrays);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TENSOR_H
