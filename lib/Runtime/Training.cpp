//===- Training.cpp - feed a training executable from a data set ---------===//

#include "tessera/Runtime/Training.h"
#include "tessera/Support/Error.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <cmath>
#include <cstring>

namespace tessera::runtime {

namespace {
/// Samples [first, first + count) of `t` along dimension 0.
Tensor sliceSamples(const Tensor &t, int64_t first, int64_t count) {
  Tensor s;
  s.dtype = t.dtype;
  s.shape = t.shape;
  s.shape[0] = count;
  size_t row = t.shape[0] ? t.data.size() / t.shape[0] : 0;
  s.data.assign(t.data.begin() + first * row, t.data.begin() + (first + count) * row);
  return s;
}

double elementAsDouble(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case DType::F32: {
    float f;
    std::memcpy(&f, t.data.data() + 4 * i, 4);
    return f;
  }
  case DType::F64: {
    double d;
    std::memcpy(&d, t.data.data() + 8 * i, 8);
    return d;
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, t.data.data() + 8 * i, 8);
    return v;
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, t.data.data() + 4 * i, 4);
    return v;
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t bits;
    std::memcpy(&bits, t.data.data() + 2 * i, 2);
    const llvm::fltSemantics &sem = t.dtype == DType::F16 ? llvm::APFloat::IEEEhalf()
                                                          : llvm::APFloat::BFloat();
    return llvm::APFloat(sem, llvm::APInt(16, bits)).convertToDouble();
  }
  default:
    return std::nan("");
  }
}
} // namespace

int64_t samplesPerRun(const ExecutableMetadata &metadata) {
  int64_t batch = metadata.inputs.empty() || metadata.inputs[0].shape.empty()
                      ? 1
                      : metadata.inputs[0].shape[0];
  return batch * iterationsPerRun(metadata) * metadata.localReplicas();
}

std::string describeBatch(const ExecutableMetadata &metadata) {
  int64_t micro = samplesPerRun(metadata) / iterationsPerRun(metadata) /
                  metadata.localReplicas();
  std::string text = "micro-batch " + std::to_string(micro) + " x gradient accumulation " +
                     std::to_string(metadata.gradientAccumulation) + " x device iterations " +
                     std::to_string(metadata.deviceIterations) + " x replicas " +
                     std::to_string(metadata.localReplicas());
  if (metadata.share.count)
    text += " (replicas " + std::to_string(metadata.share.first) + " to " +
            std::to_string(metadata.share.first + metadata.share.count - 1) + " of " +
            std::to_string(metadata.replicas) + ": instance " +
            std::to_string(metadata.share.instance) + " of " +
            std::to_string(metadata.share.instances) + ")";
  return text;
}

llvm::Expected<TrainingData> makeTrainingData(const ExecutableMetadata &metadata,
                                              std::map<std::string, Tensor> arrays) {
  if (metadata.state.empty() || metadata.loss.empty())
    return fail("the executable is not a training step (compile it with --train)");
  TrainingData data;
  data.samples = -1;
  for (const TensorInfo &in : metadata.inputs) {
    auto it = arrays.find(in.name);
    if (it == arrays.end())
      return fail("the training data has no array '" + in.name + "' (" +
                  typeString(in.shape, in.dtype) + " per micro-batch; labels go under 'labels')");
    Tensor &t = it->second;
    bool sameSample = t.shape.size() == in.shape.size() && !t.shape.empty() &&
                      std::equal(t.shape.begin() + 1, t.shape.end(), in.shape.begin() + 1);
    if (!sameSample || t.dtype != in.dtype)
      return fail("training array '" + in.name + "' is " + t.typeString() +
                  "; each sample must be " +
                  typeString(std::vector<int64_t>(in.shape.begin() + 1, in.shape.end()),
                             in.dtype) +
                  " (samples along dimension 0)");
    if (data.samples >= 0 && t.shape[0] != data.samples)
      return fail("training array '" + in.name + "' has " + llvm::Twine(t.shape[0]) +
                  " samples but the others " + llvm::Twine(data.samples));
    data.samples = t.shape[0];
    data.inputs.push_back(std::move(t));
    arrays.erase(it);
  }
  for (const auto &[name, t] : arrays)
    return fail("the training data's array '" + name + "' is not an input of the model");
  // Every instance reads the whole data set and keeps its replicas' rows:
  // the same global order as one process running every replica.
  int64_t perRun = samplesPerRun(metadata) / metadata.localReplicas() * metadata.replicas;
  if (data.samples <= 0 || data.samples % perRun != 0)
    return fail("the training data has " + llvm::Twine(data.samples) +
                " samples, not a multiple of the " + llvm::Twine(perRun) +
                " each run takes (" + describeBatch(metadata) +
                "); drop the remainder or change --micro-batch-size, "
                "--gradient-accumulation, --device-iterations or --replicas");
  if (metadata.share.count) {
    for (auto [t, info] : llvm::zip(data.inputs, metadata.inputs))
      t = localBatches(metadata, info, t);
    data.samples = data.inputs.front().shape[0];
  }
  return data;
}

llvm::Expected<RunStats> trainOnRun(Runner &runner, const ExecutableMetadata &metadata,
                                    const TrainingData &data, int64_t index) {
  int64_t perRun = samplesPerRun(metadata);
  std::vector<Tensor> batch;
  for (const Tensor &t : data.inputs)
    batch.push_back(sliceSamples(t, index * perRun, perRun));
  auto outputs = runner.run(batch);
  if (!outputs)
    return outputs.takeError();
  RunStats stats;
  // The loss: one value per returned iteration (micro-batch), or their sum.
  bool summed = metadata.outputMode == ExecutableMetadata::OutputMode::Sum;
  for (auto [info, t] : llvm::zip(metadata.outputs, *outputs)) {
    if (info.name != metadata.loss)
      continue;
    double sum = 0;
    for (int64_t i = 0; i < t.numElements(); ++i)
      sum += elementAsDouble(t, i);
    int64_t count =
        summed ? iterationsPerRun(metadata) * metadata.localReplicas() : t.numElements();
    stats.loss = count ? sum / count : 0;
  }
  // Accuracy: an N x C float output of the returned iterations against
  // those iterations' integer labels.
  auto labels = llvm::find_if(metadata.inputs, [](const TensorInfo &t) {
    return t.name == "labels";
  });
  if (summed || labels == metadata.inputs.end() ||
      (labels->dtype != DType::I64 && labels->dtype != DType::I32))
    return stats;
  const Tensor &y = batch[labels - metadata.inputs.begin()];
  // An iteration's rows are every replica's micro-batch.
  int64_t micro = (labels->shape.empty() ? 1 : labels->shape[0]) * metadata.localReplicas();
  std::vector<int64_t> rows; // label row of each returned sample
  for (int64_t it : returnedIterations(metadata))
    for (int64_t n = 0; n < micro; ++n)
      rows.push_back(it * micro + n);
  for (auto [info, t] : llvm::zip(metadata.outputs, *outputs)) {
    if (info.name == metadata.loss || t.shape.size() != 2 ||
        t.shape[0] != static_cast<int64_t>(rows.size()) ||
        (t.dtype != DType::F32 && t.dtype != DType::F64))
      continue;
    int64_t classes = t.shape[1];
    for (int64_t n = 0; n < t.shape[0]; ++n) {
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (elementAsDouble(t, n * classes + c) > elementAsDouble(t, n * classes + best))
          best = c;
      stats.correct += best == static_cast<int64_t>(elementAsDouble(y, rows[n]));
    }
    stats.labelled = t.shape[0];
    break;
  }
  return stats;
}

std::optional<size_t> findState(const ExecutableMetadata &metadata, llvm::StringRef name) {
  for (size_t i = 0; i < metadata.state.size(); ++i)
    if (metadata.state[i].name == name)
      return i;
  return std::nullopt;
}

llvm::Error setRandomSeed(Runner &runner, const ExecutableMetadata &metadata,
                          int64_t seed) {
  std::optional<size_t> index = findState(metadata, "rng.seed");
  if (!index)
    return llvm::Error::success();
  return runner.writeState(*index, Tensor::scalar(seed));
}

llvm::Error setLearningRate(Runner &runner, const ExecutableMetadata &metadata,
                            double lr) {
  std::optional<size_t> index = findState(metadata, "optimizer.lr");
  if (!index)
    return fail("the executable has no learning rate to set");
  if (!(lr > 0) || !std::isfinite(lr))
    return fail("the learning rate must be a positive number, got " + std::to_string(lr));
  return runner.writeState(*index, Tensor::scalar(static_cast<float>(lr)));
}

std::vector<std::pair<std::string, Tensor>>
trainedWeights(Runner &runner, const ExecutableMetadata &metadata) {
  std::vector<Tensor> state = runner.readState();
  std::vector<std::pair<std::string, Tensor>> trained;
  for (size_t i = 0; i < state.size(); ++i) {
    const StateInfo &s = metadata.state[i];
    // The random generator's counter is a buffer of the program, not of
    // the model.
    bool modelState = s.role == StateInfo::Role::Parameter ||
                      (s.role == StateInfo::Role::Buffer && s.name != "rng.counter");
    if (modelState)
      trained.emplace_back(s.name, std::move(state[i]));
  }
  return trained;
}

llvm::Error saveState(Runner &runner, const ExecutableMetadata &metadata,
                      llvm::StringRef path, int64_t runsDone) {
  std::vector<Tensor> state = runner.readState();
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < state.size(); ++i)
    if (metadata.state[i].role != StateInfo::Role::Hyperparameter &&
        metadata.state[i].role != StateInfo::Role::ReplicaIndex)
      named.emplace_back(metadata.state[i].name, std::move(state[i]));
  if (runsDone >= 0)
    named.emplace_back(kRunsDoneArray, Tensor::scalar(runsDone));
  return writeNpz(path, named);
}

llvm::Error loadState(Runner &runner, const ExecutableMetadata &metadata,
                      llvm::StringRef path, int64_t *runsDone) {
  auto arrays = readNpz(path);
  if (!arrays)
    return arrays.takeError();
  if (runsDone)
    *runsDone = -1;
  for (const auto &[name, t] : *arrays) {
    if (name == kRunsDoneArray) {
      if (t.dtype != DType::I64 || t.numElements() != 1)
        return fail("'" + path + "': '" + name + "' must be one i64, got " + t.typeString());
      if (runsDone)
        std::memcpy(runsDone, t.data.data(), sizeof *runsDone);
      continue;
    }
    std::optional<size_t> index = findState(metadata, name);
    if (!index)
      return fail("'" + path + "' holds '" + name +
                  "', which is not a weight or optimizer state of the executable");
    if (auto err = runner.writeState(*index, t))
      return fail("'" + path + "': " + llvm::toString(std::move(err)));
  }
  return llvm::Error::success();
}

} // namespace tessera::runtime
