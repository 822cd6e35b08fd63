//===- ExternalizeWeights.cpp - weights become arguments of @main --------===//

#include "tessera/Codegen/Passes.h"

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
    llvm::StringMap<unsigned> argOf;
    SmallVector<ml_program::GlobalLoadConstOp> loads;
    main.walk([&](ml_program::GlobalLoadConstOp load) { loads.push_back(load); });
    Block &entry = main.getBody().front();
    for (ml_program::GlobalLoadConstOp load : loads) {
      StringRef name = load.getGlobal().getLeafReference();
      auto [it, inserted] = argOf.try_emplace(name, main.getNumArguments());
      if (inserted) {
        if (failed(main.insertArgument(it->second, load.getType(),
                                       DictionaryAttr::get(&getContext()),
                                       load.getLoc())))
          return signalPassFailure();
        main.setArgAttr(it->second, "tessera.weight",
                        StringAttr::get(&getContext(), name));
      }
      load.replaceAllUsesWith(entry.getArgument(it->second));
      load.erase();
    }
    // State arguments and updates (training) name the globals that held
    // their initial values; the executable has those now.
    for (unsigned i = 0; i < main.getNumArguments(); ++i)
      main.removeArgAttr(i, "graph.state");
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      main.removeResultAttr(i, StringAttr::get(&getContext(), "graph.state_update"));
    for (auto global : llvm::make_early_inc_range(module.getOps<ml_program::GlobalOp>())) {
      if (!SymbolTable::symbolKnownUseEmpty(global, module)) {
        global.emitError("weight global is read outside @main");
        return signalPassFailure();
      }
      global.erase();
    }
  }
};

} // namespace
