//===- NodeImporter.h - what an ONNX op converter works with ----*- C++ -*-===//
//
// Private to the ONNX importer. ModelImporter walks the graph; for each node
// it hands a NodeImporter to the converter registered for the node's op type.
// Converters read inputs and attributes through it, build graph ops with
// build()/infer() (which infer the result type, verify and fold, turning any
// inconsistency into a diagnostic at the node), and publish results with
// setOutputs().
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_IMPORTERS_ONNX_NODEIMPORTER_H
#define TESSERA_LIB_IMPORTERS_ONNX_NODEIMPORTER_H

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/OpBuilding.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <onnx/onnx_pb.h>

namespace onnx {
class OpSchema;
} // namespace onnx

namespace tessera::onnx_importer {
/// The largest size an attribute may give (a kernel size, stride, pad,
/// block size, hidden size, output size): no real model's is larger, and so
/// bounded, its sums of products with dimensions (at most 2^36 elements)
/// cannot overflow.
constexpr int64_t kMaxAttributeSize = int64_t(1) << 24;
} // namespace tessera::onnx_importer

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <memory>
#include <optional>
#include <set>
#include <string>

namespace tessera::onnx_importer {

struct ImportOptions;

/// Per-import state: the module being built, the values defined so far, and
/// the model's tensors. NodeImporter reaches the model through this.
class ModelImporter {
public:
  /// The model is shared so that weight payloads can point into its
  /// raw_data instead of being copied: each blob keeps the model alive.
  ModelImporter(mlir::MLIRContext *context,
                std::shared_ptr<const onnx::ModelProto> model,
                const ImportOptions &options);
  /// Builds the module; null after reporting errors.
  mlir::OwningOpRef<mlir::ModuleOp> run();

  mlir::OpBuilder &builder() { return builder_; }
  int64_t opset() const { return opset_; }
  /// The value named `name`: a graph input, an initializer (materialised on
  /// first use) or an earlier node's output. Null if none.
  mlir::Value lookup(llvm::StringRef name);
  void define(llvm::StringRef name, mlir::Value value);
  /// Every name bound to `from` is bound to `to` (a load that was replaced).
  void rebind(mlir::Value from, mlir::Value to);
  /// ONNX sequences exist only at import time: a list of tensor values,
  /// fixed when the model is compiled (null if `name` is not a sequence).
  const llvm::SmallVector<mlir::Value> *lookupSequence(llvm::StringRef name) const;
  void defineSequence(llvm::StringRef name, llvm::SmallVector<mlir::Value> values);
  /// True if some node or graph output reads `name`.
  bool isUsed(llvm::StringRef name) const { return used_.count(name.str()); }
  /// A tensor's data as an attribute (any size; for small tensors).
  mlir::FailureOr<mlir::DenseElementsAttr>
  tensorAttr(const onnx::TensorProto &tensor, mlir::Location loc);
  /// A tensor as a value: a graph.constant if small, else an ml_program
  /// global (named after `name`) read with global_load_const. Parameters
  /// (initializers) of floating type are globals unless scalar; other
  /// tensors (Constant nodes) stay inline up to the inline limit.
  mlir::FailureOr<mlir::Value> tensorValue(const onnx::TensorProto &tensor,
                                           llvm::StringRef name,
                                           mlir::Location loc,
                                           bool isParameter);

private:
  mlir::LogicalResult checkModel();
  mlir::LogicalResult checkOperatorsSupported();
  mlir::LogicalResult buildSignature();
  mlir::LogicalResult importNodes();
  mlir::LogicalResult checkInputTypes(const onnx::NodeProto &node, const onnx::OpSchema &schema,
                                      mlir::Location loc);
  mlir::LogicalResult buildReturn();
  void crossCheckWithONNXShapeInference();
  /// Raw little-endian bytes of a tensor (raw_data, typed fields or external
  /// file), validated against its shape and type.
  mlir::FailureOr<std::string> tensorBytes(const onnx::TensorProto &tensor,
                                           mlir::Location loc);
  mlir::FailureOr<mlir::RankedTensorType>
  tensorType(const onnx::TensorProto &tensor, mlir::Location loc);
  mlir::Location nodeLoc(const onnx::NodeProto &node, int index);
  mlir::Location modelLoc();

  mlir::MLIRContext *context_;
  std::shared_ptr<const onnx::ModelProto> modelOwner_;
  const onnx::ModelProto &model_;
  const ImportOptions &options_;
  mlir::OpBuilder builder_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp func_;
  int64_t opset_ = 0;
  llvm::StringMap<mlir::Value> values_;
  llvm::StringMap<llvm::SmallVector<mlir::Value>> sequences_;
  llvm::StringMap<const onnx::TensorProto *> initializers_;
  std::set<std::string> used_;
  llvm::StringSet<> globalNames_;
  /// Where the next initializer is materialised (after the previous one).
  mlir::Operation *lastInitializer_ = nullptr;
};


class NodeImporter {
public:
  NodeImporter(ModelImporter &model, const onnx::NodeProto &node,
               mlir::Location loc);

  const onnx::NodeProto &node() const { return node_; }
  llvm::StringRef opType() const { return node_.op_type(); }
  int64_t opset() const;
  mlir::OpBuilder &builder();
  mlir::MLIRContext *context() { return builder().getContext(); }
  mlir::Location loc() const { return loc_; }
  ModelImporter &model() { return model_; }

  //===--- Inputs ---------------------------------------------------------===//
  size_t numInputs() const { return node_.input_size(); }
  /// True if input `i` exists and is not the empty name ONNX uses for
  /// "optional input left out".
  bool hasInput(size_t i) const {
    return i < numInputs() && !node_.input(i).empty();
  }
  /// The value of input `i`, or null if it was left out.
  mlir::Value input(size_t i) const;
  /// The tensors of sequence input `i`; an error if it is not a sequence.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>> sequenceInput(size_t i);
  mlir::RankedTensorType inputType(size_t i) const;
  int64_t inputRank(size_t i) const { return inputType(i).getRank(); }
  /// The constant value of input `i` (a graph.constant or a small
  /// initializer global), or null if it is computed.
  mlir::DenseElementsAttr constantInput(size_t i) const;
  /// Input `i` as integers; an error naming `what` if it is not a constant.
  mlir::FailureOr<llvm::SmallVector<int64_t>> constantInts(size_t i,
                                                           llvm::StringRef what);
  /// The error for input `i` (called `what`) not being a constant `kind`;
  /// for a graph input it names the input and --constant-input.
  mlir::InFlightDiagnostic notConstant(size_t i, llvm::StringRef what,
                                       llvm::StringRef kind);
  /// Input `i` as a scalar double; an error if it is not a constant scalar.
  mlir::FailureOr<double> constantScalar(size_t i, llvm::StringRef what);

  //===--- Attributes -----------------------------------------------------===//
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  bool hasAttr(llvm::StringRef name) const { return attr(name) != nullptr; }
  int64_t intAttr(llvm::StringRef name, int64_t dflt) const;
  double floatAttr(llvm::StringRef name, double dflt) const;
  std::string stringAttr(llvm::StringRef name, llvm::StringRef dflt) const;
  std::optional<llvm::SmallVector<int64_t>> intsAttr(llvm::StringRef name) const;
  std::optional<llvm::SmallVector<double>> floatsAttr(llvm::StringRef name) const;

  //===--- Building -------------------------------------------------------===//
  /// Creates OpTy with an explicit result type, verifies it and folds it.
  template <typename OpTy, typename... Args>
  mlir::FailureOr<mlir::Value> build(mlir::Type resultType, Args &&...args) {
    auto op = OpTy::create(builder(), loc_, resultType,
                           std::forward<Args>(args)...);
    return finish(op.getOperation());
  }
  /// Creates OpTy whose result type is inferred from operands and attributes.
  template <typename OpTy, typename... Args>
  mlir::FailureOr<mlir::Value> infer(Args &&...args) {
    return build<OpTy>(placeholderType(), std::forward<Args>(args)...);
  }
  /// graph.constant of `value` (always folded/uniqued by the builder).
  mlir::Value constant(mlir::DenseElementsAttr value);
  /// Splat constant of shape `shape` and `elementType` holding `v`.
  mlir::Value splat(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                    double v);
  /// Scalar-like constant (rank 0) of `elementType`.
  mlir::Value scalar(mlir::Type elementType, double v) {
    return splat(elementType, {}, v);
  }
  mlir::Value i64Constant(llvm::ArrayRef<int64_t> values);
  /// An ONNX tensor (e.g. a Constant's value) as a constant or a global.
  mlir::FailureOr<mlir::Value> tensorValue(const onnx::TensorProto &tensor);

  mlir::FailureOr<mlir::Value> reshape(mlir::Value v,
                                       llvm::ArrayRef<int64_t> shape);
  mlir::FailureOr<mlir::Value> transpose(mlir::Value v,
                                         llvm::ArrayRef<int64_t> perm);
  mlir::FailureOr<mlir::Value> castTo(mlir::Value v, mlir::Type elementType);
  mlir::FailureOr<mlir::Value> expand(mlir::Value v,
                                      llvm::ArrayRef<int64_t> shape);
  /// `v` restricted along `axis` to [start, limit) with `step`.
  mlir::FailureOr<mlir::Value> sliceAxis(mlir::Value v, int64_t axis, int64_t start,
                                         int64_t limit, int64_t step = 1);

  /// Normalises a possibly negative axis into [0, rank); error otherwise.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what = "axis");
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  normalizeAxes(llvm::ArrayRef<int64_t> axes, int64_t rank);

  //===--- Results and errors ---------------------------------------------===//
  /// Publishes the node's outputs in order; fewer values than outputs is an
  /// error if one of the missing outputs is used later.
  mlir::LogicalResult setOutputs(llvm::ArrayRef<mlir::Value> values);
  mlir::LogicalResult setOutput(mlir::Value v) { return setOutputs({v}); }
  /// Publishes the node's (only) output as a sequence of tensors.
  mlir::LogicalResult setSequenceOutput(llvm::SmallVector<mlir::Value> values);
  /// An error at the node: "<OpType> node '<name>': ...".
  mlir::InFlightDiagnostic error();
  /// Fails with an error naming `what` when a converter would build a
  /// compile-time constant of more than 2^24 elements (or count overflow):
  /// building it element by element would take the compile minutes.
  mlir::LogicalResult checkConstantElements(llvm::ArrayRef<int64_t> counts,
                                            llvm::StringRef what);
  /// An error for an attribute or input value the importer does not handle.
  mlir::LogicalResult unsupported(const llvm::Twine &what);

private:
  mlir::Type placeholderType();
  mlir::FailureOr<mlir::Value> finish(mlir::Operation *op);

  ModelImporter &model_;
  const onnx::NodeProto &node_;
  mlir::Location loc_;
};

/// Converts one node; defined per op type in ONNXOps.cpp.
using ConvertFn = mlir::LogicalResult (*)(NodeImporter &);

struct OpConverter {
  const char *opType;
  /// The converter handles this op from this opset on (ONNX "since_version").
  int64_t sinceOpset;
  ConvertFn convert;
};

/// The converter for `opType` at `opset`, or null if unsupported.
const OpConverter *lookupConverter(llvm::StringRef opType, int64_t opset);
/// Every registered converter.
llvm::ArrayRef<OpConverter> allConverters();
/// The converter tables of the files beside ONNXOps.cpp (allConverters
/// joins them): RNN/GRU/LSTM (RecurrentOps.cpp), GridSample and RoiAlign
/// (SamplingOps.cpp) and the long tail of operators decomposed into graph
/// ops (ExtraOps.cpp).
llvm::ArrayRef<OpConverter> recurrentConverters();
llvm::ArrayRef<OpConverter> samplingConverters();
llvm::ArrayRef<OpConverter> extraConverters();

using Ints = llvm::SmallVector<int64_t>;

/// Constants' payloads: `values` (doubles, rounded to the nearest) as a
/// float tensor of `elem`, or (truncated) as an integer tensor of `elem`.
mlir::DenseElementsAttr floatValues(mlir::Type elem, llvm::ArrayRef<int64_t> shape,
                                    llvm::ArrayRef<double> values);
mlir::DenseElementsAttr intValues(mlir::Type elem, llvm::ArrayRef<int64_t> shape,
                                  llvm::ArrayRef<int64_t> values);

/// One axis of a Resize computed by interpolation weights (ExtraOps.cpp):
/// ONNX's attribute names and values.
struct ResizeAxisSpec {
  int64_t in = 1, out = 1;
  double scale = 1.0;
  std::string mode, transform, nearest;
  double cubicA = -0.75;
  bool excludeOutside = false;
  double roiStart = 0.0, roiEnd = 1.0;
};
/// Resize as one matmul by a constant [in, out] weight matrix per resized
/// axis: every mode and coordinate transform of ONNX's reference, cubic and
/// tf_crop_and_resize (whose outside positions take `extrapolation`) too.
mlir::FailureOr<mlir::Value> resizeSeparable(NodeImporter &n, mlir::Value x,
                                             llvm::ArrayRef<ResizeAxisSpec> axes,
                                             double extrapolation);
/// Conv of x by w (+ bias, may be null) with the node's Conv attributes
/// (kernel_shape, strides, pads/auto_pad, dilations, group).
mlir::FailureOr<mlir::Value> buildConv(NodeImporter &n, mlir::Value x,
                                       mlir::Value w, mlir::Value bias);
/// ScatterND built from graph ops (ExtraOps.cpp): data [D...], indices
/// [N..., k], updates [N..., D[k:]...], reduction none/add/mul/max/min.
mlir::FailureOr<mlir::Value> scatterNDComputed(NodeImporter &n, mlir::Value data,
                                               mlir::Value indices,
                                               mlir::Value updates,
                                               llvm::StringRef reduction);
inline Ints shapeOf(mlir::Value v) {
  return Ints(llvm::cast<mlir::RankedTensorType>(v.getType()).getShape());
}
inline mlir::Type elementTypeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getElementType();
}
inline int64_t rankOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getRank();
}

/// Maps an ONNX TensorProto data type to an MLIR element type (null if the
/// type has no graph-dialect equivalent, e.g. strings and complex numbers).
mlir::Type elementTypeFor(int32_t onnxType, mlir::MLIRContext *context);
/// ONNX's name for a data type, e.g. "FLOAT16".
std::string onnxTypeName(int32_t onnxType);

} // namespace tessera::onnx_importer

#endif // TESSERA_LIB_IMPORTERS_ONNX_NODEIMPORTER_H
