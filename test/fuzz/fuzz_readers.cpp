//===- fuzz_readers.cpp - libFuzzer targets for the runtime's file readers ===//
//
// One binary, three targets, chosen by $TESSERA_FUZZ_TARGET:
//   npy         parseNpy on the input's bytes
//   npz         parseNpz (libzip: stored and deflated members, ZIP64, CRCs)
//   executable  the input is a .tess's metadata JSON, wrapped in an image
//               with a valid checksum (so the fuzzer explores the loader and
//               program validator, not the checksum): Executable::parse,
//               the signature-program agreement, the program's own checks
//               for its target, and the memory plan of a valid program.
// Every input must give a value or an error, never a crash, a sanitizer
// report or an allocation beyond the input's bounds.
//
//===----------------------------------------------------------------------===//

#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Runtime/Tensor.h"
#include "tessera/Target/IPUTarget.h"

#include "llvm/Support/MemoryBuffer.h"

#include <cstdlib>
#include <cstring>
#include <string>

using namespace tessera;

namespace {
enum class Target { Npy, Npz, Executable };

Target chosenTarget() {
  static const Target chosen = [] {
    const char *name = std::getenv("TESSERA_FUZZ_TARGET");
    std::string t = name ? name : "";
    if (t == "npy")
      return Target::Npy;
    if (t == "npz")
      return Target::Npz;
    if (t == "executable")
      return Target::Executable;
    fprintf(stderr, "set TESSERA_FUZZ_TARGET to npy, npz or executable\n");
    std::abort();
  }();
  return chosen;
}

void fuzzExecutable(llvm::StringRef metadata) {
  // 256 bytes of weights and no code: metadata may name either.
  std::string image = runtime::buildExecutableImage(metadata, "", std::string(256, '\1'));
  auto exe = runtime::Executable::parse(llvm::MemoryBuffer::getMemBufferCopy(image), "fuzz");
  if (!exe) {
    llvm::consumeError(exe.takeError());
    return;
  }
  if (llvm::Error err = runtime::checkProgramAgreesWithSignature(**exe)) {
    llvm::consumeError(std::move(err));
    return;
  }
  const runtime::ExecutableMetadata &m = (*exe)->metadata();
  auto machine = target::makeTarget(
      m.target, m.numIPUs,
      m.tilesPerIPU ? std::optional<int64_t>(m.tilesPerIPU) : std::nullopt);
  if (!machine) {
    llvm::consumeError(machine.takeError());
    return;
  }
  if (llvm::Error err = m.program->verify(machine->totalTiles())) {
    llvm::consumeError(std::move(err));
    return;
  }
  auto plan = runtime::planMemory(*m.program, machine->totalTiles(), machine->bytesPerTile);
  if (!plan)
    llvm::consumeError(plan.takeError());
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  switch (chosenTarget()) {
  case Target::Npy:
    if (auto t = runtime::parseNpy(bytes, "fuzz"); !t)
      llvm::consumeError(t.takeError());
    break;
  case Target::Npz:
    if (auto t = runtime::parseNpz(bytes, "fuzz"); !t)
      llvm::consumeError(t.takeError());
    break;
  case Target::Executable:
    fuzzExecutable(bytes);
    break;
  }
  return 0;
}
