//===- CommandCache.cpp - a cache hit without loading the compiler --------===//

#include "tessera/Compiler/CommandCache.h"
#include "tessera/Support/Error.h"
#include "tessera/Runtime/ExecutableImage.h"
#include "tessera/Runtime/FileUtils.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/xxhash.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <set>

extern char **environ;

using llvm::StringRef;

namespace tessera {

namespace {
bool isRegularFile(StringRef path) {
  llvm::sys::fs::file_status status;
  return !llvm::sys::fs::status(path, status) && llvm::sys::fs::is_regular_file(status);
}

/// The option a command-line argument names ("-o", "--cache-dir=x" ->
/// "o", "cache-dir"), as LLVM's parser reads one or two dashes; empty for
/// a value or a positional argument.
StringRef optionName(StringRef argument) {
  if (!argument.starts_with("-") || argument == "-")
    return "";
  argument = argument.drop_front(argument.starts_with("--") ? 2 : 1);
  return argument.take_until([](char c) { return c == '='; });
}

/// Options whose value names a file the compile writes, not one it reads.
bool namesAnOutput(StringRef option) { return option == "o" || option == "report"; }
} // namespace

std::string hashHex(StringRef bytes) {
  llvm::XXH128_hash_t h = llvm::xxh3_128bits(llvm::arrayRefFromStringRef(bytes));
  return llvm::utohexstr(h.high64, /*LowerCase=*/true, 16) +
         llvm::utohexstr(h.low64, /*LowerCase=*/true, 16);
}

std::optional<CacheCommand> readCacheCommand(llvm::ArrayRef<std::string> arguments,
                                             std::optional<std::string> cacheDirFromEnv) {
  CacheCommand command;
  bool cacheDirGiven = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    StringRef argument = arguments[i];
    if (argument == "--" || argument.starts_with("@") || argument == "-")
      return std::nullopt;
    StringRef option = optionName(argument);
    if (option.empty()) {
      command.arguments.push_back(argument.str());
      continue;
    }
    // The option's value: after '=', or the next argument.
    std::optional<std::string> value;
    bool takesValue = option == "o" || option == "cache-dir" || namesAnOutput(option);
    if (size_t eq = argument.find('='); eq != StringRef::npos)
      value = argument.drop_front(eq + 1).str();
    else if (takesValue && i + 1 < arguments.size())
      value = arguments[++i];
    if (option == "o") {
      if (!value || value->empty() || *value == "-")
        return std::nullopt;
      command.outputPath = *value;
      continue; // another output, the same executable
    }
    if (option == "cache-dir") {
      cacheDirGiven = true;
      command.cacheDir = value.value_or("");
      continue; // where to look, not what to build
    }
    command.arguments.push_back(argument.str());
    if (takesValue && value && argument.find('=') == StringRef::npos)
      command.arguments.push_back(*value);
  }
  if (!cacheDirGiven || command.cacheDir.empty())
    command.cacheDir = cacheDirFromEnv.value_or("");
  if (command.cacheDir.empty() || command.outputPath.empty())
    return std::nullopt;
  // The output must be a file renamed into place, not a device or a pipe.
  if (llvm::sys::fs::exists(command.outputPath) && !isRegularFile(command.outputPath))
    return std::nullopt;
  // The files the compile reads: an argument that is one, or whose part
  // after an '=' is one (a model's path may hold '=' too), outputs left
  // out. Something to read that is not a regular file (a pipe,
  // /dev/stdin) has no contents to key on: no lookup then.
  for (size_t i = 0; i < command.arguments.size(); ++i) {
    StringRef argument = command.arguments[i];
    if (namesAnOutput(optionName(argument))) {
      if (argument.find('=') == StringRef::npos)
        ++i; // its value follows
      continue;
    }
    for (size_t from = 0; from != StringRef::npos;) {
      StringRef named = argument.drop_front(from);
      from = argument.find('=', from);
      if (from != StringRef::npos)
        ++from;
      if (named.empty() || !llvm::sys::fs::exists(named))
        continue;
      if (isRegularFile(named))
        command.files.push_back(named.str());
      else if (!llvm::sys::fs::is_directory(named))
        return std::nullopt;
    }
  }
  return command;
}

llvm::Expected<std::string> modelKeyMaterial(StringRef path) {
  auto model = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/false,
                                                  /*RequiresNullTerminator=*/false);
  if (!model)
    return fail("cannot read '" + path + "': " + model.getError().message());
  StringRef bytes = (*model)->getBuffer();
  std::string material = "model " + hashHex(bytes) + "\n";
  // External data files are named by "location" entries of the model's
  // tensors (protobuf: key "location", then the value string); hash them
  // too. One scan of the bytes for the serialized key finds them all.
  static constexpr char kLocationKey[] = "\x0a\x08location\x12";
  constexpr size_t keyLength = sizeof(kLocationKey) - 1;
  std::set<std::string> files;
  for (const char *at = static_cast<const char *>(
           ::memmem(bytes.data(), bytes.size(), kLocationKey, keyLength));
       at; at = static_cast<const char *>(::memmem(at + 1, bytes.end() - at - 1,
                                                   kLocationKey, keyLength))) {
    size_t p = at - bytes.data() + keyLength;
    uint64_t length = 0;
    for (int shift = 0; p < bytes.size() && shift < 35; shift += 7) {
      uint8_t b = bytes[p++];
      length |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        break;
    }
    if (length > 0 && length < 4096 && p + length <= bytes.size())
      files.insert(bytes.substr(p, length).str());
  }
  StringRef dir = llvm::sys::path::parent_path(path);
  for (const std::string &name : files) {
    llvm::SmallString<256> file(dir);
    llvm::sys::path::append(file, name);
    auto data = llvm::MemoryBuffer::getFile(file, false, false);
    // A missing file is the importer's error to report, with context.
    material += "data " + name + " " +
                (data ? hashHex((*data)->getBuffer()) : std::string("missing")) + "\n";
  }
  return material;
}

llvm::Expected<std::string> hashModelFile(StringRef path) {
  llvm::Expected<std::string> material = modelKeyMaterial(path);
  if (!material)
    return material.takeError();
  return hashHex(*material);
}

std::string programRoot() {
  llvm::SmallString<256> self;
  if (llvm::sys::fs::real_path("/proc/self/exe", self))
    return "";
  return llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)).str();
}

std::string compilerFilesIdentity(StringRef root) {
  std::string text;
  auto path = [&](std::initializer_list<StringRef> parts) {
    llvm::SmallString<256> p(root);
    for (StringRef part : parts)
      llvm::sys::path::append(p, part);
    return std::string(p);
  };
  // The TorchScript importer the compiler loads: the one
  // $TESSERA_TORCHSCRIPT_PLUGIN names, or its own.
  std::string plugin = path({"lib", "libTesseraTorchScriptPlugin.so"});
  if (const char *named = std::getenv("TESSERA_TORCHSCRIPT_PLUGIN"); named && *named)
    plugin = named;
  for (const std::string &file :
       {path({"libexec", "tessera-compile"}), path({"lib", "libTesseraGraphIR.so"}), plugin}) {
    auto bytes = llvm::MemoryBuffer::getFile(file, false, false);
    text += ";code " + file + "=" +
            (bytes ? hashHex((*bytes)->getBuffer()) : std::string("missing"));
  }
  // Debian's MLIR and LLVM change only with their packages.
  for (StringRef library : {"libMLIR.so", "libLLVM.so"}) {
    llvm::SmallString<256> file(TESSERA_LLVM_LIBRARY_DIR);
    llvm::sys::path::append(file, library);
    llvm::sys::fs::file_status status;
    text += ";library " + std::string(file) + "=" +
            (llvm::sys::fs::status(file, status)
                 ? std::string("missing")
                 : std::to_string(status.getSize()) + "@" +
                       std::to_string(
                           status.getLastModificationTime().time_since_epoch().count()));
  }
  return text;
}

namespace {
/// What every key of `command` covers but its files: the arguments, the
/// TESSERA_ environment, the host CPU and the compiler.
std::string commandMaterial(const CacheCommand &command, StringRef compilerIdentity) {
  std::string material;
  // Each field with its length: no two lists of fields read alike.
  auto field = [&](StringRef kind, StringRef text) {
    material += kind.str() + " " + std::to_string(text.size()) + " " + text.str() + "\n";
  };
  for (const std::string &argument : command.arguments)
    field("argument", argument);
  // The compiler reads TESSERA_ variables (a plugin's path), and the
  // loader's the libraries it runs; the cache directory is where to look,
  // not what to build.
  std::vector<std::string> environment;
  for (char **variable = environ; variable && *variable; ++variable)
    if (StringRef v(*variable);
        (v.starts_with("TESSERA_") && !v.starts_with("TESSERA_CACHE_DIR=")) ||
        v.starts_with("LD_LIBRARY_PATH=") || v.starts_with("LD_PRELOAD="))
      environment.push_back(v.str());
  llvm::sort(environment);
  for (const std::string &variable : environment)
    field("environment", variable);
  // --host-cpu=native resolves to this machine's CPU and its features.
  material += "host " + llvm::sys::getHostCPUName().str();
  std::vector<std::string> features;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    features.push_back((feature.getValue() ? "+" : "-") + feature.getKey().str());
  llvm::sort(features);
  for (const std::string &feature : features)
    material += " " + feature;
  material += "\n";
  field("compiler", compilerIdentity);
  return material;
}
} // namespace

llvm::Expected<std::string> commandKey(const CacheCommand &command, StringRef compilerIdentity,
                                       bool *namesExternalData) {
  // Bump when what the key covers changes.
  std::string material = "tessera-compile command 1\n";
  material += commandMaterial(command, compilerIdentity);
  for (const std::string &file : command.files) {
    llvm::Expected<std::string> model = modelKeyMaterial(file);
    if (!model)
      return model.takeError();
    if (namesExternalData && StringRef(*model).contains("\ndata "))
      *namesExternalData = true;
    material += "file " + std::to_string(file.size()) + " " + file + " " + hashHex(*model) + "\n";
  }
  return hashHex(material);
}

FileStamps fileStamps(const CacheCommand &command,
                      std::chrono::system_clock::time_point settledBefore) {
  FileStamps stamps;
  auto stamp = [&](StringRef path) {
    struct stat s;
    if (::stat(path.str().c_str(), &s) != 0) {
      stamps.text += "missing " + path.str() + "\n";
      stamps.settled = false;
      return;
    }
    auto time = [](const struct timespec &t) {
      return std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec)));
    };
    stamps.text += "file " + std::to_string(path.size()) + " " + path.str() + " " +
                   std::to_string(s.st_dev) + " " +
                   std::to_string(s.st_ino) + " " + std::to_string(s.st_size) + " " +
                   std::to_string(s.st_mtim.tv_sec) + "." + std::to_string(s.st_mtim.tv_nsec) +
                   " " + std::to_string(s.st_ctim.tv_sec) + "." +
                   std::to_string(s.st_ctim.tv_nsec) + "\n";
    if (!(time(s.st_mtim) < settledBefore && time(s.st_ctim) < settledBefore))
      stamps.settled = false;
  };
  for (const std::string &file : command.files)
    stamp(file);
  return stamps;
}

std::string stampedCommandKey(const CacheCommand &command, StringRef compilerIdentity,
                              const FileStamps &stamps) {
  std::string material = "tessera-compile stamped command 1\n";
  material += commandMaterial(command, compilerIdentity) + stamps.text;
  return hashHex(material);
}

std::string commandRecordPath(StringRef cacheDir, StringRef key) {
  llvm::SmallString<256> path(cacheDir);
  llvm::sys::path::append(path, "commands", key);
  return std::string(path);
}

std::optional<std::string> copyRecordedExecutable(StringRef cacheDir, StringRef key,
                                                  StringRef outputPath) {
  std::string record = commandRecordPath(cacheDir, key);
  // What the compiler checks before it reads the cache (checkCacheTrusted),
  // and the record.
  llvm::SmallString<256> commands(cacheDir), kernels(cacheDir);
  llvm::sys::path::append(commands, "commands");
  llvm::sys::path::append(kernels, "kernels");
  for (StringRef path : {cacheDir, StringRef(kernels), StringRef(commands), StringRef(record)})
    if (!runtime::whyUntrusted(path).empty())
      return std::nullopt; // the compiler refuses it, saying why
  auto text = llvm::MemoryBuffer::getFile(record, /*IsText=*/true);
  if (!text)
    return std::nullopt;
  // "<entry key>.tess <checksum>"
  auto [name, checksumText] = (*text)->getBuffer().trim().split(' ');
  uint64_t checksum = 0;
  if (name.size() != 32 + 5 || !name.ends_with(".tess") ||
      !llvm::all_of(name.drop_back(5), llvm::isHexDigit) ||
      checksumText.getAsInteger(16, checksum))
    return std::nullopt;
  llvm::SmallString<256> entry(cacheDir);
  llvm::sys::path::append(entry, name);
  if (!isRegularFile(entry) || !runtime::whyUntrusted(entry).empty())
    return std::nullopt;
  auto image = llvm::MemoryBuffer::getFile(entry, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  if (!image)
    return std::nullopt;
  // The bytes checked are the bytes written.
  StringRef bytes = (*image)->getBuffer();
  std::optional<uint64_t> recorded = runtime::image::recordedChecksum(bytes);
  if (!recorded || *recorded != checksum || runtime::image::fileChecksum(bytes) != checksum)
    return std::nullopt;
  if (llvm::Error err = runtime::writeFileAtomically(outputPath, bytes, runtime::kCodeFileMode)) {
    llvm::consumeError(std::move(err)); // the compiler will say why
    return std::nullopt;
  }
  return std::string(entry);
}

llvm::Error recordCommand(StringRef cacheDir, StringRef key, StringRef entryPath) {
  auto header = llvm::MemoryBuffer::getFileSlice(entryPath, runtime::image::kHeaderSize, 0,
                                                 /*IsVolatile=*/false);
  if (!header)
    return fail("cannot read '" + entryPath + "': " + header.getError().message());
  // Only the header is read: the recorded checksum need not match a
  // computed one here, the front end computes it before each copy.
  StringRef bytes = (*header)->getBuffer();
  if (bytes.size() < runtime::image::kHeaderSize)
    return fail("'" + entryPath + "' is not an executable");
  uint64_t checksum = llvm::support::endian::read64le(bytes.data() + runtime::image::kChecksumAt);
  llvm::SmallString<256> commands(cacheDir);
  llvm::sys::path::append(commands, "commands");
  using namespace llvm::sys::fs;
  if (std::error_code ec = create_directories(
          commands, /*IgnoreExisting=*/true,
          static_cast<perms>(owner_all | group_read | group_exe | others_read | others_exe)))
    return fail("cannot create '" + commands + "': " + ec.message());
  return runtime::writeFileAtomically(
      commandRecordPath(cacheDir, key),
      llvm::sys::path::filename(entryPath).str() + " " + llvm::utohexstr(checksum) + "\n",
      runtime::kCodeFileMode);
}

} // namespace tessera
