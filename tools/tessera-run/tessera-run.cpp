//===- tessera-run.cpp - execute a .tess executable ----------------------===//
//
// tessera-run model.tess --input name=x.npy ... [--output out.npz]
//                        [--iterations K] [--warmup W] [--profile DIR]
//                        [--reference]
// Inputs come from .npy, .npz (every array, by name) or ONNX TensorProto .pb
// files. By default the executable's tile-mapped program runs on the IPU
// model, which also estimates the cycles the target would take; --reference
// runs the host reference code (the graph without tile decomposition).
//
//===----------------------------------------------------------------------===//

#include "tessera/Compiler/Compiler.h"
#include "tessera/Report/Report.h"
#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/FileUtils.h"
#include "tessera/Runtime/HostRunner.h"
#include "tessera/Runtime/IPUModel.h"
#include "tessera/Runtime/Instances.h"
#include "tessera/Runtime/ONNXExport.h"
#include "tessera/Runtime/Tensor.h"
#include "tessera/Runtime/Training.h"
#include "tessera/Target/IPUTarget.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/WithColor.h"

#include <onnx/onnx_pb.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

namespace cl = llvm::cl;
using namespace tessera::runtime;

namespace {

cl::OptionCategory category("tessera-run options");
cl::opt<std::string> executablePath(cl::Positional, cl::desc("<model.tess>"),
                                    cl::Required, cl::cat(category));
cl::list<std::string> inputSpecs(
    "input",
    cl::desc("An input: name=file.npy, name=file.pb, file.npz (arrays by "
             "name), or file.npy for a model with one input"),
    cl::value_desc("[name=]file"), cl::cat(category));
cl::opt<std::string> outputPath("output", cl::desc("Write outputs to a .npz"),
                                cl::value_desc("file.npz"), cl::cat(category));
cl::opt<unsigned> iterations("iterations", cl::desc("Run this many times"),
                             cl::init(1), cl::cat(category));
cl::opt<unsigned> warmup("warmup",
                         cl::desc("Run this many times first, untimed (tile memory's "
                                  "pages touched, caches filled) and left out of the "
                                  "profile's host times"),
                         cl::init(0), cl::cat(category));
cl::opt<bool> reference("reference",
                        cl::desc("Run the host reference code (the graph "
                                 "without tile decomposition)"),
                        cl::init(false), cl::cat(category));
cl::opt<std::string> profileDir(
    "profile",
    cl::desc("Write the IPU model's profile (DIR/profile.json) and timeline "
             "(DIR/trace.json, Chrome trace format for Perfetto)"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string> reportDir(
    "report",
    cl::desc("Write the report page (DIR/report.html, its data in DIR/report.json): the "
             "executable's memory, liveness and steps, with the IPU model's host time per "
             "step next to the estimate"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<int64_t> randomSeed(
    "seed",
    cl::desc("Seed of the random generator that dropout and other random ops "
             "draw from (PopTorch's randomSeed; default 0): the same seed gives "
             "the same run"),
    cl::init(0), cl::cat(category));
cl::OptionCategory trainingCategory("Training (executables compiled with --train)");
cl::opt<std::string> trainData(
    "train-data",
    cl::desc("Train on this data set: one array per model input, by name, and "
             "the targets under 'labels'; dimension 0 indexes samples"),
    cl::value_desc("data.npz"), cl::cat(trainingCategory));
cl::opt<unsigned> epochs("epochs", cl::desc("Passes over the training data"),
                         cl::init(0), cl::cat(trainingCategory));
cl::opt<unsigned> steps("steps",
                        cl::desc("Weight updates to run (instead of --epochs)"),
                        cl::init(0), cl::cat(trainingCategory));
cl::opt<double> learningRate("lr",
                             cl::desc("Learning rate (no recompile; default: as compiled)"),
                             cl::init(0), cl::cat(trainingCategory));
cl::opt<std::string> exportONNX(
    "export-onnx",
    cl::desc("After training, write the ONNX model the executable was compiled from "
             "with its initializers replaced by the trained weights and buffers"),
    cl::value_desc("trained.onnx"), cl::cat(trainingCategory));
cl::opt<std::string> saveWeights(
    "save-weights",
    cl::desc("Write the trained weights and optimizer state here, by parameter name"),
    cl::value_desc("weights.npz"), cl::cat(trainingCategory));
cl::opt<std::string> loadWeights(
    "load-weights",
    cl::desc("Start from these weights (and optimizer state), e.g. a --save-weights file"),
    cl::value_desc("weights.npz"), cl::cat(trainingCategory));

cl::opt<unsigned> checkpointEvery(
    "checkpoint-every",
    cl::desc("Every N runs, write --save-weights (atomically: a reader sees the previous "
             "checkpoint or this one, whole) with the number of runs done, which --resume "
             "starts from"),
    cl::value_desc("N"), cl::init(0), cl::cat(trainingCategory));
cl::opt<std::string> resumeFrom(
    "resume",
    cl::desc("Start from this checkpoint (--save-weights with --checkpoint-every): its "
             "weights and optimizer state, and the runs it had done are not run again"),
    cl::value_desc("checkpoint.npz"), cl::cat(trainingCategory));

cl::opt<unsigned> threads("host-threads",
                          cl::desc("Host threads for the IPU model (0: all; at most 1024)"),
                          cl::init(0), cl::cat(category));

int error(const llvm::Twine &msg) {
  // One write: tessera-launch's instances share the terminal.
  std::string line;
  llvm::raw_string_ostream os(line);
  os.enable_colors(llvm::errs().has_colors());
  llvm::WithColor::error(os, "tessera-run") << msg << "\n";
  llvm::errs() << line;
  return 1;
}

llvm::Expected<Tensor> readTensorProto(llvm::StringRef path) {
  auto file = readRegularFile(path);
  if (!file)
    return file.takeError();
  onnx::TensorProto proto;
  if (!proto.ParseFromArray((*file)->getBufferStart(), (*file)->getBufferSize()))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'" + path + "' is not an ONNX TensorProto");
  static const std::map<int, DType> types = {
      {onnx::TensorProto::FLOAT, DType::F32},  {onnx::TensorProto::DOUBLE, DType::F64},
      {onnx::TensorProto::FLOAT16, DType::F16}, {onnx::TensorProto::INT64, DType::I64},
      {onnx::TensorProto::INT32, DType::I32},  {onnx::TensorProto::INT8, DType::I8},
      {onnx::TensorProto::UINT8, DType::U8},   {onnx::TensorProto::BOOL, DType::Bool},
      {onnx::TensorProto::INT16, DType::I16},  {onnx::TensorProto::UINT16, DType::U16},
      {onnx::TensorProto::UINT32, DType::U32}, {onnx::TensorProto::UINT64, DType::U64},
      {onnx::TensorProto::BFLOAT16, DType::BF16}};
  auto it = types.find(proto.data_type());
  if (it == types.end())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'" + path + "' has an unsupported element type");
  Tensor t;
  t.dtype = it->second;
  t.shape.assign(proto.dims().begin(), proto.dims().end());
  size_t bytes = t.numElements() * dtypeSize(t.dtype);
  // Typed fields hold one element per (wider) entry: keep its low bytes.
  auto lowBytesOf = [&](const auto &entries) {
    size_t width = dtypeSize(t.dtype);
    t.data.resize(bytes);
    for (int i = 0; i < entries.size(); ++i) {
      auto v = entries.Get(i);
      std::memcpy(t.data.data() + i * width, &v, width);
    }
  };
  if (proto.has_raw_data()) {
    t.data.assign(proto.raw_data().begin(), proto.raw_data().end());
  } else if (proto.float_data_size()) {
    t.data.resize(bytes);
    std::memcpy(t.data.data(), proto.float_data().data(),
                std::min<size_t>(bytes, proto.float_data_size() * 4));
  } else if (proto.double_data_size()) {
    t.data.resize(bytes);
    std::memcpy(t.data.data(), proto.double_data().data(),
                std::min<size_t>(bytes, proto.double_data_size() * 8));
  } else if (proto.int64_data_size()) {
    t.data.resize(bytes);
    std::memcpy(t.data.data(), proto.int64_data().data(),
                std::min<size_t>(bytes, proto.int64_data_size() * 8));
  } else if (proto.uint64_data_size() == static_cast<int>(t.numElements()) &&
             proto.uint64_data_size()) {
    lowBytesOf(proto.uint64_data()); // UINT32 and UINT64, one per entry
  } else if (proto.int32_data_size() == static_cast<int>(t.numElements()) &&
             proto.int32_data_size()) {
    lowBytesOf(proto.int32_data()); // types of 32 bits or less, one per entry
  }
  if (t.data.size() != bytes)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'" + path + "' holds " +
                                       llvm::Twine(t.data.size()) +
                                       " bytes; its shape needs " + llvm::Twine(bytes));
  return t;
}

llvm::Expected<Tensor> readTensorFile(llvm::StringRef path) {
  if (path.ends_with(".pb"))
    return readTensorProto(path);
  return readNpy(path);
}

/// min / max / mean and the first values, for a quick look at an output.
void summarize(const TensorInfo &info, const Tensor &t) {
  llvm::outs() << "  " << info.name << ": " << t.typeString();
  if (t.numElements() == 0) {
    llvm::outs() << "  (no elements)\n";
    return;
  }
  if (t.dtype != DType::F32 && t.dtype != DType::I64 && t.dtype != DType::I32) {
    llvm::outs() << "\n";
    return;
  }
  auto value = [&](int64_t i) -> double {
    if (t.dtype == DType::F32)
      return reinterpret_cast<const float *>(t.data.data())[i];
    if (t.dtype == DType::I64)
      return reinterpret_cast<const int64_t *>(t.data.data())[i];
    return reinterpret_cast<const int32_t *>(t.data.data())[i];
  };
  int64_t n = t.numElements();
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, value(i));
    hi = std::max(hi, value(i));
    sum += value(i);
  }
  llvm::outs() << llvm::format("  min %.6g  max %.6g  mean %.6g  [", lo, hi,
                               n ? sum / n : 0.0);
  for (int64_t i = 0; i < std::min<int64_t>(n, 5); ++i)
    llvm::outs() << (i ? ", " : "") << llvm::format("%.6g", value(i));
  llvm::outs() << (n > 5 ? ", ...]\n" : "]\n");
}


/// Indented for reading, or compact for the (large) trace.
llvm::Error writeJSON(llvm::StringRef dir, llvm::StringRef name, llvm::json::Value v,
                      bool indent = true) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  std::string text;
  llvm::raw_string_ostream os(text);
  if (indent)
    os << llvm::formatv("{0:2}", v) << "\n";
  else
    os << v << "\n";
  return writeFileAtomically(path, text);
}

llvm::Error makeProfileDir() {
  if (std::error_code ec = llvm::sys::fs::create_directories(profileDir))
    return llvm::createStringError(ec, "cannot create the profile directory '" +
                                           profileDir + "': " + ec.message());
  return llvm::Error::success();
}

/// The IPU model could not be created: when the program does not fit, the
/// profile still says where memory went.
void writeFailureProfile(const ExecutableMetadata &meta, const std::string &message) {
  llvm::json::Object profile{{"error", message}};
  if (meta.program) {
    auto target = tessera::target::makeTarget(
        meta.target, meta.numIPUs,
        meta.tilesPerIPU ? std::optional<int64_t>(meta.tilesPerIPU) : std::nullopt);
    if (target) {
      profile["target"] = target->name;
      OutOfMemory report;
      auto plan = planMemory(*meta.program, target->totalTiles(), target->bytesPerTile,
                             &report);
      if (!plan) {
        llvm::consumeError(plan.takeError());
        if (report.available)
          profile["out_of_memory"] = report.toJSON();
      }
    } else {
      llvm::consumeError(target.takeError());
    }
  }
  if (auto err = makeProfileDir())
    llvm::consumeError(std::move(err));
  else if (auto err = writeJSON(profileDir, "profile.json", std::move(profile)))
    llvm::consumeError(std::move(err));
}

/// --report: the executable's report, with the run's profile (or, when
/// the IPU model could not be created, with `failure`'s out-of-memory
/// report).
llvm::Error writeRunReport(const ExecutableMetadata &meta, const IPUModel *model,
                           const std::string &failure = "") {
  if (!meta.program)
    return llvm::createStringError("the executable has no machine program to report on");
  tessera::report::ReportSource source;
  source.program = &*meta.program;
  source.metadata = &meta;
  source.source = meta.source.empty() ? executablePath.getValue() : meta.source;
  std::optional<llvm::json::Value> profile;
  if (model) {
    source.target = model->target();
    profile = model->profileJSON();
    source.execution = &*profile;
  } else {
    auto target = tessera::target::makeTarget(meta.target, meta.numIPUs, meta.tilesPerIPU);
    if (!target)
      return target.takeError();
    source.target = *target;
    source.error = failure;
  }
  auto data = tessera::report::buildReport(source);
  if (!data)
    return data.takeError();
  if (auto err = tessera::report::writeReport(reportDir, *data))
    return err;
  llvm::outs() << "report written to " << reportDir << "/" << tessera::report::kReportPage
               << "\n";
  return llvm::Error::success();
}

} // namespace

/// Whether this process writes the files a command line names: a single
/// process does; of tessera-launch's instances, instance 0 alone.
/// (By the launch, not the executable's share: every instance of a launch
/// runs a one-replica executable whole, and instance 0 alone writes.)
int64_t thisInstance = 0;
bool writesFiles() { return thisInstance == 0; }

/// --train-data: the training loop over a data set, one line per run.
int train(const Executable &exe) {
  const ExecutableMetadata &meta = exe.metadata();
  if (checkpointEvery && saveWeights.empty())
    return error("--checkpoint-every writes --save-weights: name the checkpoint file");
  if (!resumeFrom.empty() && !loadWeights.empty())
    return error("--resume and --load-weights both give the starting weights: use one");
  if ((epochs == 0) == (steps == 0))
    return error("give the length of training with --epochs E or --steps S (one of them)");
  if (!inputSpecs.empty() || !outputPath.empty() || !profileDir.empty())
    return error("--input, --output and --profile do not go with --train-data");
  if (!reportDir.empty())
    return error("--report does not go with --train-data: a training step's report comes "
                 "from its executable (tessera-report " +
                 executablePath.getValue() +
                 " -o DIR) or from one profiled run (--input ... --report DIR)");
  auto arrays = readNpz(trainData);
  if (!arrays)
    return error(llvm::toString(arrays.takeError()));
  auto data = makeTrainingData(meta, std::move(*arrays));
  if (!data)
    return error(llvm::toString(data.takeError()));
  std::unique_ptr<Runner> runner;
  if (reference) {
    auto created = HostRunner::create(exe, tessera::compileHostReference);
    if (!created)
      return error(llvm::toString(created.takeError()));
    runner = std::move(*created);
  } else {
    auto created = IPUModel::create(exe, threads);
    if (!created)
      return error(llvm::toString(created.takeError()));
    runner = std::move(*created);
  }
  if (!loadWeights.empty())
    if (auto err = loadState(*runner, meta, loadWeights))
      return error(llvm::toString(std::move(err)));
  int64_t runsDone = 0;
  if (!resumeFrom.empty()) {
    if (auto err = loadState(*runner, meta, resumeFrom, &runsDone))
      return error(llvm::toString(std::move(err)));
    if (runsDone < 0)
      return error("--resume: '" + resumeFrom +
                   "' records no runs done: it is not a checkpoint of --checkpoint-every "
                   "(start from its weights with --load-weights)");
  }
  // Fail before training, not after, when the export cannot happen.
  if (!exportONNX.empty()) {
    if (!llvm::sys::fs::exists(meta.source))
      return error("--export-onnx rewrites the model the executable was compiled from, '" +
                   meta.source + "', which is not found here (run from the directory "
                   "you compiled in)");
    if (auto err = checkONNXExportSource(meta.source))
      return error("--export-onnx: " + llvm::toString(std::move(err)));
  }
  if (randomSeed.getNumOccurrences())
    if (auto err = setRandomSeed(*runner, meta, randomSeed))
      return error(llvm::toString(std::move(err)));
  if (learningRate.getNumOccurrences())
    if (auto err = setLearningRate(*runner, meta, learningRate))
      return error("--lr: " + llvm::toString(std::move(err)));
  int64_t perRun = samplesPerRun(meta);
  int64_t runsPerEpoch = data->samples / perRun;
  int64_t micro = perRun / iterationsPerRun(meta);
  // Weight updates: one per device iteration.
  int64_t totalRuns = steps ? (steps + meta.deviceIterations - 1) / meta.deviceIterations
                            : int64_t(epochs) * runsPerEpoch;
  if (auto *model = dynamic_cast<IPUModel *>(runner.get()))
    if (auto err = model->checkInstancesAgree(
            "runs " + std::to_string(totalRuns) + " from " + std::to_string(runsDone) +
            ", data " + std::to_string(data->samples)))
      return error(llvm::toString(std::move(err)));
  if (runsDone > totalRuns)
    return error("--resume: the checkpoint has done " + llvm::Twine(runsDone) +
                 " runs, more than the " + llvm::Twine(totalRuns) + " asked for");
  if (runsDone)
    llvm::outs() << "resuming after run " << runsDone << " from " << resumeFrom << "\n";
  // Under tessera-launch, the figures are this instance's; an update
  // takes every instance's samples.
  int64_t instances = meta.replicas / meta.localReplicas();
  llvm::outs() << "training " << meta.optimizer << " on " << data->samples * instances
               << " samples" << (instances > 1 ? " (" + std::to_string(data->samples) + " here)" : "")
               << ": " << describeBatch(meta) << " = " << perRun
               << " samples per run, " << totalRuns << " runs ("
               << totalRuns * meta.deviceIterations << " weight updates of "
               << micro * meta.gradientAccumulation * instances << " samples), output mode "
               << outputModeName(meta)
               << (reference ? " on the host reference\n" : "\n");
  // No progress bar in tessera-launch's instances: mpirun hands each a
  // terminal of its own even when the launch's output goes to a file.
  bool terminal =
      llvm::sys::Process::StandardOutIsDisplayed() && !std::getenv("OMPI_COMM_WORLD_SIZE");
  auto start = std::chrono::steady_clock::now();
  double epochLoss = 0;
  int64_t epochCorrect = 0, epochLabelled = 0, epochRuns = 0;
  std::optional<size_t> lossScaleState = findState(meta, "optimizer.loss_scale");
  std::optional<size_t> skippedState = findState(meta, "optimizer.skipped_updates");
  int64_t skippedSoFar = 0;
  // Loss scaling's state, read back each run (PopART prints it likewise).
  auto scalarState = [&](size_t index) {
    float v = 0;
    Tensor t = runner->readStateAt(index);
    std::memcpy(&v, t.data.data(), sizeof(v));
    return v;
  };
  int64_t epochSkipped = 0;
  for (int64_t run = runsDone; run < totalRuns; ++run) {
    auto stats = trainOnRun(*runner, meta, *data, run % runsPerEpoch);
    if (!stats)
      return error(llvm::toString(stats.takeError()));
    // Automatic loss scaling skips an update whose gradients overflowed
    // (its loss may be inf too): reported, and training goes on.
    int64_t skipped = skippedState ? static_cast<int64_t>(scalarState(*skippedState)) : 0;
    bool skippedNow = skipped > skippedSoFar;
    skippedSoFar = skipped;
    if (!std::isfinite(stats->loss) && !skippedNow)
      return error("the loss is " + std::to_string(stats->loss) + " at run " +
                   llvm::Twine(run + 1) + ": training diverged (lower the learning rate)");
    if (std::isfinite(stats->loss)) {
      epochLoss += stats->loss;
      ++epochRuns;
    } else {
      ++epochSkipped;
    }
    epochCorrect += stats->correct;
    epochLabelled += stats->labelled;
    std::string line = llvm::formatv("run {0}/{1}  loss {2:f4}", run + 1, totalRuns,
                                     stats->loss);
    if (stats->labelled)
      line += llvm::formatv("  accuracy {0:f3}", double(stats->correct) / stats->labelled);
    if (lossScaleState)
      line += llvm::formatv("  loss scale {0}", scalarState(*lossScaleState));
    if (skippedNow)
      line += llvm::formatv("  ({0} update{1} skipped so far: inf or NaN gradients)", skipped,
                            skipped == 1 ? "" : "s");
    if (terminal) {
      // A progress bar over the whole run, redrawn in place.
      constexpr int kWidth = 30;
      int done = static_cast<int>(kWidth * (run + 1) / totalRuns);
      line = "[" + std::string(done, '=') + std::string(kWidth - done, ' ') + "] " + line;
    }
    llvm::outs() << (terminal ? "\r\033[K" : "") << line << (terminal ? "" : "\n");
    llvm::outs().flush();
    bool epochEnd = (run + 1) % runsPerEpoch == 0 || run + 1 == totalRuns;
    if (epochEnd) {
      std::string summary = llvm::formatv("epoch {0}: mean loss {1:f4}",
                                          run / runsPerEpoch + 1,
                                          epochRuns ? epochLoss / epochRuns : NAN);
      if (epochSkipped)
        summary += llvm::formatv(" (over {0} runs; {1} with a skipped update and a "
                                 "non-finite loss left out)",
                                 epochRuns, epochSkipped);
      if (epochLabelled)
        summary += llvm::formatv(", training accuracy {0:f3}",
                                 double(epochCorrect) / epochLabelled);
      llvm::outs() << (terminal ? "\r\033[K" : "") << summary << "\n";
      epochLoss = 0;
      epochCorrect = epochLabelled = epochRuns = epochSkipped = 0;
    }
    if (checkpointEvery && (run + 1) % checkpointEvery == 0 && run + 1 < totalRuns &&
        writesFiles()) {
      if (auto err = saveState(*runner, meta, saveWeights, run + 1))
        return error("checkpoint after run " + llvm::Twine(run + 1) + ": " +
                     llvm::toString(std::move(err)));
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  llvm::outs() << llvm::format("%s: %.3f ms per weight update\n",
                               reference ? "host reference" : "IPU model on the host",
                               seconds * 1e3 / std::max<int64_t>(1, totalRuns * meta.deviceIterations));
  if (auto *model = dynamic_cast<IPUModel *>(runner.get())) {
    // The program runs once per micro-batch; an update takes G of them,
    // then the optimizer's step. A pipeline fills and drains once per update.
    const CostSummary &cost = model->cost();
    int64_t perUpdate = cost.cyclesPerUpdate(meta.gradientAccumulation);
    double updatesPerSecond = model->target().clockHz / std::max<int64_t>(perUpdate, 1);
    llvm::outs() << "estimated on " << model->target().name << ": " << withCommas(perUpdate)
                 << " cycles per weight update, "
                 << withCommas(std::llround(updatesPerSecond * micro * meta.gradientAccumulation *
                                            instances))
                 << " samples/s\n";
  }
  if (!saveWeights.empty() && writesFiles()) {
    if (auto err = saveState(*runner, meta, saveWeights, checkpointEvery ? totalRuns : -1))
      return error(llvm::toString(std::move(err)));
    llvm::outs() << "weights written to " << saveWeights << "\n";
  }
  if (!exportONNX.empty() && writesFiles()) {
    if (auto err = exportONNXWithInitializers(meta.source, trainedWeights(*runner, meta),
                                              exportONNX))
      return error("--export-onnx: " + llvm::toString(std::move(err)));
    llvm::outs() << "trained model written to " << exportONNX << "\n";
  }
  return 0;
}

int run(int argc, char **argv) {
  // In tessera-launch's instances standard output is a terminal of mpirun's
  // (unbuffered: a write per piece of a line); buffered, each line's pieces
  // go out together instead of between another instance's.
  // (SetBuffered would leave a terminal unbuffered: a size is given.)
  if (std::getenv("OMPI_COMM_WORLD_SIZE"))
    llvm::outs().SetBufferSize(1 << 16);
  tessera::runtime::installResourceErrorHandlers("tessera-run");
  cl::HideUnrelatedOptions({&category, &trainingCategory});
  cl::ParseCommandLineOptions(argc, argv, "Run a Tessera executable\n");

  if (reference && !profileDir.empty())
    return error("--profile needs the IPU model; drop --reference");
  if (reference && !reportDir.empty())
    return error("--report needs the IPU model; drop --reference");
  if (iterations == 0)
    return error("--iterations must be at least 1");
  if (threads > 1024)
    return error("--host-threads must be at most 1024, got " + llvm::Twine(threads));

  // A .tess holds native code this process runs, as a shared library would.
  if (std::string why = whyUntrusted(executablePath); !why.empty())
    llvm::WithColor::warning(llvm::errs(), "tessera-run")
        << executablePath << ": " << why
        << "; a .tess is native code that runs as you: run only executables you or a "
           "cache of your own produced\n";
  auto exe = Executable::load(executablePath);
  if (!exe)
    return error(llvm::toString(exe.takeError()));
  // Started by tessera-launch: this instance runs its share of the replicas.
  auto instance = Instance::fromEnvironment();
  if (!instance)
    return error(llvm::toString(instance.takeError()));
  if (*instance) {
    thisInstance = (*instance)->index;
    if (auto err = (*exe)->runAsInstance(**instance))
      return error(llvm::toString(std::move(err)));
  }
  const ExecutableMetadata &meta = (*exe)->metadata();
  if (!trainData.empty())
    return train(**exe);
  if (epochs || steps || learningRate.getNumOccurrences() || !saveWeights.empty() ||
      !loadWeights.empty() || !exportONNX.empty() || checkpointEvery ||
      !resumeFrom.empty())
    return error("--epochs, --steps, --lr, --save-weights, --load-weights, "
                 "--checkpoint-every, --resume and --export-onnx go with --train-data");
  if (meta.share.count && !outputPath.empty())
    return error("--output under tessera-launch: instance " +
                 llvm::Twine(meta.share.instance) + " holds only replicas " +
                 llvm::Twine(meta.share.first) + " to " +
                 llvm::Twine(meta.share.first + meta.share.count - 1) +
                 "' outputs; run inference whole in one process");

  std::map<std::string, Tensor> given;
  for (const std::string &spec : inputSpecs) {
    auto [name, path] = llvm::StringRef(spec).split('=');
    if (path.empty()) {
      path = name;
      name = "";
    }
    if (name.empty() && path.ends_with(".npz")) {
      auto arrays = readNpz(path);
      if (!arrays)
        return error(llvm::toString(arrays.takeError()));
      for (auto &[k, v] : *arrays)
        if (!given.emplace(k, std::move(v)).second)
          return error("input '" + k + "' is given twice (again in '" + path + "')");
      continue;
    }
    if (name.empty()) {
      if (meta.inputs.size() != 1)
        return error("'" + path + "' needs a name: the model has " +
                     llvm::Twine(meta.inputs.size()) +
                     " inputs (use --input NAME=" + path + ")");
      name = meta.inputs.front().name;
    }
    if (given.count(name.str()))
      return error("input '" + name + "' is given twice (again as '" + path + "')");
    auto t = readTensorFile(path);
    if (!t)
      return error(llvm::toString(t.takeError()));
    given[name.str()] = std::move(*t);
  }
  for (const auto &[name, tensor] : given)
    if (llvm::none_of(meta.inputs, [&](const TensorInfo &in) { return in.name == name; }))
      return error("'" + name + "' is not an input of the model");
  std::vector<Tensor> inputs;
  for (const TensorInfo &in : meta.inputs) {
    auto it = given.find(in.name);
    if (it == given.end())
      return error("missing input '" + in.name + "' (" +
                   typeString(hostShape(in, iterationsPerRun(meta) * meta.replicas), in.dtype) +
                   "); give it with --input " + in.name + "=file.npy");
    // Every instance reads every replica's input and keeps its own.
    inputs.push_back(localBatches(meta, in, it->second));
    given.erase(it);
  }

  auto target = tessera::target::makeTarget(
      meta.target, meta.numIPUs,
      meta.tilesPerIPU ? std::optional<int64_t>(meta.tilesPerIPU) : std::nullopt);
  if (!target)
    return error("the executable names an unknown target: " +
                 llvm::toString(target.takeError()));

  // Both paths run the same way: create, run K times, time the runs.
  std::unique_ptr<HostRunner> runner;
  std::unique_ptr<IPUModel> model;
  if (reference) {
    auto created = HostRunner::create(**exe, tessera::compileHostReference);
    if (!created)
      return error(llvm::toString(created.takeError()));
    runner = std::move(*created);
  } else {
    auto created = IPUModel::create(**exe, threads);
    if (!created) {
      std::string message = llvm::toString(created.takeError());
      if (!profileDir.empty())
        writeFailureProfile(meta, message);
      if (!reportDir.empty() && llvm::StringRef(message).starts_with(kOutOfTileMemory))
        if (auto err = writeRunReport(meta, nullptr, message))
          llvm::WithColor::warning(llvm::errs(), "tessera-run")
              << "the report could not be written: " << llvm::toString(std::move(err)) << "\n";
      return error(message);
    }
    model = std::move(*created);
  }
  if (randomSeed.getNumOccurrences()) {
    Runner &seeded = runner ? static_cast<Runner &>(*runner) : *model;
    if (auto err = setRandomSeed(seeded, meta, randomSeed))
      return error(llvm::toString(std::move(err)));
  }
  std::vector<Tensor> outputs;
  for (unsigned i = 0; i < warmup; ++i) {
    auto result = runner ? runner->run(inputs) : model->run(inputs);
    if (!result)
      return error(llvm::toString(result.takeError()));
  }
  if (model)
    model->resetHostTimes();
  auto start = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < iterations; ++i) {
    auto result = runner ? runner->run(inputs) : model->run(inputs);
    if (!result)
      return error(llvm::toString(result.takeError()));
    outputs = std::move(*result);
  }
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count() /
              iterations;

  llvm::outs() << "compiled for " << target->describe() << "\n";
  llvm::outs() << (reference ? "outputs (host reference):\n" : "outputs (IPU model):\n");
  for (auto [info, t] : llvm::zip(meta.outputs, outputs))
    summarize(info, t);
  if (model) {
    const CostSummary &cost = model->cost();
    double seconds = cost.seconds(model->target().clockHz);
    double perSecond = seconds > 0 ? 1.0 / seconds : 0;
    llvm::outs() << "estimated on " << model->target().name << ": "
                 << withCommas(cost.totalCycles) << " cycles, "
                 << llvm::format("%.4g", seconds * 1e3) << " ms per iteration, "
                 << withCommas(std::llround(perSecond)) << " iterations/s";
    // Throughput in samples: the leading (batch) dimension of input 0, on
    // every replica.
    if (!meta.inputs.empty() && !meta.inputs[0].shape.empty())
      llvm::outs() << ", "
                   << withCommas(std::llround(perSecond * meta.inputs[0].shape[0] *
                                              meta.replicas))
                   << " samples/s";
    llvm::outs() << "\n";
    if (iterationsPerRun(meta) > 1)
      llvm::outs() << meta.deviceIterations << " device iterations"
                   << (meta.gradientAccumulation > 1
                           ? " x " + std::to_string(meta.gradientAccumulation) +
                                 " accumulated micro-batches"
                           : std::string())
                   << " per run: "
                   << withCommas(cost.totalCycles * iterationsPerRun(meta) +
                                 (cost.fillCycles + cost.updateCycles) *
                                     (meta.state.empty() ? 1 : meta.deviceIterations))
                   << " cycles on the device per run\n";
  }
  llvm::outs() << llvm::format("%s: %.3f ms per run (%u run%s)\n",
                               reference ? "host reference" : "IPU model on the host",
                               ms, static_cast<unsigned>(iterations),
                               iterations == 1 ? "" : "s");
  if (model && !profileDir.empty() && writesFiles()) {
    if (auto err = makeProfileDir())
      return error(llvm::toString(std::move(err)));
    if (auto err = writeJSON(profileDir, "profile.json", model->profileJSON()))
      return error(llvm::toString(std::move(err)));
    if (auto err = writeJSON(profileDir, "trace.json", model->traceJSON(), /*indent=*/false))
      return error(llvm::toString(std::move(err)));
    llvm::outs() << "profile written to " << profileDir << "/profile.json and "
                 << profileDir << "/trace.json\n";
  }
  if (model && !reportDir.empty() && writesFiles())
    if (auto err = writeRunReport(meta, model.get()))
      return error("the report could not be written: " + llvm::toString(std::move(err)));
  if (!outputPath.empty()) {
    std::vector<std::pair<std::string, Tensor>> named;
    for (auto [info, t] : llvm::zip(meta.outputs, outputs))
      named.emplace_back(info.name, std::move(t));
    if (auto err = writeNpz(outputPath, named))
      return error(llvm::toString(std::move(err)));
  }
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  int status = run(argc, argv);
  // An instance that fails stops the launch: the others may be waiting for
  // it in a collective, and would wait for ever.
  if (status != 0)
    abortInstances(status);
  return status;
}
