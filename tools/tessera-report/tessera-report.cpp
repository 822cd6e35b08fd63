//===- tessera-report.cpp - write a report page ----------------------------===//
//
//   tessera-report model.tess -o DIR [--profile PROFILE_DIR]
//   tessera-report DIR
//
// The first writes the report of an executable (DIR/report.html and
// DIR/report.json), with the host times of a run tessera-run --profile
// recorded; the second writes the page of a saved report again (after an
// upgrade of Tessera, or to share it). A thin tool over TesseraReport.
//
//===----------------------------------------------------------------------===//

#include "tessera/Report/Report.h"
#include "tessera/Runtime/FileUtils.h"
#include "tessera/Runtime/PhasePool.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace tessera;

namespace {
cl::OptionCategory category("tessera-report options");
cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                               cl::desc("<model.tess, or a report directory>"),
                               cl::cat(category));
cl::opt<std::string> outputDir("o",
                               cl::desc("The report directory to write (for an executable)"),
                               cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string> profileDir(
    "profile",
    cl::desc("A directory tessera-run --profile wrote for this executable: its host times "
             "per step go into the report"),
    cl::value_desc("DIR"), cl::cat(category));

int error(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "tessera-report") << message << "\n";
  return 1;
}

llvm::Expected<llvm::json::Value> readProfile(llvm::StringRef dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "profile.json");
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read '" + path.str() + "': " +
                                                          buffer.getError().message());
  auto profile = llvm::json::parse((*buffer)->getBuffer());
  if (!profile)
    return llvm::createStringError("'" + path.str() +
                                   "' is not JSON: " + llvm::toString(profile.takeError()));
  const llvm::json::Object *o = profile->getAsObject();
  if (!o || !o->getArray("steps"))
    return llvm::createStringError("'" + path.str() +
                                   "' is not a profile tessera-run --profile wrote");
  return profile;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  runtime::installResourceErrorHandlers("tessera-report");
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Write a Tessera report page (report.html)\n\n"
                              "  tessera-report model.tess -o DIR [--profile PROFILE_DIR]\n"
                              "  tessera-report DIR   (the page of a saved report, again)\n");

  if (llvm::sys::fs::is_directory(inputPath)) {
    if (!outputDir.empty() || !profileDir.empty())
      return error("'" + inputPath + "' is a report directory: its page is written in it; "
                   "-o and --profile are for an executable");
    auto data = report::readReport(inputPath);
    if (!data)
      return error(llvm::toString(data.takeError()));
    if (auto err = report::writeReport(inputPath, *data))
      return error(llvm::toString(std::move(err)));
    llvm::outs() << "report written to " << inputPath << "/" << report::kReportPage << "\n";
    return 0;
  }
  if (outputDir.empty())
    return error("give the report directory to write: tessera-report " + inputPath + " -o DIR");
  std::optional<llvm::json::Value> profile;
  if (!profileDir.empty()) {
    auto read = readProfile(profileDir);
    if (!read)
      return error(llvm::toString(read.takeError()));
    profile = std::move(*read);
  }
  runtime::PhasePool pool(llvm::hardware_concurrency().compute_thread_count());
  auto data = report::buildExecutableReport(inputPath, profile ? &*profile : nullptr, &pool);
  if (!data)
    return error(llvm::toString(data.takeError()));
  if (auto err = report::writeReport(outputDir, *data))
    return error(llvm::toString(std::move(err)));
  llvm::outs() << "report written to " << outputDir << "/" << report::kReportPage << "\n";
  return 0;
}
