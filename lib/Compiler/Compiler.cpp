//===- Compiler.cpp - load a model and run it through the phases ---------===//

#include "tessera/Compiler/Compiler.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

namespace tessera {

InputFormat detectInputFormat(StringRef path, StringRef contents) {
  StringRef ext = llvm::sys::path::extension(path);
  if (ext == ".mlir" || ext == ".mlirbc")
    return InputFormat::MLIR;
  if (ext == ".onnx")
    return InputFormat::ONNX;
  if (isBytecode(llvm::MemoryBufferRef(contents, path)))
    return InputFormat::MLIR;
  StringRef head = contents.ltrim();
  if (head.starts_with("module") || head.starts_with("func.func") ||
      head.starts_with("//") || head.starts_with("#") ||
      head.starts_with("ml_program"))
    return InputFormat::MLIR;
  return InputFormat::ONNX;
}

OwningOpRef<ModuleOp>
loadModel(StringRef path, MLIRContext *context,
          const onnx_importer::ImportOptions &importOptions) {
  std::string error;
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/false,
                                                 /*RequiresNullTerminator=*/false);
  if (!file) {
    emitError(UnknownLoc::get(context))
        << "cannot read '" << path << "': " << file.getError().message();
    return nullptr;
  }
  StringRef contents = (*file)->getBuffer();
  if (detectInputFormat(path, contents) == InputFormat::ONNX) {
    onnx_importer::ImportOptions options = importOptions;
    if (options.externalDataDir.empty())
      options.externalDataDir = llvm::sys::path::parent_path(path).str();
    if (options.modelName == onnx_importer::ImportOptions().modelName)
      options.modelName = path.str();
    return onnx_importer::importONNXModel(std::move(*file), context, options);
  }
  if (!importOptions.inputShapes.empty()) {
    emitError(UnknownLoc::get(context))
        << "--input-shape applies to ONNX models; an MLIR input already "
           "states its types";
    return nullptr;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*file), SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, context);
}

LogicalResult compileModule(ModuleOp module, const CompileOptions &options) {
  if (!isPhaseAvailable(options.compileTo))
    return emitError(module.getLoc())
           << "--compile-to=" << phaseName(options.compileTo)
           << " is not implemented in this version of Tessera; available "
              "phases: "
           << availablePhaseList();
  if (options.compileTo == Phase::Input)
    return success();
  PassManager pm(module->getContext(), ModuleOp::getOperationName());
  buildGraphPipeline(pm, options.graph);
  // Inference models pass through training and partitioning unchanged.
  if (options.compileTo >= Phase::Linalg)
    buildLinalgPipeline(pm);
  if (options.configure && failed(options.configure(pm)))
    return failure();
  return pm.run(module);
}

} // namespace tessera
