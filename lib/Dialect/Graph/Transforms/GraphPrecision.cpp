//===- GraphPrecision.cpp - run @main in fp16 -----------------------------===//
//
// fp16.16 and fp16.32: weights, constants and every op's result in f16;
// the signature stays f32 with casts at the boundary. The partials type
// (fp16.32's f32) is recorded on the module for the contractions' lowering.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"

#include <cstring>

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHPRECISION
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;
using namespace tessera::graph;

namespace {

bool isF32Tensor(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.getElementType().isF32();
}

RankedTensorType toF16(Type t) {
  auto r = cast<RankedTensorType>(t);
  return r.clone(Float16Type::get(t.getContext()));
}

/// f32 bits to f16 bits, to nearest even.
uint16_t roundToHalf(float f) {
  llvm::APFloat v(f);
  bool lost;
  v.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return static_cast<uint16_t>(v.bitcastToAPInt().getZExtValue());
}

/// A global's f32 value as f16, or null when it cannot be read.
Attribute halfValue(Attribute value, RankedTensorType type) {
  if (auto dense = dyn_cast<DenseFPElementsAttr>(value))
    return dense.mapValues(Float16Type::get(type.getContext()), [](const llvm::APFloat &v) {
      return llvm::APInt(16, roundToHalf(v.convertToFloat()));
    });
  auto resource = dyn_cast<DenseResourceElementsAttr>(value);
  if (!resource || !resource.getRawHandle().getBlob())
    return {};
  ArrayRef<char> data = resource.getRawHandle().getBlob()->getData();
  int64_t n = type.getNumElements();
  if (static_cast<int64_t>(data.size()) != 4 * n)
    return {};
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(2 * n, alignof(uint16_t),
                                                       /*dataIsMutable=*/true);
  char *out = blob.getMutableData().data();
  for (int64_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, data.data() + 4 * i, 4);
    uint16_t h = roundToHalf(f);
    std::memcpy(out + 2 * i, &h, 2);
  }
  return DenseResourceElementsAttr::get(
      toF16(type), (resource.getRawHandle().getKey() + ".f16").str(), std::move(blob));
}

} // namespace

std::string tessera::graph::checkPrecisionOptions(llvm::StringRef precision,
                                                  llvm::StringRef partialsType) {
  if (precision != "fp32" && precision != "fp16.32" && precision != "fp16.16")
    return ("--precision must be fp32, fp16.32 (fp16 storage, float partials) or fp16.16 "
            "(fp16 storage and partials), got '" + precision + "'").str();
  if (!partialsType.empty() && partialsType != "float" && partialsType != "half")
    return ("--partials-type must be float or half, got '" + partialsType + "'").str();
  // The precision's second number is its partials type: another one is a
  // contradiction, not an override.
  if ((precision == "fp16.16" && partialsType == "float") ||
      (precision == "fp16.32" && partialsType == "half"))
    return ("--precision " + precision + " has " +
            (precision == "fp16.16" ? "half" : "float") + " partials, not " + partialsType +
            ": use --precision " + (precision == "fp16.16" ? "fp16.32" : "fp16.16") +
            " for fp16 storage with " + partialsType + " partials")
        .str();
  return {};
}

namespace {

struct GraphPrecision : tessera::graph::impl::GraphPrecisionBase<GraphPrecision> {
  using GraphPrecisionBase::GraphPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (std::string wrong = checkPrecisionOptions(precision, partialsType); !wrong.empty()) {
      module.emitError(wrong);
      return signalPassFailure();
    }
    bool halfPartials = partialsType.empty() ? precision == "fp16.16" : partialsType == "half";
    Builder builder(module.getContext());
    module->setAttr(kPartialsTypeAttrName,
                    TypeAttr::get(halfPartials ? Type(builder.getF16Type())
                                               : Type(builder.getF32Type())));
    if (precision == "fp32")
      return;
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.getBody().getBlocks().size() != 1) {
      module.emitError("graph-precision needs a @main function of one block");
      return signalPassFailure();
    }
    // The weights the function reads, stored in f16.
    SymbolTable symbols(module);
    DenseSet<Operation *> converted;
    for (auto global : module.getOps<ml_program::GlobalOp>()) {
      if (!isF32Tensor(global.getType()))
        continue;
      auto type = cast<RankedTensorType>(global.getType());
      Attribute value;
      if (auto v = global.getValue()) {
        value = halfValue(*v, type);
        if (!value) {
          global.emitError("graph-precision: cannot convert the value of weight '")
              << global.getSymName()
              << "' to fp16: its data is not f32 values of its shape (re-export the model, "
                 "or compile it with --precision fp32)";
          return signalPassFailure();
        }
      }
      global.setType(toF16(type));
      if (value)
        global.setValueAttr(value);
    }
    Block &body = main.getBody().front();
    OpBuilder b(module.getContext());
    // Inputs cast to f16 on entry.
    b.setInsertionPointToStart(&body);
    for (BlockArgument arg : body.getArguments()) {
      if (!isF32Tensor(arg.getType()) || arg.use_empty())
        continue;
      auto cast = CastOp::create(b, arg.getLoc(), toF16(arg.getType()), arg);
      arg.replaceAllUsesExcept(cast.getResult(), cast);
      converted.insert(cast);
    }
    // Every op's f32 results, and constants' values.
    main.walk([&](Operation *op) {
      if (converted.contains(op) || isa<func::ReturnOp>(op))
        return;
      for (OpResult r : op->getResults())
        if (isF32Tensor(r.getType()))
          r.setType(toF16(r.getType()));
      if (auto constant = dyn_cast<ConstantOp>(op))
        if (auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
            dense && dense.getElementType().isF32())
          constant->setAttr("value", halfValue(dense, cast<RankedTensorType>(dense.getType())));
    });
    // Results cast back to the signature's f32.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    b.setInsertionPoint(ret);
    for (auto [i, type] : llvm::enumerate(main.getResultTypes()))
      if (isF32Tensor(type) && ret.getOperand(i).getType() != type)
        ret.setOperand(i, CastOp::create(b, ret.getLoc(), type, ret.getOperand(i)));
  }
};

} // namespace
