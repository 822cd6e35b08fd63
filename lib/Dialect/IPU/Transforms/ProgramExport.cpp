//===- ProgramExport.cpp - a mapped module as the runtime's program ------===//

#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/IPU/Transforms/Passes.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace tessera;

namespace tessera::ipu {

namespace {
FailureOr<runtime::DType> dtypeOf(Value v) {
  std::string name;
  llvm::raw_string_ostream(name) << getElementTypeOrSelf(v.getType());
  auto d = runtime::parseDType(name);
  if (!d) {
    llvm::consumeError(d.takeError());
    return emitError(v.getLoc()) << "element type " << getElementTypeOrSelf(v.getType())
                                 << " is not supported on the IPU model";
  }
  return *d;
}
} // namespace

std::optional<uint64_t> paddingBits(TypedAttr padding) {
  if (auto f = dyn_cast<FloatAttr>(padding))
    return f.getValue().bitcastToAPInt().getZExtValue();
  if (auto i = dyn_cast<IntegerAttr>(padding))
    return i.getValue().getZExtValue();
  return std::nullopt;
}

FailureOr<runtime::MachineProgram> exportMachineProgram(ModuleOp module) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return module.emitError("the module has no @main");
  runtime::MachineProgram program;
  DenseMap<Value, int64_t> vars;
  llvm::StringMap<int64_t> globals;
  auto add = [&](Value v, runtime::VarKind kind, MappingAttr mapping,
                 StringRef name) -> FailureOr<int64_t> {
    auto type = cast<RankedTensorType>(v.getType());
    runtime::Variable var;
    var.name = name.str();
    FailureOr<runtime::DType> d = dtypeOf(v);
    if (failed(d))
      return failure();
    var.dtype = *d;
    var.kind = kind;
    var.shape.assign(type.getShape().begin(), type.getShape().end());
    if (!mapping)
      return emitError(v.getLoc()) << "value has no tile mapping (run ipu-map-tiles)";
    var.mapping = fromAttr(mapping, var.shape);
    int64_t id = program.variables.size();
    program.variables.push_back(std::move(var));
    vars[v] = id;
    return id;
  };
  auto lookup = [&](Value v) -> FailureOr<int64_t> {
    auto it = vars.find(v);
    if (it == vars.end())
      return emitError(v.getLoc()) << "a value used by the machine program was not "
                                      "placed on tiles";
    return it->second;
  };
  for (BlockArgument arg : main.getArguments()) {
    auto name = main.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "graph.name");
    auto mapping = main.getArgAttrOfType<MappingAttr>(arg.getArgNumber(), kMappingAttrName);
    if (!mapping)
      continue; // unused input: nothing to stream
    std::string fallback = "input" + std::to_string(arg.getArgNumber());
    if (failed(add(arg, runtime::VarKind::Input, mapping,
                   name ? name.getValue() : StringRef(fallback))))
      return failure();
  }
  // Inputs are bound by signature position (ipu-map-tiles places all).
  // A training step's state (graph.state, after the inputs) stays on the
  // device for the whole program: ipu-allocate-memory must place it so, as
  // the IPU model does.
  for (BlockArgument arg : main.getArguments()) {
    auto it = vars.find(arg);
    if (it == vars.end())
      return main.emitError("input ") << arg.getArgNumber() << " has no tile mapping";
    program.inputs.push_back(it->second);
    if (main.getArgAttr(arg.getArgNumber(), graph::kStateAttrName))
      ++program.residentInputs;
  }
  for (Operation &op : main.getBody().front()) {
    if (auto load = dyn_cast<ml_program::GlobalLoadConstOp>(op)) {
      StringRef sym = load.getGlobal().getLeafReference();
      if (auto it = globals.find(sym); it != globals.end()) {
        vars[load.getResult()] = it->second;
        continue;
      }
      if (load->use_empty())
        continue;
      auto mapping = load->getAttrOfType<MappingAttr>(kMappingAttrName);
      bool isConstant = sym.starts_with("__constant_");
      FailureOr<int64_t> id =
          add(load.getResult(),
              isConstant ? runtime::VarKind::Constant : runtime::VarKind::Weight,
              mapping, sym);
      if (failed(id))
        return failure();
      if (Attribute mirrors = load->getAttr(kMirrorsAttrName)) {
        auto dict = dyn_cast<DictionaryAttr>(mirrors);
        auto counts = dict ? dict.getAs<DenseI64ArrayAttr>("counts") : nullptr;
        auto strides = dict ? dict.getAs<DenseI64ArrayAttr>("tile_strides") : nullptr;
        if (!counts || !strides || counts.size() != strides.size() || counts.empty())
          return load.emitError("'")
                 << kMirrorsAttrName
                 << "' must be {counts = array<i64: ...>, tile_strides = array<i64: ...>} "
                    "with as many counts as strides, at least one";
        runtime::TileMapping &m = program.variables[*id].mapping;
        m.mirrorCounts.assign(counts.asArrayRef().begin(), counts.asArrayRef().end());
        m.mirrorStrides.assign(strides.asArrayRef().begin(), strides.asArrayRef().end());
      }
      program.variables[*id].weight = globals.size();
      globals[sym] = *id;
      continue;
    }
    if (auto alloc = dyn_cast<AllocOp>(op)) {
      if (failed(add(alloc.getResult(), runtime::VarKind::Activation, alloc.getMapping(),
                     locationName(alloc.getLoc(), "alloc"))))
        return failure();
      continue;
    }
    if (isa<ViewOp, PadViewOp>(op)) {
      FailureOr<int64_t> src = lookup(op.getOperand(0));
      if (failed(src))
        return failure();
      auto type = cast<RankedTensorType>(op.getResult(0).getType());
      auto pad = dyn_cast<PadViewOp>(op);
      std::optional<uint64_t> bits = pad ? paddingBits(pad.getPadding()) : std::nullopt;
      if (pad && !bits)
        return op.emitOpError("pads with ") << pad.getPadding()
                                            << ", not a float or an integer";
      llvm::Expected<runtime::Variable> var =
          pad ? runtime::makePaddedView(program, *src, pad.getLow(), pad.getHigh(), *bits)
              : runtime::makeView(program, *src, type.getShape());
      if (!var)
        return op.emitOpError(llvm::toString(var.takeError()));
      vars[op.getResult(0)] = program.variables.size();
      program.variables.push_back(std::move(*var));
      continue;
    }
    if (auto copy = dyn_cast<CopyOp>(op)) {
      FailureOr<int64_t> src = lookup(copy.getSource()), dst = lookup(copy.getDest());
      if (failed(src) || failed(dst))
        return failure();
      runtime::Copy c;
      c.src = *src;
      c.dst = *dst;
      c.srcRegion.offsets.assign(copy.getSourceOffsets().begin(),
                                 copy.getSourceOffsets().end());
      c.srcRegion.sizes.assign(copy.getSizes().begin(), copy.getSizes().end());
      c.dstOffsets.assign(copy.getDestOffsets().begin(), copy.getDestOffsets().end());
      program.steps.push_back({runtime::Step::Kind::Copy,
                               static_cast<int64_t>(program.copies.size())});
      program.steps.back().backward = graph::isBackwardLocation(copy.getLoc());
      program.copies.push_back(std::move(c));
      vars[copy.getResult()] = *dst;
      continue;
    }
    if (auto cs = dyn_cast<ComputeSetOp>(op)) {
      runtime::ComputeSet set;
      set.name = cs.getName().str();
      set.location = locationName(cs.getLoc(), "");
      set.loopRanges.assign(cs.getLoopRanges().begin(), cs.getLoopRanges().end());
      set.outputLoops.assign(cs.getOutputLoops().begin(), cs.getOutputLoops().end());
      set.macs = cs.getMacs();
      for (auto [i, in] : llvm::enumerate(cs.getInputs())) {
        FailureOr<int64_t> var = lookup(in);
        if (failed(var))
          return failure();
        runtime::ComputeSet::Operand operand;
        operand.var = *var;
        AffineMap map = cast<AffineMapAttr>(cs.getAccessMaps()[i]).getValue();
        std::optional<runtime::AccessMap> box = toBoxAccess(map);
        bool full = llvm::is_contained(cs.getFullInputs(), int64_t(i));
        if (!box && !full)
          return cs.emitOpError("access map ")
                 << AffineMapAttr::get(map)
                 << " is not a box read and the input is not listed in full_inputs";
        if (box) {
          operand.map = std::move(*box);
        } else {
          operand.map.coeffs.assign(map.getNumResults(),
                                    std::vector<int64_t>(map.getNumDims(), 0));
          operand.map.consts.assign(map.getNumResults(), 0);
        }
        operand.map.full = full;
        if (std::optional<ArrayAttr> extents = cs.getExtents()) {
          ArrayRef<int64_t> e = cast<DenseI64ArrayAttr>((*extents)[i]).asArrayRef();
          if (!full && llvm::any_of(e, [](int64_t n) { return n != 1; }))
            operand.map.extents.assign(e.begin(), e.end());
        }
        set.inputs.push_back(std::move(operand));
      }
      for (auto [k, r] : llvm::enumerate(cs.getResults())) {
        if (k < cs.getInits().size()) {
          FailureOr<int64_t> init = lookup(cs.getInits()[k]);
          if (failed(init))
            return failure();
          set.outputs.push_back(*init);
          vars[r] = *init;
          continue;
        }
        FailureOr<int64_t> id = add(r, runtime::VarKind::Activation, cs.getMapping(),
                                    locationName(cs.getLoc(), set.name));
        if (failed(id))
          return failure();
        if (auto stash = cs->getAttrOfType<DenseI64ArrayAttr>(kStashCopiesAttrName))
          program.variables[*id].copies = stash[k];
        set.outputs.push_back(*id);
      }
      // Kernel k runs the pieces of the mapping's k-th shape (checked by
      // the op's verifier); a kernel generic over shapes may run several.
      std::vector<std::vector<int64_t>> shapes =
          fromAttr(cs.getMapping(), cast<RankedTensorType>(cs.getResult(0).getType()).getShape())
              .pieceShapes();
      for (auto [sym, cycles, shape] : llvm::zip(cs.getKernels(), cs.getKernelCycles(), shapes)) {
        StringRef name = cast<FlatSymbolRefAttr>(sym).getValue();
        auto kernel = module.lookupSymbol<func::FuncOp>(name);
        if (!kernel)
          return cs.emitOpError("kernel @") << name << " does not exist";
        runtime::Kernel k;
        k.symbol = (name + "_entry").str();
        k.pieceSizes = shape;
        k.cycles = cycles;
        auto code = kernel->getAttrOfType<IntegerAttr>("ipu.code_bytes");
        k.codeBytes = code ? code.getInt() : 512;
        set.kernels.push_back(std::move(k));
      }
      program.steps.push_back({runtime::Step::Kind::Compute,
                               static_cast<int64_t>(program.computeSets.size())});
      program.steps.back().backward = graph::isBackwardLocation(cs.getLoc());
      program.computeSets.push_back(std::move(set));
      continue;
    }
    if (auto sum = dyn_cast<CrossReplicaSumOp>(op)) {
      auto mappings = sum->getAttrOfType<ArrayAttr>(kResultMappingsAttrName);
      if (!mappings)
        return sum.emitOpError("has no result mappings (run ipu-plan-tiles)");
      runtime::AllReduce reduce;
      reduce.location = locationName(sum.getLoc(), "");
      for (auto [in, out, mapping] : llvm::zip(sum.getInputs(), sum.getResults(), mappings)) {
        FailureOr<int64_t> src = lookup(in);
        if (failed(src))
          return failure();
        FailureOr<int64_t> dst = add(out, runtime::VarKind::Activation,
                                     cast<MappingAttr>(mapping),
                                     locationName(sum.getLoc(), "cross_replica_sum"));
        if (failed(dst))
          return failure();
        reduce.srcs.push_back(*src);
        reduce.dsts.push_back(*dst);
      }
      program.steps.push_back({runtime::Step::Kind::AllReduce,
                               static_cast<int64_t>(program.allReduces.size())});
      program.allReduces.push_back(std::move(reduce));
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands()) {
        FailureOr<int64_t> id = lookup(v);
        if (failed(id))
          return failure();
        program.outputs.push_back(*id);
      }
      continue;
    }
    if (isa<arith::ConstantOp>(op) && !isa<TensorType>(op.getResult(0).getType()))
      continue;
    if (op.getNumResults() == 1 && isa<TensorType>(op.getResult(0).getType()) &&
        op.use_empty())
      continue;
    return op.emitOpError("is not part of a machine program (run ipu-map-tiles)");
  }
  return program;
}

} // namespace tessera::ipu
