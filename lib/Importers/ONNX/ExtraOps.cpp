//===- ExtraOps.cpp ---------------------------------------------------------===//

#include "NodeImporter.h"

using namespace mlir;
namespace g = tessera::graph;

namespace tessera::onnx_importer {
namespace {} // namespace

ArrayRef<OpConverter> extraConverters() { return {}; }

} // namespace tessera::onnx_importer
