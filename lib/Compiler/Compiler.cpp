//===- Compiler.cpp - load a model and run it through the phases ---------===//

#include "tessera/Compiler/Compiler.h"

#include "tessera/Codegen/HostCodegen.h"
#include "tessera/Compiler/Registration.h"
#include "tessera/Dialect/Graph/IR/Placement.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"
#include "tessera/Dialect/IPU/Transforms/Passes.h"
#include "tessera/Importers/TorchScript/TorchScriptImporter.h"
#include "tessera/Runtime/JIT.h"
#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Runtime/PhasePool.h"
#include "tessera/Runtime/ProgramCost.h"
#include "tessera/Target/IPUTarget.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Host.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/Threading.h"

#include <atomic>
#include <cstring>
#include <thread>

using namespace mlir;

namespace tessera {

InputFormat detectInputFormat(StringRef path, StringRef contents) {
  StringRef ext = llvm::sys::path::extension(path);
  if (ext == ".mlir" || ext == ".mlirbc")
    return InputFormat::MLIR;
  if (ext == ".onnx")
    return InputFormat::ONNX;
  if (ext == ".pt" || ext == ".pth" || ext == ".torchscript" ||
      torchscript_importer::isTorchScriptArchive(contents))
    return InputFormat::TorchScript;
  if (isBytecode(llvm::MemoryBufferRef(contents, path)))
    return InputFormat::MLIR;
  StringRef head = contents.ltrim();
  if (head.starts_with("module") || head.starts_with("func.func") ||
      head.starts_with("//") || head.starts_with("#") ||
      head.starts_with("ml_program"))
    return InputFormat::MLIR;
  return InputFormat::ONNX;
}

OwningOpRef<ModuleOp>
loadModel(StringRef path, MLIRContext *context,
          const onnx_importer::ImportOptions &importOptions) {
  std::string error;
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/false,
                                                 /*RequiresNullTerminator=*/false);
  if (!file) {
    emitError(UnknownLoc::get(context))
        << "cannot read '" << path << "': " << file.getError().message();
    return nullptr;
  }
  StringRef contents = (*file)->getBuffer();
  InputFormat format = detectInputFormat(path, contents);
  if (format == InputFormat::TorchScript) {
    if (!importOptions.constantInputs.empty()) {
      emitError(UnknownLoc::get(context))
          << "--constant-input applies to ONNX models; give a TorchScript "
             "module's fixed values as default arguments of forward()";
      return nullptr;
    }
    torchscript_importer::ImportOptions options;
    options.inputShapes = importOptions.inputShapes;
    options.inputTypes = importOptions.inputTypes;
    options.modelName = path.str();
    options.training = importOptions.training;
    return torchscript_importer::importTorchScriptModule(contents, context,
                                                        options);
  }
  if (format == InputFormat::ONNX) {
    onnx_importer::ImportOptions options = importOptions;
    if (options.externalDataDir.empty())
      options.externalDataDir = llvm::sys::path::parent_path(path).str();
    if (options.modelName == onnx_importer::ImportOptions().modelName)
      options.modelName = path.str();
    return onnx_importer::importONNXModel(std::move(*file), context, options);
  }
  if (!importOptions.inputShapes.empty() || !importOptions.inputTypes.empty()) {
    emitError(UnknownLoc::get(context))
        << "--input-shape and --input-type apply to ONNX and TorchScript models; "
           "an MLIR input already states its types";
    return nullptr;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*file), SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, context);
}

namespace {

FailureOr<runtime::DType> dtypeOf(Type t, Location loc) {
  auto elem = getElementTypeOrSelf(t);
  std::string name;
  llvm::raw_string_ostream(name) << elem;
  auto d = runtime::parseDType(name);
  if (!d) {
    llvm::consumeError(d.takeError());
    return emitError(loc) << "element type " << elem
                          << " cannot cross the executable's interface";
  }
  return *d;
}

/// `elementType`, where given, is the interface's element type of a value
/// that lowering made signless (graph.element_type).
FailureOr<runtime::TensorInfo> tensorInfo(Type t, StringAttr name, Location loc,
                                          TypeAttr elementType = {}) {
  auto ranked = dyn_cast<RankedTensorType>(t);
  if (!ranked || !ranked.hasStaticShape())
    return emitError(loc) << "the executable's inputs and outputs need static "
                             "tensor types, got "
                          << t;
  FailureOr<runtime::DType> d =
      dtypeOf(elementType ? elementType.getValue() : t, loc);
  if (failed(d))
    return failure();
  runtime::TensorInfo info;
  info.name = name ? name.str() : "";
  info.dtype = *d;
  info.shape.assign(ranked.getShape().begin(), ranked.getShape().end());
  return info;
}

/// The bytes of `global`'s initial value (`bytes` long), appended to the
/// model's weight data; false if the payload cannot be packaged.
bool appendPayload(ml_program::GlobalOp global, size_t bytes, CompiledModel &model) {
  Attribute value = global.getValue().value_or(Attribute());
  if (auto resource = dyn_cast_if_present<DenseResourceElementsAttr>(value);
      resource && resource.getRawHandle().getBlob() &&
      resource.getRawHandle().getBlob()->getData().size() == bytes) {
    model.weightData.push_back(resource.getRawHandle().getBlob()->getData());
    return true;
  }
  auto dense = dyn_cast_if_present<DenseElementsAttr>(value);
  if (!dense || dense.getElementType().isInteger(1))
    return false;
  // Splats store one element: expand them.
  ArrayRef<char> raw = dense.getRawData();
  std::vector<char> full;
  for (size_t at = 0; at < bytes; at += raw.size())
    full.insert(full.end(), raw.begin(), raw.end());
  full.resize(bytes);
  model.owned.push_back(std::move(full));
  model.weightData.push_back(model.owned.back());
  return true;
}

/// The signature, state and weights of @main, in the order codegen passes
/// them: inputs, state, weights; outputs, then state updates.
LogicalResult describeModel(ModuleOp module, CompiledModel &model) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return module.emitError("the model has no @main function");
  auto infoOf = [&](Type type, StringAttr name, TypeAttr elementType, StringRef fallback,
                    size_t i) -> FailureOr<runtime::TensorInfo> {
    auto info = tensorInfo(type, name, main.getLoc(), elementType);
    if (succeeded(info) && info->name.empty())
      info->name = fallback.str() + std::to_string(i);
    return info;
  };
  // Inputs by their graph.name (or input<i>); state after them.
  for (auto [i, type] : llvm::enumerate(main.getArgumentTypes())) {
    auto info = infoOf(type, main.getArgAttrOfType<StringAttr>(i, "graph.name"),
                       main.getArgAttrOfType<TypeAttr>(i, "graph.element_type"),
                       "input", i);
    if (failed(info))
      return failure();
    auto stateRef = main.getArgAttrOfType<FlatSymbolRefAttr>(i, graph::kStateAttrName);
    if (!stateRef) {
      if (!model.state.empty())
        return main.emitError("input ") << info->name << " follows the state arguments";
      model.inputs.push_back(*info);
      continue;
    }
    auto global = module.lookupSymbol<ml_program::GlobalOp>(stateRef.getAttr());
    runtime::StateInfo state;
    static_cast<runtime::TensorInfo &>(state) = *info;
    state.name = stateRef.getValue().str();
    state.role = !global ? runtime::StateInfo::Role::Parameter
                 : global->hasAttr("graph.hyperparameter")
                     ? runtime::StateInfo::Role::Hyperparameter
                 : global->hasAttr("graph.optimizer_state")
                     ? runtime::StateInfo::Role::OptimizerState
                 : global->hasAttr("graph.buffer")
                     ? runtime::StateInfo::Role::Buffer
                 : global->hasAttr(graph::kReplicaIndexAttrName)
                     ? runtime::StateInfo::Role::ReplicaIndex
                     : runtime::StateInfo::Role::Parameter;
    state.countsMicroBatches = global && global->hasAttr(graph::kMicroBatchCounterAttrName);
    size_t bytes = state.numElements() * runtime::dtypeSize(state.dtype);
    if (!global || !appendPayload(global, bytes, model))
      return main.emitError("the initial value of state '")
             << state.name << "' cannot be packaged";
    runtime::WeightInfo w;
    static_cast<runtime::TensorInfo &>(w) = state;
    w.reference = false;
    state.weight = model.weights.size();
    model.weights.push_back(w);
    model.state.push_back(state);
  }
  // Outputs by their graph.name (or output<i>); state updates after them.
  for (auto [i, type] : llvm::enumerate(main.getResultTypes())) {
    auto info = infoOf(type, main.getResultAttrOfType<StringAttr>(i, "graph.name"),
                       main.getResultAttrOfType<TypeAttr>(i, "graph.element_type"),
                       "output", i);
    if (failed(info))
      return failure();
    if (main.getResultAttr(i, "graph.loss"))
      model.loss = info->name;
    auto updateRef = main.getResultAttrOfType<FlatSymbolRefAttr>(i, graph::kStateUpdateAttrName);
    if (!updateRef) {
      if (model.outputs.size() != i)
        return main.emitError("output ") << info->name << " follows the state updates";
      model.outputs.push_back(*info);
      continue;
    }
    auto it = llvm::find_if(model.state, [&](const runtime::StateInfo &s) {
      return s.name == updateRef.getValue();
    });
    if (it == model.state.end() || it->update >= 0)
      return main.emitError("state update of ") << updateRef << " has no state argument";
    it->update = i;
    it->perUpdate = static_cast<bool>(main.getResultAttr(i, graph::kPerUpdateAttrName));
  }
  if (auto optimizer = main->getAttrOfType<StringAttr>("graph.optimizer"))
    model.optimizer = optimizer.str();
  // Weights in the order of codegen-externalize-weights: first use in @main.
  llvm::StringSet<> seen;
  WalkResult walk = main.walk([&](ml_program::GlobalLoadConstOp load) {
    StringRef name = load.getGlobal().getLeafReference();
    if (!seen.insert(name).second)
      return WalkResult::advance();
    auto global = module.lookupSymbol<ml_program::GlobalOp>(name);
    auto info = tensorInfo(load.getType(), StringAttr::get(module.getContext(), name),
                           load.getLoc());
    if (!global || failed(info))
      return WalkResult::interrupt();
    runtime::WeightInfo w;
    static_cast<runtime::TensorInfo &>(w) = *info;
    size_t bytes = w.numElements() * runtime::dtypeSize(w.dtype);
    if (!appendPayload(global, bytes, model)) {
      global.emitError("weight payload cannot be packaged (expected a dense or "
                       "dense_resource value of ")
          << bytes << " bytes)";
      return WalkResult::interrupt();
    }
    model.weights.push_back(w);
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// Numbers the program's weight and constant variables by the executable's
/// weights, appending the constants the ipu phase turned into globals.
LogicalResult bindProgramWeights(ModuleOp mapped, runtime::MachineProgram &program,
                                 CompiledModel &model) {
  llvm::StringMap<int64_t> index;
  for (auto [i, w] : llvm::enumerate(model.weights))
    index[w.name] = i;
  for (runtime::Variable &var : program.variables) {
    if (var.base >= 0 || (var.kind != runtime::VarKind::Weight &&
                          var.kind != runtime::VarKind::Constant))
      continue;
    auto it = index.find(var.name);
    if (it != index.end()) {
      var.weight = it->second;
      continue;
    }
    auto global = mapped.lookupSymbol<ml_program::GlobalOp>(var.name);
    auto dense = global ? dyn_cast_if_present<DenseElementsAttr>(
                              global.getValue().value_or(Attribute()))
                        : DenseElementsAttr();
    if (!dense || dense.isSplat())
      return mapped.emitError("constant '")
             << var.name << "' of the machine program cannot be packaged";
    runtime::WeightInfo w;
    w.name = var.name;
    w.dtype = var.dtype;
    w.shape = var.shape;
    w.reference = false;
    if (dense.getElementType().isInteger(1)) {
      // Booleans are bit-packed in the attribute and one byte in memory.
      std::vector<char> bytes;
      for (bool b : dense.getValues<bool>())
        bytes.push_back(b ? 1 : 0);
      model.owned.push_back(std::move(bytes));
    } else {
      ArrayRef<char> raw = dense.getRawData();
      model.owned.emplace_back(raw.begin(), raw.end());
    }
    model.weightData.push_back(model.owned.back());
    var.weight = model.weights.size();
    index[var.name] = var.weight;
    model.weights.push_back(w);
  }
  return success();
}

/// The training pipeline's options of a compile.
static TrainingPipelineOptions trainingPipelineOptions(const CompileOptions &options) {
  TrainingPipelineOptions training = options.training;
  training.precision = options.graph.precision;
  training.partialsType = options.graph.partialsType;
  training.targetName = options.target.name;
  training.tiles = options.target.totalTiles();
  training.replicas = options.replicas;
  return training;
}

/// After an out-of-memory error mapping `module` (at the linalg phase):
/// maps it again with each lever the error could name -- a smaller
/// available memory proportion (less temporary memory per op), then, for
/// a training step that keeps every activation, recomputation
/// (`--recompute auto`: activations the backward pass computes again
/// instead of keeping; the step is built again from `forward`, the module
/// before the training pipeline), then more IPUs -- and says which is the
/// first that fits, or that none did: the levers in the order of what they
/// cost, cycles before chips. Only the pipelines up to planning and
/// allocation run, quietly; no code is generated. With pipeline stages the
/// ops are already on their IPUs, so more IPUs means new stages: that
/// lever is named, not tried.
void adviseOnOutOfMemory(ModuleOp module, ModuleOp forward, const CompileOptions &options,
                         const IPUPipelineOptions &ipu) {
  bool staged = module->hasAttr("graph.stages");
  struct Lever {
    std::string flag;
    double proportion;
    int64_t numIPUs;
    bool recompute = false;
  };
  SmallVector<Lever> levers;
  for (auto [p, text] : {std::pair(0.3, "0.3"), std::pair(0.15, "0.15")})
    if (p < ipu.availableMemoryProportion)
      levers.push_back({std::string("--available-memory-proportion ") + text, p,
                        options.target.numIPUs});
  if (forward && !staged)
    levers.push_back({"--recompute auto", ipu.availableMemoryProportion, options.target.numIPUs,
                      /*recompute=*/true});
  for (int64_t n = options.target.numIPUs * 2; n <= 16 && !staged; n *= 2)
    levers.push_back({"--num-ipus " + std::to_string(n), ipu.availableMemoryProportion, n});
  SmallVector<std::string> tried;
  for (const Lever &lever : levers) {
    llvm::Expected<target::IPUTarget> target =
        target::makeTarget(options.target.name, lever.numIPUs, options.target.tilesPerIPU);
    if (!target) {
      llvm::consumeError(target.takeError());
      continue;
    }
    OwningOpRef<ModuleOp> trial = (lever.recompute ? forward : module).clone();
    IPUPipelineOptions ipuOptions = ipu;
    ipuOptions.availableMemoryProportion = lever.proportion;
    ipuOptions.reportDir.clear();
    ipuOptions.explainPlans = false;
    bool fits = true;
    {
      ScopedDiagnosticHandler quiet(module->getContext(), [](Diagnostic &) { return success(); });
      if (lever.recompute) {
        PassManager build(module->getContext(), ModuleOp::getOperationName());
        TrainingPipelineOptions training = trainingPipelineOptions(options);
        training.recompute = "auto";
        buildTrainingPipeline(build, training);
        buildLinalgPipeline(build);
        fits = succeeded(build.run(*trial));
      }
      ipu::setTarget(*trial, *target);
      PassManager pm(module->getContext(), ModuleOp::getOperationName());
      buildIPUPipeline(pm, ipuOptions);
      fits = fits && succeeded(pm.run(*trial));
    }
    if (fits) {
      InFlightDiagnostic note = emitRemark(module.getLoc())
                                << "the model fits with " << lever.flag;
      if (!tried.empty())
        note << " (tried first, does not fit: " << llvm::join(tried, ", ") << ")";
      return;
    }
    tried.push_back(lever.flag);
  }
  if (staged)
    emitRemark(module.getLoc())
        << (tried.empty() ? std::string()
                          : "the model does not fit with " + llvm::join(tried, ", ") +
                                " either; ")
        << "with pipeline stages, move layers off the IPU that overflows (--layers-per-ipu), "
           "use more IPUs (--num-ipus with --pipeline auto), recompute activations "
           "(--recompute) or a smaller micro-batch";
  else if (!tried.empty())
    emitRemark(module.getLoc()) << "the model does not fit with " << llvm::join(tried, ", ")
                                << " either: reduce the batch or the model";
}

/// A pass pipeline of compileModule. Made on the compiling thread: built,
/// configured by options.configure, the dialects its passes need loaded
/// (loading one while another thread runs passes is a race), so that run()
/// may go on another thread. Each run is timed in a scope of its own under
/// options.timing, named by the first pass with a command-line name (a
/// nested pipeline's adaptor has none): MLIR's pass timer tells passes apart
/// by address, and with one scope for every pipeline of a compile, a pass at
/// the address of an earlier pipeline's (freed) pass was counted as that
/// pass, and --mlir-timing lost ipu-map-tiles and others. The IR is
/// verified after every pass with options.verifyEachPass, else once after
/// the last.
class Pipeline {
public:
  Pipeline(MLIRContext *context, const CompileOptions &options,
           function_ref<void(OpPassManager &)> build)
      : pm(context, ModuleOp::getOperationName()), timing(options.timing),
        verifyEachPass(options.verifyEachPass) {
    build(pm);
    pm.enableVerifier(options.verifyEachPass);
    configured = options.configure ? options.configure(pm) : success();
    DialectRegistry registry;
    pm.getDependentDialects(registry);
    context->appendDialectRegistry(registry);
    for (StringRef name : registry.getDialectNames())
      context->getOrLoadDialect(name);
  }

  LogicalResult run(ModuleOp module) {
    if (failed(configured))
      return failure();
    TimingScope scope;
    if (timing) {
      std::string name = "pipeline";
      for (Pass &pass : pm.getPasses())
        if (!pass.getArgument().empty()) {
          name += " from " + pass.getArgument().str();
          break;
        }
      // A distinct id per scope, so no two pipelines share one.
      static std::atomic<uintptr_t> scopes{0};
      scope = timing->nest(reinterpret_cast<const void *>(++scopes), [&] { return name; });
      pm.enableTiming(scope);
    }
    if (failed(pm.run(module)))
      return failure();
    return verifyEachPass ? success() : verify(module);
  }

private:
  PassManager pm;
  TimingScope *timing;
  bool verifyEachPass;
  LogicalResult configured = success();
};

/// The cycles the IPU model will count for `program` in an executable with
/// `metadata`: the target made as the runtime makes it from the metadata,
/// costed on every core.
llvm::Expected<runtime::CostSummary>
estimateExecutableCycles(const runtime::ExecutableMetadata &metadata,
                         const runtime::MachineProgram &program) {
  llvm::Expected<target::IPUTarget> target =
      target::makeTarget(metadata.target, metadata.numIPUs, metadata.tilesPerIPU);
  if (!target)
    return target.takeError();
  runtime::PhasePool pool(llvm::hardware_concurrency().compute_thread_count());
  return runtime::estimateProgramCost(metadata, program, *target, &pool);
}

/// Runs `work` on a thread of its own, or at once where the context keeps
/// to one thread (--mlir-disable-threading, which IR printing needs).
/// wait() returns its result; the destructor waits too.
class Concurrently {
public:
  Concurrently(MLIRContext *context, std::function<LogicalResult()> work) {
    if (context->isMultithreadingEnabled())
      thread = std::thread([this, work = std::move(work)] { result = work(); });
    else
      result = work();
  }
  Concurrently(const Concurrently &) = delete;
  Concurrently &operator=(const Concurrently &) = delete;
  ~Concurrently() { (void)wait(); }
  LogicalResult wait() {
    if (thread.joinable())
      thread.join();
    return result;
  }

private:
  LogicalResult result = success();
  std::thread thread;
};

/// A module of `mapped`'s vertex kernels, with what they refer to.
OwningOpRef<ModuleOp> vertexKernels(ModuleOp mapped) {
  OwningOpRef<ModuleOp> kernels = ModuleOp::create(mapped.getLoc());
  OpBuilder b = OpBuilder::atBlockEnd(kernels->getBody());
  SymbolTable symbols(mapped);
  llvm::StringSet<> copied;
  for (auto kernel : mapped.getOps<func::FuncOp>())
    if (kernel->hasAttr(ipu::kVertexAttrName))
      copied.insert(kernel.getSymName());
  std::function<void(Operation *)> copyUses = [&](Operation *from) {
    if (std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(from))
      for (const SymbolTable::SymbolUse &use : *uses) {
        StringRef name = use.getSymbolRef().getRootReference().getValue();
        if (Operation *symbol = symbols.lookup(name); symbol && copied.insert(name).second) {
          copyUses(symbol);
          b.clone(*symbol);
        }
      }
  };
  for (auto kernel : mapped.getOps<func::FuncOp>())
    if (kernel->hasAttr(ipu::kVertexAttrName)) {
      copyUses(kernel);
      b.clone(*kernel);
    }
  return kernels;
}

} // namespace

LogicalResult compileModule(ModuleOp module, const CompileOptions &options,
                            CompiledModel *model) {
  if (!isPhaseAvailable(options.compileTo))
    return emitError(module.getLoc())
           << "--compile-to=" << phaseName(options.compileTo)
           << " is not implemented in this version of Tessera; available "
              "phases: "
           << availablePhaseList();
  if (options.compileTo == Phase::Input)
    return success();
  // The passes take valid IR: each pipeline verifies what it makes
  // (Pipeline::run), and this what the first one takes.
  if (!options.verifyEachPass && failed(verify(module)))
    return failure();
  auto runPipeline = [&](function_ref<void(OpPassManager &)> build) {
    return Pipeline(module->getContext(), options, build).run(module);
  };
  if (options.compileTo == Phase::Training && !options.training.enabled)
    return emitError(module.getLoc())
           << "--compile-to=training builds a training step: add --train (and "
              "--loss, --optimizer)";
  GraphPipelineOptions graphOptions = options.graph;
  graphOptions.foldGlobalLayouts &= !options.training.enabled;
  // A training step takes its precision after the loss is built.
  if (options.training.enabled) {
    graphOptions.precision = "fp32";
    graphOptions.partialsType.clear();
  }
  if (failed(runPipeline([&](OpPassManager &pm) {
        buildGraphPipeline(pm, graphOptions);
      })))
    return failure();
  if (options.afterGraph)
    options.afterGraph(module);
  if (options.compileTo < Phase::Partitioned)
    return success();
  // Stages are placed on the forward graph (a partitioned module fed back
  // in keeps its placement).
  bool annotated = false, placed = module->hasAttr("graph.stages");
  module.walk([&](Operation *op) { annotated |= graph::placedIpu(op).has_value(); });
  if (!placed && assignsStages(options.stages, annotated) &&
      failed(runPipeline([&](OpPassManager &pm) {
        buildStagePipeline(pm, options.stages, options.training, options.target.name,
                           options.target.numIPUs, options.target.tilesPerIPU);
      })))
    return failure();
  int64_t pipelineStages = 1;
  // How the stages execute matters to the machine program only.
  if (auto stages = module->getAttrOfType<ArrayAttr>("graph.stages");
      stages && options.stages.pipelined && stages.size() > 1 &&
      options.compileTo >= Phase::Ipu) {
    pipelineStages = stages.size();
    if (options.stages.microBatches < pipelineStages)
      return emitError(module.getLoc())
             << "a pipeline of " << pipelineStages << " stages needs at least "
             << pipelineStages << " micro-batches at a time, one per stage, but gets "
             << options.stages.microBatches << ": use "
             << (options.training.enabled
                     ? "a gradient accumulation (--gradient-accumulation, "
                       "Training.gradientAccumulation) of "
                     : "device iterations (--device-iterations, deviceIterations) of ")
             << pipelineStages << " or more, or sharded execution (--execution sharded, "
             << "ShardedExecution)";
  }
  if (options.compileTo < Phase::Training)
    return success();
  // A training-phase module fed back in already has its optimizer.
  auto main = module.lookupSymbol<func::FuncOp>("main");
  // Its gradients are summed over as many replicas as it was made for.
  if (auto made = module->getAttrOfType<IntegerAttr>(graph::kReplicasAttrName);
      (made ? made.getInt() : 1) != options.replicas &&
      (options.training.enabled || made))
    if (main && main->hasAttr("graph.optimizer"))
      return emitError(module.getLoc())
             << "this training step was made for " << (made ? made.getInt() : 1)
             << " replica(s), not " << options.replicas
             << ": compile the model itself with --replicas " << options.replicas;
  // An out-of-memory error's advice may try recomputation: a training step
  // that keeps every activation is built again from its forward graph.
  OwningOpRef<ModuleOp> forward;
  bool buildsStep = options.training.enabled && !(main && main->hasAttr("graph.optimizer"));
  if (buildsStep && (options.training.recompute.empty() || options.training.recompute == "none"))
    forward = module.clone();
  if (buildsStep &&
      failed(runPipeline([&](OpPassManager &pm) {
        buildTrainingPipeline(pm, trainingPipelineOptions(options));
      })))
    return failure();
  // Inference replicas only draw their own random numbers.
  if (!options.training.enabled && options.replicas > 1 &&
      failed(runPipeline([&](OpPassManager &pm) {
        pm.addPass(graph::createGraphReplicate({options.replicas, "mean"}));
      })))
    return failure();
  if (options.compileTo < Phase::Linalg)
    return success();
  // Inference models pass through partitioning unchanged.
  if (failed(runPipeline(buildLinalgPipeline)))
    return failure();
  if (options.compileTo < Phase::Ipu)
    return success();
  if (options.compileTo == Phase::Ipu) {
    ipu::setTarget(module, options.target);
    IPUPipelineOptions ipuOptions = options.ipu;
    ipuOptions.pipelineStages = pipelineStages;
    return runPipeline([&](OpPassManager &pm) { buildIPUPipeline(pm, ipuOptions); });
  }

  // The host reference code is @main as it is; the machine program is
  // planned on a copy, whose vertex kernels are lowered on their own. An
  // executable keeps the reference code as it is before lowering (MLIR
  // bytecode, which a run asking for it lowers): lowering it is as much
  // work as the rest of a compile (ResNet-50's training step: 22 of 40 s),
  // for a path only differential tests run. The llvm phase lowers it on a
  // thread of its own while the tiles are planned, and it then heads the
  // module, the kernels joining it. Both start from clones: on an
  // out-of-memory error, the advice plans the module as it is.
  CompiledModel local;
  CompiledModel &compiled = model ? *model : local;
  compiled.pipelineStages = pipelineStages;
  if (failed(describeModel(module, compiled)))
    return failure();
  if (options.weightsKnown)
    options.weightsKnown(compiled);
  OwningOpRef<ModuleOp> mapped = module.clone();
  ipu::setTarget(*mapped, options.target);
  OwningOpRef<ModuleOp> reference = module.clone();
  IPUPipelineOptions ipuOptions = options.ipu;
  ipuOptions.pipelineStages = pipelineStages;
  bool lowerReferenceNow = options.compileTo != Phase::Executable;
  // Every pipeline made before the first runs: each loads its dialects.
  Pipeline lowerReference(module->getContext(), options, [&](OpPassManager &pm) {
    if (lowerReferenceNow)
      buildHostLoweringPipeline(pm, options.vectorBits);
    else
      buildPrepareHostReferencePipeline(pm);
  });
  Pipeline plan(module->getContext(), options,
                [&](OpPassManager &pm) { buildIPUPipeline(pm, ipuOptions); });
  Pipeline lowerKernels(module->getContext(), options, [&](OpPassManager &pm) {
    buildLowerToLLVMPipeline(pm, options.vectorBits);
  });
  if (!lowerReferenceNow) {
    if (failed(lowerReference.run(*reference)))
      return failure();
    llvm::raw_string_ostream os(compiled.referenceMLIR);
    if (failed(writeBytecodeToFile(reference->getOperation(), os)))
      return reference->emitError("could not write the host reference code as bytecode");
    reference = nullptr;
  }
  std::optional<Concurrently> referenceLowered;
  if (lowerReferenceNow)
    referenceLowered.emplace(module->getContext(),
                             [&]() -> LogicalResult { return lowerReference.run(*reference); });
  auto referenceDone = [&] {
    return referenceLowered ? referenceLowered->wait() : success();
  };
  {
    // An out-of-memory error gets a note saying which change makes the
    // model fit: tried, not guessed.
    bool outOfMemory = false;
    LogicalResult mappedOk = success();
    {
      ScopedDiagnosticHandler watch(module->getContext(), [&](Diagnostic &diag) {
        outOfMemory |= diag.getSeverity() == DiagnosticSeverity::Error &&
                       StringRef(diag.str()).starts_with(runtime::kOutOfTileMemory);
        return failure(); // and on to the tool's handler
      });
      mappedOk = plan.run(*mapped);
    }
    if (failed(mappedOk)) {
      (void)referenceDone();
      if (outOfMemory)
        adviseOnOutOfMemory(module, forward ? *forward : ModuleOp(), options, ipuOptions);
      return failure();
    }
  }
  FailureOr<runtime::MachineProgram> program = ipu::exportMachineProgram(*mapped);
  if (failed(program) || failed(bindProgramWeights(*mapped, *program, compiled)))
    return failure();
  program->residentInputs = compiled.state.size();
  // The optimizer's update, stored only when a weight update commits, runs
  // once per update.
  std::vector<size_t> perUpdateOutputs;
  for (const runtime::StateInfo &s : compiled.state)
    if (s.perUpdate && s.update >= 0)
      perUpdateOutputs.push_back(s.update);
  runtime::markPerUpdateSteps(*program, perUpdateOutputs);
  compiled.program = std::move(*program);
  if (options.compileTo == Phase::Executable)
    compiled.estimate = std::async(std::launch::async, [&compiled, &options] {
      // What of the metadata the estimate reads (the target, the host
      // streams, the state's updates, the pipeline's fill): as the
      // executable will have it.
      runtime::ExecutableMetadata signature;
      signature.target = options.target.name;
      signature.numIPUs = options.target.numIPUs;
      signature.tilesPerIPU = options.target.tilesPerIPU;
      signature.inputs = compiled.inputs;
      signature.outputs = compiled.outputs;
      signature.state = compiled.state;
      signature.replicas = options.replicas;
      signature.pipelineStages = compiled.pipelineStages;
      llvm::Expected<runtime::CostSummary> cost =
          estimateExecutableCycles(signature, *compiled.program);
      if (!cost) {
        llvm::consumeError(cost.takeError()); // said when waited for
        return std::optional<runtime::CostSummary>();
      }
      return std::optional(std::move(*cost));
    }).share();
  OwningOpRef<ModuleOp> kernels = vertexKernels(*mapped);
  mapped = nullptr;
  if (options.kernelCache)
    takeCachedKernels(*kernels, *options.kernelCache);
  LogicalResult kernelsLowered = lowerKernels.run(*kernels);
  if (failed(referenceDone()) || failed(kernelsLowered))
    return failure();
  // An entry someone else could have written was left unread: refused.
  if (options.kernelCache && !options.kernelCache->refusal.empty())
    return module.emitError(options.kernelCache->refusal);
  // The module becomes the lowered reference code, if any, then the kernels.
  module.getBody()->clear();
  ModuleOp head = reference ? *reference : *kernels;
  module->setAttrs(head->getAttrDictionary());
  if (reference)
    module.getBody()->getOperations().splice(module.getBody()->end(),
                                             reference->getBody()->getOperations());
  return appendLoweredModule(module, *kernels);
}

LogicalResult setInputBatch(ModuleOp module, int64_t batch) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return module.emitError("the model has no @main function");
  SmallVector<Type> types(main.getArgumentTypes());
  for (auto [i, type] : llvm::enumerate(types)) {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (!ranked || ranked.getRank() == 0 || ranked.getDimSize(0) == batch)
      continue;
    auto name = main.getArgAttrOfType<StringAttr>(i, "graph.name");
    if (!ShapedType::isDynamic(ranked.getDimSize(0)))
      return main.emitError("micro-batch size ")
             << batch << ": input '" << (name ? name.getValue() : StringRef("?"))
             << "' has a fixed batch of " << ranked.getDimSize(0)
             << "; export the model with a symbolic batch (dynamic_axes) or with "
                "batch "
             << batch;
    SmallVector<int64_t> shape(ranked.getShape());
    shape[0] = batch;
    types[i] = ranked.clone(shape);
    main.getArgument(i).setType(types[i]);
  }
  main.setType(FunctionType::get(module.getContext(), types, main.getResultTypes()));
  return success();
}

LogicalResult writeExecutableFile(ModuleOp llvmModule, const CompiledModel &model,
                                  const HostCPU &cpu, runtime::ExecutableMetadata metadata,
                                  runtime::ExecutableWriter &writer, TimingScope *timing,
                                  KernelCache *kernelCache, std::string *copyErrors) {
  if (runtime::iterationsPerRun(metadata) > 1)
    for (const runtime::TensorInfo &in : model.inputs)
      if (in.shape.empty())
      {
        bool accumulating = metadata.gradientAccumulation > 1;
        std::string flag = accumulating ? "--gradient-accumulation" : "--device-iterations";
        return emitError(llvmModule.getLoc())
               << flag << " "
               << (accumulating ? metadata.gradientAccumulation : metadata.deviceIterations)
               << " needs a batch dimension (dimension 0) on every input; input '"
               << in.name << "' is a scalar (compile with " << flag << " 1)";
      }
  if (metadata.outputMode == runtime::ExecutableMetadata::OutputMode::Sum)
    for (const runtime::TensorInfo &out : model.outputs)
      if (!runtime::summable(out.dtype))
        return emitError(llvmModule.getLoc())
               << "--output-mode sum cannot add output '" << out.name << "' of type "
               << runtime::dtypeName(out.dtype) << " (it adds f32, f64, i32 and i64)";
  if (metadata.outputMode == runtime::ExecutableMetadata::OutputMode::EveryN &&
      runtime::iterationsPerRun(metadata) % metadata.outputEvery != 0)
    return emitError(llvmModule.getLoc())
           << "--output-mode every-" << metadata.outputEvery << " must divide the "
           << runtime::iterationsPerRun(metadata)
           << " iterations of a run (device iterations x gradient accumulation)";
  metadata.inputs = model.inputs;
  metadata.outputs = model.outputs;
  metadata.weights = model.weights;
  metadata.state = model.state;
  metadata.loss = model.loss;
  metadata.optimizer = model.optimizer;
  TimingScope none;
  TimingScope &parent = timing ? *timing : none;
  FailureOr<HostCode> native = emitHostObjects(llvmModule, cpu, timing, kernelCache);
  if (failed(native))
    return failure();
  if (model.program) {
    // The estimate the IPU model will count, carried by the executable:
    // begun by compileModule, waited for here.
    TimingScope estimateTimer = parent.nest("wait for the cycle estimate");
    std::optional<runtime::CostSummary> cost;
    if (model.estimate.valid())
      cost = model.estimate.get();
    if (!cost) {
      // Not begun, or failed: again here, for its error.
      llvm::Expected<runtime::CostSummary> again =
          estimateExecutableCycles(metadata, *model.program);
      if (!again)
        return emitError(llvmModule.getLoc()) << llvm::toString(again.takeError());
      cost = std::move(*again);
    }
    metadata.estimate = {cost->totalCycles, cost->computeCycles(), cost->exchangeCycles(),
                         cost->syncCycles()};
  }
  // The program calls each kernel by the name its code gives it.
  std::optional<runtime::MachineProgram> program = model.program;
  if (program)
    for (runtime::ComputeSet &cs : program->computeSets)
      for (runtime::Kernel &kernel : cs.kernels)
        if (auto it = native->entryNames.find(kernel.symbol); it != native->entryNames.end())
          kernel.symbol = it->second;
  // The code section: the objects, then the reference code's bytecode.
  std::string code;
  for (const std::string &object : native->objects) {
    code += object;
    metadata.codeObjects.push_back(object.size());
  }
  code += model.referenceMLIR;
  metadata.referenceMLIR = model.referenceMLIR.size();
  metadata.program = std::move(program);
  metadata.hostTriple = llvm::sys::getProcessTriple();
  metadata.hostCPU = cpu.name;
  metadata.hostFeatures = cpu.features;
  TimingScope writeTimer = parent.nest("write the executable");
  if (llvm::Error err =
          writer.finish(std::move(metadata), code, model.weightData, copyErrors))
    return emitError(llvmModule.getLoc()) << llvm::toString(std::move(err));
  return success();
}

llvm::Expected<std::string> compileHostReference(llvm::StringRef referenceMLIR) {
  auto fail = [](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the executable's host reference code " + what +
                                       " (damaged or forged; recompile the model)");
  };
  if (!isBytecode(llvm::MemoryBufferRef(referenceMLIR, "tessera-reference")))
    return fail("is not MLIR bytecode");
  DialectRegistry registry;
  registerTesseraDialects(registry);
  MLIRContext context(registry);
  std::string diagnostics;
  ScopedDiagnosticHandler collect(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      diagnostics += (diagnostics.empty() ? "" : "; ") + diag.str();
    return success();
  });
  // The reader wants its buffer as aligned as the resources it holds (the
  // code section puts the bytecode wherever the objects end).
  std::unique_ptr<llvm::WritableMemoryBuffer> buffer =
      llvm::WritableMemoryBuffer::getNewUninitMemBuffer(referenceMLIR.size(),
                                                        "tessera-reference", llvm::Align(64));
  if (!buffer)
    return fail("does not fit in memory");
  std::memcpy(buffer->getBufferStart(), referenceMLIR.data(), referenceMLIR.size());
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module)
    return fail("does not parse (" + diagnostics + ")");
  auto main = module->lookupSymbol<func::FuncOp>("main");
  if (!main || main.isExternal())
    return fail("has no @main");
  llvm::Expected<HostCPU> cpu = resolveHostCPU("native");
  if (!cpu)
    return cpu.takeError();
  PassManager pm(&context);
  buildLowerToLLVMPipeline(pm, vectorBitsOf(*cpu));
  // A module this compiler made lowers; one that does not was made by
  // another build or edited.
  if (failed(pm.run(*module)))
    return fail("does not lower (" + diagnostics + ")");
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> translated = translateHostReference(*module, llvmContext);
  if (!translated)
    return fail("does not translate to LLVM IR (" + diagnostics + ")");
  return runtime::compileReferenceObject(*translated);
}

} // namespace tessera
