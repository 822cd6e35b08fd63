//===- PhasePool.cpp - fork-join threads for bulk-synchronous phases ------===//

#include "tessera/Runtime/PhasePool.h"

namespace tessera::runtime {

namespace {
/// Iterations a thread polls before it blocks: about 20-50 microseconds,
/// longer than the gap between two phases of a running program and short
/// enough not to steal a shared machine's cores when the program is done.
constexpr int kSpinIterations = 20000;

inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}
} // namespace

PhasePool::PhasePool(unsigned threads) {
  for (unsigned i = 1; i < threads; ++i)
    workers_.emplace_back([this] { work(); });
}

PhasePool::~PhasePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    phase_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

void PhasePool::claimChunks() {
  for (size_t i = next_.fetch_add(1, std::memory_order_relaxed); i < count_;
       i = next_.fetch_add(1, std::memory_order_relaxed))
    fn_(i);
}

void PhasePool::run(size_t n, llvm::function_ref<void(size_t)> fn) {
  if (n == 0)
    return;
  if (workers_.empty() || n == 1) {
    for (size_t i = 0; i < n; ++i)
      fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = fn;
    count_ = n;
    next_.store(0, std::memory_order_relaxed);
    busy_.store(workers_.size(), std::memory_order_relaxed);
    phase_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  claimChunks();
  for (int spin = 0; busy_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      pause();
      continue;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock,
                   [&] { return busy_.load(std::memory_order_acquire) == 0; });
  }
}

void PhasePool::work() {
  uint64_t seen = 0;
  while (true) {
    // Wait for the next phase: poll first, then sleep.
    uint64_t now = phase_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinIterations; ++spin) {
      pause();
      now = phase_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(
          lock, [&] { return phase_.load(std::memory_order_acquire) != seen; });
      now = phase_.load(std::memory_order_acquire);
    }
    seen = now;
    {
      // The phase's function and count were written under the mutex before
      // the phase number was bumped.
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_)
        return;
    }
    claimChunks();
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.notify_all();
    }
  }
}

} // namespace tessera::runtime
