//===- Pipelines.h - Tessera's pass pipelines and phases --------*- C++ -*-===//
//
// Pipelines are library functions shared by every tool: tessera-compile runs
// them phase by phase, tessera-opt exposes them as --tessera-*-pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COMPILER_PIPELINES_H
#define TESSERA_COMPILER_PIPELINES_H

#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace tessera {

/// The phases of tessera-compile, in order. `--compile-to=<phase>` stops
/// after the named one; its output can be fed back in.
enum class Phase {
  Input,       ///< as imported: graph ops, no optimisation
  Graph,       ///< shapes inferred, canonicalised, constants folded
  Training,    ///< autodiff, loss scaling, optimizer (not built yet)
  Partitioned, ///< stages, recomputation, pipelining (not built yet)
  Linalg,      ///< lowered to linalg/tensor/arith/math
  Ipu,         ///< tile-mapped ipu dialect: the machine program
  Llvm,        ///< native code in the LLVM dialect: the host reference
               ///< code and the vertex kernels
  Executable,  ///< a .tess file
};

std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase phase);
/// True if this build implements the phase.
bool isPhaseAvailable(Phase phase);
/// "input, graph" - the phases a user can ask for today.
std::string availablePhaseList();

struct GraphPipelineOptions {
  /// Fail unless every shape is static (the IPU needs them); off only for
  /// experiments on symbolic models.
  bool requireStaticShapes = true;
};

/// input -> graph: shape inference, canonicalisation (folding constant shape
/// computations), weight layout folding, CSE, and removal of unused globals.
void buildGraphPipeline(mlir::OpPassManager &pm,
                        const GraphPipelineOptions &options);

/// graph -> linalg: every graph op to linalg/tensor/arith/math, cleaned up.
void buildLinalgPipeline(mlir::OpPassManager &pm);

struct IPUPipelineOptions {
  /// PopTorch's availableMemoryProportion: the share of each tile's memory
  /// a vertex's output and receive buffers may take.
  double availableMemoryProportion = 0.6;
  /// Where ipu-allocate-memory writes the memory report (none if empty).
  std::string reportPath;
};

/// linalg -> ipu: prepare, map tiles, allocate memory. The module must carry
/// an #ipu.target.
void buildIPUPipeline(mlir::OpPassManager &pm, const IPUPipelineOptions &options);

} // namespace tessera

#endif // TESSERA_COMPILER_PIPELINES_H
