//===- ExternalizeWeights.cpp - weights become arguments of @main --------===//

#include "tessera/Codegen/Passes.h"
#include "tessera/Dialect/Graph/IR/Placement.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/SymbolTable.h"

namespace tessera {
#define GEN_PASS_DEF_EXTERNALIZEWEIGHTS
#include "tessera/Codegen/Passes.h.inc"
} // namespace tessera

using namespace mlir;

namespace {

struct ExternalizeWeights
    : tessera::impl::ExternalizeWeightsBase<ExternalizeWeights> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("codegen needs an entry function @main");
      return signalPassFailure();
    }
    // One new argument per global, in the order of their first loads, added
    // at once (inserting them one by one rebuilds the signature each time).
    llvm::StringMap<unsigned> argOf;
    SmallVector<ml_program::GlobalLoadConstOp> loads;
    main.walk([&](ml_program::GlobalLoadConstOp load) { loads.push_back(load); });
    SmallVector<unsigned> indices;
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    SmallVector<Location> locs;
    unsigned numArgs = main.getNumArguments();
    for (ml_program::GlobalLoadConstOp load : loads) {
      StringRef name = load.getGlobal().getLeafReference();
      if (!argOf.try_emplace(name, numArgs + types.size()).second)
        continue;
      indices.push_back(numArgs);
      types.push_back(load.getType());
      attrs.push_back(DictionaryAttr::get(
          &getContext(), {NamedAttribute(StringAttr::get(&getContext(), "tessera.weight"),
                                         StringAttr::get(&getContext(), name))}));
      locs.push_back(load.getLoc());
    }
    if (failed(main.insertArguments(indices, types, attrs, locs)))
      return signalPassFailure();
    Block &entry = main.getBody().front();
    for (ml_program::GlobalLoadConstOp load : loads) {
      load.replaceAllUsesWith(entry.getArgument(argOf[load.getGlobal().getLeafReference()]));
      load.erase();
    }
    // State arguments and updates (training) name the globals that held
    // their initial values; the executable has those now.
    for (unsigned i = 0; i < main.getNumArguments(); ++i)
      main.removeArgAttr(i, tessera::graph::kStateAttrName);
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      main.removeResultAttr(i, StringAttr::get(&getContext(), tessera::graph::kStateUpdateAttrName));
    // Every global's users in one walk of the module (asking per global
    // walked the module once for each).
    SymbolTableCollection symbolTables;
    SymbolUserMap users(symbolTables, module);
    for (auto global : llvm::make_early_inc_range(module.getOps<ml_program::GlobalOp>())) {
      if (!users.useEmpty(global)) {
        global.emitError("weight global is read outside @main");
        return signalPassFailure();
      }
      global.erase();
    }
  }
};

} // namespace
