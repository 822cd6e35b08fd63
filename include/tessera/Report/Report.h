//===- Report.h - the report page: what the compiler did, to look at -*- C++ -*-===//
//
// A PopVision-style report of one program: tile memory by category (per
// tile, per IPU), liveness over the program's steps, the steps' estimated
// cycles with the plans chosen, a pipeline's timeline, and, after a run,
// the IPU model's host times. Built from the same sources as everything
// else (the memory plan, the program's cost estimate, the out-of-memory
// report), so its numbers are the compiler's; written as `report.json`
// (the data, which tessera.profile reads) and `report.html` (one
// self-contained page: the data inlined into a page compiled into this
// library). No MLIR here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_REPORT_REPORT_H
#define TESSERA_REPORT_REPORT_H

#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Target/IPUTarget.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace tessera::runtime {
class PhasePool;
} // namespace tessera::runtime

namespace tessera::report {

/// The version of report.json's layout (its "version" field).
constexpr int64_t kReportVersion = 1;
/// The files a report directory holds.
inline constexpr llvm::StringLiteral kReportData = "report.json";
inline constexpr llvm::StringLiteral kReportPage = "report.html";

/// What a report is made of.
struct ReportSource {
  const runtime::MachineProgram *program = nullptr;
  target::IPUTarget target;
  /// The executable's metadata: its signature (the host streams), batch,
  /// replicas, pipeline and training. Absent for a program that did not
  /// fit (no executable was made): its steps are costed without streams.
  const runtime::ExecutableMetadata *metadata = nullptr;
  /// The model or executable the report is of, as the user named it.
  std::string source;
  /// A program that does not fit: why (the compiler's error) and the
  /// out-of-memory report.
  const runtime::OutOfMemory *outOfMemory = nullptr;
  std::string error;
  /// After a run: the IPU model's profile (IPUModel::profileJSON), whose
  /// steps are the estimate's in the same order.
  const llvm::json::Value *execution = nullptr;
};

/// The report's data (report.json). Plans the program's memory itself (the
/// plan the compiler and the IPU model make); for a program that does not
/// fit, what each tile would need.
llvm::Expected<llvm::json::Value> buildReport(const ReportSource &source,
                                              runtime::PhasePool *pool = nullptr);

/// The report of the executable at `path` (its program, target and
/// metadata), with a run's profile when given.
llvm::Expected<llvm::json::Value>
buildExecutableReport(llvm::StringRef path, const llvm::json::Value *execution = nullptr,
                      runtime::PhasePool *pool = nullptr);

/// The page: report.html with `report` inlined.
std::string renderReportPage(const llvm::json::Value &report);

/// Writes `dir`/report.json and `dir`/report.html (each atomically;
/// creating `dir`).
llvm::Error writeReport(llvm::StringRef dir, const llvm::json::Value &report);

/// Reads `dir`/report.json (checking its format and version), for
/// tessera-report to write the page again.
llvm::Expected<llvm::json::Value> readReport(llvm::StringRef dir);

} // namespace tessera::report

#endif // TESSERA_REPORT_REPORT_H
