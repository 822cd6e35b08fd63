//===- Registration.cpp - what Tessera's tools register ------------------===//

#include "tessera/Compiler/Registration.h"
#include "tessera/Compiler/Pipelines.h"
#include "tessera/Codegen/HostCodegen.h"
#include "tessera/Codegen/Passes.h"
#include "tessera/Conversion/Passes.h"
#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/Transforms/Passes.h"
#include "tessera/Dialect/IPU/IR/IPU.h"
#include "tessera/Dialect/IPU/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/TilingInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace tessera {

void registerTesseraDialects(mlir::DialectRegistry &registry) {
  registry.insert<graph::GraphDialect, ipu::IPUDialect, mlir::func::FuncDialect,
                  mlir::ml_program::MLProgramDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::linalg::LinalgDialect,
                  mlir::math::MathDialect>();
  registerCodegenDialects(registry);
  // ipu-map-tiles outlines vertices through linalg's TilingInterface.
  mlir::linalg::registerTilingInterfaceExternalModels(registry);
}

namespace {
struct GraphPipelineCLOptions
    : public mlir::PassPipelineOptions<GraphPipelineCLOptions> {
  Option<bool> requireStaticShapes{
      *this, "require-static-shapes",
      llvm::cl::desc("Fail unless every shape is static"),
      llvm::cl::init(true)};
};
struct IPUPipelineCLOptions
    : public mlir::PassPipelineOptions<IPUPipelineCLOptions> {
  Option<double> availableMemoryProportion{
      *this, "available-memory-proportion",
      llvm::cl::desc("Share of tile memory a vertex's buffers may take"),
      llvm::cl::init(0.6)};
  Option<std::string> report{
      *this, "report",
      llvm::cl::desc("Write the report page to this directory (also when the program does not fit)")};
};
} // namespace

void registerTesseraPasses() {
  static bool registered = [] {
    graph::registerGraphPasses();
    ipu::registerIPUPasses();
    registerConversionPasses();
    registerCodegenPasses();
    mlir::registerCanonicalizerPass();
    mlir::registerCSEPass();
    mlir::registerSymbolDCEPass();
    mlir::registerInlinerPass();
    mlir::PassPipelineRegistration<GraphPipelineCLOptions>(
        "tessera-graph-pipeline",
        "The input -> graph phase of tessera-compile",
        [](mlir::OpPassManager &pm, const GraphPipelineCLOptions &cl) {
          GraphPipelineOptions options;
          options.requireStaticShapes = cl.requireStaticShapes;
          buildGraphPipeline(pm, options);
        });
    mlir::PassPipelineRegistration<>(
        "tessera-linalg-pipeline", "The graph -> linalg phase of tessera-compile",
        [](mlir::OpPassManager &pm) { buildLinalgPipeline(pm); });
    mlir::PassPipelineRegistration<IPUPipelineCLOptions>(
        "tessera-ipu-pipeline",
        "The linalg -> ipu phase of tessera-compile (needs an #ipu.target)",
        [](mlir::OpPassManager &pm, const IPUPipelineCLOptions &cl) {
          IPUPipelineOptions options;
          options.availableMemoryProportion = cl.availableMemoryProportion;
          options.reportDir = cl.report;
          buildIPUPipeline(pm, options);
        });
    mlir::PassPipelineRegistration<>(
        "tessera-host-lowering-pipeline",
        "The linalg -> llvm phase of tessera-compile (host reference code)",
        [](mlir::OpPassManager &pm) { buildHostLoweringPipeline(pm); });
    return true;
  }();
  (void)registered;
}

} // namespace tessera
