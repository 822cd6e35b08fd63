//===- BuildExecutable.cpp - a model to a .tess, through the cache --------===//

#include "tessera/Compiler/BuildExecutable.h"
#include "tessera/Support/Error.h"

#include "tessera/Dialect/Graph/IR/OpBuilding.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"
#include "tessera/Importers/TorchScript/TorchScriptImporter.h"
#include "tessera/Report/Report.h"
#include "tessera/Runtime/FileUtils.h"
#include "tessera/Runtime/PhasePool.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/xxhash.h"

#include <optional>

#include <dlfcn.h>

using namespace mlir;

namespace tessera {

namespace {
/// The file holding the code at `address`: the tool's executable, the
/// Python extension, or a shared library.
std::string fileOf(void *address) {
  // The main program's name is as it was run (maybe found on PATH); a
  // shared object's is its path.
  Dl_info info;
  if (dladdr(address, &info) && info.dli_fname &&
      llvm::StringRef(info.dli_fname).contains('/') && llvm::sys::fs::exists(info.dli_fname))
    return info.dli_fname;
  return "/proc/self/exe";
}

/// ";code <path>=<hash of its bytes>" ("unreadable" for the hash when it
/// cannot be read).
std::string codeIdentity(const std::string &path) {
  auto bytes = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  return ";code " + path + "=" +
         (bytes ? llvm::utohexstr(llvm::xxh3_64bits(
                      llvm::arrayRefFromStringRef((*bytes)->getBuffer())))
                : std::string("unreadable"));
}

/// Every file of code that shapes an executable besides the one holding
/// this code (which computeCacheKey hashes): the graph dialect's shared
/// library (its folds), the TorchScript importer plugin, by content; the
/// MLIR and LLVM libraries by path, size and time (they change only with
/// Debian's packages, and hashing 200 MB per compile would cost more than
/// it protects). A rebuilt compiler never takes an older one's
/// executables.
std::string computeCompilerIdentity() {
  std::string text;
  auto byContent = [&](const std::string &path) { text += codeIdentity(path); };
  FailureOr<Value> (*graphLibrary)(OpBuilder &, Operation *) = &graph::finishCreatedOp;
  byContent(fileOf(reinterpret_cast<void *>(graphLibrary)));
  if (std::string plugin = torchscript_importer::pluginPath(); !plugin.empty())
    byContent(plugin);
  LogicalResult (*mlirLibrary)(Operation *, bool) = &mlir::verify;
  uint64_t (*llvmLibrary)(llvm::ArrayRef<uint8_t>) = &llvm::xxh3_64bits;
  for (void *address :
       {reinterpret_cast<void *>(mlirLibrary), reinterpret_cast<void *>(llvmLibrary)}) {
    std::string path = fileOf(address);
    llvm::sys::fs::file_status status;
    if (!llvm::sys::fs::status(path, status))
      text += ";library " + path + "=" + std::to_string(status.getSize()) + "@" +
              std::to_string(status.getLastModificationTime().time_since_epoch().count());
  }
  return text;
}

/// The identity of the code this process runs, computed once: a process
/// (the Python module's) that compiles many models hashes its libraries
/// once, not per compile.
const std::string &compilerIdentity() {
  static const std::string identity = computeCompilerIdentity();
  return identity;
}
} // namespace

llvm::Error checkExecutableRequest(const ExecutableRequest &request) {
  const TrainingPipelineOptions &t = request.compile.training;
  if (t.gradientAccumulation < 1 || t.gradientAccumulation > runtime::kMaxIterationsPerRun)
    return fail("--gradient-accumulation must be 1 to 16777216, got " +
                llvm::Twine(t.gradientAccumulation));
  if (t.accumulationReduction != "mean" && t.accumulationReduction != "sum")
    return fail("--accumulation-reduction must be mean or sum, got '" +
                t.accumulationReduction + "'");
  if (request.microBatchSize < 0)
    return fail("--micro-batch-size must be at least 1, got " +
                llvm::Twine(request.microBatchSize));
  int64_t replicas = request.compile.replicas, ipus = request.compile.target.numIPUs;
  if (replicas < 1 || replicas > runtime::kMaxReplicas ||
      replicas * ipus > runtime::kMaxReplicas)
    return fail("--replicas " + llvm::Twine(replicas) + " of " + llvm::Twine(ipus) +
                " IPU(s) each: replicas must be at least 1 and the IPUs in all (replicas x "
                "--num-ipus) at most " + llvm::Twine(runtime::kMaxReplicas) +
                " (a Bow Pod1024)");
  if (request.deviceIterations < 1)
    return fail("--device-iterations must be at least 1, got " +
                llvm::Twine(request.deviceIterations));
  int64_t accumulation = t.enabled ? t.gradientAccumulation : 1;
  if (request.deviceIterations > runtime::kMaxIterationsPerRun / accumulation)
    return fail("--device-iterations " + llvm::Twine(request.deviceIterations) +
                (accumulation > 1
                     ? " times --gradient-accumulation " + std::to_string(accumulation)
                     : std::string()) +
                " is more than 16777216 iterations per run");
  if (std::string wrong = graph::checkPrecisionOptions(request.compile.graph.precision,
                                                      request.compile.graph.partialsType);
      !wrong.empty())
    return fail(wrong);
  double amp = request.compile.ipu.availableMemoryProportion;
  if (!(amp > 0 && amp <= 1))
    return fail("--available-memory-proportion must be in (0, 1], got " +
                std::to_string(amp).substr(0, std::to_string(amp).find_last_not_of('0') + 1));
  return llvm::Error::success();
}

llvm::Error parseLossSpec(llvm::StringRef spec, TrainingPipelineOptions &t) {
  if (spec.starts_with("output:")) {
    t.loss = spec.str();
    return llvm::Error::success();
  }
  auto [name, rest] = spec.split(':');
  t.loss = name.str();
  SmallVector<StringRef> items;
  rest.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [key, value] = item.split('=');
    bool bad = false;
    if (key == "label-smoothing")
      bad = value.getAsDouble(t.labelSmoothing);
    else if (key == "ignore-index")
      bad = value.getAsInteger(10, t.ignoreIndex);
    else if (key == "reduction")
      t.reduction = value.str();
    else
      return fail("--loss " + name + " has no option '" + key +
                  "' (label-smoothing, ignore-index, reduction)");
    if (bad)
      return fail("--loss option " + item + " is not a number");
  }
  return llvm::Error::success();
}

std::string cacheKeyOptions(const ExecutableRequest &request) {
  const CompileOptions &c = request.compile;
  runtime::ExecutableMetadata mode;
  mode.outputMode = request.outputMode;
  mode.outputEvery = request.outputEvery;
  std::string text = "target=" + c.target.describe() + ";available-memory-proportion=" +
                     std::to_string(c.ipu.availableMemoryProportion) +
                     ";device-iterations=" + std::to_string(request.deviceIterations) +
                     ";replicas=" + std::to_string(c.replicas) +
                     ";output-mode=" + runtime::outputModeName(mode) +
                     ";host-cpu=" + request.cpu.name + ":" +
                     llvm::join(request.cpu.features, ",");
  if (const StageOptions &st = c.stages;
      !st.pipeline.empty() || !st.layersPerIpu.empty() || !st.blocks.empty())
    text += ";pipeline=" + st.pipeline + ";layers-per-ipu=" +
            llvm::join(llvm::map_range(st.layersPerIpu,
                                       [](int64_t n) { return std::to_string(n); }),
                       ",") +
            ";blocks=" + llvm::join(st.blocks, ",");
  text += std::string(";execution=") + (c.stages.pipelined ? "pipelined" : "sharded");
  text += ";precision=" + c.graph.precision + ";partials-type=" + c.graph.partialsType;
  if (const TrainingPipelineOptions &t = c.training; t.enabled)
    text += ";train;loss=" + t.loss + ";label-smoothing=" + std::to_string(t.labelSmoothing) +
            ";ignore-index=" + std::to_string(t.ignoreIndex) + ";reduction=" + t.reduction +
            ";loss-output=" + t.lossOutput + ";optimizer=" + t.optimizer +
            ";micro-batch-size=" + std::to_string(request.microBatchSize) +
            ";gradient-accumulation=" + std::to_string(t.gradientAccumulation) +
            ";accumulation-reduction=" + t.accumulationReduction +
            ";freeze=" + llvm::join(t.freeze, ",") + ";recompute=" + t.recompute +
            (t.stochasticRounding ? ";stochastic-rounding" : "") + ";loss-scaling=" +
            t.lossScaling;
  for (const auto &[name, value] : request.import.constantInputs)
    text += ";constant-input " + name + "=" + value.elementType + ":" +
            std::to_string(llvm::xxh3_64bits(value.data));
  for (const auto &[name, dims] : request.import.inputShapes) {
    text += ";input-shape " + name + "=";
    for (int64_t d : dims)
      text += std::to_string(d) + "x";
  }
  for (const auto &[name, type] : request.import.inputTypes)
    text += ";input-type " + name + "=" + type;
  return text;
}

namespace {
llvm::Expected<BuildResult>
buildUnreported(MLIRContext &context, const ExecutableRequest &request, llvm::StringRef path,
                llvm::function_ref<void(const CacheLookup &)> onLookup, TimingScope &timing) {
  if (llvm::Error err = checkExecutableRequest(request))
    return std::move(err);
  // A model read from a pipe (standard input, /dev/stdin) can be read once:
  // by the importer, not first by the cache's key. It is compiled uncached.
  std::string cacheDir = request.cacheDir, uncachedWarning;
  if (llvm::sys::fs::file_status status;
      !cacheDir.empty() &&
      (request.modelPath == "-" || llvm::sys::fs::status(request.modelPath, status) ||
       !llvm::sys::fs::is_regular_file(status))) {
    uncachedWarning = "'" + request.modelPath +
                      "' is not a regular file (a pipe can be read only once): compiled "
                      "without the cache";
    cacheDir.clear();
  }
  const TrainingPipelineOptions &training = request.compile.training;
  std::string cacheKey;
  // The compiler build's libraries, read once for both caches' keys.
  const std::string compiler = cacheDir.empty() ? "" : compilerIdentity();
  if (!cacheDir.empty()) {
    // Before anything in it is read.
    if (llvm::Error err = checkCacheTrusted(cacheDir))
      return std::move(err);
    auto key = computeCacheKey(request.modelPath, cacheKeyOptions(request) + compiler,
                               fileOf(reinterpret_cast<void *>(&cacheKeyOptions)));
    if (!key)
      return key.takeError();
    cacheKey = *key;
    CacheLookup found = lookupExecutable(cacheDir, cacheKey, path);
    if (found.outcome == CacheOutcome::Untrusted)
      return fail(found.detail);
    if (onLookup)
      onLookup(found);
    if (found.outcome == CacheOutcome::Hit) {
      BuildResult hit;
      hit.outcome = CacheOutcome::Hit;
      hit.entryPath = found.entryPath;
      return hit;
    }
  }

  OwningOpRef<ModuleOp> module;
  {
    TimingScope importTimer = timing.nest("import");
    onnx_importer::ImportOptions importOptions = request.import;
    if (training.enabled && request.microBatchSize > 0)
      importOptions.batchSize = request.microBatchSize;
    importOptions.training = training.enabled;
    module = loadModel(request.modelPath, &context, importOptions);
  }
  // An empty message: the diagnostics said why.
  auto compileFailed = [] { return fail(""); };
  if (!module)
    return compileFailed();
  if (training.enabled && request.microBatchSize > 0 &&
      failed(setInputBatch(*module, request.microBatchSize)))
    return compileFailed();

  // The kernel cache: the compiler build (its libraries, this code's file)
  // and the target CPU are part of every key.
  std::optional<KernelCache> kernelCache;
  if (!cacheDir.empty()) {
    kernelCache.emplace();
    llvm::SmallString<256> directory(cacheDir);
    llvm::sys::path::append(directory, "kernels");
    kernelCache->directory = std::string(directory);
    kernelCache->identity =
        compiler + codeIdentity(fileOf(reinterpret_cast<void *>(&cacheKeyOptions))) +
        ";cpu " + request.cpu.name + " +" + llvm::join(request.cpu.features, ",+") + " -" +
        llvm::join(request.cpu.disabled, ",-");
  }
  CompileOptions options = request.compile;
  options.compileTo = Phase::Executable;
  // A program that does not fit gets its report from the allocator (there
  // is no executable); one that fits, from its executable, below.
  options.ipu.reportDir = request.reportDir;
  options.ipu.reportWhenItFits = false;
  options.vectorBits = vectorBitsOf(request.cpu);
  options.kernelCache = kernelCache ? &*kernelCache : nullptr;
  // The output and the cache's entry are written in one pass from memory,
  // the weights from when they are known, while the tiles are planned.
  std::vector<std::string> destinations{path.str()};
  std::string cacheWarning, entryPath;
  if (!cacheKey.empty()) {
    if (llvm::Expected<std::string> entry = cacheEntryPath(cacheDir, cacheKey)) {
      destinations.push_back(*entry);
      entryPath = *entry;
    } else {
      cacheWarning = "could not store the executable in the cache: " +
                     llvm::toString(entry.takeError());
    }
  }
  // Declared first, destroyed last: the writer's thread may be reading
  // weights `compiled` owns until the writer is finished or destroyed.
  CompiledModel compiled;
  runtime::ExecutableWriter writer(std::move(destinations));
  if (llvm::Error err = writer.open())
    return std::move(err);
  options.weightsKnown = [&writer](const CompiledModel &model) {
    writer.startWeights(model.weightData);
  };
  TimingScope passTimer = timing.nest("passes");
  options.timing = &passTimer;
  if (failed(compileModule(*module, options, &compiled)))
    return compileFailed();
  passTimer.stop();

  TimingScope codegenTimer = timing.nest("codegen");
  runtime::ExecutableMetadata metadata;
  metadata.compilerVersion = "Tessera " TESSERA_VERSION_STRING;
  metadata.source = request.modelPath;
  metadata.target = options.target.name;
  metadata.numIPUs = options.target.numIPUs;
  metadata.tilesPerIPU = options.target.tilesPerIPU;
  metadata.deviceIterations = request.deviceIterations;
  metadata.gradientAccumulation = training.enabled ? training.gradientAccumulation : 1;
  metadata.pipelineStages = compiled.pipelineStages;
  metadata.replicas = options.replicas;
  metadata.outputMode = request.outputMode;
  metadata.outputEvery = request.outputEvery;
  metadata.cacheKey = cacheKey;
  std::string copyErrors;
  if (failed(writeExecutableFile(*module, compiled, request.cpu, std::move(metadata), writer,
                                 &codegenTimer, kernelCache ? &*kernelCache : nullptr,
                                 &copyErrors)))
    return compileFailed();
  if (!copyErrors.empty())
    cacheWarning = "could not store the executable in the cache: " + copyErrors;
  BuildResult result;
  if (kernelCache) {
    result.kernelsReused = kernelCache->hits;
    result.kernelsFoundBeforeLowering = kernelCache->hitsBeforeLowering;
    result.kernelsCompiled = kernelCache->misses;
    result.cacheWarning = kernelCache->warning;
  }
  if (!uncachedWarning.empty())
    cacheWarning = uncachedWarning;
  if (!cacheWarning.empty())
    result.cacheWarning += (result.cacheWarning.empty() ? "" : "; ") + cacheWarning;
  else
    result.entryPath = entryPath;
  if (!cacheKey.empty())
    removeStaleCacheTemporaries(cacheDir);
  return result;
}
} // namespace

llvm::Expected<BuildResult>
buildExecutable(MLIRContext &context, const ExecutableRequest &request,
                llvm::StringRef path, llvm::function_ref<void(const CacheLookup &)> onLookup,
                TimingScope &timing) {
  llvm::Expected<BuildResult> built = buildUnreported(context, request, path, onLookup, timing);
  if (!built || request.reportDir.empty())
    return built;
  // Built or copied from the cache: the report of what was written, with
  // its host streams and training figures.
  TimingScope reportTimer = timing.nest("report");
  runtime::PhasePool pool(llvm::hardware_concurrency().compute_thread_count());
  llvm::Expected<llvm::json::Value> data = report::buildExecutableReport(path, nullptr, &pool);
  llvm::Error err = data ? report::writeReport(request.reportDir, *data) : data.takeError();
  if (err)
    return fail("the executable '" + path.str() + "' was written, but not its report in '" +
                request.reportDir + "': " + llvm::toString(std::move(err)));
  return built;
}

} // namespace tessera
