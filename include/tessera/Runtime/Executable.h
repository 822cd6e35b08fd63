//===- Executable.h - the .tess executable container ------------*- C++ -*-===//
//
// Layout (little-endian):
//   [128-byte header][weights, each 64-byte aligned so the runtime can use
//   them in place][host object code][pad to 64][metadata JSON]
// The weights come first: a compile writes them while it plans, and the
// metadata, known last, ends the file. The header holds a magic, the format
// version, the file size, an xxh3-64 checksum of every byte but its own
// (of the header and of each MiB after it), and the sections' offsets and
// sizes. Loading refuses a wrong magic or version, a size mismatch
// (truncation) and a checksum mismatch (damage) with a message that says so.
//
// No MLIR here: the runtime links LLVM's support library only.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_EXECUTABLE_H
#define TESSERA_RUNTIME_EXECUTABLE_H

#include "tessera/Runtime/MachineProgram.h"
#include "tessera/Runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera::runtime {

/// 2: metadata may carry the tile-mapped program ("program").
/// 5: metadata may carry device-resident state ("state", training).
/// 8: each vertex kernel's code carries its signature (`<kernel>_signature`).
/// 9: the host reference code is MLIR bytecode ("reference_mlir"), lowered
/// when a run asks for it, not LLVM bitcode lowered by every compile.
/// 10: a weight's mapping may be mirrored (`mirror_counts`,
/// `mirror_strides`): copies of its pieces that the memory plan places and
/// the runtime loads.
/// 11: the weights follow the header and the metadata ends the file; the
/// checksum hashes the bytes after the header by the MiB.
constexpr uint32_t kExecutableFormatVersion = 11;

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numElements() const { return runtime::numElements(shape); }
  std::string typeString() const { return runtime::typeString(shape, dtype); }
};

struct WeightInfo : TensorInfo {
  uint64_t offset = 0; ///< within the weights section
  uint64_t size = 0;   ///< bytes
  /// Passed to the host reference entry (false for constants only the IPU
  /// program reads: the ipu phase turns a graph's tensor constants into
  /// weights, which the reference code keeps inline).
  bool reference = true;
};

/// A tensor that stays on the device between runs (a training step's
/// weights, optimizer state and hyperparameters, and buffers such as batch
/// norm's running statistics, which are updated but not trained). The program reads it as
/// the input after the signature's inputs (in `state` order) and, when
/// `update` >= 0, returns its new value as program output `update` (after the
/// signature's outputs); the runtime copies that back after every iteration.
///
/// ReplicaIndex is the replica's number (an i64 scalar the program reads to
/// draw differing random numbers per replica): each replica's copy holds
/// its own, set by the runtime, never by the user.
struct StateInfo : TensorInfo {
  enum class Role { Parameter, OptimizerState, Hyperparameter, Buffer, ReplicaIndex };
  Role role = Role::Parameter;
  int64_t weight = -1; ///< the executable's weight holding the initial value
  int64_t update = -1; ///< program output index, or -1 (never written)
  /// Stored only when a weight update commits (the last of its
  /// micro-batches): the runtime copies the update back then, and the steps
  /// computing it run then only (Step::perUpdate).
  bool perUpdate = false;
  /// The micro-batches of the current weight update run so far (an f32
  /// scalar, gradient accumulation's counter): the runtime starts each run
  /// from it to know which micro-batch commits.
  bool countsMicroBatches = false;
};

llvm::StringRef stateRoleName(StateInfo::Role role);

struct ExecutableMetadata {
  std::string compilerVersion;
  std::string cacheKey;
  std::string source; ///< the model it was compiled from
  std::string target; ///< "ipu2", ...
  int64_t numIPUs = 1;
  int64_t tilesPerIPU = 0; ///< as compiled for (--tiles-per-ipu)
  /// Batches one run loops over on the device (PopTorch's deviceIterations):
  /// the host passes every input with dimension 0 this many times the
  /// compiled batch and gets the outputs concatenated along dimension 0
  /// (a scalar output becomes a vector, one element per iteration).
  int64_t deviceIterations = 1;
  /// Training: micro-batches whose gradients make one weight update
  /// (PopTorch's gradientAccumulation). The program runs once per
  /// micro-batch, so a run executes it deviceIterations x this many times.
  int64_t gradientAccumulation = 1;
  /// Pipeline stages over the IPUs whose execution overlaps (1: none, or
  /// sharded: stages in turn). The IPU model runs each micro-batch through
  /// every stage in turn -- the same results -- and its estimate overlaps
  /// them as the chip does.
  int64_t pipelineStages = 1;
  /// Copies of the program, each on its own IPUs with its own slice of
  /// every batch (PopTorch's replicationFactor): an iteration's inputs and
  /// outputs are `replicas` compiled batches, replica r's the r-th, along
  /// dimension 0 (a scalar output becomes one element per replica). State
  /// is per replica; replicas keep their weights equal by all-reducing the
  /// gradients (MachineProgram's AllReduce steps).
  int64_t replicas = 1;
  /// The replicas this process runs and feeds when it is one instance of
  /// several (tessera-launch; Executable::runAsInstance): replicas
  /// [first, first + count) of `replicas`, whose batches are the host's
  /// inputs and outputs. Not in the file; count 0: every replica.
  struct InstanceShare {
    int64_t first = 0, count = 0;
    int64_t instance = 0, instances = 1;
    int64_t onThisHost = 1; ///< instances sharing this host's cores
  } share;
  /// The replicas whose batches the host feeds and reads here.
  int64_t localReplicas() const { return share.count ? share.count : replicas; }
  /// Which iterations' outputs a run returns (PopTorch's outputMode):
  /// All (every iteration's, concatenated along dimension 0), Final (the
  /// last one's), Sum (their elementwise sum) or EveryN (every
  /// `outputEvery`-th, concatenated). An iteration is one execution of the
  /// program: one micro-batch.
  enum class OutputMode { All, Final, Sum, EveryN };
  OutputMode outputMode = OutputMode::All;
  int64_t outputEvery = 1;
  std::string hostTriple;
  /// The CPU the native code was generated for (an LLVM CPU name) and the
  /// features it may use; a host without one of them cannot run it.
  std::string hostCPU;
  std::vector<std::string> hostFeatures;
  /// Sizes of the relocatable objects the code section holds, back to back
  /// (the vertex kernels; none when the program has no compute set).
  std::vector<int64_t> codeObjects;
  /// Bytes of MLIR bytecode after the objects: the host reference code
  /// before lowering, lowered and compiled for the running machine when a
  /// run asks for it (tessera::compileHostReference).
  int64_t referenceMLIR = 0;
  /// Packed entry point: void entry(void **descriptors), one memref
  /// descriptor per input, then weight, then output.
  std::string entry = "tessera_main";
  std::vector<TensorInfo> inputs, outputs;
  std::vector<WeightInfo> weights;
  std::vector<StateInfo> state;
  /// Training: the loss output's name (empty for inference) and optimizer.
  std::string loss, optimizer;
  /// The tile-mapped program the IPU model runs; its kernels' entry symbols
  /// are in the same code section as `entry`. Absent in executables built
  /// for the host reference only.
  std::optional<MachineProgram> program;
  /// The compiler's estimate of one iteration of the program on the target
  /// (ProgramCost's totals, what tessera-compile --summary prints): tools
  /// read it without building an IPU model.
  struct Estimate {
    int64_t cycles = 0, computeCycles = 0, exchangeCycles = 0, syncCycles = 0;
  };
  std::optional<Estimate> estimate;
};

/// Checks run-time inputs against the signature: count, then each input's
/// shape (with the device iterations' batches) and element type
/// ("input 'x' must be 2x3xf32, got 2x4xf32").
llvm::Error checkInputs(const ExecutableMetadata &metadata,
                        llvm::ArrayRef<Tensor> inputs);

class Executable;

/// A .tess image (header, checksum) around a metadata JSON text, the code
/// section and the weights section: what writeExecutable writes, and what
/// the fuzzer of the loader feeds it.
std::string buildExecutableImage(llvm::StringRef metadataJSON, llvm::StringRef code,
                                 llvm::StringRef weights);
/// The same with a weights section of `weightBytes` that `fillWeights`
/// writes in place (zeroed before), so no section is built first.
std::string buildExecutableImage(llvm::StringRef metadataJSON, llvm::StringRef code,
                                 uint64_t weightBytes,
                                 llvm::function_ref<void(char *)> fillWeights);

/// Checks the machine program against the signature: its inputs are the
/// signature's inputs then the state, its outputs the signature's outputs
/// then the state's updates (same shapes and element types), and each of
/// its weights has data of its size. Both runners check it before running
/// anything: the host reference code writes outputs of the sizes it was
/// compiled for, so a signature edited afterwards (behind a valid checksum)
/// would have it write past the buffers it is given.
llvm::Error checkProgramAgreesWithSignature(const Executable &executable);

/// The most IPUs in all, replicas x IPUs each (a Bow Pod1024 of one-IPU
/// replicas); one process runs every replica, or tessera-launch's instances
/// share them.
constexpr int64_t kMaxReplicas = 1024;

/// Executions of the compiled program per host call: the device iterations
/// times the gradient accumulation, at most kMaxIterationsPerRun (so that a
/// run's batch, this times the compiled one, cannot overflow).
int64_t iterationsPerRun(const ExecutableMetadata &metadata);
constexpr int64_t kMaxIterationsPerRun = int64_t(1) << 24;

/// "all", "final", "sum", "every-4"; and back (an error names the forms).
std::string outputModeName(const ExecutableMetadata &metadata);
llvm::Error parseOutputMode(llvm::StringRef text, ExecutableMetadata &metadata);

/// The iterations of a run whose outputs are returned, in order (All,
/// Final, EveryN); empty for Sum, whose outputs are not any iteration's.
std::vector<int64_t> returnedIterations(const ExecutableMetadata &metadata);

/// Whether output mode sum can add outputs of type `t` (f32, f64, i32, i64).
bool summable(DType t);

/// The shape a run returns for output `t` under the output mode.
std::vector<int64_t> returnedShape(const ExecutableMetadata &metadata,
                                   const TensorInfo &t);

/// The shape the host passes (inputs) or receives (outputs) for `blocks`
/// batches of a tensor of the compiled program (iterations times replicas):
/// dimension 0 times `blocks`; a scalar becomes a vector of `blocks`.
std::vector<int64_t> hostShape(const TensorInfo &t, int64_t blocks);

/// This process's part of a host tensor holding whole batches of `info`
/// for every replica, replica-major within each iteration (a run's input,
/// or a data set of runs one after another): the blocks of the replicas in
/// `metadata.share`, in order. The tensor itself when this process runs
/// every replica.
Tensor localBatches(const ExecutableMetadata &metadata, const TensorInfo &info,
                    const Tensor &whole);

/// Runs `once` (one iteration of the compiled program on every replica, on
/// tensors of the compiled shapes times the replicas) for each iteration of a run: slices every input along
/// dimension 0 and returns the outputs the output mode asks for. Inputs must
/// have been checked.
llvm::Expected<std::vector<Tensor>> runDeviceIterations(
    const ExecutableMetadata &metadata, llvm::ArrayRef<Tensor> inputs,
    llvm::function_ref<llvm::Expected<std::vector<Tensor>>(llvm::ArrayRef<Tensor>)> once);

/// Writes an executable atomically (temp file + rename). `weights[i]` holds
/// the bytes of metadata.weights[i]; offsets are assigned here.
llvm::Error writeExecutable(llvm::StringRef path, ExecutableMetadata metadata,
                            llvm::StringRef code,
                            llvm::ArrayRef<llvm::ArrayRef<char>> weights);

/// Writes an executable while the compile that makes it goes on: the
/// weights (most of its bytes, known before the tiles are planned) on a
/// thread of their own from startWeights(), the rest when finish() has it.
/// Into a temporary file beside each destination, renamed into place by
/// finish(): the output, then copies (the executable cache's entry), all
/// written from memory in the same pass. A writer destroyed unfinished (a
/// failed compile) removes its temporary files; a signal does too.
class ExecutableWriter {
public:
  explicit ExecutableWriter(std::vector<std::string> paths);
  ~ExecutableWriter();
  ExecutableWriter(const ExecutableWriter &) = delete;
  ExecutableWriter &operator=(const ExecutableWriter &) = delete;
  /// Creates the temporary files now (startWeights and finish do if not
  /// done): an output that cannot be written is then said before the
  /// compile's work. The error is the output's; a copy's waits for finish.
  llvm::Error open();
  /// Starts writing these weights, which must stay alive and unchanged
  /// until finish(), where they are the first of its weights.
  void startWeights(llvm::ArrayRef<llvm::ArrayRef<char>> weights);
  /// Writes the rest (as writeExecutable) and renames every file into
  /// place. An error is the output's; a copy that could not be written is
  /// removed and said in `copyErrors`. No copy is kept of an output that
  /// failed.
  llvm::Error finish(ExecutableMetadata metadata, llvm::StringRef code,
                     llvm::ArrayRef<llvm::ArrayRef<char>> weights,
                     std::string *copyErrors = nullptr);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct Instance;

/// A loaded, verified executable (the file is memory-mapped).
class Executable {
public:
  static llvm::Expected<std::unique_ptr<Executable>> load(llvm::StringRef path);
  /// The same checks on an image in memory; `path` names it in messages.
  static llvm::Expected<std::unique_ptr<Executable>>
  parse(std::unique_ptr<llvm::MemoryBuffer> image, llvm::StringRef path);

  const ExecutableMetadata &metadata() const { return metadata_; }
  /// The metadata (the program), the kernels' code and the weights, less
  /// the path of the model it was compiled from (instances compile the same
  /// model in places of their own): what instances compare to know they run
  /// the same executable.
  std::string fingerprint() const;
  /// Makes this process run `self`'s share of the replicas (metadata().share):
  /// host inputs and outputs become those replicas' batches. An executable
  /// of one replica runs whole on every instance; one compiled for another
  /// number of replicas than the launch's is refused.
  llvm::Error runAsInstance(const Instance &self);
  /// The code section: every object of metadata().codeObjects, in order,
  /// then the reference code's bytecode.
  llvm::StringRef codeSection() const { return code_; }
  /// The objects of the code section (the vertex kernels), which the IPU
  /// model links together.
  std::vector<llvm::StringRef> kernelObjects() const;
  /// The host reference code: MLIR bytecode (see
  /// tessera::compileHostReference).
  llvm::StringRef referenceMLIR() const;
  llvm::ArrayRef<char> weight(size_t i) const;

private:
  std::unique_ptr<llvm::MemoryBuffer> file_;
  ExecutableMetadata metadata_;
  llvm::StringRef code_;
  llvm::StringRef weights_;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_EXECUTABLE_H
