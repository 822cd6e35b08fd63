//===- NodeImporter.cpp - what an ONNX op converter works with -----------===//

#include "NodeImporter.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "tessera/Dialect/Graph/IR/OpBuilding.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"
#include "tessera/Importers/ONNX/ONNXImporter.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;

namespace tessera::onnx_importer {

NodeImporter::NodeImporter(ModelImporter &model, const onnx::NodeProto &node,
                           Location loc)
    : model_(model), node_(node), loc_(loc) {}

int64_t NodeImporter::opset() const { return model_.opset(); }
OpBuilder &NodeImporter::builder() { return model_.builder(); }

Value NodeImporter::input(size_t i) const {
  return hasInput(i) ? model_.lookup(node_.input(i)) : Value();
}

FailureOr<SmallVector<Value>> NodeImporter::sequenceInput(size_t i) {
  const SmallVector<Value> *seq =
      hasInput(i) ? model_.lookupSequence(node_.input(i)) : nullptr;
  if (!seq)
    return error() << "input " << i << " must be a sequence";
  return *seq;
}

LogicalResult NodeImporter::setSequenceOutput(SmallVector<Value> values) {
  model_.defineSequence(node_.output(0), std::move(values));
  return success();
}

RankedTensorType NodeImporter::inputType(size_t i) const {
  return cast<RankedTensorType>(input(i).getType());
}

DenseElementsAttr NodeImporter::constantInput(size_t i) const {
  Value v = input(i);
  DenseElementsAttr attr;
  if (!v)
    return {};
  if (matchPattern(v, m_Constant(&attr)))
    return attr;
  // An initializer that became a global (scales, pads, ...) is a constant
  // too; read its payload if it is small enough to be an operand value.
  auto load = v.getDefiningOp<ml_program::GlobalLoadConstOp>();
  if (!load)
    return {};
  auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
      load, load.getGlobalAttr());
  auto resource =
      global ? dyn_cast_if_present<DenseResourceElementsAttr>(global.getValue().value_or(Attribute()))
             : DenseResourceElementsAttr();
  constexpr int64_t kMaxConstantOperand = 1 << 16;
  if (!resource || resource.getType().getNumElements() > kMaxConstantOperand ||
      !resource.getRawHandle().getBlob())
    return {};
  ArrayRef<char> data = resource.getRawHandle().getBlob()->getData();
  bool splat = false;
  if (!DenseElementsAttr::isValidRawBuffer(resource.getType(), data, splat))
    return {};
  return DenseElementsAttr::getFromRawBuffer(resource.getType(), data);
}

InFlightDiagnostic NodeImporter::notConstant(size_t i, StringRef what,
                                             StringRef kind) {
  InFlightDiagnostic diag =
      error() << "input '" << what << "' must be a constant" << kind
              << " (an initializer, a Constant node or computable from static "
                 "shapes); Tessera compiles static shapes only";
  // A graph input can be bound to its value at compile time; so can the
  // inputs a value is computed from (the importer folds what they feed).
  auto inputName = [](BlockArgument arg) -> StringAttr {
    auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    return func ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "graph.name")
                : StringAttr();
  };
  SmallVector<Value> work{input(i)};
  llvm::SmallSetVector<StringAttr, 4> sources;
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty() && seen.size() < 256) {
    Value v = work.pop_back_val();
    if (!v)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (StringAttr name = inputName(arg))
        sources.insert(name);
      continue;
    }
    if (Operation *def = v.getDefiningOp(); def && seen.insert(def).second)
      llvm::append_range(work, def->getOperands());
  }
  if (sources.empty())
    return diag;
  bool direct = isa_and_present<BlockArgument>(input(i));
  diag << (direct ? "; it is the model's input '" : "; it is computed from the model's input '")
       << sources.front().getValue()
       << "': specialize the model for one value with --constant-input "
       << sources.front().getValue() << "=FILE";
  return diag;
}

FailureOr<SmallVector<int64_t>> NodeImporter::constantInts(size_t i,
                                                           StringRef what) {
  DenseElementsAttr attr = constantInput(i);
  if (!attr || !isa<IntegerType>(attr.getElementType())) {
    if (attr)
      return error() << "input '" << what << "' must hold integers";
    return notConstant(i, what, "");
  }
  SmallVector<int64_t> out;
  for (const APInt &v : attr.getValues<APInt>())
    out.push_back(v.getSExtValue());
  return out;
}

FailureOr<double> NodeImporter::constantScalar(size_t i, StringRef what) {
  DenseElementsAttr attr = constantInput(i);
  if (!attr)
    return notConstant(i, what, " scalar");
  if (attr.getNumElements() != 1)
    return error() << "input '" << what << "' must be a scalar, got "
                   << attr.getNumElements() << " values";
  if (isa<FloatType>(attr.getElementType()))
    return (*attr.getValues<APFloat>().begin()).convertToDouble();
  APInt v = *attr.getValues<APInt>().begin();
  auto it = cast<IntegerType>(attr.getElementType());
  return it.isUnsigned() || it.getWidth() == 1
             ? static_cast<double>(v.getZExtValue())
             : static_cast<double>(v.getSExtValue());
}

const onnx::AttributeProto *NodeImporter::attr(StringRef name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeImporter::intAttr(StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

double NodeImporter::floatAttr(StringRef name, double dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string NodeImporter::stringAttr(StringRef name, StringRef dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt.str();
}

std::optional<SmallVector<int64_t>>
NodeImporter::intsAttr(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<SmallVector<double>>
NodeImporter::floatsAttr(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<double>(a->floats().begin(), a->floats().end());
}

Type NodeImporter::placeholderType() {
  return graph::placeholderResultType(builder().getContext());
}

FailureOr<Value> NodeImporter::finish(Operation *op) {
  return graph::finishCreatedOp(builder(), op);
}

Value NodeImporter::constant(DenseElementsAttr value) {
  return graph::ConstantOp::create(builder(), loc_, value).getResult();
}

Value NodeImporter::splat(Type elementType, ArrayRef<int64_t> shape, double v) {
  return graph::createSplatConstant(builder(), loc_, elementType, shape, v);
}

Value NodeImporter::i64Constant(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    builder().getI64Type());
  return constant(DenseElementsAttr::get(type, values));
}

FailureOr<Value> NodeImporter::tensorValue(const onnx::TensorProto &tensor) {
  std::string name = tensor.name().empty() ? node_.output(0) : tensor.name();
  return model_.tensorValue(tensor, name, loc_, /*isParameter=*/false);
}

FailureOr<Value> NodeImporter::reshape(Value v, ArrayRef<int64_t> shape) {
  return graph::createReshape(builder(), loc_, v, shape);
}

FailureOr<Value> NodeImporter::transpose(Value v, ArrayRef<int64_t> perm) {
  return graph::createTranspose(builder(), loc_, v, perm);
}

FailureOr<Value> NodeImporter::castTo(Value v, Type elementType) {
  return graph::createCast(builder(), loc_, v, elementType);
}

FailureOr<Value> NodeImporter::sliceAxis(Value v, int64_t axis, int64_t start,
                                         int64_t limit, int64_t step) {
  SmallVector<int64_t> shape(cast<RankedTensorType>(v.getType()).getShape());
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape), steps(shape.size(), 1);
  starts[axis] = start;
  limits[axis] = limit;
  steps[axis] = step;
  auto &b = builder();
  return infer<graph::SliceOp>(v, b.getDenseI64ArrayAttr(starts),
                               b.getDenseI64ArrayAttr(limits),
                               b.getDenseI64ArrayAttr(steps));
}

DenseElementsAttr floatValues(Type elem, ArrayRef<int64_t> shape,
                              ArrayRef<double> values) {
  const llvm::fltSemantics &sem = cast<FloatType>(elem).getFloatSemantics();
  SmallVector<APFloat> v;
  for (double d : values) {
    APFloat f(d);
    bool lost;
    f.convert(sem, APFloat::rmNearestTiesToEven, &lost);
    v.push_back(f);
  }
  return DenseElementsAttr::get(RankedTensorType::get(shape, elem), v);
}

DenseElementsAttr intValues(Type elem, ArrayRef<int64_t> shape,
                            ArrayRef<int64_t> values) {
  unsigned width = elem.getIntOrFloatBitWidth();
  SmallVector<APInt> v;
  for (int64_t x : values)
    v.push_back(APInt(width, static_cast<uint64_t>(x), /*isSigned=*/true,
                      /*implicitTrunc=*/true));
  return DenseElementsAttr::get(RankedTensorType::get(shape, elem), v);
}

FailureOr<Value> NodeImporter::expand(Value v, ArrayRef<int64_t> shape) {
  return graph::createExpand(builder(), loc_, v, shape);
}

FailureOr<int64_t> NodeImporter::normalizeAxis(int64_t axis, int64_t rank,
                                               StringRef what) {
  int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank)
    return error() << what << " " << axis << " is out of range for rank "
                   << rank << " (valid: " << -rank << " to " << rank - 1
                   << ")";
  return normalized;
}

FailureOr<SmallVector<int64_t>>
NodeImporter::normalizeAxes(ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> out;
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_FAIL(n, normalizeAxis(a, rank));
    if (llvm::is_contained(out, n))
      return error() << "axis " << a << " is listed twice";
    out.push_back(n);
  }
  llvm::sort(out);
  return out;
}

LogicalResult NodeImporter::setOutputs(ArrayRef<Value> values) {
  for (int i = 0; i < node_.output_size(); ++i) {
    const std::string &name = node_.output(i);
    if (name.empty())
      continue;
    if (i < static_cast<int>(values.size()) && values[i]) {
      model_.define(name, values[i]);
    } else if (model_.isUsed(name)) {
      return error() << "output " << i << " ('" << name
                     << "') is used, but Tessera only computes the first "
                     << values.size() << " output(s) of " << opType();
    }
  }
  return success();
}

LogicalResult NodeImporter::checkConstantElements(ArrayRef<int64_t> counts, StringRef what) {
  constexpr int64_t kMaxConstantElements = int64_t(1) << 24; // a 4096 x 4096 mask
  int64_t total = 1;
  for (int64_t c : counts) {
    if (c < 0 || (c > 0 && total > kMaxConstantElements / c))
      return error() << what << " would be a constant of more than the 2^24 elements "
                     << "Tessera builds at compile time";
    total *= c;
  }
  return success();
}

InFlightDiagnostic NodeImporter::error() {
  return emitError(loc_) << opType() << ": ";
}

LogicalResult NodeImporter::unsupported(const Twine &what) {
  return error() << what << " is not supported yet";
}

} // namespace tessera::onnx_importer
