//===- Passes.td - conversions between Tessera's dialects ---*- tablegen -*-===//

#ifndef TESSERA_CONVERSION_PASSES_TD
#define TESSERA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertGraphToLinalg : Pass<"convert-graph-to-linalg", "::mlir::ModuleOp"> {
  let summary = "Lower graph ops to linalg, tensor, arith and math";
  let description = [{
    Every graph op becomes structured ops on tensors: elementwise ops and
    broadcasts are `linalg.generic`s whose indexing maps spell out NumPy
    broadcasting; matmul, convolution and pooling are `linalg.generic`
    contractions over their full iteration space (batch, groups, output
    channels, output pixels, reduction over input channels and the window),
    so the tile mapper partitions one uniform form. They accumulate from
    zero; a convolution's bias is an elementwise add after it, which joins
    the elementwise chain that follows (BatchNorm, Relu) and runs in the
    convolution's own vertices (see `ipu-map-tiles`); reductions are
    `linalg.reduce`; data movement is `linalg.transpose`, `tensor.reshape`,
    `tensor.pad`, `tensor.extract_slice`, `tensor.insert_slice` or a
    `linalg.generic` with `tensor.extract` (gather, reflect/edge padding,
    resize). Softmax and the normalisations decompose into reductions and
    elementwise generics.
    `ml_program` globals and loads are left as they are.
    `graph.cross_replica_sum` becomes `ipu.cross_replica_sum`.

    Assumes: static shapes (`graph-require-static-shapes` has run).
    Guarantees: no graph op remains; an op this pass cannot lower (e.g. cubic
    resize) is reported with its location and the pass fails.
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::tessera::ipu::IPUDialect"
  ];
}

#endif // TESSERA_CONVERSION_PASSES_TD
