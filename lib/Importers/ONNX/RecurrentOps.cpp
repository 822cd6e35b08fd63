//===- RecurrentOps.cpp ---------------------------------------------------------===//

#include "NodeImporter.h"

using namespace mlir;
namespace g = tessera::graph;

namespace tessera::onnx_importer {
namespace {} // namespace

ArrayRef<OpConverter> recurrentConverters() { return {}; }

} // namespace tessera::onnx_importer
