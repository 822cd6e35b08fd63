//===- ModelStats.cpp - what a graph-dialect model contains --------------===//

#include "tessera/Dialect/Graph/Analysis/ModelStats.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;

namespace tessera::graph {
namespace {

double elementsOf(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  return static_cast<double>(shaped.getNumElements());
}

std::string typeString(Type t) {
  auto shaped = cast<ShapedType>(t);
  std::string s = formatShape(shaped.getShape());
  llvm::raw_string_ostream os(s);
  os << (shaped.getRank() ? "x" : "") << shaped.getElementType();
  return s;
}

/// "12.3 M" style with the unit scaled to the value.
std::string humanCount(double v) {
  const char *units[] = {"", " K", " M", " G", " T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format(u ? "%.2f" : "%.0f", v)
                              << units[u];
  return s;
}

func::FuncOp entryFunction(ModuleOp module) {
  if (auto main = module.lookupSymbol<func::FuncOp>("main"))
    return main;
  func::FuncOp only;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (only)
      return {};
    only = f;
  }
  return only;
}

} // namespace

int64_t tensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return 0;
  return t.getNumElements() *
         std::max<int64_t>(t.getElementType().getIntOrFloatBitWidth() / 8, 1);
}

double opFlops(Operation *op) {
  double out = op->getNumResults() ? elementsOf(op->getResult(0).getType()) : 0;
  if (auto conv = dyn_cast<ConvOp>(op)) {
    auto w = conv.getWeight().getType();
    if (!w.hasStaticShape())
      return 0;
    // Each output element reads C/groups x kernel inputs.
    double macs = out * static_cast<double>(w.getNumElements() / w.getDimSize(0));
    return 2 * macs + (conv.getBias() ? out : 0);
  }
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    auto lhs = mm.getLhs().getType();
    if (!lhs.hasStaticShape())
      return 0;
    return 2 * out * static_cast<double>(lhs.getShape().back());
  }
  if (auto pool = dyn_cast<MaxPoolOp>(op))
    return out * numElements(pool.getKernelShape());
  if (auto pool = dyn_cast<AvgPoolOp>(op))
    return out * numElements(pool.getKernelShape());
  if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp,
          ArgMaxOp, ArgMinOp>(op))
    return elementsOf(op->getOperand(0).getType());
  if (isa<SoftmaxOp, LogSoftmaxOp>(op))
    return 5 * out; // max, subtract, exp, sum, divide
  if (isa<BatchNormOp>(op))
    return 2 * out; // folded to a per-channel scale and shift
  if (isa<LayerNormOp, GroupNormOp>(op))
    return 8 * out; // mean, variance, normalise, scale, shift
  if (op->hasTrait<OpTrait::Elementwise>() ||
      isa<AddOp, SubOp, MulOp, DivOp, RemOp, PowOp, MaxOp, MinOp, EqualOp,
          LessOp, LessEqualOp, GreaterOp, GreaterEqualOp, SelectOp>(op))
    return out;
  return 0;
}

ModelStats computeModelStats(ModuleOp module) {
  ModelStats stats;
  for (auto global : module.getOps<ml_program::GlobalOp>()) {
    auto type = dyn_cast<ShapedType>(global.getType());
    if (!type || !type.hasStaticShape())
      continue;
    ++stats.numGlobals;
    stats.parameters += type.getNumElements();
    stats.parameterBytes +=
        type.getNumElements() *
        std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  }
  func::FuncOp func = entryFunction(module);
  if (!func)
    return stats;
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    auto name = func.getArgAttrOfType<StringAttr>(i, "graph.name");
    stats.inputs.push_back({name ? name.str() : "arg" + std::to_string(i),
                            typeString(arg.getType())});
  }
  for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
    auto name = func.getResultAttrOfType<StringAttr>(i, "graph.name");
    stats.outputs.push_back(
        {name ? name.str() : "result" + std::to_string(i), typeString(type)});
  }
  llvm::StringMap<int64_t> counts;
  func.walk([&](Operation *op) {
    if (!isa<GraphDialect>(op->getDialect()) || isa<ConstantOp>(op))
      return;
    ++counts[op->getName().stripDialect()];
    ++stats.numOps;
    double flops = opFlops(op);
    stats.flops += flops;
    if (isa<ConvOp>(op))
      stats.convFlops += flops;
    else if (isa<MatmulOp>(op))
      stats.matmulFlops += flops;
  });
  for (auto &entry : counts)
    stats.opCounts.emplace_back(entry.getKey().str(), entry.getValue());
  llvm::sort(stats.opCounts, [](const auto &a, const auto &b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return stats;
}

void printModelStats(const ModelStats &stats, llvm::raw_ostream &os) {
  auto values = [&](StringRef label, const std::vector<ModelStats::Value> &vs) {
    os << label;
    for (auto [i, v] : llvm::enumerate(vs))
      os << (i ? ", " : " ") << v.name << ": " << v.type;
    os << "\n";
  };
  values("inputs: ", stats.inputs);
  values("outputs:", stats.outputs);
  os << "ops:     " << stats.numOps << " (";
  for (auto [i, entry] : llvm::enumerate(stats.opCounts))
    os << (i ? ", " : "") << entry.first << " " << entry.second;
  os << ")\n";
  os << "params:  " << humanCount(static_cast<double>(stats.parameters))
     << " (" << stats.parameters << ") in " << stats.numGlobals
     << " globals, "
     << llvm::format("%.1f", stats.parameterBytes / (1024.0 * 1024.0))
     << " MiB\n";
  os << "FLOPs:   " << humanCount(stats.flops) << " per run (conv "
     << humanCount(stats.convFlops) << ", matmul "
     << humanCount(stats.matmulFlops) << ", other "
     << humanCount(stats.flops - stats.convFlops - stats.matmulFlops)
     << ")\n";
}

} // namespace tessera::graph
