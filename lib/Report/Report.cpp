//===- Report.cpp - the report page's data, and the page ------------------===//
//
// report.json holds what the page draws, computed here once so that the
// page only lays it out: per-tile memory at each tile's peak (the memory
// plan's own figures; for a program that does not fit, what each tile
// would need, from the same plan made on unbounded tiles), every placed
// item with its live steps and its bytes per tile (run-length encoded over
// consecutive tiles, which keeps a ResNet-50 training step's report to a
// few megabytes), the whole chip's live bytes per step, and the estimate's
// steps with the plan each compute set runs.
//
//===----------------------------------------------------------------------===//

#include "tessera/Report/Report.h"

#include "tessera/Runtime/FileUtils.h"
#include "tessera/Runtime/PhasePool.h"
#include "tessera/Runtime/ProgramCost.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace json = llvm::json;
using namespace tessera;
using namespace tessera::runtime;

namespace {

// The page, with the marker its data replaces (ReportPage.inc is made from
// page/report.html at build time).
#include "ReportPage.inc"
constexpr llvm::StringLiteral kDataMarker = "/*TESSERA_REPORT_DATA*/";

/// Tiles of a program that does not fit, planned as if each had this many
/// bytes (offsets are 32-bit): what each would need.
constexpr int64_t kUnboundedTileBytes = int64_t(1) << 30;

json::Array toArray(llvm::ArrayRef<int64_t> values) {
  json::Array a;
  a.reserve(values.size());
  for (int64_t v : values)
    a.push_back(v);
  return a;
}

/// [[first tile, tiles, bytes on each], ...] over runs of consecutive
/// tiles holding the same bytes.
json::Array tileRuns(std::vector<std::pair<int64_t, int64_t>> perTile) {
  llvm::sort(perTile);
  json::Array runs;
  for (size_t i = 0; i < perTile.size();) {
    size_t j = i + 1;
    while (j < perTile.size() && perTile[j].first == perTile[j - 1].first + 1 &&
           perTile[j].second == perTile[i].second)
      ++j;
    runs.push_back(json::Array{perTile[i].first, int64_t(j - i), perTile[i].second});
    i = j;
  }
  return runs;
}

json::Array ipuList(uint64_t mask, int64_t numIPUs) {
  json::Array ipus;
  for (int64_t i = 0; i < numIPUs && i < 64; ++i)
    if (mask & (uint64_t(1) << i))
      ipus.push_back(i);
  return ipus;
}

/// How a compute set runs on the tiles: the plan ipu-plan-tiles chose
/// (#ipu.plan's mapping, which ipu-map-tiles applied), its vertices and
/// kernels.
json::Object planOf(const ComputeSet &cs, const MachineProgram &program) {
  const TileMapping &m = program.variables[cs.outputs[0]].mapping;
  int64_t vertices = 0;
  m.forEachPieceElements([&](int64_t, int64_t elements) { vertices += elements > 0; });
  json::Object plan{{"shape", toArray(m.shape)},
                    {"chunks", toArray(m.chunks)},
                    {"tile_strides", toArray(m.tileStrides)},
                    {"first_tile", m.firstTile},
                    {"loop_ranges", toArray(cs.loopRanges)},
                    {"vertices", vertices},
                    {"kernels", int64_t(cs.kernels.size())}};
  if (m.isMirrored()) {
    plan["mirror_counts"] = toArray(m.mirrorCounts);
    plan["mirror_strides"] = toArray(m.mirrorStrides);
  }
  return plan;
}

/// What part of a training step a step belongs to: the backward pass is
/// what graph-autodiff added (Step::backward), the update the optimizer's
/// ops (located "optimizer") and what runs once per weight update, the
/// loss what graph-build-loss added (located "loss"); the rest is forward.
struct PhaseOf {
  bool training = false;
  PhaseOf(const MachineProgram &program, const ExecutableMetadata *meta) {
    training = meta ? !meta->loss.empty() || !meta->optimizer.empty()
                    : llvm::any_of(program.steps, [](const Step &s) { return s.backward; });
  }
  llvm::StringRef operator()(const MachineProgram &program, int64_t t) const {
    const Step &step = program.steps[t];
    if (step.kind == Step::Kind::AllReduce)
      return "all-reduce";
    if (!training)
      return "forward";
    std::string location = program.stepLocation(t);
    if (location == "optimizer" || step.perUpdate)
      return "update";
    if (step.backward)
      return "backward";
    return location == "loss" ? "loss" : "forward";
  }
};

llvm::StringRef stepKind(const Step &step) {
  switch (step.kind) {
  case Step::Kind::Compute:
    return "compute";
  case Step::Kind::Copy:
    return "copy";
  case Step::Kind::AllReduce:
    return "all-reduce";
  }
  return "compute";
}

json::Object targetJSON(const target::IPUTarget &t) {
  return json::Object{{"name", t.name},
                      {"description", t.describe()},
                      {"num_ipus", t.numIPUs},
                      {"tiles_per_ipu", t.tilesPerIPU},
                      {"bytes_per_tile", t.bytesPerTile},
                      {"clock_hz", t.clockHz},
                      {"f32_macs_per_cycle", t.f32MacsPerCycle},
                      {"peak_flops_fp32", t.peakFlops(false)},
                      {"peak_flops_fp16", t.peakFlops(true)}};
}

} // namespace

llvm::Expected<json::Value> report::buildReport(const ReportSource &source, PhasePool *pool) {
  if (!source.program)
    return llvm::createStringError("the report needs a program");
  const MachineProgram &program = *source.program;
  const target::IPUTarget &target = source.target;
  const int64_t tiles = target.totalTiles();

  // The plan the compiler and the IPU model make; for a program that does
  // not fit, the same plan on unbounded tiles: what each tile would need.
  MemoryLayout layout;
  OutOfMemory oom;
  bool fits = true;
  llvm::Expected<MemoryPlan> plan =
      planMemory(program, tiles, target.bytesPerTile, &oom, pool, &layout);
  if (!plan) {
    std::string message = llvm::toString(plan.takeError());
    if (!llvm::StringRef(message).starts_with(kOutOfTileMemory))
      return llvm::createStringError("cannot plan the program's memory: " + message);
    fits = false;
    plan = planMemory(program, tiles, kUnboundedTileBytes, nullptr, pool, &layout);
    if (!plan)
      return llvm::createStringError("cannot plan what the program needs: " +
                                     llvm::toString(plan.takeError()));
  }
  const OutOfMemory *outOfMemory = source.outOfMemory ? source.outOfMemory
                                   : fits             ? nullptr
                                                      : &oom;

  // Items, and the chip's live bytes per step (a difference array over
  // their live ranges).
  const int64_t steps = program.steps.size();
  int64_t codeBytes = 0;
  for (int64_t c : layout.code)
    codeBytes += c;
  std::vector<int64_t> delta(steps + 1, 0);
  json::Array items;
  items.reserve(layout.items.size());
  for (const MemoryLayout::Item &item : layout.items) {
    int64_t bytes = 0;
    for (auto [tile, b] : item.perTile)
      bytes += b;
    delta[std::min(item.birth, steps)] += bytes;
    delta[std::min(item.death + 1, steps)] -= bytes;
    json::Object o{{"name", item.name},
                   {"category", item.category},
                   {"birth", item.birth},
                   {"death", item.death},
                   {"bytes", bytes},
                   {"tiles", tileRuns(item.perTile)}};
    if (item.variable >= 0) {
      const Variable &var = program.variables[item.variable];
      o["kind"] = varKindName(var.kind);
      o["dtype"] = dtypeName(var.dtype);
      o["shape"] = toArray(var.shape);
      if (var.copies > 1)
        o["copies"] = var.copies;
    } else if (item.computeSet >= 0) {
      const ComputeSet &cs = program.computeSets[item.computeSet];
      o["kind"] = "receive buffer";
      o["location"] = cs.location;
    }
    items.push_back(std::move(o));
  }
  json::Array chip;
  int64_t live = codeBytes, peakStep = 0, peakBytes = -1;
  for (int64_t t = 0; t < steps; ++t) {
    live += delta[t];
    chip.push_back(live);
    if (live > peakBytes) {
      peakBytes = live;
      peakStep = t;
    }
  }

  // The estimate: the executable's (with its host streams), or the
  // program's steps alone.
  ExecutableMetadata noMetadata;
  const ExecutableMetadata &meta = source.metadata ? *source.metadata : noMetadata;
  CostSummary cost = estimateProgramCost(meta, program, target, pool);
  PhaseOf phaseOf(program, source.metadata);
  const json::Array *executed = nullptr;
  if (source.execution)
    if (const json::Object *e = source.execution->getAsObject())
      executed = e->getArray("steps");
  json::Array stepsJSON;
  for (size_t i = 0; i < cost.steps.size(); ++i) {
    const StepCost &s = cost.steps[i];
    // cost.steps: stream-in, the program's steps, stream-out, updates.
    int64_t t = int64_t(i) - 1;
    bool inProgram = t >= 0 && t < steps;
    json::Object o{{"name", s.name},
                   {"location", s.location},
                   {"cycles", s.total()},
                   {"compute", s.computeCycles},
                   {"exchange", s.exchangeCycles},
                   {"sync", s.syncCycles},
                   {"all_reduce", s.allReduceCycles},
                   {"exchange_bytes", s.exchangeBytes},
                   {"tiles_used", s.tilesUsed},
                   {"macs", s.macs},
                   {"ipus", ipuList(s.ipus, target.numIPUs)}};
    if (s.perUpdate)
      o["per_update"] = true;
    if (inProgram) {
      const Step &step = program.steps[t];
      o["step"] = t;
      o["kind"] = stepKind(step);
      o["phase"] = phaseOf(program, t);
      if (step.kind == Step::Kind::Compute)
        o["plan"] = planOf(program.computeSets[step.index], program);
    } else {
      bool stream = s.name == "stream-in" || s.name == "stream-out";
      o["kind"] = stream ? "stream" : "state-update";
      o["phase"] = stream ? "host" : "update";
    }
    if (executed && i < executed->size())
      if (const json::Object *e = (*executed)[i].getAsObject()) {
        o["host_exchange_ms"] = e->getNumber("host_exchange_ms").value_or(0);
        o["host_compute_ms"] = e->getNumber("host_compute_ms").value_or(0);
      }
    stepsJSON.push_back(std::move(o));
  }

  int64_t batch =
      (!meta.inputs.empty() && !meta.inputs[0].shape.empty() ? meta.inputs[0].shape[0] : 1) *
      meta.replicas;
  double seconds = cost.seconds(target.clockHz);
  int64_t macs = 0;
  for (const StepCost &s : cost.steps)
    macs += s.perUpdate ? 0 : s.macs;
  json::Object estimate{{"cycles", cost.totalCycles},
                        {"seconds", seconds},
                        {"batch", batch},
                        {"compute", cost.computeCycles()},
                        {"exchange", cost.exchangeCycles()},
                        {"sync", cost.syncCycles()},
                        {"all_reduce", cost.allReduceCycles()},
                        {"update_cycles", cost.updateCycles},
                        {"fill_cycles", cost.fillCycles},
                        {"ipu_cycles", toArray(cost.ipuCycles)},
                        {"macs", macs}};
  if (seconds > 0)
    estimate["samples_per_second"] = batch / seconds;
  if (meta.gradientAccumulation > 1)
    estimate["cycles_per_update"] = cost.cyclesPerUpdate(meta.gradientAccumulation);

  // The memory report the IPU model's profile and --summary's line come
  // from (per tile at its peak, by category; the fullest tile and totals),
  // with the mean and whether it fits.
  json::Value memoryValue = memoryReportJSON(program, *plan);
  json::Object &memory = *memoryValue.getAsObject();
  memory["mean_bytes"] = tiles ? memory.getObject("total")->getInteger("bytes").value_or(0) / tiles
                               : 0;
  memory["fits"] = fits;

  json::Object result{
      {"format", "tessera-report"},
      {"version", kReportVersion},
      {"source", source.source},
      {"target", targetJSON(target)},
      {"program",
       json::Object{{"steps", steps},
                    {"variables", int64_t(program.variables.size())},
                    {"compute_sets", int64_t(program.computeSets.size())},
                    {"replicas", meta.replicas},
                    {"pipeline_stages", meta.pipelineStages},
                    {"gradient_accumulation", meta.gradientAccumulation},
                    {"device_iterations", meta.deviceIterations},
                    {"training", phaseOf.training},
                    {"loss", meta.loss},
                    {"optimizer", meta.optimizer}}},
      {"fits", fits},
      {"memory", std::move(memoryValue)},
      {"items", std::move(items)},
      {"liveness", json::Object{{"chip", std::move(chip)},
                                {"peak_step", peakStep},
                                {"peak_bytes", std::max<int64_t>(peakBytes, codeBytes)},
                                {"code_bytes", codeBytes}}},
      {"steps", std::move(stepsJSON)},
      {"estimate", std::move(estimate)}};
  if (outOfMemory) {
    result["out_of_memory"] = outOfMemory->toJSON();
    result["error"] = source.error.empty() ? outOfMemory->message() : source.error;
  }
  if (source.execution)
    if (const json::Object *e = source.execution->getAsObject()) {
      json::Object execution;
      for (llvm::StringRef key : {"host_exchange_ms", "host_compute_ms", "host_staging_bytes"})
        if (const json::Value *v = e->get(key))
          execution[key] = *v;
      result["execution"] = std::move(execution);
    }
  return json::Value(std::move(result));
}

llvm::Expected<json::Value> report::buildExecutableReport(llvm::StringRef path,
                                                          const json::Value *execution,
                                                          PhasePool *pool) {
  auto exe = Executable::load(path);
  if (!exe)
    return exe.takeError();
  const ExecutableMetadata &meta = (*exe)->metadata();
  if (!meta.program)
    return llvm::createStringError("'" + path.str() +
                                   "' has no machine program (compiled with an older "
                                   "Tessera?): compile it again for a report");
  auto target = target::makeTarget(meta.target, meta.numIPUs, meta.tilesPerIPU);
  if (!target)
    return target.takeError();
  ReportSource source;
  source.program = &*meta.program;
  source.target = *target;
  source.metadata = &meta;
  source.source = meta.source.empty() ? path.str() : meta.source;
  source.execution = execution;
  return buildReport(source, pool);
}

std::string report::renderReportPage(const json::Value &report) {
  std::string data;
  llvm::raw_string_ostream os(data);
  os << report;
  // Inside <script>: no '<' at all, so neither "</script>" nor "<!--"
  // can end or change it (\u003c is the same character to JSON.parse).
  std::string escaped;
  escaped.reserve(data.size());
  for (char c : data) {
    if (c == '<')
      escaped += "\\u003c";
    else
      escaped += c;
  }
  llvm::StringRef page(kReportPageText);
  size_t at = page.find(kDataMarker);
  return (page.take_front(at) + escaped + page.drop_front(at + kDataMarker.size())).str();
}

llvm::Error report::writeReport(llvm::StringRef dir, const json::Value &report) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "cannot create the report directory '" + dir.str() +
                                           "': " + ec.message());
  llvm::SmallString<256> dataPath(dir), pagePath(dir);
  llvm::sys::path::append(dataPath, kReportData);
  llvm::sys::path::append(pagePath, kReportPage);
  std::string data;
  llvm::raw_string_ostream(data) << report;
  if (llvm::Error err = writeFileAtomically(dataPath, data))
    return err;
  return writeFileAtomically(pagePath, renderReportPage(report));
}

llvm::Expected<json::Value> report::readReport(llvm::StringRef dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, kReportData);
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read '" + path.str() +
                                                          "': " + buffer.getError().message());
  llvm::Expected<json::Value> value = json::parse((*buffer)->getBuffer());
  if (!value)
    return llvm::createStringError("'" + path.str() + "' is not JSON: " +
                                   llvm::toString(value.takeError()));
  const json::Object *o = value->getAsObject();
  if (!o || o->getString("format") != "tessera-report")
    return llvm::createStringError("'" + path.str() + "' is not a Tessera report");
  if (o->getInteger("version") != kReportVersion)
    return llvm::createStringError(
        "'" + path.str() + "' is a report of version " +
        std::to_string(o->getInteger("version").value_or(0)) + "; this Tessera reads version " +
        std::to_string(kReportVersion) + " (make it again with tessera-report EXECUTABLE)");
  return value;
}
