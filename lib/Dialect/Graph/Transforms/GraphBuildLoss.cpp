//===- GraphBuildLoss.cpp - append a training loss to @main --------------===//
//
// Losses are built from graph ops (log-softmax, comparisons against a class
// index constant, reductions), so autodiff needs no rule of its own for them
// and tile mapping plans them like the model. The labels arrive as a new
// argument named `labels`; classes are int64 (PyTorch's targets), regression
// targets have the prediction's type and shape.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/IR/GraphEmitter.h"
#include "tessera/Dialect/Graph/IR/Losses.h"

#include "FuncResults.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/IR/ShapeUtils.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHBUILDLOSS
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;

namespace tessera::graph {
namespace {

struct GraphBuildLoss : impl::GraphBuildLossBase<GraphBuildLoss> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.getBody().getBlocks().size() != 1) {
      module.emitError("graph-build-loss needs a @main function of one block");
      return signalPassFailure();
    }
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      if (main.getResultAttr(i, "graph.loss")) {
        main.emitError("@main already returns a loss (result ") << i << ")";
        return signalPassFailure();
      }
    auto ret = cast<func::ReturnOp>(main.front().getTerminator());
    auto resultName = [&](unsigned i) {
      auto name = main.getResultAttrOfType<StringAttr>(i, "graph.name");
      return name ? name.str() : "output" + std::to_string(i);
    };
    auto findResult = [&](StringRef name) -> std::optional<unsigned> {
      for (unsigned i = 0; i < main.getNumResults(); ++i)
        if (resultName(i) == name)
          return i;
      return std::nullopt;
    };
    auto names = [&] {
      std::string list;
      for (unsigned i = 0; i < main.getNumResults(); ++i)
        list += (i ? ", " : "") + resultName(i);
      return list;
    };

    StringRef kind = loss;
    if (kind.consume_front("output:")) {
      std::optional<unsigned> index = findResult(kind);
      if (!index) {
        main.emitError("--loss output:") << kind << " names no output of the "
                                         << "model; its outputs are " << names();
        return signalPassFailure();
      }
      auto type = cast<RankedTensorType>(main.getResultTypes()[*index]);
      if (type.getRank() != 0 || !isa<FloatType>(type.getElementType())) {
        main.emitError("output '") << kind << "' is " << type
                                   << ", but a loss must be a float scalar";
        return signalPassFailure();
      }
      main.setResultAttr(*index, "graph.loss", UnitAttr::get(&getContext()));
      return;
    }
    if (reduction != "mean" && reduction != "sum") {
      main.emitError("unknown loss reduction '") << reduction
                                                 << "' (mean or sum)";
      return signalPassFailure();
    }
    if (labelSmoothing < 0 || labelSmoothing >= 1) {
      main.emitError("label smoothing ") << labelSmoothing
                                         << " is out of range [0, 1)";
      return signalPassFailure();
    }
    bool classes = kind == "cross-entropy" || kind == "nll";
    if (!classes && kind != "mse" && kind != "l1" && kind != "bce-with-logits") {
      main.emitError("unknown loss '")
          << kind << "': use cross-entropy, nll, mse, l1, bce-with-logits or "
                     "output:NAME";
      return signalPassFailure();
    }
    if (main.getNumResults() == 0) {
      main.emitError("the model has no output to compute a loss from");
      return signalPassFailure();
    }
    unsigned predIndex = 0;
    if (!output.empty()) {
      std::optional<unsigned> index = findResult(output);
      if (!index) {
        main.emitError("--loss-output ")
            << output << " names no output of the model; its outputs are "
            << names();
        return signalPassFailure();
      }
      predIndex = *index;
    }
    Value pred = ret.getOperand(predIndex);
    auto predType = cast<RankedTensorType>(pred.getType());
    if (!isa<FloatType>(predType.getElementType()) || !predType.hasStaticShape()) {
      main.emitError("output '") << resultName(predIndex) << "' is " << predType
                                 << "; a loss needs a float tensor of static shape";
      return signalPassFailure();
    }
    if (classes && predType.getRank() != 2) {
      main.emitError("--loss ")
          << kind << " reads class scores of shape N x C, but output '"
          << resultName(predIndex) << "' is " << predType
          << " (pick another output with --loss-output)";
      return signalPassFailure();
    }
    for (unsigned i = 0; i < main.getNumArguments(); ++i)
      if (auto name = main.getArgAttrOfType<StringAttr>(i, "graph.name");
          name && name.getValue() == "labels") {
        main.emitError("the model already has an input named 'labels'");
        return signalPassFailure();
      }

    // The labels argument.
    ArrayRef<int64_t> shape = predType.getShape();
    OpBuilder b(ret);
    auto labelsType =
        classes ? RankedTensorType::get({shape[0]}, b.getI64Type()) : predType;
    unsigned labelsIndex = main.getNumArguments();
    if (failed(main.insertArgument(
            labelsIndex, labelsType,
            b.getDictionaryAttr(
                b.getNamedAttr("graph.name", b.getStringAttr("labels"))),
            main.getLoc())))
      return signalPassFailure();
    Value labels = main.getArgument(labelsIndex);

    GraphEmitter e(b, NameLoc::get(b.getStringAttr("loss"), main.getLoc()));
    LossReduction r = reduction == "mean" ? LossReduction::Mean : LossReduction::Sum;
    Value value = classes ? buildClassLoss(e, pred, labels, kind == "cross-entropy",
                                           labelSmoothing, ignoreIndex, r)
                          : buildRegressionLoss(e, kind, pred, labels, r);
    if (e.failed()) {
      main.emitError("could not build the ") << kind << " loss";
      return signalPassFailure();
    }

    // The loss is result 0; the model's outputs follow.
    SmallVector<Value> results{value};
    results.append(ret.getOperands().begin(), ret.getOperands().end());
    SmallVector<Attribute> attrs{b.getDictionaryAttr(
        {b.getNamedAttr("graph.loss", b.getUnitAttr()),
         b.getNamedAttr("graph.name", b.getStringAttr("loss"))})};
    attrs.append(resultAttrDicts(main));
    setResults(main, results, attrs);
    completePlacement(main.front());
  }
};

} // namespace
} // namespace tessera::graph
