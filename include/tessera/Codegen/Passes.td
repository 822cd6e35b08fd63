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

#endif // TESSERA_CODEGEN_PASSES_TD
