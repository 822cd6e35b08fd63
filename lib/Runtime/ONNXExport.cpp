//===- ONNXExport.cpp - trained weights back into an ONNX model ----------===//

#include "tessera/Runtime/ONNXExport.h"
#include "tessera/Support/Error.h"
#include "tessera/Runtime/FileUtils.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

namespace tessera::runtime {
namespace {

/// The ONNX element type of `t`, or UNDEFINED.
int onnxElementType(DType t) {
  switch (t) {
  case DType::F32: return onnx::TensorProto::FLOAT;
  case DType::F64: return onnx::TensorProto::DOUBLE;
  case DType::F16: return onnx::TensorProto::FLOAT16;
  case DType::BF16: return onnx::TensorProto::BFLOAT16;
  case DType::I64: return onnx::TensorProto::INT64;
  case DType::I32: return onnx::TensorProto::INT32;
  case DType::I16: return onnx::TensorProto::INT16;
  case DType::I8: return onnx::TensorProto::INT8;
  case DType::U8: return onnx::TensorProto::UINT8;
  case DType::U16: return onnx::TensorProto::UINT16;
  case DType::U32: return onnx::TensorProto::UINT32;
  case DType::U64: return onnx::TensorProto::UINT64;
  case DType::Bool: return onnx::TensorProto::BOOL;
  }
  return onnx::TensorProto::UNDEFINED;
}

/// The parsed model `source`, or why it cannot be rewritten.
llvm::Expected<onnx::ModelProto> readExportSource(llvm::StringRef source) {
  auto file = llvm::MemoryBuffer::getFile(source, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return fail("cannot read the model '" + source + "': " + file.getError().message());
  if ((*file)->getBuffer().starts_with(llvm::StringRef("PK\x03\x04", 4)))
    return fail("'" + source + "' is a TorchScript module: --export-onnx writes ONNX "
                "models; load the --save-weights arrays into the module instead");
  onnx::ModelProto model;
  if (!model.ParseFromArray((*file)->getBufferStart(),
                            static_cast<int>((*file)->getBufferSize())))
    return fail("'" + source + "' is not an ONNX model");
  for (const onnx::TensorProto &init : model.graph().initializer())
    if (init.data_location() == onnx::TensorProto::EXTERNAL)
      return fail("initializer '" + init.name() + "' of '" + source +
                  "' is stored in an external data file, which --export-onnx does "
                  "not write; save with --save-weights instead");
  return model;
}

} // namespace

llvm::Error checkONNXExportSource(llvm::StringRef source) {
  auto model = readExportSource(source);
  return model ? llvm::Error::success() : model.takeError();
}

llvm::Error exportONNXWithInitializers(
    llvm::StringRef source, const std::vector<std::pair<std::string, Tensor>> &values,
    llvm::StringRef path) {
  auto parsed = readExportSource(source);
  if (!parsed)
    return parsed.takeError();
  onnx::ModelProto &model = *parsed;
  llvm::StringMap<onnx::TensorProto *> initializers;
  for (onnx::TensorProto &init : *model.mutable_graph()->mutable_initializer())
    initializers[init.name()] = &init;
  for (const auto &[name, t] : values) {
    auto it = initializers.find(name);
    if (it == initializers.end())
      return fail("'" + source + "' has no initializer '" + name +
                  "' to hold the trained value");
    onnx::TensorProto &init = *it->second;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    if (dims != t.shape || init.data_type() != onnxElementType(t.dtype))
      return fail("initializer '" + name + "' of '" + source + "' is " +
                  typeString(dims, t.dtype) + " in the model but " + t.typeString() +
                  " in the executable (was it compiled from this model?)");
    // One representation: the trained bytes, little-endian as ONNX stores.
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.clear_uint64_data();
    init.set_raw_data(t.data.data(), t.data.size());
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return fail("cannot serialise the trained model (over 2 GiB?)");
  return writeFileAtomically(path, bytes);
}

} // namespace tessera::runtime
