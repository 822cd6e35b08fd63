//===- TorchScriptImporter.h - TorchScript modules to the graph dialect ---===//
//
// Imports a `torch.jit.save`d module (traced or scripted) into a module
// holding one `func.func @main` of graph-dialect ops, as the ONNX importer
// does. The module is loaded and frozen with libtorch (calls inlined,
// parameters folded into constants, which become `ml_program.global`s named
// after the module path, e.g. `layer1.0.conv1.weight`); its forward graph is
// then *evaluated at compile time*: everything that does not depend on the
// input tensors' values (shapes, Python scalars, lists, strings, branches on
// `self.training` or on shapes, loops over modules) is computed with
// libtorch's own operators, and only the tensor computation is emitted.
//
// Source ranges of the original Python code become `loc(...)`s (with the
// module path as a name). Branches and loops that depend on tensor values
// fail with a diagnostic naming the source line; unsupported aten operators
// are listed all at once. Nothing is thrown: every problem is a diagnostic
// through the context's engine and the import returns null.
//
// No libtorch type appears here: the Python package and the tools include
// this header without libtorch's headers. The importer itself is a plugin
// (libTesseraTorchScriptPlugin.so) loaded on first use, so that tools which
// never see a TorchScript module do not pay for loading libtorch (~0.8 s per
// process). File I/O stays at the edge: importTorchScriptModule() takes the
// archive's bytes.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_IMPORTERS_TORCHSCRIPT_TORCHSCRIPTIMPORTER_H
#define TESSERA_IMPORTERS_TORCHSCRIPT_TORCHSCRIPTIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera::torchscript_importer {

struct ImportOptions {
  /// Shapes of forward()'s tensor arguments, by name (`--input-shape`).
  /// TorchScript records no shapes, so every tensor argument needs one; an
  /// Optional[Tensor] argument without a shape is passed as None.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Element types (MLIR spelling: f32, i64, ...) of tensor arguments that
  /// are not f32.
  std::map<std::string, std::string> inputTypes;
  /// Name of the model shown in messages and recorded on the module.
  std::string modelName = "model.pt";
  /// Tensors up to this many elements stay inline as graph.constant; larger
  /// ones (weights) become ml_program globals.
  int64_t inlineLimit = 16;
  /// Import forward() as model.train() runs it, for a training step: the
  /// module is frozen without inference rewrites (batch norm stays apart
  /// from its convolution), branches on self.training take the training
  /// side, and batch norm uses the batch's statistics and updates its
  /// running-statistics buffers in place.
  bool training = false;
};

/// True if `contents` looks like a TorchScript archive (a zip file).
bool isTorchScriptArchive(llvm::StringRef contents);

/// Loads the archive held in `bytes` and imports its forward method.
mlir::OwningOpRef<mlir::ModuleOp>
importTorchScriptModule(llvm::StringRef bytes, mlir::MLIRContext *context,
                        const ImportOptions &options);

/// Reads `path` and imports it.
mlir::OwningOpRef<mlir::ModuleOp>
importTorchScriptFile(llvm::StringRef path, mlir::MLIRContext *context,
                      ImportOptions options);

/// Names of the aten operators the importer converts to graph ops (besides
/// these, any operator is evaluated at compile time when its inputs are
/// constants); an error if the plugin cannot be loaded.
llvm::Expected<std::vector<std::string>> supportedOperators();

/// The plugin file that imports TorchScript (the first that exists of
/// $TESSERA_TORCHSCRIPT_PLUGIN, the path it was built to, and lib/ next to
/// this program), or empty: its bytes shape the executables it imports, so
/// the executable cache's key covers them.
std::string pluginPath();

} // namespace tessera::torchscript_importer

#endif // TESSERA_IMPORTERS_TORCHSCRIPT_TORCHSCRIPTIMPORTER_H
