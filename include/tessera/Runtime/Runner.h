//===- Runner.h - what every way of running an executable offers -*- C++ -*-===//
//
// The IPU model and the host reference path run the same executables with
// the same interface, so tools and the training loop take either. Both keep
// an executable's device-resident state (weights, optimizer state,
// hyperparameters of a training step) between runs.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_RUNNER_H
#define TESSERA_RUNTIME_RUNNER_H

#include "tessera/Runtime/Executable.h"

namespace tessera::runtime {

class Runner {
public:
  virtual ~Runner();

  /// Runs once: the executable's device iterations, one after the other.
  /// `inputs` are in signature order; a wrong count, shape or element type
  /// is an error naming the input. State persists across iterations and
  /// runs.
  virtual llvm::Expected<std::vector<Tensor>> run(llvm::ArrayRef<Tensor> inputs) = 0;

  /// The current value of every state tensor, in metadata().state order.
  virtual std::vector<Tensor> readState() = 0;
  /// The current value of state tensor `index` alone (the loss scale each
  /// run, without copying every weight).
  virtual Tensor readStateAt(size_t index) { return readState().at(index); }
  /// Replaces state tensor `index` (a checkpoint, a new learning rate).
  /// The tensor must have the state's shape and element type.
  virtual llvm::Error writeState(size_t index, const Tensor &value) = 0;

protected:
  /// Checks `value` against state `index` of `metadata`.
  static llvm::Error checkState(const ExecutableMetadata &metadata, size_t index,
                                const Tensor &value);
  /// The initial value of state `index`, from the executable's weights.
  static Tensor initialState(const Executable &executable, size_t index);
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_RUNNER_H
