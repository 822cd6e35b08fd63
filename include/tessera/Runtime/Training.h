//===- Training.h - feed a training executable from a data set --*- C++ -*-===//
//
// The loop tessera-run --train-data and the Python API share: a data set of
// one array per model input plus `labels`, split along dimension 0 into host
// calls of (micro-batch x gradient accumulation x device iterations) samples; each call runs the
// training step and reports the mean loss and, for class labels, how many
// predictions were right. Checkpoints are .npz files of the state tensors
// keyed by the model's own parameter names. No MLIR here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAINING_H
#define TESSERA_RUNTIME_TRAINING_H

#include "tessera/Runtime/Runner.h"

#include <map>
#include <optional>

namespace tessera::runtime {

/// A data set in the executable's input order, whole (every sample).
struct TrainingData {
  std::vector<Tensor> inputs;
  int64_t samples = 0;
};

/// Samples one run consumes: the compiled micro-batch times the gradient
/// accumulation times the device iterations.
int64_t samplesPerRun(const ExecutableMetadata &metadata);

/// "micro-batch 8 x gradient accumulation 4 x device iterations 2": the
/// factors of samplesPerRun, as PopTorch prints its combined batch.
std::string describeBatch(const ExecutableMetadata &metadata);

/// Checks `arrays` (by input name) against a training executable: every
/// input present with the compiled shape past dimension 0, the same number
/// of samples in each, and that number a multiple of samplesPerRun (the
/// error names each factor).
llvm::Expected<TrainingData> makeTrainingData(const ExecutableMetadata &metadata,
                                              std::map<std::string, Tensor> arrays);

struct RunStats {
  double loss = 0;     ///< mean over the micro-batches the run returns
  int64_t correct = 0; ///< class predictions equal to their label
  int64_t labelled = 0; ///< samples with a class label (0: not classes)
};

/// Runs the training step on run `index`'s samples.
llvm::Expected<RunStats> trainOnRun(Runner &runner, const ExecutableMetadata &metadata,
                                    const TrainingData &data, int64_t index);

/// The index of the state tensor called `name`, if any.
std::optional<size_t> findState(const ExecutableMetadata &metadata, llvm::StringRef name);

/// Seeds the executable's random generator (its `rng.seed` state, which
/// dropout and other random ops read): the same seed draws the same numbers
/// on the IPU model and the host reference. Nothing to do (success) for an
/// executable without random ops.
llvm::Error setRandomSeed(Runner &runner, const ExecutableMetadata &metadata,
                          int64_t seed);

/// Sets the learning rate (the `optimizer.lr` state) without a recompile;
/// an executable without one, or a rate that is not positive, is an error.
llvm::Error setLearningRate(Runner &runner, const ExecutableMetadata &metadata,
                            double lr);

/// The model's own trained tensors, by initializer or parameter name: the
/// parameters and buffers (running statistics), not optimizer state,
/// hyperparameters or the program's random counter. What --export-onnx
/// writes back into the model.
std::vector<std::pair<std::string, Tensor>>
trainedWeights(Runner &runner, const ExecutableMetadata &metadata);

/// The array of a checkpoint (saveState with `runsDone`) that says how many
/// runs of the data set had trained it: where a resumed run starts.
constexpr const char *kRunsDoneArray = "checkpoint.runs_done";

/// Writes parameters and optimizer state (not hyperparameters) to `path`
/// (.npz, atomically: a reader sees the old file or the new one, whole),
/// with kRunsDoneArray when `runsDone` >= 0.
llvm::Error saveState(Runner &runner, const ExecutableMetadata &metadata,
                      llvm::StringRef path, int64_t runsDone = -1);
/// Loads every array of `path` into the state tensor of its name; a name
/// the executable does not have, or a wrong shape, is an error. A
/// checkpoint's kRunsDoneArray goes to `runsDone` (-1 without one).
llvm::Error loadState(Runner &runner, const ExecutableMetadata &metadata,
                      llvm::StringRef path, int64_t *runsDone = nullptr);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TRAINING_H
