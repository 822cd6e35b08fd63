//===- PhasePool.h - fork-join threads for bulk-synchronous phases -*- C++
//-*-===//
//
// The IPU model runs each phase of a step (exchange, compute, a copy) as
// chunks of independent work spread over the host's threads, then waits for
// all of them: the barrier between BSP phases. A ResNet-50 inference is ~600
// such phases, many of a few microseconds, so the pool keeps its threads
// spinning briefly between phases instead of sleeping on a condition
// variable after each one (a general-purpose thread pool's wait costs tens
// of microseconds per phase).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_PHASEPOOL_H
#define TESSERA_RUNTIME_PHASEPOOL_H

#include "llvm/ADT/STLFunctionalExtras.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::runtime {

class PhasePool {
public:
  /// `threads` counts the calling thread: 1 runs everything inline.
  explicit PhasePool(unsigned threads);
  ~PhasePool();
  PhasePool(const PhasePool &) = delete;
  PhasePool &operator=(const PhasePool &) = delete;

  unsigned threads() const { return workers_.size() + 1; }

  /// Calls fn(i) for every i in [0, n), each exactly once, on the pool's
  /// threads and the caller's, and returns when all calls have returned.
  /// Chunks are claimed one at a time, so uneven chunks balance out.
  void run(size_t n, llvm::function_ref<void(size_t)> fn);

private:
  void work();
  void claimChunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  llvm::function_ref<void(size_t)> fn_;
  size_t count_ = 0;
  std::atomic<size_t> next_{0};
  /// Workers still inside the current phase.
  std::atomic<unsigned> busy_{0};
  /// Bumped once per phase; workers watch it for new work.
  std::atomic<uint64_t> phase_{0};
  bool stopping_ = false;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_PHASEPOOL_H
