//===- IPU.h - the ipu dialect ----------------------------------*- C++ -*-===//
//
// The tile-mapped machine program: #ipu.target, #ipu.mapping, compute sets,
// copies, allocations and views. Conversions between the attributes and the
// runtime's TileMapping live here too, so passes and the program exporter
// agree on them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_IPU_IR_IPU_H
#define TESSERA_DIALECT_IPU_IR_IPU_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tessera/Dialect/IPU/IR/IPUDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tessera/Dialect/IPU/IR/IPUAttrs.h.inc"

#define GET_OP_CLASSES
#include "tessera/Dialect/IPU/IR/IPUOps.h.inc"

#include <optional>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace tessera::target {
struct IPUTarget;
} // namespace tessera::target

namespace tessera::runtime {
struct TileMapping;
struct AccessMap;
} // namespace tessera::runtime

namespace tessera::ipu {

/// The module attribute holding the #ipu.target.
inline constexpr llvm::StringLiteral kTargetAttrName = "ipu.target";
/// The discardable attribute placing function arguments and weight loads.
inline constexpr llvm::StringLiteral kMappingAttrName = "ipu.mapping";
/// On a weight load placed with copies on other tiles (a mirrored mapping,
/// runtime::TileMapping::mirrorCounts): `{counts = array<i64: ...>,
/// tile_strides = array<i64: ...>}`, one entry per mirror dimension.
inline constexpr llvm::StringLiteral kMirrorsAttrName = "ipu.mirrors";
/// On ipu.cross_replica_sum: one #ipu.mapping per result.
inline constexpr llvm::StringLiteral kResultMappingsAttrName = "ipu.mappings";
/// A linalg.generic's #ipu.plan (ipu-plan-tiles -> ipu-map-tiles).
inline constexpr llvm::StringLiteral kPlanAttrName = "ipu.plan";
/// On the module, with ipu-plan-tiles' record-assumed-memory: per tile, the
/// most bytes the planner took it to hold during a step (array<i64>).
inline constexpr llvm::StringLiteral kAssumedTileBytesAttrName = "ipu.assumed_tile_bytes";
/// On a tensor.insert_slice that pads: it becomes an ipu.pad_view (virtual
/// padding, no copy) and the fill of its destination goes.
inline constexpr llvm::StringLiteral kPaddedViewAttrName = "ipu.padded_view";
/// On an ipu.compute_set: per result, the copies a tile holds of it
/// (ipu-stash-activations; runtime::Variable::copies).
inline constexpr llvm::StringLiteral kStashCopiesAttrName = "ipu.stash_copies";
/// Marks a func.func as a vertex kernel.
inline constexpr llvm::StringLiteral kVertexAttrName = "ipu.vertex";

MappingAttr toAttr(mlir::MLIRContext *context, const runtime::TileMapping &m);
runtime::TileMapping fromAttr(MappingAttr attr, llvm::ArrayRef<int64_t> shape);

/// `map` as an AccessMap when every result is a sum of loops with
/// non-negative coefficients plus a constant (a box of loops reads a box of
/// the operand); nullopt otherwise (mod, floordiv, reversed dimensions).
std::optional<runtime::AccessMap> toBoxAccess(mlir::AffineMap map);

/// The model's name for what `loc` points at (an ONNX node's or a
/// TorchScript op's NameLoc, alone or fused), or `fallback`.
std::string locationName(mlir::Location loc, llvm::StringRef fallback);

/// The module's #ipu.target as a full target description (rates included).
/// Errors are diagnostics on the module.
mlir::FailureOr<target::IPUTarget> getTarget(mlir::ModuleOp module);
/// Sets the module's #ipu.target from a target description.
void setTarget(mlir::ModuleOp module, const target::IPUTarget &target);

} // namespace tessera::ipu

#endif // TESSERA_DIALECT_IPU_IR_IPU_H
