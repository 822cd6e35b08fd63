//===- ONNXImporter.h - ONNX models to the graph dialect --------*- C++ -*-===//
//
// Imports an ONNX model (opsets 6-17) into a module holding one `func.func
// @main` of graph-dialect ops, with initializers as `ml_program.global`s and
// ONNX node names as `loc("...")`. Every problem with the model (malformed
// protobuf, unsupported opset or operators, missing initializers, unresolved
// symbolic dims, inconsistent shapes) is reported as a diagnostic through the
// context's diagnostic engine and the import returns failure; nothing is
// thrown and nothing aborts.
//
// File I/O stays at the edge: importONNXModel() takes the serialized bytes,
// importONNXFile() reads them (and resolves external data next to the file).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_IMPORTERS_ONNX_ONNXIMPORTER_H
#define TESSERA_IMPORTERS_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessera::onnx_importer {

/// The opsets of the default ("ai.onnx") domain this importer implements.
/// Opset 6 is the last with the legacy `broadcast`/`axis` attributes of
/// binary ops, which the importer translates; older ones changed too much.
constexpr int64_t kMinOpset = 6;
constexpr int64_t kMaxOpset = 17;

/// A value bound to a graph input at compile time (`--constant-input`).
struct ConstantInput {
  std::string elementType;    ///< MLIR spelling: f32, i64, ui8, i1, ...
  std::vector<int64_t> shape;
  std::string data;           ///< row-major, little-endian
};

struct ImportOptions {
  /// Shapes for graph inputs, by name: fixes symbolic dims (`--input-shape`).
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// When positive, a symbolic dimension 0 of every graph input (the batch)
  /// becomes this (--micro-batch-size); inputShapes take precedence.
  int64_t batchSize = 0;
  /// Importing for a training step (tessera-compile --train). A TorchScript
  /// module then runs as model.train() does; an ONNX model states its own
  /// mode (BatchNormalization's training_mode, as torch.onnx.export writes
  /// it with TrainingMode.TRAINING), so the ONNX importer ignores this.
  bool training = false;
  /// Element types of inputs, by name, in MLIR's spelling (`--input-type
  /// ids=i64`): TorchScript records none (its tensors default to f32); an
  /// ONNX model declares its own, which must agree.
  std::map<std::string, std::string> inputTypes;
  /// Graph inputs that become constants (initializers) of this value: the
  /// model is specialized for it, as static-shape compilers need for inputs
  /// that are shapes, axes or sizes. They are no longer inputs of the
  /// compiled program.
  std::map<std::string, ConstantInput> constantInputs;
  /// Where external-data files are looked up (the model's directory).
  std::string externalDataDir;
  /// Name of the model shown in messages and recorded on the module.
  std::string modelName = "model.onnx";
  /// Which tensors stay inline as graph.constant (so that shape
  /// computations fold) instead of becoming ml_program globals: scalars,
  /// and up to this many elements of integer initializers and of Constant
  /// node values. Float initializers are parameters: always globals.
  int64_t inlineIntegerLimit = 1024;
};

/// Parses `bytes` as an ONNX ModelProto and imports it.
mlir::OwningOpRef<mlir::ModuleOp> importONNXModel(llvm::StringRef bytes,
                                                  mlir::MLIRContext *context,
                                                  const ImportOptions &options);

/// Imports from a buffer that is released as soon as it is parsed (so a
/// large model is not held twice).
mlir::OwningOpRef<mlir::ModuleOp>
importONNXModel(std::unique_ptr<llvm::MemoryBuffer> buffer,
                mlir::MLIRContext *context, const ImportOptions &options);

/// Reads `path` and imports it; external data is resolved next to it.
mlir::OwningOpRef<mlir::ModuleOp> importONNXFile(llvm::StringRef path,
                                                 mlir::MLIRContext *context,
                                                 ImportOptions options);

/// Reads a serialized ONNX TensorProto (a backend test's input_N.pb) as a
/// constant input; an error message, or the value.
std::string parseTensorProto(llvm::StringRef bytes, llvm::StringRef what,
                             ConstantInput &value);

/// Parses "name=1x3x224x224" into options.inputShapes; returns an error
/// message, or an empty string on success.
std::string parseInputShape(llvm::StringRef spec, ImportOptions &options);
/// Parses "name=i64" (f32, f16, bf16, f64, i64, i32, i16, i8, ui8, i1) into
/// options.inputTypes; returns an error message, or an empty string.
std::string parseInputType(llvm::StringRef spec, ImportOptions &options);

/// Names of every operator type the importer supports for `opset`.
std::vector<std::string> supportedOperators(int64_t opset);

} // namespace tessera::onnx_importer

#endif // TESSERA_IMPORTERS_ONNX_ONNXIMPORTER_H
