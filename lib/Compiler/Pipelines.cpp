//===- Pipelines.cpp - Tessera's pass pipelines and phases ---------------===//

#include "tessera/Compiler/Pipelines.h"
#include "tessera/Conversion/Passes.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"
#include "tessera/Dialect/IPU/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"

#include <string>

using namespace mlir;

namespace tessera {

std::optional<Phase> parsePhase(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Phase>>(name)
      .Case("input", Phase::Input)
      .Case("graph", Phase::Graph)
      .Case("training", Phase::Training)
      .Case("partitioned", Phase::Partitioned)
      .Case("linalg", Phase::Linalg)
      .Case("ipu", Phase::Ipu)
      .Case("llvm", Phase::Llvm)
      .Case("executable", Phase::Executable)
      .Default(std::nullopt);
}

llvm::StringRef phaseName(Phase phase) {
  switch (phase) {
  case Phase::Input:
    return "input";
  case Phase::Graph:
    return "graph";
  case Phase::Training:
    return "training";
  case Phase::Partitioned:
    return "partitioned";
  case Phase::Linalg:
    return "linalg";
  case Phase::Ipu:
    return "ipu";
  case Phase::Llvm:
    return "llvm";
  case Phase::Executable:
    return "executable";
  }
  llvm_unreachable("unknown phase");
}

bool isPhaseAvailable(Phase) { return true; }

std::string availablePhaseList() {
  std::string list;
  for (int p = 0; p <= static_cast<int>(Phase::Executable); ++p) {
    if (!isPhaseAvailable(static_cast<Phase>(p)))
      continue;
    if (!list.empty())
      list += ", ";
    list += phaseName(static_cast<Phase>(p)).str();
  }
  return list;
}

void buildGraphPipeline(OpPassManager &pm,
                        const GraphPipelineOptions &options) {
  pm.addNestedPass<func::FuncOp>(graph::createGraphInferShapes());
  pm.addPass(createCanonicalizerPass());
  // Weight layout changes (Gemm's transB) once, at compile time.
  if (options.foldGlobalLayouts)
    pm.addPass(graph::createGraphFoldGlobalLayouts());
  pm.addPass(createCSEPass());
  // Folding leaves globals and constants without users.
  pm.addPass(createSymbolDCEPass());
  if (options.requireStaticShapes)
    pm.addNestedPass<func::FuncOp>(graph::createGraphRequireStaticShapes());
  if (options.precision != "fp32" || !options.partialsType.empty())
    pm.addPass(graph::createGraphPrecision({options.precision, options.partialsType}));
}

void buildTrainingPipeline(OpPassManager &pm,
                           const TrainingPipelineOptions &options) {
  graph::GraphBuildLossOptions loss;
  loss.loss = options.loss;
  loss.output = options.lossOutput;
  loss.labelSmoothing = options.labelSmoothing;
  loss.ignoreIndex = options.ignoreIndex;
  loss.reduction = options.reduction;
  pm.addPass(graph::createGraphBuildLoss(loss));
  // The loss's labels stay f32 at the signature, like the inputs.
  if (options.precision != "fp32" || !options.partialsType.empty())
    pm.addPass(graph::createGraphPrecision({options.precision, options.partialsType}));
  if (!options.lossScaling.empty())
    pm.addPass(graph::createGraphLossScaling({options.lossScaling}));
  graph::GraphAutodiffOptions autodiff;
  autodiff.freeze.assign(options.freeze.begin(), options.freeze.end());
  pm.addPass(graph::createGraphAutodiff(autodiff));
  // Before the update: it reads only gradients and weights.
  graph::GraphRecomputeOptions recompute;
  recompute.mode = options.recompute.empty() ? "none" : options.recompute;
  recompute.targetName = options.targetName;
  recompute.tiles = options.tiles;
  pm.addPass(graph::createGraphRecompute(recompute));
  // After recomputation (a recomputed dropout draws what the forward drew),
  // before the update (which reads the summed gradients).
  pm.addPass(graph::createGraphReplicate(
      {options.replicas, options.accumulationReduction, options.gradientAccumulation}));
  graph::GraphOptimizerUpdateOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.accumulate = options.gradientAccumulation;
  optimizer.accumulationReduction = options.accumulationReduction;
  optimizer.stochasticRounding = options.stochasticRounding;
  optimizer.replicas = options.replicas;
  optimizer.replicaReduction = options.accumulationReduction;
  pm.addPass(graph::createGraphOptimizerUpdate(optimizer));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

bool assignsStages(const StageOptions &options, bool annotated) {
  return !options.pipeline.empty() || !options.layersPerIpu.empty() ||
         !options.blocks.empty() || annotated;
}

void buildStagePipeline(OpPassManager &pm, const StageOptions &options,
                        const TrainingPipelineOptions &training, llvm::StringRef targetName,
                        int64_t numIPUs, int64_t tilesPerIPU) {
  graph::GraphAssignStagesOptions stages;
  stages.pipeline = options.pipeline.empty() ? "manual" : options.pipeline;
  stages.numIPUs = numIPUs;
  stages.layersPerIpu.assign(options.layersPerIpu.begin(), options.layersPerIpu.end());
  stages.blocks.assign(options.blocks.begin(), options.blocks.end());
  stages.targetName = targetName.str();
  stages.tilesPerIPU = tilesPerIPU;
  stages.training = training.enabled;
  stages.pipelined = options.pipelined;
  // Resident per weight byte: the weight, the optimizer's state (its
  // slots) and the gradient accumulator; a gradient itself lives only
  // between the backward pass and the update, as temporaries do.
  int64_t copies = 1;
  if (training.enabled) {
    auto [name, params] = llvm::StringRef(training.optimizer).split(':');
    auto has = [&, params = params](llvm::StringRef key) {
      for (llvm::StringRef kv : llvm::split(params, ',')) {
        auto [k, v] = kv.split('=');
        if (k.trim() == key && v.trim() != "0" && v.trim() != "false" && v.trim() != "0.0")
          return true;
      }
      return false;
    };
    // Vector operations of the update per weight element, as
    // graph-optimizer-update builds it: the step, then per slot of state
    // about three (decay, add, store), Adam's and LAMB's normalisations more.
    int64_t updateOps = 2;
    if (name == "sgd") {
      copies += has("momentum") ? 1 : 0;
      updateOps += has("momentum") ? 3 : 0;
    } else if (name == "rmsprop") {
      copies += 1 + (has("centered") ? 1 : 0) + (has("momentum") ? 1 : 0);
      updateOps += 3 * (copies - 1) + 2; // and a square root, a division
    } else { // adam, adamw, lamb: two moments
      copies += 2 + (has("amsgrad") ? 1 : 0);
      updateOps += 3 * (copies - 1) + 4 + (name == "lamb" ? 4 : 0);
    }
    copies += training.gradientAccumulation > 1 ? 1 : 0;
    stages.updateOpsPerElement = updateOps;
    stages.microBatches = std::max<int64_t>(training.gradientAccumulation, 1);
  }
  stages.weightCopies = copies;
  stages.recompute = training.recompute.empty() ? "none" : training.recompute;
  pm.addPass(graph::createGraphAssignStages(stages));
}

void buildLinalgPipeline(OpPassManager &pm) {
  // A training step's state becomes arguments and results (no-op for
  // inference): everything after sees a pure function.
  pm.addPass(graph::createGraphExternalizeState());
  pm.addPass(createConvertGraphToLinalg());
  pm.addPass(createFoldEmptyTensors());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

} // namespace tessera

namespace tessera {
void buildIPUPipeline(OpPassManager &pm, const IPUPipelineOptions &options) {
  pm.addPass(ipu::createIPUFuseElementwise());
  pm.addPass(ipu::createIPUPrepareForMapping());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  ipu::IPUPlanTilesOptions plan;
  plan.availableMemoryProportion = options.availableMemoryProportion;
  plan.explain = options.explainPlans;
  pm.addPass(ipu::createIPUPlanTiles(plan));
  pm.addPass(ipu::createIPUMapTiles());
  if (options.pipelineStages > 1)
    pm.addPass(ipu::createIPUStashActivations({options.pipelineStages}));
  pm.addPass(createSymbolDCEPass());
  ipu::IPUAllocateMemoryOptions allocate;
  allocate.reportDir = options.reportDir;
  allocate.reportWhenItFits = options.reportWhenItFits;
  pm.addPass(ipu::createIPUAllocateMemory(allocate));
}
} // namespace tessera
