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

#include <functional>
#include <memory>

namespace llvm::orc {
class LLJIT;
} // namespace llvm::orc

namespace tessera::runtime {

/// Compiles an executable's host reference code (its referenceMLIR) to an
/// object for this machine: tessera::compileHostReference, which needs the
/// compiler; the runtime itself does not.
using ReferenceCompiler = std::function<llvm::Expected<std::string>(llvm::StringRef)>;

class HostRunner : public Runner {
public:
  static llvm::Expected<std::unique_ptr<HostRunner>>
  create(const Executable &executable, const ReferenceCompiler &compileReference);
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
