//===- Instances.cpp - one process among tessera-launch's instances -------===//

#include "tessera/Runtime/Instances.h"
#include "tessera/Support/Error.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SHA256.h"

// MPI's C interface only (OpenMPI's header otherwise pulls in its C++
// bindings, a library this does not link).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace tessera::runtime {

namespace {
/// An integer environment variable: nullopt when unset, an error when set
/// to something else than a whole number in [low, high].
llvm::Expected<std::optional<int64_t>> integerVariable(const char *name, int64_t low,
                                                       int64_t high) {
  const char *text = std::getenv(name);
  if (!text)
    return std::nullopt;
  int64_t value = 0;
  if (llvm::StringRef(text).trim().getAsInteger(10, value) || value < low || value > high)
    return fail(llvm::Twine(name) + "='" + text + "' is not a whole number in [" +
                llvm::Twine(low) + ", " + llvm::Twine(high) +
                "] (tessera-launch sets it; start instances through tessera-launch)");
  return value;
}

llvm::Error mpiError(const char *call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    length = 0;
  return fail(llvm::Twine(call) + " failed between tessera-launch's instances: " +
              llvm::StringRef(text, length));
}

/// MPI is started once per process, on first use, and finished at exit
/// (the launcher's mpirun takes a process that exits without MPI_Finalize
/// for a failed one).
llvm::Error startMPI() {
  static std::once_flag once;
  static int result = MPI_SUCCESS;
  std::call_once(once, [] {
    int started = 0;
    MPI_Initialized(&started);
    if (started)
      return;
    int provided = 0;
    result = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (result == MPI_SUCCESS) {
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      std::atexit([] {
        int finished = 0;
        MPI_Finalized(&finished);
        if (!finished)
          MPI_Finalize();
      });
    }
  });
  if (result != MPI_SUCCESS)
    return fail("MPI_Init failed: this process was not started by tessera-launch's mpirun, "
                "or MPI cannot reach the other instances");
  return llvm::Error::success();
}
} // namespace

llvm::Expected<std::optional<Instance>> Instance::fromEnvironment() {
  constexpr int64_t kMost = 1 << 20;
  auto instances = integerVariable("POPDIST_NUM_INSTANCES", 1, kMost);
  if (!instances)
    return instances.takeError();
  if (!*instances)
    return std::nullopt;
  Instance self;
  self.numInstances = **instances;
  auto index = integerVariable("POPDIST_INSTANCE_INDEX", 0, self.numInstances - 1);
  auto total = integerVariable("POPDIST_NUM_TOTAL_REPLICAS", 1, kMost);
  auto local = integerVariable("POPDIST_NUM_LOCAL_REPLICAS", 1, kMost);
  auto offset = integerVariable("POPDIST_REPLICA_INDEX_OFFSET", 0, kMost);
  auto ipus = integerVariable("POPDIST_NUM_IPUS_PER_REPLICA", 1, kMost);
  for (auto *v : {&index, &total, &local, &offset, &ipus})
    if (!*v)
      return v->takeError();
  // The instance's index falls back on MPI's rank (a script started by
  // mpirun directly, with the other variables exported).
  if (!*index && self.numInstances == 1) {
    *index = 0;
  } else if (!*index) {
    auto rank = integerVariable("OMPI_COMM_WORLD_RANK", 0, self.numInstances - 1);
    if (!rank)
      return rank.takeError();
    if (!*rank)
      return fail("POPDIST_NUM_INSTANCES is set but not POPDIST_INSTANCE_INDEX: start "
                  "instances through tessera-launch");
    *index = *rank;
  }
  self.index = **index;
  self.totalReplicas = total->value_or(self.numInstances);
  if (self.totalReplicas % self.numInstances != 0)
    return fail("POPDIST_NUM_TOTAL_REPLICAS=" + llvm::Twine(self.totalReplicas) +
                " is not a multiple of POPDIST_NUM_INSTANCES=" +
                llvm::Twine(self.numInstances));
  self.localReplicas = local->value_or(self.totalReplicas / self.numInstances);
  self.replicaOffset = offset->value_or(self.index * self.localReplicas);
  self.ipusPerReplica = ipus->value_or(1);
  self.onThisHost = countOnThisHost();
  if (self.localReplicas * self.numInstances != self.totalReplicas ||
      self.replicaOffset != self.index * self.localReplicas)
    return fail("POPDIST_NUM_LOCAL_REPLICAS=" + llvm::Twine(self.localReplicas) +
                " and POPDIST_REPLICA_INDEX_OFFSET=" + llvm::Twine(self.replicaOffset) +
                " do not split " + llvm::Twine(self.totalReplicas) + " replicas evenly over " +
                llvm::Twine(self.numInstances) + " instances (instance " +
                llvm::Twine(self.index) + " would run replicas " +
                llvm::Twine(self.index * (self.totalReplicas / self.numInstances)) + " to " +
                llvm::Twine((self.index + 1) * (self.totalReplicas / self.numInstances) - 1) +
                ")");
  return self;
}

int64_t Instance::countOnThisHost() {
  const char *text = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  int64_t count = 1;
  if (!text || llvm::StringRef(text).getAsInteger(10, count) || count < 1)
    return 1;
  return count;
}

struct InstanceGroup::Comm {
  MPI_Comm comm = MPI_COMM_NULL;
  ~Comm() {
    int finished = 0;
    MPI_Finalized(&finished);
    if (comm != MPI_COMM_NULL && !finished)
      MPI_Comm_free(&comm);
  }
};

llvm::Expected<std::unique_ptr<InstanceGroup>> InstanceGroup::join(const Instance &self) {
  if (auto err = startMPI())
    return std::move(err);
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size != self.numInstances || rank != self.index)
    return fail("this process is MPI rank " + llvm::Twine(rank) + " of " + llvm::Twine(size) +
                " but POPDIST_INSTANCE_INDEX says instance " + llvm::Twine(self.index) +
                " of " + llvm::Twine(self.numInstances) +
                " (start instances through tessera-launch)");
  std::unique_ptr<InstanceGroup> group(new InstanceGroup(self));
  group->comm_ = std::make_unique<Comm>();
  if (int code = MPI_Comm_dup(MPI_COMM_WORLD, &group->comm_->comm); code != MPI_SUCCESS)
    return mpiError("MPI_Comm_dup", code);
  MPI_Comm_set_errhandler(group->comm_->comm, MPI_ERRORS_RETURN);
  return group;
}

InstanceGroup::InstanceGroup(const Instance &self) : self_(self) {}
InstanceGroup::~InstanceGroup() = default;

llvm::Error InstanceGroup::allGather(llvm::ArrayRef<char> mine,
                                     llvm::MutableArrayRef<char> all) {
  if (all.size() != mine.size() * self_.numInstances)
    return fail("internal error: an all-gather's result has the wrong size");
  // MPI counts are ints: large tensors go in pieces of at most 1 GiB.
  constexpr size_t kPiece = size_t(1) << 30;
  if (mine.size() <= kPiece) {
    int code = MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                             static_cast<int>(mine.size()), MPI_BYTE, comm_->comm);
    return code == MPI_SUCCESS ? llvm::Error::success() : mpiError("MPI_Allgather", code);
  }
  std::vector<char> piece;
  for (size_t at = 0; at < mine.size(); at += kPiece) {
    size_t n = std::min(kPiece, mine.size() - at);
    piece.resize(n * self_.numInstances);
    int code = MPI_Allgather(mine.data() + at, static_cast<int>(n), MPI_BYTE, piece.data(),
                             static_cast<int>(n), MPI_BYTE, comm_->comm);
    if (code != MPI_SUCCESS)
      return mpiError("MPI_Allgather", code);
    for (int64_t i = 0; i < self_.numInstances; ++i)
      std::memcpy(all.data() + i * mine.size() + at, piece.data() + i * n, n);
  }
  return llvm::Error::success();
}

llvm::Error InstanceGroup::checkSame(llvm::StringRef what, llvm::StringRef fingerprint) {
  std::array<uint8_t, 32> digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(fingerprint));
  std::vector<char> all(digest.size() * self_.numInstances);
  if (auto err = allGather(llvm::ArrayRef<char>(reinterpret_cast<const char *>(digest.data()),
                                                digest.size()),
                           all))
    return err;
  for (int64_t i = 1; i < self_.numInstances; ++i)
    if (std::memcmp(all.data(), all.data() + i * digest.size(), digest.size()) != 0)
      return fail("instance " + llvm::Twine(i) + "'s " + what + " differs from instance 0's: " +
                  "every instance must run the same executable with the same options");
  return llvm::Error::success();
}

void abortInstances(int status) {
  int started = 0, finished = 0;
  MPI_Initialized(&started);
  MPI_Finalized(&finished);
  if (!started || finished)
    return;
  // Said here, in one write, because mpirun's own report of an abort is
  // not always printed; tessera-launch names the instance from this line.
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string line = "tessera: instance " + std::to_string(rank) + " of " +
                     std::to_string(size) + " failed (status " + std::to_string(status) +
                     "); stopping every instance\n";
  fputs(line.c_str(), stderr);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, status ? status : 1);
}

} // namespace tessera::runtime
