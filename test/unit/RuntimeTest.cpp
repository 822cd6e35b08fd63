//===- RuntimeTest.cpp - executable container and NumPy files ------------===//

#include "tessera/Codegen/HostCodegen.h"
#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/JIT.h"
#include "tessera/Runtime/Tensor.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace tessera::runtime;

namespace {

std::string tempPath(const char *name) {
  llvm::SmallString<128> path;
  llvm::sys::fs::createTemporaryFile("tessera-runtime-test", name, path);
  return path.str().str();
}

Tensor iota(std::vector<int64_t> shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.data.resize(t.numElements() * 4);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = static_cast<float>(i) * 0.5f;
    std::memcpy(t.data.data() + 4 * i, &v, 4);
  }
  return t;
}

ExecutableMetadata metadataWithWeights() {
  ExecutableMetadata m;
  m.compilerVersion = "test";
  m.target = "ipu2";
  m.inputs = {{"x", DType::F32, {2, 3}}};
  m.outputs = {{"y", DType::I64, {2}}};
  WeightInfo a, b;
  static_cast<TensorInfo &>(a) = {"a", DType::F32, {3}};
  static_cast<TensorInfo &>(b) = {"b", DType::U8, {5}};
  m.weights = {a, b};
  return m;
}

TEST(Executable, RoundTripsMetadataCodeAndAlignedWeights) {
  std::string path = tempPath("tess");
  std::vector<char> a(12, 1), b = {1, 2, 3, 4, 5};
  ASSERT_FALSE(llvm::errorToBool(writeExecutable(
      path, metadataWithWeights(), "OBJECT", {llvm::ArrayRef(a), llvm::ArrayRef(b)})));
  auto exe = Executable::load(path);
  ASSERT_TRUE(static_cast<bool>(exe)) << llvm::toString(exe.takeError());
  const ExecutableMetadata &m = (*exe)->metadata();
  EXPECT_EQ(m.target, "ipu2");
  EXPECT_EQ(m.inputs[0].typeString(), "2x3xf32");
  EXPECT_EQ(m.outputs[0].typeString(), "2xi64");
  EXPECT_EQ((*exe)->codeSection(), "OBJECT");
  ASSERT_EQ(m.weights.size(), 2u);
  EXPECT_EQ((*exe)->weight(1).vec(), b);
  // Every weight starts on a 64-byte boundary of the mapped file.
  EXPECT_EQ(m.weights[1].offset % 64, 0u);
  llvm::sys::fs::remove(path);
}

// The code section holds the vertex kernels' objects (compiled in parallel
// groups) back to back, then the host reference code's MLIR bytecode; the
// metadata gives their sizes.
TEST(Executable, SplitsTheCodeSectionIntoItsObjectsAndTheReferenceCode) {
  std::string path = tempPath("tess");
  std::vector<char> a(12, 1), b = {1, 2, 3, 4, 5};
  ExecutableMetadata m = metadataWithWeights();
  m.codeObjects = {2, 1};
  m.referenceMLIR = 3;
  ASSERT_FALSE(llvm::errorToBool(
      writeExecutable(path, m, "OBJECT", {llvm::ArrayRef(a), llvm::ArrayRef(b)})));
  auto exe = Executable::load(path);
  ASSERT_TRUE(static_cast<bool>(exe)) << llvm::toString(exe.takeError());
  EXPECT_EQ((*exe)->kernelObjects(), (std::vector<llvm::StringRef>{"OB", "J"}));
  EXPECT_EQ((*exe)->referenceMLIR(), "ECT");

  // Sizes that do not add up to the section are refused: objects too long,
  // or objects and reference code short of it.
  for (auto [objects, reference] :
       {std::pair{std::vector<int64_t>{3, 5}, int64_t{0}}, {{3}, 2}, {{}, 7}}) {
    m.codeObjects = objects;
    m.referenceMLIR = reference;
    ASSERT_FALSE(llvm::errorToBool(
        writeExecutable(path, m, "OBJECT", {llvm::ArrayRef(a), llvm::ArrayRef(b)})));
    auto bad = Executable::load(path);
    ASSERT_FALSE(static_cast<bool>(bad));
    EXPECT_NE(llvm::toString(bad.takeError()).find("code objects"), std::string::npos);
  }
  llvm::sys::fs::remove(path);
}

TEST(Executable, RefusesDamage) {
  std::string path = tempPath("tess");
  std::vector<char> a(12, 1), b(5, 2);
  ASSERT_FALSE(llvm::errorToBool(writeExecutable(
      path, metadataWithWeights(), "OBJECT", {llvm::ArrayRef(a), llvm::ArrayRef(b)})));
  auto bytes = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(static_cast<bool>(bytes));
  std::string good = (*bytes)->getBuffer().str();
  auto loadModified = [&](std::string data) {
    std::string p = tempPath("tess");
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(p, ec);
      os << data;
    }
    auto r = Executable::load(p);
    llvm::sys::fs::remove(p);
    return r ? std::string("loaded") : llvm::toString(r.takeError());
  };
  // Every single-byte change after the magic is caught by some check.
  for (size_t at = 8; at < good.size(); ++at) {
    std::string bad = good;
    bad[at] ^= 0x5a;
    EXPECT_NE(loadModified(bad), "loaded") << "byte " << at;
  }
  EXPECT_NE(loadModified(good.substr(0, good.size() - 1)).find("truncated"),
            std::string::npos);
  EXPECT_NE(loadModified("not an executable").find("bad magic"), std::string::npos);
  llvm::sys::fs::remove(path);
}

std::string fileBytes(const std::string &path) {
  auto bytes = llvm::MemoryBuffer::getFile(path);
  return bytes ? (*bytes)->getBuffer().str() : std::string("(missing)");
}

/// Files in `dir` whose name contains `part`.
int filesContaining(llvm::StringRef dir, llvm::StringRef part) {
  int n = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    n += llvm::StringRef(it->path()).contains(part);
  return n;
}

// The compile's writer: weights started early on a thread (spanning
// checksum blocks, so blocks are hashed across pieces), more weights and
// the rest at finish, written to the output and a copy in the same pass.
// Both are byte for byte what writeExecutable writes in one go.
TEST(Executable, WriterStartedEarlyWritesTheSameFileToEveryDestination) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tessera-writer", dir));
  std::string out = (dir + "/out.tess").str(), copy = (dir + "/copy.tess").str(),
              once = (dir + "/once.tess").str();
  ExecutableMetadata m = metadataWithWeights();
  WeightInfo c;
  static_cast<TensorInfo &>(c) = {"c", DType::U8, {3 << 20}};
  m.weights.push_back(c);
  std::vector<char> a(12, 1), b = {1, 2, 3, 4, 5}, big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i * 7 + i / 4096);
  std::vector<llvm::ArrayRef<char>> weights{a, b, big};
  {
    ExecutableWriter writer({out, copy});
    writer.startWeights(llvm::ArrayRef(weights).take_front(2));
    std::string copyErrors = "unset";
    ASSERT_FALSE(llvm::errorToBool(writer.finish(m, "OBJECT", weights, &copyErrors)));
    EXPECT_EQ(copyErrors, "");
  }
  ASSERT_FALSE(llvm::errorToBool(writeExecutable(once, m, "OBJECT", weights)));
  std::string expected = fileBytes(once);
  EXPECT_EQ(fileBytes(out), expected);
  EXPECT_EQ(fileBytes(copy), expected);
  auto exe = Executable::load(out);
  ASSERT_TRUE(static_cast<bool>(exe)) << llvm::toString(exe.takeError());
  EXPECT_EQ((*exe)->weight(2).vec(), big);
  EXPECT_EQ((*exe)->codeSection(), "OBJECT");
  // A byte changed in the third MiB is damage.
  std::string bad = expected;
  bad[128 + (2 << 20) + 5] ^= 1;
  std::string badPath = (dir + "/bad.tess").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(badPath, ec);
    os << bad;
  }
  auto damaged = Executable::load(badPath);
  ASSERT_FALSE(static_cast<bool>(damaged));
  EXPECT_NE(llvm::toString(damaged.takeError()).find("checksum"), std::string::npos);
  EXPECT_EQ(filesContaining(dir, ".tmp-"), 0);
  llvm::sys::fs::remove_directories(dir);
}

// A compile that fails after the writer started leaves nothing: no output,
// no copy, no temporary file. Weights at finish that are not the ones
// started are refused, and nothing is written either.
TEST(Executable, WriterLeavesNothingBehindWhenTheCompileFails) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tessera-writer", dir));
  std::string out = (dir + "/out.tess").str(), copy = (dir + "/copy.tess").str();
  std::vector<char> a(12, 1), b = {1, 2, 3, 4, 5}, other = {1, 2, 3, 4, 5};
  {
    ExecutableWriter writer({out, copy});
    writer.startWeights({llvm::ArrayRef(a), llvm::ArrayRef(b)});
  }
  EXPECT_EQ(filesContaining(dir, ".tess"), 0);
  {
    ExecutableWriter writer({out, copy});
    writer.startWeights({llvm::ArrayRef(a), llvm::ArrayRef(b)});
    llvm::Error err = writer.finish(metadataWithWeights(), "OBJECT",
                                    {llvm::ArrayRef(a), llvm::ArrayRef(other)});
    ASSERT_TRUE(static_cast<bool>(err));
    EXPECT_NE(llvm::toString(std::move(err)).find("not the executable's"), std::string::npos);
  }
  EXPECT_EQ(filesContaining(dir, ".tess"), 0);
  llvm::sys::fs::remove_directories(dir);
}

// A copy that cannot be written (the cache's directory is gone) is said,
// and the output is written all the same; an output that cannot be
// written is the error, and no copy of it is kept.
TEST(Executable, WriterSaysWhichDestinationFailed) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tessera-writer", dir));
  std::string out = (dir + "/out.tess").str(), copy = (dir + "/copy.tess").str(),
              missing = (dir + "/no/such/dir/x.tess").str();
  std::vector<char> a(12, 1), b = {1, 2, 3, 4, 5};
  std::vector<llvm::ArrayRef<char>> weights{a, b};
  {
    ExecutableWriter writer({out, missing});
    writer.startWeights(weights);
    std::string copyErrors;
    ASSERT_FALSE(llvm::errorToBool(
        writer.finish(metadataWithWeights(), "OBJECT", weights, &copyErrors)));
    EXPECT_NE(copyErrors.find("cannot create a file next to"), std::string::npos)
        << copyErrors;
  }
  EXPECT_TRUE(static_cast<bool>(Executable::load(out)));
  llvm::sys::fs::remove(out);
  {
    ExecutableWriter writer({missing, copy});
    writer.startWeights(weights);
    llvm::Error err = writer.finish(metadataWithWeights(), "OBJECT", weights);
    ASSERT_TRUE(static_cast<bool>(err));
    EXPECT_NE(llvm::toString(std::move(err)).find("cannot create a file next to"),
              std::string::npos);
  }
  EXPECT_EQ(filesContaining(dir, ".tess"), 0);
  llvm::sys::fs::remove_directories(dir);
}

TEST(Executable, CarriesTheMachineProgram) {
  ExecutableMetadata m = metadataWithWeights();
  MachineProgram &p = m.program.emplace();
  Variable x;
  x.name = "x";
  x.shape = {2, 3};
  x.kind = VarKind::Input;
  x.mapping = TileMapping::singleTile({2, 3}, 0);
  p.variables = {x};
  p.inputs = {0};
  p.outputs = {0};
  std::string path = tempPath("tess");
  std::vector<char> a(12, 1), b(5, 2);
  auto write = [&] {
    return writeExecutable(path, m, "OBJECT", {llvm::ArrayRef(a), llvm::ArrayRef(b)});
  };
  ASSERT_FALSE(llvm::errorToBool(write()));
  auto exe = Executable::load(path);
  ASSERT_TRUE(static_cast<bool>(exe)) << llvm::toString(exe.takeError());
  ASSERT_TRUE((*exe)->metadata().program.has_value());
  EXPECT_EQ((*exe)->metadata().program->variables[0].name, "x");
  EXPECT_EQ((*exe)->metadata().program->variables[0].mapping.chunks,
            (std::vector<int64_t>{2, 3}));

  // A program that names what does not exist is refused at load.
  m.program->outputs = {5};
  ASSERT_FALSE(llvm::errorToBool(write()));
  auto bad = Executable::load(path);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError())
                .find("program: output 0 names variable 5; there are 1 (recompile the model)"),
            std::string::npos);
  llvm::sys::fs::remove(path);
}

TEST(Tensor, NpyAndNpzRoundTrip) {
  Tensor t = iota({2, 3});
  auto parsed = parseNpy(serializeNpy(t), "test");
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(parsed->shape, t.shape);
  EXPECT_EQ(parsed->data, t.data);

  std::string path = tempPath("npz");
  Tensor scalar = iota({});
  ASSERT_FALSE(llvm::errorToBool(writeNpz(path, {{"a", t}, {"s", scalar}})));
  auto arrays = readNpz(path);
  ASSERT_TRUE(static_cast<bool>(arrays)) << llvm::toString(arrays.takeError());
  EXPECT_EQ(arrays->at("a").data, t.data);
  EXPECT_TRUE(arrays->at("s").shape.empty());
  llvm::sys::fs::remove(path);
}

TEST(Tensor, NpyErrorsSayWhatIsWrong) {
  auto bad = parseNpy("hello", "x.npy");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("not a .npy file"), std::string::npos);
  std::string truncated = serializeNpy(iota({4, 4}));
  truncated.resize(truncated.size() - 8);
  auto cut = parseNpy(truncated, "y.npy");
  ASSERT_FALSE(static_cast<bool>(cut));
  EXPECT_NE(llvm::toString(cut.takeError()).find("header needs 64"), std::string::npos);
}

TEST(Tensor, NpyHeadersFoundByTheFuzzerAreErrors) {
  // An empty 'descr' (asserted in StringRef::drop_front), and a shape whose
  // element count overflows int64 (undefined behaviour, and a product that
  // could match the data's size): both from tessera-fuzz's npy target.
  auto npy = [](const std::string &dict) {
    std::string header = dict;
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    return out + header + std::string(64, '\0');
  };
  for (auto [dict, message] :
       {std::pair<std::string, std::string>{
            "{'descr': '', 'fortran_order': False, 'shape': (2,), }", "element type ''"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (5333333333332133331, 3), }",
         "more than 2^36 elements"}}) {
    auto t = parseNpy(npy(dict), "fuzz.npy");
    ASSERT_FALSE(static_cast<bool>(t)) << dict;
    EXPECT_NE(llvm::toString(t.takeError()).find(message), std::string::npos) << dict;
  }
}

} // namespace

namespace {

// Native code records the CPU features it may use; a host without one of
// them refuses the executable, naming the feature and the way out.
TEST(Executable, HostWithoutACodeFeatureIsRefused) {
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  ExecutableMetadata m = metadataWithWeights();
  m.hostTriple = "x86_64-pc-linux-gnu";
  m.hostCPU = "some-cpu";
  for (const auto &f : host)
    if (f.second)
      m.hostFeatures.push_back(f.first().str());
  // Tuning flags the host does not report on are not checked.
  m.hostFeatures.push_back("prefer-256-bit");
  EXPECT_FALSE(llvm::errorToBool(checkHostCPU(m)));

  std::string lacking;
  for (const auto &f : host)
    if (!f.second)
      lacking = f.first().str();
  if (lacking.empty())
    GTEST_SKIP() << "this host has every feature LLVM knows";
  m.hostFeatures.push_back(lacking);
  std::string message = llvm::toString(checkHostCPU(m));
  EXPECT_NE(message.find("'some-cpu'"), std::string::npos) << message;
  EXPECT_NE(message.find(lacking), std::string::npos) << message;
  EXPECT_NE(message.find("--host-cpu=generic"), std::string::npos) << message;
}

// Code for --host-cpu=native loads on the machine that compiled it, even
// where the machine lacks features its CPU model has (virtual machines hide
// some): those are turned off, not implied by the CPU's name.
TEST(Executable, NativeCodeRunsOnThisHost) {
  llvm::Expected<tessera::HostCPU> cpu = tessera::resolveHostCPU("native");
  ASSERT_TRUE(static_cast<bool>(cpu)) << llvm::toString(cpu.takeError());
  ExecutableMetadata m = metadataWithWeights();
  m.hostTriple = llvm::sys::getProcessTriple();
  m.hostCPU = cpu->name;
  m.hostFeatures = cpu->features;
  EXPECT_FALSE(llvm::errorToBool(checkHostCPU(m)));
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  for (const std::string &f : cpu->features) {
    auto it = host.find(f);
    EXPECT_TRUE(it == host.end() || it->second) << f << " is not on this host";
  }

  // What a CPU lacks is listed, for code generation to turn off: x86-64-v2
  // has no AVX.
  if (llvm::StringRef(m.hostTriple).starts_with("x86_64")) {
    llvm::Expected<tessera::HostCPU> v2 = tessera::resolveHostCPU("x86-64-v2");
    ASSERT_TRUE(static_cast<bool>(v2)) << llvm::toString(v2.takeError());
    EXPECT_TRUE(llvm::is_contained(v2->disabled, "avx"));
    EXPECT_FALSE(llvm::is_contained(v2->features, "avx"));
  }
}

// The host reference code and the vertex kernels lower apart (the kernels
// once the tiles are planned) and join in one module: a declaration both
// make is kept once, and a private constant both name alike stays two
// constants, the kernel's renamed where it is used.
TEST(HostCodegen, AppendLoweredModuleKeepsOneDeclarationAndRenamesClashes) {
  mlir::DialectRegistry registry;
  tessera::registerCodegenDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto reference = mlir::parseSourceString<mlir::ModuleOp>(R"(
    llvm.func @free(!llvm.ptr)
    llvm.mlir.global private constant @__constant_2xi64(dense<[1, 2]> : tensor<2xi64>) : !llvm.array<2 x i64>
    llvm.func @main(%p: !llvm.ptr) -> !llvm.ptr {
      llvm.call @free(%p) : (!llvm.ptr) -> ()
      %c = llvm.mlir.addressof @__constant_2xi64 : !llvm.ptr
      llvm.return %c : !llvm.ptr
    })", &context);
  auto kernels = mlir::parseSourceString<mlir::ModuleOp>(R"(
    llvm.func @free(!llvm.ptr)
    llvm.mlir.global private constant @__constant_2xi64(dense<[7, 8]> : tensor<2xi64>) : !llvm.array<2 x i64>
    llvm.func @vertex_cs0_0(%p: !llvm.ptr) -> !llvm.ptr {
      llvm.call @free(%p) : (!llvm.ptr) -> ()
      %c = llvm.mlir.addressof @__constant_2xi64 : !llvm.ptr
      llvm.return %c : !llvm.ptr
    })", &context);
  ASSERT_TRUE(reference && kernels);
  ASSERT_TRUE(mlir::succeeded(tessera::appendLoweredModule(*reference, *kernels)));
  EXPECT_TRUE(kernels->getBody()->empty());
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*reference)));
  int declarations = 0;
  for (auto fn : reference->getOps<mlir::LLVM::LLVMFuncOp>())
    declarations += fn.getSymName() == "free";
  EXPECT_EQ(declarations, 1);
  auto valuesAt = [&](llvm::StringRef function) {
    auto fn = reference->lookupSymbol<mlir::LLVM::LLVMFuncOp>(function);
    mlir::LLVM::AddressOfOp address;
    fn.walk([&](mlir::LLVM::AddressOfOp a) { address = a; });
    auto global = reference->lookupSymbol<mlir::LLVM::GlobalOp>(address.getGlobalName());
    std::vector<int64_t> values;
    for (const llvm::APInt &v : llvm::cast<mlir::DenseIntElementsAttr>(*global.getValue()))
      values.push_back(v.getSExtValue());
    return values;
  };
  EXPECT_EQ(valuesAt("main"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(valuesAt("vertex_cs0_0"), (std::vector<int64_t>{7, 8}));
}

TEST(HostCodegen, AppendLoweredModuleRefusesADeclarationOfAnotherType) {
  mlir::DialectRegistry registry;
  tessera::registerCodegenDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto reference = mlir::parseSourceString<mlir::ModuleOp>("llvm.func @expf(f32) -> f32",
                                                           &context);
  auto kernels = mlir::parseSourceString<mlir::ModuleOp>("llvm.func @expf(f64) -> f64",
                                                         &context);
  ASSERT_TRUE(reference && kernels);
  std::string message;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  EXPECT_TRUE(mlir::failed(tessera::appendLoweredModule(*reference, *kernels)));
  EXPECT_NE(message.find("the vertex kernels declare @expf"), std::string::npos) << message;
}

} // namespace
