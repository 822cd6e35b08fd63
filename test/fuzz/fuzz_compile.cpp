//===- fuzz_compile.cpp - small generated models through the whole compile ===//
//
// tessera-fuzz-compile: each run generates a small ONNX model from a seeded
// generator (one to four ops of the families the importer lowers, shapes
// with dimensions of 0, 1 and a few more, initializers of matching or
// deliberately wrong shapes), and compiles it in-process through import,
// the graph passes, (half the time) a training step with a random loss,
// optimizer and precision, the lowering, tile planning, mapping and memory
// allocation on a target of four tiles. Every model must compile or be
// refused with an error diagnostic; a crash, an assertion, or a failure
// that says nothing is a failure, and `--save DIR` keeps the model being compiled (DIR/last.onnx)
// to reproduce it with tessera-compile. A run is a seed: `--seed S --runs 1`
// replays it. With `--differential N`, every N-th inference model that
// compiles is also built into an executable and run on the IPU model and on
// the host reference with the same random inputs: their outputs must agree
// within 1e-4 of each output's scale.
//
// It is a generator, not a coverage-guided fuzzer: the compiler's libraries
// are built by g++, which has no libFuzzer instrumentation (the importer's
// fuzzer, tessera-fuzz-onnx, recompiles the importer with clang for that).
//
//===----------------------------------------------------------------------===//

#include "tessera/Codegen/HostCodegen.h"
#include "tessera/Compiler/Compiler.h"
#include "tessera/Compiler/Pipelines.h"
#include "tessera/Compiler/Registration.h"
#include "tessera/Importers/ONNX/ONNXImporter.h"
#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/HostRunner.h"
#include "tessera/Runtime/IPUModel.h"
#include "tessera/Target/IPUTarget.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

using namespace tessera;
namespace cl = llvm::cl;

static cl::opt<uint64_t> firstSeed("seed", cl::desc("seed of the first run"), cl::init(1));
static cl::opt<uint64_t> runs("runs", cl::desc("models to compile"), cl::init(200));
static cl::opt<double> seconds("seconds", cl::desc("stop after this long (0: no limit)"),
                               cl::init(0));
static cl::opt<unsigned> differentialEvery(
    "differential",
    cl::desc("every N-th inference model that compiles is also built into an executable "
             "and run on the IPU model and the host reference, whose outputs must agree "
             "(0: never)"),
    cl::init(0));
static cl::opt<std::string> saveDir("save", cl::desc("keep the model being compiled in "
                                                     "DIR/last.onnx"),
                                    cl::init(""));

namespace {

/// The run being compiled, said if it crashes.
uint64_t currentSeed = 0;

/// One generated model: the ONNX graph grows op by op from input "x".
class Generator {
public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  onnx::ModelProto model() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.set_producer_name("tessera-fuzz-compile");
    m.add_opset_import()->set_version(17);
    graph_ = m.mutable_graph();
    graph_->set_name("fuzz");
    int rank = pick({2, 2, 3, 4});
    shape_.clear();
    for (int i = 0; i < rank; ++i)
      shape_.push_back(dim());
    addInput("x", shape_);
    current_ = "x";
    int ops = 1 + rng_() % 4;
    for (int i = 0; i < ops; ++i)
      addOp();
    onnx::ValueInfoProto *out = graph_->add_output();
    out->set_name(current_);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    return m;
  }

  bool chance(int percent) { return static_cast<int>(rng_() % 100) < percent; }
  template <typename T> T pick(std::initializer_list<T> values) {
    return *(values.begin() + rng_() % values.size());
  }

private:
  /// Mostly small sizes, often 0 and 1: the edges.
  int64_t dim() { return pick<int64_t>({0, 1, 1, 2, 3, 3, 4, 5, 7, 8}); }

  void addInput(const std::string &name, const std::vector<int64_t> &shape) {
    onnx::ValueInfoProto *in = graph_->add_input();
    in->set_name(name);
    auto *t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape)
      t->mutable_shape()->add_dim()->set_dim_value(d);
  }

  std::string weight(const std::vector<int64_t> &shape) {
    std::string name = "w" + std::to_string(counter_++);
    onnx::TensorProto *t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : shape) {
      t->add_dims(d);
      n *= d;
    }
    std::normal_distribution<float> normal(0, 1);
    for (int64_t i = 0; i < n; ++i)
      t->add_float_data(normal(rng_));
    return name;
  }

  std::string ints(const std::vector<int64_t> &values) {
    std::string name = "c" + std::to_string(counter_++);
    onnx::TensorProto *t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(values.size());
    for (int64_t v : values)
      t->add_int64_data(v);
    return name;
  }

  onnx::NodeProto *node(const std::string &op, std::vector<std::string> inputs) {
    onnx::NodeProto *n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(op + std::to_string(counter_));
    for (const std::string &in : inputs)
      n->add_input(in);
    current_ = "t" + std::to_string(counter_++);
    n->add_output(current_);
    return n;
  }

  void intAttribute(onnx::NodeProto *n, const std::string &name, int64_t v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  void intsAttribute(onnx::NodeProto *n, const std::string &name,
                     const std::vector<int64_t> &v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }

  /// One op reading `current_`. The shape is tracked where it is easy and
  /// guessed otherwise: a wrong guess makes a later op's shapes disagree,
  /// which the importer must refuse, not crash on.
  void addOp() {
    int64_t rank = shape_.size();
    auto axis = [&] { return rank ? static_cast<int64_t>(rng_() % rank) : 0; };
    switch (rng_() % 14) {
    case 0:
      node(pick<const char *>({"Relu", "Tanh", "Exp", "Neg", "Sigmoid", "Abs"}), {current_});
      break;
    case 1: { // broadcast binary with a weight of the trailing dims
      std::vector<int64_t> w(shape_.end() - std::min<int64_t>(rank, 1 + rng_() % 2),
                             shape_.end());
      if (chance(10) && !w.empty())
        w.back() = dim();
      node(pick<const char *>({"Add", "Mul", "Sub"}), {current_, weight(w)});
      break;
    }
    case 2: { // matmul by a weight [k, n]
      int64_t n = dim();
      int64_t k = rank ? shape_.back() : 1;
      if (chance(10))
        k = dim();
      node("MatMul", {current_, weight({k, n})});
      if (rank)
        shape_.back() = n;
      break;
    }
    case 3: {
      int64_t a = axis();
      auto *n = node(pick<const char *>({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceProd",
                                         "ReduceMin", "ReduceL2"}),
                     {current_});
      bool keep = chance(50);
      intAttribute(n, "keepdims", keep);
      if (n->op_type() == "ReduceSum")
        n->add_input(ints({a}));
      else
        intsAttribute(n, "axes", {a});
      if (rank) {
        if (keep)
          shape_[a] = 1;
        else
          shape_.erase(shape_.begin() + a);
      }
      break;
    }
    case 4:
      intAttribute(node(pick<const char *>({"Softmax", "LogSoftmax"}), {current_}), "axis",
                   rank ? -1 - static_cast<int64_t>(rng_() % rank) : -1);
      break;
    case 5: { // a permutation
      std::vector<int64_t> perm(rank);
      for (int64_t i = 0; i < rank; ++i)
        perm[i] = i;
      std::shuffle(perm.begin(), perm.end(), rng_);
      intsAttribute(node("Transpose", {current_}), "perm", perm);
      std::vector<int64_t> shape;
      for (int64_t p : perm)
        shape.push_back(shape_[p]);
      shape_ = shape;
      break;
    }
    case 6: { // flatten to two dims
      int64_t inner = 1;
      for (int64_t i = 1; i < rank; ++i)
        inner *= shape_[i];
      node("Reshape", {current_, ints({rank ? shape_[0] : 1, inner})});
      shape_ = {rank ? shape_[0] : 1, inner};
      break;
    }
    case 7: { // with itself
      int64_t a = axis();
      intAttribute(node("Concat", {current_, current_}), "axis", a);
      if (rank)
        shape_[a] *= 2;
      break;
    }
    case 8: { // a slice of one axis, possibly empty
      int64_t a = axis();
      int64_t size = rank ? shape_[a] : 1;
      int64_t start = size ? static_cast<int64_t>(rng_() % (size + 1)) : 0;
      int64_t end = start + static_cast<int64_t>(rng_() % 3);
      node("Slice", {current_, ints({start}), ints({end}), ints({a})});
      if (rank)
        shape_[a] = std::max<int64_t>(0, std::min(end, size) - start);
      break;
    }
    case 9: { // layer norm over the last axis
      int64_t last = rank ? shape_.back() : 1;
      intAttribute(node("LayerNormalization", {current_, weight({last}), weight({last})}),
                   "axis", -1);
      break;
    }
    case 10: { // a convolution or pooling over the last two axes (NCHW)
      if (rank != 4) {
        node("Relu", {current_});
        break;
      }
      int64_t kh = 1 + rng_() % 3, kw = 1 + rng_() % 3;
      if (chance(50)) {
        int64_t cout = dim();
        auto *n = node("Conv", {current_, weight({cout, shape_[1], kh, kw})});
        intsAttribute(n, "kernel_shape", {kh, kw});
        shape_[1] = cout;
      } else {
        auto *n = node(pick<const char *>({"MaxPool", "AveragePool"}), {current_});
        intsAttribute(n, "kernel_shape", {kh, kw});
      }
      shape_[2] = std::max<int64_t>(shape_[2] - kh + 1, 0);
      shape_[3] = std::max<int64_t>(shape_[3] - kw + 1, 0);
      break;
    }
    case 11: { // batch norm (inference) over axis 1
      if (rank < 2) {
        node("Relu", {current_});
        break;
      }
      int64_t c = shape_[1];
      node("BatchNormalization", {current_, weight({c}), weight({c}), weight({c}),
                                  weight({c})});
      // A negative variance: the importer's or the numbers' problem, not
      // a crash.
      break;
    }
    case 12: { // gather along an axis by constant indices (maybe none)
      int64_t a = axis();
      int64_t size = rank ? shape_[a] : 1;
      std::vector<int64_t> indices;
      for (int64_t i = 0, n = rng_() % 4; i < n; ++i)
        indices.push_back(size ? static_cast<int64_t>(rng_() % size) : 0);
      intAttribute(node("Gather", {current_, ints(indices)}), "axis", a);
      if (rank)
        shape_[a] = indices.size();
      break;
    }
    default: { // pad by a constant
      std::vector<int64_t> pads(2 * rank);
      for (int64_t &p : pads)
        p = rng_() % 2;
      node("Pad", {current_, ints(pads)});
      for (int64_t i = 0; i < rank; ++i)
        shape_[i] += pads[i] + pads[i + rank];
      break;
    }
    }
  }

  std::mt19937_64 rng_;
  onnx::GraphProto *graph_ = nullptr;
  std::vector<int64_t> shape_;
  std::string current_;
  int counter_ = 0;
};

/// Builds `module` (imported, not yet compiled) into an executable, runs
/// it on the IPU model and on the host reference with the same random
/// inputs, and says how their outputs differ (empty when they agree within
/// 1e-4 of each output's scale; a build the compiler refuses agrees).
std::string differential(mlir::ModuleOp module, CompileOptions options, uint64_t seed,
                         const std::string &dir) {
  llvm::Expected<HostCPU> cpu = resolveHostCPU("native");
  if (!cpu)
    return llvm::toString(cpu.takeError());
  options.compileTo = Phase::Executable;
  options.vectorBits = vectorBitsOf(*cpu);
  CompiledModel compiled;
  std::string path = dir + "/differential.tess";
  runtime::ExecutableWriter writer({path});
  if (llvm::Error err = writer.open())
    return llvm::toString(std::move(err));
  if (mlir::failed(compileModule(module, options, &compiled)))
    return "";
  runtime::ExecutableMetadata metadata;
  metadata.target = options.target.name;
  metadata.numIPUs = options.target.numIPUs;
  metadata.tilesPerIPU = options.target.tilesPerIPU;
  if (mlir::failed(writeExecutableFile(module, compiled, *cpu, metadata, writer)))
    return "";
  auto exe = runtime::Executable::load(path);
  if (!exe)
    return llvm::toString(exe.takeError());
  auto ipu = runtime::IPUModel::create(**exe);
  auto host = runtime::HostRunner::create(**exe, compileHostReference);
  if (!ipu || !host)
    return "cannot start a runner: " +
           (ipu ? llvm::toString(host.takeError()) : llvm::toString(ipu.takeError()));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<runtime::Tensor> inputs;
  for (const runtime::TensorInfo &info : (*exe)->metadata().inputs) {
    runtime::Tensor t = runtime::Tensor::zeros(info.dtype, info.shape);
    if (info.dtype == runtime::DType::F32)
      for (float &x : llvm::MutableArrayRef<float>(reinterpret_cast<float *>(t.data.data()),
                                                  t.numElements()))
        x = normal(rng);
    inputs.push_back(std::move(t));
  }
  auto a = (*ipu)->run(inputs);
  auto b = (*host)->run(inputs);
  if (!a || !b)
    return "a run failed: " + (a ? llvm::toString(b.takeError()) : llvm::toString(a.takeError()));
  for (size_t i = 0; i < a->size(); ++i) {
    const runtime::Tensor &x = (*a)[i], &y = (*b)[i];
    if (x.shape != y.shape || x.dtype != y.dtype)
      return "output " + std::to_string(i) + " differs in shape or type";
    if (x.dtype != runtime::DType::F32)
      continue;
    llvm::ArrayRef<float> u(reinterpret_cast<const float *>(x.data.data()), x.numElements());
    llvm::ArrayRef<float> v(reinterpret_cast<const float *>(y.data.data()), y.numElements());
    float scale = 1e-6f;
    for (float f : v)
      if (std::isfinite(f))
        scale = std::max(scale, std::fabs(f));
    for (size_t k = 0; k < u.size(); ++k) {
      bool same = (std::isnan(u[k]) && std::isnan(v[k])) || u[k] == v[k] ||
                  std::fabs(u[k] - v[k]) <= 1e-4f * scale;
      if (!same)
        return "output " + std::to_string(i) + " element " + std::to_string(k) +
               ": IPU model " + std::to_string(u[k]) + ", host reference " +
               std::to_string(v[k]);
    }
  }
  return "";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Small generated models through the whole compile\n");
  llvm::Expected<target::IPUTarget> target = target::makeTarget("ipu2", 1, 4);
  if (!target) {
    llvm::errs() << llvm::toString(target.takeError()) << "\n";
    return 1;
  }
  llvm::sys::AddSignalHandler(
      [](void *) {
        std::fprintf(stderr,
                     "tessera-fuzz-compile: crashed on seed %llu (replay it: --seed %llu "
                     "--runs 1 --save DIR, then tessera-compile DIR/last.onnx)\n",
                     static_cast<unsigned long long>(currentSeed),
                     static_cast<unsigned long long>(currentSeed));
      },
      nullptr);
  registerTesseraPasses();
  mlir::DialectRegistry registry;
  registerTesseraDialects(registry);
  auto start = std::chrono::steady_clock::now();
  uint64_t compiled = 0, refused = 0, trained = 0, done = 0, compared = 0;
  for (uint64_t run = 0; run < runs; ++run, ++done) {
    if (seconds > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds)
      break;
    uint64_t seed = currentSeed = firstSeed + run;
    Generator generator(seed);
    onnx::ModelProto model = generator.model();
    std::string bytes = model.SerializeAsString();
    if (!saveDir.empty())
      std::ofstream(saveDir + "/last.onnx", std::ios::binary) << bytes;

    mlir::MLIRContext context(registry);
    context.disableMultithreading();
    // Quiet, but counted: a model refused must be told why.
    int errors = 0;
    mlir::ScopedDiagnosticHandler quiet(&context, [&](mlir::Diagnostic &d) {
      errors += d.getSeverity() == mlir::DiagnosticSeverity::Error;
      return mlir::success();
    });
    onnx_importer::ImportOptions importOptions;
    CompileOptions options;
    options.compileTo = Phase::Ipu;
    options.target = *target;
    if (generator.chance(50)) {
      importOptions.training = true;
      options.training.enabled = true;
      options.training.loss = generator.pick<const char *>({"mse", "l1", "cross-entropy"});
      options.training.optimizer =
          generator.pick<const char *>({"sgd:lr=0.1,momentum=0.9", "adam", "rmsprop", "lamb"});
      if (generator.chance(25))
        options.graph.precision = "fp16.32";
      ++trained;
    }
    mlir::OwningOpRef<mlir::ModuleOp> module =
        onnx_importer::importONNXModel(bytes, &context, importOptions);
    // The imported module, kept for a comparison only when one may follow.
    bool mayCompare = differentialEvery && !options.training.enabled;
    mlir::OwningOpRef<mlir::ModuleOp> imported =
        module && mayCompare ? module->clone() : nullptr;
    if (module && mlir::succeeded(compileModule(*module, options))) {
      ++compiled;
      if (mayCompare && compiled % differentialEvery == 0) {
        ++compared;
        std::string why = differential(*imported, options, seed,
                                       saveDir.empty() ? std::string("/tmp") : saveDir);
        if (!why.empty()) {
          llvm::errs() << "tessera-fuzz-compile: seed " << seed
                       << ": the IPU model and the host reference disagree: " << why
                       << " (replay it: --seed " << seed << " --runs 1 --differential 1 --save DIR)\n";
          return 1;
        }
      }
    } else if (errors == 0) {
      llvm::errs() << "tessera-fuzz-compile: seed " << seed
                   << " failed without an error diagnostic (replay it: --seed " << seed
                   << " --runs 1 --save DIR)\n";
      return 1;
    } else {
      ++refused;
    }
  }
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  llvm::outs() << "tessera-fuzz-compile: " << done << " models from seed " << firstSeed << " ("
               << trained << " training steps): " << compiled << " compiled to the ipu phase, "
               << refused << " refused with diagnostics, no crash; " << compared
               << " run on the IPU model and the host reference, agreeing; "
               << llvm::format("%.1f", elapsed) << " s, "
               << llvm::format("%.1f", done ? 1000 * elapsed / done : 0.0) << " ms per model\n";
  return 0;
}
