//===- Passes.td - graph dialect passes ---------------------*- tablegen -*-===//

#ifndef TESSERA_DIALECT_GRAPH_TRANSFORMS_PASSES_TD
#define TESSERA_DIALECT_GRAPH_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def GraphInferShapes : Pass<"graph-infer-shapes", "::mlir::func::FuncOp"> {
  let summary = "Propagate static shapes through graph ops and the signature";
  let description = [{
    Re-runs every graph op's type inference in program order and refines
    result types that are less static than what inference yields (for example
    after an input's `?` dims were fixed), then updates the function's result
    types to match its `func.return`.

    Assumes: operands are ranked tensors. Guarantees: every op implementing
    InferTypeOpInterface has exactly its inferred result types. An op whose
    inference fails (shapes that do not fit together) is reported with its
    location and the pass fails.
  }];
  let dependentDialects = ["::tessera::graph::GraphDialect"];
}

def GraphRequireStaticShapes
    : Pass<"graph-require-static-shapes", "::mlir::func::FuncOp"> {
  let summary = "Fail on any tensor whose shape is not fully static";
  let description = [{
    Tile mapping plans memory per tile and needs every size. This pass names
    the first value of each op with a dynamic dim, and, for function
    arguments, the input to give a shape with `--input-shape`.
  }];
}

def GraphFoldGlobalLayouts
    : Pass<"graph-fold-global-layouts", "::mlir::ModuleOp"> {
  let summary = "Apply transposes and reshapes of weights once, at compile time";
  let description = [{
    A `graph.transpose` or `graph.reshape` whose operand is read from an
    immutable `ml_program.global` (Gemm's `transB`, exported Linear layers)
    would move the weight on every run. This pass applies it to the global's
    payload instead: the op is replaced by a load of a new global holding the
    moved data (a reshape shares the old payload). The old global is left for
    `symbol-dce` once it has no users.

    Assumes: globals hold `dense_resource` payloads of byte-sized elements
    (as the importers create them); other globals are left alone.
    Guarantees: no transpose or reshape reads a foldable global directly.
  }];
  let dependentDialects = ["::mlir::ml_program::MLProgramDialect"];
}

#endif // TESSERA_DIALECT_GRAPH_TRANSFORMS_PASSES_TD
