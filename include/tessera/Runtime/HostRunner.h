//===- HostRunner.h - run an executable's host reference code ---*- C++ -*-===//
//
// Loads the native object of a .tess with LLVM's ORC JIT linker (no MLIR)
// and calls its packed entry point on host tensors. Inputs are checked
// against the executable's signature; weights are passed in place from the
// mapped file.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_HOSTRUNNER_H
#define TESSERA_RUNTIME_HOSTRUNNER_H

#include "tessera/Runtime/Runner.h"

#include <memory>

namespace llvm::orc {
class LLJIT;
} // namespace llvm::orc

namespace tessera::runtime {

class HostRunner : public Runner {
public:
  static llvm::Expected<std::unique_ptr<HostRunner>>
  create(const Executable &executable);
  ~HostRunner() override;

  llvm::Expected<std::vector<Tensor>> run(llvm::ArrayRef<Tensor> inputs) override;
  std::vector<Tensor> readState() override { return state_; }
  Tensor readStateAt(size_t index) override { return state_.at(index); }
  llvm::Error writeState(size_t index, const Tensor &value) override;

private:
  /// One iteration on tensors of the compiled shapes.
  llvm::Expected<std::vector<Tensor>> runOnce(llvm::ArrayRef<Tensor> inputs);
  explicit HostRunner(const Executable &executable);
  const Executable &executable_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  void (*entry_)(void **) = nullptr;
  /// The state, on the host: the reference path has no device.
  std::vector<Tensor> state_;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_HOSTRUNNER_H
