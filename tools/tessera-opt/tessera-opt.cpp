//===- tessera-opt.cpp - run Tessera passes on .mlir files ---------------===//
//
// mlir-opt for Tessera: the graph dialect, its passes and pipelines, and the
// upstream dialects and passes they use (not the whole of MLIR).
//
//===----------------------------------------------------------------------===//

#include "tessera/Compiler/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  tessera::registerTesseraDialects(registry);
  tessera::registerTesseraPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Tessera optimizer driver\n", registry));
}
