//===- ONNXImporter.cpp - ONNX models to the graph dialect ---------------===//
//
// The model-level half of the importer: parsing and validating the protobuf,
// the function signature (input shapes, --input-shape), initializers and
// constants (inline graph.constant or ml_program.global with a dense_resource
// payload), the node walk, and outputs. Op converters are in ONNXOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "tessera/Importers/ONNX/ONNXImporter.h"
#include "NodeImporter.h"

#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <set>
#include <cstring>

using namespace mlir;

namespace tessera::onnx_importer {

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

Type elementTypeFor(int32_t onnxType, MLIRContext *ctx) {
  Builder b(ctx);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::INT64:
    return b.getIntegerType(64);
  case onnx::TensorProto::INT32:
    return b.getIntegerType(32);
  case onnx::TensorProto::INT16:
    return b.getIntegerType(16);
  case onnx::TensorProto::INT8:
    return b.getIntegerType(8);
  case onnx::TensorProto::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case onnx::TensorProto::UINT16:
    return b.getIntegerType(16, false);
  case onnx::TensorProto::UINT32:
    return b.getIntegerType(32, false);
  case onnx::TensorProto::UINT64:
    return b.getIntegerType(64, false);
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  default:
    return {};
  }
}

std::string onnxTypeName(int32_t onnxType) {
  if (onnx::TensorProto_DataType_IsValid(onnxType))
    return onnx::TensorProto_DataType_Name(
        static_cast<onnx::TensorProto_DataType>(onnxType));
  return "data type " + std::to_string(onnxType);
}

/// Bytes per element in raw_data (bool is one byte).
static int64_t rawElementSize(Type t) {
  return t.isInteger(1) ? 1 : t.getIntOrFloatBitWidth() / 8;
}

//===----------------------------------------------------------------------===//
// ModelImporter
//===----------------------------------------------------------------------===//

ModelImporter::ModelImporter(MLIRContext *context,
                             std::shared_ptr<const onnx::ModelProto> model,
                             const ImportOptions &options)
    : context_(context), modelOwner_(std::move(model)), model_(*modelOwner_),
      options_(options), builder_(context) {}

Location ModelImporter::modelLoc() {
  return FileLineColLoc::get(context_, options_.modelName, 0, 0);
}

Location ModelImporter::nodeLoc(const onnx::NodeProto &node, int index) {
  std::string name = node.name().empty()
                         ? node.op_type() + "_" + std::to_string(index)
                         : node.name();
  return NameLoc::get(StringAttr::get(context_, name));
}

/// A name that is not UTF-8 could not be printed in a diagnostic or
/// written to an executable's JSON metadata: refuse it where it is met.
static LogicalResult checkNamesAreUTF8(const onnx::GraphProto &graph, Location loc) {
  auto bad = [&](StringRef what, int64_t index) {
    return emitError(loc) << what << " #" << index
                          << " has a name that is not valid UTF-8; rename it "
                             "in the model (onnx.helper, or the exporter's names)";
  };
  auto check = [&](StringRef what, const auto &list) -> LogicalResult {
    for (int i = 0; i < list.size(); ++i)
      if (!llvm::json::isUTF8(list.Get(i).name()))
        return bad(what, i);
    return success();
  };
  if (!llvm::json::isUTF8(graph.name()))
    return emitError(loc) << "the graph's name is not valid UTF-8";
  if (failed(check("graph input", graph.input())) ||
      failed(check("graph output", graph.output())) ||
      failed(check("initializer", graph.initializer())) ||
      failed(check("value_info", graph.value_info())) ||
      failed(check("node", graph.node())))
    return failure();
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    for (const std::string &name : node.input())
      if (!llvm::json::isUTF8(name))
        return bad("an input of node", i);
    for (const std::string &name : node.output())
      if (!llvm::json::isUTF8(name))
        return bad("an output of node", i);
    if (!llvm::json::isUTF8(node.op_type()) || !llvm::json::isUTF8(node.domain()))
      return bad("the operator of node", i);
  }
  return success();
}

/// Declared shapes are checked before anything is allocated for them: the
/// element count must stay far below any IPU system's memory. (Zero-size
/// dimensions are legal; the ops that cannot take one say so.)
static LogicalResult checkShapeIsCompilable(ArrayRef<int64_t> shape, StringRef what,
                                            Location loc) {
  constexpr int64_t kMaxElements = int64_t(1) << 36; // 256 GiB of f32
  int64_t elements = 1;
  for (int64_t size : shape) {
    if (size < 0)
      return emitError(loc) << what << " has a negative dimension";
    if (size > 0 && elements > kMaxElements / size)
      return emitError(loc) << what << " declares " << graph::formatShape(shape)
                            << ", more elements than any IPU system holds "
                               "(at most 2^36)";
    elements *= size;
  }
  return success();
}

LogicalResult ModelImporter::checkModel() {
  Location loc = modelLoc();
  if (!model_.has_graph() || model_.ir_version() <= 0)
    return emitError(loc) << "not an ONNX model: it has no graph or IR version "
                             "(is the file an ONNX ModelProto?)";
  std::vector<std::string> otherDomains;
  for (const auto &imp : model_.opset_import()) {
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset_ = imp.version();
  }
  if (opset_ == 0) {
    // A model of other domains' operators only (the training optimizers of
    // ai.onnx.preview.training) needs no default-domain opset.
    bool usesDefault = llvm::any_of(model_.graph().node(), [](const auto &node) {
      return node.domain().empty() || node.domain() == "ai.onnx";
    });
    if (usesDefault)
      return emitError(loc) << "the model imports no opset of the default "
                               "ONNX domain";
    opset_ = kMaxOpset;
  }
  if (opset_ < kMinOpset && opset_ > 0) {
    // An older opset is read as opset 6 when every operator the model uses
    // is defined the same way in both (GlobalAveragePool, Not, Softplus,
    // ... have not changed since opset 1); the ones that changed are named.
    std::set<std::string> changed;
    for (const auto &node : model_.graph().node()) {
      if (!node.domain().empty() && node.domain() != "ai.onnx")
        continue;
      const onnx::OpSchema *old =
          onnx::OpSchemaRegistry::Schema(node.op_type(), opset_, "");
      const onnx::OpSchema *now =
          onnx::OpSchemaRegistry::Schema(node.op_type(), kMinOpset, "");
      if (old && now && old->SinceVersion() != now->SinceVersion())
        changed.insert(node.op_type());
    }
    if (!changed.empty())
      return emitError(loc) << "the model uses ONNX opset " << opset_
                            << ", whose " << llvm::join(changed, ", ")
                            << " differ from opset " << kMinOpset
                            << "; Tessera imports opsets " << kMinOpset << " to "
                            << kMaxOpset << " (convert it with onnx.version_converter)";
    opset_ = kMinOpset;
  }
  if (opset_ < kMinOpset || opset_ > kMaxOpset)
    return emitError(loc) << "the model uses ONNX opset " << opset_
                          << "; Tessera imports opsets " << kMinOpset << " to "
                          << kMaxOpset
                          << " (convert it with onnx.version_converter)";
  return success();
}

/// The op type for the default domain, "domain::OpType" for the others.
static std::string converterKey(const onnx::NodeProto &node) {
  bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  return defaultDomain ? node.op_type() : node.domain() + "::" + node.op_type();
}

/// Elements of a tensor of `dims`, or -1 when a dim is negative or the
/// count overflows.
static int64_t checkedElementCount(const google::protobuf::RepeatedField<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > INT64_MAX / d))
      return -1;
    n *= d;
  }
  return n;
}

/// A tensor's payload agrees with its dims: the raw bytes, or the typed
/// field's entries, that its element count needs.
static std::optional<std::string> checkTensorPayload(const onnx::TensorProto &t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL ||
      t.data_type() == onnx::TensorProto::STRING)
    return std::nullopt; // external data is checked when read
  int64_t n = checkedElementCount(t.dims());
  if (n < 0)
    return "has a negative or overflowing dimension";
  int64_t width = 0, entries = 0;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT: width = 4; entries = t.float_data_size(); break;
  case onnx::TensorProto::DOUBLE: width = 8; entries = t.double_data_size(); break;
  case onnx::TensorProto::INT64: width = 8; entries = t.int64_data_size(); break;
  case onnx::TensorProto::UINT64: width = 8; entries = t.uint64_data_size(); break;
  case onnx::TensorProto::UINT32: width = 4; entries = t.uint64_data_size(); break;
  case onnx::TensorProto::INT32: width = 4; entries = t.int32_data_size(); break;
  case onnx::TensorProto::INT16: case onnx::TensorProto::UINT16:
  case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16:
    width = 2; entries = t.int32_data_size(); break;
  case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    width = 1; entries = t.int32_data_size(); break;
  default:
    return std::nullopt; // types Tessera refuses later with their name
  }
  if (n > INT64_MAX / width)
    return "has dimensions whose size in bytes overflows";
  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != n * width)
      return "holds " + std::to_string(t.raw_data().size()) + " bytes of raw data, but " +
             std::to_string(n) + " elements of its type need " + std::to_string(n * width);
    return std::nullopt;
  }
  if (entries != n)
    return "holds " + std::to_string(entries) + " values, but its dims need " +
           std::to_string(n);
  return std::nullopt;
}

/// An attribute against ONNX's rules for attributes (onnx.checker's): one
/// value, in the field its type names, and no reference to a function's
/// attribute outside a function. ONNX's shape inference reads the field the
/// type names and follows references into a function it does not have.
static std::optional<std::string> checkAttribute(const onnx::AttributeProto &attr) {
  using A = onnx::AttributeProto;
  if (!attr.ref_attr_name().empty())
    return std::string("refers to a function's attribute ('") + attr.ref_attr_name() +
           "'), which only a function's body may";
  struct Field {
    A::AttributeType type;
    bool set;
  };
  const Field fields[] = {
      {A::FLOAT, attr.has_f()},          {A::INT, attr.has_i()},
      {A::STRING, attr.has_s()},         {A::TENSOR, attr.has_t()},
      {A::GRAPH, attr.has_g()},          {A::SPARSE_TENSOR, attr.has_sparse_tensor()},
      {A::TYPE_PROTO, attr.has_tp()},    {A::FLOATS, attr.floats_size() > 0},
      {A::INTS, attr.ints_size() > 0},   {A::STRINGS, attr.strings_size() > 0},
      {A::TENSORS, attr.tensors_size() > 0}, {A::GRAPHS, attr.graphs_size() > 0},
      {A::SPARSE_TENSORS, attr.sparse_tensors_size() > 0},
      {A::TYPE_PROTOS, attr.type_protos_size() > 0}};
  int set = 0;
  bool typeMatches = false;
  for (const Field &f : fields) {
    set += f.set;
    typeMatches |= f.set && f.type == attr.type();
  }
  if (set > 1)
    return std::string("has ") + std::to_string(set) + " values; an attribute has one";
  if (set == 1 && attr.type() != A::UNDEFINED && !typeMatches)
    return std::string("is of type ") + A::AttributeType_Name(attr.type()) +
           " but holds a value of another type";
  // An absent number or string is its default (proto3 writers leave
  // defaults out, and onnx.checker accepts it); an absent message is not.
  bool message = attr.type() == A::TENSOR || attr.type() == A::GRAPH ||
                 attr.type() == A::SPARSE_TENSOR || attr.type() == A::TYPE_PROTO;
  if (set == 0 && message)
    return std::string("is of type ") + A::AttributeType_Name(attr.type()) +
           " but holds no value";
  return std::nullopt;
}

/// Every node input is defined before the node (ONNX requires topological
/// order): by a graph input, an initializer, an earlier node, or, in a
/// subgraph, by the graphs around it. ONNX's shape inference dereferences
/// the type of whatever a node reads.
static LogicalResult checkDefinedBeforeUse(const onnx::GraphProto &graph, Location loc,
                                           std::set<std::string> defined,
                                           bool isMain = true) {
  // The model's inputs declare their types (ONNX's shape inference reads
  // them); a subgraph's may leave them to its operator, as onnx.checker
  // allows.
  for (const auto &input : graph.input()) {
    if (isMain && input.type().value_case() == onnx::TypeProto::VALUE_NOT_SET)
      return emitError(loc) << "graph input '" << input.name()
                            << "' has no type; declare its element type and shape";
    defined.insert(input.name());
  }
  for (const auto &init : graph.initializer())
    defined.insert(init.name());
  for (const auto &sparse : graph.sparse_initializer())
    defined.insert(sparse.values().name());
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    for (const std::string &input : node.input())
      if (!input.empty() && !defined.count(input))
        return emitError(loc) << node.op_type() << " node #" << i << " ('" << node.name()
                              << "') reads '" << input
                              << "', which no graph input, initializer or earlier node "
                                 "defines (nodes must be in topological order)";
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.has_g() && failed(checkDefinedBeforeUse(attr.g(), loc, defined, false)))
        return failure();
      for (const onnx::GraphProto &g : attr.graphs())
        if (failed(checkDefinedBeforeUse(g, loc, defined, false)))
          return failure();
    }
    for (const std::string &output : node.output())
      defined.insert(output);
  }
  return success();
}

/// The model's structure against ONNX's own rules, before any library code
/// (ONNX shape inference, the converters) reads it: names are UTF-8, every
/// node has the inputs, outputs and attributes its operator's schema
/// requires, and every tensor's payload matches its dims. ONNX's shape
/// inference crashes on such models (a Split with no outputs, a Scan
/// without its body, raw data shorter than its dims) instead of reporting
/// them.
/// The nodes of `graph` and of the graphs their attributes hold (an If's
/// branches, a Loop's or Scan's body): attributes (checkAttribute, tensor
/// payloads), and for operators of the default domain the inputs, outputs
/// and attributes their schema requires.
static LogicalResult checkNodes(const onnx::GraphProto &graph,
                                const std::map<std::string, int64_t> &opsets, Location loc,
                                int depth = 0) {
  // Deeper than any model nests control flow; a forged one could overflow
  // the stack here or in ONNX's inference.
  if (depth > 64)
    return emitError(loc) << "the model nests subgraphs more than 64 deep";
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    std::string name = node.name().empty() ? node.op_type() + "_" + std::to_string(i)
                                           : node.name();
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (auto problem = checkAttribute(attr))
        return emitError(loc) << node.op_type() << " node '" << name << "': attribute '"
                              << attr.name() << "' " << *problem;
      if (attr.has_t())
        if (auto problem = checkTensorPayload(attr.t()))
          return emitError(loc) << node.op_type() << " node '" << name
                                << "': the tensor of attribute '" << attr.name() << "' "
                                << *problem;
      if (attr.has_g() && failed(checkNodes(attr.g(), opsets, loc, depth + 1)))
        return failure();
      for (const onnx::GraphProto &g : attr.graphs())
        if (failed(checkNodes(g, opsets, loc, depth + 1)))
          return failure();
    }
    // The operator's schema in the version of its domain the model imports
    // (ai.onnx's, or another's such as ai.onnx.preview.training).
    std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    auto imported = opsets.find(domain);
    if (imported == opsets.end())
      return emitError(loc) << node.op_type() << " node '" << name << "' is of domain '"
                            << domain << "', which the model does not import (opset_import)";
    int64_t opset = imported->second;
    if (opset <= 0 || opset > INT_MAX)
      continue; // the importer reports the opset
    const onnx::OpSchema *schema =
        onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), domain);
    if (!schema)
      continue; // unsupported or unknown: the importer lists those
    auto arity = [](int min, int max) {
      return std::to_string(min) +
             (max == min ? std::string()
                         : " to " + (max == INT_MAX ? std::string("any number")
                                                    : std::to_string(max)));
    };
    if (node.input_size() < schema->min_input() || node.input_size() > schema->max_input())
      return emitError(loc) << node.op_type() << " node '" << name << "' has "
                            << node.input_size() << " inputs; opset " << opset
                            << " takes " << arity(schema->min_input(), schema->max_input());
    if (node.output_size() < schema->min_output() ||
        node.output_size() > schema->max_output())
      return emitError(loc) << node.op_type() << " node '" << name << "' has "
                            << node.output_size() << " outputs; opset " << opset
                            << " gives " << arity(schema->min_output(), schema->max_output());
    const auto &formals = schema->inputs();
    for (int k = 0; k < node.input_size() && !formals.empty(); ++k) {
      if (!node.input(k).empty())
        continue;
      size_t formal = std::min<size_t>(k, formals.size() - 1);
      if (formals[formal].GetOption() != onnx::OpSchema::FormalParameterOption::Optional)
        return emitError(loc) << node.op_type() << " node '" << name << "': input " << k
                              << " ('" << formals[formal].GetName()
                              << "') is required, but the model leaves it out (an "
                                 "empty name)";
    }
    for (const auto &[attrName, attr] : schema->attributes())
      if (attr.required &&
          llvm::none_of(node.attribute(), [&, &attrName = attrName](const auto &a) {
            return a.name() == attrName;
          }))
        return emitError(loc) << node.op_type() << " node '" << name
                              << "' lacks its required attribute '" << attrName << "'";
  }
  return success();
}

static LogicalResult checkModelStructure(const onnx::ModelProto &model, Location loc) {
  const onnx::GraphProto &graph = model.graph();
  std::map<std::string, int64_t> opsets;
  for (const auto &imp : model.opset_import())
    opsets[imp.domain() == "ai.onnx" ? "" : imp.domain()] = imp.version();
  if (failed(checkNamesAreUTF8(graph, loc)) || failed(checkNodes(graph, opsets, loc)) ||
      failed(checkDefinedBeforeUse(graph, loc, {})))
    return failure();
  for (const onnx::TensorProto &init : graph.initializer())
    if (auto problem = checkTensorPayload(init))
      return emitError(loc) << "initializer '" << init.name() << "' " << *problem;
  return success();
}

LogicalResult ModelImporter::checkOperatorsSupported() {
  // Collect every unsupported operator before failing: users should not
  // discover them one compile at a time.
  struct Missing {
    std::string op;
    std::vector<std::string> nodes;
  };
  std::vector<Missing> missing;
  for (auto [i, node] : llvm::enumerate(model_.graph().node())) {
    std::string op = converterKey(node);
    if (lookupConverter(op, opset_))
      continue;
    auto it = llvm::find_if(missing, [&](const Missing &m) { return m.op == op; });
    if (it == missing.end()) {
      missing.push_back({op, {}});
      it = std::prev(missing.end());
    }
    it->nodes.push_back(node.name().empty()
                            ? node.op_type() + "_" + std::to_string(i)
                            : node.name());
  }
  if (missing.empty())
    return success();
  InFlightDiagnostic diag = emitError(modelLoc());
  diag << missing.size() << " unsupported operator"
       << (missing.size() > 1 ? "s" : "") << " (opset " << opset_ << "):";
  for (const Missing &m : missing) {
    diag << "\n  " << m.op << " in " << m.nodes.size() << " node"
         << (m.nodes.size() > 1 ? "s" : "") << ": ";
    for (size_t i = 0; i < m.nodes.size() && i < 5; ++i)
      diag << (i ? ", " : "") << "'" << m.nodes[i] << "'";
    if (m.nodes.size() > 5)
      diag << ", ...";
  }
  diag << "\n`tessera-compile --list-onnx-ops` lists the supported operators";
  return failure();
}

LogicalResult ModelImporter::buildSignature() {
  const onnx::GraphProto &graph = model_.graph();
  for (const auto &init : graph.initializer())
    initializers_[init.name()] = &init;
  for (const auto &node : graph.node())
    for (const auto &in : node.input())
      used_.insert(in);
  for (const auto &out : graph.output())
    used_.insert(out.name());

  // Check --input-shape names first: a typo should not surface as an
  // "unresolved dim" error.
  llvm::StringSet<> inputNames;
  for (const auto &in : graph.input())
    if (!initializers_.count(in.name()))
      inputNames.insert(in.name());
  auto checkNamed = [&](StringRef flag, StringRef name) -> LogicalResult {
    if (inputNames.contains(name))
      return success();
    InFlightDiagnostic diag = emitError(modelLoc())
                              << flag << " names '" << name
                              << "', which is not a graph input; inputs are:";
    for (const auto &in : graph.input())
      if (!initializers_.count(in.name()))
        diag << " '" << in.name() << "'";
    return failure();
  };
  for (const auto &[name, shape] : options_.inputShapes)
    if (failed(checkNamed("--input-shape", name)))
      return failure();
  for (const auto &[name, type] : options_.inputTypes)
    if (failed(checkNamed("--input-type", name)))
      return failure();

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const auto &in : graph.input()) {
    if (initializers_.count(in.name()))
      continue; // an initializer listed as input (IR < 4): a parameter
    Location loc = NameLoc::get(StringAttr::get(context_, in.name()));
    if (!in.type().has_tensor_type())
      return emitError(loc) << "graph input '" << in.name()
                            << "' is not a tensor (sequences, maps and "
                               "optionals are not supported)";
    const auto &tt = in.type().tensor_type();
    Type elem = elementTypeFor(tt.elem_type(), context_);
    if (!elem)
      return emitError(loc) << "graph input '" << in.name() << "' has type "
                            << onnxTypeName(tt.elem_type())
                            << ", which Tessera does not support";
    if (auto t = options_.inputTypes.find(in.name()); t != options_.inputTypes.end()) {
      std::string declared;
      llvm::raw_string_ostream(declared) << elem;
      if (declared != t->second)
        return emitError(loc) << "--input-type says " << t->second << " for input '"
                              << in.name() << "', but the model declares "
                              << declared;
    }
    auto given = options_.inputShapes.find(in.name());
    SmallVector<int64_t> shape;
    if (tt.has_shape()) {
      for (const auto &dim : tt.shape().dim())
        shape.push_back(dim.has_dim_value() ? dim.dim_value()
                                            : graph::kDynamicDim);
    }
    if (given == options_.inputShapes.end() && options_.batchSize > 0 &&
        !shape.empty() && shape[0] == graph::kDynamicDim)
      shape[0] = options_.batchSize;
    if (given != options_.inputShapes.end()) {
      const std::vector<int64_t> &g = given->second;
      if (tt.has_shape() && g.size() != shape.size())
        return emitError(loc)
               << "--input-shape gives " << g.size() << " dims for input '"
               << in.name() << "', but the model declares rank "
               << shape.size() << " (" << graph::formatShape(shape) << ")";
      for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] != graph::kDynamicDim && shape[d] != g[d])
          return emitError(loc)
                 << "--input-shape sets dim " << d << " of input '"
                 << in.name() << "' to " << g[d]
                 << ", but the model fixes it to " << shape[d];
      shape.assign(g.begin(), g.end());
    } else if (!tt.has_shape() ||
               llvm::is_contained(shape, graph::kDynamicDim)) {
      InFlightDiagnostic diag = emitError(loc);
      diag << "input '" << in.name() << "' has ";
      if (!tt.has_shape()) {
        diag << "no shape";
      } else {
        diag << "symbolic dims (";
        bool first = true;
        for (auto [d, dim] : llvm::enumerate(tt.shape().dim())) {
          if (dim.has_dim_value())
            continue;
          diag << (first ? "" : ", ") << "dim " << d;
          if (!dim.dim_param().empty())
            diag << " '" << dim.dim_param() << "'";
          first = false;
        }
        diag << ")";
      }
      diag << "; give its shape with --input-shape " << in.name()
           << "=" << (tt.has_shape() ? "" : "D0xD1x...");
      if (tt.has_shape())
        for (auto [d, s] : llvm::enumerate(shape))
          diag << (d ? "x" : "") << (s == graph::kDynamicDim ? "N" : std::to_string(s));
      return failure();
    }
    if (failed(checkShapeIsCompilable(shape, "input '" + in.name() + "'", loc)))
      return failure();
    argTypes.push_back(RankedTensorType::get(shape, elem));
    argNames.push_back(in.name());
  }

  builder_.setInsertionPointToEnd(module_->getBody());
  func_ = func::FuncOp::create(builder_, modelLoc(), "main",
                               builder_.getFunctionType(argTypes, {}));
  Block *entry = func_.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func_.setArgAttr(i, "graph.name", builder_.getStringAttr(name));
    values_[name] = entry->getArgument(i);
  }
  builder_.setInsertionPointToStart(entry);
  return success();
}

Value ModelImporter::lookup(StringRef name) {
  auto it = values_.find(name);
  if (it != values_.end())
    return it->second;
  auto init = initializers_.find(name);
  if (init == initializers_.end())
    return {};
  // Materialise initializers on first use, at the top of the function in
  // order of first use, so that unused ones cost nothing.
  OpBuilder::InsertionGuard guard(builder_);
  Block &entry = func_.getBody().front();
  if (lastInitializer_)
    builder_.setInsertionPointAfter(lastInitializer_);
  else
    builder_.setInsertionPointToStart(&entry);
  Location loc = NameLoc::get(StringAttr::get(context_, name));
  FailureOr<Value> v = tensorValue(*init->second, name, loc, /*isParameter=*/true);
  if (failed(v))
    return {};
  lastInitializer_ = v->getDefiningOp();
  values_[name] = *v;
  return *v;
}

void ModelImporter::define(StringRef name, Value value) {
  values_[name] = value;
}

void ModelImporter::rebind(Value from, Value to) {
  if (lastInitializer_ == from.getDefiningOp())
    lastInitializer_ = to.getDefiningOp();
  for (auto &entry : values_)
    if (entry.second == from)
      entry.second = to;
}

const SmallVector<Value> *ModelImporter::lookupSequence(StringRef name) const {
  auto it = sequences_.find(name);
  return it == sequences_.end() ? nullptr : &it->second;
}

void ModelImporter::defineSequence(StringRef name, SmallVector<Value> values) {
  sequences_[name] = std::move(values);
}

FailureOr<RankedTensorType>
ModelImporter::tensorType(const onnx::TensorProto &tensor, Location loc) {
  Type elem = elementTypeFor(tensor.data_type(), context_);
  if (!elem)
    return emitError(loc) << "tensor '" << tensor.name() << "' has type "
                          << onnxTypeName(tensor.data_type())
                          << ", which Tessera does not support";
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has a negative dimension";
  if (failed(checkShapeIsCompilable(shape, "tensor '" + tensor.name() + "'", loc)))
    return failure();
  return RankedTensorType::get(shape, elem);
}

FailureOr<std::string>
ModelImporter::tensorBytes(const onnx::TensorProto &tensor, Location loc) {
  TESSERA_ASSIGN_OR_FAIL(type, tensorType(tensor, loc));
  Type elem = type.getElementType();
  int64_t n = type.getNumElements();
  int64_t size = n * rawElementSize(elem);
  auto badSize = [&](int64_t got) {
    return emitError(loc) << "tensor '" << tensor.name() << "' of shape "
                          << graph::formatShape(type.getShape()) << " needs "
                          << size << " bytes of data but holds " << got;
  };

  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto &kv : tensor.external_data()) {
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = std::strtoll(kv.value().c_str(), nullptr, 10);
      else if (kv.key() == "length")
        length = std::strtoll(kv.value().c_str(), nullptr, 10);
    }
    if (location.empty() || llvm::sys::path::is_absolute(location) ||
        StringRef(location).contains(".."))
      return emitError(loc) << "tensor '" << tensor.name()
                            << "' has external data at '" << location
                            << "'; it must be a relative path inside the "
                               "model's directory";
    SmallString<256> path(options_.externalDataDir);
    llvm::sys::path::append(path, location);
    auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
    if (!file)
      return emitError(loc) << "cannot read external data of tensor '"
                            << tensor.name() << "' from '" << path
                            << "': " << file.getError().message()
                            << " (keep the data file next to the model)";
    int64_t fileSize = (*file)->getBufferSize();
    if (length < 0)
      length = fileSize - offset;
    if (offset < 0 || offset + length > fileSize)
      return emitError(loc) << "external data of tensor '" << tensor.name()
                            << "' lies outside '" << path << "' (offset "
                            << offset << ", length " << length << ", file "
                            << fileSize << " bytes)";
    if (length != size)
      return badSize(length);
    return std::string((*file)->getBufferStart() + offset, length);
  }

  if (tensor.has_raw_data()) {
    if (static_cast<int64_t>(tensor.raw_data().size()) != size)
      return badSize(tensor.raw_data().size());
    return tensor.raw_data();
  }

  std::string bytes(size, '\0');
  char *out = bytes.data();
  auto store = [&](auto value, int64_t i) {
    std::memcpy(out + i * sizeof(value), &value, sizeof(value));
  };
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    if (tensor.float_data_size() != n)
      return badSize(tensor.float_data_size() * 4);
    for (int64_t i = 0; i < n; ++i)
      store(tensor.float_data(i), i);
    break;
  case onnx::TensorProto::DOUBLE:
    if (tensor.double_data_size() != n)
      return badSize(tensor.double_data_size() * 8);
    for (int64_t i = 0; i < n; ++i)
      store(tensor.double_data(i), i);
    break;
  case onnx::TensorProto::INT64:
    if (tensor.int64_data_size() != n)
      return badSize(tensor.int64_data_size() * 8);
    for (int64_t i = 0; i < n; ++i)
      store(static_cast<int64_t>(tensor.int64_data(i)), i);
    break;
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    if (tensor.uint64_data_size() != n)
      return badSize(tensor.uint64_data_size() * rawElementSize(elem));
    for (int64_t i = 0; i < n; ++i) {
      if (tensor.data_type() == onnx::TensorProto::UINT32)
        store(static_cast<uint32_t>(tensor.uint64_data(i)), i);
      else
        store(static_cast<uint64_t>(tensor.uint64_data(i)), i);
    }
    break;
  default: {
    // int32_data carries every type of 32 bits or less, one per entry
    // (fp16/bf16 as their bit patterns).
    if (tensor.int32_data_size() != n)
      return badSize(tensor.int32_data_size() * rawElementSize(elem));
    int64_t width = rawElementSize(elem);
    for (int64_t i = 0; i < n; ++i) {
      int32_t v = tensor.int32_data(i);
      std::memcpy(out + i * width, &v, width); // little-endian low bytes
    }
  }
  }
  return bytes;
}

FailureOr<DenseElementsAttr>
ModelImporter::tensorAttr(const onnx::TensorProto &tensor, Location loc) {
  TESSERA_ASSIGN_OR_FAIL(type, tensorType(tensor, loc));
  TESSERA_ASSIGN_OR_FAIL(bytes, tensorBytes(tensor, loc));
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> bits;
    for (char c : bytes)
      bits.push_back(c != 0);
    return DenseElementsAttr::get(type, ArrayRef<bool>(bits));
  }
  ArrayRef<char> raw(bytes.data(), bytes.size());
  bool detectedSplat = false;
  if (!DenseElementsAttr::isValidRawBuffer(type, raw, detectedSplat))
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has malformed data";
  return DenseElementsAttr::getFromRawBuffer(type, raw);
}

FailureOr<Value> ModelImporter::tensorValue(const onnx::TensorProto &tensor,
                                            StringRef name, Location loc,
                                            bool isParameter) {
  TESSERA_ASSIGN_OR_FAIL(type, tensorType(tensor, loc));
  bool isInteger = isa<IntegerType>(type.getElementType());
  bool inlineIt = type.getNumElements() <= 1 ||
                  type.getElementType().isInteger(1) ||
                  ((isInteger || !isParameter) &&
                   type.getNumElements() <= options_.inlineIntegerLimit);
  if (inlineIt) {
    TESSERA_ASSIGN_OR_FAIL(attr, tensorAttr(tensor, loc));
    return graph::ConstantOp::create(builder_, loc, attr).getResult();
  }
  // A unique symbol; keep the ONNX name readable ("conv1.weight").
  std::string symbol = name.str();
  for (int suffix = 1; globalNames_.contains(symbol); ++suffix)
    symbol = name.str() + "_" + std::to_string(suffix);
  globalNames_.insert(symbol);
  AsmResourceBlob blob;
  int64_t elementSize = rawElementSize(type.getElementType());
  if (tensor.data_location() != onnx::TensorProto::EXTERNAL &&
      tensor.has_raw_data() &&
      static_cast<int64_t>(tensor.raw_data().size()) ==
          type.getNumElements() * elementSize &&
      reinterpret_cast<uintptr_t>(tensor.raw_data().data()) % elementSize == 0) {
    // Zero copy: the payload stays in the parsed model, which the blob's
    // deleter keeps alive. Large models then cost one copy of their weights.
    const std::string &raw = tensor.raw_data();
    blob = AsmResourceBlob(
        ArrayRef<char>(raw.data(), raw.size()), elementSize,
        [keepAlive = modelOwner_](void *, size_t, size_t) {},
        /*dataIsMutable=*/false);
  } else {
    TESSERA_ASSIGN_OR_FAIL(bytes, tensorBytes(tensor, loc));
    blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(bytes.data(), bytes.size()), elementSize,
        /*dataIsMutable=*/false);
  }
  auto payload = DenseResourceElementsAttr::get(type, symbol, std::move(blob));
  {
    OpBuilder::InsertionGuard guard(builder_);
    builder_.setInsertionPoint(func_);
    ml_program::GlobalOp::create(builder_, loc, symbol, type,
                                 /*is_mutable=*/false, payload,
                                 builder_.getStringAttr("private"));
  }
  return ml_program::GlobalLoadConstOp::create(
             builder_, loc, type,
             FlatSymbolRefAttr::get(context_, symbol))
      .getResult();
}

/// ONNX's type string of a tensor of `type` ("tensor(float)"), or empty
/// for what has none here.
static std::string onnxTensorType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return "";
  Type e = tensor.getElementType();
  std::string name;
  if (e.isF32())
    name = "float";
  else if (e.isF16())
    name = "float16";
  else if (e.isBF16())
    name = "bfloat16";
  else if (e.isF64())
    name = "double";
  else if (e.isInteger(1))
    name = "bool";
  else if (auto i = dyn_cast<IntegerType>(e))
    name = (i.isUnsigned() ? "uint" : "int") + std::to_string(i.getWidth());
  else
    return "";
  return "tensor(" + name + ")";
}

/// Each input's element type against the operator's type constraints (a
/// DFT of int8, a Relu of bool): converters rely on them.
LogicalResult ModelImporter::checkInputTypes(const onnx::NodeProto &node,
                                             const onnx::OpSchema &schema, Location loc) {
  const auto &formals = schema.inputs();
  for (int k = 0; k < node.input_size() && !formals.empty(); ++k) {
    Value v = node.input(k).empty() ? Value() : lookup(node.input(k));
    if (!v)
      continue;
    const auto &formal = formals[std::min<size_t>(k, formals.size() - 1)];
    std::string actual = onnxTensorType(v.getType());
    const auto &params = schema.typeConstraintParams();
    auto allowed = llvm::find_if(params, [&](const auto &p) {
      return p.type_param_str == formal.GetTypeStr();
    });
    if (actual.empty() || allowed == params.end())
      continue; // a literal type ("tensor(int64)") is the schema check's
    if (llvm::is_contained(allowed->allowed_type_strs, actual))
      continue;
    std::string list;
    for (const std::string &t : allowed->allowed_type_strs)
      list += (list.empty() ? "" : ", ") + t;
    return emitError(loc) << node.op_type() << ": input " << k << " ('" << formal.GetName()
                          << "') is " << actual << "; opset " << opset_ << " takes "
                          << list;
  }
  return success();
}

LogicalResult ModelImporter::importNodes() {
  const onnx::GraphProto &graph = model_.graph();
  const onnx::NodeProto *current = nullptr;
  int currentIndex = 0;
  // Every diagnostic raised while a node is imported says which node.
  ScopedDiagnosticHandler context(context_, [&](Diagnostic &diag) {
    if (current && diag.getSeverity() == DiagnosticSeverity::Error)
      diag.attachNote() << "while importing ONNX node '"
                        << (current->name().empty()
                                ? current->op_type() + "_" +
                                      std::to_string(currentIndex)
                                : current->name())
                        << "' (" << current->op_type() << ", opset " << opset_
                        << ")";
    return failure(); // let the next handler report it
  });
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    current = &node;
    currentIndex = i;
    Location loc = nodeLoc(node, i);
    for (const std::string &in : node.input()) {
      if (in.empty() || lookup(in) || lookupSequence(in))
        continue;
      if (initializers_.count(in))
        return failure(); // the initializer itself was reported
      return emitError(loc) << node.op_type() << ": input '" << in
                            << "' is not a graph input, an initializer or an "
                               "output of an earlier node";
    }
    // ONNX's own schema check: input and output counts, required and typed
    // attributes. Converters rely on it instead of re-checking arity.
    if (const onnx::OpSchema *schema =
            onnx::OpSchemaRegistry::Schema(node.op_type(), opset_, "")) {
      try {
        schema->Verify(node);
      } catch (const std::exception &e) {
        return emitError(loc) << node.op_type() << ": invalid node: "
                              << e.what();
      }
      if (failed(checkInputTypes(node, *schema, loc)))
        return failure();
    }
    const OpConverter *converter = lookupConverter(converterKey(node), opset_);
    assert(converter && "unsupported operators were rejected up front");
    NodeImporter importer(*this, node, loc);
    Block *body = builder_.getInsertionBlock();
    Operation *before = body->empty() ? nullptr : &body->back();
    if (failed(converter->convert(importer)))
      return failure();
    // PopART's placement annotations and a recomputation checkpoint, on
    // every op the node became.
    std::optional<int64_t> ipu, stage;
    bool checkpoint = false;
    for (const auto &attr : node.attribute()) {
      if (attr.name() == "__ipu_number")
        ipu = attr.i();
      else if (attr.name() == "__pipeline_stage")
        stage = attr.i();
      else if (attr.name() == "__recompute_checkpoint")
        checkpoint = attr.i() != 0;
    }
    if (ipu || stage || checkpoint) {
      auto first = before ? std::next(before->getIterator()) : body->begin();
      for (Operation &op : llvm::make_range(first, body->end())) {
        if (ipu)
          op.setAttr(graph::kIpuAttrName, builder_.getI64IntegerAttr(*ipu));
        if (stage)
          op.setAttr(graph::kStageAttrName, builder_.getI64IntegerAttr(*stage));
        if (checkpoint)
          op.setAttr(graph::kCheckpointAttrName, builder_.getUnitAttr());
      }
    }
  }
  return success();
}

LogicalResult ModelImporter::buildReturn() {
  SmallVector<Value> results;
  for (const auto &out : model_.graph().output()) {
    Value v = lookup(out.name());
    if (!v && lookupSequence(out.name()))
      return emitError(modelLoc())
             << "graph output '" << out.name()
             << "' is a sequence; Tessera's executables return tensors (concatenate "
                "it with ConcatFromSequence)";
    if (!v)
      return emitError(modelLoc())
             << "graph output '" << out.name()
             << "' is not produced by any node, input or initializer";
    // Cross-check with the declared static shape (ONNX's inferred ones
    // are checked after the import): a mismatch is a bug in a converter or
    // an inconsistent model.
    auto type = cast<RankedTensorType>(v.getType());
    if (out.type().has_tensor_type() && out.type().tensor_type().has_shape()) {
      const auto &dims = out.type().tensor_type().shape().dim();
      bool allStatic = llvm::all_of(
          dims, [](const auto &d) { return d.has_dim_value(); });
      SmallVector<int64_t> declared;
      for (const auto &d : dims)
        declared.push_back(d.dim_value());
      if (allStatic && ArrayRef<int64_t>(declared) != type.getShape())
        return emitError(v.getLoc())
               << "output '" << out.name() << "' is declared as "
               << graph::formatShape(declared)
               << " but Tessera computes " << graph::formatShape(type.getShape());
    }
    results.push_back(v);
  }
  func::ReturnOp::create(builder_, modelLoc(), results);
  func_.setType(builder_.getFunctionType(func_.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  for (auto [i, out] : llvm::enumerate(model_.graph().output()))
    func_.setResultAttr(i, "graph.name", builder_.getStringAttr(out.name()));
  return success();
}

OwningOpRef<ModuleOp> ModelImporter::run() {
  module_ = ModuleOp::create(modelLoc());
  if (failed(checkModel()) || failed(checkOperatorsSupported()))
    return nullptr;
  (*module_)->setAttr("graph.source", builder_.getStringAttr(options_.modelName));
  (*module_)->setAttr("graph.onnx_opset", builder_.getI64IntegerAttr(opset_));
  if (!model_.producer_name().empty())
    (*module_)->setAttr("graph.producer",
                        builder_.getStringAttr(model_.producer_name()));
  if (failed(buildSignature()) || failed(importNodes()) ||
      failed(buildReturn()))
    return nullptr;
  if (failed(verify(*module_)))
    return nullptr;
  return std::move(module_);
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// Turns the graph inputs of --constant-input into initializers holding the
/// given values, after checking them against the inputs' declared types.
static std::optional<std::string>
bindConstantInputs(onnx::ModelProto &model, const ImportOptions &options) {
  static const std::map<std::string, int32_t> kTypes = {
      {"f32", onnx::TensorProto::FLOAT},   {"f64", onnx::TensorProto::DOUBLE},
      {"f16", onnx::TensorProto::FLOAT16}, {"bf16", onnx::TensorProto::BFLOAT16},
      {"i64", onnx::TensorProto::INT64},   {"i32", onnx::TensorProto::INT32},
      {"i16", onnx::TensorProto::INT16},   {"i8", onnx::TensorProto::INT8},
      {"ui8", onnx::TensorProto::UINT8},   {"ui16", onnx::TensorProto::UINT16},
      {"ui32", onnx::TensorProto::UINT32}, {"ui64", onnx::TensorProto::UINT64},
      {"i1", onnx::TensorProto::BOOL}};
  auto *graph = model.mutable_graph();
  for (const auto &[name, value] : options.constantInputs) {
    auto *inputs = graph->mutable_input();
    auto it = llvm::find_if(*inputs, [&](const onnx::ValueInfoProto &in) {
      return in.name() == name;
    });
    bool isInitializer = llvm::any_of(graph->initializer(), [&](const auto &init) {
      return init.name() == name;
    });
    if (it == inputs->end() || isInitializer)
      return "--constant-input names '" + name + "', which is not a graph input";
    auto type = kTypes.find(value.elementType);
    if (type == kTypes.end())
      return "--constant-input " + name + ": element type " + value.elementType +
             " has no ONNX equivalent";
    if (it->type().has_tensor_type()) {
      const auto &tt = it->type().tensor_type();
      if (tt.elem_type() != type->second)
        return "--constant-input " + name + " is " + value.elementType +
               " but the model declares the input as " + onnxTypeName(tt.elem_type());
      if (tt.has_shape()) {
        bool fits = tt.shape().dim_size() == static_cast<int>(value.shape.size());
        for (int d = 0; fits && d < tt.shape().dim_size(); ++d)
          fits = !tt.shape().dim(d).has_dim_value() ||
                 tt.shape().dim(d).dim_value() == value.shape[d];
        if (!fits)
          return "--constant-input " + name + " has shape " +
                 graph::formatShape(value.shape) +
                 ", which the model's declared shape of the input does not allow";
      }
    }
    onnx::TensorProto *init = graph->add_initializer();
    init->set_name(name);
    init->set_data_type(type->second);
    for (int64_t d : value.shape)
      init->add_dims(d);
    init->set_raw_data(value.data);
    inputs->erase(it);
  }
  return std::nullopt;
}

/// Writes --input-shape dims into the graph inputs and runs ONNX's own shape
/// inference, so declared output shapes become static and can be checked
/// against Tessera's. ONNX inference failing is only a warning: Tessera's own
/// inference is authoritative and reports real errors with more context.
/// Returns ONNX's error message, if any.
static std::optional<std::string>
runONNXShapeInference(onnx::ModelProto &model, const ImportOptions &options) {
  for (auto &in : *model.mutable_graph()->mutable_input()) {
    auto it = options.inputShapes.find(in.name());
    if (it == options.inputShapes.end() && options.batchSize > 0 &&
        in.type().has_tensor_type() && in.type().tensor_type().shape().dim_size() > 0 &&
        !in.type().tensor_type().shape().dim(0).has_dim_value())
      in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(
          options.batchSize);
    if (it == options.inputShapes.end() || !in.type().has_tensor_type())
      continue;
    bool ranked = in.type().tensor_type().has_shape();
    auto *shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (!ranked) // an input of unknown rank takes --input-shape's
      for (size_t d = 0; d < it->second.size(); ++d)
        shape->add_dim();
    if (shape->dim_size() != static_cast<int>(it->second.size()))
      continue; // reported by the importer with a better message
    // Only symbolic dims: a conflict with a fixed one is reported later.
    for (auto [d, size] : llvm::enumerate(it->second))
      if (!shape->dim(d).has_dim_value())
        shape->mutable_dim(d)->set_dim_value(size);
  }
  // ONNX's inference functions read the shapes of their inputs without
  // checking that there is one (MaxUnpool's); the importer reports an
  // input of unknown rank itself.
  std::set<std::string> initializers;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  for (const auto &in : model.graph().input())
    if (in.type().has_tensor_type() && !in.type().tensor_type().has_shape() &&
        !initializers.count(in.name())) // an initializer's dims are its shape
      return "graph input '" + in.name() + "' has no shape";
  try {
    onnx::ShapeInferenceOptions siOptions(/*check_type=*/false,
                                          /*strict_mode=*/1,
                                          /*data_prop=*/true);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), siOptions);
  } catch (const std::exception &e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

/// The outputs' shapes as ONNX's inference has them (where it made them
/// static) against what Tessera computes: a mismatch is a bug in a
/// converter or an inconsistent model.
static LogicalResult checkOutputsAgainstONNX(ModuleOp module, const onnx::ModelProto &model) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  auto ret = cast<func::ReturnOp>(main.front().getTerminator());
  for (auto [out, v] : llvm::zip(model.graph().output(), ret.getOperands())) {
    if (!out.type().has_tensor_type() || !out.type().tensor_type().has_shape())
      continue;
    const auto &dims = out.type().tensor_type().shape().dim();
    if (!llvm::all_of(dims, [](const auto &d) { return d.has_dim_value(); }))
      continue;
    SmallVector<int64_t> inferred;
    for (const auto &d : dims)
      inferred.push_back(d.dim_value());
    auto type = cast<RankedTensorType>(v.getType());
    if (ArrayRef<int64_t>(inferred) != type.getShape())
      return emitError(v.getLoc()) << "output '" << out.name() << "' is inferred by ONNX as "
                                   << graph::formatShape(inferred) << " but Tessera computes "
                                   << graph::formatShape(type.getShape());
  }
  return success();
}

OwningOpRef<ModuleOp> importONNXModel(StringRef bytes, MLIRContext *context,
                                      const ImportOptions &options) {
  return importONNXModel(
      llvm::MemoryBuffer::getMemBuffer(bytes, options.modelName,
                                       /*RequiresNullTerminator=*/false),
      context, options);
}

OwningOpRef<ModuleOp>
importONNXModel(std::unique_ptr<llvm::MemoryBuffer> buffer,
                MLIRContext *context, const ImportOptions &options) {
  context->loadDialect<graph::GraphDialect, func::FuncDialect,
                       ml_program::MLProgramDialect>();
  Location loc = FileLineColLoc::get(context, options.modelName, 0, 0);
  StringRef bytes = buffer->getBuffer();
  auto model = std::make_shared<onnx::ModelProto>();
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  stream.SetTotalBytesLimit(INT_MAX);
  auto fail = [&](const Twine &msg) -> OwningOpRef<ModuleOp> {
    emitError(loc) << msg;
    return nullptr;
  };
  if (bytes.size() >= static_cast<size_t>(INT_MAX))
    return fail("the model file is over 2 GiB; save it with external data "
                "(onnx.save(..., save_as_external_data=True))");
  if (!model->ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return fail("cannot parse the file as an ONNX model (it is truncated, "
                "damaged or not ONNX)");
  if (!model->has_graph())
    return fail("not an ONNX model: it has no graph");
  buffer.reset(); // the parsed model holds everything from here on
  if (std::optional<std::string> err = bindConstantInputs(*model, options))
    return fail(*err);
  if (failed(checkModelStructure(*model, loc)))
    return nullptr;
  OwningOpRef<ModuleOp> module = ModelImporter(context, model, options).run();
  if (!module)
    return nullptr;
  // ONNX's own shape inference, a second opinion on the outputs' shapes,
  // runs on models Tessera imported only: its inference functions trust
  // their inputs' ranks and types and crash on models that break them
  // (found by fuzzing: ConvInteger of mismatched ranks, MaxUnpool of an
  // input of unknown rank).
  if (std::optional<std::string> onnxError = runONNXShapeInference(*model, options))
    emitWarning(loc) << "ONNX shape inference failed (" << *onnxError
                     << ") but Tessera's own shape inference succeeded";
  else if (failed(checkOutputsAgainstONNX(*module, *model)))
    return nullptr;
  return module;
}

OwningOpRef<ModuleOp> importONNXFile(StringRef path, MLIRContext *context,
                                     ImportOptions options) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file) {
    emitError(UnknownLoc::get(context))
        << "cannot read '" << path << "': " << file.getError().message();
    return nullptr;
  }
  if (options.externalDataDir.empty())
    options.externalDataDir = llvm::sys::path::parent_path(path).str();
  if (options.modelName == ImportOptions().modelName)
    options.modelName = path.str();
  return importONNXModel(std::move(*file), context, options);
}

std::string parseInputShape(StringRef spec, ImportOptions &options) {
  auto [name, dims] = spec.rsplit('=');
  if (name.empty() || dims.empty() || !spec.contains('='))
    return "expected --input-shape NAME=D0xD1x... (e.g. input=1x3x224x224), "
           "got '" + spec.str() + "'";
  std::vector<int64_t> shape;
  if (dims != "scalar") {
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef p : parts) {
      int64_t d;
      if (p.getAsInteger(10, d) || d < 0)
        return "bad dimension '" + p.str() + "' in --input-shape " +
               spec.str() + " (dims are non-negative integers joined by 'x')";
      shape.push_back(d);
    }
  }
  options.inputShapes[name.str()] = std::move(shape);
  return "";
}

std::string parseInputType(StringRef spec, ImportOptions &options) {
  auto [name, type] = spec.rsplit('=');
  static const char *const kTypes[] = {"f32", "f16", "bf16", "f64", "i64",
                                       "i32", "i16", "i8",  "ui8", "i1"};
  if (name.empty() || !spec.contains('='))
    return "expected --input-type NAME=TYPE (e.g. ids=i64), got '" + spec.str() + "'";
  if (!llvm::is_contained(kTypes, type))
    return "unknown element type '" + type.str() + "' in --input-type " + spec.str() +
           " (one of f32, f16, bf16, f64, i64, i32, i16, i8, ui8, i1)";
  options.inputTypes[name.str()] = type.str();
  return "";
}

std::string parseTensorProto(StringRef bytes, StringRef what, ConstantInput &value) {
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return what.str() + " is not an ONNX TensorProto";
  static const std::map<int32_t, std::pair<const char *, size_t>> kTypes = {
      {onnx::TensorProto::FLOAT, {"f32", 4}},   {onnx::TensorProto::DOUBLE, {"f64", 8}},
      {onnx::TensorProto::FLOAT16, {"f16", 2}}, {onnx::TensorProto::INT64, {"i64", 8}},
      {onnx::TensorProto::INT32, {"i32", 4}},   {onnx::TensorProto::INT16, {"i16", 2}},
      {onnx::TensorProto::INT8, {"i8", 1}},     {onnx::TensorProto::UINT8, {"ui8", 1}},
      {onnx::TensorProto::BOOL, {"i1", 1}}};
  auto type = kTypes.find(proto.data_type());
  if (type == kTypes.end())
    return what.str() + " has element type " + onnxTypeName(proto.data_type()) +
           ", which --constant-input does not read";
  value.elementType = type->second.first;
  value.shape.assign(proto.dims().begin(), proto.dims().end());
  size_t width = type->second.second;
  // Elements within what any IPU system holds (2^36), so that the byte
  // count below cannot overflow.
  int64_t elements = checkedElementCount(proto.dims());
  if (elements < 0 || elements > (int64_t(1) << 36))
    return what.str() + " has a negative dimension or more elements than any IPU system holds";
  size_t count = static_cast<size_t>(elements);
  auto copy = [&](const void *data, size_t n) {
    value.data.assign(static_cast<const char *>(data), n);
  };
  // The typed field ONNX defines for the element type, and no other: an
  // int32_data of an i64 tensor would be read past its entries.
  int32_t dt = proto.data_type();
  bool viaInt32 = width <= 4 && dt != onnx::TensorProto::FLOAT;
  if (proto.has_raw_data())
    value.data = proto.raw_data();
  else if (proto.float_data_size() && dt == onnx::TensorProto::FLOAT)
    copy(proto.float_data().data(), proto.float_data_size() * 4);
  else if (proto.double_data_size() && dt == onnx::TensorProto::DOUBLE)
    copy(proto.double_data().data(), proto.double_data_size() * 8);
  else if (proto.int64_data_size() && dt == onnx::TensorProto::INT64)
    copy(proto.int64_data().data(), proto.int64_data_size() * 8);
  else if (proto.int32_data_size() && viaInt32) {
    // Types of 32 bits or less, one per entry: each entry's low bytes.
    value.data.resize(proto.int32_data_size() * width);
    for (int i = 0; i < proto.int32_data_size(); ++i) {
      int32_t v = proto.int32_data(i);
      std::memcpy(value.data.data() + i * width, &v, width);
    }
  }
  if (value.data.size() != count * width)
    return what.str() + " holds " + std::to_string(value.data.size()) +
           " bytes; its shape needs " + std::to_string(count * width);
  return "";
}

std::vector<std::string> supportedOperators(int64_t opset) {
  std::set<std::string> names;
  for (const OpConverter &c : allConverters())
    if (lookupConverter(c.opType, opset) == &c)
      names.insert(c.opType);
  return {names.begin(), names.end()};
}

} // namespace tessera::onnx_importer
