//===- BuildExecutable.h - a model to a .tess, through the cache -*- C++ -*-===//
//
// The whole of `tessera-compile model -o model.tess` as one library call, so
// that the command-line tool and the Python module build executables the
// same way: the same options, the same cache key, the same metadata.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COMPILER_BUILDEXECUTABLE_H
#define TESSERA_COMPILER_BUILDEXECUTABLE_H

#include "tessera/Codegen/HostCodegen.h"
#include "tessera/Compiler/Compiler.h"
#include "tessera/Compiler/ExecutableCache.h"

#include "mlir/Support/Timing.h"

namespace tessera {

/// Everything that shapes an executable besides the model file.
struct ExecutableRequest {
  std::string modelPath;
  onnx_importer::ImportOptions import;
  /// Pipelines, target and training; `compileTo` is the executable phase.
  CompileOptions compile;
  /// Training: the batch the step is compiled for (0: the model's own).
  int64_t microBatchSize = 0;
  /// PopTorch's deviceIterations and outputMode.
  int64_t deviceIterations = 1;
  runtime::ExecutableMetadata::OutputMode outputMode =
      runtime::ExecutableMetadata::OutputMode::All;
  int64_t outputEvery = 1;
  HostCPU cpu;
  /// The executable cache (none if empty).
  std::string cacheDir;
  /// Where to write the report page (report.html, report.json): of the
  /// executable, or of what a program that does not fit would need. Not
  /// part of the cache key: a cache hit writes it too.
  std::string reportDir;
};

/// Checks the request's numbers (device iterations, gradient accumulation,
/// available memory proportion, micro-batch) with the message a user of
/// either interface needs ("--device-iterations must be at least 1").
llvm::Error checkExecutableRequest(const ExecutableRequest &request);

/// Parses "NAME[:key=value,...]" (cross-entropy:label-smoothing=0.1) or
/// "output:NAME" into `options`.
llvm::Error parseLossSpec(llvm::StringRef spec, TrainingPipelineOptions &options);

/// Every option of `request` that changes the generated code, as text: the
/// cache key's options part.
std::string cacheKeyOptions(const ExecutableRequest &request);

struct BuildResult {
  /// Hit: copied from the cache; Miss: compiled (and stored when there is a
  /// cache).
  CacheOutcome outcome = CacheOutcome::Miss;
  /// Why a compiled executable could not be stored in the cache (it was
  /// still written).
  std::string cacheWarning;
  /// With a cache: the entry the output is a copy of (empty when it could
  /// not be stored).
  std::string entryPath;
  /// With a cache, compiled: vertex kernels found in its kernels/ folder
  /// (of which found by their code before lowering, so not lowered again),
  /// and compiled (then stored there).
  int64_t kernelsReused = 0, kernelsFoundBeforeLowering = 0, kernelsCompiled = 0;
};

/// Compiles `request.modelPath` into the executable `path` (written
/// atomically), or copies it from the cache. `onLookup` hears the cache's
/// answer before compiling (not called without a cache); `timing` gets the
/// import, passes and codegen scopes. Compile errors are diagnostics on
/// `context` and return an error with an empty message; other failures
/// (bad options, a cache key that cannot be computed) return their message.
llvm::Expected<BuildResult>
buildExecutable(mlir::MLIRContext &context, const ExecutableRequest &request,
                llvm::StringRef path,
                llvm::function_ref<void(const CacheLookup &)> onLookup,
                mlir::TimingScope &timing);

} // namespace tessera

#endif // TESSERA_COMPILER_BUILDEXECUTABLE_H
