//===- IPUDialect.cpp - the ipu dialect ----------------------------------===//

#include "tessera/Dialect/IPU/IR/IPU.h"
#include "tessera/Runtime/MachineProgram.h"
#include "tessera/Target/IPUTarget.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Analysis/FlatLinearValueConstraints.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessera::ipu;

#include "tessera/Dialect/IPU/IR/IPUDialect.cpp.inc"

/// `[1, 2]`, or `[]`: a scalar's mapping has no dimensions, and its
/// attribute must parse back (a bytecode file holding one did not load).
static ParseResult parseIntList(AsmParser &parser, SmallVector<int64_t> &list) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
    return parser.parseInteger(list.emplace_back());
  });
}
static void printIntList(AsmPrinter &printer, ArrayRef<int64_t> list) {
  printer << '[';
  llvm::interleaveComma(list, printer);
  printer << ']';
}

#define GET_ATTRDEF_CLASSES
#include "tessera/Dialect/IPU/IR/IPUAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "tessera/Dialect/IPU/IR/IPUOps.cpp.inc"

void IPUDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tessera/Dialect/IPU/IR/IPUAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "tessera/Dialect/IPU/IR/IPUOps.cpp.inc"
      >();
}

namespace tessera::ipu {

Attribute PlanAttr::parse(AsmParser &parser, Type) {
  MappingAttr mapping;
  if (parser.parseLess() || parser.parseKeyword("mapping") || parser.parseEqual() ||
      parser.parseAttribute(mapping))
    return {};
  bool epilogue = false, inPlace = false;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc at = parser.getCurrentLocation();
    StringRef flag;
    if (parser.parseKeyword(&flag))
      return {};
    if (flag == "epilogue")
      epilogue = true;
    else if (flag == "in_place")
      inPlace = true;
    else
      return parser.emitError(at, "expected 'epilogue' or 'in_place', got '") << flag << "'",
             Attribute();
  }
  if (parser.parseGreater())
    return {};
  return PlanAttr::get(parser.getContext(), mapping, epilogue, inPlace);
}

void PlanAttr::print(AsmPrinter &printer) const {
  printer << "<mapping = ";
  printer.printAttribute(getMapping());
  if (getEpilogue())
    printer << ", epilogue";
  if (getInPlace())
    printer << ", in_place";
  printer << ">";
}

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                 int64_t ipus, int64_t tilesPerIpu, int64_t bytesPerTile) {
  llvm::Expected<target::IPUTarget> target = target::makeTarget(name, ipus, tilesPerIpu);
  if (!target)
    return emitError() << llvm::toString(target.takeError());
  if (bytesPerTile < 1024 || bytesPerTile > target->bytesPerTile)
    return emitError() << "bytes_per_tile must be between 1024 and " << target->bytesPerTile
                       << " for " << name << ", got " << bytesPerTile;
  return success();
}

std::string locationName(Location loc, StringRef fallback) {
  // The first name, looking into fused locations (an op fused from others,
  // a backward op's marked location) and their children.
  std::string name = fallback.str();
  loc->walk([&](Location l) {
    auto n = dyn_cast<NameLoc>(l);
    if (n)
      name = n.getName().str();
    return n ? WalkResult::interrupt() : WalkResult::advance();
  });
  return name;
}

FailureOr<target::IPUTarget> getTarget(ModuleOp module) {
  auto attr = module->getAttrOfType<TargetAttr>(kTargetAttrName);
  if (!attr)
    return module.emitError("the module has no '")
           << kTargetAttrName << "' attribute naming the machine (e.g. "
           << "#ipu.target<\"ipu2\", ipus = 1, tiles_per_ipu = 1472, "
              "bytes_per_tile = 638976>)";
  // The attribute's verifier checked the numbers.
  llvm::Expected<target::IPUTarget> target =
      target::makeTarget(attr.getName(), attr.getIpus(), attr.getTilesPerIpu());
  if (!target)
    return module.emitError("bad ipu.target: ") << llvm::toString(target.takeError());
  target->bytesPerTile = attr.getBytesPerTile();
  return *target;
}

void setTarget(ModuleOp module, const target::IPUTarget &target) {
  module.getContext()->getOrLoadDialect<IPUDialect>();
  module->setAttr(kTargetAttrName,
                  TargetAttr::get(module.getContext(), target.name, target.numIPUs,
                                  target.tilesPerIPU, target.bytesPerTile));
}

MappingAttr toAttr(MLIRContext *context, const runtime::TileMapping &m) {
  return MappingAttr::get(context, m.chunks, m.tileStrides, m.firstTile);
}

runtime::TileMapping fromAttr(MappingAttr attr, ArrayRef<int64_t> shape) {
  runtime::TileMapping m;
  m.shape.assign(shape.begin(), shape.end());
  m.chunks.assign(attr.getChunks().begin(), attr.getChunks().end());
  m.tileStrides.assign(attr.getTileStrides().begin(), attr.getTileStrides().end());
  m.firstTile = attr.getFirstTile();
  return m;
}

std::optional<runtime::AccessMap> toBoxAccess(AffineMap map) {
  runtime::AccessMap a;
  a.coeffs.assign(map.getNumResults(), std::vector<int64_t>(map.getNumDims(), 0));
  a.consts.assign(map.getNumResults(), 0);
  for (auto [j, expr] : llvm::enumerate(map.getResults())) {
    SmallVector<int64_t> flat;
    if (failed(getFlattenedAffineExpr(expr, map.getNumDims(), 0, &flat)) ||
        flat.size() != map.getNumDims() + 1)
      return std::nullopt;
    for (unsigned i = 0; i < map.getNumDims(); ++i) {
      if (flat[i] < 0)
        return std::nullopt;
      a.coeffs[j][i] = flat[i];
    }
    a.consts[j] = flat.back();
  }
  return a;
}

} // namespace tessera::ipu

namespace {
/// A mapping must have one chunk and stride per dimension of its tensor.
LogicalResult verifyMapping(Operation *op, MappingAttr mapping, ShapedType type) {
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(mapping.getChunks().size()) != rank ||
      static_cast<int64_t>(mapping.getTileStrides().size()) != rank)
    return op->emitOpError("mapping has ")
           << mapping.getChunks().size() << " chunks and "
           << mapping.getTileStrides().size() << " tile strides for a rank-"
           << rank << " tensor";
  for (int64_t c : mapping.getChunks())
    if (c < 1)
      return op->emitOpError("mapping chunks must be positive");
  if (mapping.getFirstTile() < 0)
    return op->emitOpError("mapping's first tile must not be negative");
  return success();
}
} // namespace

LogicalResult ComputeSetOp::verifySymbolUses(SymbolTableCollection &symbols) {
  // Kernel k runs the pieces of the mapping's k-th shape: its signature is
  // a loop offset per loop, a region per input, a piece per result, the
  // pieces' static sizes (if any: a kernel generic over shapes has dynamic
  // ones) those of the shape.
  auto out = cast<RankedTensorType>(getResult(0).getType());
  std::vector<std::vector<int64_t>> shapes = fromAttr(getMapping(), out.getShape()).pieceShapes();
  if (shapes.size() != getKernels().size())
    return emitOpError("has ") << getKernels().size() << " kernels for the " << shapes.size()
                               << " piece shapes of its mapping";
  size_t loops = getLoopRanges().size(), inputs = getInputs().size();
  for (auto [kernel, shape] : llvm::zip(getKernels(), shapes)) {
    auto func = symbols.lookupNearestSymbolFrom<func::FuncOp>(*this, cast<SymbolRefAttr>(kernel));
    if (!func || !func->hasAttr(kVertexAttrName))
      return emitOpError("kernel ") << kernel << " is not a func.func marked " << kVertexAttrName;
    ArrayRef<Type> args = func.getArgumentTypes();
    bool fits = args.size() == loops + inputs + getNumResults() &&
                llvm::all_of(args.take_front(loops), [](Type t) { return t.isIndex(); }) &&
                llvm::all_of(args.drop_front(loops), [](Type t) { return isa<MemRefType>(t); });
    for (Type piece : args.take_back(getNumResults())) {
      if (!fits)
        break;
      auto type = cast<MemRefType>(piece);
      fits = type.getRank() == static_cast<int64_t>(shape.size()) &&
             llvm::all_of(llvm::zip(type.getShape(), shape), [](auto d) {
               auto [declared, size] = d;
               return ShapedType::isDynamic(declared) || declared == size;
             });
    }
    if (!fits)
      return emitOpError("kernel ")
             << kernel << " of type " << func.getFunctionType() << " does not take " << loops
             << " loop offsets, " << inputs << " input regions and " << getNumResults()
             << " output pieces of shape [" << llvm::make_range(shape.begin(), shape.end())
             << "]";
  }
  return success();
}

LogicalResult ComputeSetOp::verify() {
  // Each result is its init updated in place: nothing else may read the
  // init, which no longer holds its value after the step.
  for (auto [k, init] : llvm::enumerate(getInits()))
    if (!init.hasOneUse())
      return emitOpError("init ") << k << " has other uses; the compute set updates it in place";
  int64_t loops = getLoopRanges().size();
  if (getResults().empty())
    return emitOpError("needs at least one result");
  auto out = cast<RankedTensorType>(getResult(0).getType());
  for (Value r : getResults())
    if (cast<RankedTensorType>(r.getType()).getShape() != out.getShape())
      return emitOpError("results must share one shape (they share a mapping)");
  // Inits update the leading results; a result past them (an epilogue's
  // own, see ipu-map-tiles) is new.
  if (getInits().size() > getResults().size() ||
      getInits().getTypes() != getResults().take_front(getInits().size()).getTypes())
    return emitOpError("needs an init of each leading result's type (as many as it has "
                       "inits), or none");
  if (static_cast<int64_t>(getOutputLoops().size()) != out.getRank())
    return emitOpError("output_loops needs one loop per result dimension");
  for (auto [j, l] : llvm::enumerate(getOutputLoops()))
    if (l < 0 || l >= loops || getLoopRanges()[l] != out.getDimSize(j))
      return emitOpError("result dimension ")
             << j << " is not a loop of the same range";
  if (getAccessMaps().size() != getInputs().size())
    return emitOpError("needs one access map per input");
  for (auto [map, in] : llvm::zip(getAccessMaps(), getInputs())) {
    AffineMap m = cast<AffineMapAttr>(map).getValue();
    if (m.getNumDims() != loops ||
        m.getNumResults() != cast<RankedTensorType>(in.getType()).getRank())
      return emitOpError("access map ") << AffineMapAttr::get(m) << " does not match " << loops
                                        << " loops and input type " << in.getType();
  }
  for (int64_t f : getFullInputs())
    if (f < 0 || f >= static_cast<int64_t>(getInputs().size()))
      return emitOpError("full_inputs names input ") << f << " that does not exist";
  if (std::optional<ArrayAttr> extents = getExtents()) {
    if (extents->size() != getInputs().size())
      return emitOpError("needs one extent list per input, got ")
             << extents->size() << " for " << getInputs().size();
    for (auto [i, list, in] : llvm::enumerate(*extents, getInputs())) {
      ArrayRef<int64_t> e = cast<DenseI64ArrayAttr>(list).asArrayRef();
      auto type = cast<RankedTensorType>(in.getType());
      if (e.empty())
        continue;
      if (static_cast<int64_t>(e.size()) != type.getRank())
        return emitOpError("extents of input ")
               << i << " need one entry per dimension of " << type;
      for (auto [d, n] : llvm::enumerate(e))
        if (n < 1 || n > type.getDimSize(d))
          return emitOpError("extent ") << n << " of input " << i << " dimension " << d
                                        << " is not in [1, " << type.getDimSize(d) << "]";
    }
  }
  if (getKernels().empty() || getKernels().size() != getKernelCycles().size())
    return emitOpError("needs kernels and one cycle estimate per kernel");
  return verifyMapping(*this, getMapping(), out);
}

LogicalResult CrossReplicaSumOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs one or more tensors to sum");
  for (auto [in, out] : llvm::zip(getInputs().getTypes(), getResultTypes())) {
    if (in != out)
      return emitOpError("result type ") << out << " differs from its input's " << in;
    if (!isa<FloatType>(cast<RankedTensorType>(in).getElementType()))
      return emitOpError("sums floats, got ") << in;
  }
  if (getInputs().size() != getResults().size())
    return emitOpError("needs one result per input");
  if (Attribute attr = (*this)->getAttr(kResultMappingsAttrName)) {
    auto mappings = dyn_cast<ArrayAttr>(attr);
    if (!mappings || mappings.size() != getResults().size())
      return emitOpError(kResultMappingsAttrName) << " must hold one #ipu.mapping per result";
    for (auto [m, r] : llvm::zip(mappings, getResults())) {
      auto mapping = dyn_cast<MappingAttr>(m);
      if (!mapping)
        return emitOpError(kResultMappingsAttrName) << " holds " << m << ", not an #ipu.mapping";
      if (failed(verifyMapping(*this, mapping, cast<ShapedType>(r.getType()))))
        return failure();
    }
  }
  return success();
}

LogicalResult CopyOp::verify() {
  // The copy writes into dest's storage: a second reader would see it
  // before or after, depending on the order of steps.
  if (!getDest().hasOneUse())
    return emitOpError("dest has other uses; the copy updates it in place");
  auto src = cast<RankedTensorType>(getSource().getType());
  auto dst = cast<RankedTensorType>(getDest().getType());
  int64_t rank = src.getRank();
  if (dst.getRank() != rank || static_cast<int64_t>(getSizes().size()) != rank ||
      static_cast<int64_t>(getSourceOffsets().size()) != rank ||
      static_cast<int64_t>(getDestOffsets().size()) != rank)
    return emitOpError("source, dest, offsets and sizes must have one rank");
  if (src.getElementType() != dst.getElementType())
    return emitOpError("source and dest element types differ");
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = getSizes()[d];
    if (n < 0 || getSourceOffsets()[d] < 0 || getDestOffsets()[d] < 0 ||
        getSourceOffsets()[d] + n > src.getDimSize(d) ||
        getDestOffsets()[d] + n > dst.getDimSize(d))
      return emitOpError("region out of bounds in dimension ") << d;
  }
  return success();
}

LogicalResult AllocOp::verify() {
  return verifyMapping(*this, getMapping(), getType());
}

LogicalResult PadViewOp::verify() {
  auto src = cast<RankedTensorType>(getSource().getType());
  auto dst = cast<RankedTensorType>(getType());
  if (!src.hasStaticShape() || !dst.hasStaticShape() ||
      src.getElementType() != dst.getElementType())
    return emitOpError("needs static shapes of the same element type, got ")
           << src << " and " << dst;
  if (getPadding().getType() != src.getElementType())
    return emitOpError("padding ") << getPadding() << " is not a " << src.getElementType();
  int64_t rank = src.getRank();
  if (dst.getRank() != rank || static_cast<int64_t>(getLow().size()) != rank ||
      static_cast<int64_t>(getHigh().size()) != rank)
    return emitOpError("needs one low and one high count per dimension of ") << src;
  for (int64_t d = 0; d < rank; ++d)
    if (getLow()[d] < 0 || getHigh()[d] < 0 ||
        src.getDimSize(d) + getLow()[d] + getHigh()[d] != dst.getDimSize(d))
      return emitOpError("dimension ") << d << ": " << src.getDimSize(d) << " padded by "
                                       << getLow()[d] << " and " << getHigh()[d]
                                       << " is not " << dst.getDimSize(d);
  return success();
}

LogicalResult ViewOp::verify() {
  auto src = cast<RankedTensorType>(getSource().getType());
  auto dst = cast<RankedTensorType>(getType());
  if (!src.hasStaticShape() || !dst.hasStaticShape() ||
      src.getNumElements() != dst.getNumElements() ||
      src.getElementType() != dst.getElementType())
    return emitOpError("views need static shapes with the same elements, got ")
           << src << " and " << dst;
  return success();
}
