//===- fuzz_onnx.cpp - libFuzzer targets for the ONNX importer ------------===//
//
// One binary, two targets, chosen by $TESSERA_FUZZ_TARGET:
//   onnx  the input is a serialized ModelProto: importONNXModel (protobuf
//         parsing, the model checks, ONNX's shape inference, every node
//         importer) and the verifier on what it built. A structure-aware
//         mutator edits parsed models through protobuf reflection (numbers
//         to boundary values, names to other names of the model or to
//         invalid UTF-8, repeated fields shortened, duplicated or swapped,
//         op types to others), besides libFuzzer's byte mutations.
//   pb    the input is a serialized TensorProto: parseTensorProto, the
//         reader of `tessera-compile --constant-input` and backend tests'
//         input_N.pb files.
// Every input must give a module or diagnostics, never a crash, a
// sanitizer report or an allocation beyond what the model's sizes allow.
//
//===----------------------------------------------------------------------===//

#include "tessera/Importers/ONNX/ONNXImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace tessera;
namespace pb = google::protobuf;

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {
enum class Target { Onnx, TensorProto };

Target chosenTarget() {
  static const Target chosen = [] {
    const char *name = std::getenv("TESSERA_FUZZ_TARGET");
    std::string t = name ? name : "";
    if (t == "onnx")
      return Target::Onnx;
    if (t == "pb")
      return Target::TensorProto;
    fprintf(stderr, "set TESSERA_FUZZ_TARGET to onnx or pb\n");
    std::abort();
  }();
  return chosen;
}

void fuzzImport(llvm::StringRef bytes) {
  // A context serves 256 imports, as a compile server keeps one across
  // models (what an import leaves behind must not break the next), then a
  // fresh one: interned attributes (every initializer) are freed only with
  // their context.
  static std::unique_ptr<mlir::MLIRContext> owner;
  static unsigned imports = 0;
  if (!owner || ++imports % 256 == 0) {
    owner = std::make_unique<mlir::MLIRContext>();
    owner->disableMultithreading();
  }
  mlir::MLIRContext *context = owner.get();
  mlir::ScopedDiagnosticHandler quiet(context, [](mlir::Diagnostic &) {
    return mlir::success();
  });
  onnx_importer::ImportOptions options;
  // Symbolic batch dimensions resolve, as `--micro-batch-size` makes them.
  options.batchSize = 2;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      onnx_importer::importONNXModel(bytes, context, options);
  if (module)
    (void)mlir::verify(*module);
}

/// Every field of a message and its sub-messages that a mutation may edit.
struct FieldRef {
  pb::Message *message;
  const pb::FieldDescriptor *field;
};

void collectFields(pb::Message &message, std::vector<FieldRef> &fields,
                   std::vector<std::string> &strings) {
  const pb::Reflection *r = message.GetReflection();
  const pb::Descriptor *d = message.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor *f = d->field(i);
    fields.push_back({&message, f});
    bool isMessage = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE;
    bool isString = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING;
    if (f->is_repeated()) {
      for (int k = 0; k < r->FieldSize(message, f); ++k) {
        if (isMessage)
          collectFields(*r->MutableRepeatedMessage(&message, f, k), fields, strings);
        else if (isString && f->type() != pb::FieldDescriptor::TYPE_BYTES)
          strings.push_back(r->GetRepeatedString(message, f, k));
      }
    } else if (r->HasField(message, f)) {
      if (isMessage)
        collectFields(*r->MutableMessage(&message, f), fields, strings);
      else if (isString && f->type() != pb::FieldDescriptor::TYPE_BYTES)
        strings.push_back(r->GetString(message, f));
    }
  }
}

int64_t boundaryInteger(std::mt19937_64 &rng, int64_t current) {
  static const int64_t values[] = {0, 1, -1, 2, 3, 7, 1 << 20, INT32_MAX, INT32_MIN,
                                   int64_t(1) << 40, INT64_MAX, INT64_MIN};
  switch (rng() % 3) {
  case 0:
    return values[rng() % (sizeof(values) / sizeof(values[0]))];
  case 1:
    return static_cast<int64_t>(static_cast<uint64_t>(current) + rng() % 5 - 2); // wraps
  default:
    return static_cast<int64_t>(rng() % 64);
  }
}

std::string otherString(std::mt19937_64 &rng, const std::vector<std::string> &strings) {
  static const char *values[] = {"", "\xff\xfe", "x", "Scan", "Split", "Einsum", "Loop",
                                 "If", "ArgMax", "Hardmax", "Conv", "Reshape", "Gather",
                                 "ScatterND", "Resize", "com.microsoft", "ai.onnx.ml"};
  if (!strings.empty() && rng() % 2)
    return strings[rng() % strings.size()];
  return values[rng() % (sizeof(values) / sizeof(values[0]))];
}

/// One edit of a parsed model through reflection.
void mutateModel(onnx::ModelProto &model, std::mt19937_64 &rng) {
  std::vector<FieldRef> fields;
  std::vector<std::string> strings;
  collectFields(model, fields, strings);
  if (fields.empty())
    return;
  auto [message, f] = fields[rng() % fields.size()];
  const pb::Reflection *r = message->GetReflection();
  if (f->is_repeated()) {
    int n = r->FieldSize(*message, f);
    switch (n == 0 ? 3 : rng() % 4) {
    case 0: // drop the last
      r->RemoveLast(message, f);
      return;
    case 1: // swap two
      r->SwapElements(message, f, rng() % n, rng() % n);
      return;
    case 2: // duplicate one (a message copied whole)
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        const pb::Message &from = r->GetRepeatedMessage(*message, f, rng() % n);
        r->AddMessage(message, f)->CopyFrom(from);
        return;
      }
      [[fallthrough]];
    default: // add one
      switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT64:
        r->AddInt64(message, f, boundaryInteger(rng, 0));
        return;
      case pb::FieldDescriptor::CPPTYPE_INT32:
        r->AddInt32(message, f, static_cast<int32_t>(boundaryInteger(rng, 0)));
        return;
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        r->AddUInt64(message, f, static_cast<uint64_t>(boundaryInteger(rng, 0)));
        return;
      case pb::FieldDescriptor::CPPTYPE_FLOAT:
        r->AddFloat(message, f, static_cast<float>(boundaryInteger(rng, 0)));
        return;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
        r->AddDouble(message, f, static_cast<double>(boundaryInteger(rng, 0)));
        return;
      case pb::FieldDescriptor::CPPTYPE_STRING:
        r->AddString(message, f, otherString(rng, strings));
        return;
      case pb::FieldDescriptor::CPPTYPE_MESSAGE:
        r->AddMessage(message, f);
        return;
      default:
        return;
      }
    }
  }
  switch (f->cpp_type()) {
  case pb::FieldDescriptor::CPPTYPE_INT64:
    r->SetInt64(message, f, boundaryInteger(rng, r->GetInt64(*message, f)));
    return;
  case pb::FieldDescriptor::CPPTYPE_INT32:
    r->SetInt32(message, f,
                static_cast<int32_t>(boundaryInteger(rng, r->GetInt32(*message, f))));
    return;
  case pb::FieldDescriptor::CPPTYPE_UINT64:
    r->SetUInt64(message, f, static_cast<uint64_t>(boundaryInteger(rng, 0)));
    return;
  case pb::FieldDescriptor::CPPTYPE_FLOAT: {
    static const float values[] = {0.0f, -1.0f, 1e30f, NAN, INFINITY};
    r->SetFloat(message, f, values[rng() % 5]);
    return;
  }
  case pb::FieldDescriptor::CPPTYPE_ENUM: {
    const pb::EnumDescriptor *e = f->enum_type();
    r->SetEnum(message, f, e->value(rng() % e->value_count()));
    return;
  }
  case pb::FieldDescriptor::CPPTYPE_STRING: {
    if (f->type() == pb::FieldDescriptor::TYPE_BYTES) {
      std::string bytes = r->GetString(*message, f);
      bytes.resize(rng() % (bytes.size() + 9));
      r->SetString(message, f, bytes);
    } else {
      r->SetString(message, f, otherString(rng, strings));
    }
    return;
  }
  case pb::FieldDescriptor::CPPTYPE_MESSAGE:
    r->ClearField(message, f);
    return;
  default:
    return;
  }
}
} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  std::mt19937_64 rng(seed);
  onnx::ModelProto model;
  // A quarter of the time, and for what does not parse, bytes.
  if (chosenTarget() != Target::Onnx || rng() % 4 == 0 ||
      !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  for (unsigned edits = 1 + rng() % 3; edits > 0; --edits)
    mutateModel(model, rng);
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  switch (chosenTarget()) {
  case Target::Onnx:
    fuzzImport(bytes);
    break;
  case Target::TensorProto: {
    onnx_importer::ConstantInput value;
    (void)onnx_importer::parseTensorProto(bytes, "fuzz", value);
    break;
  }
  }
  return 0;
}
