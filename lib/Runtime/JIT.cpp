//===- JIT.cpp - link an executable's native code in memory --------------===//

#include "tessera/Runtime/JIT.h"

#include "tessera/Runtime/Executable.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tessera::runtime {

namespace {

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

/// Writes perf's map of JIT-compiled code, /tmp/perf-<pid>.map: one line
/// "address size name" per function the objects define, so that `perf
/// report` names the vertex kernels instead of showing bare addresses.
/// Best effort: a developer's aid, enabled by TESSERA_PERF_MAP=1.
/// Calls fn(name, size) for every global symbol of `type` (a function, or
/// data) that `objects` define.
void forEachDefinedSymbol(llvm::ArrayRef<llvm::StringRef> objects,
                          llvm::object::SymbolRef::Type symbolType,
                          llvm::function_ref<void(llvm::StringRef, uint64_t)> fn) {
  for (llvm::StringRef bytes : objects) {
    auto object = llvm::object::ObjectFile::createObjectFile(
        llvm::MemoryBufferRef(bytes, "tessera-code"));
    if (!object) {
      llvm::consumeError(object.takeError());
      continue;
    }
    for (const llvm::object::SymbolRef &symbol : (*object)->symbols()) {
      auto type = symbol.getType();
      auto name = symbol.getName();
      auto flags = symbol.getFlags();
      bool defined = type && name && flags && *type == symbolType &&
                     (*flags & llvm::object::SymbolRef::SF_Global) &&
                     !(*flags & llvm::object::SymbolRef::SF_Undefined);
      if (!defined) {
        llvm::consumeError(type.takeError()); // success when it was read
        llvm::consumeError(name.takeError());
        llvm::consumeError(flags.takeError());
        continue;
      }
      fn(*name, llvm::object::ELFSymbolRef(symbol).getSize());
    }
  }
}

void forEachDefinedFunction(llvm::ArrayRef<llvm::StringRef> objects,
                            llvm::function_ref<void(llvm::StringRef, uint64_t)> fn) {
  forEachDefinedSymbol(objects, llvm::object::SymbolRef::ST_Function, fn);
}

void writePerfMap(llvm::orc::LLJIT &jit, llvm::ArrayRef<llvm::StringRef> objects) {
  std::vector<std::pair<uint64_t, std::pair<uint64_t, std::string>>> functions;
  forEachDefinedFunction(objects, [&](llvm::StringRef name, uint64_t size) {
    auto address = jit.lookup(name);
    if (!address) {
      llvm::consumeError(address.takeError());
      return;
    }
    functions.push_back({address->getValue(), {size, name.str()}});
  });
  std::sort(functions.begin(), functions.end());
  std::string path = "/tmp/perf-" + std::to_string(llvm::sys::Process::getProcessId()) + ".map";
  // A process may link several executables (a Python session, or the IPU
  // model next to the host reference): the first map starts the file, the
  // others add to it.
  static std::atomic<bool> started{false};
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec,
                           started.exchange(true) ? llvm::sys::fs::OF_Append
                                                  : llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "warning: TESSERA_PERF_MAP: cannot write " << path << ": "
                 << ec.message() << "; perf will show the kernels as bare addresses\n";
    return;
  }
  for (const auto &[address, f] : functions)
    out << llvm::format_hex_no_prefix(address, 1) << ' '
        << llvm::format_hex_no_prefix(f.first, 1) << ' ' << f.second << '\n';
}

} // namespace

llvm::Error checkHostCPU(const ExecutableMetadata &metadata) {
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  std::vector<std::string> missing;
  // Tuning flags (prefer-256-bit, ...) are not CPU features: only features
  // this host reports on can be missing.
  for (const std::string &f : metadata.hostFeatures) {
    auto it = host.find(f);
    if (it != host.end() && !it->second)
      missing.push_back(f);
  }
  if (missing.empty())
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "the executable's native code was generated for host CPU '" + metadata.hostCPU +
          "' and uses " + llvm::join(missing, ", ") + ", which this machine's CPU (" +
          llvm::sys::getHostCPUName() +
          ") lacks: recompile the model on this machine, or with --host-cpu=generic "
          "for code any " + metadata.hostTriple + " host runs");
}

namespace {
void initializeNativeTarget() {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
}
} // namespace

llvm::Expected<const llvm::Target *> lookupHostTarget() {
  initializeNativeTarget();
  std::string triple = llvm::sys::getProcessTriple();
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(llvm::Triple(triple), error);
  if (!target)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no LLVM target for the host (" + triple + "): " + error);
  return target;
}

llvm::Expected<std::string> compileToObject(llvm::Module &module, llvm::StringRef cpu,
                                            llvm::StringRef features, bool unrollLoops) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  llvm::Expected<const llvm::Target *> target = lookupHostTarget();
  if (!target)
    return target.takeError();
  std::string triple = llvm::sys::getProcessTriple();
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine((*target)->createTargetMachine(
      llvm::Triple(triple), cpu, features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  module.setDataLayout(machine->createDataLayout());
  module.setTargetTriple(llvm::Triple(triple));

  // O2 over the whole module.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = unrollLoops;
  llvm::PassBuilder builder(machine.get(), tuning);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, mam);

  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    return fail("the host target cannot emit object files");
  codegen.run(module);
  return std::string(object.data(), object.size());
}

llvm::Expected<std::string> compileReferenceObject(llvm::Module &module) {
  // This machine's own CPU: the reference runs here.
  std::string features;
  for (const auto &[name, enabled] : llvm::sys::getHostCPUFeatures())
    features += (enabled ? "+" : "-") + name.str() + ",";
  return compileToObject(module, llvm::sys::getHostCPUName(), features);
}

llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>>
createCodeJIT(llvm::ArrayRef<llvm::StringRef> objects) {
  initializeNativeTarget();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit)
    return jit.takeError();
  // Kernels call libm (expf, erff, ...) and malloc/free from this process.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process)
    return process.takeError();
  (*jit)->getMainJITDylib().addGenerator(std::move(*process));
  llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(),
                                      (*jit)->getDataLayout());
  if (auto err = (*jit)->getMainJITDylib().define(llvm::orc::absoluteSymbols(
          {{mangle("memrefCopy"),
            {llvm::orc::ExecutorAddr::fromPtr(&tesseraMemrefCopy),
             llvm::JITSymbolFlags::Exported}}})))
    return std::move(err);
  for (llvm::StringRef object : objects)
    if (auto err = (*jit)->addObjectFile(
            llvm::MemoryBuffer::getMemBufferCopy(object, "tessera-code")))
      return std::move(err);
  if (const char *map = std::getenv("TESSERA_PERF_MAP"); map && *map && *map != '0')
    writePerfMap(**jit, objects);
  return std::move(*jit);
}

std::vector<std::string> definedFunctions(llvm::ArrayRef<llvm::StringRef> objects) {
  std::vector<std::string> names;
  forEachDefinedFunction(objects, [&](llvm::StringRef name, uint64_t) {
    names.push_back(name.str());
  });
  return names;
}

llvm::StringMap<uint64_t> definedData(llvm::ArrayRef<llvm::StringRef> objects) {
  llvm::StringMap<uint64_t> sizes;
  forEachDefinedSymbol(objects, llvm::object::SymbolRef::ST_Data,
                       [&](llvm::StringRef name, uint64_t size) { sizes[name] = size; });
  return sizes;
}

llvm::Expected<PackedEntry> lookupEntry(llvm::orc::LLJIT &jit, llvm::StringRef symbol) {
  auto entry = jit.lookup(symbol);
  if (!entry)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the executable's code has no entry '" + symbol +
                                       "': " + llvm::toString(entry.takeError()));
  return entry->toPtr<PackedEntry>();
}

} // namespace tessera::runtime
