//===- IPUModelTest.cpp - executing tile-mapped programs -----------------===//
//
// Executables built here without the compiler: a hand-written program and,
// for its kernel, LLVM IR compiled to an object in process (the same packed
// `void(void**)` ABI the compiler's vertices have).
//
//===----------------------------------------------------------------------===//

#include "tessera/Compiler/Compiler.h"
#include "tessera/Compiler/Registration.h"
#include "tessera/Runtime/HostRunner.h"
#include "tessera/Runtime/IPUModel.h"
#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Target/CostModel.h"

#include "tessera/Runtime/JIT.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

using namespace tessera::runtime;

namespace {

/// Kernels with the packed-entry signature: `args` holds pointers to the
/// loop offsets, then to a memref descriptor per operand ({allocated,
/// aligned, offset, sizes, strides}).
///   mul_rows: y[i, j] = x[i, j] * w[j] + (loop offset 0 + i)
///   outer:    y[i, j] = a[i] * b[j]
/// over y's piece, sized from the descriptors (one symbol serves every piece
/// size); both read their operands through @data and @size. Each packed
/// entry `vertex_<k>_entry` has its signature beside it, as codegen emits
/// it: [loop offsets, buffers, per buffer: element bits, rank, sizes (-1:
/// read from the descriptor)]. `padded_rows` is mul_rows over a rank-3 x.
const char *kKernelIR = R"(
@vertex_mul_rows_signature = constant [13 x i64] [i64 2, i64 3, i64 32, i64 2, i64 -1, i64 -1, i64 32, i64 1, i64 -1, i64 32, i64 2, i64 -1, i64 -1]
@vertex_padded_rows_signature = constant [14 x i64] [i64 2, i64 3, i64 32, i64 3, i64 -1, i64 -1, i64 -1, i64 32, i64 1, i64 -1, i64 32, i64 2, i64 -1, i64 -1]
@vertex_outer_signature = constant [12 x i64] [i64 2, i64 3, i64 32, i64 1, i64 -1, i64 32, i64 1, i64 -1, i64 32, i64 2, i64 -1, i64 -1]

define ptr @data(ptr %args, i64 %arg) {
  %p = getelementptr ptr, ptr %args, i64 %arg
  %d = load ptr, ptr %p
  %a.p = getelementptr i64, ptr %d, i64 1
  %a = load ptr, ptr %a.p
  ret ptr %a
}

define i64 @size(ptr %args, i64 %arg, i64 %dim) {
  %p = getelementptr ptr, ptr %args, i64 %arg
  %d = load ptr, ptr %p
  %at = add i64 %dim, 3
  %s.p = getelementptr i64, ptr %d, i64 %at
  %s = load i64, ptr %s.p
  ret i64 %s
}

define void @vertex_padded_rows_entry(ptr %args) {
  call void @vertex_mul_rows_entry(ptr %args)
  ret void
}

define void @vertex_mul_rows_entry(ptr %args) {
entry:
  %p0 = load ptr, ptr %args
  %off0 = load i64, ptr %p0
  %xa = call ptr @data(ptr %args, i64 2)
  %wa = call ptr @data(ptr %args, i64 3)
  %ya = call ptr @data(ptr %args, i64 4)
  %rows = call i64 @size(ptr %args, i64 2, i64 0)
  %cols = call i64 @size(ptr %args, i64 2, i64 1)
  %n = mul i64 %rows, %cols
  br label %loop
loop:
  %k = phi i64 [0, %entry], [%k1, %loop]
  %i = udiv i64 %k, %cols
  %j = urem i64 %k, %cols
  %xp = getelementptr float, ptr %xa, i64 %k
  %xv = load float, ptr %xp
  %wp = getelementptr float, ptr %wa, i64 %j
  %wv = load float, ptr %wp
  %prod = fmul float %xv, %wv
  %row = add i64 %off0, %i
  %rowf = sitofp i64 %row to float
  %r = fadd float %prod, %rowf
  %yp = getelementptr float, ptr %ya, i64 %k
  store float %r, ptr %yp
  %k1 = add i64 %k, 1
  %done = icmp eq i64 %k1, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}

define void @vertex_outer_entry(ptr %args) {
entry:
  %aa = call ptr @data(ptr %args, i64 2)
  %ba = call ptr @data(ptr %args, i64 3)
  %ya = call ptr @data(ptr %args, i64 4)
  %rows = call i64 @size(ptr %args, i64 4, i64 0)
  %cols = call i64 @size(ptr %args, i64 4, i64 1)
  %n = mul i64 %rows, %cols
  br label %loop
loop:
  %k = phi i64 [0, %entry], [%k1, %loop]
  %i = udiv i64 %k, %cols
  %j = urem i64 %k, %cols
  %ap = getelementptr float, ptr %aa, i64 %i
  %av = load float, ptr %ap
  %bp = getelementptr float, ptr %ba, i64 %j
  %bv = load float, ptr %bp
  %p = fmul float %av, %bv
  %yp = getelementptr float, ptr %ya, i64 %k
  store float %p, ptr %yp
  %k1 = add i64 %k, 1
  %done = icmp eq i64 %k1, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
)";

std::string compileIR(const char *ir) {
  llvm::LLVMContext context;
  llvm::SMDiagnostic diag;
  auto module = llvm::parseAssemblyString(ir, diag, context);
  EXPECT_TRUE(module) << diag.getMessage().str();
  if (!module)
    return "";
  // The runtime's own compile, for the baseline CPU.
  auto object = tessera::runtime::compileToObject(*module, "generic", "");
  EXPECT_TRUE(static_cast<bool>(object)) << llvm::toString(object.takeError());
  return object ? *object : "";
}

std::string tempPath() {
  llvm::SmallString<128> path;
  llvm::sys::fs::createTemporaryFile("tessera-ipumodel-test", "tess", path);
  return path.str().str();
}

TileMapping grid(std::vector<int64_t> shape, std::vector<int64_t> chunks,
                 std::vector<int64_t> strides, int64_t first) {
  TileMapping m;
  m.shape = shape;
  m.chunks = chunks;
  m.tileStrides = strides;
  m.firstTile = first;
  return m;
}

Variable variable(const char *name, std::vector<int64_t> shape, VarKind kind,
                  TileMapping mapping) {
  Variable v;
  v.name = name;
  v.shape = shape;
  v.kind = kind;
  v.mapping = std::move(mapping);
  return v;
}

std::vector<float> values(const Tensor &t) {
  std::vector<float> v(t.numElements());
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

Tensor tensor(std::vector<int64_t> shape, const std::vector<float> &v) {
  Tensor t;
  t.shape = shape;
  t.data.resize(v.size() * 4);
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

/// x [8,6] in row pairs on tiles 0..3; w [6] on tile 5; y = mul_rows(x, w)
/// in row triples on tiles 2..4 (so x moves); z [48] = y viewed flat, on
/// tiles 0..3 in 12s; q [4,3] = y[2:6, 1:4] on tile 7.
struct Sample {
  ExecutableMetadata meta;
  std::vector<float> w = {1, -2, 0.5, 3, 0.25, -1};
};

Sample sample() {
  Sample s;
  MachineProgram &p = s.meta.program.emplace();
  p.variables.push_back(variable("x", {8, 6}, VarKind::Input, grid({8, 6}, {2, 6}, {1, 0}, 0)));
  p.variables.push_back(variable("w", {6}, VarKind::Weight, TileMapping::singleTile({6}, 5)));
  p.variables[1].weight = 0;
  p.variables.push_back(variable("y", {8, 6}, VarKind::Activation, grid({8, 6}, {3, 6}, {1, 0}, 2)));
  Variable flat;
  flat.name = "y.flat";
  flat.shape = {48};
  flat.base = 2;
  p.variables.push_back(flat);
  p.variables.push_back(variable("z", {48}, VarKind::Activation, grid({48}, {12}, {1}, 0)));
  p.variables.push_back(variable("q", {4, 3}, VarKind::Activation, TileMapping::singleTile({4, 3}, 7)));
  ComputeSet cs;
  cs.name = "cs0";
  cs.location = "mul \"/m\"";
  cs.loopRanges = {8, 6};
  cs.outputLoops = {0, 1};
  AccessMap id, cols;
  id.coeffs = {{1, 0}, {0, 1}};
  id.consts = {0, 0};
  cols.coeffs = {{0, 1}};
  cols.consts = {0};
  cs.inputs = {{0, id}, {1, cols}};
  cs.outputs = {2};
  cs.kernels = {{"vertex_mul_rows_entry", {3, 6}, 200, 300},
                {"vertex_mul_rows_entry", {2, 6}, 150, 300}};
  cs.macs = 48;
  p.computeSets.push_back(cs);
  p.copies.push_back({3, 4, Box{{0}, {48}}, {0}, "reshape \"/r\""});
  p.copies.push_back({2, 5, Box{{2, 1}, {4, 3}}, {0, 0}, "slice \"/s\""});
  p.steps = {{Step::Kind::Compute, 0}, {Step::Kind::Copy, 0}, {Step::Kind::Copy, 1}};
  p.inputs = {0};
  p.outputs = {4, 5};

  s.meta.compilerVersion = "test";
  s.meta.target = "ipu2";
  s.meta.tilesPerIPU = 8;
  s.meta.inputs = {{"x", DType::F32, {8, 6}}};
  s.meta.outputs = {{"z", DType::F32, {48}}, {"q", DType::F32, {4, 3}}};
  WeightInfo w;
  static_cast<TensorInfo &>(w) = {"w", DType::F32, {6}};
  s.meta.weights = {w};
  return s;
}

std::unique_ptr<Executable> write(const ExecutableMetadata &meta, const std::string &code,
                                  const std::vector<float> &weight) {
  std::string path = tempPath();
  llvm::ArrayRef<char> bytes(reinterpret_cast<const char *>(weight.data()),
                             weight.size() * 4);
  llvm::Error err = writeExecutable(path, meta, code, {bytes});
  EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  auto exe = Executable::load(path);
  llvm::sys::fs::remove(path); // the mapping stays valid
  EXPECT_TRUE(static_cast<bool>(exe)) << llvm::toString(exe.takeError());
  return exe ? std::move(*exe) : nullptr;
}

TEST(IPUModel, ComputesExchangesAndCopiesLikeTheProgramSays) {
  Sample s = sample();
  std::string object = compileIR(kKernelIR);
  ASSERT_FALSE(object.empty());
  auto exe = write(s.meta, object, s.w);
  ASSERT_TRUE(exe);
  ASSERT_TRUE(exe->metadata().program.has_value());

  std::vector<float> x(48);
  for (int i = 0; i < 48; ++i)
    x[i] = 0.5f * i - 7;
  std::vector<float> y(48);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 6; ++j)
      y[i * 6 + j] = x[i * 6 + j] * s.w[j] + i;
  std::vector<float> q;
  for (int i = 2; i < 6; ++i)
    for (int j = 1; j < 4; ++j)
      q.push_back(y[i * 6 + j]);

  for (unsigned threads : {1u, 4u}) {
    auto model = IPUModel::create(*exe, threads);
    ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
    for (int repeat = 0; repeat < 2; ++repeat) {
      auto out = (*model)->run({tensor({8, 6}, x)});
      ASSERT_TRUE(static_cast<bool>(out)) << llvm::toString(out.takeError());
      ASSERT_EQ(out->size(), 2u);
      EXPECT_EQ(values((*out)[0]), y);
      EXPECT_EQ(values((*out)[1]), q);
    }
  }

  auto model = IPUModel::create(*exe);
  ASSERT_TRUE(static_cast<bool>(model));
  const CostSummary &cost = (*model)->cost();
  ASSERT_EQ(cost.steps.size(), 5u);
  EXPECT_EQ(cost.steps[0].name, "stream-in");
  EXPECT_EQ(cost.steps[0].exchangeBytes, 48 * 4);
  const StepCost &cs = cost.steps[1];
  EXPECT_EQ(cs.name, "cs0");
  EXPECT_EQ(cs.location, "mul \"/m\"");
  // x rows 0-2, 3-5 (partly local to tile 3? no: tile 3 holds rows 6-7)
  // and 6-7 all move, and w (24 B) moves to each of the three vertices.
  EXPECT_EQ(cs.exchangeBytes, (18 + 18 + 12) * 4 + 3 * 24);
  // Tiles 2 and 3 each receive 72 + 24 bytes (24 cycles at 4 B/cycle) in
  // three regions: x's rows from two tiles (whole rows of one piece are one
  // region) and w.
  const auto &target = (*model)->target();
  EXPECT_EQ(cs.exchangeCycles,
            24 + 3 * target.exchangeCyclesPerRegion + target.exchangeOverheadCycles);
  EXPECT_EQ(cs.computeCycles, 200);
  EXPECT_EQ(cs.tilesUsed, 3);
  EXPECT_EQ(cs.macs, 48);
  EXPECT_EQ(cost.steps[2].name, "copy0");
  EXPECT_EQ(cost.steps[2].computeCycles, 0);
  EXPECT_EQ(cost.steps[4].name, "stream-out");
  int64_t total = 0;
  for (const StepCost &step : cost.steps)
    total += step.total();
  EXPECT_EQ(cost.totalCycles, total);

  // Code is reserved where vertices run; the receive buffers are planned.
  const MemoryPlan &plan = (*model)->memory();
  EXPECT_EQ(plan.peakByCategory[2].code, 300);
  EXPECT_EQ(plan.peakByCategory[0].code, 0);
  EXPECT_TRUE(plan.receives(0, 0));
  EXPECT_TRUE(plan.receives(0, 1));
  // Each tile is laid out on its own: y's piece sits above x's piece and
  // the receive buffers on tile 2, lower on tile 4, which holds none of x
  // (the outputs above are read from both).
  EXPECT_GT(plan.variableOffset(2, 2), plan.variableOffset(2, 4));

  llvm::json::Value profile = (*model)->profileJSON();
  const llvm::json::Object *o = profile.getAsObject();
  ASSERT_TRUE(o);
  EXPECT_EQ(o->getInteger("cycles"), cost.totalCycles);
  EXPECT_EQ(o->getArray("steps")->size(), 5u);
  // cs0 writes y, not what it reads: its vertices run with their exchange.
  const llvm::json::Array &steps = *o->getArray("steps");
  EXPECT_EQ(steps[1].getAsObject()->getBoolean("host_fused"), true);
  EXPECT_EQ(steps[2].getAsObject()->getBoolean("host_fused"), false);
  // y, written by cs0 and read only by the copies, lives in the host's
  // staging area: its pieces on tiles 2..4, 72 bytes each, 64-byte aligned;
  // then w's 24 bytes.
  EXPECT_EQ(o->getInteger("host_staging_bytes"), 3 * 128 + 64);
  EXPECT_TRUE(o->getObject("memory"));
  llvm::json::Value trace = (*model)->traceJSON();
  const llvm::json::Array *events = trace.getAsObject()->getArray("traceEvents");
  ASSERT_TRUE(events);
  int complete = 0;
  double end = 0;
  for (const llvm::json::Value &e : *events)
    if (e.getAsObject()->getString("ph") == "X") {
      ++complete;
      end = std::max(end, *e.getAsObject()->getNumber("ts") +
                              *e.getAsObject()->getNumber("dur"));
    }
  EXPECT_GT(complete, 5);
  EXPECT_NEAR(end, cost.seconds((*model)->target().clockHz) * 1e6, 1e-6);
}

/// y [6,6] (variable 2) = a [6] (variable 0, the rows) times b [6]
/// (variable 1, the columns), one vertex of `cycles` per 2x2 piece.
ComputeSet outerProduct(int64_t cycles) {
  ComputeSet cs;
  cs.name = "outer";
  cs.loopRanges = {6, 6};
  cs.outputLoops = {0, 1};
  AccessMap rows, cols;
  rows.coeffs = {{1, 0}};
  rows.consts = {0};
  cols.coeffs = {{0, 1}};
  cols.consts = {0};
  cs.inputs = {{0, rows}, {1, cols}};
  cs.outputs = {2};
  cs.kernels = {{"vertex_outer_entry", {2, 2}, cycles, 200}};
  return cs;
}

TEST(IPUModel, VerticesSharingReceivedRegionsGetTheRightOnes) {
  // y [6,6] in 2x2 pieces on tiles 0..8; a [6] on tile 10, b [6] on tile
  // 11. Each region of a and of b goes to three vertices, so the fused step
  // keeps regions of both in its threads' scratch and copies each once per
  // chunk; vertices of a lot of cycles are chunks of their own, so every
  // chunk starts afresh.
  std::string object = compileIR(kKernelIR);
  ASSERT_FALSE(object.empty());
  for (int64_t cycles : {10, 1000000}) {
    ExecutableMetadata meta;
    meta.target = "ipu2";
    meta.tilesPerIPU = 16;
    meta.inputs = {{"a", DType::F32, {6}}, {"b", DType::F32, {6}}};
    meta.outputs = {{"y", DType::F32, {6, 6}}};
    MachineProgram &p = meta.program.emplace();
    p.variables.push_back(variable("a", {6}, VarKind::Input, TileMapping::singleTile({6}, 10)));
    p.variables.push_back(variable("b", {6}, VarKind::Input, TileMapping::singleTile({6}, 11)));
    p.variables.push_back(
        variable("y", {6, 6}, VarKind::Activation, grid({6, 6}, {2, 2}, {3, 1}, 0)));
    p.computeSets.push_back(outerProduct(cycles));
    p.steps = {{Step::Kind::Compute, 0}};
    p.inputs = {0, 1};
    p.outputs = {2};
    std::string path = tempPath();
    ASSERT_FALSE(static_cast<bool>(writeExecutable(path, meta, object, {})));
    auto exe = Executable::load(path);
    llvm::sys::fs::remove(path);
    ASSERT_TRUE(static_cast<bool>(exe)) << llvm::toString(exe.takeError());

    std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-1, 0.5, 7, 0.25, -3, 10};
    std::vector<float> y;
    for (float ai : a)
      for (float bj : b)
        y.push_back(ai * bj);
    for (unsigned threads : {1u, 2u, 4u}) {
      auto model = IPUModel::create(**exe, threads);
      ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
      for (int repeat = 0; repeat < 2; ++repeat) {
        auto out = (*model)->run({tensor({6}, a), tensor({6}, b)});
        ASSERT_TRUE(static_cast<bool>(out)) << llvm::toString(out.takeError());
        EXPECT_EQ(values((*out)[0]), y) << "cycles " << cycles << ", threads " << threads;
      }
      // Nine vertices each receive 8 bytes of a and 8 of b, whatever the
      // host copies.
      const StepCost &step = (*model)->cost().steps[1];
      EXPECT_EQ(step.exchangeBytes, 9 * 16);
      // The exchange broadcasts: a's tile sends each of its three regions
      // once for the three tiles reading it, 24 bytes in 3 regions (not 72
      // in 9), which is more than any tile receives (16 bytes in 2).
      const auto &target = (*model)->target();
      EXPECT_EQ(step.exchangeCycles, 24 / target.exchangeBytesPerCycle +
                                         3 * target.exchangeCyclesPerRegion +
                                         target.exchangeOverheadCycles);
    }
  }
}

TEST(IPUModel, MirroredWeightsAreLoadedIntoEveryCopyAndReadInPlace) {
  // y [6,6] = a (rows) x b (columns) in 2x2 pieces on tiles 0..8; a on
  // tile 10; the weight b in three pieces on tiles 0..2, mirrored onto the
  // rows of tiles 3..5 and 6..8: every vertex reads its columns of b on its
  // own tile, and receives only its rows of a.
  std::string object = compileIR(kKernelIR);
  ASSERT_FALSE(object.empty());
  ExecutableMetadata meta;
  meta.target = "ipu2";
  meta.tilesPerIPU = 16;
  meta.inputs = {{"a", DType::F32, {6}}};
  meta.outputs = {{"y", DType::F32, {6, 6}}};
  WeightInfo w;
  static_cast<TensorInfo &>(w) = {"b", DType::F32, {6}};
  meta.weights = {w};
  MachineProgram &p = meta.program.emplace();
  p.variables.push_back(variable("a", {6}, VarKind::Input, TileMapping::singleTile({6}, 10)));
  TileMapping mirrored = grid({6}, {2}, {1}, 0);
  mirrored.mirrorCounts = {3};
  mirrored.mirrorStrides = {3};
  p.variables.push_back(variable("b", {6}, VarKind::Weight, mirrored));
  p.variables[1].weight = 0;
  p.variables.push_back(
      variable("y", {6, 6}, VarKind::Activation, grid({6, 6}, {2, 2}, {3, 1}, 0)));
  p.computeSets.push_back(outerProduct(10));
  p.steps = {{Step::Kind::Compute, 0}};
  p.inputs = {0};
  p.outputs = {2};
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-1, 0.5, 7, 0.25, -3, 10};
  std::unique_ptr<Executable> exe = write(meta, object, b);
  ASSERT_TRUE(exe);
  std::vector<float> y;
  for (float ai : a)
    for (float bj : b)
      y.push_back(ai * bj);
  for (unsigned threads : {1u, 2u}) {
    auto model = IPUModel::create(*exe, threads);
    ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
    auto out = (*model)->run({tensor({6}, a)});
    ASSERT_TRUE(static_cast<bool>(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(values((*out)[0]), y) << "threads " << threads;
    // Nine vertices receive 8 bytes of a each, and nothing of b.
    EXPECT_EQ((*model)->cost().steps[1].exchangeBytes, 9 * 8);
  }
  // Every copy has its place in its tile's memory, as on the chip.
  auto plan = planMemory(p, 16, 638976);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  for (int64_t tile = 0; tile < 9; ++tile)
    EXPECT_EQ(plan->peakByCategory[tile].weights, 8) << tile;
  EXPECT_EQ(plan->peakByCategory[9].weights, 0);
}

TEST(IPUModel, VerticesReadPaddedViewsWithTheirPadding) {
  // x [4,6] in row pairs on tiles 0-1, read padded by a row above and below
  // and two columns on the left with 2.0 (a padded view: nothing stored),
  // seen with a leading unit dimension; y [6,8] = mul_rows(x padded, w) in
  // row pairs on tiles 2-4. The vertices receive x's rows and the padding.
  std::string object = compileIR(kKernelIR);
  ASSERT_FALSE(object.empty());
  ExecutableMetadata meta;
  meta.target = "ipu2";
  meta.tilesPerIPU = 8;
  meta.inputs = {{"x", DType::F32, {4, 6}}, {"w", DType::F32, {8}}};
  meta.outputs = {{"y", DType::F32, {6, 8}}};
  MachineProgram &p = meta.program.emplace();
  p.variables.push_back(variable("x", {4, 6}, VarKind::Input, grid({4, 6}, {2, 6}, {1, 0}, 0)));
  p.variables.push_back(variable("w", {8}, VarKind::Input, TileMapping::singleTile({8}, 6)));
  float two = 2.0f;
  uint32_t bits;
  std::memcpy(&bits, &two, 4);
  auto padded = makePaddedView(p, 0, {1, 2}, {1, 0}, bits);
  ASSERT_TRUE(static_cast<bool>(padded));
  p.variables.push_back(*padded); // 2: [6, 8]
  auto outer = makeView(p, 2, {6, 8, 1});
  ASSERT_TRUE(static_cast<bool>(outer));
  p.variables.push_back(*outer); // 3: [6, 8, 1]
  p.variables.push_back(variable("y", {6, 8}, VarKind::Activation, grid({6, 8}, {2, 8}, {1, 0}, 2)));
  ComputeSet cs;
  cs.name = "cs0";
  cs.loopRanges = {6, 8};
  cs.outputLoops = {0, 1};
  AccessMap padRows, cols;
  padRows.coeffs = {{1, 0}, {0, 1}, {0, 0}};
  padRows.consts = {0, 0, 0};
  cols.coeffs = {{0, 1}};
  cols.consts = {0};
  cs.inputs = {{3, padRows}, {1, cols}};
  cs.outputs = {4};
  cs.kernels = {{"vertex_padded_rows_entry", {2, 8}, 100, 300}};
  p.computeSets.push_back(cs);
  p.steps = {{Step::Kind::Compute, 0}};
  p.inputs = {0, 1};
  p.outputs = {4};
  std::string path = tempPath();
  ASSERT_FALSE(static_cast<bool>(writeExecutable(path, meta, object, {})));
  auto exe = Executable::load(path);
  llvm::sys::fs::remove(path);
  ASSERT_TRUE(static_cast<bool>(exe)) << llvm::toString(exe.takeError());

  std::vector<float> x(24), w = {1, -1, 2, 0.5, 3, -2, 0.25, 4};
  for (int i = 0; i < 24; ++i)
    x[i] = i - 5.5f;
  std::vector<float> y;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 8; ++j) {
      bool inside = i >= 1 && i < 5 && j >= 2;
      float xp = inside ? x[(i - 1) * 6 + (j - 2)] : 2.0f;
      // mul_rows adds its vertex's first row (loop offset 0) plus the row.
      y.push_back(xp * w[j] + i);
    }
  for (unsigned threads : {1u, 4u}) {
    auto model = IPUModel::create(**exe, threads);
    ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
    for (int repeat = 0; repeat < 2; ++repeat) {
      auto out = (*model)->run({tensor({4, 6}, x), tensor({8}, w)});
      ASSERT_TRUE(static_cast<bool>(out)) << llvm::toString(out.takeError());
      EXPECT_EQ(values((*out)[0]), y) << "threads " << threads;
    }
    // Only x's rows move: tile 2 receives padding and x row 0 (6 elements),
    // tiles 3 and 4 two rows and one row of x; w moves to each. Padding is
    // the receiving tile's, not exchanged.
    EXPECT_EQ((*model)->cost().steps[1].exchangeBytes, (6 + 12 + 6) * 4 + 3 * 32);
    // The vertex writes the padding it reads: tiles 2 and 4 read 10
    // elements of it, tile 3 four; the step takes as long as the slowest.
    const tessera::target::IPUTarget &target = (*model)->target();
    EXPECT_EQ((*model)->cost().steps[1].computeCycles, 100 + tessera::target::CostModel(target).fillCycles(10 * 4));
  }
}

TEST(IPUModel, RunsCopyOnlyProgramsWithoutCode) {
  // No kernels: no object code is needed at all.
  ExecutableMetadata meta;
  meta.target = "ipu1";
  meta.tilesPerIPU = 4;
  meta.numIPUs = 2;
  meta.inputs = {{"a", DType::F32, {4, 4}}};
  meta.outputs = {{"b", DType::F32, {4, 4}}};
  MachineProgram &p = meta.program.emplace();
  p.variables.push_back(variable("a", {4, 4}, VarKind::Input, grid({4, 4}, {1, 4}, {1, 0}, 0)));
  // b in column pairs on the second IPU's tiles 5 and 7.
  p.variables.push_back(variable("b", {4, 4}, VarKind::Activation, grid({4, 4}, {4, 2}, {0, 2}, 5)));
  p.copies.push_back({0, 1, Box{{0, 0}, {4, 4}}, {0, 0}, ""});
  p.steps = {{Step::Kind::Copy, 0}};
  p.inputs = {0};
  p.outputs = {1};
  std::string path = tempPath();
  ASSERT_FALSE(static_cast<bool>(writeExecutable(path, meta, "", {})));
  auto exe = Executable::load(path);
  llvm::sys::fs::remove(path);
  ASSERT_TRUE(static_cast<bool>(exe)) << llvm::toString(exe.takeError());
  auto model = IPUModel::create(**exe);
  ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
  std::vector<float> a(16);
  for (int i = 0; i < 16; ++i)
    a[i] = i;
  auto out = (*model)->run({tensor({4, 4}, a)});
  ASSERT_TRUE(static_cast<bool>(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(values((*out)[0]), a);
  // Everything crosses to the other IPU: 64 bytes over the links, and the
  // sync is the global one.
  const StepCost &copy = (*model)->cost().steps[1];
  EXPECT_EQ(copy.exchangeBytes, 64);
  EXPECT_EQ(copy.syncCycles, (*model)->target().globalSyncCycles);

  auto wrong = (*model)->run({tensor({4, 3}, std::vector<float>(12))});
  ASSERT_FALSE(static_cast<bool>(wrong));
  EXPECT_EQ(llvm::toString(wrong.takeError()), "input 'a' must be 4x4xf32, got 4x3xf32");
}

TEST(IPUModel, StagedActivationsKeepTheirBytesWhileLive) {
  // x -> a (step 0); a's rows 2-3 -> b (1), rows 0-1 -> c (2); b -> d (3),
  // c -> e (4). a, b and c live only within a run, all three at step 2:
  // on the host they share the staging area without sharing bytes (were
  // b placed over a, c would read b's rows instead of a's).
  ExecutableMetadata meta;
  meta.target = "ipu2";
  meta.tilesPerIPU = 8;
  meta.inputs = {{"x", DType::F32, {4, 4}}};
  meta.outputs = {{"d", DType::F32, {2, 4}}, {"e", DType::F32, {2, 4}}};
  MachineProgram &p = meta.program.emplace();
  auto single = [](const char *name, std::vector<int64_t> shape, VarKind kind, int64_t tile) {
    return variable(name, shape, kind, TileMapping::singleTile(shape, tile));
  };
  p.variables.push_back(single("x", {4, 4}, VarKind::Input, 0));
  p.variables.push_back(single("a", {4, 4}, VarKind::Activation, 1));
  p.variables.push_back(single("b", {2, 4}, VarKind::Activation, 2));
  p.variables.push_back(single("c", {2, 4}, VarKind::Activation, 3));
  p.variables.push_back(single("d", {2, 4}, VarKind::Activation, 4));
  p.variables.push_back(single("e", {2, 4}, VarKind::Activation, 5));
  p.copies.push_back({0, 1, Box{{0, 0}, {4, 4}}, {0, 0}, ""});
  p.copies.push_back({1, 2, Box{{2, 0}, {2, 4}}, {0, 0}, ""});
  p.copies.push_back({1, 3, Box{{0, 0}, {2, 4}}, {0, 0}, ""});
  p.copies.push_back({2, 4, Box{{0, 0}, {2, 4}}, {0, 0}, ""});
  p.copies.push_back({3, 5, Box{{0, 0}, {2, 4}}, {0, 0}, ""});
  for (int64_t i = 0; i < 5; ++i)
    p.steps.push_back({Step::Kind::Copy, i});
  p.inputs = {0};
  p.outputs = {4, 5};
  std::string path = tempPath();
  ASSERT_FALSE(static_cast<bool>(writeExecutable(path, meta, "", {})));
  auto exe = Executable::load(path);
  llvm::sys::fs::remove(path);
  ASSERT_TRUE(static_cast<bool>(exe)) << llvm::toString(exe.takeError());
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i)
    x[i] = i;
  std::vector<float> rows01(x.begin(), x.begin() + 8), rows23(x.begin() + 8, x.end());
  // TESSERA_NO_STAGING=1 keeps everything in tile memory, with the same
  // results.
  for (bool staging : {true, false}) {
    if (!staging)
      setenv("TESSERA_NO_STAGING", "1", 1);
    auto model = IPUModel::create(**exe);
    unsetenv("TESSERA_NO_STAGING");
    ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
    for (int repeat = 0; repeat < 2; ++repeat) {
      auto out = (*model)->run({tensor({4, 4}, x)});
      ASSERT_TRUE(static_cast<bool>(out)) << llvm::toString(out.takeError());
      EXPECT_EQ(values((*out)[0]), rows23);
      EXPECT_EQ(values((*out)[1]), rows01);
    }
    // a takes 64 bytes, b and c 32 each, 64-byte aligned; d and e are the
    // program's outputs, read after the run, so they stay in tile memory.
    llvm::json::Value profile = (*model)->profileJSON();
    EXPECT_EQ(profile.getAsObject()->getInteger("host_staging_bytes"), staging ? 192 : 0);
  }
}

TEST(IPUModel, ReportsWhatCannotRun) {
  ExecutableMetadata meta;
  meta.target = "ipu2";
  meta.inputs = {{"a", DType::F32, {200000}}};
  meta.outputs = {{"a", DType::F32, {200000}}};
  std::string path = tempPath();
  ASSERT_FALSE(static_cast<bool>(writeExecutable(path, meta, "", {})));
  auto exe = Executable::load(path);
  ASSERT_TRUE(static_cast<bool>(exe));
  auto none = IPUModel::create(**exe);
  ASSERT_FALSE(static_cast<bool>(none));
  EXPECT_EQ(llvm::toString(none.takeError()),
            "this executable has no IPU program (damaged or forged; recompile the model)");

  // 800 KB on one tile of 624 KiB.
  MachineProgram &p = meta.program.emplace();
  p.variables.push_back(
      variable("a", {200000}, VarKind::Input, TileMapping::singleTile({200000}, 3)));
  p.inputs = {0};
  p.outputs = {0};
  ASSERT_FALSE(static_cast<bool>(writeExecutable(path, meta, "", {})));
  exe = Executable::load(path);
  llvm::sys::fs::remove(path);
  ASSERT_TRUE(static_cast<bool>(exe));
  auto big = IPUModel::create(**exe);
  ASSERT_FALSE(static_cast<bool>(big));
  EXPECT_NE(llvm::toString(big.takeError())
                .find("out of tile memory: tile 3 needs 800,000 bytes, has 638,976 (624 KiB)"),
            std::string::npos);
}

TEST(HostRunner, RefusesASignatureThatDisagreesWithTheProgram) {
  // The host reference code writes the outputs it was compiled for: a
  // signature edited behind a valid checksum (an output dropped, shrunk or
  // retyped) is refused before any code runs, on both paths.
  struct Edit {
    const char *what;
    std::function<void(ExecutableMetadata &)> apply;
    const char *message;
  };
  std::vector<Edit> edits = {
      {"dropped output", [](ExecutableMetadata &m) { m.outputs.pop_back(); },
       "has 2 outputs but its signature 1"},
      {"smaller output", [](ExecutableMetadata &m) { m.outputs[0].shape = {4}; },
       "has output 'z' as 48xf32 but its signature says 4xf32"},
      {"retyped output", [](ExecutableMetadata &m) { m.outputs[1].dtype = DType::F64; },
       "has output 'q' as 4x3xf32 but its signature says 4x3xf64"},
      {"no program", [](ExecutableMetadata &m) { m.program.reset(); },
       "has no machine program"},
  };
  std::string object = compileIR(kKernelIR);
  for (const Edit &edit : edits) {
    Sample s = sample();
    edit.apply(s.meta);
    auto exe = write(s.meta, object, s.w);
    ASSERT_TRUE(exe) << edit.what;
    auto host = HostRunner::create(*exe, tessera::compileHostReference);
    ASSERT_FALSE(static_cast<bool>(host)) << edit.what;
    EXPECT_NE(llvm::toString(host.takeError()).find(edit.message), std::string::npos)
        << edit.what;
  }
}

TEST(IPUModel, KernelsAreTheExecutablesOwnVertexEntries) {
  // A missing kernel, a function of the process (a forged executable
  // calling abort), the host reference's entry, a function of the code
  // that is not a packed entry, and a signature (data) are all refused
  // before anything runs.
  for (std::string symbol : {"no_such_kernel", "abort", "tessera_main", "data",
                             "vertex_mul_rows_signature"}) {
    Sample s = sample();
    s.meta.program->computeSets[0].kernels[1].symbol = symbol;
    auto exe = write(s.meta, compileIR(kKernelIR), s.w);
    ASSERT_TRUE(exe);
    auto model = IPUModel::create(*exe);
    ASSERT_FALSE(static_cast<bool>(model)) << symbol;
    EXPECT_NE(llvm::toString(model.takeError())
                  .find("compute set 'cs0' names kernel '" + symbol +
                        "', which is not a vertex entry of the executable's code"),
              std::string::npos)
        << symbol;
  }
}

TEST(IPUModel, KernelsRunOnlyAsTheirCodesSignatureSays) {
  // Another kernel of the code (whose first input is a vector, not x's
  // rows), a kernel whose code records a different rank, and pieces larger
  // than a kernel's static sizes are each refused on load, naming what the
  // code declares.
  struct Forgery {
    const char *what;
    const char *ir;
    std::function<void(ComputeSet &)> edit;
    std::string message;
  };
  std::string staticIR = std::string(kKernelIR) + R"(
@vertex_static_signature = constant [13 x i64] [i64 2, i64 3, i64 32, i64 2, i64 3, i64 6, i64 32, i64 1, i64 6, i64 32, i64 2, i64 3, i64 6]
define void @vertex_static_entry(ptr %args) {
  call void @vertex_mul_rows_entry(ptr %args)
  ret void
}
@vertex_static_input_signature = constant [13 x i64] [i64 2, i64 3, i64 32, i64 2, i64 3, i64 6, i64 32, i64 1, i64 6, i64 32, i64 2, i64 -1, i64 -1]
define void @vertex_static_input_entry(ptr %args) {
  call void @vertex_mul_rows_entry(ptr %args)
  ret void
}
)";
  std::vector<Forgery> forgeries = {
      {"another kernel", kKernelIR,
       [](ComputeSet &cs) { cs.kernels[1].symbol = "vertex_outer_entry"; },
       "names kernel 'vertex_outer_entry', which takes buffer 0 of rank 1 and 32-bit elements "
       "for variable 'x' of rank 2"},
      {"a rank-3 kernel", kKernelIR,
       [](ComputeSet &cs) { cs.kernels[0].symbol = "vertex_padded_rows_entry"; },
       "takes buffer 0 of rank 3"},
      {"pieces larger than the kernel's", staticIR.c_str(),
       [](ComputeSet &cs) {
         for (Kernel &k : cs.kernels)
           k.symbol = "vertex_static_entry";
       },
       "which takes buffer 2 of shape 3x6, not a region of 2x6"},
      // Its outputs fit; the input region of a 2-row vertex does not.
      {"input regions larger than the kernel's", staticIR.c_str(),
       [](ComputeSet &cs) {
         for (Kernel &k : cs.kernels)
           k.symbol = "vertex_static_input_entry";
       },
       "compute set 'cs0': kernel 'vertex_static_input_entry' takes buffer 0 of shape 3x6, "
       "not a region of 2x6"},
  };
  for (const Forgery &f : forgeries) {
    Sample s = sample();
    f.edit(s.meta.program->computeSets[0]);
    auto exe = write(s.meta, compileIR(f.ir), s.w);
    ASSERT_TRUE(exe) << f.what;
    auto model = IPUModel::create(*exe);
    ASSERT_FALSE(static_cast<bool>(model)) << f.what;
    std::string message = llvm::toString(model.takeError());
    EXPECT_NE(message.find(f.message), std::string::npos) << f.what << ": " << message;
    EXPECT_NE(message.find("(damaged or forged; recompile the model)"), std::string::npos)
        << f.what;
  }
}

} // namespace

namespace {
// The host reference code travels as MLIR bytecode, lowered and compiled
// for this machine when a run asks for it: a valid module becomes an object
// defining its packed entry; anything else is an error that says to
// recompile, never a crash.
TEST(HostRunner, CompilesTheReferenceCodeAndRefusesDamage) {
  mlir::DialectRegistry registry;
  tessera::registerTesseraDialects(registry);
  mlir::MLIRContext context(registry);
  auto bytecodeOf = [&](llvm::StringRef text) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    EXPECT_TRUE(module) << text.str();
    std::string bytecode;
    llvm::raw_string_ostream os(bytecode);
    EXPECT_TRUE(mlir::succeeded(mlir::writeBytecodeToFile(module->getOperation(), os)));
    return bytecode;
  };
  std::string bytecode = bytecodeOf(R"(
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %e = tensor.empty() : tensor<4xf32>
      %y = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
      return %y : tensor<4xf32>
    })");

  auto object = tessera::compileHostReference(bytecode);
  ASSERT_TRUE(static_cast<bool>(object)) << llvm::toString(object.takeError());
  std::vector<std::string> defined = tessera::runtime::definedFunctions({*object});
  EXPECT_NE(std::find(defined.begin(), defined.end(), "tessera_main"), defined.end());

  std::string noMain = bytecodeOf("func.func @other() { return }");
  // A weight still a global: this compiler makes the weights arguments
  // before it stores the reference code, so it is not this compiler's.
  std::string notLowerable = bytecodeOf(R"(
    ml_program.global private @w(dense<1.0> : tensor<4xf32>) : tensor<4xf32>
    func.func @main() -> tensor<4xf32> {
      %w = ml_program.global_load_const @w : tensor<4xf32>
      return %w : tensor<4xf32>
    })");
  for (auto [damaged, why] :
       {std::pair{std::string("not bytecode"), "is not MLIR bytecode"},
        {bytecode.substr(0, bytecode.size() / 2), "does not parse"},
        {std::string(), "is not MLIR bytecode"},
        {noMain, "has no @main"},
        {notLowerable, "does not lower"}}) {
    auto bad = tessera::compileHostReference(damaged);
    ASSERT_FALSE(static_cast<bool>(bad)) << why;
    std::string message = llvm::toString(bad.takeError());
    EXPECT_NE(message.find(std::string("host reference code ") + why), std::string::npos)
        << message;
    EXPECT_NE(message.find("recompile the model"), std::string::npos) << message;
  }
}
} // namespace

TEST(ProgramCost, StateUpdatesMoveOnlyWhatIsNotInPlace) {
  // Two states of 16 f32 in pieces of 4 on tiles 0-3. s0's update is
  // computed in pieces of 8 on tiles 2 and 3: tile 2 sends elements 0-7
  // to tiles 0 and 1 (16 bytes, one region each), tile 3 sends 8-11 to
  // tile 2; 12-15 are already home. s1 is updated in place.
  MachineProgram p;
  auto add = [&](const char *name, VarKind kind, int64_t tiles, int64_t grainBytes,
                 int64_t firstTile) {
    Variable v;
    v.name = name;
    v.shape = {16};
    v.kind = kind;
    v.mapping = TileMapping::linear({16}, 4, tiles, grainBytes);
    v.mapping.firstTile = firstTile;
    p.variables.push_back(v);
    return static_cast<int64_t>(p.variables.size() - 1);
  };
  int64_t s0 = add("s0", VarKind::Input, 4, 16, 0);
  int64_t s1 = add("s1", VarKind::Input, 4, 16, 0);
  int64_t r0 = add("s0.update", VarKind::Activation, 2, 32, 2);
  p.inputs = {s0, s1};
  p.outputs = {r0, s1};
  ExecutableMetadata meta;
  for (int64_t i = 0; i < 2; ++i) {
    StateInfo s;
    s.name = i == 0 ? "s0" : "s1";
    s.shape = {16};
    s.dtype = DType::F32;
    s.update = i;
    meta.state.push_back(s);
  }
  auto target = tessera::target::makeTarget("ipu2", 1, 4);
  ASSERT_TRUE(static_cast<bool>(target)) << llvm::toString(target.takeError());
  auto updateStep = [&](const CostSummary &cost) -> const StepCost * {
    for (const StepCost &s : cost.steps)
      if (s.name == "state-update")
        return &s;
    return nullptr;
  };
  CostSummary cost = estimateProgramCost(meta, p, *target);
  const StepCost *update = updateStep(cost);
  ASSERT_NE(update, nullptr);
  EXPECT_EQ(update->exchangeBytes, 48);
  // The busiest tile is tile 2, sending 32 bytes in two regions.
  tessera::target::CostModel model(*target);
  EXPECT_EQ(update->exchangeCycles, model.exchangePhaseCycles(model.tileExchangeCycles(32, 2)));
  // Every update in place: no step at all.
  p.outputs = {s0, s1};
  EXPECT_EQ(updateStep(estimateProgramCost(meta, p, *target)), nullptr);
}
