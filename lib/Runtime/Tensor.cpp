//===- Tensor.cpp - host tensors and NumPy files -------------------------===//

#include "tessera/Runtime/Tensor.h"
#include "tessera/Support/Error.h"
#include "tessera/Runtime/FileUtils.h"

#include "llvm/ADT/ScopeExit.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <zip.h>

using llvm::Expected;
using llvm::StringRef;

namespace tessera::runtime {

namespace {
struct DTypeInfo {
  DType type;
  const char *mlir;
  const char *numpy; // descr without byte order
  size_t size;
};
const DTypeInfo kDTypes[] = {
    {DType::F32, "f32", "f4", 4},   {DType::F64, "f64", "f8", 8},
    {DType::F16, "f16", "f2", 2},   {DType::BF16, "bf16", "", 2},
    {DType::I64, "i64", "i8", 8},   {DType::I32, "i32", "i4", 4},
    {DType::I16, "i16", "i2", 2},   {DType::I8, "i8", "i1", 1},
    {DType::U8, "ui8", "u1", 1},    {DType::U16, "ui16", "u2", 2},
    {DType::U32, "ui32", "u4", 4},  {DType::U64, "ui64", "u8", 8},
    {DType::Bool, "i1", "b1", 1},
};
const DTypeInfo &info(DType t) {
  for (const auto &i : kDTypes)
    if (i.type == t)
      return i;
  llvm_unreachable("unknown dtype");
}
} // namespace

StringRef dtypeName(DType t) { return info(t).mlir; }
size_t dtypeSize(DType t) { return info(t).size; }

bool sameStorage(DType a, DType b) {
  auto isInteger = [](DType t) {
    return t != DType::Bool && t != DType::F32 && t != DType::F64 &&
           t != DType::F16 && t != DType::BF16;
  };
  return a == b || (isInteger(a) && isInteger(b) && dtypeSize(a) == dtypeSize(b));
}

Expected<DType> parseDType(StringRef name) {
  for (const auto &i : kDTypes)
    if (name == i.mlir)
      return i.type;
  return fail("unknown element type '" + name + "'");
}

std::optional<int64_t> boundedNumElements(llvm::ArrayRef<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && elements > kMaxTensorElements / d))
      return std::nullopt;
    elements *= d;
  }
  return elements;
}

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string typeString(const std::vector<int64_t> &shape, DType t) {
  std::string s;
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + dtypeName(t).str();
}

Expected<Tensor> parseNpy(StringRef bytes, StringRef what) {
  if (bytes.size() < 10 || !bytes.starts_with("\x93NUMPY"))
    return fail(what + " is not a .npy file (no \\x93NUMPY magic)");
  uint8_t major = bytes[6];
  size_t headerLen, offset;
  if (major == 1) {
    headerLen = llvm::support::endian::read16le(bytes.data() + 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return fail(what + " is truncated");
    headerLen = llvm::support::endian::read32le(bytes.data() + 8);
    offset = 12;
  } else {
    return fail(what + " has unsupported .npy version " + llvm::Twine(major));
  }
  if (offset + headerLen > bytes.size())
    return fail(what + " is truncated (header)");
  StringRef header = bytes.substr(offset, headerLen);
  // A Python dict literal, "{'descr': ..., 'shape': (...), }", padded with
  // spaces and a newline: anything else is a damaged file.
  if (!header.trim().starts_with("{") || !header.trim().ends_with("}"))
    return fail(what + " has a malformed header (not a {...} dictionary)");
  auto field = [&](StringRef key) -> StringRef {
    size_t at = header.find("'" + key.str() + "'");
    if (at == StringRef::npos)
      return {};
    return header.drop_front(at + key.size() + 2).ltrim(" :");
  };
  StringRef descr = field("descr");
  if (!descr.consume_front("'"))
    return fail(what + ": cannot read 'descr' in the .npy header");
  descr = descr.take_until([](char c) { return c == '\''; });
  if (field("fortran_order").starts_with("True"))
    return fail(what + " is in Fortran order; save a C-ordered array");
  char order = descr.empty() ? '?' : descr[0];
  StringRef kind = descr.empty() ? descr : descr.drop_front(1);
  if (order == '>' && kind != "u1" && kind != "i1" && kind != "b1")
    return fail(what + " is big-endian (" + descr + ")");
  Tensor t;
  bool found = false;
  for (const auto &i : kDTypes)
    if (*i.numpy && kind == i.numpy) {
      t.dtype = i.type;
      found = true;
    }
  if (!found)
    return fail(what + " has element type '" + descr +
                "', which Tessera does not support");
  StringRef shape = field("shape");
  if (!shape.consume_front("("))
    return fail(what + ": cannot read 'shape' in the .npy header");
  shape = shape.take_until([](char c) { return c == ')'; });
  llvm::SmallVector<StringRef> dims;
  shape.split(dims, ',', -1, /*KeepEmpty=*/false);
  for (StringRef d : dims) {
    d = d.trim();
    if (d.empty())
      continue;
    int64_t v;
    if (d.getAsInteger(10, v) || v < 0)
      return fail(what + ": bad dimension '" + d + "'");
    t.shape.push_back(v);
  }
  // Bounded before the size is computed: a header cannot overflow it (and
  // the data must then be there too).
  std::optional<int64_t> elements = boundedNumElements(t.shape);
  if (!elements)
    return fail(what + ": the shape in the .npy header has more than 2^36 elements");
  size_t size = *elements * dtypeSize(t.dtype);
  StringRef payload = bytes.drop_front(offset + headerLen);
  if (payload.size() < size)
    return fail(what + " holds " + llvm::Twine(payload.size()) +
                " bytes of data but its header needs " + llvm::Twine(size));
  t.data.assign(payload.begin(), payload.begin() + size);
  return t;
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(t.numElements() * dtypeSize(dtype), 0);
  return t;
}

Tensor Tensor::scalar(float v) {
  Tensor t = zeros(DType::F32, {});
  std::memcpy(t.data.data(), &v, sizeof(v));
  return t;
}

Tensor Tensor::scalar(int64_t v) {
  Tensor t = zeros(DType::I64, {});
  std::memcpy(t.data.data(), &v, sizeof(v));
  return t;
}

Expected<Tensor> readNpy(StringRef path) {
  auto file = readRegularFile(path);
  if (!file)
    return file.takeError();
  return parseNpy((*file)->getBuffer(), path);
}

/// The largest .npz member read: kMaxTensorElements bytes (a damaged
/// header cannot make it allocate more).
constexpr uint64_t kMaxNpzMemberBytes = kMaxTensorElements;

Expected<std::map<std::string, Tensor>> readNpz(StringRef path) {
  auto file = readRegularFile(path);
  if (!file)
    return file.takeError();
  return parseNpz((*file)->getBuffer(), path);
}

Expected<std::map<std::string, Tensor>> parseNpz(StringRef bytes, StringRef path) {
  // libzip reads what numpy writes -- stored or deflated members, ZIP64,
  // streamed entries -- and checks every member's CRC as it is read.
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t *source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  zip_t *archive = source ? zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error)
                          : nullptr;
  if (!archive) {
    std::string why = zip_error_strerror(&error);
    if (source)
      zip_source_free(source);
    zip_error_fini(&error);
    return fail(path + " is not a readable .npz archive (" + why + ")");
  }
  zip_error_fini(&error);
  llvm::scope_exit closeArchive([&] { zip_discard(archive); });
  std::map<std::string, Tensor> arrays;
  zip_int64_t entries = zip_get_num_entries(archive, 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    zip_stat_t stat;
    if (zip_stat_index(archive, i, 0, &stat) != 0 || !(stat.valid & ZIP_STAT_NAME) ||
        !(stat.valid & ZIP_STAT_SIZE))
      return fail(path + " is a damaged .npz (" + zip_strerror(archive) + ")");
    std::string name = stat.name;
    StringRef key = name;
    key.consume_back(".npy");
    if (stat.size > kMaxNpzMemberBytes)
      return fail(path + ": entry '" + name + "' holds " + llvm::Twine(stat.size) +
                  " bytes, more than an array Tessera reads (2^36)");
    zip_file_t *member = zip_fopen_index(archive, i, 0);
    if (!member)
      return fail(path + ": cannot read entry '" + name + "' (" + zip_strerror(archive) +
                  ")");
    std::string data(stat.size, '\0');
    zip_int64_t got = zip_fread(member, data.data(), data.size());
    // One more read reaches the end, where libzip compares the CRC.
    char extra;
    zip_int64_t more = got == static_cast<zip_int64_t>(data.size())
                           ? zip_fread(member, &extra, 1)
                           : -1;
    std::string why = got < 0 || more != 0 ? zip_file_strerror(member) : "";
    zip_fclose(member);
    if (got != static_cast<zip_int64_t>(data.size()) || more != 0)
      return fail(path + ": entry '" + name + "' is damaged (" +
                  (why.empty() ? "shorter than its header says" : why) + ")");
    if (arrays.count(key.str()))
      return fail(path + " holds the array '" + key + "' twice");
    auto t = parseNpy(data, (path + ":" + name).str());
    if (!t)
      return t.takeError();
    arrays[key.str()] = std::move(*t);
  }
  if (arrays.empty())
    return fail(path + " is not a .npz archive (or holds no arrays)");
  return arrays;
}

std::string serializeNpy(const Tensor &t) {
  std::string shape = "(";
  for (int64_t d : t.shape)
    shape += std::to_string(d) + ", ";
  if (t.shape.size() > 1)
    shape.resize(shape.size() - 2);
  else if (t.shape.size() == 1)
    shape.resize(shape.size() - 1);
  shape += ")";
  StringRef descr = info(t.dtype).numpy;
  std::string kind = t.dtype == DType::BF16 ? std::string("<V2")
                     : (descr == "u1" || descr == "i1" || descr == "b1")
                         ? "|" + descr.str()
                         : "<" + descr.str();
  std::string header = "{'descr': '" + kind + "', 'fortran_order': False, 'shape': " +
                       shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  char len[2];
  llvm::support::endian::write16le(len, header.size());
  out.append(len, 2);
  out += header;
  out.append(t.data.begin(), t.data.end());
  return out;
}

llvm::Error writeNpz(StringRef path,
                     const std::vector<std::pair<std::string, Tensor>> &arrays) {
  std::string zip, central;
  uint16_t count = 0;
  auto put16 = [](std::string &s, uint16_t v) {
    char b[2];
    llvm::support::endian::write16le(b, v);
    s.append(b, 2);
  };
  auto put32 = [](std::string &s, uint32_t v) {
    char b[4];
    llvm::support::endian::write32le(b, v);
    s.append(b, 4);
  };
  for (const auto &[name, tensor] : arrays) {
    std::string data = serializeNpy(tensor), file = name + ".npy";
    if (data.size() >= 0xffffffffu)
      return fail("array '" + name + "' is too large for a .npz without ZIP64");
    uint32_t crc = llvm::crc32(llvm::arrayRefFromStringRef(data));
    uint32_t offset = zip.size();
    put32(zip, 0x04034b50);
    put16(zip, 20);
    put16(zip, 0);
    put16(zip, 0);
    put16(zip, 0);
    put16(zip, 0x21); // 1980-01-01: deterministic output
    put32(zip, crc);
    put32(zip, data.size());
    put32(zip, data.size());
    put16(zip, file.size());
    put16(zip, 0);
    zip += file;
    zip += data;
    put32(central, 0x02014b50);
    put16(central, 20);
    put16(central, 20);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0x21);
    put32(central, crc);
    put32(central, data.size());
    put32(central, data.size());
    put16(central, file.size());
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put32(central, 0);
    put32(central, offset);
    central += file;
    ++count;
  }
  uint32_t centralOffset = zip.size();
  zip += central;
  put32(zip, 0x06054b50);
  put16(zip, 0);
  put16(zip, 0);
  put16(zip, count);
  put16(zip, count);
  put32(zip, central.size());
  put32(zip, centralOffset);
  put16(zip, 0);
  return writeFileAtomically(path, zip);
}

} // namespace tessera::runtime
