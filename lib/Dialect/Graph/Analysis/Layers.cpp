//===- Layers.cpp - a model's repeated blocks, from its op names ----------===//

#include "tessera/Dialect/Graph/Analysis/Layers.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace tessera::graph {

std::string nameOf(Location loc) {
  std::string name;
  loc->walk([&](Location l) {
    if (auto n = dyn_cast<NameLoc>(l)) {
      name = n.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name;
}

Layers findLayers(ArrayRef<Operation *> ops) {
  // Per depth: each layer path's index, in order of first appearance.
  std::map<size_t, std::map<std::string, int64_t>> byDepth;
  std::vector<std::vector<std::pair<size_t, std::string>>> keys(ops.size());
  for (auto [i, op] : llvm::enumerate(ops)) {
    std::string name = nameOf(op->getLoc());
    std::replace(name.begin(), name.end(), '.', '/');
    SmallVector<StringRef> parts;
    StringRef(name).split(parts, '/');
    llvm::erase_if(parts, [](StringRef p) { return p.empty(); });
    std::string path;
    for (auto [d, part] : llvm::enumerate(parts)) {
      path += (path.empty() ? "" : "/") + part.str();
      if (d == 0 || !llvm::all_of(part, llvm::isDigit))
        continue;
      auto &instances = byDepth[d];
      instances.insert({path, static_cast<int64_t>(instances.size())});
      keys[i].push_back({d, path});
    }
  }
  // The shallowest depth with several paths: deeper indices are sub-layers
  // (T5's encoder/block.N/layer.M, MobileNet's features.N.M's parts).
  Layers layers;
  layers.layerOf.assign(ops.size(), -1);
  auto found = llvm::find_if(byDepth, [](auto &entry) { return entry.second.size() >= 2; });
  if (found == byDepth.end())
    return layers;
  size_t depth = found->first;
  auto &instances = byDepth[depth];
  layers.names.resize(instances.size());
  for (auto &[name, index] : instances)
    layers.names[index] = name;
  for (size_t i = 0; i < ops.size(); ++i)
    for (auto &[d, key] : keys[i])
      if (d == depth)
        layers.layerOf[i] = instances.at(key);
  return layers;
}

} // namespace tessera::graph
