//===- Module.cpp - the _tessera extension: compiler and runtime libraries ===//
//
// What the Python package needs from C++, and nothing more: build an
// executable (the library call tessera-compile makes), and load one to run
// on the IPU model or the host reference path, with its device-resident
// state (weights, optimizer state, hyperparameters) readable and writable.
// PopTorch's names and semantics live in the Python layer above.
//
//===----------------------------------------------------------------------===//

#include "tessera/Compiler/BuildExecutable.h"
#include "tessera/Compiler/Compiler.h"
#include "tessera/Compiler/Registration.h"
#include "tessera/Runtime/FileUtils.h"
#include "tessera/Runtime/HostRunner.h"
#include "tessera/Runtime/IPUModel.h"
#include "tessera/Runtime/Instances.h"
#include "tessera/Runtime/Training.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>

namespace py = pybind11;
using namespace tessera;
using runtime::DType;
using runtime::Tensor;

namespace {

/// Raised for every failure: a model that does not compile, bad options,
/// inputs of the wrong shape.
struct TesseraError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void raise(llvm::Error err) {
  throw TesseraError(llvm::toString(std::move(err)));
}
template <typename T> T take(llvm::Expected<T> value) {
  if (!value)
    raise(value.takeError());
  return std::move(*value);
}

//===----------------------------------------------------------------------===//
// Tensors <-> NumPy
//===----------------------------------------------------------------------===//

py::dtype numpyType(DType t) {
  switch (t) {
  case DType::F32: return py::dtype("float32");
  case DType::F64: return py::dtype("float64");
  case DType::F16: return py::dtype("float16");
  case DType::I64: return py::dtype("int64");
  case DType::I32: return py::dtype("int32");
  case DType::I16: return py::dtype("int16");
  case DType::I8: return py::dtype("int8");
  case DType::U8: return py::dtype("uint8");
  case DType::U16: return py::dtype("uint16");
  case DType::U32: return py::dtype("uint32");
  case DType::U64: return py::dtype("uint64");
  case DType::Bool: return py::dtype("bool");
  case DType::BF16: break;
  }
  throw TesseraError("bf16 tensors have no NumPy type");
}

py::array toNumpy(const Tensor &t) {
  py::array a(numpyType(t.dtype), t.shape);
  std::memcpy(a.mutable_data(), t.data.data(), t.data.size());
  return a;
}

/// `value` as a tensor of `dtype` (converted the way NumPy casts), C order.
Tensor fromNumpy(const py::handle &value, DType dtype) {
  py::array a = py::array::ensure(value);
  if (!a)
    throw TesseraError("expected an array, got " +
                       std::string(py::str(value.get_type())));
  a = a.attr("astype")(numpyType(dtype), py::arg("order") = "C", py::arg("copy") = false);
  Tensor t;
  t.dtype = dtype;
  t.shape.assign(a.shape(), a.shape() + a.ndim());
  t.data.resize(a.nbytes());
  std::memcpy(t.data.data(), a.data(), a.nbytes());
  return t;
}

py::dict describe(const runtime::TensorInfo &info) {
  py::dict d;
  d["name"] = info.name;
  d["shape"] = info.shape;
  d["dtype"] = std::string(runtime::dtypeName(info.dtype));
  return d;
}

//===----------------------------------------------------------------------===//
// Compile
//===----------------------------------------------------------------------===//

/// Diagnostics as text, as tessera-compile prints them: the source position
/// when there is one (a TorchScript module's Python line), else the model.
class DiagnosticCollector {
public:
  DiagnosticCollector(mlir::MLIRContext &context, std::string model)
      : model_(std::move(model)),
        handler_(&context, [this](mlir::Diagnostic &d) { collect(d, severity(d)); }) {}
  const std::string &text() const { return text_; }

private:
  static const char *severity(const mlir::Diagnostic &d) {
    switch (d.getSeverity()) {
    case mlir::DiagnosticSeverity::Error: return "error";
    case mlir::DiagnosticSeverity::Warning: return "warning";
    case mlir::DiagnosticSeverity::Note: return "note";
    case mlir::DiagnosticSeverity::Remark: return "remark";
    }
    return "error";
  }
  static std::optional<mlir::FileLineColLoc> position(mlir::Location loc) {
    if (auto name = llvm::dyn_cast<mlir::NameLoc>(loc))
      return position(name.getChildLoc());
    auto file = llvm::dyn_cast<mlir::FileLineColLoc>(loc);
    if (file && file.getLine() > 0)
      return file;
    return std::nullopt;
  }
  void collect(mlir::Diagnostic &d, const char *severity) {
    if (auto pos = position(d.getLocation()))
      text_ += pos->getFilename().str() + ":" + std::to_string(pos->getLine()) + ":" +
               std::to_string(pos->getColumn());
    else
      text_ += model_;
    text_ += std::string(": ") + severity + ": " + d.str() + "\n";
    for (mlir::Diagnostic &note : d.getNotes())
      collect(note, "note");
  }
  std::string model_, text_;
  mlir::ScopedDiagnosticHandler handler_;
};

template <typename T> T get(const py::dict &options, const char *key, T fallback) {
  return options.contains(key) ? options[key].cast<T>() : fallback;
}

/// Builds `model` into the executable `path`. `options` holds the request
/// in tessera-compile's terms (see tessera/_compile.py); returns "hit" or
/// "miss" (the cache's answer; "miss" without a cache).
std::string compileModel(const std::string &model, const std::string &path,
                         const py::dict &options) {
  static const char *known[] = {
      "input_shapes", "input_types", "target", "num_ipus", "tiles_per_ipu",
      "available_memory_proportion", "device_iterations", "output_mode", "host_cpu",
      "cache_dir", "train", "loss", "optimizer", "micro_batch_size",
      "gradient_accumulation", "accumulation_reduction", "freeze", "blocks", "pipeline",
      "layers_per_ipu", "execution", "recompute", "stochastic_rounding", "loss_scaling",
      "precision", "partials_type", "replicas", "report"};
  for (auto item : options) {
    std::string key = py::str(item.first);
    if (std::find_if(std::begin(known), std::end(known),
                     [&](const char *k) { return key == k; }) == std::end(known))
      throw TesseraError("unknown compile option '" + key + "'");
  }
  ExecutableRequest request;
  request.modelPath = model;
  for (auto [name, dims] : get<std::map<std::string, std::vector<int64_t>>>(
           options, "input_shapes", {})) {
    for (int64_t d : dims)
      if (d < 0)
        throw TesseraError("input '" + name + "' has a negative dimension");
    request.import.inputShapes[name] = dims;
  }
  for (auto [name, type] :
       get<std::map<std::string, std::string>>(options, "input_types", {})) {
    std::string err = onnx_importer::parseInputType(name + "=" + type, request.import);
    if (!err.empty())
      throw TesseraError(err);
  }
  std::optional<int64_t> tiles;
  if (options.contains("tiles_per_ipu") && !options["tiles_per_ipu"].is_none())
    tiles = options["tiles_per_ipu"].cast<int64_t>();
  request.compile.target = take(target::makeTarget(
      get<std::string>(options, "target", "ipu2"), get<int64_t>(options, "num_ipus", 1), tiles));
  request.compile.ipu.availableMemoryProportion =
      get<double>(options, "available_memory_proportion", 0.6);
  request.deviceIterations = get<int64_t>(options, "device_iterations", 1);
  request.compile.replicas = get<int64_t>(options, "replicas", 1);
  bool train = get<bool>(options, "train", false);
  // Stages over IPUs (BeginBlock rules, an IPUConfig's layers_per_ipu).
  StageOptions &stages = request.compile.stages;
  stages.blocks = get<std::vector<std::string>>(options, "blocks", {});
  stages.layersPerIpu = get<std::vector<int64_t>>(options, "layers_per_ipu", {});
  stages.pipeline = get<std::string>(options, "pipeline", "");
  std::string execution = get<std::string>(options, "execution", "pipelined");
  if (execution != "pipelined" && execution != "sharded")
    throw TesseraError("execution must be pipelined or sharded, got '" + execution + "'");
  stages.pipelined = execution == "pipelined";
  stages.microBatches =
      train ? get<int64_t>(options, "gradient_accumulation", 1) : request.deviceIterations;
  request.compile.graph.precision = get<std::string>(options, "precision", "fp32");
  request.compile.graph.partialsType = get<std::string>(options, "partials_type", "");
  runtime::ExecutableMetadata mode;
  if (llvm::Error err = runtime::parseOutputMode(
          get<std::string>(options, "output_mode", train ? "final" : "all"), mode))
    raise(std::move(err));
  request.outputMode = mode.outputMode;
  request.outputEvery = mode.outputEvery;
  request.cpu = take(resolveHostCPU(get<std::string>(options, "host_cpu", "native")));
  request.cacheDir = get<std::string>(options, "cache_dir", "");
  request.reportDir = get<std::string>(options, "report", "");
  if (train) {
    TrainingPipelineOptions &t = request.compile.training;
    t.enabled = true;
    if (llvm::Error err = parseLossSpec(get<std::string>(options, "loss", "cross-entropy"), t))
      raise(std::move(err));
    t.optimizer = get<std::string>(options, "optimizer", "sgd");
    t.gradientAccumulation = get<int64_t>(options, "gradient_accumulation", 1);
    t.accumulationReduction = get<std::string>(options, "accumulation_reduction", "mean");
    t.freeze = get<std::vector<std::string>>(options, "freeze", {});
    t.recompute = get<std::string>(options, "recompute", "");
    t.stochasticRounding = get<bool>(options, "stochastic_rounding", false);
    t.lossScaling = get<std::string>(options, "loss_scaling", "");
    request.microBatchSize = get<int64_t>(options, "micro_batch_size", 0);
  }

  std::string diagnostics;
  llvm::Expected<BuildResult> built = BuildResult{};
  {
    py::gil_scoped_release release;
    mlir::DialectRegistry registry;
    registerTesseraDialects(registry);
    mlir::MLIRContext context(registry);
    DiagnosticCollector collector(context, model);
    mlir::TimingScope noTiming;
    built = buildExecutable(context, request, path, {}, noTiming);
    diagnostics = collector.text();
  }
  if (!built) {
    std::string message = llvm::toString(built.takeError());
    throw TesseraError(message.empty() ? diagnostics : message + "\n" + diagnostics);
  }
  return built->outcome == CacheOutcome::Hit ? "hit" : "miss";
}

//===----------------------------------------------------------------------===//
// Run
//===----------------------------------------------------------------------===//

/// A loaded executable and the runner holding its device state.
class LoadedExecutable {
public:
  /// `instance`: (index, instances) of tessera-launch's instances this
  /// process is (PopTorch's Distributed.configureProcessId), or None.
  LoadedExecutable(const std::string &path, const std::string &device, unsigned threads,
                   std::optional<std::pair<int64_t, int64_t>> instance) {
    executable_ = take(runtime::Executable::load(path));
    if (instance && instance->second > 1) {
      auto [index, instances] = *instance;
      int64_t total = executable_->metadata().replicas;
      if (index < 0 || index >= instances || total % instances != 0)
        throw TesseraError("instance " + std::to_string(index) + " of " +
                           std::to_string(instances) + " cannot run a share of " +
                           std::to_string(total) +
                           " replicas (replicationFactor x instances must be the "
                           "executable's replicas)");
      runtime::Instance self;
      self.numInstances = instances;
      self.index = index;
      self.totalReplicas = total;
      self.localReplicas = total / instances;
      self.replicaOffset = index * self.localReplicas;
      self.ipusPerReplica = executable_->metadata().numIPUs;
      self.onThisHost = runtime::Instance::countOnThisHost();
      if (auto err = executable_->runAsInstance(self))
        throw TesseraError(llvm::toString(std::move(err)));
    }
    if (device == "ipu") {
      auto model = take(runtime::IPUModel::create(*executable_, threads));
      ipuModel_ = model.get();
      runner_ = std::move(model);
    } else if (device == "reference") {
      runner_ = take(runtime::HostRunner::create(*executable_, compileHostReference));
    } else {
      throw TesseraError("device must be 'ipu' (the IPU model) or 'reference', got '" +
                         device + "'");
    }
  }

  const runtime::ExecutableMetadata &metadata() const { return executable_->metadata(); }

  py::list inputs() const {
    py::list l;
    for (const auto &t : metadata().inputs)
      l.append(describe(t));
    return l;
  }
  py::list outputs() const {
    py::list l;
    for (const auto &t : metadata().outputs)
      l.append(describe(t));
    return l;
  }
  py::list state() const {
    py::list l;
    for (const auto &s : metadata().state) {
      py::dict d = describe(s);
      d["role"] = std::string(runtime::stateRoleName(s.role));
      l.append(d);
    }
    return l;
  }
  py::dict info() const {
    const runtime::ExecutableMetadata &m = metadata();
    py::dict d;
    d["target"] = m.target;
    d["num_ipus"] = m.numIPUs;
    d["tiles_per_ipu"] = m.tilesPerIPU;
    d["device_iterations"] = m.deviceIterations;
    d["gradient_accumulation"] = m.gradientAccumulation;
    d["pipeline_stages"] = m.pipelineStages;
    d["replicas"] = m.replicas;
    d["local_replicas"] = m.localReplicas();
    d["replica_offset"] = m.share.first;
    d["output_mode"] = runtime::outputModeName(m);
    d["loss"] = m.loss;
    d["optimizer"] = m.optimizer;
    d["source"] = m.source;
    d["compiler"] = m.compilerVersion;
    return d;
  }

  py::list run(const py::sequence &arrays) {
    const auto &signature = metadata().inputs;
    if (arrays.size() != signature.size())
      throw TesseraError("the executable takes " + std::to_string(signature.size()) +
                         " inputs, got " + std::to_string(arrays.size()));
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < signature.size(); ++i)
      inputs.push_back(fromNumpy(arrays[i], signature[i].dtype));
    llvm::Expected<std::vector<Tensor>> outputs = std::vector<Tensor>{};
    {
      py::gil_scoped_release release;
      outputs = runner_->run(inputs);
    }
    py::list result;
    for (const Tensor &t : take(std::move(outputs)))
      result.append(toNumpy(t));
    return result;
  }

  /// Under tessera-launch: refuses when the instances start from different
  /// state (IPUModel::checkInstancesAgree).
  void checkInstancesAgree() {
    if (ipuModel_)
      if (auto err = ipuModel_->checkInstancesAgree())
        throw TesseraError(llvm::toString(std::move(err)));
  }

  /// Replica `replica`'s state (replica 0's by default; the IPU model only
  /// runs several).
  py::dict readState(int64_t replica) {
    int64_t replicas = ipuModel_ ? ipuModel_->replicas() : 1;
    if (replica < 0 || replica >= replicas)
      throw TesseraError("replica " + std::to_string(replica) + " is not in [0, " +
                         std::to_string(replicas) + ")");
    py::dict d;
    for (size_t i = 0; i < metadata().state.size(); ++i)
      d[py::str(metadata().state[i].name)] =
          toNumpy(ipuModel_ ? ipuModel_->readReplicaStateAt(replica, i)
                            : runner_->readStateAt(i));
    return d;
  }

  void writeState(const std::string &name, const py::handle &value) {
    std::optional<size_t> index = runtime::findState(metadata(), name);
    if (!index)
      throw TesseraError("the executable has no state tensor '" + name + "'");
    if (llvm::Error err =
            runner_->writeState(*index, fromNumpy(value, metadata().state[*index].dtype)))
      raise(std::move(err));
  }

  py::list trainedWeights() {
    py::list l;
    for (auto &[name, value] : runtime::trainedWeights(*runner_, metadata()))
      l.append(py::make_tuple(name, toNumpy(value)));
    return l;
  }

  void setLearningRate(double lr) {
    if (llvm::Error err = runtime::setLearningRate(*runner_, metadata(), lr))
      raise(std::move(err));
  }
  void setSeed(int64_t seed) {
    if (llvm::Error err = runtime::setRandomSeed(*runner_, metadata(), seed))
      raise(std::move(err));
  }

  /// The IPU model's estimated cycles per run (None on the reference path).
  py::object cycles() const {
    if (!ipuModel_)
      return py::none();
    return py::int_(ipuModel_->cost().totalCycles);
  }
  double clockHz() const {
    return ipuModel_ ? ipuModel_->target().clockHz : 0.0;
  }

private:
  std::unique_ptr<runtime::Executable> executable_;
  std::unique_ptr<runtime::Runner> runner_;
  runtime::IPUModel *ipuModel_ = nullptr;
};

} // namespace

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "Tessera's compiler and runtime libraries (use the tessera package)";
  registerTesseraPasses();
  py::register_exception<TesseraError>(m, "Error", PyExc_RuntimeError);
  m.attr("version") = TESSERA_VERSION_STRING;
  m.def("compile", &compileModel, py::arg("model"), py::arg("path"),
        py::arg("options") = py::dict(),
        "Builds the executable `path` from `model`; returns the cache's answer");
  m.def(
      "abort_instances", [](int status) { runtime::abortInstances(status); },
      py::arg("status") = 1,
      "Stops every instance of a tessera-launch launch (MPI_Abort) when this one has "
      "joined the others; nothing otherwise");
  m.def(
      "why_untrusted", [](const std::string &path) { return runtime::whyUntrusted(path); },
      py::arg("path"),
      "Why someone else could have written `path` (empty when only you or root can)");
  py::class_<LoadedExecutable>(m, "Executable")
      .def(py::init<const std::string &, const std::string &, unsigned,
                    std::optional<std::pair<int64_t, int64_t>>>(),
           py::arg("path"), py::arg("device") = "ipu", py::arg("threads") = 0,
           py::arg("instance") = py::none())
      .def_property_readonly("inputs", &LoadedExecutable::inputs)
      .def_property_readonly("outputs", &LoadedExecutable::outputs)
      .def_property_readonly("state", &LoadedExecutable::state)
      .def_property_readonly("info", &LoadedExecutable::info)
      .def_property_readonly("cycles", &LoadedExecutable::cycles)
      .def_property_readonly("clock_hz", &LoadedExecutable::clockHz)
      .def("run", &LoadedExecutable::run)
      .def("read_state", &LoadedExecutable::readState, py::arg("replica") = 0)
      .def("write_state", &LoadedExecutable::writeState)
      .def("trained_weights", &LoadedExecutable::trainedWeights)
      .def("set_learning_rate", &LoadedExecutable::setLearningRate)
      .def("set_seed", &LoadedExecutable::setSeed)
      .def("check_instances_agree", &LoadedExecutable::checkInstancesAgree);
}
