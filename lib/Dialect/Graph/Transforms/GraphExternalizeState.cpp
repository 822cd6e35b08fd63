//===- GraphExternalizeState.cpp - mutable globals as arguments/results --===//
//
// After this pass @main is a pure function of (inputs, state) returning
// (outputs, state updates): every later pass, tile mapping and the host
// reference code see no side effects. The runtime closes the loop: it keeps
// the state resident between runs and copies each update back into its
// argument, as XLA aliases a donated input with an output.
//
//===----------------------------------------------------------------------===//

#include "FuncResults.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"
#include "tessera/Dialect/Graph/IR/Placement.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/ADT/MapVector.h"

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHEXTERNALIZESTATE
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;

namespace tessera::graph {
namespace {

struct GraphExternalizeState
    : impl::GraphExternalizeStateBase<GraphExternalizeState> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    auto main = symbols.lookup<func::FuncOp>("main");
    if (!main)
      return;
    Block &body = main.front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(main.getContext());

    // Arguments in the order of first read; a global only stored is read
    // too (its argument carries the initial value).
    llvm::MapVector<StringAttr, BlockArgument> stateArgs;
    auto argumentFor = [&](StringAttr name, Type type, Location loc) {
      auto [it, inserted] = stateArgs.try_emplace(name, BlockArgument());
      if (!inserted)
        return it->second;
      unsigned index = main.getNumArguments();
      auto attrs = b.getDictionaryAttr(
          {b.getNamedAttr("graph.name", name),
           b.getNamedAttr(kStateAttrName, FlatSymbolRefAttr::get(name))});
      if (failed(main.insertArgument(index, type, attrs, loc)))
        return BlockArgument();
      it->second = main.getArgument(index);
      return it->second;
    };
    llvm::MapVector<StringAttr, Value> updates;
    llvm::DenseSet<StringAttr> perUpdate;
    bool failed = false;
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op)) {
        StringAttr name = load.getGlobal().getRootReference();
        if (updates.count(name)) {
          load.emitError("global ") << name << " is read after it is stored";
          failed = true;
          continue;
        }
        BlockArgument arg = argumentFor(name, load.getType(), load.getLoc());
        load.replaceAllUsesWith(arg);
        load.erase();
      } else if (auto store = dyn_cast<ml_program::GlobalStoreOp>(op)) {
        StringAttr name = store.getGlobal().getRootReference();
        auto global = symbols.lookup<ml_program::GlobalOp>(name);
        if (!global || updates.count(name)) {
          store.emitError("global ")
              << name << (global ? " is stored twice" : " does not exist");
          failed = true;
          continue;
        }
        argumentFor(name, global.getType(), store.getLoc());
        updates[name] = store.getValue();
        if (store->hasAttr(kPerUpdateAttrName))
          perUpdate.insert(name);
        store.erase();
      }
    }
    if (failed)
      return signalPassFailure();

    SmallVector<Value> results(ret.getOperands());
    SmallVector<Attribute> attrs = resultAttrDicts(main);
    for (auto &[name, value] : updates) {
      results.push_back(value);
      SmallVector<NamedAttribute> dict{
          b.getNamedAttr("graph.name", b.getStringAttr(name.str() + ".update")),
          b.getNamedAttr(kStateUpdateAttrName, FlatSymbolRefAttr::get(name))};
      if (perUpdate.contains(name))
        dict.push_back(b.getNamedAttr(kPerUpdateAttrName, b.getUnitAttr()));
      attrs.push_back(b.getDictionaryAttr(dict));
    }
    setResults(main, results, attrs);
  }
};

} // namespace
} // namespace tessera::graph
