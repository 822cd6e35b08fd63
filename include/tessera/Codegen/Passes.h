//===- Passes.h - native code generation passes -----------------*- C++ -*-===//

#ifndef TESSERA_CODEGEN_PASSES_H
#define TESSERA_CODEGEN_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tessera {

#define GEN_PASS_DECL
#include "tessera/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessera/Codegen/Passes.h.inc"

} // namespace tessera

#endif // TESSERA_CODEGEN_PASSES_H
