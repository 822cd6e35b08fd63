//===- IPUAllocateMemory.cpp - place the program in tile memory ----------===//
//
// The allocation itself is the runtime's planMemory (the IPU model lays out
// its tile memories with the same plan); this pass runs it at compile time so
// a program that does not fit fails here, with the report, instead of when
// it is loaded.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/IPU/Transforms/Passes.h"
#include "tessera/Report/Report.h"
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

  /// The report page of the program: what it places, or for a program
  /// that does not fit (`oom`), what every tile would need. Returns an
  /// error when it cannot be written.
  llvm::Error writeReport(const runtime::MachineProgram &program,
                          const target::IPUTarget &target, const runtime::OutOfMemory *oom,
                          const std::string &message, runtime::PhasePool &pool) {
    report::ReportSource source;
    source.program = &program;
    source.target = target;
    source.outOfMemory = oom;
    source.error = message;
    if (auto loc = dyn_cast<FileLineColLoc>(getOperation().getLoc()))
      source.source = loc.getFilename().str();
    llvm::Expected<llvm::json::Value> data = report::buildReport(source, &pool);
    return data ? report::writeReport(reportDir, *data) : data.takeError();
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
      // On the location, not the op: a note dumping the module helps nobody.
      auto diag = mlir::emitError(module.getLoc(), message);
      if (!reportDir.empty() && llvm::StringRef(message).starts_with(runtime::kOutOfTileMemory)) {
        if (llvm::Error err = writeReport(*program, *target, &oom, message, pool))
          diag.attachNote() << "the report could not be written to '" << reportDir
                            << "': " << llvm::toString(std::move(err));
        else
          diag.attachNote() << "report written to '" << reportDir << "/"
                            << report::kReportPage << "'";
      }
      return signalPassFailure();
    }
    if (!reportDir.empty() && reportWhenItFits)
      if (llvm::Error err = writeReport(*program, *target, nullptr, "", pool))
        module.emitWarning("the report could not be written to '")
            << reportDir << "': " << llvm::toString(std::move(err));
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
