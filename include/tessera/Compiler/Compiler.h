//===- Compiler.h - load a model and run it through the phases --*- C++ -*-===//
//
// The library behind tessera-compile (and, later, the Python module): read a
// model in any supported format, then run the pipelines up to a phase.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COMPILER_COMPILER_H
#define TESSERA_COMPILER_COMPILER_H

#include "tessera/Compiler/Pipelines.h"
#include "tessera/Importers/ONNX/ONNXImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"

#include <functional>

namespace mlir {
class PassManager;
} // namespace mlir

namespace tessera {

enum class InputFormat { ONNX, MLIR };

/// Decides the format from the extension, falling back to the contents
/// (MLIR text and bytecode are recognisable; anything else is tried as ONNX).
InputFormat detectInputFormat(llvm::StringRef path, llvm::StringRef contents);

/// Reads and imports `path` ("-" for stdin). Errors are diagnostics.
mlir::OwningOpRef<mlir::ModuleOp>
loadModel(llvm::StringRef path, mlir::MLIRContext *context,
          const onnx_importer::ImportOptions &importOptions);

struct CompileOptions {
  Phase compileTo = Phase::Graph;
  GraphPipelineOptions graph;
  /// Called on each pass manager before it runs (MLIR CL options, timing,
  /// instrumentation).
  std::function<mlir::LogicalResult(mlir::PassManager &)> configure;
};

/// Runs the phases after `input` up to options.compileTo. Asking for a
/// phase this build does not implement is an error naming the ones it does.
mlir::LogicalResult compileModule(mlir::ModuleOp module,
                                  const CompileOptions &options);

} // namespace tessera

#endif // TESSERA_COMPILER_COMPILER_H
