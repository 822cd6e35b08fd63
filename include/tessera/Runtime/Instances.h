//===- Instances.h - one process among tessera-launch's instances -*- C++ -*-===//
//
// Replicas beyond one process run as instances (MPI ranks started by
// tessera-launch, PopRun's way): instance i runs replicas
// [offset, offset + local) of the executable's replicas on its own IPU
// model, and the program's cross-replica collectives span every instance.
// The launcher tells each process where it stands through PopDist's
// environment variables; MPI carries the collectives between processes.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_INSTANCES_H
#define TESSERA_RUNTIME_INSTANCES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace tessera::runtime {

/// This process's place among the instances.
struct Instance {
  int64_t numInstances = 1;
  int64_t index = 0;
  int64_t totalReplicas = 1;
  int64_t localReplicas = 1;
  int64_t replicaOffset = 0; ///< index * localReplicas
  int64_t ipusPerReplica = 1;
  /// Instances on this host (OpenMPI's OMPI_COMM_WORLD_LOCAL_SIZE), which
  /// share its cores.
  int64_t onThisHost = 1;

  /// From the launcher's environment (POPDIST_NUM_INSTANCES,
  /// POPDIST_INSTANCE_INDEX, POPDIST_NUM_TOTAL_REPLICAS,
  /// POPDIST_NUM_LOCAL_REPLICAS, POPDIST_REPLICA_INDEX_OFFSET,
  /// POPDIST_NUM_IPUS_PER_REPLICA): nullopt outside a launch, an error
  /// naming the variable when they disagree with each other.
  static llvm::Expected<std::optional<Instance>> fromEnvironment();
  /// The instances on this host, by MPI's environment (1 outside a launch).
  static int64_t countOnThisHost();
};

/// The instances of a launch, joined over MPI (MPI_Init on first use,
/// MPI_Finalize at exit). Collectives are matched by order: every instance
/// must make the same calls in the same order, as every instance of an SPMD
/// program does. An MPI failure is an error naming the call, never an abort
/// of this process.
class InstanceGroup {
public:
  /// A communicator of its own for one executable (so that two models'
  /// collectives never match each other's).
  static llvm::Expected<std::unique_ptr<InstanceGroup>> join(const Instance &self);
  ~InstanceGroup();

  const Instance &self() const { return self_; }

  /// `all` = every instance's `mine` (each `mine.size()` bytes, equal on
  /// every instance), in instance order.
  llvm::Error allGather(llvm::ArrayRef<char> mine, llvm::MutableArrayRef<char> all);

  /// Refuses, on every instance alike, when `fingerprint` (an executable's
  /// checksum, its replicas) differs between instances: the error names the
  /// first instance that differs from instance 0 and `what`.
  llvm::Error checkSame(llvm::StringRef what, llvm::StringRef fingerprint);

private:
  explicit InstanceGroup(const Instance &self);
  Instance self_;
  struct Comm;
  std::unique_ptr<Comm> comm_;
};

/// Stops every instance of the launch (MPI_Abort) when this one fails after
/// joining: the others may wait for it in a collective. Nothing when MPI
/// was not started (a single process, or a failure before any collective:
/// the launcher stops the others when this process exits non-zero).
void abortInstances(int status);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_INSTANCES_H
