//===- Runner.cpp - what every way of running an executable offers -------===//

#include "tessera/Runtime/Runner.h"

#include "llvm/ADT/Twine.h"

namespace tessera::runtime {

Runner::~Runner() = default;

llvm::Error Runner::checkState(const ExecutableMetadata &metadata, size_t index,
                               const Tensor &value) {
  if (index >= metadata.state.size())
    return llvm::createStringError("the executable has no state tensor " +
                                   llvm::Twine(index));
  const StateInfo &s = metadata.state[index];
  if (value.shape != s.shape || value.dtype != s.dtype ||
      value.data.size() != static_cast<size_t>(s.numElements()) * dtypeSize(s.dtype))
    return llvm::createStringError("'" + s.name + "' must be " + s.typeString() +
                                   ", got " + typeString(value.shape, value.dtype));
  return llvm::Error::success();
}

Tensor Runner::initialState(const Executable &executable, size_t index) {
  const StateInfo &s = executable.metadata().state[index];
  Tensor t;
  t.dtype = s.dtype;
  t.shape = s.shape;
  llvm::ArrayRef<char> data = executable.weight(s.weight);
  t.data.assign(data.begin(), data.end());
  return t;
}

} // namespace tessera::runtime
