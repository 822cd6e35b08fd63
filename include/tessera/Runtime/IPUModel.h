//===- IPUModel.h - execute a tile-mapped program on a software IPU -*- C++ -*-===//
//
// The IPU model runs an executable's MachineProgram the way the chip does:
// every tile owns `bytesPerTile` of memory (reserved, touched lazily) where
// the memory plan places variables, receive buffers and code; each step is an
// exchange phase (copies between tiles' memories), a sync, and a compute
// phase (every vertex of the compute set, run on a host thread pool with
// its tile's buffers). Inputs and outputs move over host streams. Its cycle
// counts are the program's estimate (ProgramCost.h): they depend only on the
// program, so they are computed once when the model is created. No MLIR
// here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_IPUMODEL_H
#define TESSERA_RUNTIME_IPUMODEL_H

#include "tessera/Runtime/Runner.h"
#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Runtime/ProgramCost.h"
#include "tessera/Target/IPUTarget.h"

#include "llvm/Support/JSON.h"

#include <memory>

namespace tessera::runtime {

class IPUModel : public Runner {
public:
  /// Loads the code, plans memory and fills tile memories with the weights.
  /// `threads` = 0 uses every hardware thread.
  static llvm::Expected<std::unique_ptr<IPUModel>>
  create(const Executable &executable, unsigned threads = 0);
  ~IPUModel() override;

  /// Runs the program once: a loop over the executable's device
  /// iterations, each streaming in its batch, running every step and
  /// streaming out. Inputs in signature order (checked like the host
  /// reference path), outputs in signature order.
  llvm::Expected<std::vector<Tensor>> run(llvm::ArrayRef<Tensor> inputs) override;
  /// State lives in its tiles' memory; these copy it to and from the host.
  std::vector<Tensor> readState() override;
  Tensor readStateAt(size_t index) override;
  /// State tensor `index` of replica `replica` (readState gives replica
  /// 0's): replicas hold equal weights, but their buffers (batch norm's
  /// running statistics) and replica indices differ.
  Tensor readReplicaStateAt(int64_t replica, size_t index);
  int64_t replicas() const;
  /// Under tessera-launch, refuses (on every instance alike) when the
  /// instances' state differs -- weights, optimizer state, hyperparameters
  /// (a learning rate or seed given to one instance only), the replica
  /// indices aside -- or `options` (what else the caller runs with) does:
  /// the instances would train apart. Nothing in one process. Collective:
  /// every instance calls it at the same point.
  llvm::Error checkInstancesAgree(llvm::StringRef options = "");
  llvm::Error writeState(size_t index, const Tensor &value) override;
  /// Forgets the host times of the runs so far (warm-up runs): the
  /// profile's host_* figures average the runs after.
  void resetHostTimes();

  const target::IPUTarget &target() const;
  const CostSummary &cost() const;
  const MemoryPlan &memory() const;

  /// {"target", "cycles", "steps": [...], "memory": memoryReportJSON(...)}.
  llvm::json::Value profileJSON() const;
  /// Chrome trace-event JSON of one run's simulated timeline (Perfetto).
  llvm::json::Value traceJSON() const;

private:
  struct Impl;
  explicit IPUModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_IPUMODEL_H
