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

def FoldEmptyTensors : Pass<"fold-empty-tensors", "::mlir::ModuleOp"> {
  let summary = "Replace ops that compute nothing by what they would give";
  let description = [{
    Zero-size tensors are ordinary values, but an op over one computes
    nothing, and a loop of size 0 has no tiling: this pass takes such ops
    out of linalg-on-tensors before anything plans or lowers them.

    - A structured (linalg) op with a loop of size 0 runs its body zero
      times: its results are its inits. Where only reduction loops are
      empty that is the reduction's identity (a matmul over a 0-long
      reduction gives the zeros it starts from, a product over nothing 1).
    - Any other op without side effects whose results are all statically
      empty yields `tensor.empty`.
    - `tensor.pad` of an empty source with a pad value defined outside its
      body is a `linalg.fill` of the value; `tensor.insert_slice` of an
      empty source is its destination; `tensor.concat` drops empty
      operands.

    A maximum or minimum over nothing never gets here: the graph dialect
    refuses it, naming the op, as ONNX Runtime does.

    Assumes: static shapes. Guarantees: every structured op on tensors with
    static shapes left has only non-empty loops, and every pure op with
    static shapes that yields only empty tensors is a `tensor.empty`. Ops
    with side effects or regions of control flow, dynamic shapes, and pads
    whose value depends on the position are left as they are.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // TESSERA_CONVERSION_PASSES_TD
