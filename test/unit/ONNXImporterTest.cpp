//===- ONNXImporterTest.cpp - the importer's library interface -----------===//
//
// What is awkward to reach through tessera-compile: importing from bytes in
// memory (the Python module's path), diagnostics captured as values, and
// robustness against arbitrary bytes.
//
//===----------------------------------------------------------------------===//

#include "tessera/Compiler/Registration.h"
#include "tessera/Importers/ONNX/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <random>

using namespace tessera::onnx_importer;

namespace {

/// A two-node model: y = Relu(x + b), x of shape `dims` ("N" = symbolic).
std::string tinyModel(const std::vector<std::string> &dims, int opset = 13,
                      const std::string &op = "Relu") {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto *imp = model.add_opset_import();
  imp->set_version(opset);
  auto *g = model.mutable_graph();
  g->set_name("tiny");
  auto *in = g->add_input();
  in->set_name("x");
  auto *tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (const auto &d : dims) {
    auto *dim = tt->mutable_shape()->add_dim();
    if (d == "N")
      dim->set_dim_param("N");
    else
      dim->set_dim_value(std::stoll(d));
  }
  auto *b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(4);
  for (int i = 0; i < 4; ++i)
    b->add_float_data(static_cast<float>(i));
  auto *add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add0");
  add->add_input("x");
  add->add_input("b");
  add->add_output("s");
  auto *relu = g->add_node();
  relu->set_op_type(op);
  relu->set_name("act0");
  relu->add_input("s");
  relu->add_output("y");
  g->add_output()->set_name("y");
  return model.SerializeAsString();
}

struct ImportResult {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string diagnostics;
};

class ImporterTest : public ::testing::Test {
protected:
  ImporterTest() {
    tessera::registerTesseraDialects(registry);
    context = std::make_unique<mlir::MLIRContext>(registry);
  }
  ImportResult import(const std::string &bytes, ImportOptions options = {}) {
    ImportResult r;
    mlir::ScopedDiagnosticHandler handler(
        context.get(), [&](mlir::Diagnostic &d) {
          r.diagnostics += d.str() + "\n";
          for (auto &note : d.getNotes())
            r.diagnostics += "note: " + note.str() + "\n";
          return mlir::success();
        });
    r.module = importONNXModel(bytes, context.get(), options);
    return r;
  }
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> context;
};

TEST_F(ImporterTest, ImportsFromMemory) {
  ImportResult r = import(tinyModel({"2", "4"}));
  ASSERT_TRUE(r.module) << r.diagnostics;
  auto main = r.module->lookupSymbol<mlir::func::FuncOp>("main");
  ASSERT_TRUE(main);
  EXPECT_EQ(main.getNumArguments(), 1u);
  auto result = mlir::cast<mlir::RankedTensorType>(main.getResultTypes()[0]);
  EXPECT_EQ(result.getShape(), (llvm::ArrayRef<int64_t>{2, 4}));
}

TEST_F(ImporterTest, SymbolicDimNeedsInputShape) {
  ImportResult r = import(tinyModel({"N", "4"}));
  EXPECT_FALSE(r.module);
  EXPECT_NE(r.diagnostics.find("symbolic dims (dim 0 'N')"), std::string::npos)
      << r.diagnostics;
  EXPECT_NE(r.diagnostics.find("--input-shape x=Nx4"), std::string::npos)
      << r.diagnostics;

  ImportOptions options;
  ASSERT_EQ(parseInputShape("x=3x4", options), "");
  ImportResult fixed = import(tinyModel({"N", "4"}), options);
  ASSERT_TRUE(fixed.module) << fixed.diagnostics;
}

TEST_F(ImporterTest, InputShapeConflictsAreErrors) {
  ImportOptions options;
  ASSERT_EQ(parseInputShape("x=2x5", options), "");
  ImportResult r = import(tinyModel({"N", "4"}), options);
  EXPECT_FALSE(r.module);
  EXPECT_NE(r.diagnostics.find("the model fixes it to 4"), std::string::npos)
      << r.diagnostics;
}

TEST_F(ImporterTest, ParseInputShapeRejectsGarbage) {
  ImportOptions options;
  EXPECT_NE(parseInputShape("x", options), "");
  EXPECT_NE(parseInputShape("x=1xax3", options), "");
  EXPECT_NE(parseInputShape("x=-1", options), "");
  EXPECT_EQ(parseInputShape("x=1x3x224x224", options), "");
  EXPECT_EQ(options.inputShapes["x"], (std::vector<int64_t>{1, 3, 224, 224}));
}

TEST_F(ImporterTest, BroadcastErrorNamesTheNode) {
  ImportResult r = import(tinyModel({"2", "5"}));
  EXPECT_FALSE(r.module);
  EXPECT_NE(r.diagnostics.find("do not broadcast: 2x5 vs 4"), std::string::npos)
      << r.diagnostics;
  EXPECT_NE(r.diagnostics.find("while importing ONNX node 'add0' (Add, opset 13)"),
            std::string::npos)
      << r.diagnostics;
}

TEST_F(ImporterTest, UnsupportedOperatorIsListed) {
  ImportResult r = import(tinyModel({"2", "4"}, 13, "FancyOp"));
  EXPECT_FALSE(r.module);
  EXPECT_NE(r.diagnostics.find("FancyOp in 1 node: 'act0'"), std::string::npos)
      << r.diagnostics;
}

TEST_F(ImporterTest, WrongArityIsAnError) {
  // One input each, checked against the operator's schema before anything
  // reads the node: BatchNormalization needs five, Conv and Gemm two or
  // three; Einsum takes one but needs its equation.
  const std::pair<const char *, const char *> cases[] = {
      {"BatchNormalization", "BatchNormalization node 'act0' has 1 inputs; opset 13 takes 5"},
      {"Conv", "Conv node 'act0' has 1 inputs; opset 13 takes 2 to 3"},
      {"Gemm", "Gemm node 'act0' has 1 inputs; opset 13 takes 2 to 3"},
      {"Einsum", "Einsum node 'act0' lacks its required attribute 'equation'"}};
  for (auto [op, message] : cases) {
    ImportResult r = import(tinyModel({"2", "4"}, 13, op));
    EXPECT_FALSE(r.module) << op;
    EXPECT_NE(r.diagnostics.find(message), std::string::npos)
        << op << ": " << r.diagnostics;
  }
}

TEST_F(ImporterTest, OpsetOutOfRange) {
  ImportResult r = import(tinyModel({"2", "4"}, 21));
  EXPECT_FALSE(r.module);
  EXPECT_NE(r.diagnostics.find("opset 21; Tessera imports opsets 6 to 17"),
            std::string::npos)
      << r.diagnostics;
}

/// Truncations and random corruptions of a valid model never crash; each
/// either imports or reports a diagnostic.
TEST_F(ImporterTest, DamagedBytesNeverCrash) {
  std::string good = tinyModel({"2", "4"});
  for (size_t cut = 0; cut < good.size(); cut += 3) {
    ImportResult r = import(good.substr(0, cut));
    if (!r.module) {
      EXPECT_FALSE(r.diagnostics.empty()) << "cut at " << cut;
    }
  }
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k)
      bad[rng() % bad.size()] = static_cast<char>(rng());
    ImportResult r = import(bad);
    if (!r.module) {
      EXPECT_FALSE(r.diagnostics.empty()) << "trial " << trial;
    }
  }
}

TEST(SupportedOperators, CoverTheClassificationModels) {
  std::vector<std::string> ops = supportedOperators(17);
  for (const char *op :
       {"Conv", "Gemm", "MatMul", "BatchNormalization", "MaxPool",
        "AveragePool", "GlobalAveragePool", "Relu", "Clip", "Sigmoid",
        "HardSwish", "Erf", "Softmax", "LayerNormalization", "Gather",
        "Reshape", "Shape", "Transpose", "Concat", "Slice", "Unsqueeze",
        "Squeeze", "Cast", "Where", "Expand", "Constant", "ConstantOfShape",
        "Flatten", "Pad", "Resize", "ReduceMean", "Einsum", "ScatterND"})
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
  // LayerNormalization arrived in opset 17.
  std::vector<std::string> old = supportedOperators(13);
  EXPECT_EQ(std::find(old.begin(), old.end(), "LayerNormalization"), old.end());
}

} // namespace

namespace {
// TensorProtos found by the `pb` fuzzer: the typed field of another type
// (an i64 tensor's int32_data was read 8 bytes per 4-byte entry) and dims
// whose element count is negative or past any IPU system are errors.
TEST(ONNXImporter, TensorProtoReadsOnlyTheFieldOfItsType) {
  using tessera::onnx_importer::ConstantInput;
  using tessera::onnx_importer::parseTensorProto;
  auto parse = [](const onnx::TensorProto &t, ConstantInput &value) {
    return parseTensorProto(t.SerializeAsString(), "'t.pb'", value);
  };
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(3);
  for (int v : {1, 2, 3})
    t.add_int32_data(v);
  ConstantInput value;
  EXPECT_EQ(parse(t, value), "'t.pb' holds 0 bytes; its shape needs 24");
  t.clear_int32_data();
  for (int64_t v : {1, 2, 3})
    t.add_int64_data(v);
  EXPECT_EQ(parse(t, value), "");
  EXPECT_EQ(value.elementType, "i64");
  EXPECT_EQ(value.data.size(), 24u);
  t.set_dims(0, -3);
  EXPECT_NE(parse(t, value).find("negative dimension or more elements"), std::string::npos);
  t.set_dims(0, int64_t(1) << 40);
  EXPECT_NE(parse(t, value).find("more elements than any IPU system holds"), std::string::npos);
}
} // namespace
