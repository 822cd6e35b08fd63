//===- PluginLoader.cpp - find and load the TorchScript importer plugin ---===//
//
// The public entry points of TorchScriptImporter.h. The importer and libtorch
// live in a plugin loaded the first time one of them is called; the plugin is
// looked up at $TESSERA_TORCHSCRIPT_PLUGIN, at the path it was built to, and
// in ../lib next to the running executable.
//
//===----------------------------------------------------------------------===//

#include "tessera/Importers/TorchScript/TorchScriptImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

using namespace mlir;

namespace tessera::torchscript_importer {
namespace {

using ImportFn = Operation *(*)(const char *, size_t, MLIRContext *,
                                const ImportOptions *);
using ListFn = void (*)(std::vector<std::string> *);

struct Plugin {
  ImportFn import = nullptr;
  ListFn list = nullptr;
  std::string error;
};

std::vector<std::string> candidatePaths() {
  std::vector<std::string> candidates;
  if (auto env = llvm::sys::Process::GetEnv("TESSERA_TORCHSCRIPT_PLUGIN"))
    candidates.push_back(*env);
  candidates.push_back(TESSERA_TORCHSCRIPT_PLUGIN);
  std::string exe = llvm::sys::fs::getMainExecutable(
      nullptr, reinterpret_cast<void *>(&candidatePaths));
  if (!exe.empty()) {
    llvm::SmallString<256> near(llvm::sys::path::parent_path(exe));
    llvm::sys::path::append(near, "..", "lib", TESSERA_TORCHSCRIPT_PLUGIN_NAME);
    candidates.push_back(std::string(near));
  }
  return candidates;
}

const Plugin &plugin() {
  static const Plugin loaded = [] {
    Plugin p;
    for (const std::string &path : candidatePaths()) {
      if (!llvm::sys::fs::exists(path))
        continue;
      std::string error;
      auto library =
          llvm::sys::DynamicLibrary::getPermanentLibrary(path.c_str(), &error);
      if (!library.isValid()) {
        p.error = "cannot load the TorchScript importer plugin " + path +
                  ": " + error;
        continue;
      }
      p.import = reinterpret_cast<ImportFn>(
          library.getAddressOfSymbol("tesseraImportTorchScript"));
      p.list = reinterpret_cast<ListFn>(
          library.getAddressOfSymbol("tesseraTorchScriptOperators"));
      if (p.import && p.list)
        return p;
      p.error = path + " is not the TorchScript importer plugin";
    }
    if (p.error.empty())
      p.error = "the TorchScript importer plugin " TESSERA_TORCHSCRIPT_PLUGIN_NAME
                " is not installed (looked at " TESSERA_TORCHSCRIPT_PLUGIN
                " and next to this program); set TESSERA_TORCHSCRIPT_PLUGIN "
                "to its path";
    p.import = nullptr;
    p.list = nullptr;
    return p;
  }();
  return loaded;
}

} // namespace

std::string pluginPath() {
  for (const std::string &path : candidatePaths())
    if (llvm::sys::fs::exists(path))
      return path;
  return "";
}

bool isTorchScriptArchive(StringRef contents) {
  return contents.starts_with(StringRef("PK\x03\x04", 4));
}

OwningOpRef<ModuleOp> importTorchScriptModule(StringRef bytes,
                                              MLIRContext *context,
                                              const ImportOptions &options) {
  const Plugin &p = plugin();
  if (!p.import) {
    emitError(FileLineColLoc::get(context, options.modelName, 0, 0)) << p.error;
    return nullptr;
  }
  Operation *module = p.import(bytes.data(), bytes.size(), context, &options);
  return OwningOpRef<ModuleOp>(module ? cast<ModuleOp>(module) : ModuleOp());
}

OwningOpRef<ModuleOp> importTorchScriptFile(StringRef path,
                                            MLIRContext *context,
                                            ImportOptions options) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file) {
    emitError(UnknownLoc::get(context))
        << "cannot read '" << path << "': " << file.getError().message();
    return nullptr;
  }
  if (options.modelName == ImportOptions().modelName)
    options.modelName = path.str();
  return importTorchScriptModule((*file)->getBuffer(), context, options);
}

llvm::Expected<std::vector<std::string>> supportedOperators() {
  const Plugin &p = plugin();
  if (!p.list)
    return llvm::createStringError(p.error);
  std::vector<std::string> names;
  p.list(&names);
  return names;
}

} // namespace tessera::torchscript_importer
