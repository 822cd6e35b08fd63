//===- IPUAllocateMemory.cpp - place the program in tile memory ----------===//
//
// The allocation itself is the runtime's planMemory (the IPU model lays out
// its tile memories with the same plan); this pass runs it at compile time so
// a program that does not fit fails here, with the report, instead of when
// it is loaded.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/IPU/Transforms/Passes.h"
#include "tessera/Runtime/FileUtils.h"
#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Runtime/PhasePool.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

namespace tessera::ipu {
#define GEN_PASS_DEF_IPUALLOCATEMEMORY
#include "tessera/Dialect/IPU/Transforms/Passes.h.inc"
} // namespace tessera::ipu

using namespace mlir;
using namespace tessera;

namespace {

struct IPUAllocateMemory
    : tessera::ipu::impl::IPUAllocateMemoryBase<IPUAllocateMemory> {
  using IPUAllocateMemoryBase::IPUAllocateMemoryBase;

  void writeReport(const llvm::json::Value &report) {
    if (reportPath.empty())
      return;
    std::string text;
    llvm::raw_string_ostream(text) << llvm::formatv("{0:2}", report);
    if (llvm::Error err = runtime::writeFileAtomically(reportPath, text))
      getOperation().emitWarning("could not write the memory report: ")
          << llvm::toString(std::move(err));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<target::IPUTarget> target = ipu::getTarget(module);
    if (failed(target))
      return signalPassFailure();
    FailureOr<runtime::MachineProgram> program = ipu::exportMachineProgram(module);
    if (failed(program))
      return signalPassFailure();
    runtime::OutOfMemory oom;
    runtime::PhasePool pool(getContext().isMultithreadingEnabled()
                                ? llvm::hardware_concurrency().compute_thread_count()
                                : 1);
    auto plan = runtime::planMemory(*program, target->totalTiles(),
                                    target->bytesPerTile, &oom, &pool);
    if (!plan) {
      std::string message = llvm::toString(plan.takeError());
      writeReport(llvm::json::Object{{"fits", false}, {"out_of_memory", oom.toJSON()}});
      // On the location, not the op: a note dumping the module helps nobody.
      auto diag = mlir::emitError(module.getLoc(), message);
      if (!reportPath.empty())
        diag.attachNote() << "memory report written to '" << reportPath << "'";
      return signalPassFailure();
    }
    writeReport(runtime::memoryReportJSON(*program, *plan));
    int64_t peak = 0, peakTile = 0;
    for (auto [tile, bytes] : llvm::enumerate(plan->peakBytes))
      if (bytes > peak) {
        peak = bytes;
        peakTile = tile;
      }
    auto main = module.lookupSymbol<func::FuncOp>("main");
    Builder b(module.getContext());
    main->setAttr("ipu.memory",
                  b.getDictionaryAttr({b.getNamedAttr("peak_bytes", b.getI64IntegerAttr(peak)),
                                       b.getNamedAttr("peak_tile", b.getI64IntegerAttr(peakTile)),
                                       b.getNamedAttr("bytes_per_tile",
                                                      b.getI64IntegerAttr(target->bytesPerTile))}));
  }
};

} // namespace
