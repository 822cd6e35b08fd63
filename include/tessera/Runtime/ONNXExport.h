//===- ONNXExport.h - trained weights back into an ONNX model ---*- C++ -*-===//
//
// tessera-run --export-onnx: the model a training executable was compiled
// from, with its initializers replaced by the trained values, so that the
// result runs anywhere ONNX does (ONNX Runtime, a Tessera inference
// compile). Only the runtime's tensors and onnx_proto: no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_ONNXEXPORT_H
#define TESSERA_RUNTIME_ONNXEXPORT_H

#include "tessera/Runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace tessera::runtime {

/// Reads the ONNX model `source`, replaces each initializer named in
/// `values` with that tensor (which must have the initializer's shape and
/// element type), and writes the model to `path` atomically. A name that is
/// no initializer of the model, a mismatched tensor, or a model whose
/// weights live in external data files is an error; nothing is written then.
llvm::Error exportONNXWithInitializers(
    llvm::StringRef source,
    const std::vector<std::pair<std::string, Tensor>> &values,
    llvm::StringRef path);

/// Whether exportONNXWithInitializers can rewrite `source` (an ONNX model,
/// weights not in external files): checked before training, so that a run
/// does not fail at its end.
llvm::Error checkONNXExportSource(llvm::StringRef source);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_ONNXEXPORT_H
