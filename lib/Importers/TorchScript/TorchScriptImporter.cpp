//===- TorchScriptImporter.cpp - TorchScript modules to the graph dialect -===//
//
// Load and freeze with libtorch, then GraphEvaluator walks the frozen
// forward graph once, evaluating at compile time everything that does not
// depend on input tensor values (see OpContext.h) and emitting graph ops for
// the rest.
//
//===----------------------------------------------------------------------===//

#include "tessera/Importers/TorchScript/TorchScriptImporter.h"
#include "OpContext.h"
#include "tessera/Dialect/Graph/IR/Placement.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

#include <ATen/ops/scalar_tensor.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/remove_mutation.h>
#include <torch/csrc/jit/serialization/import.h>

#include <map>
#include <tuple>
#include <sstream>
#include <unordered_map>

using namespace mlir;
namespace jit = torch::jit;

namespace tessera::torchscript_importer {

//===----------------------------------------------------------------------===//
// dtypes
//===----------------------------------------------------------------------===//

Type elementTypeOf(c10::ScalarType dtype, MLIRContext *context) {
  Builder b(context);
  switch (dtype) {
  case c10::ScalarType::Float:
    return b.getF32Type();
  case c10::ScalarType::Double:
    return b.getF64Type();
  case c10::ScalarType::Half:
    return b.getF16Type();
  case c10::ScalarType::BFloat16:
    return b.getBF16Type();
  case c10::ScalarType::Long:
    return b.getI64Type();
  case c10::ScalarType::Int:
    return b.getI32Type();
  case c10::ScalarType::Short:
    return b.getI16Type();
  case c10::ScalarType::Char:
    return b.getI8Type();
  case c10::ScalarType::Byte:
    return IntegerType::get(context, 8, IntegerType::Unsigned);
  case c10::ScalarType::Bool:
    return b.getI1Type();
  default:
    return {};
  }
}

std::optional<c10::ScalarType> scalarTypeOf(Type t) {
  if (t.isF32())
    return c10::ScalarType::Float;
  if (t.isF64())
    return c10::ScalarType::Double;
  if (t.isF16())
    return c10::ScalarType::Half;
  if (t.isBF16())
    return c10::ScalarType::BFloat16;
  if (t.isInteger(1))
    return c10::ScalarType::Bool;
  if (t.isUnsignedInteger(8))
    return c10::ScalarType::Byte;
  if (t.isSignlessInteger(64))
    return c10::ScalarType::Long;
  if (t.isSignlessInteger(32))
    return c10::ScalarType::Int;
  if (t.isSignlessInteger(16))
    return c10::ScalarType::Short;
  if (t.isSignlessInteger(8))
    return c10::ScalarType::Char;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// GraphEvaluator
//===----------------------------------------------------------------------===//

/// Operators that return a view of their first input: an in-place update of
/// such a view would also change the viewed tensor, which value semantics
/// cannot express.
static bool isViewOp(jit::Node *n) {
  static const llvm::StringSet<> kViews = {
      "aten::view",    "aten::reshape",   "aten::select",  "aten::slice",
      "aten::narrow",  "aten::transpose", "aten::permute", "aten::t",
      "aten::squeeze", "aten::unsqueeze", "aten::expand",  "aten::flatten",
      "aten::chunk",   "aten::split",     "aten::unbind",  "aten::diagonal",
      "aten::as_strided", "aten::detach", "aten::expand_as", "aten::view_as",
      "aten::__getitem__", "prim::ListUnpack"};
  return kViews.contains(n->kind().toQualString());
}

/// Operators that ask about a tensor's type (shape, dtype, device) rather
/// than compute on its values; answered at compile time.
static bool isTensorQuery(StringRef kind) {
  static const llvm::StringSet<> kQueries = {
      "aten::size", "aten::dim", "aten::numel", "aten::len", "prim::dtype",
      "aten::is_floating_point", "prim::device", "prim::layout",
      "aten::__is__", "aten::__isnot__", "prim::is_cuda", "prim::is_nested",
      "prim::is_quantized", "prim::is_sparse", "prim::is_mkldnn",
      "prim::is_xpu", "prim::is_meta", "prim::is_vulkan", "prim::requires_grad",
      "prim::is_sparse_csr", "prim::is_ipu", "prim::is_mps", "prim::is_ort",
      "aten::Int", "aten::Float", "aten::Bool", "aten::item",
      "aten::ScalarImplicit", "aten::FloatImplicit", "aten::IntImplicit"};
  return kQueries.contains(kind);
}

/// True if `kind` (or its functional form, for an in-place `kind_`) has an
/// aten converter.
static bool hasConverter(StringRef kind) {
  const auto &converters = atenConverters();
  if (converters.count(kind))
    return true;
  return kind.ends_with("_") && !kind.ends_with("__") &&
         converters.count(kind.drop_back());
}

class GraphEvaluator {
public:
  GraphEvaluator(MLIRContext *context, const ImportOptions &options)
      : context_(context), options_(options), builder_(context) {}

  OwningOpRef<ModuleOp> run(jit::Module &module);

  OpBuilder &builder() { return builder_; }
  const ImportedValue &lookup(const jit::Value *v) const {
    static const ImportedValue kFailed;
    auto it = values_.find(v);
    return it == values_.end() ? kFailed : it->second;
  }
  void bind(const jit::Value *v, ImportedValue value) {
    values_[v] = std::move(value);
  }
  /// Every cached reference to `from` now names `to` (a load replaced).
  void rebind(Value from, Value to) {
    for (auto &entry : materialized_)
      if (entry.second == from)
        entry.second = to;
    for (auto &entry : values_)
      if (entry.second.kind == ImportedValue::Kind::Tensor &&
          entry.second.tensor == from)
        entry.second.tensor = to;
  }
  bool training() const { return options_.training; }
  /// A constant tensor as a value: inline if small, else a global named
  /// `name` (made unique). `moduleState` (a parameter or buffer when
  /// training) is a global whatever its size, so that it can be trained or
  /// updated.
  FailureOr<Value> materialize(const at::Tensor &tensor, Location loc,
                               const std::string &name,
                               bool moduleState = false);
  /// A tensor a converter computed: kept alive with the import, since
  /// materialize caches by the tensor's storage.
  FailureOr<Value> materializeComputed(at::Tensor tensor, Location loc,
                                       const std::string &name) {
    computed_.push_back(tensor);
    return materialize(computed_.back(), loc, name);
  }
  /// The module path ("layer1.0.conv1") of the module a node came from.
  std::string modulePath(jit::Node *n) const;
  Location locOf(jit::Node *n);

private:
  LogicalResult buildSignature(jit::Module &module, jit::Graph &graph);
  LogicalResult evalBlock(jit::Block *block, ArrayRef<ImportedValue> args,
                          SmallVectorImpl<ImportedValue> &results);
  LogicalResult evalNode(jit::Node *n);
  LogicalResult evalNatively(jit::Node *n, Location loc);
  LogicalResult evalTensorQuery(jit::Node *n, Location loc, bool &handled);
  LogicalResult evalSequenceOp(jit::Node *n, Location loc, bool &handled);
  LogicalResult evalIf(jit::Node *n, Location loc);
  LogicalResult evalLoop(jit::Node *n, Location loc);
  LogicalResult flattenOutput(const ImportedValue &v, Location loc,
                              SmallVectorImpl<Value> &out);
  InFlightDiagnostic dataDependent(jit::Node *n, Location loc,
                                   StringRef what);

  MLIRContext *context_;
  const ImportOptions &options_;
  OpBuilder builder_;
  OwningOpRef<ModuleOp> module_;
  func::FuncOp func_;
  std::unordered_map<const jit::Value *, ImportedValue> values_;
  /// Constant tensors already materialised (weights used twice, shared).
  llvm::DenseMap<const c10::TensorImpl *, Value> materialized_;
  std::vector<at::Tensor> computed_;
  /// Keeps materialised tensors alive so their TensorImpl keys stay unique.
  std::vector<at::Tensor> keepAlive_;
  llvm::StringSet<> globalNames_;
  /// Operators without a converter, in the order first met, with where.
  std::vector<std::pair<std::string, Location>> unsupported_;
  llvm::StringSet<> unsupportedKinds_;
  int64_t loopIterations_ = 0;
  /// The placement of the innermost tessera.Block being traced (its IPU
  /// and pipeline stage), given to every op imported inside it.
  struct Placement {
    int64_t ipu, stage;
  };
  std::vector<Placement> blocks_;
  LogicalResult enterRecordFunction(jit::Node *n, Location loc);

public:
  /// The model's submodules: path, name in its parent, class.
  struct Submodule {
    std::string path, attribute, className;
  };
  void setSubmodules(std::vector<Submodule> submodules) { submodules_ = std::move(submodules); }

private:
  /// The path of the submodule a call made from the module at `parent`
  /// reached as `name`: the inliner records only the name of the last
  /// attribute read, "9" for self.encoder.layer[9], so the path is the one
  /// submodule under `parent` of that name and class ("encoder.layer.9");
  /// `parent.name` when there are none or several.
  std::string submodulePath(const std::string &parent, const std::string &name,
                            const std::string &className) const;
  std::vector<Submodule> submodules_;
  mutable std::map<std::tuple<std::string, std::string, std::string>, std::string>
      resolvedPaths_;
};

/// A class's qualified name without the "___torch_mangle_N" components
/// that cloning and scripting add.
static std::string unmangledClassName(const c10::ClassTypePtr &type) {
  if (!type || !type->name())
    return {};
  std::string out;
  for (const std::string &atom : type->name()->atoms()) {
    if (StringRef(atom).starts_with("___torch_mangle"))
      continue;
    out += (out.empty() ? "" : ".") + atom;
  }
  return out;
}

/// The name of a placement mark the Python API's tessera.Block traces
/// (torch.autograd.profiler.record_function, which tracing records):
/// "tessera.block ipu=<N> stage=<S>".
static constexpr llvm::StringLiteral kBlockMarkPrefix = "tessera.block ";

std::string GraphEvaluator::modulePath(jit::Node *n) const {
  std::string path;
  if (auto cs = n->callstack())
    for (const auto &entry : (*cs)->vec())
      if (const auto &info = std::get<2>(entry)) {
        path = submodulePath(path, info->instance_name(),
                             unmangledClassName(info->class_type()));
      }
  if (!path.empty() || !n->scope() || n->scope()->isBlank())
    return path;
  // Traced graphs name modules by scope: "__module.layer1/__module.layer1.0".
  std::string scope = n->scope()->namesFromRoot();
  StringRef last = StringRef(scope).rsplit('/').second;
  if (last.empty())
    last = scope;
  last.consume_front("__module.");
  return last.str();
}

std::string GraphEvaluator::submodulePath(const std::string &parent, const std::string &name,
                                          const std::string &className) const {
  auto [it, added] = resolvedPaths_.try_emplace({parent, name, className});
  if (!added)
    return it->second;
  std::string prefix = parent.empty() ? "" : parent + ".";
  const Submodule *found = nullptr;
  int matches = 0;
  for (const Submodule &m : submodules_)
    if (m.attribute == name && m.className == className &&
        StringRef(m.path).starts_with(prefix)) {
      found = &m;
      ++matches;
    }
  it->second = matches == 1 ? found->path : prefix + name;
  return it->second;
}

Location GraphEvaluator::locOf(jit::Node *n) {
  Location loc = FileLineColLoc::get(context_, options_.modelName, 0, 0);
  jit::SourceRange range = n->sourceRange();
  if (auto original = range.findSourceRangeThatGenerated())
    range = *original;
  if (auto flc = range.file_line_col())
    loc = FileLineColLoc::get(context_, std::get<0>(*flc),
                              static_cast<unsigned>(std::get<1>(*flc)),
                              // TorchScript counts columns from 0, MLIR from 1
                              static_cast<unsigned>(std::get<2>(*flc)) + 1);
  std::string path = modulePath(n);
  if (!path.empty())
    loc = NameLoc::get(StringAttr::get(context_, path), loc);
  return loc;
}

FailureOr<Value> GraphEvaluator::materialize(const at::Tensor &tensor,
                                             Location loc,
                                             const std::string &name,
                                             bool moduleState) {
  auto cached = materialized_.find(tensor.unsafeGetTensorImpl());
  if (cached != materialized_.end())
    return cached->second;
  Type elem = elementTypeOf(tensor.scalar_type(), context_);
  if (!elem)
    return emitError(loc) << "constant tensor '" << name << "' has dtype "
                          << c10::toString(tensor.scalar_type())
                          << ", which Tessera does not support";
  if (tensor.is_quantized() || !tensor.is_cpu() || tensor.is_sparse())
    return emitError(loc) << "constant tensor '" << name
                          << "' is quantized, sparse or not on the CPU";
  at::Tensor data = tensor.contiguous();
  auto type = RankedTensorType::get(
      SmallVector<int64_t>(data.sizes().begin(), data.sizes().end()), elem);
  ArrayRef<char> raw(static_cast<const char *>(data.data_ptr()), data.nbytes());
  Value result;
  bool inlineIt = data.numel() <= options_.inlineLimit &&
                  !(moduleState && isa<FloatType>(elem));
  if (inlineIt || elem.isInteger(1)) {
    DenseElementsAttr attr;
    if (elem.isInteger(1)) {
      SmallVector<bool> bits(raw.begin(), raw.end());
      attr = DenseElementsAttr::get(type, ArrayRef<bool>(bits));
    } else {
      attr = DenseElementsAttr::getFromRawBuffer(type, raw);
    }
    result = graph::ConstantOp::create(builder_, loc, attr).getResult();
  } else {
    std::string symbol = name;
    for (int suffix = 1; globalNames_.contains(symbol); ++suffix)
      symbol = name + "_" + std::to_string(suffix);
    globalNames_.insert(symbol);
    // Zero copy: the blob points into the tensor, which its deleter keeps
    // alive for as long as the module holds the payload.
    AsmResourceBlob blob(raw, data.element_size(),
                         [keep = data](void *, size_t, size_t) {},
                         /*dataIsMutable=*/false);
    auto payload = DenseResourceElementsAttr::get(type, symbol, std::move(blob));
    {
      OpBuilder::InsertionGuard guard(builder_);
      builder_.setInsertionPoint(func_);
      ml_program::GlobalOp::create(builder_, loc, symbol, type,
                                   /*is_mutable=*/false, payload,
                                   builder_.getStringAttr("private"));
    }
    result = ml_program::GlobalLoadConstOp::create(
                 builder_, loc, type, FlatSymbolRefAttr::get(context_, symbol))
                 .getResult();
  }
  materialized_[tensor.unsafeGetTensorImpl()] = result;
  keepAlive_.push_back(tensor);
  return result;
}

InFlightDiagnostic GraphEvaluator::dataDependent(jit::Node *n, Location loc,
                                                 StringRef what) {
  return emitError(loc) << what
                        << " depends on the values of tensors computed by the "
                           "model; Tessera compiles static graphs, so "
                           "control flow and Python numbers may depend only "
                           "on shapes, constants and module attributes (hoist "
                           "the decision out of the model, or express it with "
                           "torch.where)";
}

//===--- Signature -------------------------------------------------------===//

/// "x.1" -> "x": TorchScript numbers repeated debug names.
static std::string argumentName(const jit::Value *v, size_t index) {
  if (!v->hasDebugName())
    return "input_" + std::to_string(index);
  std::string name = v->debugName();
  auto dot = name.rfind('.');
  if (dot != std::string::npos && dot + 1 < name.size() &&
      std::all_of(name.begin() + dot + 1, name.end(), ::isdigit))
    name.resize(dot);
  return name;
}

LogicalResult GraphEvaluator::buildSignature(jit::Module &module,
                                             jit::Graph &graph) {
  Location modelLoc = FileLineColLoc::get(context_, options_.modelName, 0, 0);
  const c10::FunctionSchema &schema =
      module.get_method("forward").function().getSchema();
  std::set<std::string> known;
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<std::pair<const jit::Value *, int>> tensorArgs;
  std::vector<std::string> missing;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const jit::Value *in = graph.inputs()[i];
    if (in->type()->kind() == c10::TypeKind::ClassType)
      continue; // self: its attributes are frozen into the graph
    std::string name = i < schema.arguments().size()
                           ? schema.arguments()[i].name()
                           : argumentName(in, i);
    known.insert(name);
    c10::TypePtr type = in->type();
    bool optional = false;
    if (auto opt = type->cast<c10::OptionalType>()) {
      type = opt->getElementType();
      optional = true;
    }
    auto shape = options_.inputShapes.find(name);
    bool isTensor = type->kind() == c10::TypeKind::TensorType;
    if (isTensor && shape != options_.inputShapes.end()) {
      Type elem = builder_.getF32Type();
      if (auto t = options_.inputTypes.find(name); t != options_.inputTypes.end()) {
        elem = parseType(t->second, context_);
        if (!elem)
          return emitError(modelLoc) << "bad element type '" << t->second
                                     << "' for input '" << name << "'";
      }
      tensorArgs.push_back({in, static_cast<int>(argTypes.size())});
      argTypes.push_back(RankedTensorType::get(shape->second, elem));
      argNames.push_back(name);
      continue;
    }
    // No shape: the argument's default value, or None for an optional one.
    const c10::Argument *arg =
        i < schema.arguments().size() ? &schema.arguments()[i] : nullptr;
    if (arg && arg->default_value()) {
      bind(in, ImportedValue::ofConstant(*arg->default_value()));
    } else if (optional) {
      bind(in, ImportedValue::ofConstant(c10::IValue()));
    } else if (isTensor) {
      missing.push_back(name);
    } else {
      return emitError(modelLoc)
             << "forward() argument '" << name << "' has type "
             << in->type()->repr_str()
             << " and no default value; Tessera compiles functions of tensors "
                "(give it a default in the model, or make it a tensor)";
    }
  }
  std::vector<std::pair<std::string, std::string>> named;
  for (const auto &[name, dims] : options_.inputShapes)
    named.push_back({"--input-shape", name});
  for (const auto &[name, type] : options_.inputTypes)
    named.push_back({"--input-type", name});
  for (const auto &[flag, name] : named)
    if (!known.count(name)) {
      auto diag = emitError(modelLoc) << flag << " names '" << name
                                      << "', which is not an argument of "
                                         "forward(); its arguments are:";
      for (const std::string &k : known)
        diag << " " << k;
      return diag;
    }
  if (!missing.empty()) {
    auto diag = emitError(modelLoc)
                << "TorchScript does not record input shapes; give the shape "
                   "of every tensor argument of forward():";
    for (const std::string &name : missing)
      diag << " --input-shape " << name << "=D0xD1x...";
    return diag;
  }
  builder_.setInsertionPointToEnd(module_->getBody());
  func_ = func::FuncOp::create(builder_, modelLoc, "main",
                               builder_.getFunctionType(argTypes, {}));
  Block *entry = func_.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames))
    func_.setArgAttr(i, "graph.name", builder_.getStringAttr(name));
  for (auto [value, index] : tensorArgs)
    bind(value, ImportedValue::ofTensor(entry->getArgument(index)));
  builder_.setInsertionPointToStart(entry);
  return success();
}

//===--- Evaluation ------------------------------------------------------===//

LogicalResult GraphEvaluator::evalBlock(jit::Block *block,
                                        ArrayRef<ImportedValue> args,
                                        SmallVectorImpl<ImportedValue> &results) {
  for (auto [param, arg] : llvm::zip(block->inputs(), args))
    bind(param, arg);
  for (jit::Node *n : block->nodes())
    if (failed(evalNode(n)))
      return failure();
  results.clear();
  for (const jit::Value *out : block->outputs())
    results.push_back(lookup(out));
  return success();
}

LogicalResult GraphEvaluator::evalNatively(jit::Node *n, Location loc) {
  jit::Stack stack;
  for (const jit::Value *in : n->inputs())
    stack.push_back(lookup(in).constant);
  // Vararg operators (aten::format) take their input count on the stack.
  if (const c10::FunctionSchema *schema = n->maybeSchema();
      schema && schema->is_vararg())
    stack.push_back(static_cast<int64_t>(n->inputs().size()));
  try {
    n->getOperation()(stack);
  } catch (const std::exception &e) {
    std::string what = e.what();
    if (auto *c10error = dynamic_cast<const c10::Error *>(&e))
      what = c10error->what_without_backtrace();
    return emitError(loc) << n->kind().toQualString()
                          << " failed while evaluated at compile time: "
                          << what;
  }
  if (stack.size() != n->outputs().size())
    return emitError(loc) << n->kind().toQualString() << " returned "
                          << stack.size() << " values, expected "
                          << n->outputs().size();
  for (auto [out, value] : llvm::zip(n->outputs(), stack))
    bind(out, ImportedValue::ofConstant(std::move(value)));
  return success();
}

/// Questions about a device tensor that its static type answers.
LogicalResult GraphEvaluator::evalTensorQuery(jit::Node *n, Location loc,
                                              bool &handled) {
  handled = false;
  if (n->inputs().empty())
    return success();
  const ImportedValue &first = lookup(n->input(0));
  std::string kind = n->kind().toQualString();
  if (kind == "aten::__is__" || kind == "aten::__isnot__") {
    // `x is None` for a tensor computed on the device.
    const ImportedValue &second = lookup(n->input(1));
    if (first.kind == ImportedValue::Kind::Constant &&
        second.kind == ImportedValue::Kind::Constant)
      return success();
    bool same = first.kind == second.kind && first.tensor == second.tensor &&
                first.kind == ImportedValue::Kind::Tensor;
    handled = true;
    bind(n->output(), ImportedValue::ofConstant(kind == "aten::__is__" ? same : !same));
    return success();
  }
  if (first.kind != ImportedValue::Kind::Tensor)
    return success();
  auto type = cast<RankedTensorType>(first.tensor.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rank = type.getRank();
  auto set = [&](c10::IValue v) {
    handled = true;
    bind(n->output(), ImportedValue::ofConstant(std::move(v)));
    return success();
  };
  if (kind == "aten::size") {
    if (n->inputs().size() == 1)
      return set(c10::IValue(std::vector<int64_t>(shape.begin(), shape.end())));
    const ImportedValue &dim = lookup(n->input(1));
    if (dim.kind != ImportedValue::Kind::Constant || !dim.constant.isInt())
      return success();
    int64_t d = dim.constant.toInt();
    if (d < -rank || d >= rank)
      return emitError(loc) << "aten::size: dim " << d
                            << " is out of range for a tensor of rank " << rank;
    return set(shape[d < 0 ? d + rank : d]);
  }
  if (kind == "aten::dim")
    return set(rank);
  if (kind == "aten::numel")
    return set(type.getNumElements());
  if (kind == "aten::len") {
    if (rank == 0)
      return emitError(loc) << "len() of a 0-d tensor";
    return set(shape[0]);
  }
  if (kind == "prim::dtype") {
    auto dtype = scalarTypeOf(type.getElementType());
    if (!dtype)
      return emitError(loc) << "tensor of element type " << type.getElementType()
                            << " has no torch dtype";
    return set(static_cast<int64_t>(*dtype));
  }
  if (kind == "aten::is_floating_point")
    return set(isa<FloatType>(type.getElementType()));
  if (kind == "prim::device")
    return set(c10::Device(c10::DeviceType::CPU));
  if (kind == "prim::layout")
    return set(static_cast<int64_t>(c10::Layout::Strided));
  // Inference graphs: nothing is on CUDA, nested, quantized or tracked.
  static const llvm::StringSet<> kFalse = {
      "prim::is_cuda",     "prim::is_nested", "prim::is_quantized",
      "prim::is_sparse",   "prim::is_mkldnn", "prim::is_xpu",
      "prim::is_meta",     "prim::is_vulkan", "prim::requires_grad",
      "prim::is_sparse_csr", "prim::is_ipu",  "prim::is_mps", "prim::is_ort"};
  if (kFalse.contains(kind))
    return set(false);
  static const llvm::StringSet<> kToNumber = {
      "aten::Int", "aten::Float", "aten::Bool", "aten::item",
      "aten::ScalarImplicit", "aten::FloatImplicit", "aten::IntImplicit"};
  if (kToNumber.contains(kind)) {
    // A number read from a tensor is known only if the tensor is constant.
    DenseElementsAttr attr;
    if (!matchPattern(first.tensor, m_Constant(&attr)) || attr.getNumElements() != 1)
      return dataDependent(n, loc, "this Python number (" + kind + ")");
    at::Tensor t;
    if (isa<FloatType>(attr.getElementType()))
      t = at::scalar_tensor((*attr.getValues<APFloat>().begin()).convertToDouble(),
                            at::kDouble);
    else
      t = at::scalar_tensor((*attr.getValues<APInt>().begin()).getSExtValue(),
                            at::kLong);
    handled = true;
    bind(n->input(0), ImportedValue::ofConstant(t));
    LogicalResult r = evalNatively(n, loc);
    bind(n->input(0), first);
    return r;
  }
  return success();
}

/// List and tuple operations on sequences that hold device tensors.
LogicalResult GraphEvaluator::evalSequenceOp(jit::Node *n, Location loc,
                                             bool &handled) {
  std::string kind = n->kind().toQualString();
  handled = false;
  auto allConstant = llvm::all_of(n->inputs(), [&](const jit::Value *v) {
    return lookup(v).kind == ImportedValue::Kind::Constant;
  });
  if (kind == "prim::ListConstruct" || kind == "prim::TupleConstruct") {
    if (allConstant) {
      std::vector<c10::IValue> elements;
      for (const jit::Value *in : n->inputs())
        elements.push_back(lookup(in).constant);
      handled = true;
      if (kind == "prim::TupleConstruct") {
        bind(n->output(), ImportedValue::ofConstant(
                              c10::ivalue::Tuple::create(std::move(elements))));
        return success();
      }
      c10::impl::GenericList list(
          n->output()->type()->expectRef<c10::ListType>().getElementType());
      for (c10::IValue &e : elements)
        list.push_back(std::move(e));
      bind(n->output(), ImportedValue::ofConstant(std::move(list)));
      return success();
    }
    std::vector<ImportedValue> elements;
    for (const jit::Value *in : n->inputs())
      elements.push_back(lookup(in));
    handled = true;
    bind(n->output(), ImportedValue::ofSequence(std::move(elements),
                                                kind == "prim::TupleConstruct"));
    return success();
  }
  // A dict of device tensors (a traced model's dict output, as Hugging
  // Face's ModelOutput records with strict=False): its values, in order.
  if (kind == "prim::DictConstruct" && !allConstant) {
    std::vector<ImportedValue> values;
    for (size_t i = 1; i < n->inputs().size(); i += 2)
      values.push_back(lookup(n->input(i)));
    handled = true;
    bind(n->output(), ImportedValue::ofSequence(std::move(values), /*isTuple=*/true));
    return success();
  }
  if (n->inputs().empty())
    return success();
  const ImportedValue &seq = lookup(n->input(0));
  if ((kind == "prim::ListUnpack" || kind == "prim::TupleUnpack") &&
      seq.kind == ImportedValue::Kind::Constant &&
      (seq.constant.isList() || seq.constant.isTuple())) {
    std::vector<c10::IValue> elements =
        seq.constant.isTuple() ? seq.constant.toTupleRef().elements().vec()
                               : seq.constant.toListRef().vec();
    if (elements.size() != n->outputs().size())
      return emitError(loc) << "cannot unpack " << elements.size()
                            << " values into " << n->outputs().size();
    for (auto [out, v] : llvm::zip(n->outputs(), elements))
      bind(out, ImportedValue::ofConstant(v));
    handled = true;
    return success();
  }
  if (kind == "aten::append" && seq.kind == ImportedValue::Kind::Constant &&
      seq.constant.isList() &&
      lookup(n->input(1)).kind != ImportedValue::Kind::Constant) {
    // A device tensor appended to a constant list: the list becomes a
    // sequence (its name is rebound, as append mutates it).
    std::vector<ImportedValue> elements;
    for (const c10::IValue &e : seq.constant.toListRef())
      elements.push_back(ImportedValue::ofConstant(e));
    elements.push_back(lookup(n->input(1)));
    ImportedValue list = ImportedValue::ofSequence(std::move(elements), false);
    bind(n->input(0), list);
    bind(n->output(), list);
    handled = true;
    return success();
  }
  if (seq.kind != ImportedValue::Kind::Sequence)
    return success();
  std::vector<ImportedValue> &elements = *seq.elements;
  if (kind == "prim::ListUnpack" || kind == "prim::TupleUnpack") {
    if (elements.size() != n->outputs().size())
      return emitError(loc) << "cannot unpack " << elements.size()
                            << " values into " << n->outputs().size();
    for (auto [out, v] : llvm::zip(n->outputs(), elements))
      bind(out, v);
    handled = true;
    return success();
  }
  if (kind == "aten::len") {
    handled = true;
    bind(n->output(), ImportedValue::ofConstant(static_cast<int64_t>(elements.size())));
    return success();
  }
  if (kind == "aten::append") {
    elements.push_back(lookup(n->input(1)));
    bind(n->output(), seq);
    handled = true;
    return success();
  }
  if (kind == "aten::__getitem__" || kind == "prim::TupleIndex" ||
      kind == "aten::select") {
    const ImportedValue &index = lookup(n->input(1));
    if (index.kind != ImportedValue::Kind::Constant || !index.constant.isInt())
      return dataDependent(n, loc, "this list index");
    int64_t i = index.constant.toInt(), size = elements.size();
    if (i < -size || i >= size)
      return emitError(loc) << "index " << i << " is out of range for a "
                            << (seq.isTuple ? "tuple" : "list") << " of "
                            << size;
    bind(n->output(), elements[i < 0 ? i + size : i]);
    handled = true;
    return success();
  }
  return success();
}

LogicalResult GraphEvaluator::evalIf(jit::Node *n, Location loc) {
  const ImportedValue &cond = lookup(n->input(0));
  if (cond.kind != ImportedValue::Kind::Constant || !cond.constant.isBool())
    return dataDependent(n, loc, "the condition of this `if`");
  jit::Block *taken = n->blocks()[cond.constant.toBool() ? 0 : 1];
  SmallVector<ImportedValue> results;
  if (failed(evalBlock(taken, {}, results)))
    return failure();
  for (auto [out, v] : llvm::zip(n->outputs(), results))
    bind(out, v);
  return success();
}

LogicalResult GraphEvaluator::evalLoop(jit::Node *n, Location loc) {
  const ImportedValue &trips = lookup(n->input(0));
  const ImportedValue &start = lookup(n->input(1));
  if (trips.kind != ImportedValue::Kind::Constant || !trips.constant.isInt())
    return dataDependent(n, loc, "the trip count of this loop");
  if (start.kind != ImportedValue::Kind::Constant || !start.constant.isBool())
    return dataDependent(n, loc, "the condition of this loop");
  SmallVector<ImportedValue> carried;
  for (size_t i = 2; i < n->inputs().size(); ++i)
    carried.push_back(lookup(n->input(i)));
  constexpr int64_t kMaxUnrolled = 1 << 20;
  bool cond = start.constant.toBool();
  for (int64_t i = 0; cond && i < trips.constant.toInt(); ++i) {
    if (++loopIterations_ > kMaxUnrolled)
      return emitError(loc) << "loops run over " << kMaxUnrolled
                            << " iterations at compile time; Tessera unrolls "
                               "loops, so their trip counts must be small";
    SmallVector<ImportedValue> args = {ImportedValue::ofConstant(i)};
    args.append(carried.begin(), carried.end());
    SmallVector<ImportedValue> results;
    if (failed(evalBlock(n->blocks()[0], args, results)))
      return failure();
    const ImportedValue &next = results.front();
    if (next.kind == ImportedValue::Kind::Failed)
      return failure(); // an unsupported operator decided it: reported
    if (next.kind != ImportedValue::Kind::Constant || !next.constant.isBool())
      return dataDependent(n, loc, "the condition of this loop");
    cond = next.constant.toBool();
    carried.assign(results.begin() + 1, results.end());
  }
  for (auto [out, v] : llvm::zip(n->outputs(), carried))
    bind(out, v);
  return success();
}

LogicalResult GraphEvaluator::evalNode(jit::Node *n) {
  std::string kind = n->kind().toQualString();
  Location loc = locOf(n);
  // Users of a value whose producer is unsupported are skipped: that
  // operator is reported once, at the end, with all others.
  bool anyFailed = llvm::any_of(n->inputs(), [&](const jit::Value *v) {
    return lookup(v).kind == ImportedValue::Kind::Failed;
  });
  if (anyFailed && kind != "prim::Loop") {
    if (kind == "prim::If")
      return failure();
    // Still list this operator if it would be unsupported too, so that one
    // compile names every missing operator.
    if (!StringRef(kind).starts_with("prim::") && !isTensorQuery(kind) &&
        !hasConverter(kind) && unsupportedKinds_.insert(kind).second)
      unsupported_.push_back({kind, loc});
    for (const jit::Value *out : n->outputs())
      bind(out, ImportedValue());
    return success();
  }

  if (kind == "prim::Constant") {
    if (!n->hasUses())
      return success();
    std::optional<c10::IValue> value = jit::toIValue(n->output());
    if (!value)
      return emitError(loc) << "a constant of type "
                            << n->output()->type()->repr_str()
                            << " cannot be read";
    bind(n->output(), ImportedValue::ofConstant(*value));
    return success();
  }
  if (kind == "prim::If")
    return evalIf(n, loc);
  if (kind == "prim::Loop")
    return evalLoop(n, loc);
  if (kind == "prim::RaiseException") {
    std::string message = "an exception";
    const ImportedValue &m = lookup(n->input(0));
    if (m.kind == ImportedValue::Kind::Constant && m.constant.isString())
      message = m.constant.toStringRef();
    return emitError(loc) << "the model raises an exception here for these "
                             "input shapes: "
                          << message;
  }
  if (kind == "prim::unchecked_cast") {
    bind(n->output(), lookup(n->input(0)));
    return success();
  }
  if (kind == "prim::Uninitialized") {
    bind(n->output(), ImportedValue::ofConstant(c10::IValue()));
    return success();
  }
  if (kind == "aten::warn" || kind == "prim::Print")
    return success();
  // Profiling scopes, and the placement marks tessera.Block traces as such.
  if (kind == "profiler::_record_function_enter" ||
      kind == "profiler::_record_function_enter_new")
    return enterRecordFunction(n, loc);
  if (kind == "profiler::_record_function_exit" ||
      kind == "profiler::_record_function_exit._RecordFunction") {
    const ImportedValue &handle = lookup(n->input(0));
    if (handle.kind == ImportedValue::Kind::Constant && handle.constant.isInt() &&
        handle.constant.toInt() >= 0 && !blocks_.empty())
      blocks_.pop_back();
    return success();
  }

  bool handled = false;
  if (failed(evalTensorQuery(n, loc, handled)))
    return failure();
  if (handled)
    return success();
  if (failed(evalSequenceOp(n, loc, handled)))
    return failure();
  if (handled)
    return success();

  bool allConstant = llvm::all_of(n->inputs(), [&](const jit::Value *v) {
    return lookup(v).kind == ImportedValue::Kind::Constant;
  });
  if (allConstant && n->maybeOperator() && !n->isNondeterministic())
    return evalNatively(n, loc);

  if (!hasConverter(kind) && isTensorQuery(kind))
    return emitError(loc) << kind << " cannot be answered for this value";
  const auto &converters = atenConverters();
  auto converter = converters.find(kind);
  bool inPlace = false;
  if (converter == converters.end() && kind.size() > 1 && kind.back() == '_' &&
      kind.compare(kind.size() - 2, 2, "__") != 0) {
    converter = converters.find(kind.substr(0, kind.size() - 1));
    inPlace = true;
  }
  if (converter == converters.end()) {
    if (unsupportedKinds_.insert(kind).second)
      unsupported_.push_back({kind, loc});
    for (const jit::Value *out : n->outputs())
      bind(out, ImportedValue());
    return success();
  }
  if (inPlace && isViewOp(n->input(0)->node()))
    return emitError(loc) << kind << " updates a view of another tensor in "
                                     "place, which Tessera cannot express; "
                                     "use the out-of-place "
                          << kind.substr(0, kind.size() - 1) << " instead";
  OpContext context(*this, n, loc);
  Block *body = builder_.getInsertionBlock();
  Operation *before = body->empty() ? nullptr : &body->back();
  if (failed(converter->second(context)))
    return failure();
  // Inside a tessera.Block: every op the node became is placed there
  // (constants and weights are placed with their readers).
  if (!blocks_.empty() && body == builder_.getInsertionBlock()) {
    auto first = before ? std::next(before->getIterator()) : body->begin();
    for (Operation &op : llvm::make_range(first, body->end())) {
      if (op.getNumOperands() == 0)
        continue;
      op.setAttr(graph::kIpuAttrName, builder_.getI64IntegerAttr(blocks_.back().ipu));
      op.setAttr(graph::kStageAttrName, builder_.getI64IntegerAttr(blocks_.back().stage));
    }
  }
  // An in-place op's input now holds the result.
  if (inPlace)
    bind(n->input(0), lookup(n->output(0)));
  return success();
}

/// A record_function scope's start: a placement mark of tessera.Block
/// ("tessera.block ipu=1 stage=1") opens a placement; any other name is a
/// profiling scope of the model, which changes nothing. The handle it
/// returns says which (the exit pops a placement for a non-negative one).
LogicalResult GraphEvaluator::enterRecordFunction(jit::Node *n, Location loc) {
  const ImportedValue &name = lookup(n->input(0));
  if (name.kind != ImportedValue::Kind::Constant || !name.constant.isString())
    return emitError(loc) << n->kind().toQualString() << " needs a constant name";
  StringRef text = name.constant.toStringRef();
  int64_t handle = -1;
  if (text.consume_front(kBlockMarkPrefix)) {
    std::optional<int64_t> ipu, stage;
    SmallVector<StringRef> fields;
    text.split(fields, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef field : fields) {
      auto [key, value] = field.split('=');
      int64_t number;
      if ((key != "ipu" && key != "stage") || value.getAsInteger(10, number) || number < 0)
        return emitError(loc) << "a tessera.Block placement mark '" << name.constant.toStringRef()
                              << "' is not 'tessera.block ipu=N [stage=S]'";
      (key == "ipu" ? ipu : stage) = number;
    }
    if (!ipu)
      return emitError(loc) << "a tessera.Block placement mark '" << name.constant.toStringRef()
                            << "' names no IPU";
    handle = static_cast<int64_t>(blocks_.size());
    blocks_.push_back({*ipu, stage.value_or(*ipu)});
  }
  bind(n->output(), ImportedValue::ofConstant(c10::IValue(handle)));
  return success();
}

LogicalResult GraphEvaluator::flattenOutput(const ImportedValue &v,
                                            Location loc,
                                            SmallVectorImpl<Value> &out) {
  switch (v.kind) {
  case ImportedValue::Kind::Tensor:
    out.push_back(v.tensor);
    return success();
  case ImportedValue::Kind::Sequence:
    for (const ImportedValue &e : *v.elements)
      if (failed(flattenOutput(e, loc, out)))
        return failure();
    return success();
  case ImportedValue::Kind::Constant:
    if (v.constant.isTensor()) {
      auto t = materialize(v.constant.toTensor(), loc, "output");
      if (failed(t))
        return failure();
      out.push_back(*t);
      return success();
    }
    if (v.constant.isTuple() || v.constant.isList()) {
      std::vector<c10::IValue> elements =
          v.constant.isTuple() ? v.constant.toTupleRef().elements().vec()
                               : v.constant.toListRef().vec();
      for (const c10::IValue &e : elements)
        if (failed(flattenOutput(ImportedValue::ofConstant(e), loc, out)))
          return failure();
      return success();
    }
    if (v.constant.isInt() || v.constant.isDouble() || v.constant.isBool()) {
      // A Python number the model returns becomes a 0-d tensor output.
      at::Tensor t = v.constant.isInt()      ? at::scalar_tensor(v.constant.toInt(), at::kLong)
                     : v.constant.isDouble() ? at::scalar_tensor(v.constant.toDouble(), at::kFloat)
                                             : at::scalar_tensor(v.constant.toBool(), at::kBool);
      auto value = materialize(t, loc, "output");
      if (failed(value))
        return failure();
      out.push_back(*value);
      return success();
    }
    return emitError(loc) << "the model returns a " << v.constant.tagKind()
                          << "; Tessera models return tensors (or tuples and "
                             "lists of them)";
  case ImportedValue::Kind::Failed:
    return failure();
  }
  return failure();
}

OwningOpRef<ModuleOp> GraphEvaluator::run(jit::Module &module) {
  Location modelLoc = FileLineColLoc::get(context_, options_.modelName, 0, 0);
  module_ = ModuleOp::create(modelLoc);
  (*module_)->setAttr("graph.source", builder_.getStringAttr(options_.modelName));
  (*module_)->setAttr("graph.producer", builder_.getStringAttr("TorchScript"));
  std::shared_ptr<jit::Graph> graph = module.get_method("forward").graph();
  if (failed(buildSignature(module, *graph)))
    return nullptr;
  LogicalResult evaluated = success();
  for (jit::Node *n : graph->nodes())
    if (failed(evaluated = evalNode(n)))
      break;
  if (!unsupported_.empty()) {
    auto diag = emitError(modelLoc)
                << unsupported_.size() << " unsupported TorchScript operator"
                << (unsupported_.size() == 1 ? "" : "s") << ":";
    for (const auto &[kind, loc] : unsupported_)
      diag << " " << kind;
    for (const auto &[kind, loc] : unsupported_)
      diag.attachNote(loc) << kind << " is used here";
    if (succeeded(evaluated))
      diag.attachNote() << "supported operators: tessera-compile "
                           "--list-torchscript-ops";
    return nullptr;
  }
  if (failed(evaluated))
    return nullptr;
  SmallVector<Value> results;
  for (const jit::Value *out : graph->outputs())
    if (failed(flattenOutput(lookup(out), modelLoc, results)))
      return nullptr;
  func::ReturnOp::create(builder_, modelLoc, results);
  func_.setType(builder_.getFunctionType(func_.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  for (size_t i = 0; i < results.size(); ++i)
    func_.setResultAttr(
        i, "graph.name",
        builder_.getStringAttr(results.size() == 1
                                   ? std::string("output")
                                   : "output_" + std::to_string(i)));
  if (failed(verify(*module_)))
    return nullptr;
  return std::move(module_);
}

//===----------------------------------------------------------------------===//
// OpContext
//===----------------------------------------------------------------------===//

OpContext::OpContext(GraphEvaluator &evaluator, jit::Node *node, Location loc)
    : evaluator_(evaluator), node_(node), loc_(loc) {}

OpBuilder &OpContext::builder() { return evaluator_.builder(); }

bool OpContext::training() const { return evaluator_.training(); }

void OpContext::rebind(Value from, Value to) { evaluator_.rebind(from, to); }

const ImportedValue &OpContext::input(size_t i) const {
  return evaluator_.lookup(node_->input(i));
}

std::string OpContext::argName(size_t i) const {
  if (const c10::FunctionSchema *schema = node_->maybeSchema())
    if (i < schema->arguments().size())
      return schema->arguments()[i].name();
  return "input" + std::to_string(i);
}

std::optional<std::string> OpContext::statePath(const jit::Value *v) {
  // Frozen parameters keep their attribute path: "self.layer1.0.conv1.weight".
  if (!v->hasDebugName())
    return std::nullopt;
  // debugName() returns a temporary string: keep it for the StringRef.
  std::string debugName = v->debugName();
  StringRef name = debugName;
  if (!name.consume_front("self."))
    return std::nullopt;
  return name.str();
}

std::string OpContext::constantName(size_t i) const {
  if (std::optional<std::string> path = statePath(node_->input(i)))
    return *path;
  std::string path = evaluator_.modulePath(node_);
  return path.empty() ? argName(i) : path + "." + argName(i);
}

bool OpContext::isModuleState(const jit::Value *v) const {
  return evaluator_.training() && statePath(v).has_value();
}

bool OpContext::isModuleState(size_t i) const { return isModuleState(node_->input(i)); }

bool OpContext::isTensor(size_t i) const {
  if (i >= numInputs())
    return false;
  const ImportedValue &v = input(i);
  return v.kind == ImportedValue::Kind::Tensor ||
         (v.kind == ImportedValue::Kind::Constant && v.constant.isTensor());
}

FailureOr<Value> OpContext::tensor(size_t i, Type scalarType) {
  if (i >= numInputs())
    return error() << "missing input " << i;
  const ImportedValue &v = input(i);
  if (v.kind == ImportedValue::Kind::Tensor)
    return v.tensor;
  if (v.kind == ImportedValue::Kind::Constant) {
    const c10::IValue &c = v.constant;
    if (c.isTensor())
      return evaluator_.materialize(c.toTensor(), loc_, constantName(i),
                                    isModuleState(i));
    if (c.isDouble() || c.isInt() || c.isBool()) {
      Type type = scalarType;
      if (!type)
        type = c.isDouble() ? Type(builder().getF32Type())
               : c.isInt()  ? Type(builder().getI64Type())
                            : Type(builder().getI1Type());
      double value = c.isDouble() ? c.toDouble()
                     : c.isInt()  ? static_cast<double>(c.toInt())
                                  : static_cast<double>(c.toBool());
      return scalar(type, value);
    }
  }
  return error() << "argument '" << argName(i) << "' must be a tensor";
}

FailureOr<Value> OpContext::constant(const at::Tensor &t, StringRef name) {
  return evaluator_.materializeComputed(t, loc_, name.str());
}

FailureOr<int64_t> OpContext::getInt(size_t i) {
  if (i < numInputs()) {
    const ImportedValue &v = input(i);
    if (v.kind == ImportedValue::Kind::Constant) {
      if (v.constant.isInt())
        return v.constant.toInt();
      if (v.constant.isBool())
        return static_cast<int64_t>(v.constant.toBool());
    }
  }
  return error() << "argument '" << argName(i)
                 << "' must be an integer known at compile time";
}

FailureOr<double> OpContext::getDouble(size_t i) {
  if (i < numInputs()) {
    const ImportedValue &v = input(i);
    if (v.kind == ImportedValue::Kind::Constant) {
      if (v.constant.isDouble())
        return v.constant.toDouble();
      if (v.constant.isInt())
        return static_cast<double>(v.constant.toInt());
      if (v.constant.isBool())
        return static_cast<double>(v.constant.toBool());
    }
  }
  return error() << "argument '" << argName(i)
                 << "' must be a number known at compile time";
}

FailureOr<bool> OpContext::getBool(size_t i) {
  if (i < numInputs()) {
    const ImportedValue &v = input(i);
    if (v.kind == ImportedValue::Kind::Constant && v.constant.isBool())
      return v.constant.toBool();
  }
  return error() << "argument '" << argName(i)
                 << "' must be a bool known at compile time";
}

FailureOr<std::string> OpContext::getString(size_t i) {
  if (i < numInputs()) {
    const ImportedValue &v = input(i);
    if (v.kind == ImportedValue::Kind::Constant && v.constant.isString())
      return v.constant.toStringRef();
  }
  return error() << "argument '" << argName(i) << "' must be a string";
}

FailureOr<SmallVector<int64_t>> OpContext::getInts(size_t i) {
  if (i < numInputs()) {
    const ImportedValue &v = input(i);
    if (v.kind == ImportedValue::Kind::Constant) {
      if (v.constant.isIntList()) {
        auto list = v.constant.toIntVector();
        return SmallVector<int64_t>(list.begin(), list.end());
      }
      if (v.constant.isInt())
        return SmallVector<int64_t>{v.constant.toInt()};
    }
  }
  return error() << "argument '" << argName(i)
                 << "' must be a list of integers known at compile time";
}

FailureOr<SmallVector<Value>> OpContext::tensorList(size_t i, bool allowNone) {
  if (i >= numInputs())
    return error() << "missing input " << i;
  const ImportedValue &v = input(i);
  std::vector<ImportedValue> elements;
  if (v.kind == ImportedValue::Kind::Sequence) {
    elements = *v.elements;
  } else if (v.kind == ImportedValue::Kind::Constant && v.constant.isList()) {
    for (const c10::IValue &e : v.constant.toListRef())
      elements.push_back(ImportedValue::ofConstant(e));
  } else {
    return error() << "argument '" << argName(i) << "' must be a list of tensors";
  }
  // The list's own elements, when it is built here (an RNN's parameters):
  // each is named, and trained, as the parameter it is.
  const jit::Node *list = node_->input(i)->node();
  bool built = list->kind() == c10::prim::ListConstruct &&
               list->inputs().size() == elements.size();
  SmallVector<Value> out;
  for (auto [k, e] : llvm::enumerate(elements)) {
    if (e.kind == ImportedValue::Kind::Tensor) {
      out.push_back(e.tensor);
      continue;
    }
    if (allowNone && e.isNone()) {
      out.push_back(Value());
      continue;
    }
    if (e.kind != ImportedValue::Kind::Constant || !e.constant.isTensor())
      return error() << "argument '" << argName(i) << "' must be a list of tensors";
    const jit::Value *element = built ? list->inputs()[k] : nullptr;
    std::string name = constantName(i);
    if (std::optional<std::string> path = element ? statePath(element) : std::nullopt)
      name = *path;
    TESSERA_ASSIGN_OR_FAIL(t, evaluator_.materialize(e.constant.toTensor(), loc_, name,
                                                     element ? isModuleState(element)
                                                             : isModuleState(i)));
    out.push_back(t);
  }
  return out;
}

Value OpContext::splat(Type elementType, ArrayRef<int64_t> shape, double v) {
  return graph::createSplatConstant(builder(), loc_, elementType, shape, v);
}

FailureOr<Value> OpContext::reshape(Value v, ArrayRef<int64_t> shape) {
  return graph::createReshape(builder(), loc_, v, shape);
}

FailureOr<Value> OpContext::transpose(Value v, ArrayRef<int64_t> perm) {
  return graph::createTranspose(builder(), loc_, v, perm);
}

FailureOr<Value> OpContext::castTo(Value v, Type elementType) {
  return graph::createCast(builder(), loc_, v, elementType);
}

FailureOr<Value> OpContext::expand(Value v, ArrayRef<int64_t> shape) {
  return graph::createExpand(builder(), loc_, v, shape);
}

FailureOr<int64_t> OpContext::normalizeDim(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1); // a 0-d tensor accepts dim 0 / -1
  int64_t normalized = dim < 0 ? dim + r : dim;
  if (normalized < 0 || normalized >= r)
    return error() << "dim " << dim << " is out of range for a tensor of rank "
                   << rank;
  return normalized;
}

LogicalResult OpContext::setResult(size_t i, Value v) {
  return setResult(i, ImportedValue::ofTensor(v));
}

LogicalResult OpContext::setResult(size_t i, ImportedValue v) {
  if (i >= node_->outputs().size())
    return error() << "has no output " << i;
  evaluator_.bind(node_->output(i), std::move(v));
  return success();
}

InFlightDiagnostic OpContext::error() {
  return emitError(loc_) << kind() << ": ";
}

LogicalResult OpContext::unsupported(const Twine &what) {
  return error() << what << " is not supported yet";
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// Replaces every prim::GetAttr chain from `self` that ends in a tensor (a
/// parameter or buffer) by a constant named "self.<path>", as jit::freeze
/// names the constants it folds. In training mode jit::freeze_module keeps
/// the modules whose attributes forward() mutates (batch norm's
/// num_batches_tracked), and with them the reads of their parameters.
static void foldAttributeReads(jit::Graph &graph, const jit::Module &module) {
  struct Object {
    c10::IValue value;
    std::string path;
  };
  std::unordered_map<const jit::Value *, Object> objects;
  // Parameters require grad, which constants may not: one detached view per
  // tensor, so that a tensor read twice stays one global.
  std::unordered_map<const c10::TensorImpl *, at::Tensor> detached;
  objects[graph.inputs()[0]] = Object{module._ivalue(), ""};
  std::function<void(jit::Block *)> visit = [&](jit::Block *block) {
    for (jit::Node *node : block->nodes()) {
      for (jit::Block *inner : node->blocks())
        visit(inner);
      if (node->kind() != c10::prim::GetAttr)
        continue;
      auto parent = objects.find(node->input(0));
      if (parent == objects.end() || !parent->second.value.isObject())
        continue;
      const std::string &name = node->s(c10::attr::name);
      auto object = parent->second.value.toObject();
      if (!object->type()->hasAttribute(name))
        continue;
      c10::IValue value = object->getAttr(name);
      std::string path = parent->second.path.empty()
                             ? name
                             : parent->second.path + "." + name;
      if (value.isObject()) {
        objects[node->output()] = Object{value, path};
        continue;
      }
      if (!value.isTensor())
        continue;
      const at::Tensor &tensor = value.toTensor();
      auto [it, inserted] = detached.try_emplace(tensor.unsafeGetTensorImpl());
      if (inserted)
        it->second = tensor.detach();
      jit::WithInsertPoint guard(node);
      jit::Value *constant = graph.insertConstant(it->second);
      constant->setDebugName("self." + path);
      node->output()->replaceAllUsesWith(constant);
    }
  };
  visit(graph.block());
  jit::EliminateDeadCode(graph.block());
}

static OwningOpRef<ModuleOp> importModule(StringRef bytes,
                                          MLIRContext *context,
                                          const ImportOptions &options) {
  context->loadDialect<graph::GraphDialect, func::FuncDialect,
                       ml_program::MLProgramDialect>();
  Location loc = FileLineColLoc::get(context, options.modelName, 0, 0);
  if (!bytes.starts_with(StringRef("PK\x03\x04", 4))) {
    emitError(loc) << "not a TorchScript archive (torch.jit.save writes a zip "
                      "file; this one does not start like one)";
    return nullptr;
  }
  jit::Module frozen;
  std::vector<GraphEvaluator::Submodule> submodules;
  try {
    std::istringstream stream(std::string(bytes.data(), bytes.size()));
    jit::Module module = jit::load(stream);
    module.train(options.training);
    if (!module.find_method("forward")) {
      emitError(loc) << "the TorchScript module has no forward() method";
      return nullptr;
    }
    // Before freezing, which folds submodules away.
    for (const jit::NameModule &sub : module.named_modules()) {
      if (sub.name.empty())
        continue;
      std::string attribute = StringRef(sub.name).rsplit('.').second.str();
      submodules.push_back({sub.name, attribute.empty() ? sub.name : attribute,
                            unmangledClassName(sub.value.type())});
    }
    // jit::freeze adds inference rewrites (batch norm folded into the
    // convolution before it) that a training step must not see.
    // Training keeps every parameter an attribute (preserveParameters), so
    // that foldAttributeReads names each by its path: freezing would fold
    // the parameters of modules it does not keep into constants named after
    // a local variable ("weight.9").
    frozen = options.training
                 ? jit::freeze_module(module, {}, /*freezeInterfaces=*/true,
                                      /*preserveParameters=*/true)
                 : jit::freeze(module);
    std::shared_ptr<jit::Graph> graph = frozen.get_method("forward").graph();
    if (options.training)
      foldAttributeReads(*graph, frozen);
    // x.relu_() -> x.relu() wherever no alias can observe the difference;
    // the remaining in-place ops are rebound by the evaluator.
    jit::RemoveTensorMutation(graph);
  } catch (const std::exception &e) {
    std::string what = e.what();
    if (auto *c10error = dynamic_cast<const c10::Error *>(&e))
      what = c10error->what_without_backtrace();
    emitError(loc) << "cannot load the TorchScript module (damaged, truncated "
                      "or saved by an incompatible PyTorch): "
                   << StringRef(what).trim();
    return nullptr;
  }
  try {
    GraphEvaluator evaluator(context, options);
    evaluator.setSubmodules(std::move(submodules));
    return evaluator.run(frozen);
  } catch (const std::exception &e) {
    // libtorch reports misuse by exception; none may escape the importer.
    std::string what = e.what();
    if (auto *c10error = dynamic_cast<const c10::Error *>(&e))
      what = c10error->what_without_backtrace();
    emitError(loc) << "internal error while importing the TorchScript module: "
                   << StringRef(what).trim();
    return nullptr;
  }
}

static std::vector<std::string> operatorNames() {
  std::vector<std::string> names;
  for (const auto &entry : atenConverters())
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  return names;
}

} // namespace tessera::torchscript_importer

// The plugin's entry points, found by name by PluginLoader.cpp (same
// compiler and MLIR build on both sides, so C++ types cross).
extern "C" __attribute__((visibility("default"))) mlir::Operation *
tesseraImportTorchScript(const char *data, size_t size,
                         mlir::MLIRContext *context,
                         const tessera::torchscript_importer::ImportOptions *options) {
  return tessera::torchscript_importer::importModule(StringRef(data, size),
                                                     context, *options)
      .release()
      .getOperation();
}

extern "C" __attribute__((visibility("default"))) void
tesseraTorchScriptOperators(std::vector<std::string> *names) {
  *names = tessera::torchscript_importer::operatorNames();
}
