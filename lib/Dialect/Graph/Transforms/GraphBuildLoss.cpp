//===- GraphBuildLoss.cpp - append a training loss to @main --------------===//
//
// Losses are built from graph ops (log-softmax, comparisons against a class
// index constant, reductions), so autodiff needs no rule of its own for them
// and tile mapping plans them like the model. The labels arrive as a new
// argument named `labels`; classes are int64 (PyTorch's targets), regression
// targets have the prediction's type and shape.
//
//===----------------------------------------------------------------------===//

#include "GraphEmitter.h"

#include "FuncResults.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
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
    Type f = predType.getElementType();
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
    Value total, count;
    if (classes) {
      int64_t n = shape[0], c = shape[1];
      Value logp = kind == "cross-entropy" ? e.logSoftmax(pred, 1) : pred;
      SmallVector<double> classIds(c);
      for (int64_t i = 0; i < c; ++i)
        classIds[i] = i;
      Value ids = e.constant(b.getI64Type(), {1, c}, classIds);
      Value onehot = e.cast(e.equal(e.reshape(labels, {n, 1}), ids), f);
      Value target = onehot;
      if (labelSmoothing > 0)
        target = e.addScalar(e.mulScalar(onehot, 1.0 - labelSmoothing),
                             labelSmoothing / c);
      Value keep = e.cast(e.notEqual(labels, e.splat(b.getI64Type(), {},
                                                     double(ignoreIndex))),
                          f);
      Value perSample = e.neg(e.reduceSum(e.mul(target, logp), {1}, false));
      total = e.reduceSum(e.mul(perSample, keep), {0}, false);
      count = e.reduceSum(keep, {0}, false);
    } else {
      Value per;
      if (kind == "mse") {
        Value d = e.sub(pred, labels);
        per = e.mul(d, d);
      } else if (kind == "l1") {
        per = e.abs(e.sub(pred, labels));
      } else {
        // max(x, 0) - x * y + log(1 + exp(-|x|)), stable for any x.
        Value zero = e.scalar(pred, 0.0);
        per = e.add(e.sub(e.max(pred, zero), e.mul(pred, labels)),
                    e.log(e.addScalar(e.exp(e.neg(e.abs(pred))), 1.0)));
      }
      SmallVector<int64_t> all = llvm::to_vector(
          llvm::seq<int64_t>(0, static_cast<int64_t>(shape.size())));
      total = e.reduceSum(per, all, false);
      count = e.splat(f, {}, double(numElements(shape)));
    }
    Value value = reduction == "mean" ? e.div(total, count) : total;
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
  }
};

} // namespace
} // namespace tessera::graph
