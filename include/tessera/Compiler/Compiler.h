//===- Compiler.h - load a model and run it through the phases --*- C++ -*-===//
//
// The library behind tessera-compile (and, later, the Python module): read a
// model in any supported format, then run the pipelines up to a phase.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COMPILER_COMPILER_H
#define TESSERA_COMPILER_COMPILER_H

#include "tessera/Compiler/Pipelines.h"
#include "tessera/Importers/ONNX/ONNXImporter.h"
#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/MachineProgram.h"
#include "tessera/Runtime/ProgramCost.h"
#include "tessera/Target/IPUTarget.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "mlir/Support/Timing.h"

#include <functional>
#include <future>

namespace mlir {
class PassManager;
} // namespace mlir

namespace tessera {

struct HostCPU;
struct KernelCache;

enum class InputFormat { ONNX, TorchScript, MLIR };

/// Decides the format from the extension (.onnx; .pt, .pth, .torchscript;
/// .mlir, .mlirbc), falling back to the contents (MLIR text and bytecode and
/// TorchScript's zip archives are recognisable; anything else is tried as
/// ONNX).
InputFormat detectInputFormat(llvm::StringRef path, llvm::StringRef contents);

/// Reads and imports `path` ("-" for stdin). Errors are diagnostics.
mlir::OwningOpRef<mlir::ModuleOp>
loadModel(llvm::StringRef path, mlir::MLIRContext *context,
          const onnx_importer::ImportOptions &importOptions);

struct CompiledModel;

struct CompileOptions {
  Phase compileTo = Phase::Graph;
  GraphPipelineOptions graph;
  /// Placement of ops on IPUs (pipeline stages).
  StageOptions stages;
  /// A training step instead of inference (--train).
  TrainingPipelineOptions training;
  /// Copies of the program on as many IPU sets (PopTorch's
  /// replicationFactor): graph-replicate sums a training step's gradients
  /// over them and gives each its own random numbers.
  int64_t replicas = 1;
  /// The machine the ipu, llvm and executable phases plan for.
  target::IPUTarget target;
  IPUPipelineOptions ipu;
  /// Called on each pass manager, on the compiling thread, before it runs
  /// (MLIR CL options, instrumentation). Two of them may then run at once,
  /// on two threads (the host reference code lowers beside the planning):
  /// instrumentation must allow that.
  std::function<mlir::LogicalResult(mlir::PassManager &)> configure;
  /// The width of the vector registers of the CPU the native code is for
  /// (vectorBitsOf(--host-cpu)): contractions' register tiles are sized
  /// for it.
  int64_t vectorBits = 512;
  /// The IR verified after every pass (--verify-each); otherwise before
  /// the first pipeline and after each, which takes a tenth less time.
  bool verifyEachPass = false;
  /// Where each pipeline's passes are timed, in a scope of its own
  /// (--mlir-timing); none if null.
  mlir::TimingScope *timing = nullptr;
  /// Called with the module once it reaches the graph phase (model
  /// statistics are taken there, before lowering).
  std::function<void(mlir::ModuleOp)> afterGraph;
  /// The executable phase's kernel cache: kernels it holds compiled are
  /// taken out before lowering (takeCachedKernels), not lowered again.
  KernelCache *kernelCache = nullptr;
  /// Called once the executable phase's weights are final (before the
  /// tiles are planned), with the model whose weightData holds them: the
  /// executable's writer starts writing them then
  /// (runtime::ExecutableWriter::startWeights).
  std::function<void(const CompiledModel &)> weightsKnown;
};

/// What the executable phase needs besides the lowered module: the
/// signature and the weights, taken before codegen turns weights into
/// arguments. Weight bytes point into the module's resource blobs (alive
/// with the MLIRContext) or into `owned`.
struct CompiledModel {
  std::vector<runtime::TensorInfo> inputs, outputs;
  std::vector<runtime::WeightInfo> weights;
  /// A training step's device-resident state; initial values are weights.
  std::vector<runtime::StateInfo> state;
  /// Training: the loss output's name and the optimizer (empty otherwise).
  std::string loss, optimizer;
  /// Stages whose execution overlaps (see ExecutableMetadata).
  int64_t pipelineStages = 1;
  std::vector<llvm::ArrayRef<char>> weightData;
  std::vector<std::vector<char>> owned;
  /// The tile-mapped program (llvm and executable phases); its weight and
  /// constant variables index `weights`.
  std::optional<runtime::MachineProgram> program;
  /// The executable phase's estimate of `program`'s cycles, computed on a
  /// thread of its own from when the program is known, beside the kernels'
  /// lowering and codegen (writeExecutableFile waits for it). It reads
  /// `program` and the CompileOptions given to compileModule: those must
  /// outlive the model. Declared after `program`: destroyed, so waited
  /// for, first.
  std::shared_future<std::optional<runtime::CostSummary>> estimate;
  /// The executable phase's host reference code: @main as MLIR bytecode
  /// (buildPrepareHostReferencePipeline), lowered and compiled only when a
  /// run asks for it (compileHostReference).
  std::string referenceMLIR;
};

/// Fixes dimension 0 of every input of @main to `batch` (--micro-batch-size):
/// a symbolic batch takes it; another fixed batch is an error naming the
/// input and how to export it.
mlir::LogicalResult setInputBatch(mlir::ModuleOp module, int64_t batch);

/// Runs the phases after `input` up to options.compileTo, filling `model`
/// (if given) for the llvm and executable phases. The llvm phase's module
/// holds both the host reference code (@main) and the vertex kernels of the
/// tile-mapped program, which `model->program` describes; the executable
/// phase's holds the kernels only, the reference code being
/// `model->referenceMLIR`. Asking for a phase this
/// build does not implement is an error naming the ones it does.
mlir::LogicalResult compileModule(mlir::ModuleOp module,
                                  const CompileOptions &options,
                                  CompiledModel *model = nullptr);

/// Emits the native code of an executable-phase module (the vertex kernels
/// in the LLVM dialect) for `cpu` (resolveHostCPU's answer), its kernels
/// from `kernelCache` where found there, estimates the program's cycles
/// meanwhile, and finishes the .tess with `model.referenceMLIR` through
/// `writer` (which may have started on the weights); the file records the
/// CPU and its features. Copies the writer could not write are said in
/// `copyErrors`.
mlir::LogicalResult writeExecutableFile(mlir::ModuleOp llvmModule,
                                        const CompiledModel &model, const HostCPU &cpu,
                                        runtime::ExecutableMetadata metadata,
                                        runtime::ExecutableWriter &writer,
                                        mlir::TimingScope *timing = nullptr,
                                        KernelCache *kernelCache = nullptr,
                                        std::string *copyErrors = nullptr);

/// The native code of an executable's host reference code
/// (ExecutableMetadata::referenceMLIR) for the running machine: parsed,
/// lowered to LLVM (buildLowerToLLVMPipeline, register tiles for this
/// CPU's vectors), optimized and compiled to an object whose packed entry
/// is `tessera_main`. Bytes that are not such a module are an error saying
/// to recompile the model. What runtime::HostRunner runs.
llvm::Expected<std::string> compileHostReference(llvm::StringRef referenceMLIR);

} // namespace tessera

#endif // TESSERA_COMPILER_COMPILER_H
