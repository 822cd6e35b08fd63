//===- Passes.h - conversions between Tessera's dialects --------*- C++ -*-===//
//
// Conversion passes, declared in Passes.td. Each lives in its own
// Conversion/<From>To<To>/ folder with a populate*Patterns() entry point so
// its patterns can be reused without the pass.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_CONVERSION_PASSES_H
#define TESSERA_CONVERSION_PASSES_H

#include "tessera/Conversion/GraphToLinalg/GraphToLinalg.h"
#include "tessera/Dialect/IPU/IR/IPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tessera {

#define GEN_PASS_DECL
#include "tessera/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessera/Conversion/Passes.h.inc"

} // namespace tessera

#endif // TESSERA_CONVERSION_PASSES_H
