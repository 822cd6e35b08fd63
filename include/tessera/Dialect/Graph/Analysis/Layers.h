//===- Layers.h - a model's repeated blocks, from its op names --*- C++ -*-===//
//
// optimum-graphcore's layers_per_ipu and recompute_checkpoint_every_layer
// count "layers": the model's repeated blocks (BERT's encoder layers,
// ResNet's bottlenecks). Exporters name ops by module path
// ("/encoder/layer.3/attention/MatMul" from torch.onnx,
// "encoder.layer.3.attention" from TorchScript), so a layer is the path up
// to an index, at the shallowest depth where there are several such paths
// (deeper indices are sub-layers: T5's encoder/block.N/layer.M).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_ANALYSIS_LAYERS_H
#define TESSERA_DIALECT_GRAPH_ANALYSIS_LAYERS_H

#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"

#include <string>
#include <vector>

namespace tessera::graph {

/// The first name in `loc` (an ONNX node name, a TorchScript module path),
/// or empty.
std::string nameOf(mlir::Location loc);

struct Layers {
  std::vector<std::string> names; ///< "encoder/layer/3", in order of first appearance
  std::vector<int64_t> layerOf;   ///< per op given: its layer, or -1
};

/// The layers of `ops` (none when fewer than two paths share a depth).
Layers findLayers(llvm::ArrayRef<mlir::Operation *> ops);

} // namespace tessera::graph

#endif // TESSERA_DIALECT_GRAPH_ANALYSIS_LAYERS_H
