//===- Passes.td - native code generation passes ------------*- tablegen -*-===//

#ifndef TESSERA_CODEGEN_PASSES_TD
#define TESSERA_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExternalizeWeights : Pass<"codegen-externalize-weights", "::mlir::ModuleOp"> {
  let summary = "Turn weight globals into trailing arguments of @main";
  let description = [{
    Native code does not embed weights: the runtime maps them from the
    executable and passes them in. Every `ml_program.global_load_const` in
    `@main` becomes a use of a new trailing argument of `@main` carrying the
    attribute `tessera.weight = "<global name>"` (one argument per global, in
    order of first use), and the globals are erased.

    Assumes: one entry function `@main`, immutable globals read only there.
    Guarantees: no ml_program op remains.
  }];
}

def OrderLoopsForVectors : Pass<"codegen-order-loops-for-vectors", "::mlir::ModuleOp"> {
  let summary = "Interchange linalg.generic loops so the innermost loop is vectorizable";
  let description = [{
    `convert-linalg-to-loops` nests loops in iterator order, which for
    contractions puts a reduction innermost (a serial chain of adds into one
    output element, reloaded and stored every iteration). This pass
    interchanges each `linalg.generic` with reduction loops so that

      outer parallel loops (original order), reduction loops (original order),
      the parallel loop of the output's last dimension

    is the nesting: the innermost loop then walks the output row (and, for a
    matmul or a stride-1 convolution, the input row) contiguously and
    independently, which LLVM's loop vectorizer turns into vector code
    (matmul becomes the i-k-j order, a convolution the oc-ic-kh-kw-oh-ow order).

    Named linalg ops with reduction loops are generalized first. Ops without
    reduction loops, or whose output's last dimension is not a loop of its
    own, are left alone. Numerics change only by the order in
    which each output element's sum is accumulated — unchanged here, since
    every output element still adds its terms in the original reduction order.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

#endif // TESSERA_CODEGEN_PASSES_TD
