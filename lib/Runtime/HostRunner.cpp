//===- HostRunner.cpp - run an executable's host reference code ----------===//

#include "tessera/Runtime/HostRunner.h"

#include "tessera/Runtime/JIT.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"

using llvm::Expected;

namespace tessera::runtime {

namespace {
/// A strided memref descriptor as MLIR's C interface lays it out:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}.
std::vector<int64_t> descriptor(const void *data, const std::vector<int64_t> &shape) {
  std::vector<int64_t> d;
  d.push_back(reinterpret_cast<int64_t>(data));
  d.push_back(reinterpret_cast<int64_t>(data));
  d.push_back(0);
  for (int64_t s : shape)
    d.push_back(s);
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  d.insert(d.end(), strides.begin(), strides.end());
  return d;
}
} // namespace

HostRunner::HostRunner(const Executable &executable) : executable_(executable) {}
HostRunner::~HostRunner() = default;

Expected<std::unique_ptr<HostRunner>>
HostRunner::create(const Executable &exe, const ReferenceCompiler &compileReference) {
  auto runner = std::unique_ptr<HostRunner>(new HostRunner(exe));
  // The reference code is one replica's step, whose cross-replica sums it
  // leaves out: it would compute a one-replica share of every gradient.
  if (exe.metadata().replicas > 1)
    return llvm::createStringError(
        "the host reference runs one replica; this executable has " +
        llvm::Twine(exe.metadata().replicas) +
        " (run it on the IPU model, without --reference, or compile with --replicas 1 "
        "and the combined batch to compare)");
  if (llvm::Error err = checkHostCPU(exe.metadata()))
    return std::move(err);
  if (llvm::Error err = checkProgramAgreesWithSignature(exe))
    return std::move(err);
  // The reference code is lowered and compiled here, for this machine,
  // from the executable's MLIR: compiles skip it, and only reference runs
  // pay.
  auto object = compileReference(exe.referenceMLIR());
  if (!object)
    return object.takeError();
  auto jit = createCodeJIT({*object});
  if (!jit)
    return jit.takeError();
  runner->jit_ = std::move(*jit);
  // The entry must be the executable's own code, not a symbol of the process.
  std::vector<std::string> own = definedFunctions({*object});
  if (!llvm::is_contained(own, exe.metadata().entry))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the executable's entry '" + exe.metadata().entry +
            "' is not a function of its own code (damaged or forged; recompile the model)");
  auto entry = lookupEntry(*runner->jit_, exe.metadata().entry);
  if (!entry)
    return entry.takeError();
  runner->entry_ = *entry;
  for (size_t i = 0; i < exe.metadata().state.size(); ++i)
    runner->state_.push_back(initialState(exe, i));
  return runner;
}

Expected<std::vector<Tensor>> HostRunner::run(llvm::ArrayRef<Tensor> inputs) {
  const ExecutableMetadata &m = executable_.metadata();
  if (auto err = checkInputs(m, inputs))
    return std::move(err);
  return runDeviceIterations(m, inputs, [&](llvm::ArrayRef<Tensor> batch) {
    return runOnce(batch);
  });
}

llvm::Error HostRunner::writeState(size_t index, const Tensor &value) {
  if (auto err = checkState(executable_.metadata(), index, value))
    return err;
  state_[index] = value;
  return llvm::Error::success();
}

Expected<std::vector<Tensor>> HostRunner::runOnce(llvm::ArrayRef<Tensor> inputs) {
  const ExecutableMetadata &m = executable_.metadata();
  // The program's outputs: the signature's, then the state's updates (at
  // the output index each state names).
  size_t numUpdates = llvm::count_if(m.state, [](const StateInfo &s) { return s.update >= 0; });
  std::vector<Tensor> outputs(m.outputs.size() + numUpdates);
  auto allocate = [&](const TensorInfo &o, size_t at) {
    outputs[at] = Tensor::zeros(o.dtype, o.shape);
  };
  for (size_t i = 0; i < m.outputs.size(); ++i)
    allocate(m.outputs[i], i);
  for (const StateInfo &s : m.state)
    if (s.update >= 0)
      allocate(s, s.update);
  std::vector<std::vector<int64_t>> descriptors;
  for (const Tensor &t : inputs)
    descriptors.push_back(descriptor(t.data.data(), t.shape));
  for (const Tensor &t : state_)
    descriptors.push_back(descriptor(t.data.data(), t.shape));
  for (size_t i = 0; i < m.weights.size(); ++i)
    if (m.weights[i].reference)
      descriptors.push_back(descriptor(executable_.weight(i).data(), m.weights[i].shape));
  for (Tensor &t : outputs)
    descriptors.push_back(descriptor(t.data.data(), t.shape));
  std::vector<void *> args;
  for (auto &d : descriptors)
    args.push_back(d.data());
  entry_(args.data());
  for (size_t i = 0; i < m.state.size(); ++i)
    if (m.state[i].update >= 0)
      state_[i] = std::move(outputs[m.state[i].update]);
  outputs.resize(m.outputs.size());
  return outputs;
}

} // namespace tessera::runtime
