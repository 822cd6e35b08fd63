//===- OutlineHostLoops.cpp - @main's loop nests as functions -------------===//

#include "tessera/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace tessera {
#define GEN_PASS_DEF_OUTLINEHOSTLOOPS
#include "tessera/Codegen/Passes.h.inc"
} // namespace tessera

using namespace mlir;

namespace {

bool isConstant(Operation *op) {
  return op->hasTrait<OpTrait::ConstantLike>() && op->getNumResults() == 1;
}

/// A stack allocation lives until its function returns: it stays in @main,
/// and ends a part.
bool endsPart(Operation &op) {
  return isa<memref::AllocaOp, LLVM::AllocaOp>(op) || op.hasTrait<OpTrait::IsTerminator>();
}

// The default part size, 2,000 operations: enough that calls and functions
// stay few (lowering a call looks its callee up in the whole module), few
// enough that no function is large.
struct OutlineHostLoops : tessera::impl::OutlineHostLoopsBase<OutlineHostLoops> {
  using Base::Base;
  SymbolTable *symbols = nullptr;
  int64_t parts = 0;
  func::FuncOp lastFunction; ///< the last part created

  /// Moves `range` (consecutive operations of @main) into a new function
  /// called in its place.
  void outline(func::FuncOp main, ArrayRef<Operation *> range) {
    llvm::SmallPtrSet<Operation *, 32> inRange(range.begin(), range.end());
    auto definedInRange = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && inRange.contains(def);
    };
    // What the range reads from the rest of @main: constants are cloned in
    // (they fold in the function as they did in @main); the rest become
    // arguments. What the rest reads from the range becomes results.
    llvm::SetVector<Value> arguments, results;
    SmallVector<Operation *> constants;
    for (Operation *op : range) {
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands()) {
          // Values defined inside a range's operation stay with it.
          if (v.getParentRegion() != &main.getBody() || definedInRange(v))
            continue;
          Operation *def = v.getDefiningOp();
          if (def && isConstant(def)) {
            if (!llvm::is_contained(constants, def))
              constants.push_back(def);
          } else {
            arguments.insert(v);
          }
        }
      });
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *user) {
              return !inRange.contains(main.front().findAncestorOpInBlock(*user));
            }))
          results.insert(r);
    }
    OpBuilder moduleBuilder(main);
    moduleBuilder.setInsertionPointAfter(lastFunction ? lastFunction : main);
    auto type = FunctionType::get(&getContext(), ValueRange(arguments.getArrayRef()).getTypes(),
                                  ValueRange(results.getArrayRef()).getTypes());
    Location loc = range.front()->getLoc();
    auto function = func::FuncOp::create(moduleBuilder, loc,
                                         ("main_part_" + Twine(parts++)).str(), type);
    function.setPrivate();
    symbols->insert(function);
    lastFunction = function;
    Block *body = function.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockEnd(body);
    IRMapping mapping;
    for (auto [value, argument] : llvm::zip(arguments, body->getArguments()))
      mapping.map(value, argument);
    for (Operation *constant : constants)
      b.clone(*constant, mapping);
    for (Operation *op : range)
      b.clone(*op, mapping);
    SmallVector<Value> returned;
    for (Value r : results)
      returned.push_back(mapping.lookup(r));
    func::ReturnOp::create(b, loc, returned);

    OpBuilder callBuilder(range.front());
    auto call = func::CallOp::create(callBuilder, loc, function, arguments.getArrayRef());
    for (auto [result, replacement] : llvm::zip(results, call.getResults()))
      Value(result).replaceUsesWithIf(replacement, [&](OpOperand &use) {
        return !inRange.contains(main.front().findAncestorOpInBlock(*use.getOwner()));
      });
    for (Operation *op : llvm::reverse(range)) {
      op->dropAllUses();
      op->erase();
    }
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.isExternal() || !main.getBody().hasOneBlock())
      return;
    SymbolTable table(module);
    symbols = &table;
    // Consecutive operations of @main in parts of about partOperations,
    // each ending with an operation with regions; stack allocations split
    // parts and stay, as do constants. A part without regions stays too.
    SmallVector<SmallVector<Operation *>> ranges(1);
    int64_t size = 0;
    for (Operation &op : main.front()) {
      // Constants stay too: each part that reads one clones it.
      if (isConstant(&op))
        continue;
      if (endsPart(op)) {
        ranges.emplace_back();
        size = 0;
        continue;
      }
      ranges.back().push_back(&op);
      op.walk([&](Operation *) { ++size; });
      if (size >= partOperations && op.getNumRegions() != 0) {
        ranges.emplace_back();
        size = 0;
      }
    }
    for (ArrayRef<Operation *> range : ranges)
      if (llvm::any_of(range, [](Operation *op) { return op->getNumRegions() != 0; }))
        outline(main, range);
  }
};

} // namespace
