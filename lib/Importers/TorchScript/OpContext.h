//===- OpContext.h - what an aten op converter works with -------*- C++ -*-===//
//
// Private to the TorchScript importer. GraphEvaluator walks the frozen
// forward graph; each TorchScript value becomes an ImportedValue: a tensor
// computed on the device (an MLIR value), a compile-time constant (an
// IValue: ints, floats, lists, strings, None, and constant tensors such as
// frozen weights), a list or tuple holding device tensors, or "failed" (its
// producer was reported as unsupported; users are skipped so that every
// unsupported operator is listed in one go). A node whose inputs are all
// constants is run by libtorch at compile time; the others go to the aten
// converter registered for their kind, which reads inputs and publishes
// results through an OpContext.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_IMPORTERS_TORCHSCRIPT_OPCONTEXT_H
#define TESSERA_LIB_IMPORTERS_TORCHSCRIPT_OPCONTEXT_H

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/OpBuilding.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <optional>
#include <vector>

namespace tessera::torchscript_importer {

struct ImportedValue {
  enum class Kind { Failed, Tensor, Constant, Sequence };
  Kind kind = Kind::Failed;
  mlir::Value tensor;                  ///< Kind::Tensor
  c10::IValue constant;                ///< Kind::Constant
  /// Kind::Sequence: shared, as TorchScript lists are references (append
  /// through one name is seen through every other).
  std::shared_ptr<std::vector<ImportedValue>> elements;
  bool isTuple = false;

  static ImportedValue ofTensor(mlir::Value v) {
    ImportedValue r;
    r.kind = Kind::Tensor;
    r.tensor = v;
    return r;
  }
  static ImportedValue ofConstant(c10::IValue v) {
    ImportedValue r;
    r.kind = Kind::Constant;
    r.constant = std::move(v);
    return r;
  }
  static ImportedValue ofSequence(std::vector<ImportedValue> elements,
                                  bool isTuple) {
    ImportedValue r;
    r.kind = Kind::Sequence;
    r.elements = std::make_shared<std::vector<ImportedValue>>(std::move(elements));
    r.isTuple = isTuple;
    return r;
  }
  bool isNone() const { return kind == Kind::Constant && constant.isNone(); }
};

class GraphEvaluator;


class OpContext {
public:
  OpContext(GraphEvaluator &evaluator, torch::jit::Node *node,
            mlir::Location loc);

  torch::jit::Node *node() const { return node_; }
  /// "aten::add" (the kind, without the overload name).
  std::string kind() const { return node_->kind().toQualString(); }
  mlir::OpBuilder &builder();
  mlir::MLIRContext *context() { return builder().getContext(); }
  mlir::Location loc() const { return loc_; }
  /// True when importing for a training step (ImportOptions::training).
  bool training() const;
  /// Every value the importer has cached as `from` becomes `to` (a load
  /// that storeBackToGlobal replaced).
  void rebind(mlir::Value from, mlir::Value to);

  //===--- Inputs ---------------------------------------------------------===//
  size_t numInputs() const { return node_->inputs().size(); }
  const ImportedValue &input(size_t i) const;
  /// The schema's name of argument `i` ("weight"), for messages and names.
  std::string argName(size_t i) const;
  /// The name a constant tensor input becomes a global under: its
  /// attribute path for a frozen parameter ("layer1.0.conv1.weight"), else
  /// the module path and argument name.
  std::string constantName(size_t i) const;
  /// True if input `i` is a parameter or buffer of the module and the import
  /// is for training: it stays a global, to be trained or updated.
  bool isModuleState(size_t i) const;
  bool isModuleState(const torch::jit::Value *v) const;
  /// "layer1.0.conv1.weight" for a value the importer named after a module
  /// attribute ("self.layer1.0.conv1.weight"), else nothing.
  static std::optional<std::string> statePath(const torch::jit::Value *v);
  bool isNone(size_t i) const { return i >= numInputs() || input(i).isNone(); }
  bool isTensor(size_t i) const;
  /// Input `i` as a device tensor; constant tensors and Python scalars are
  /// materialised (a scalar as a rank-0 tensor of `scalarType`, or of its
  /// own type if null).
  mlir::FailureOr<mlir::Value> tensor(size_t i, mlir::Type scalarType = {});
  mlir::FailureOr<int64_t> getInt(size_t i);
  mlir::FailureOr<double> getDouble(size_t i);
  mlir::FailureOr<bool> getBool(size_t i);
  mlir::FailureOr<std::string> getString(size_t i);
  mlir::FailureOr<llvm::SmallVector<int64_t>> getInts(size_t i);
  std::optional<int64_t> optionalInt(size_t i) {
    if (isNone(i))
      return std::nullopt;
    auto v = getInt(i);
    return mlir::succeeded(v) ? std::optional<int64_t>(*v) : std::nullopt;
  }
  /// A list of tensors (cat, stack); with `allowNone`, of optional
  /// tensors (index's), None a null Value.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>> tensorList(size_t i, bool allowNone = false);

  //===--- Building -------------------------------------------------------===//
  template <typename OpTy, typename... Args>
  mlir::FailureOr<mlir::Value> build(mlir::Type resultType, Args &&...args) {
    auto op = OpTy::create(builder(), loc_, resultType,
                           std::forward<Args>(args)...);
    return graph::finishCreatedOp(builder(), op.getOperation());
  }
  template <typename OpTy, typename... Args>
  mlir::FailureOr<mlir::Value> infer(Args &&...args) {
    return build<OpTy>(graph::placeholderResultType(context()),
                       std::forward<Args>(args)...);
  }
  mlir::Value splat(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                    double v);
  mlir::Value scalar(mlir::Type elementType, double v) {
    return splat(elementType, {}, v);
  }
  /// A constant tensor the converter computed on the host (an index table,
  /// a triangular matrix), named `name` where it becomes a global.
  mlir::FailureOr<mlir::Value> constant(const at::Tensor &t, llvm::StringRef name);
  mlir::FailureOr<mlir::Value> reshape(mlir::Value v,
                                       llvm::ArrayRef<int64_t> shape);
  mlir::FailureOr<mlir::Value> transpose(mlir::Value v,
                                         llvm::ArrayRef<int64_t> perm);
  mlir::FailureOr<mlir::Value> castTo(mlir::Value v, mlir::Type elementType);
  mlir::FailureOr<mlir::Value> expand(mlir::Value v,
                                      llvm::ArrayRef<int64_t> shape);
  /// Normalises a possibly negative dim into [0, rank); error otherwise.
  mlir::FailureOr<int64_t> normalizeDim(int64_t dim, int64_t rank);

  //===--- Results and errors ---------------------------------------------===//
  mlir::LogicalResult setResult(mlir::Value v) { return setResult(0, v); }
  mlir::LogicalResult setResult(size_t i, mlir::Value v);
  mlir::LogicalResult setResult(size_t i, ImportedValue v);
  /// An error at the node: "aten::foo: ...".
  mlir::InFlightDiagnostic error();
  /// "aten::foo: <what> is not supported yet".
  mlir::LogicalResult unsupported(const llvm::Twine &what);

private:
  GraphEvaluator &evaluator_;
  torch::jit::Node *node_;
  mlir::Location loc_;
};

using AtenConverter = mlir::LogicalResult (*)(OpContext &);

/// Converters by node kind ("aten::relu"). In-place variants ("aten::relu_")
/// use the functional converter; the evaluator rebinds the mutated value.
const llvm::StringMap<AtenConverter> &atenConverters();

/// The MLIR element type of a torch dtype, or null if there is none.
mlir::Type elementTypeOf(c10::ScalarType dtype, mlir::MLIRContext *context);
/// The torch dtype of an MLIR element type.
std::optional<c10::ScalarType> scalarTypeOf(mlir::Type elementType);

} // namespace tessera::torchscript_importer

#endif // TESSERA_LIB_IMPORTERS_TORCHSCRIPT_OPCONTEXT_H
