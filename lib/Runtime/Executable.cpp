//===- Executable.cpp - the .tess executable container -------------------===//

#include "tessera/Runtime/Executable.h"
#include "tessera/Support/Error.h"
#include "tessera/Runtime/ExecutableImage.h"
#include "tessera/Runtime/FileUtils.h"
#include "tessera/Runtime/Instances.h"

#include "llvm/Support/Endian.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cstring>
#include <thread>

#ifdef __linux__
#include <fcntl.h>
#endif

using llvm::Expected;
using llvm::StringRef;
namespace json = llvm::json;
namespace endian = llvm::support::endian;

namespace tessera::runtime {

namespace {
using namespace image;
constexpr size_t kAlign = 64;

uint64_t alignTo(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

/// Where each section goes: the weights right after the header (they are
/// written first), then the code, then the metadata (known last).
struct Layout {
  uint64_t weightOffset = kHeaderSize, weightBytes = 0, codeOffset = 0, codeBytes = 0,
           metaOffset = 0, metaBytes = 0, fileSize = 0;
  Layout(uint64_t weights, uint64_t code, uint64_t meta)
      : weightBytes(weights), codeBytes(code), metaBytes(meta) {
    codeOffset = alignTo(weightOffset + weightBytes);
    metaOffset = alignTo(codeOffset + codeBytes);
    fileSize = metaOffset + metaBytes;
  }
  /// The header, its checksum field zero.
  std::string header() const {
    std::string h(kHeaderSize, '\0');
    std::memcpy(h.data(), kMagic, sizeof(kMagic));
    endian::write32le(&h[kVersionAt], kExecutableFormatVersion);
    endian::write32le(&h[kHeaderSizeAt], kHeaderSize);
    endian::write64le(&h[kFileSizeAt], fileSize);
    endian::write64le(&h[kMetaOffsetAt], metaOffset);
    endian::write64le(&h[kMetaOffsetAt + 8], metaBytes);
    endian::write64le(&h[kCodeOffsetAt], codeOffset);
    endian::write64le(&h[kCodeOffsetAt + 8], codeBytes);
    endian::write64le(&h[kWeightOffsetAt], weightOffset);
    endian::write64le(&h[kWeightOffsetAt + 8], weightBytes);
    return h;
  }
};

/// Zeros enough for any padding to kAlign.
constexpr char kZeros[kAlign] = {};

json::Value tensorJson(const TensorInfo &t) {
  return json::Object{{"name", t.name},
                      {"dtype", dtypeName(t.dtype)},
                      {"shape", json::Array(t.shape)}};
}

llvm::Error readTensor(const json::Object *o, TensorInfo &t, StringRef what) {
  if (!o)
    return fail("metadata: " + what + " entry is not an object");
  auto name = o->getString("name");
  auto dtype = o->getString("dtype");
  auto shape = o->getArray("shape");
  if (!name || !dtype || !shape)
    return fail("metadata: " + what + " entry lacks name, dtype or shape");
  t.name = name->str();
  auto d = parseDType(*dtype);
  if (!d)
    return d.takeError();
  t.dtype = *d;
  // Bounded (kMaxTensorElements): a count computed from the shape never
  // overflows.
  for (const json::Value &v : *shape) {
    auto i = v.getAsInteger();
    if (!i)
      return fail("metadata: bad shape for " + what + " '" + t.name + "'");
    t.shape.push_back(*i);
  }
  if (!boundedNumElements(t.shape))
    return fail("metadata: bad shape for " + what + " '" + t.name + "'");
  return llvm::Error::success();
}
} // namespace

std::string buildExecutableImage(StringRef metadataJSON, StringRef code, StringRef weights) {
  return buildExecutableImage(metadataJSON, code, weights.size(), [&](char *section) {
    std::memcpy(section, weights.data(), weights.size());
  });
}

std::string buildExecutableImage(StringRef metadataJSON, StringRef code, uint64_t weightBytes,
                                 llvm::function_ref<void(char *)> fillWeights) {
  Layout layout(weightBytes, code.size(), metadataJSON.size());
  std::string image(layout.fileSize, '\0');
  std::string header = layout.header();
  std::memcpy(image.data(), header.data(), kHeaderSize);
  fillWeights(&image[layout.weightOffset]);
  std::memcpy(&image[layout.codeOffset], code.data(), code.size());
  std::memcpy(&image[layout.metaOffset], metadataJSON.data(), metadataJSON.size());
  endian::write64le(&image[kChecksumAt], fileChecksum(image));
  return image;
}

namespace {
/// The metadata JSON, each weight's offset and size set from `weights`;
/// `weightBytes` is set to the weight section's size.
Expected<std::string> metadataText(ExecutableMetadata &metadata,
                                   llvm::ArrayRef<llvm::ArrayRef<char>> weights,
                                   uint64_t &weightBytes) {
  if (weights.size() != metadata.weights.size())
    return fail("internal error: weight data and metadata disagree");
  weightBytes = 0;
  for (auto [info, data] : llvm::zip(metadata.weights, weights)) {
    info.offset = weightBytes;
    info.size = data.size();
    weightBytes = alignTo(weightBytes + data.size());
  }
  json::Array inputs, outputs, weightList;
  for (const auto &t : metadata.inputs)
    inputs.push_back(tensorJson(t));
  for (const auto &t : metadata.outputs)
    outputs.push_back(tensorJson(t));
  for (const auto &w : metadata.weights) {
    json::Value v = tensorJson(w);
    v.getAsObject()->try_emplace("offset", static_cast<int64_t>(w.offset));
    v.getAsObject()->try_emplace("size", static_cast<int64_t>(w.size));
    if (!w.reference)
      v.getAsObject()->try_emplace("reference", false);
    weightList.push_back(std::move(v));
  }
  json::Array stateList;
  for (const auto &st : metadata.state) {
    json::Value v = tensorJson(st);
    v.getAsObject()->try_emplace("role", stateRoleName(st.role));
    v.getAsObject()->try_emplace("weight", st.weight);
    v.getAsObject()->try_emplace("update", st.update);
    if (st.perUpdate)
      v.getAsObject()->try_emplace("per_update", true);
    if (st.countsMicroBatches)
      v.getAsObject()->try_emplace("counts_micro_batches", true);
    stateList.push_back(std::move(v));
  }
  json::Object meta{{"compiler", metadata.compilerVersion},
                    {"cache_key", metadata.cacheKey},
                    {"source", metadata.source},
                    {"target", metadata.target},
                    {"num_ipus", metadata.numIPUs},
                    {"tiles_per_ipu", metadata.tilesPerIPU},
                    {"device_iterations", metadata.deviceIterations},
                    {"gradient_accumulation", metadata.gradientAccumulation},
                    {"pipeline_stages", metadata.pipelineStages},
                    {"replicas", metadata.replicas},
                    {"output_mode", outputModeName(metadata)},
                    {"host_triple", metadata.hostTriple},
                    {"host_cpu", metadata.hostCPU},
                    {"host_features", json::Array(metadata.hostFeatures)},
                    {"code_objects", json::Array(metadata.codeObjects)},
                    {"reference_mlir", metadata.referenceMLIR},
                    {"entry", metadata.entry},
                    {"inputs", std::move(inputs)},
                    {"outputs", std::move(outputs)},
                    {"weights", std::move(weightList)}};
  if (!metadata.state.empty()) {
    meta["state"] = std::move(stateList);
    meta["loss"] = metadata.loss;
    meta["optimizer"] = metadata.optimizer;
  }
  if (metadata.program)
    meta["program"] = metadata.program->toJSON();
  if (const auto &e = metadata.estimate)
    meta["estimate"] = json::Object{{"cycles", e->cycles},
                                    {"compute_cycles", e->computeCycles},
                                    {"exchange_cycles", e->exchangeCycles},
                                    {"sync_cycles", e->syncCycles}};
  std::string metaText;
  llvm::raw_string_ostream(metaText) << json::Value(std::move(meta));
  return metaText;
}
} // namespace

namespace {
/// One file being written: a temporary file beside `path`, renamed onto it
/// when complete. A destination that exists and is not a regular file (a
/// device, a pipe) is written in place at the end, from an image in memory
/// (renaming over it would replace it; it cannot seek back to the header).
struct Destination {
  std::string path;
  llvm::SmallString<256> temporary;
  int fd = -1; ///< os's, while open
  std::unique_ptr<llvm::raw_fd_ostream> os;
  bool inPlace = false, renamed = false;
  std::string error;

  /// Removes the temporary file, unless renamed into place.
  void discard() {
    if (renamed || temporary.empty())
      return;
    if (os) {
      os->close();
      os->clear_error();
      os.reset();
      fd = -1;
    }
    llvm::sys::fs::remove(temporary);
    llvm::sys::DontRemoveFileOnSignal(temporary);
    temporary.clear();
  }
};
} // namespace

struct ExecutableWriter::Impl {
  std::vector<Destination> destinations;
  /// The weights the thread writes (startWeights), and what it and then
  /// finish() have appended after the header, hashed as it goes.
  std::vector<llvm::ArrayRef<char>> started;
  BlockHasher hasher;
  uint64_t appended = 0;
  bool opened = false, finished = false;
  std::thread thread;

  void open() {
    if (opened)
      return;
    opened = true;
    for (Destination &d : destinations) {
      llvm::sys::fs::file_status status;
      if (!llvm::sys::fs::status(d.path, status) && llvm::sys::fs::exists(status) &&
          !llvm::sys::fs::is_regular_file(status)) {
        d.inPlace = true;
        continue;
      }
      // A .tess holds native code: writable by its owner only, whatever
      // the umask (a cache entry others could rewrite would run as you).
      if (std::error_code ec = llvm::sys::fs::createUniqueFile(
              d.path + ".tmp-%%%%%%", d.fd, d.temporary, llvm::sys::fs::OF_None, kCodeFileMode)) {
        d.error = "cannot create a file next to '" + d.path + "': " + ec.message();
        d.temporary.clear();
        continue;
      }
      // Removed if the process dies of a signal or a fatal error meanwhile.
      llvm::sys::RemoveFileOnSignal(d.temporary);
      d.os = std::make_unique<llvm::raw_fd_ostream>(d.fd, /*shouldClose=*/true);
      // The header is written last, when the checksum is known.
      d.os->seek(kHeaderSize);
    }
  }
  /// Allocates each file's first `bytes` on disk now. A file renamed over
  /// an existing one with blocks still to allocate is written out by ext4
  /// in the rename (its replace-by-rename heuristic): 0.1-0.3 s for a
  /// ResNet-50 recompiled to the same path. Where the file system cannot,
  /// nothing happens.
  void reserve(uint64_t bytes) {
#ifdef __linux__
    for (Destination &d : destinations)
      if (d.os)
        (void)::fallocate(d.fd, 0, 0, static_cast<off_t>(bytes));
#else
    (void)bytes;
#endif
  }
  void append(StringRef bytes) {
    for (Destination &d : destinations)
      if (d.os)
        d.os->write(bytes.data(), bytes.size());
    hasher.feed(bytes);
    appended += bytes.size();
  }
  /// Each weight, then zeros to the next aligned offset.
  void appendWeights(llvm::ArrayRef<llvm::ArrayRef<char>> weights) {
    for (llvm::ArrayRef<char> data : weights) {
      append(StringRef(data.data(), data.size()));
      append(StringRef(kZeros, alignTo(appended) - appended));
    }
  }
};

ExecutableWriter::ExecutableWriter(std::vector<std::string> paths) : impl_(new Impl) {
  for (std::string &path : paths) {
    impl_->destinations.emplace_back();
    impl_->destinations.back().path = std::move(path);
  }
}

ExecutableWriter::~ExecutableWriter() {
  if (impl_->thread.joinable())
    impl_->thread.join();
  for (Destination &d : impl_->destinations)
    d.discard();
}

llvm::Error ExecutableWriter::open() {
  impl_->open();
  if (const std::string &error = impl_->destinations.front().error; !error.empty())
    return fail(error);
  return llvm::Error::success();
}

void ExecutableWriter::startWeights(llvm::ArrayRef<llvm::ArrayRef<char>> weights) {
  if (impl_->thread.joinable() || impl_->finished || !impl_->started.empty() ||
      impl_->appended > 0)
    return;
  impl_->open();
  uint64_t bytes = kHeaderSize;
  for (llvm::ArrayRef<char> data : weights)
    bytes = alignTo(bytes + data.size());
  impl_->reserve(bytes);
  impl_->started.assign(weights.begin(), weights.end());
  impl_->thread = std::thread([impl = impl_.get()] { impl->appendWeights(impl->started); });
}

llvm::Error ExecutableWriter::finish(ExecutableMetadata metadata, StringRef code,
                                     llvm::ArrayRef<llvm::ArrayRef<char>> weights,
                                     std::string *copyErrors) {
  Impl &w = *impl_;
  if (w.thread.joinable())
    w.thread.join();
  if (w.finished)
    return fail("internal error: an executable writer finished twice");
  w.finished = true;
  w.open();
  uint64_t weightBytes = 0;
  Expected<std::string> meta = metadataText(metadata, weights, weightBytes);
  if (!meta)
    return meta.takeError();
  // The weights written early must be the first of these, the same bytes.
  bool prefix = w.started.size() <= weights.size();
  for (size_t i = 0; prefix && i < w.started.size(); ++i)
    prefix = w.started[i].data() == weights[i].data() &&
             w.started[i].size() == weights[i].size();
  if (!prefix)
    return fail("internal error: the weights written early are not the executable's");
  Layout layout(weightBytes, code.size(), meta->size());
  w.reserve(layout.fileSize);
  w.appendWeights(weights.drop_front(w.started.size()));
  w.append(code);
  w.append(StringRef(kZeros, layout.metaOffset - kHeaderSize - w.appended));
  w.append(*meta);
  std::string header = layout.header();
  endian::write64le(&header[kChecksumAt], w.hasher.checksum(header));
  std::string warnings;
  for (auto [i, d] : llvm::enumerate(w.destinations)) {
    // No copy of an executable its output did not get.
    if (i > 0 && !w.destinations.front().error.empty()) {
      d.discard();
      continue;
    }
    if (d.inPlace) {
      std::string image = buildExecutableImage(*meta, code, weightBytes, [&](char *section) {
        for (auto [info, data] : llvm::zip(metadata.weights, weights))
          std::memcpy(section + info.offset, data.data(), data.size());
      });
      if (llvm::Error err = writeFileAtomically(d.path, image, kCodeFileMode))
        d.error = llvm::toString(std::move(err));
    } else if (d.os) {
      d.os->seek(0);
      d.os->write(header.data(), header.size());
      d.os->close();
      d.fd = -1;
      if (d.os->has_error()) {
        d.error = "cannot write '" + d.temporary.str().str() + "' (disk full?)";
      } else if (std::error_code ec = llvm::sys::fs::rename(d.temporary, d.path)) {
        d.error = "cannot rename '" + d.temporary.str().str() + "' to '" + d.path +
                  "': " + ec.message();
      } else {
        llvm::sys::DontRemoveFileOnSignal(d.temporary);
        d.renamed = true;
      }
    }
    if (d.error.empty())
      continue;
    d.discard();
    if (i > 0)
      warnings += (warnings.empty() ? "" : "; ") + d.error;
  }
  if (copyErrors)
    *copyErrors = warnings;
  if (!w.destinations.front().error.empty())
    return fail(w.destinations.front().error);
  return llvm::Error::success();
}

llvm::Error writeExecutable(StringRef path, ExecutableMetadata metadata, StringRef code,
                            llvm::ArrayRef<llvm::ArrayRef<char>> weights) {
  // A killed or failed compile never leaves a partial executable behind.
  ExecutableWriter writer({path.str()});
  return writer.finish(std::move(metadata), code, weights);
}

std::string Executable::fingerprint() const {
  StringRef bytes = file_->getBuffer();
  StringRef metadataSection = bytes.substr(endian::read64le(bytes.data() + kMetaOffsetAt),
                                           endian::read64le(bytes.data() + kMetaOffsetAt + 8));
  std::string text = metadataSection.str(), source;
  llvm::raw_string_ostream(source) << "\"source\":" << json::Value(metadata_.source);
  if (size_t at = text.find(source); at != std::string::npos)
    text.erase(at, source.size());
  // The kernels' code, not the host reference's bytecode, whose locations
  // name the source file too.
  std::string fingerprint = llvm::utohexstr(llvm::xxh3_64bits(text));
  for (StringRef object : kernelObjects())
    fingerprint += "/" + llvm::utohexstr(llvm::xxh3_64bits(object));
  return fingerprint + "/" + llvm::utohexstr(llvm::xxh3_64bits(weights_));
}

llvm::Error Executable::runAsInstance(const Instance &self) {
  ExecutableMetadata &m = metadata_;
  m.share = {};
  // One replica (an evaluation model beside a replicated training one):
  // every instance runs it whole, on its own.
  if (m.replicas == 1 && self.totalReplicas != 1)
    return llvm::Error::success();
  if (m.replicas != self.totalReplicas)
    return fail("the executable was compiled for " + llvm::Twine(m.replicas) +
                " replica(s) but tessera-launch runs " + llvm::Twine(self.totalReplicas) +
                " (--num-replicas): compile it with --replicas " +
                llvm::Twine(self.totalReplicas) + ", or launch with --num-replicas " +
                llvm::Twine(m.replicas));
  // A launch of one instance is one process: nothing to share.
  if (self.numInstances == 1)
    return llvm::Error::success();
  m.share.first = self.replicaOffset;
  m.share.count = self.localReplicas;
  m.share.instance = self.index;
  m.share.instances = self.numInstances;
  m.share.onThisHost = std::max<int64_t>(1, self.onThisHost);
  return llvm::Error::success();
}

Expected<std::unique_ptr<Executable>> Executable::load(StringRef path) {
  auto file = readRegularFile(path);
  if (!file)
    return file.takeError();
  return parse(std::move(*file), path);
}

Expected<std::unique_ptr<Executable>>
Executable::parse(std::unique_ptr<llvm::MemoryBuffer> file, StringRef path) {
  StringRef bytes = file->getBuffer();
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, 8) != 0)
    return fail("'" + path + "' is not a Tessera executable (bad magic)");
  uint32_t version = endian::read32le(bytes.data() + kVersionAt);
  if (version != kExecutableFormatVersion)
    return fail("'" + path + "' has executable format version " +
                llvm::Twine(version) + "; this runtime reads version " +
                llvm::Twine(kExecutableFormatVersion) + " (recompile the model)");
  uint64_t fileSize = endian::read64le(bytes.data() + kFileSizeAt);
  if (fileSize != bytes.size())
    return fail("'" + path + "' is truncated or padded: header says " +
                llvm::Twine(fileSize) + " bytes, file has " +
                llvm::Twine(bytes.size()) + " (recompile the model)");
  if (endian::read32le(bytes.data() + kHeaderSizeAt) != kHeaderSize)
    return fail("'" + path + "' has a malformed header; recompile the model");
  if (fileChecksum(bytes) != endian::read64le(bytes.data() + kChecksumAt))
    return fail("'" + path + "' is damaged (checksum mismatch); recompile the model");
  auto section = [&](size_t at) -> Expected<StringRef> {
    uint64_t offset = endian::read64le(bytes.data() + at);
    uint64_t size = endian::read64le(bytes.data() + at + 8);
    if (offset > bytes.size() || size > bytes.size() - offset)
      return fail("'" + path + "' has a section outside the file");
    return bytes.substr(offset, size);
  };
  auto exe = std::unique_ptr<Executable>(new Executable());
  auto meta = section(kMetaOffsetAt);
  auto code = section(kCodeOffsetAt);
  auto weights = section(kWeightOffsetAt);
  if (!meta)
    return meta.takeError();
  if (!code)
    return code.takeError();
  if (!weights)
    return weights.takeError();
  exe->code_ = *code;
  exe->weights_ = *weights;

  auto parsed = json::parse(*meta);
  if (!parsed)
    return fail("'" + path + "' has unreadable metadata: " +
                llvm::toString(parsed.takeError()));
  const json::Object *o = parsed->getAsObject();
  if (!o)
    return fail("'" + path + "' has malformed metadata");
  ExecutableMetadata &m = exe->metadata_;
  auto str = [&](StringRef key) {
    auto v = o->getString(key);
    return v ? v->str() : std::string();
  };
  m.compilerVersion = str("compiler");
  m.cacheKey = str("cache_key");
  m.source = str("source");
  m.target = str("target");
  m.numIPUs = o->getInteger("num_ipus").value_or(1);
  m.tilesPerIPU = o->getInteger("tiles_per_ipu").value_or(0);
  m.deviceIterations = o->getInteger("device_iterations").value_or(1);
  m.gradientAccumulation = o->getInteger("gradient_accumulation").value_or(1);
  m.pipelineStages = o->getInteger("pipeline_stages").value_or(1);
  if (m.pipelineStages < 1 || m.pipelineStages > 1024)
    return fail("'" + path + "' has pipeline_stages " + llvm::Twine(m.pipelineStages) +
                " (1 to 1024); recompile the model");
  m.replicas = o->getInteger("replicas").value_or(1);
  if (m.replicas < 1 || m.replicas > kMaxReplicas || m.replicas * m.numIPUs > kMaxReplicas)
    return fail("'" + path + "' has " + llvm::Twine(m.replicas) + " replicas of " +
                llvm::Twine(m.numIPUs) + " IPUs (at most " + llvm::Twine(kMaxReplicas) +
                " IPUs in all); recompile the model");
  if (m.deviceIterations < 1 || m.gradientAccumulation < 1 ||
      m.deviceIterations > kMaxIterationsPerRun / m.gradientAccumulation)
    return fail("'" + path + "' has device_iterations " +
                llvm::Twine(m.deviceIterations) + " and gradient_accumulation " +
                llvm::Twine(m.gradientAccumulation) +
                " (each at least 1, their product at most 2^24); recompile the model");
  if (auto mode = o->getString("output_mode"))
    if (auto err = parseOutputMode(*mode, m))
      return fail("'" + path + "': " + llvm::toString(std::move(err)) +
                  " (recompile the model)");
  if (m.outputMode == ExecutableMetadata::OutputMode::EveryN &&
      iterationsPerRun(m) % m.outputEvery != 0)
    return fail("'" + path + "' returns every " + llvm::Twine(m.outputEvery) +
                "th iteration's outputs, which does not divide the run's " +
                llvm::Twine(iterationsPerRun(m)) + " iterations (recompile the model)");
  m.hostTriple = str("host_triple");
  m.hostCPU = str("host_cpu");
  if (const json::Array *features = o->getArray("host_features"))
    for (const json::Value &f : *features)
      if (auto name = f.getAsString())
        m.hostFeatures.push_back(name->str());
  m.entry = str("entry");
  // The code section is the objects, then the reference code's bytecode.
  int64_t codeBytes = static_cast<int64_t>(exe->code_.size()), total = 0;
  auto badCode = [&] {
    return fail("'" + path + "' has code objects that do not fill its code section "
                "(recompile the model)");
  };
  if (const json::Array *objects = o->getArray("code_objects")) {
    for (const json::Value &v : *objects) {
      std::optional<int64_t> size = v.getAsInteger();
      if (!size || *size < 0 || *size > codeBytes - total)
        return badCode();
      total += *size;
      m.codeObjects.push_back(*size);
    }
  }
  // Without object sizes, what precedes the bytecode is one object.
  std::optional<int64_t> reference = o->getInteger("reference_mlir");
  if (!reference || *reference < 0 || *reference > codeBytes - total ||
      (!m.codeObjects.empty() && total + *reference != codeBytes))
    return badCode();
  m.referenceMLIR = *reference;
  auto list = [&](StringRef key, auto &out) -> llvm::Error {
    const json::Array *a = o->getArray(key);
    if (!a)
      return fail("'" + path + "' metadata lacks '" + key + "'");
    for (const json::Value &v : *a) {
      typename std::decay_t<decltype(out)>::value_type t;
      if (auto err = readTensor(v.getAsObject(), t, key))
        return err;
      if constexpr (std::is_same_v<decltype(t), WeightInfo>) {
        auto offset = v.getAsObject()->getInteger("offset");
        auto size = v.getAsObject()->getInteger("size");
        t.reference = v.getAsObject()->getBoolean("reference").value_or(true);
        if (!offset || !size || *offset < 0 || *size < 0 ||
            static_cast<uint64_t>(*offset + *size) > exe->weights_.size() ||
            static_cast<uint64_t>(*size) != t.numElements() * dtypeSize(t.dtype))
          return fail("'" + path + "' has an inconsistent weight '" + t.name + "'");
        t.offset = *offset;
        t.size = *size;
      }
      out.push_back(std::move(t));
    }
    return llvm::Error::success();
  };
  if (auto err = list("inputs", m.inputs))
    return std::move(err);
  if (auto err = list("outputs", m.outputs))
    return std::move(err);
  if (auto err = list("weights", m.weights))
    return std::move(err);
  m.loss = str("loss");
  m.optimizer = str("optimizer");
  if (const json::Array *state = o->getArray("state")) {
    std::vector<bool> updated(m.outputs.size() + state->size(), false);
    for (const json::Value &v : *state) {
      StateInfo st;
      if (auto err = readTensor(v.getAsObject(), st, "state"))
        return std::move(err);
      const json::Object *so = v.getAsObject();
      auto role = so->getString("role");
      st.weight = so->getInteger("weight").value_or(-1);
      st.update = so->getInteger("update").value_or(-2);
      for (auto [key, flag] : {std::pair{"per_update", &st.perUpdate},
                               {"counts_micro_batches", &st.countsMicroBatches}}) {
        const json::Value *v = so->get(key);
        if (v && !v->getAsBoolean())
          return fail("'" + path + "' has state '" + st.name + "' whose " + key +
                      " is not true or false");
        *flag = v && *v->getAsBoolean();
      }
      if (st.perUpdate && st.update < 0)
        return fail("'" + path + "' has state '" + st.name +
                    "' stored per weight update that the program never updates");
      if (st.countsMicroBatches && (st.dtype != DType::F32 || !st.shape.empty()))
        return fail("'" + path + "' has state '" + st.name +
                    "' counting micro-batches that is not an f32 scalar");
      if (role == "parameter")
        st.role = StateInfo::Role::Parameter;
      else if (role == "optimizer")
        st.role = StateInfo::Role::OptimizerState;
      else if (role == "hyperparameter")
        st.role = StateInfo::Role::Hyperparameter;
      else if (role == "buffer")
        st.role = StateInfo::Role::Buffer;
      else if (role == "replica_index")
        st.role = StateInfo::Role::ReplicaIndex;
      else
        return fail("'" + path + "' has state '" + st.name + "' of unknown role");
      // The initial value must be a weight of the same type; an update, a
      // program output past the signature's, used once.
      bool badWeight = st.weight < 0 || st.weight >= static_cast<int64_t>(m.weights.size()) ||
                       m.weights[st.weight].shape != st.shape ||
                       m.weights[st.weight].dtype != st.dtype;
      bool badUpdate = st.update != -1 &&
                       (st.update < static_cast<int64_t>(m.outputs.size()) ||
                        st.update >= static_cast<int64_t>(updated.size()) ||
                        updated[st.update]);
      if (badWeight || badUpdate)
        return fail("'" + path + "' has an inconsistent state entry '" + st.name +
                    "' (recompile the model)");
      if (st.update >= 0)
        updated[st.update] = true;
      m.state.push_back(std::move(st));
    }
    // The updates are the program's outputs right after the signature's,
    // with no gap: the runners size the outputs by their count.
    size_t updates = llvm::count(updated, true);
    for (size_t i = m.outputs.size(); i < m.outputs.size() + updates; ++i)
      if (!updated[i])
        return fail("'" + path + "' has state updates that skip program output " +
                    llvm::Twine(i) + " (recompile the model)");
  }
  if (const json::Value *program = o->get("program")) {
    auto p = MachineProgram::fromJSON(*program);
    if (!p)
      return fail("'" + path + "': " + llvm::toString(p.takeError()) +
                  " (recompile the model)");
    m.program = std::move(*p);
    std::vector<size_t> perUpdateOutputs;
    for (const StateInfo &st : m.state)
      if (st.perUpdate)
        perUpdateOutputs.push_back(st.update);
    if (auto err = checkPerUpdateOutputs(*m.program, perUpdateOutputs))
      return fail("'" + path + "': " + llvm::toString(std::move(err)) + " (recompile the model)");
  }
  if (const json::Object *e = o->getObject("estimate")) {
    ExecutableMetadata::Estimate estimate;
    bool valid = true;
    for (auto [key, field] : {std::pair{"cycles", &estimate.cycles},
                              {"compute_cycles", &estimate.computeCycles},
                              {"exchange_cycles", &estimate.exchangeCycles},
                              {"sync_cycles", &estimate.syncCycles}}) {
      std::optional<int64_t> v = e->getInteger(key);
      valid &= v && *v >= 0;
      *field = v.value_or(0);
    }
    if (!valid)
      return fail("'" + path + "' has a malformed estimate (recompile the model)");
    m.estimate = estimate;
  }
  exe->file_ = std::move(file);
  return exe;
}

llvm::Error checkProgramAgreesWithSignature(const Executable &executable) {
  const ExecutableMetadata &meta = executable.metadata();
  if (!meta.program)
    return fail("the executable has no machine program (recompile the model)");
  const MachineProgram &p = *meta.program;
  // The program's inputs, outputs and weights must be the signature's.
  auto agree = [&](const char *what, const std::vector<int64_t> &vars,
                   const std::vector<TensorInfo> &infos) -> llvm::Error {
    if (vars.size() != infos.size())
      return fail(llvm::Twine("the executable's program has ") + llvm::Twine(vars.size()) +
                  " " + what + "s but its signature " + llvm::Twine(infos.size()) +
                  " (recompile the model)");
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i] < 0 || static_cast<size_t>(vars[i]) >= p.variables.size())
        return fail(llvm::Twine("the executable's program names a ") + what +
                    " variable that does not exist (recompile the model)");
      const Variable &v = p.variables[vars[i]];
      if (v.shape != infos[i].shape || !sameStorage(v.dtype, infos[i].dtype))
        return fail(llvm::Twine("the executable's program has ") + what + " '" +
                    infos[i].name + "' as " + typeString(v.shape, v.dtype) +
                    " but its signature says " + infos[i].typeString() +
                    " (recompile the model)");
    }
    return llvm::Error::success();
  };
  // State follows the signature's inputs; updates its outputs.
  std::vector<TensorInfo> programInputs(meta.inputs), programOutputs(meta.outputs);
  for (const StateInfo &s : meta.state) {
    programInputs.push_back(s);
    if (s.update >= 0) {
      programOutputs.resize(std::max<size_t>(programOutputs.size(), s.update + 1));
      programOutputs[s.update] = s;
    }
  }
  if (auto err = agree("input", p.inputs, programInputs))
    return err;
  if (auto err = agree("output", p.outputs, programOutputs))
    return err;
  for (const Variable &v : p.variables) {
    if (v.base >= 0 || (v.kind != VarKind::Weight && v.kind != VarKind::Constant))
      continue;
    if (v.weight < 0 || static_cast<size_t>(v.weight) >= meta.weights.size() ||
        static_cast<int64_t>(executable.weight(v.weight).size()) !=
            numElements(v.shape) * v.elementBytes())
      return fail("the executable's program has " + varKindName(v.kind) + " '" + v.name +
                  "' (" + typeString(v.shape, v.dtype) +
                  ") without matching weight data (recompile the model)");
  }
  return llvm::Error::success();
}

StringRef stateRoleName(StateInfo::Role role) {
  switch (role) {
  case StateInfo::Role::Parameter:
    return "parameter";
  case StateInfo::Role::OptimizerState:
    return "optimizer";
  case StateInfo::Role::Hyperparameter:
    return "hyperparameter";
  case StateInfo::Role::Buffer:
    return "buffer";
  case StateInfo::Role::ReplicaIndex:
    return "replica_index";
  }
  return "parameter";
}

std::vector<StringRef> Executable::kernelObjects() const {
  StringRef objectBytes = code_.drop_back(metadata_.referenceMLIR);
  if (metadata_.codeObjects.empty())
    return objectBytes.empty() ? std::vector<StringRef>{} : std::vector<StringRef>{objectBytes};
  std::vector<StringRef> objects;
  size_t at = 0;
  for (int64_t size : metadata_.codeObjects) {
    objects.push_back(code_.substr(at, size));
    at += size;
  }
  return objects;
}

StringRef Executable::referenceMLIR() const {
  return code_.take_back(metadata_.referenceMLIR);
}

/// " (3 device iterations of batch 2)": what makes the host's batch.
static std::string batchesNote(const ExecutableMetadata &m, const TensorInfo &t) {
  std::string batch = std::to_string(t.shape.empty() ? 1 : t.shape[0]);
  if (m.share.count)
    return " (" + std::to_string(m.deviceIterations) + " device iterations x " +
           std::to_string(m.gradientAccumulation) + " accumulated micro-batches x " +
           std::to_string(m.localReplicas()) + " replicas of instance " +
           std::to_string(m.share.instance) + " of batch " + batch + ")";
  if (m.replicas > 1)
    return " (" + std::to_string(m.deviceIterations) + " device iterations x " +
           std::to_string(m.gradientAccumulation) + " accumulated micro-batches x " +
           std::to_string(m.replicas) + " replicas of batch " + batch + ")";
  if (m.gradientAccumulation > 1)
    return " (" + std::to_string(m.deviceIterations) + " device iterations x " +
           std::to_string(m.gradientAccumulation) + " accumulated micro-batches of " +
           batch + ")";
  if (m.deviceIterations > 1)
    return " (" + std::to_string(m.deviceIterations) + " device iterations of batch " +
           batch + ")";
  return "";
}

llvm::Error checkInputs(const ExecutableMetadata &m, llvm::ArrayRef<Tensor> inputs) {
  if (inputs.size() != m.inputs.size())
    return fail("the model takes " + llvm::Twine(m.inputs.size()) +
                " input(s), got " + llvm::Twine(inputs.size()));
  int64_t blocks = iterationsPerRun(m) * m.localReplicas();
  for (auto [given, want] : llvm::zip(inputs, m.inputs)) {
    std::vector<int64_t> shape = hostShape(want, blocks);
    if (given.dtype != want.dtype || given.shape != shape)
      return fail("input '" + want.name + "' must be " + typeString(shape, want.dtype) +
                  ", got " + given.typeString() +
                  batchesNote(m, want));
  }
  return llvm::Error::success();
}

int64_t iterationsPerRun(const ExecutableMetadata &m) {
  return m.deviceIterations * m.gradientAccumulation;
}

std::string outputModeName(const ExecutableMetadata &m) {
  switch (m.outputMode) {
  case ExecutableMetadata::OutputMode::All:
    return "all";
  case ExecutableMetadata::OutputMode::Final:
    return "final";
  case ExecutableMetadata::OutputMode::Sum:
    return "sum";
  case ExecutableMetadata::OutputMode::EveryN:
    return "every-" + std::to_string(m.outputEvery);
  }
  return "all";
}

llvm::Error parseOutputMode(llvm::StringRef mode, ExecutableMetadata &m) {
  m.outputEvery = 1;
  llvm::StringRef text = mode;
  if (text == "all")
    m.outputMode = ExecutableMetadata::OutputMode::All;
  else if (text == "final")
    m.outputMode = ExecutableMetadata::OutputMode::Final;
  else if (text == "sum")
    m.outputMode = ExecutableMetadata::OutputMode::Sum;
  else if (text.consume_front("every-") && !text.getAsInteger(10, m.outputEvery) &&
           m.outputEvery >= 1)
    m.outputMode = ExecutableMetadata::OutputMode::EveryN;
  else
    return fail("output mode '" + mode + "' is not all, final, sum or every-N (N >= 1)");
  return llvm::Error::success();
}

std::vector<int64_t> returnedIterations(const ExecutableMetadata &m) {
  int64_t n = iterationsPerRun(m);
  std::vector<int64_t> its;
  switch (m.outputMode) {
  case ExecutableMetadata::OutputMode::All:
    for (int64_t i = 0; i < n; ++i)
      its.push_back(i);
    break;
  case ExecutableMetadata::OutputMode::Final:
    its.push_back(n - 1);
    break;
  case ExecutableMetadata::OutputMode::Sum:
    break;
  case ExecutableMetadata::OutputMode::EveryN:
    for (int64_t i = m.outputEvery - 1; i < n; i += m.outputEvery)
      its.push_back(i);
    break;
  }
  return its;
}

std::vector<int64_t> returnedShape(const ExecutableMetadata &m, const TensorInfo &t) {
  if (m.outputMode == ExecutableMetadata::OutputMode::Sum)
    return hostShape(t, m.localReplicas());
  return hostShape(t, static_cast<int64_t>(returnedIterations(m).size()) * m.localReplicas());
}

std::vector<int64_t> hostShape(const TensorInfo &t, int64_t iterations) {
  std::vector<int64_t> shape = t.shape;
  if (iterations == 1)
    return shape;
  if (shape.empty())
    return {iterations};
  shape[0] *= iterations;
  return shape;
}

Tensor localBatches(const ExecutableMetadata &m, const TensorInfo &info, const Tensor &whole) {
  if (!m.share.count || whole.shape.empty())
    return whole;
  // A block is one replica's batch: its rows along dimension 0 (one element
  // for a scalar input); block b belongs to replica b mod replicas.
  int64_t rows = info.shape.empty() ? 1 : info.shape[0];
  int64_t blocks = rows ? whole.shape[0] / rows : 0;
  size_t blockBytes = blocks ? whole.data.size() / blocks : 0;
  Tensor local;
  local.dtype = whole.dtype;
  local.shape = whole.shape;
  local.shape[0] = blocks / m.replicas * m.share.count * rows;
  local.data.reserve(local.shape[0] / std::max<int64_t>(rows, 1) * blockBytes);
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t replica = b % m.replicas;
    if (replica >= m.share.first && replica < m.share.first + m.share.count)
      local.data.insert(local.data.end(), whole.data.begin() + b * blockBytes,
                        whole.data.begin() + (b + 1) * blockBytes);
  }
  return local;
}

bool summable(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::I64 || t == DType::I32;
}

/// out += piece, elementwise, in the tensors' own type (OutputMode::Sum);
/// false for a type without a sum here (see summable).
static bool addInto(Tensor &out, const Tensor &piece) {
  int64_t count = out.numElements();
  auto add = [&](auto zero) {
    using T = decltype(zero);
    auto *o = reinterpret_cast<T *>(out.data.data());
    const auto *p = reinterpret_cast<const T *>(piece.data.data());
    for (int64_t i = 0; i < count; ++i)
      o[i] = static_cast<T>(o[i] + p[i]);
  };
  switch (out.dtype) {
  case DType::F32:
    add(float());
    return true;
  case DType::F64:
    add(double());
    return true;
  case DType::I64:
    add(int64_t());
    return true;
  case DType::I32:
    add(int32_t());
    return true;
  default:
    return false;
  }
}

Expected<std::vector<Tensor>> runDeviceIterations(
    const ExecutableMetadata &m, llvm::ArrayRef<Tensor> inputs,
    llvm::function_ref<Expected<std::vector<Tensor>>(llvm::ArrayRef<Tensor>)> once) {
  int64_t n = iterationsPerRun(m);
  if (n == 1)
    return once(inputs);
  // Iteration i's inputs are every replica's batch (replica-major).
  bool summing = m.outputMode == ExecutableMetadata::OutputMode::Sum;
  std::vector<int64_t> returned = returnedIterations(m);
  std::vector<Tensor> outputs;
  for (const TensorInfo &o : m.outputs)
    outputs.push_back(Tensor::zeros(o.dtype, returnedShape(m, o)));
  std::vector<Tensor> slices(inputs.size());
  size_t next = 0; // the next returned iteration's slot
  for (int64_t i = 0; i < n; ++i) {
    // Iteration i reads the i-th n-th of dimension 0: a contiguous block of
    // each row-major tensor.
    for (auto [slice, input, info] : llvm::zip(slices, inputs, m.inputs)) {
      size_t bytes = input.data.size() / n;
      slice.dtype = input.dtype;
      slice.shape = hostShape(info, m.localReplicas());
      slice.data.assign(input.data.begin() + i * bytes,
                        input.data.begin() + (i + 1) * bytes);
    }
    auto result = once(slices);
    if (!result)
      return result.takeError();
    bool keep = next < returned.size() && returned[next] == i;
    for (auto [out, piece] : llvm::zip(outputs, *result)) {
      if (summing) {
        if (piece.data.size() != out.data.size())
          return fail("internal error: an iteration's output has the wrong size");
        if (!addInto(out, piece))
          return fail("output mode sum cannot add " + dtypeName(out.dtype).str() +
                      " outputs (recompile with another --output-mode)");
      } else if (keep) {
        size_t bytes = out.data.size() / returned.size();
        if (piece.data.size() != bytes)
          return fail("internal error: an iteration's output has the wrong size");
        std::copy(piece.data.begin(), piece.data.end(), out.data.begin() + next * bytes);
      }
    }
    if (keep)
      ++next;
  }
  return outputs;
}

llvm::ArrayRef<char> Executable::weight(size_t i) const {
  const WeightInfo &w = metadata_.weights[i];
  return llvm::ArrayRef<char>(weights_.data() + w.offset, w.size);
}

} // namespace tessera::runtime
