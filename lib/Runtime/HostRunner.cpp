//===- HostRunner.cpp - run an executable's host reference code ----------===//

#include "tessera/Runtime/HostRunner.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/TargetSelect.h"

#include <cstring>

using llvm::Expected;

namespace tessera::runtime {

namespace {
llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

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
/// MLIR's lowering of a non-contiguous memref.copy calls `memrefCopy`
/// (normally from MLIR's runner utilities, which the runtime does not link).
/// Same ABI: element size and two unranked descriptors {rank, ranked*}.
struct UnrankedDescriptor {
  int64_t rank;
  int64_t *ranked; // {allocated, aligned, offset, sizes[rank], strides[rank]}
};

extern "C" void tesseraMemrefCopy(int64_t elementSize, UnrankedDescriptor *src,
                                  UnrankedDescriptor *dst) {
  int64_t rank = src->rank;
  auto *srcBase = reinterpret_cast<char *>(src->ranked[1]) + src->ranked[2] * elementSize;
  auto *dstBase = reinterpret_cast<char *>(dst->ranked[1]) + dst->ranked[2] * elementSize;
  const int64_t *sizes = src->ranked + 3;
  const int64_t *srcStrides = src->ranked + 3 + rank;
  const int64_t *dstStrides = dst->ranked + 3 + rank;
  int64_t total = 1;
  for (int64_t d = 0; d < rank; ++d)
    total *= sizes[d];
  if (total == 0)
    return;
  std::vector<int64_t> index(rank, 0);
  int64_t srcOff = 0, dstOff = 0;
  for (int64_t n = 0; n < total; ++n) {
    std::memcpy(dstBase + dstOff * elementSize, srcBase + srcOff * elementSize,
                elementSize);
    for (int64_t d = rank - 1; d >= 0; --d) {
      srcOff += srcStrides[d];
      dstOff += dstStrides[d];
      if (++index[d] < sizes[d])
        break;
      srcOff -= srcStrides[d] * sizes[d];
      dstOff -= dstStrides[d] * sizes[d];
      index[d] = 0;
    }
  }
}

} // namespace

HostRunner::HostRunner(const Executable &executable) : executable_(executable) {}
HostRunner::~HostRunner() = default;

Expected<std::unique_ptr<HostRunner>> HostRunner::create(const Executable &exe) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  auto runner = std::unique_ptr<HostRunner>(new HostRunner(exe));
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit)
    return jit.takeError();
  runner->jit_ = std::move(*jit);
  // Kernels call libm (expf, erff, ...) and malloc/free from this process.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      runner->jit_->getDataLayout().getGlobalPrefix());
  if (!process)
    return process.takeError();
  runner->jit_->getMainJITDylib().addGenerator(std::move(*process));
  llvm::orc::MangleAndInterner mangle(runner->jit_->getExecutionSession(),
                                      runner->jit_->getDataLayout());
  if (auto err = runner->jit_->getMainJITDylib().define(llvm::orc::absoluteSymbols(
          {{mangle("memrefCopy"),
            {llvm::orc::ExecutorAddr::fromPtr(&tesseraMemrefCopy),
             llvm::JITSymbolFlags::Exported}}})))
    return std::move(err);
  if (auto err = runner->jit_->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(
          exe.hostObject(), "tessera-host-code")))
    return std::move(err);
  auto entry = runner->jit_->lookup(exe.metadata().entry);
  if (!entry)
    return fail("the executable's code has no entry '" + exe.metadata().entry +
                "': " + llvm::toString(entry.takeError()));
  runner->entry_ = entry->toPtr<void (*)(void **)>();
  return runner;
}

Expected<std::vector<Tensor>> HostRunner::run(llvm::ArrayRef<Tensor> inputs) {
  const ExecutableMetadata &m = executable_.metadata();
  if (inputs.size() != m.inputs.size())
    return fail("the model takes " + llvm::Twine(m.inputs.size()) +
                " input(s), got " + llvm::Twine(inputs.size()));
  for (auto [given, want] : llvm::zip(inputs, m.inputs))
    if (given.dtype != want.dtype || given.shape != want.shape)
      return fail("input '" + want.name + "' must be " + want.typeString() +
                  ", got " + given.typeString());
  std::vector<Tensor> outputs;
  for (const TensorInfo &o : m.outputs) {
    Tensor t;
    t.dtype = o.dtype;
    t.shape = o.shape;
    t.data.resize(o.numElements() * dtypeSize(o.dtype));
    outputs.push_back(std::move(t));
  }
  std::vector<std::vector<int64_t>> descriptors;
  for (const Tensor &t : inputs)
    descriptors.push_back(descriptor(t.data.data(), t.shape));
  for (size_t i = 0; i < m.weights.size(); ++i)
    descriptors.push_back(descriptor(executable_.weight(i).data(), m.weights[i].shape));
  for (Tensor &t : outputs)
    descriptors.push_back(descriptor(t.data.data(), t.shape));
  std::vector<void *> args;
  for (auto &d : descriptors)
    args.push_back(d.data());
  entry_(args.data());
  return outputs;
}

} // namespace tessera::runtime
