//===- Placement.cpp - placing the ops rewrites add ------------------------===//

#include "tessera/Dialect/Graph/IR/Placement.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace tessera::graph {

void placeLike(Operation *from, Block::iterator begin, Block::iterator end) {
  auto stage = placedStage(from);
  auto ipu = placedIpu(from);
  if (!stage || !ipu)
    return;
  for (auto it = begin; it != end; ++it)
    if (!placedIpu(&*it))
      setPlacement(&*it, *stage, *ipu);
}

void completePlacement(Block &block) {
  bool placed = false;
  for (Operation &op : block)
    placed |= placedStage(&op).has_value();
  if (!placed)
    return;
  auto latestDefiner = [](Operation &op, bool tensorsOnly) {
    Operation *latest = nullptr;
    for (Value v : op.getOperands()) {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (tensorsOnly && (!type || type.getRank() == 0))
        continue;
      if (Operation *def = v.getDefiningOp();
          def && def->getNumOperands() > 0 && placedStage(def) &&
          (!latest || *placedStage(def) > *placedStage(latest)))
        latest = def;
    }
    return latest;
  };
  std::optional<int64_t> prevStage, prevIpu;
  for (Operation &op : block.without_terminator()) {
    if (placedStage(&op)) {
      prevStage = placedStage(&op);
      prevIpu = placedIpu(&op);
      continue;
    }
    if (op.getNumOperands() == 0)
      continue;
    Operation *latest = latestDefiner(op, /*tensorsOnly=*/true);
    if (!latest)
      latest = latestDefiner(op, /*tensorsOnly=*/false);
    if (latest)
      setPlacement(&op, *placedStage(latest), *placedIpu(latest));
    else if (prevStage)
      setPlacement(&op, *prevStage, *prevIpu);
  }
  // What is left reads nothing placed: with its earliest placed reader.
  for (Operation &op : llvm::reverse(block.without_terminator())) {
    if (placedStage(&op))
      continue;
    Operation *earliest = nullptr;
    for (Operation *user : op.getUsers())
      if (placedStage(user) && (!earliest || *placedStage(user) < *placedStage(earliest)))
        earliest = user;
    setPlacement(&op, earliest ? *placedStage(earliest) : 0, earliest ? *placedIpu(earliest) : 0);
  }
}

Location markBackward(Location loc) {
  if (isBackwardLocation(loc))
    return loc;
  return FusedLoc::get(loc.getContext(), {loc},
                       StringAttr::get(loc.getContext(), kBackwardAttrName));
}

bool isBackwardLocation(Location loc) {
  bool found = false;
  loc->walk([&](Location l) {
    auto fused = dyn_cast<FusedLoc>(l);
    auto tag = fused ? dyn_cast_or_null<StringAttr>(fused.getMetadata()) : StringAttr();
    found = tag && tag.getValue() == kBackwardAttrName;
    return found ? WalkResult::interrupt() : WalkResult::advance();
  });
  return found;
}

} // namespace tessera::graph
