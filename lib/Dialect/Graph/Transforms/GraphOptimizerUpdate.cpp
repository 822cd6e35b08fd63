//===- GraphOptimizerUpdate.cpp - optimizer steps as graph ops -----------===//
//
// torch.optim's update rules written in graph ops, one weight at a time, so
// tile mapping spreads each update over the tiles that hold the weight.
// Numeric hyperparameters are scalar globals the program only reads: the
// runtime can change them between runs (setOptimizer never recompiles).
// Choices that change the program's structure (nesterov, amsgrad, centered,
// whether there is momentum or clipping at all) are fixed at compile time.
// Gradient accumulation commits the update on the last micro-batch of G: a
// select per store keeps the old value on the others, so the program stays
// straight-line for every path (the host reference runs it so). Those
// stores are marked graph.per_update: the machine program's steps that only
// compute them run once per update (Step::perUpdate), as Poplar runs the
// update outside the accumulation loop.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/IR/GraphEmitter.h"

#include "FuncResults.h"
#include "ReplicaSums.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/OpBuilding.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

namespace tessera::graph {
#define GEN_PASS_DEF_GRAPHOPTIMIZERUPDATE
#include "tessera/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessera::graph

using namespace mlir;

namespace tessera::graph {
namespace {

/// Hyperparameters with a value that means "no such term" (zero, or one
/// for a scale): the term is left out of the program, and the value is a
/// runtime hyperparameter only when set to something else.
std::optional<double> absentValue(StringRef key) {
  if (key == "momentum" || key == "max-grad-norm" || key == "max-weight-norm")
    return 0.0;
  if (key == "velocity-scaling")
    return 1.0;
  return std::nullopt;
}

/// An optimizer's name and its hyperparameters, defaults filled in.
struct OptimizerSpec {
  std::string name;
  llvm::StringMap<double> values;
  /// Keys that are structural (compile-time) rather than runtime values.
  llvm::StringSet<> structural;
  /// PopTorch's accumulator types, by key (accum-type,
  /// first-order-momentum-accum-type, second-order-momentum-accum-type):
  /// "float32" or "float16"; absent, the gradient's type for accumulators
  /// and fp32 for optimizer state.
  llvm::StringMap<std::string> accumulatorTypes;
};

/// The keys of PopTorch's accumulator types: the gradient accumulators',
/// the first moments' (momentum, Adam's exp_avg) and the second moments'.
constexpr StringLiteral kAccumType = "accum-type";
constexpr StringLiteral kFirstOrderType = "first-order-momentum-accum-type";
constexpr StringLiteral kSecondOrderType = "second-order-momentum-accum-type";

/// Parses "adamw:lr=1e-3,weight-decay=0.01" against torch.optim's defaults
/// (PopTorch's SGD default learning rate, 0.01).
FailureOr<OptimizerSpec> parseSpec(StringRef text, Location loc) {
  auto [name, rest] = text.split(':');
  OptimizerSpec spec;
  spec.name = name.trim().str();
  auto &v = spec.values;
  if (spec.name == "sgd") {
    v = {{"lr", 0.01}, {"momentum", 0}, {"dampening", 0},
         {"weight-decay", 0}, {"nesterov", 0}, {"velocity-scaling", 1}};
    spec.structural.insert("nesterov");
  } else if (spec.name == "adam" || spec.name == "adamw") {
    // bias-correction 0: PopTorch's AdamW(bias_correction=False) (PopART's
    // ADAMW_NO_BIAS): the moments used as they are.
    v = {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
         {"weight-decay", spec.name == "adamw" ? 0.01 : 0.0}, {"amsgrad", 0},
         {"bias-correction", 1}};
    spec.structural.insert("amsgrad");
    spec.structural.insert("bias-correction");
  } else if (spec.name == "rmsprop") {
    v = {{"lr", 0.01}, {"alpha", 0.99}, {"eps", 1e-8}, {"weight-decay", 0},
         {"momentum", 0}, {"centered", 0}};
    spec.structural.insert("centered");
  } else if (spec.name == "lamb") {
    // PopTorch's poptorch.optim.LAMB.
    v = {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
         {"weight-decay", 0.01}, {"bias-correction", 1}, {"max-weight-norm", 0}};
    spec.structural.insert("bias-correction");
  } else {
    return emitError(loc, "unknown optimizer '")
           << spec.name << "': use sgd, adam, adamw, rmsprop or lamb";
  }
  // Clipping by the global norm of all gradients (PopTorch's max_grad_norm,
  // torch.nn.utils.clip_grad_norm_); 0 is none.
  v["max-grad-norm"] = 0;
  SmallVector<StringRef> items;
  rest.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [key, value] = item.split('=');
    key = key.trim();
    value = value.trim();
    if (key == kAccumType || key == kFirstOrderType || key == kSecondOrderType) {
      StringRef type = llvm::StringSwitch<StringRef>(value)
                           .Cases({"float32", "float", "f32"}, "float32")
                           .Cases({"float16", "half", "f16"}, "float16")
                           .Default("");
      if (type.empty())
        return emitError(loc, "")
               << key << "=" << value << " of " << spec.name
               << ": use float32 or float16";
      spec.accumulatorTypes[key] = type.str();
      continue;
    }
    auto it = v.find(key);
    if (it == v.end()) {
      std::string known;
      for (auto &entry : v)
        known += (known.empty() ? "" : ", ") + entry.getKey().str();
      for (StringRef typeKey : {kAccumType, kFirstOrderType, kSecondOrderType})
        known += ", " + typeKey.str();
      return emitError(loc, "optimizer ")
             << spec.name << " has no hyperparameter '" << key
             << "' (it has " << known << ")";
    }
    double parsed;
    if (value == "true" || value == "false")
      parsed = value == "true";
    else if (value.getAsDouble(parsed))
      return emitError(loc, "hyperparameter ")
             << key << "=" << value << " of " << spec.name
             << " is not a number";
    if (parsed < 0 || !std::isfinite(parsed))
      return emitError(loc, "hyperparameter ")
             << key << "=" << value << " must be finite and non-negative";
    it->second = parsed;
  }
  if ((v.count("beta1") && v["beta1"] >= 1) || (v.count("beta2") && v["beta2"] >= 1))
    return emitError(loc, "adam's beta1 and beta2 must be below 1");
  if (spec.name == "sgd" && v["nesterov"] &&
      (v["momentum"] <= 0 || v["dampening"] != 0))
    return emitError(loc, "nesterov momentum needs momentum > 0 and no "
                          "dampening (as torch.optim.SGD)");
  return spec;
}

struct GraphOptimizerUpdate
    : impl::GraphOptimizerUpdateBase<GraphOptimizerUpdate> {
  using Base::Base;

  ModuleOp module;
  OpBuilder *moduleBuilder = nullptr;

  /// A new mutable global of `type`, all `init`, named `name`.
  ml_program::GlobalOp makeGlobal(StringRef name, RankedTensorType type,
                                  double init, Location loc) {
    Attribute element = FloatAttr::get(type.getElementType(), init);
    auto global = ml_program::GlobalOp::create(
        *moduleBuilder, loc, name, type, /*is_mutable=*/true,
        DenseElementsAttr::get(type, element),
        moduleBuilder->getStringAttr("private"));
    return global;
  }

  void runOnOperation() override {
    module = getOperation();
    SymbolTable symbols(module);
    auto main = symbols.lookup<func::FuncOp>("main");
    if (!main)
      return;
    FailureOr<OptimizerSpec> spec = parseSpec(optimizer, main.getLoc());
    if (failed(spec))
      return signalPassFailure();
    if (accumulate < 1 || (accumulationReduction != "mean" && accumulationReduction != "sum")) {
      main.emitError("gradient accumulation must be at least 1 with reduction "
                     "mean or sum, got ")
          << accumulate << " (" << accumulationReduction << ")";
      return signalPassFailure();
    }
    if (replicas < 1 || (replicaReduction != "mean" && replicaReduction != "sum")) {
      main.emitError("replicas must be at least 1 with reduction mean or sum, got ")
          << static_cast<int64_t>(replicas) << " (" << replicaReduction << ")";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(main.front().getTerminator());

    SmallVector<unsigned> gradientResults;
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      if (main.getResultAttr(i, "graph.gradient_of"))
        gradientResults.push_back(i);
    if (gradientResults.empty()) {
      main.emitError("no gradients to apply: no trainable weight reaches the loss (all "
                     "frozen, or every path from a weight to the loss is empty), or "
                     "graph-autodiff has not run");
      return signalPassFailure();
    }

    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    mb.setInsertionPoint(main);
    moduleBuilder = &mb;
    OpBuilder b(ret);
    Location loc = NameLoc::get(b.getStringAttr("optimizer"), main.getLoc());
    auto scalarType = RankedTensorType::get({}, b.getF32Type());

    // Runtime hyperparameters: read once, shared by every weight's update.
    llvm::StringMap<Value> hyper;
    {
      OpBuilder hb = OpBuilder::atBlockBegin(&main.front());
      for (auto &entry : spec->values) {
        StringRef key = entry.getKey();
        if (spec->structural.contains(key) ||
            absentValue(key) == entry.getValue())
          continue;
        std::string name = ("optimizer." + key).str();
        if (symbols.lookup(name)) {
          main.emitError("the model already has a global named ") << name;
          return signalPassFailure();
        }
        auto global = makeGlobal(name, scalarType, entry.getValue(), loc);
        global->setAttr("graph.hyperparameter", b.getUnitAttr());
        symbols.insert(global);
        hyper[key] = ml_program::GlobalLoadOp::create(
            hb, loc, scalarType, FlatSymbolRefAttr::get(global.getSymNameAttr()));
      }
    }
    auto flag = [&](StringRef key) { return spec->values.lookup(key) != 0; };
    // Whether the term of `key` (see absentValue) is in the program.
    auto present = [&](StringRef key) { return hyper.count(key) != 0; };
    bool momentum = flag("momentum");

    // The element type `key` of spec->accumulatorTypes chooses, or `absent`.
    auto elementTypeFor = [&](StringRef key, Type absent) -> Type {
      auto it = spec->accumulatorTypes.find(key);
      if (it == spec->accumulatorTypes.end())
        return absent;
      return it->second == "float16" ? Type(b.getF16Type()) : Type(b.getF32Type());
    };

    GraphEmitter e(b, loc);
    auto makeState = [&](StringRef name, RankedTensorType type, Location at)
        -> std::pair<ml_program::GlobalOp, Value> {
      auto global = makeGlobal(name, type, 0.0, at);
      global->setAttr("graph.optimizer_state", b.getUnitAttr());
      symbols.insert(global);
      Value current = ml_program::GlobalLoadOp::create(
          b, loc, type, FlatSymbolRefAttr::get(global.getSymNameAttr()));
      return {global, current};
    };

    // Gradient accumulation: the last of G micro-batches commits the update.
    Value commit;
    if (accumulate > 1) {
      auto [microGlobal, micro] = makeState("optimizer.micro_step", scalarType, loc);
      microGlobal->setAttr(kMicroBatchCounterAttrName, b.getUnitAttr());
      Value nextMicro = e.addScalar(micro, 1.0);
      commit = e.equal(nextMicro, e.scalar(micro, double(accumulate)));
      ml_program::GlobalStoreOp::create(
          b, loc, FlatSymbolRefAttr::get(microGlobal.getSymNameAttr()),
          e.select(commit, e.scalar(micro, 0.0), nextMicro));
    }
    // Every store but the accumulator's: the new value, or with accumulation
    // the old one until the update is committed.
    // State kept in another type than it is computed in (fp16 moments) is
    // rounded to nearest once, here.
    auto store = [&](ml_program::GlobalOp global, Value v, Value old) {
      if (commit)
        v = e.select(commit, v, old);
      v = e.cast(v, cast<RankedTensorType>(global.getType()).getElementType());
      auto op = ml_program::GlobalStoreOp::create(
          b, loc, FlatSymbolRefAttr::get(global.getSymNameAttr()), v);
      // Once per G micro-batches; without accumulation every micro-batch
      // may commit (a loss-scaled update skipped or not is still computed).
      if (accumulate > 1)
        op->setAttr(kPerUpdateAttrName, b.getUnitAttr());
    };

    // The step count (bias correction, SGD's first momentum step), stored
    // once the update's commit is known (a skipped update keeps it).
    Value step, nextStep;
    ml_program::GlobalOp stepGlobal;
    if (spec->name != "rmsprop") {
      auto [global, current] = makeState("optimizer.step", scalarType, loc);
      stepGlobal = global;
      step = current;
      nextStep = e.addScalar(step, 1.0);
    }

    // Each weight's gradient for this update: accumulated, then reduced.
    struct Trained {
      ml_program::GlobalOp weight;
      Value w, g;
      std::pair<int64_t, int64_t> at; ///< where the gradient is computed
    };
    SmallVector<Trained> trained;
    for (unsigned index : gradientResults) {
      auto ref = main.getResultAttrOfType<FlatSymbolRefAttr>(index,
                                                             "graph.gradient_of");
      auto weight = symbols.lookup<ml_program::GlobalOp>(ref.getValue());
      if (!weight) {
        main.emitError("gradient of unknown global ") << ref;
        return signalPassFailure();
      }
      Value g = ret.getOperand(index);
      std::pair<int64_t, int64_t> at = placementOf(g);
      auto type = cast<RankedTensorType>(g.getType());
      // The weight becomes state: every read is a mutable load.
      weight.setIsMutable(true);
      SmallVector<ml_program::GlobalLoadConstOp> constLoads;
      main.walk([&](ml_program::GlobalLoadConstOp load) {
        if (load.getGlobal().getLeafReference() == weight.getSymName())
          constLoads.push_back(load);
      });
      for (auto load : constLoads) {
        OpBuilder lb(load);
        Value fresh = ml_program::GlobalLoadOp::create(lb, load.getLoc(),
                                                       load.getType(),
                                                       load.getGlobal());
        load.replaceAllUsesWith(fresh);
        load.erase();
      }
      Value w = ml_program::GlobalLoadOp::create(b, loc, type, ref);
      if (commit) {
        // PopTorch's accum_type: the accumulators' type (by default the
        // gradient's; fp32 keeps an fp16 model's small gradients summing).
        Type accumulatorType = elementTypeFor(kAccumType, type.getElementType());
        auto [accGlobal, acc] = makeState((weight.getSymName() + "/grad_accum").str(),
                                          type.clone(accumulatorType), weight.getLoc());
        Value total = e.add(acc, e.cast(g, accumulatorType));
        ml_program::GlobalStoreOp::create(
            b, loc, FlatSymbolRefAttr::get(accGlobal.getSymNameAttr()),
            e.select(commit, e.scalar(total, 0.0), total));
        g = accumulationReduction == "mean" ? e.mulScalar(total, 1.0 / accumulate)
                                            : total;
      }
      trained.push_back({weight, w, g, at});
    }
    // Replicas: their accumulated gradients summed once per weight update
    // (graph-replicate left each micro-batch's alone).
    if (commit && replicas > 1) {
      SmallVector<Value> gradients;
      SmallVector<std::pair<int64_t, int64_t>> at;
      for (const Trained &t : trained) {
        gradients.push_back(t.g);
        at.push_back(t.at);
      }
      for (auto [t, sum] :
           llvm::zip(trained, sumOverReplicas(b, gradients, at, replicas, replicaReduction)))
        t.g = sum;
    }

    auto sumAll = [&](Value v) {
      if (!v) // an earlier op failed; e.failed() reports it
        return v;
      auto rank = cast<RankedTensorType>(v.getType()).getRank();
      return rank == 0 ? v
                       : e.reduceSum(v, llvm::to_vector(llvm::seq<int64_t>(0, rank)),
                                     /*keepdims=*/false);
    };
    // Loss scaling (graph-loss-scaling): the gradients come scaled; they
    // are unscaled in fp32 before anything reads them. Automatic: the scale
    // halves when more than 1e-7 of the gradients' elements exceed 1/8 of
    // fp16's largest value or any is inf or NaN, and doubles otherwise; an
    // update with an inf or NaN is skipped (every store keeps its value).
    if (auto lossScaling = main->getAttrOfType<StringAttr>(kLossScaleAttrName)) {
      auto scaleRef = FlatSymbolRefAttr::get(b.getContext(), kLossScaleGlobal);
      Value scale = ml_program::GlobalLoadOp::create(b, loc, scalarType, scaleRef);
      Value inverse = e.div(e.scalar(scale, 1.0), scale);
      Value nonFinite, largeCount;
      int64_t elements = 0;
      for (Trained &t : trained) {
        Value g32 = e.cast(t.g, b.getF32Type());
        if (lossScaling.getValue() == "auto") {
          // x - x is 0 for finite x and NaN otherwise: the sum is 0 exactly
          // when every element is finite (a count of finite elements is not
          // exact in f32 past 2^24 of them).
          Value nan = sumAll(e.sub(g32, g32));
          Value large = sumAll(e.cast(e.greater(e.abs(g32), e.scalar(g32, 65504.0 / 8)),
                                      b.getF32Type()));
          nonFinite = nonFinite ? e.add(nonFinite, nan) : nan;
          largeCount = largeCount ? e.add(largeCount, large) : large;
          elements += cast<RankedTensorType>(g32.getType()).getNumElements();
        }
        t.g = e.mul(g32, inverse);
      }
      if (lossScaling.getValue() == "auto") {
        Value allFinite = e.equal(nonFinite, e.scalar(nonFinite, 0.0));
        Value tooLarge = e.greater(e.mul(largeCount, e.scalar(largeCount, 1.0 / elements)),
                                   e.scalar(largeCount, 1e-7));
        Value half = e.mul(scale, e.scalar(scale, 0.5));
        Value doubled = e.mul(scale, e.scalar(scale, 2.0));
        // At most 2^15: the backward pass starts from the scale, which an
        // fp16 loss must hold (fp16's largest is 65504).
        Value cap = e.scalar(scale, 32768.0);
        doubled = e.select(e.greater(doubled, cap), cap, doubled);
        Value next = e.select(allFinite, e.select(tooLarge, half, doubled), half);
        auto skippedRef = FlatSymbolRefAttr::get(b.getContext(), kSkippedUpdatesGlobal);
        Value skipped = ml_program::GlobalLoadOp::create(b, loc, scalarType, skippedRef);
        Value nextSkipped = e.add(skipped, e.select(allFinite, e.scalar(skipped, 0.0),
                                                    e.scalar(skipped, 1.0)));
        // Decided on every committed update, skipped or not.
        auto scaleGlobal = symbols.lookup<ml_program::GlobalOp>(kLossScaleGlobal);
        auto skippedGlobal = symbols.lookup<ml_program::GlobalOp>(kSkippedUpdatesGlobal);
        store(scaleGlobal, next, scale);
        store(skippedGlobal, nextSkipped, skipped);
        commit = commit ? e.logicalAnd(commit, allFinite) : allFinite;
      }
    }
    if (stepGlobal)
      store(stepGlobal, nextStep, step);

    // Clipping by the global norm, as torch.nn.utils.clip_grad_norm_, the
    // norm summed in fp32 (an fp16 sum of squares overflows at 256
    // squared). 16-bit gradients are clipped in fp32, which their update
    // uses anyway; others in their own type.
    auto sumOfSquares = [&](Value v) { return sumAll(e.mul(v, v)); };
    auto isNarrow = [](Value v) {
      Type t = cast<RankedTensorType>(v.getType()).getElementType();
      return t.isF16() || t.isBF16();
    };
    if (flag("max-grad-norm")) {
      Value total;
      for (Trained &t : trained) {
        if (!t.g)
          break; // an earlier op failed; e.failed() reports it
        if (isNarrow(t.g))
          t.g = e.cast(t.g, b.getF32Type());
        Value part = sumOfSquares(e.cast(t.g, b.getF32Type()));
        total = total ? e.add(total, part) : part;
      }
      Value coef = e.div(hyper["max-grad-norm"], e.addScalar(e.sqrt(total), 1e-6));
      Value one = e.scalar(coef, 1.0);
      coef = e.select(e.less(coef, one), coef, one);
      for (Trained &t : trained) {
        if (!t.g || !coef)
          break;
        Type own = cast<RankedTensorType>(t.g.getType()).getElementType();
        t.g = e.mul(t.g, e.cast(coef, own));
      }
    }
    if (e.failed()) {
      main.emitError("could not build the gradients' loss scaling or clipping");
      return signalPassFailure();
    }

    for (Trained &t : trained) {
      ml_program::GlobalOp weight = t.weight;
      Value w = t.w, g = t.g;
      // An fp16 weight is updated in fp32 (its optimizer state too) and
      // rounded back once: to nearest, or stochastically, so that updates
      // below half an fp16 step still add up in expectation.
      auto weightType = cast<RankedTensorType>(w.getType());
      bool half = weightType.getElementType().isF16();
      Type computeType = half ? b.getF32Type() : weightType.getElementType();
      w = e.cast(w, computeType);
      // The gradient in the update's type (accumulators of another type
      // than the weight's end here).
      g = e.cast(g, computeType);
      auto type = cast<RankedTensorType>(g.getType());
      // A slot of optimizer state: first or second moments, stored in the
      // type PopTorch's *_momentum_accum_type chooses (fp32 by default),
      // read and updated in the update's type.
      auto slot = [&](StringRef name, StringRef typeKey) -> std::pair<ml_program::GlobalOp, Value> {
        auto [global, current] =
            makeState((weight.getSymName() + "/" + name).str(),
                      type.clone(elementTypeFor(typeKey, computeType)), weight.getLoc());
        return {global, e.cast(current, computeType)};
      };
      Value lr = hyper["lr"], wd = hyper["weight-decay"];
      Value updated;
      if (spec->name == "sgd") {
        Value d = e.add(g, e.mul(wd, w));
        if (momentum) {
          Value mom = hyper["momentum"];
          auto [bufGlobal, buf] = slot("momentum_buffer", kFirstOrderType);
          // PopTorch's velocity_scaling: the buffer holds the velocity
          // times the scale (it keeps an fp16 velocity in range; with fp32
          // state the result equals the unscaled update up to rounding).
          Value scale = present("velocity-scaling") ? hyper["velocity-scaling"] : Value();
          Value scaledD = scale ? e.mul(scale, d) : d;
          // torch.optim.SGD starts the buffer at the first step's d.
          Value later =
              e.add(e.mul(mom, buf),
                    e.mul(e.sub(e.scalar(d, 1.0), hyper["dampening"]), scaledD));
          Value first = e.equal(step, e.scalar(step, 0.0));
          Value newBuf = e.select(first, scaledD, later);
          store(bufGlobal, newBuf, buf);
          Value velocity = scale ? e.div(newBuf, scale) : newBuf;
          d = flag("nesterov") ? e.add(d, e.mul(mom, velocity)) : velocity;
        }
        updated = e.sub(w, e.mul(lr, d));
      } else if (spec->name == "adam" || spec->name == "adamw" ||
                 spec->name == "lamb") {
        Value b1 = hyper["beta1"], b2 = hyper["beta2"], eps = hyper["eps"];
        Value one = e.scalar(g, 1.0);
        Value base = w;
        if (spec->name == "adamw")
          base = e.mul(w, e.sub(one, e.mul(lr, wd)));
        else if (spec->name == "adam")
          g = e.add(g, e.mul(wd, w));
        auto [mGlobal, m] = slot("exp_avg", kFirstOrderType);
        auto [vGlobal, v] = slot("exp_avg_sq", kSecondOrderType);
        Value newM = e.add(e.mul(b1, m), e.mul(e.sub(one, b1), g));
        Value newV = e.add(e.mul(b2, v), e.mul(e.sub(one, b2), e.mul(g, g)));
        store(mGlobal, newM, m);
        store(vGlobal, newV, v);
        if (spec->name == "lamb") {
          // PopTorch's LAMB: the Adam direction plus weight decay, scaled by
          // the trust ratio ||w|| / ||direction|| (1 when either is zero).
          Value mHat = newM, vHat = newV;
          if (flag("bias-correction")) {
            mHat = e.div(newM, e.sub(one, e.pow(b1, nextStep)));
            vHat = e.div(newV, e.sub(one, e.pow(b2, nextStep)));
          }
          Value dir = e.add(e.div(mHat, e.add(e.sqrt(vHat), eps)), e.mul(wd, w));
          Value r1 = e.sqrt(sumOfSquares(w));
          if (flag("max-weight-norm")) {
            Value cap = hyper["max-weight-norm"];
            r1 = e.select(e.less(r1, cap), r1, cap);
          }
          Value r2 = e.sqrt(sumOfSquares(dir));
          Value zero = e.scalar(r1, 0.0);
          Value trust = e.select(e.logicalAnd(e.greater(r1, zero), e.greater(r2, zero)),
                                 e.div(r1, r2), e.scalar(r1, 1.0));
          updated = e.sub(w, e.mul(e.mul(lr, trust), dir));
        } else {
          bool corrected = flag("bias-correction");
          Value bc1 = corrected ? e.sub(one, e.pow(b1, nextStep)) : one;
          Value bc2 = corrected ? e.sub(one, e.pow(b2, nextStep)) : one;
          Value second = newV;
          if (flag("amsgrad")) {
            auto [maxGlobal, vmax] = slot("max_exp_avg_sq", kSecondOrderType);
            second = e.max(vmax, newV);
            store(maxGlobal, second, vmax);
          }
          Value denom = e.add(e.div(e.sqrt(second), e.sqrt(bc2)), eps);
          updated = e.sub(base, e.mul(e.div(lr, bc1), e.div(newM, denom)));
        }
      } else {
        Value alpha = hyper["alpha"], eps = hyper["eps"];
        Value one = e.scalar(g, 1.0);
        g = e.add(g, e.mul(wd, w));
        auto [sqGlobal, sq] = slot("square_avg", kSecondOrderType);
        Value newSq = e.add(e.mul(alpha, sq), e.mul(e.sub(one, alpha), e.mul(g, g)));
        store(sqGlobal, newSq, sq);
        Value avg = newSq;
        if (flag("centered")) {
          auto [gaGlobal, ga] = slot("grad_avg", kFirstOrderType);
          Value newGa = e.add(e.mul(alpha, ga), e.mul(e.sub(one, alpha), g));
          store(gaGlobal, newGa, ga);
          avg = e.sub(avg, e.mul(newGa, newGa));
        }
        avg = e.add(e.sqrt(avg), eps);
        if (momentum) {
          auto [bufGlobal, buf] = slot("momentum_buffer", kFirstOrderType);
          Value newBuf = e.add(e.mul(hyper["momentum"], buf), e.div(g, avg));
          store(bufGlobal, newBuf, buf);
          updated = e.sub(w, e.mul(lr, newBuf));
        } else {
          updated = e.sub(w, e.mul(lr, e.div(g, avg)));
        }
      }
      if (e.failed()) {
        main.emitError("could not build the ")
            << spec->name << " update of " << weight.getSymName();
        return signalPassFailure();
      }
      if (half) {
        if (stochasticRounding) {
          FailureOr<Value> rounded = createStochasticRound(b, loc, updated);
          if (failed(rounded))
            return signalPassFailure();
          updated = *rounded;
        } else {
          updated = e.cast(updated, weightType.getElementType());
        }
      }
      store(weight, updated, t.w);
    }

    // The gradients are consumed: drop their results.
    SmallVector<Value> results;
    SmallVector<Attribute> attrs, all = resultAttrDicts(main);
    for (unsigned i = 0; i < main.getNumResults(); ++i) {
      if (llvm::is_contained(gradientResults, i))
        continue;
      results.push_back(ret.getOperand(i));
      attrs.push_back(all[i]);
    }
    setResults(main, results, attrs);
    completePlacement(main.front());
    main->setAttr("graph.optimizer", b.getStringAttr(spec->name));
  }
};

} // namespace
} // namespace tessera::graph
