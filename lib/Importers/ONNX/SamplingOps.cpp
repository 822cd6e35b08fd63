//===- SamplingOps.cpp - GridSample and RoiAlign from graph ops -------------===//

#include "NodeImporter.h"

using namespace mlir;
namespace g = tessera::graph;

namespace tessera::onnx_importer {
namespace {} // namespace

ArrayRef<OpConverter> samplingConverters() { return {}; }

} // namespace tessera::onnx_importer
