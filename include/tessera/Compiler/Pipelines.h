//===- Pipelines.h - Tessera's pass pipelines and phases --------*- C++ -*-===//
//
// Pipelines are library functions shared by every tool: tessera-compile runs
// them phase by phase, tessera-opt exposes them as --tessera-*-pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COMPILER_PIPELINES_H
#define TESSERA_COMPILER_PIPELINES_H

#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace tessera {

/// The phases of tessera-compile, in order. `--compile-to=<phase>` stops
/// after the named one; its output can be fed back in.
enum class Phase {
  Input,       ///< as imported: graph ops, no optimisation
  Graph,       ///< shapes inferred, canonicalised, constants folded
  Partitioned, ///< every op placed in a pipeline stage on an IPU
  Training,    ///< loss, autodiff, optimizer (training models only)
  Linalg,      ///< lowered to linalg/tensor/arith/math
  Ipu,         ///< tile-mapped ipu dialect: the machine program
  Llvm,        ///< native code in the LLVM dialect: the host reference
               ///< code and the vertex kernels
  Executable,  ///< a .tess file
};

std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase phase);
/// True if this build implements the phase.
bool isPhaseAvailable(Phase phase);
/// "input, graph" - the phases a user can ask for today.
std::string availablePhaseList();

struct GraphPipelineOptions {
  /// Fail unless every shape is static (the IPU needs them); off only for
  /// experiments on symbolic models.
  bool requireStaticShapes = true;
  /// Move weights' transposes to compile time. Off when training: a trained
  /// weight changes every step and is saved in its original layout.
  bool foldGlobalLayouts = true;
  /// graph-precision's: fp32, fp16.32 or fp16.16 (--precision), and the
  /// partials type, float or half (--partials-type; empty: the precision's).
  /// A training step applies them after its loss is built, before the
  /// gradients.
  std::string precision = "fp32";
  std::string partialsType;
};

/// What makes a training step (tessera-compile --train): PopTorch's
/// trainingModel as pass options.
struct TrainingPipelineOptions {
  bool enabled = false;
  /// graph-build-loss: the loss, the output it reads (empty: the first), its
  /// options.
  std::string loss = "cross-entropy";
  std::string lossOutput;
  double labelSmoothing = 0.0;
  int64_t ignoreIndex = -100;
  std::string reduction = "mean";
  /// graph-optimizer-update's spec, "adamw:lr=1e-3,weight-decay=0.01".
  std::string optimizer = "sgd";
  /// Micro-batches per weight update, and how their gradients combine
  /// ("mean": as one batch G times larger; "sum").
  int64_t gradientAccumulation = 1;
  /// Replicas whose gradients are summed (graph-replicate); its reduction is
  /// accumulationReduction's, as PopTorch's accumulationAndReplicationReductionType
  /// governs both.
  int64_t replicas = 1;
  std::string accumulationReduction = "mean";
  /// Weights (global names) that stay fixed.
  std::vector<std::string> freeze;
  /// graph-recompute's mode: none (also when empty), checkpoint-every-layer,
  /// stage-inputs or auto. Unlike PopART, not stage-inputs by default in
  /// pipelines: the IPU model runs a pipeline's micro-batches in turn and holds
  /// no stash per micro-batch in flight, so recomputing would cost cycles
  /// and save nothing there (BERT-base over 4 IPUs: +0.8% memory).
  std::string recompute;
  /// fp16 weights' updates round stochastically (--stochastic-rounding).
  bool stochasticRounding = false;
  /// graph-precision's, applied between the loss and the gradients.
  std::string precision = "fp32";
  std::string partialsType;
  /// graph-loss-scaling's scale: empty (none), a number, or auto.
  std::string lossScaling;
  /// The target and the tiles the step spreads over (recompute=auto's
  /// per-tile estimate).
  std::string targetName = "ipu2";
  int64_t tiles = 1472;
};

/// input -> graph: shape inference, canonicalisation (folding constant shape
/// computations), weight layout folding, CSE, and removal of unused globals.
void buildGraphPipeline(mlir::OpPassManager &pm,
                        const GraphPipelineOptions &options);

/// graph -> training: the loss, its gradients and the optimizer's update of
/// every trainable weight, as graph ops and ml_program loads and stores. A
/// module that already has its optimizer (a training-phase file fed back in)
/// is left as it is.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// How ops are placed on IPUs (tessera-compile --pipeline, --layers-per-ipu,
/// --execution): graph-assign-stages' options.
struct StageOptions {
  /// "manual" (annotations or layersPerIpu), "auto", or empty: manual when
  /// layersPerIpu is given or the model carries annotations, otherwise no
  /// stages (the IPUs' tiles form one pool).
  std::string pipeline;
  std::vector<int64_t> layersPerIpu;
  /// PopTorch's BeginBlock by module path: "PATH=IPU[:STAGE]".
  std::vector<std::string> blocks;
  /// Stages overlap (pipelined) or run in turn (sharded).
  bool pipelined = false;
  /// Micro-batches the pipeline gets at a time: the gradient accumulation
  /// (training) or the device iterations (inference); at least the stages.
  int64_t microBatches = 1;
};

/// Whether stages are assigned for `options` on a module whose ops carry
/// annotations or not.
bool assignsStages(const StageOptions &options, bool annotated);

/// graph -> partitioned: graph-assign-stages. The placement is decided on
/// the forward graph; the training passes place each gradient and update
/// where its forward op runs.
void buildStagePipeline(mlir::OpPassManager &pm, const StageOptions &options,
                        const TrainingPipelineOptions &training, llvm::StringRef targetName,
                        int64_t numIPUs, int64_t tilesPerIPU);

/// graph -> linalg: every graph op to linalg/tensor/arith/math, cleaned up.
void buildLinalgPipeline(mlir::OpPassManager &pm);

struct IPUPipelineOptions {
  /// PopTorch's availableMemoryProportion: the share of each tile's memory
  /// a vertex's output and receive buffers may take.
  double availableMemoryProportion = 0.6;
  /// Where ipu-allocate-memory writes the report page of a program that
  /// does not fit (none if empty).
  std::string reportDir;
  /// Whether it also writes it when the program fits (an executable's
  /// report, written after, has more).
  bool reportWhenItFits = true;
  /// ipu-plan-tiles' `explain`: a remark per op on its plan.
  bool explainPlans = false;
  /// Pipeline stages a training step's activations are stashed for
  /// (ipu-stash-activations; 1: none).
  int64_t pipelineStages = 1;
};

/// linalg -> ipu: prepare, map tiles, allocate memory. The module must carry
/// an #ipu.target.
void buildIPUPipeline(mlir::OpPassManager &pm, const IPUPipelineOptions &options);

} // namespace tessera

#endif // TESSERA_COMPILER_PIPELINES_H
