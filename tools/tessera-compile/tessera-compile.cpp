//===- tessera-compile.cpp - ahead-of-time compiler driver ---------------===//
//
// tessera-compile model.onnx [-o out] [--compile-to=<phase>] [--input-shape
// name=1x3x224x224]... A thin layer over the Compiler library: options in,
// diagnostics and the output file out. MLIR's standard flags are kept
// (--mlir-print-ir-after-all, --mlir-timing, crash reproducers, ...).
//
//===----------------------------------------------------------------------===//

#include "tessera/Codegen/HostCodegen.h"
#include "tessera/Compiler/BuildExecutable.h"
#include "tessera/Compiler/CommandCache.h"
#include "tessera/Compiler/Compiler.h"
#include "tessera/Compiler/Registration.h"
#include "tessera/Dialect/Graph/Analysis/ModelStats.h"
#include "tessera/Dialect/IPU/IR/IPU.h"
#include "tessera/Importers/TorchScript/TorchScriptImporter.h"
#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/FileUtils.h"
#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Runtime/PhasePool.h"
#include "tessera/Runtime/ProgramCost.h"
#include "tessera/Runtime/Tensor.h"
#include "tessera/Target/IPUTarget.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("tessera-compile options");
cl::OptionCategory mlirCategory("MLIR options (timing, IR printing, crash "
                                "reproducers)");

/// --help shows Tessera's options and MLIR's --mlir-* ones, not the
/// hundreds of backend flags the LLVM dylib registers (--help-hidden does).
void organizeHelp() {
  for (auto &entry : cl::getRegisteredOptions()) {
    if (entry.first.starts_with("mlir-"))
      entry.second->addCategory(mlirCategory);
  }
  cl::HideUnrelatedOptions({&category, &mlirCategory});
}

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx|model.pt|.mlir>"),
                               cl::Required, cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Output file ('-' for stdout)"),
                                cl::value_desc("path"), cl::init("-"),
                                cl::cat(category));
cl::opt<std::string> compileTo(
    "compile-to",
    cl::desc("Stop after this phase: input, graph, training, partitioned, "
             "linalg, ipu, llvm, executable"),
    cl::value_desc("phase"), cl::init("executable"), cl::cat(category));
cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc("Shape of a graph input, fixing symbolic dims "
             "(repeat or comma-separate: x=1x3x224x224,mask=1x128)"),
    cl::value_desc("name=DxD..."), cl::CommaSeparated, cl::cat(category));
cl::list<std::string> inputTypes(
    "input-type",
    cl::desc("Element type of an input (f32, f16, bf16, f64, i64, i32, i16, "
             "i8, ui8, i1): TorchScript records none and takes f32 (repeat or "
             "comma-separate: ids=i64,mask=i1)"),
    cl::value_desc("name=type"), cl::CommaSeparated, cl::cat(category));
cl::list<std::string> constantInputs(
    "constant-input",
    cl::desc("Bind a graph input to this value at compile time (.npy or ONNX "
             "TensorProto .pb): the model is specialized for it and the input "
             "leaves the executable's signature (for inputs that are shapes, "
             "axes or sizes)"),
    cl::value_desc("name=file"), cl::cat(category));
cl::opt<bool> emitBytecode("emit-bytecode",
                           cl::desc("Write MLIR bytecode instead of text"),
                           cl::init(false), cl::cat(category));
cl::opt<bool> verifyEach("verify-each",
                         cl::desc("Verify the IR after every pass, as tessera-opt does "
                                  "(slower; finds the pass that breaks it). By default "
                                  "it is verified before the first pipeline and after "
                                  "each"),
                         cl::init(false), cl::cat(category));
cl::opt<bool> summary("summary",
                      cl::desc("Print ops by kind, parameters and FLOPs to "
                               "stdout (with -o, the IR still goes there); for "
                               "an executable, also its estimated cycles, "
                               "samples/s and costliest steps"),
                      cl::init(false), cl::cat(category));
cl::opt<unsigned> summarySteps(
    "summary-steps",
    cl::desc("How many of the costliest steps --summary lists (0: every step; default 10)"),
    cl::init(10), cl::cat(category));
cl::opt<bool> noOutput("no-output",
                       cl::desc("Compile but write no IR (with --summary)"),
                       cl::init(false), cl::cat(category));
cl::opt<bool> listOps("list-onnx-ops",
                      cl::desc("List the ONNX operators Tessera imports at "
                               "--onnx-opset and exit"),
                      cl::init(false), cl::cat(category));
cl::opt<bool> listTorchScriptOps(
    "list-torchscript-ops",
    cl::desc("List the aten operators Tessera converts to graph ops and exit "
             "(other operators are evaluated at compile time when their "
             "inputs are constants)"),
    cl::init(false), cl::cat(category));
cl::opt<int> listOpset("onnx-opset", cl::desc("Opset for --list-onnx-ops"),
                       cl::init(tessera::onnx_importer::kMaxOpset),
                       cl::cat(category));
cl::opt<std::string> targetName("target",
                               cl::desc("IPU generation: ipu1, ipu2 or bow"),
                               cl::value_desc("name"), cl::init("ipu2"),
                               cl::cat(category));
cl::opt<int64_t> numIPUs("num-ipus", cl::desc("IPUs per replica"), cl::init(1),
                         cl::cat(category));
cl::opt<int64_t> tilesPerIPU(
    "tiles-per-ipu",
    cl::desc("Model a smaller chip with this many tiles per IPU (as Poplar's "
             "IPUModel tilesPerIPU)"),
    cl::init(0), cl::cat(category));
cl::OptionCategory stagesCategory("Pipeline stages over IPUs (PopTorch's and optimum's)");
cl::opt<std::string> pipelineMode(
    "pipeline",
    cl::desc("How ops are placed on the IPUs: manual (the model's __ipu_number / "
             "__pipeline_stage annotations, or --layers-per-ipu) or auto (the stages whose "
             "slowest is fastest under the cost model and each IPU's memory). Without it, "
             "annotations or --layers-per-ipu place ops, and otherwise the IPUs' tiles form "
             "one pool"),
    cl::value_desc("manual|auto"), cl::cat(stagesCategory));
cl::list<int64_t> layersPerIpu(
    "layers-per-ipu",
    cl::desc("Layers (the model's repeated blocks) on each IPU, optimum-graphcore's "
             "layers_per_ipu: -1 shares the rest evenly, 0 leaves an IPU without layers; "
             "the embeddings run on IPU 0"),
    cl::CommaSeparated, cl::value_desc("N,..."), cl::cat(stagesCategory));
cl::list<std::string> beginBlocks(
    "begin-block",
    cl::desc("PopTorch's BeginBlock by module path: PATH=IPU or PATH=IPU:STAGE; the first op "
             "under PATH (a TorchScript module path or ONNX node name prefix, such as "
             "encoder.layers.4) and what follows run on IPU, until the next block"),
    cl::CommaSeparated, cl::value_desc("PATH=IPU[:STAGE],..."), cl::cat(stagesCategory));
cl::opt<std::string> executionMode(
    "execution",
    cl::desc("How stages run: pipelined (the default: each IPU works on another "
             "micro-batch, PopTorch's PipelinedExecution; needs at least as many micro-batches "
             "as stages) or sharded (one micro-batch walks the IPUs in turn, "
             "ShardedExecution)"),
    cl::value_desc("pipelined|sharded"), cl::init("pipelined"), cl::cat(stagesCategory));
cl::opt<std::string> partialsType(
    "partials-type",
    cl::desc("Type matmuls and convolutions of fp16 values add their partial sums in "
             "(PopTorch's setPartialsType): float (the default: rounded once to fp16) or "
             "half; --precision's second number sets it too"),
    cl::value_desc("float|half"), cl::cat(category));
cl::opt<std::string> precisionMode(
    "precision",
    cl::desc("fp32 (default), fp16.32 or fp16.16: weights stored and every op computed in "
             "fp16, as PopTorch's model.half(), with matmul and convolution partial sums in "
             "fp32 (fp16.32) or fp16 (fp16.16); inputs and outputs stay f32"),
    cl::value_desc("MODE"), cl::init("fp32"), cl::cat(category));
cl::opt<double> availableMemoryProportion(
    "available-memory-proportion",
    cl::desc("Share of each tile's memory a vertex's output and receive "
             "buffers may take while planning (0, 1]; PopTorch's "
             "availableMemoryProportion"),
    cl::init(0.6), cl::cat(category));
cl::opt<bool> explainPlans(
    "explain-plans",
    cl::desc("Print a remark per op with its tile plan and estimated cycles, "
             "and per reduction why it was split or not (a cache hit plans "
             "nothing)"),
    cl::init(false), cl::cat(category));
cl::opt<int64_t> deviceIterations(
    "device-iterations",
    cl::desc("Batches one run loops over on the device (PopTorch's "
             "deviceIterations): inputs and outputs carry this many times "
             "the compiled batch in dimension 0"),
    cl::init(1), cl::cat(category));
cl::opt<int64_t> replicas(
    "replicas",
    cl::desc("Copies of the model on as many IPU sets, each with its own slice of "
             "the data (PopTorch's replicationFactor); training sums their "
             "gradients with a cross-replica all-reduce"),
    cl::init(1), cl::cat(category));
cl::opt<std::string> outputMode(
    "output-mode",
    cl::desc("Which iterations' outputs a run returns (PopTorch's outputMode): all, "
             "final, sum or every-N; default final with --train, all otherwise"),
    cl::value_desc("MODE"), cl::cat(category));
cl::opt<std::string> hostCPU(
    "host-cpu",
    cl::desc("CPU the executable's native code (vertex kernels, host reference) is "
             "generated for: native (this machine's, the default), generic (any host of "
             "this architecture) or an LLVM CPU name such as x86-64-v3"),
    cl::init("native"), cl::cat(category));
cl::opt<std::string> reportPath(
    "report",
    cl::desc("Write the report page here (DIR/report.html, its data in DIR/report.json): "
             "tile memory, liveness, the steps' cycles and plans; written also when "
             "the program does not fit"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string> cacheDir(
    "cache-dir",
    cl::desc("Executable cache directory (default: $TESSERA_CACHE_DIR); a "
             "second compile of the same model with the same options is "
             "copied from it"),
    cl::value_desc("DIR"), cl::cat(category));
cl::OptionCategory trainingCategory("Training (PopTorch's trainingModel)");
cl::opt<bool> train("train",
                    cl::desc("Compile a training step: loss, gradients and an "
                             "optimizer update of every trainable weight"),
                    cl::init(false), cl::cat(trainingCategory));
cl::opt<std::string> lossSpec(
    "loss",
    cl::desc("cross-entropy, nll, mse, l1 or bce-with-logits, with options as "
             "NAME:key=value,... (label-smoothing, ignore-index, reduction=mean|sum); "
             "or output:NAME for a loss the model computes"),
    cl::init("cross-entropy"), cl::cat(trainingCategory));
cl::opt<std::string> lossOutput(
    "loss-output", cl::desc("The model output the loss reads (default: the first)"),
    cl::value_desc("NAME"), cl::cat(trainingCategory));
cl::opt<std::string> optimizerSpec(
    "optimizer",
    cl::desc("sgd, adam, adamw, rmsprop or lamb, with hyperparameters as "
             "NAME:key=value,... (lr, momentum, dampening, nesterov, weight-decay, beta1, "
             "beta2, eps, amsgrad, alpha, centered, bias-correction, max-weight-norm, "
             "max-grad-norm); defaults are torch.optim's and PopTorch's LAMB's (sgd lr 0.01)"),
    cl::init("sgd"), cl::cat(trainingCategory));
cl::opt<int64_t> microBatchSize(
    "micro-batch-size",
    cl::desc("Samples per weight update on one replica: dimension 0 of every input "
             "(PopTorch's batch_size)"),
    cl::init(0), cl::cat(trainingCategory));
cl::opt<int64_t> gradientAccumulation(
    "gradient-accumulation",
    cl::desc("Micro-batches whose gradients make one weight update (PopTorch's "
             "gradientAccumulation); the program runs once per micro-batch"),
    cl::init(1), cl::cat(trainingCategory));
cl::opt<std::string> accumulationReduction(
    "accumulation-reduction",
    cl::desc("mean (default: as one batch G times larger) or sum of the accumulated "
             "gradients (PopTorch's accumulationAndReplicationReductionType)"),
    cl::init("mean"), cl::cat(trainingCategory));
cl::opt<std::string> recomputeMode(
    "recompute",
    cl::desc("Activations the backward pass computes again instead of keeping: none, "
             "checkpoint-every-layer (optimum's recompute_checkpoint_every_layer), stage-inputs "
             "(PopART's pipeline recomputation) or auto "
             "(the checkpoints minimising the estimated peak, one more forward pass at most); "
             "results do not change"),
    cl::value_desc("MODE"), cl::cat(trainingCategory));
cl::opt<bool> stochasticRounding(
    "stochastic-rounding",
    cl::desc("Round fp16 weights' updates stochastically (PopTorch's "
             "enableStochasticRounding): unbiased, keyed by --seed and the step, so "
             "updates smaller than half an fp16 step still add up"),
    cl::init(false), cl::cat(trainingCategory));
cl::opt<std::string> lossScaling(
    "loss-scaling",
    cl::desc("Scale the loss's gradient so fp16 gradients do not underflow: a factor S "
             "(PopTorch's loss_scaling) or "
             "auto (PopART's automatic loss scaling, from 1: halved when more than 1e-7 of "
             "the gradients exceed 1/8 of fp16's largest value, doubled otherwise, up to 2^15; an update "
             "with inf or NaN gradients is skipped and reported)"),
    cl::value_desc("S|auto"), cl::cat(trainingCategory));
cl::list<std::string> freezeWeights(
    "freeze", cl::desc("Weights (initializer or parameter names) that are not trained"),
    cl::CommaSeparated, cl::value_desc("NAME,..."), cl::cat(trainingCategory));

cl::opt<bool> progress("progress",
                       cl::desc("Show phase and pass progress on stderr "
                                "(default: when stderr is a terminal)"),
                       cl::init(false), cl::cat(category));

/// --loss NAME:key=value,... and the other training flags (their ranges are
/// checked with the rest of the request).
LogicalResult parseTrainingOptions(tessera::TrainingPipelineOptions &t) {
  t.enabled = true;
  if (llvm::Error err = tessera::parseLossSpec(lossSpec, t)) {
    llvm::errs() << "error: " << llvm::toString(std::move(err)) << "\n";
    return failure();
  }
  t.lossOutput = lossOutput;
  t.optimizer = optimizerSpec;
  t.freeze.assign(freezeWeights.begin(), freezeWeights.end());
  t.stochasticRounding = stochasticRounding;
  t.lossScaling = lossScaling;
  if (recomputeMode.getNumOccurrences()) {
    if (recomputeMode != "none" && recomputeMode != "checkpoint-every-layer" &&
        recomputeMode != "stage-inputs" && recomputeMode != "auto") {
      llvm::errs() << "error: --recompute " << recomputeMode
                   << ": use none, checkpoint-every-layer, stage-inputs or auto\n";
      return failure();
    }
    t.recompute = recomputeMode;
  }
  t.gradientAccumulation = gradientAccumulation;
  t.accumulationReduction = accumulationReduction;
  return success();
}

/// Prints "phase: pass (n)" on one terminal line, overwritten as passes run.
class ProgressPrinter : public PassInstrumentation {
public:
  explicit ProgressPrinter(std::string phase) : phase(std::move(phase)) {}
  void runBeforePass(Pass *pass, Operation *) override {
    if (pass->getArgument().empty())
      return; // the adaptors that nest pipelines under functions
    llvm::errs() << "\r\033[K[" << phase << "] " << pass->getArgument() << " ("
                 << ++count << ")";
    llvm::errs().flush();
  }
  ~ProgressPrinter() override { llvm::errs() << "\r\033[K"; }

private:
  std::string phase;
  int count = 0;
};

int fail() { return 1; }

/// The file position inside `loc` ("model.py:12:5"), looking through the
/// module-path names TorchScript locations carry; empty if there is none.
std::optional<FileLineColLoc> sourcePosition(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return sourcePosition(name.getChildLoc());
  // A backward op's location is its forward op's, marked (markBackward).
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (auto position = sourcePosition(l))
        return position;
  auto file = dyn_cast<FileLineColLoc>(loc);
  if (file && file.getLine() > 0)
    return file;
  return std::nullopt;
}

/// True if `loc` points into a text file the SourceMgr handler can quote
/// (an .mlir input, or the Python source of a TorchScript module).
bool hasSourceLine(Location loc) { return sourcePosition(loc).has_value(); }

/// Diagnostics at ONNX node locations (`loc("node")`) or at the model file
/// itself print as "model.onnx: error: ..." instead of "<unknown>:0:"; their
/// notes print at their own source line when they have one.
LogicalResult printModelDiagnostic(Diagnostic &diag, StringRef modelPath) {
  if (hasSourceLine(diag.getLocation()))
    return failure(); // let the SourceMgr handler quote the line
  auto print = [&](Diagnostic &d, StringRef severity) {
    if (auto pos = sourcePosition(d.getLocation()))
      llvm::errs() << pos->getFilename().getValue() << ":" << pos->getLine()
                   << ":" << pos->getColumn();
    else
      llvm::errs() << modelPath;
    llvm::errs() << ": " << severity << ": ";
    // A remark (--explain-plans) names the model's op it is about; errors
    // say it in their text.
    if (d.getSeverity() == DiagnosticSeverity::Remark)
      if (std::string name = tessera::ipu::locationName(d.getLocation(), ""); !name.empty())
        llvm::errs() << name << ": ";
    llvm::errs() << d.str() << "\n";
  };
  StringRef severity = diag.getSeverity() == DiagnosticSeverity::Error
                           ? "error"
                       : diag.getSeverity() == DiagnosticSeverity::Warning
                           ? "warning"
                       : diag.getSeverity() == DiagnosticSeverity::Note
                           ? "note"
                           : "remark";
  print(diag, severity);
  for (Diagnostic &note : diag.getNotes())
    print(note, "note");
  return success();
}

} // namespace

/// The estimate of the executable at `path`, as --summary prints it: the
/// same program costing the IPU model's cycle counts come from.
LogicalResult printEstimate(StringRef path, const tessera::target::IPUTarget &target) {
  auto exe = tessera::runtime::Executable::load(path);
  if (!exe) {
    llvm::errs() << "error: " << llvm::toString(exe.takeError()) << "\n";
    return failure();
  }
  const tessera::runtime::ExecutableMetadata &meta = (*exe)->metadata();
  if (!meta.program)
    return success();
  tessera::runtime::PhasePool pool(llvm::hardware_concurrency().compute_thread_count());
  tessera::runtime::printCostSummary(
      tessera::runtime::estimateProgramCost(meta, *meta.program, target, &pool), meta, target,
      llvm::outs(), summarySteps ? summarySteps : std::numeric_limits<size_t>::max());
  // The allocation the IPU model will make (it fitted when the executable
  // was built).
  if (auto plan = tessera::runtime::planMemory(*meta.program, target.totalTiles(),
                                               target.bytesPerTile))
    tessera::runtime::printTileMemory(*plan, llvm::outs());
  else
    llvm::consumeError(plan.takeError());
  return success();
}

/// Whether a cache hit on this command line prints nothing but the hit, as
/// the front end's does (FrontEnd.cpp): then the command may be recorded
/// for it. Options that print more on a hit (--summary, MLIR's timing and
/// IR printing, anything not this tool's) are not recorded.
static bool hitPrintsOnlyTheHit() {
  static const llvm::StringSet<> quietOnAHit = {
      "o", "compile-to", "input-shape", "input-type", "constant-input", "verify-each",
      "onnx-opset", "target", "num-ipus", "tiles-per-ipu", "pipeline", "layers-per-ipu",
      "begin-block", "execution", "partials-type", "precision",
      "available-memory-proportion", "explain-plans", "device-iterations", "replicas",
      "output-mode", "host-cpu", "cache-dir", "train", "loss", "loss-output",
      "optimizer", "micro-batch-size", "gradient-accumulation", "accumulation-reduction",
      "recompute", "stochastic-rounding", "loss-scaling", "freeze", "progress"};
  for (const auto &entry : cl::getRegisteredOptions())
    if (entry.second->getNumOccurrences() && !quietOnAHit.contains(entry.first))
      return false;
  return true;
}

/// The front end's key of this command line (CommandCache.h), when it
/// could answer it: the front end reads the command as LLVM's parser did
/// (the same output, one -o, the model and every --constant-input file
/// among the files it keys on) and a hit prints nothing but the hit.
/// Taken before the compile and again after it: a file (or the compiler)
/// that changed meanwhile keys no record.
static std::optional<std::string> frontEndKey(llvm::ArrayRef<std::string> arguments,
                                              StringRef cacheDir) {
  if (!hitPrintsOnlyTheHit() || outputPath.getNumOccurrences() != 1)
    return std::nullopt;
  std::optional<tessera::CacheCommand> command =
      tessera::readCacheCommand(arguments, cacheDir.str());
  std::string root = tessera::programRoot();
  if (!command || command->cacheDir != cacheDir || command->outputPath != outputPath ||
      root.empty())
    return std::nullopt;
  std::vector<std::string> read{inputPath};
  for (StringRef binding : constantInputs)
    read.push_back(binding.split('=').second.str());
  for (const std::string &file : read)
    if (!llvm::is_contained(command->files, file))
      return std::nullopt;
  llvm::Expected<std::string> key =
      tessera::commandKey(*command, tessera::compilerFilesIdentity(root));
  if (!key) {
    llvm::consumeError(key.takeError());
    return std::nullopt;
  }
  return *key;
}

/// Records this command line for the front end under `key` (taken before
/// the compile), once its executable is `entryPath` in `cacheDir`. A record
/// that cannot be written only costs the front end's fast hit.
static void recordForTheFrontEnd(llvm::ArrayRef<std::string> arguments, StringRef cacheDir,
                                 const std::optional<std::string> &key, StringRef entryPath) {
  if (!key || entryPath.empty() || frontEndKey(arguments, cacheDir) != key)
    return;
  if (llvm::Error err = tessera::recordCommand(cacheDir, *key, entryPath))
    llvm::WithColor::warning(llvm::errs(), "tessera-compile")
        << "could not record the command in the cache: " << llvm::toString(std::move(err))
        << "\n";
}

int main(int argc, char **argv) {
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  llvm::InitLLVM init(argc, argv);
  tessera::runtime::installResourceErrorHandlers("tessera-compile");
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  tessera::registerTesseraPasses();
  // The operator lists need no input file.
  for (int i = 1; i < argc; ++i)
    if (StringRef(argv[i]) == "--list-onnx-ops" ||
        StringRef(argv[i]) == "--list-torchscript-ops")
      inputPath.setNumOccurrencesFlag(cl::Optional);
  organizeHelp();
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "Tessera " << TESSERA_VERSION_STRING << " (MLIR/LLVM "
       << LLVM_VERSION_STRING << ")\n";
  });
  cl::ParseCommandLineOptions(argc, argv,
                              "Tessera ahead-of-time compiler for IPUs\n");

  if (listTorchScriptOps) {
    auto ops = tessera::torchscript_importer::supportedOperators();
    if (!ops) {
      llvm::errs() << "error: " << llvm::toString(ops.takeError()) << "\n";
      return 1;
    }
    for (const std::string &op : *ops)
      llvm::outs() << op << "\n";
    return 0;
  }
  if (listOps) {
    for (const std::string &op : tessera::onnx_importer::supportedOperators(listOpset))
      llvm::outs() << op << "\n";
    return 0;
  }

  DialectRegistry registry;
  tessera::registerTesseraDialects(registry);
  MLIRContext context(registry);
  // A remark per op (--explain-plans) names the op by its location; the
  // op's IR after each would drown them.
  if (explainPlans)
    context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  ScopedDiagnosticHandler modelDiagHandler(&context, [&](Diagnostic &diag) {
    return printModelDiagnostic(diag, inputPath);
  });

  std::optional<tessera::Phase> phase = tessera::parsePhase(compileTo);
  if (!phase) {
    llvm::errs() << "error: unknown phase '" << compileTo
                 << "' for --compile-to; phases are input, graph, training, "
                    "partitioned, linalg, ipu, llvm, executable\n";
    return fail();
  }
  if (!tessera::isPhaseAvailable(*phase)) {
    llvm::errs() << "error: --compile-to=" << compileTo
                 << " is not implemented in this version of Tessera; "
                    "available phases: "
                 << tessera::availablePhaseList() << "\n";
    return fail();
  }

  if (emitBytecode && *phase == tessera::Phase::Executable) {
    llvm::errs() << "error: --emit-bytecode writes MLIR; add --compile-to=<phase> "
                    "for an IR phase (the executable phase writes a .tess)\n";
    return fail();
  }
  auto target = tessera::target::makeTarget(
      targetName, numIPUs,
      tilesPerIPU.getNumOccurrences() ? std::optional<int64_t>(tilesPerIPU)
                                      : std::nullopt);
  if (!target) {
    llvm::errs() << "error: " << llvm::toString(target.takeError()) << "\n";
    return fail();
  }
  tessera::runtime::ExecutableMetadata modeCheck;
  if (auto err = tessera::runtime::parseOutputMode(
          outputMode.getNumOccurrences() ? StringRef(outputMode)
                                         : StringRef(train ? "final" : "all"),
          modeCheck)) {
    llvm::errs() << "error: --output-mode: " << llvm::toString(std::move(err)) << "\n";
    return fail();
  }
if (!train) {
    // Training flags without --train would silently compile inference.
    const cl::Option *trainingFlags[] = {&lossSpec, &lossOutput, &optimizerSpec,
                                         &microBatchSize, &gradientAccumulation,
                                         &accumulationReduction,
                                         std::addressof(freezeWeights), &recomputeMode,
                                         &stochasticRounding, &lossScaling};
    for (const cl::Option *flag : trainingFlags)
      if (flag->getNumOccurrences()) {
        llvm::errs() << "error: --" << flag->ArgStr
                     << " applies to a training step: add --train\n";
        return fail();
      }
  }
  tessera::TrainingPipelineOptions trainingOptions;
  if (train && failed(parseTrainingOptions(trainingOptions)))
    return fail();
  tessera::onnx_importer::ImportOptions importOptions;
  for (const std::string &spec : inputShapes) {
    std::string err = tessera::onnx_importer::parseInputShape(spec, importOptions);
    if (!err.empty()) {
      llvm::errs() << "error: " << err << "\n";
      return fail();
    }
  }

  for (const std::string &spec : inputTypes) {
    std::string err = tessera::onnx_importer::parseInputType(spec, importOptions);
    if (!err.empty()) {
      llvm::errs() << "error: " << err << "\n";
      return fail();
    }
  }

  for (const std::string &spec : constantInputs) {
    auto [name, path] = llvm::StringRef(spec).split('=');
    if (name.empty() || path.empty()) {
      llvm::errs() << "error: expected --constant-input NAME=FILE, got '" << spec
                   << "'\n";
      return fail();
    }
    tessera::onnx_importer::ConstantInput value;
    if (path.ends_with(".pb")) {
      auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
      if (!file) {
        llvm::errs() << "error: cannot read '" << path
                     << "': " << file.getError().message() << "\n";
        return fail();
      }
      std::string err = tessera::onnx_importer::parseTensorProto(
          (*file)->getBuffer(), ("'" + path + "'").str(), value);
      if (!err.empty()) {
        llvm::errs() << "error: --constant-input " << name << ": " << err << "\n";
        return fail();
      }
    } else {
      auto tensor = tessera::runtime::readNpy(path);
      if (!tensor) {
        llvm::errs() << "error: --constant-input " << name << ": "
                     << llvm::toString(tensor.takeError()) << "\n";
        return fail();
      }
      value.elementType = tessera::runtime::dtypeName(tensor->dtype).str();
      value.shape = tensor->shape;
      value.data.assign(tensor->data.begin(), tensor->data.end());
    }
    importOptions.constantInputs[name.str()] = std::move(value);
  }

  // The CPU is resolved up front: a bad name fails before compiling, and the
  // resolved features are part of the cache key.
  auto cpu = tessera::resolveHostCPU(hostCPU);
  if (!cpu) {
    llvm::errs() << "error: " << llvm::toString(cpu.takeError()) << "\n";
    return fail();
  }

  tessera::ExecutableRequest request;
  request.modelPath = inputPath;
  request.import = importOptions;
  request.cpu = *cpu;
  request.compile.vectorBits = tessera::vectorBitsOf(*cpu);
  request.deviceIterations = deviceIterations;
  request.compile.replicas = replicas;
  request.compile.verifyEachPass = verifyEach;
  request.outputMode = modeCheck.outputMode;
  request.outputEvery = modeCheck.outputEvery;
  if (train) {
    request.compile.training = trainingOptions;
    request.microBatchSize = microBatchSize;
  }
  if (pipelineMode.getNumOccurrences() && pipelineMode != "manual" && pipelineMode != "auto") {
    llvm::errs() << "error: --pipeline " << pipelineMode << ": use manual or auto\n";
    return fail();
  }
  if (executionMode != "sharded" && executionMode != "pipelined") {
    llvm::errs() << "error: --execution " << executionMode << ": use pipelined or sharded\n";
    return fail();
  }
  request.compile.stages.pipeline = pipelineMode;
  request.compile.stages.pipelined = executionMode == "pipelined";
  request.compile.stages.microBatches = train ? int64_t(gradientAccumulation) : int64_t(deviceIterations);
  request.compile.stages.layersPerIpu.assign(layersPerIpu.begin(), layersPerIpu.end());
  request.compile.stages.blocks.assign(beginBlocks.begin(), beginBlocks.end());
  request.compile.graph.precision = precisionMode;
  request.compile.graph.partialsType = partialsType;
  request.compile.compileTo = *phase;
  request.compile.target = *target;
  request.compile.ipu.availableMemoryProportion = availableMemoryProportion;
  request.compile.ipu.explainPlans = explainPlans;
  request.reportDir = reportPath;
  // Before the executable phase there is no executable: the allocator
  // writes the report of the program it places.
  request.compile.ipu.reportDir = reportPath;
  if (llvm::Error err = tessera::checkExecutableRequest(request)) {
    llvm::errs() << "error: " << llvm::toString(std::move(err)) << "\n";
    return fail();
  }
  if (train && microBatchSize.getNumOccurrences() && microBatchSize < 1) {
    llvm::errs() << "error: --micro-batch-size must be at least 1, got "
                 << microBatchSize << "\n";
    return fail();
  }

  bool showProgress = progress || llvm::sys::Process::StandardErrIsDisplayed();
  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope rootTimer = timing.getRootScope();
  request.compile.configure = [&](PassManager &pm) -> LogicalResult {
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    if (showProgress)
      pm.addInstrumentation(std::make_unique<ProgressPrinter>(compileTo));
    return success();
  };
  if (summary)
    request.compile.afterGraph = [](ModuleOp graphModule) {
      tessera::graph::printModelStats(
          tessera::graph::computeModelStats(graphModule), llvm::outs());
      llvm::outs().flush();
    };

  if (*phase == tessera::Phase::Executable && !noOutput) {
    // Binary output: never to a terminal; default in the current directory.
    std::string path = outputPath;
    if (path == "-")
      path = (llvm::sys::path::stem(inputPath) + ".tess").str();
    request.cacheDir = cacheDir;
    if (request.cacheDir.empty())
      if (auto env = llvm::sys::Process::GetEnv("TESSERA_CACHE_DIR"))
        request.cacheDir = *env;
    auto report = [&](const tessera::CacheLookup &found) {
      switch (found.outcome) {
      case tessera::CacheOutcome::Hit:
        llvm::errs() << "tessera-compile: cache hit: " << found.entryPath << " -> " << path
                     << "\n";
        break;
      case tessera::CacheOutcome::Miss:
        llvm::errs() << "tessera-compile: cache miss: compiling into " << found.entryPath
                     << "\n";
        break;
      case tessera::CacheOutcome::Damaged:
        llvm::WithColor::warning(llvm::errs(), "tessera-compile")
            << "cache entry " << found.entryPath << " is unusable (" << found.detail
            << "); recompiling\n";
        break;
      case tessera::CacheOutcome::KeyMismatch:
        llvm::WithColor::warning(llvm::errs(), "tessera-compile")
            << "false cache hit on " << found.entryPath << " (" << found.detail
            << "); recompiling\n";
        break;
      case tessera::CacheOutcome::Untrusted:
        break; // an error, said by buildExecutable
      }
      if (showProgress && found.outcome != tessera::CacheOutcome::Hit)
        llvm::errs() << "\r\033[K[import] " << inputPath;
    };
    if (showProgress && request.cacheDir.empty())
      llvm::errs() << "\r\033[K[import] " << inputPath;
    std::optional<std::string> recordKey =
        request.cacheDir.empty() ? std::nullopt : frontEndKey(arguments, request.cacheDir);
    auto built = tessera::buildExecutable(context, request, path, report, rootTimer);
    if (!built) {
      std::string message = llvm::toString(built.takeError());
      if (!message.empty())
        llvm::errs() << "error: " << message << "\n";
      return fail();
    }
    if (!built->cacheWarning.empty())
      llvm::WithColor::warning(llvm::errs(), "tessera-compile") << built->cacheWarning << "\n";
    if (built->outcome == tessera::CacheOutcome::Miss && !request.cacheDir.empty() &&
        built->kernelsReused + built->kernelsCompiled > 0)
      llvm::errs() << "tessera-compile: kernel cache: " << built->kernelsReused << " of "
                   << built->kernelsReused + built->kernelsCompiled
                   << " vertex kernels reused (" << built->kernelsFoundBeforeLowering
                   << " before lowering), " << built->kernelsCompiled
                   << " compiled and stored\n";
    if (built->outcome == tessera::CacheOutcome::Miss && (showProgress || summary))
      llvm::outs() << "wrote " << path << "\n";
    if (summary && failed(printEstimate(path, *target)))
      return fail();
    if (!request.cacheDir.empty())
      recordForTheFrontEnd(arguments, request.cacheDir, recordKey, built->entryPath);
    return 0;
  }

  OwningOpRef<ModuleOp> module;
  {
    TimingScope importTimer = rootTimer.nest("import");
    if (showProgress)
      llvm::errs() << "\r\033[K[import] " << inputPath;
    if (train && microBatchSize > 0)
      importOptions.batchSize = microBatchSize;
    importOptions.training = train;
    module = tessera::loadModel(inputPath, &context, importOptions);
    if (showProgress)
      llvm::errs() << "\r\033[K";
  }
  if (!module)
    return fail();
  if (train && microBatchSize > 0 && failed(tessera::setInputBatch(*module, microBatchSize)))
    return fail();

  TimingScope passTimer = rootTimer.nest("passes");
  tessera::CompileOptions options = request.compile;
  options.timing = &passTimer;
  if (failed(tessera::compileModule(*module, options)))
    return fail();
  passTimer.stop();
  if (noOutput)
    return 0;

  // The output is kept only once it is completely written: a failed or
  // interrupted compile leaves no partial file behind.
  TimingScope outputTimer = rootTimer.nest("output");
  std::string errorMessage;
  auto output = openOutputFile(outputPath, &errorMessage);
  if (!output) {
    llvm::errs() << "error: " << errorMessage << "\n";
    return fail();
  }
  if (emitBytecode) {
    if (failed(writeBytecodeToFile(*module, output->os())))
      return fail();
  } else {
    module->print(output->os());
    output->os() << "\n";
  }
  output->keep();
  return 0;
}
