//===- IPUModel.cpp - execute a tile-mapped program on a software IPU ----===//
//
// Tile memories are one anonymous mapping of numTiles * bytesPerTile bytes
// (reserved, not committed: pages are touched only where the plan places
// data). Every address a step touches comes from the memory plan and the
// pieces' run decomposition (forEachRun), the same functions the compiler
// planned with.
//
// A compute step is the exchange phase (each vertex gathers the operand
// regions it cannot read in place into its receive buffer), a barrier, and
// the compute phase (each vertex calls its kernel on its tile's buffers).
// Vertices on different tiles write disjoint memory, so both phases run on
// a thread pool without locks. A copy step writes each destination run from
// the matching source runs, also in parallel.
//
// Cycles depend only on the program and the target, so they are counted once
// in create(), not per run.
//
//===----------------------------------------------------------------------===//

#include "tessera/Runtime/IPUModel.h"

#include "tessera/Runtime/JIT.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/Errno.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using llvm::Expected;
namespace json = llvm::json;

namespace tessera::runtime {

namespace {

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

Box wholeBox(const std::vector<int64_t> &shape) {
  return Box{std::vector<int64_t>(shape.size(), 0), shape};
}

/// A strided memref descriptor as MLIR's C interface lays it out:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}, row-major.
void appendDescriptor(std::vector<int64_t> &d, const void *data,
                      llvm::ArrayRef<int64_t> sizes) {
  d.push_back(reinterpret_cast<int64_t>(data));
  d.push_back(reinterpret_cast<int64_t>(data));
  d.push_back(0);
  d.insert(d.end(), sizes.begin(), sizes.end());
  size_t first = d.size();
  d.resize(first + sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i)
    d[first + i] = d[first + i + 1] * sizes[i + 1];
}

/// One piece of a copy: `count` elements from a source piece to a
/// destination piece.
struct Segment {
  int64_t dstTile, dstOffset, srcTile, srcOffset, count;
};

/// Matches the destination runs of a copy with its source runs: both walk
/// the same region shape in row-major order, so region offsets correspond.
std::vector<Segment> copySegments(const MachineProgram &p, const Copy &c) {
  std::vector<Run> src, dst;
  forEachRun(p, c.src, c.srcRegion, [&](const Run &r) { src.push_back(r); });
  forEachRun(p, c.dst, Box{c.dstOffsets, c.srcRegion.sizes},
             [&](const Run &r) { dst.push_back(r); });
  std::vector<Segment> segments;
  size_t s = 0;
  for (const Run &d : dst) {
    int64_t pos = d.regionOffset, end = d.regionOffset + d.count;
    while (pos < end) {
      while (src[s].regionOffset + src[s].count <= pos)
        ++s;
      int64_t n = std::min(end, src[s].regionOffset + src[s].count) - pos;
      segments.push_back({d.tile, d.pieceOffset + (pos - d.regionOffset), src[s].tile,
                          src[s].pieceOffset + (pos - src[s].regionOffset), n});
      pos += n;
    }
  }
  return segments;
}

/// Bytes each tile and each IPU sends and receives in one exchange phase.
struct ExchangeCounter {
  const target::IPUTarget &target;
  std::vector<int64_t> sent, received, ipuOut, ipuIn;
  int64_t total = 0;

  explicit ExchangeCounter(const target::IPUTarget &t)
      : target(t), sent(t.totalTiles()), received(t.totalTiles()), ipuOut(t.numIPUs),
        ipuIn(t.numIPUs) {}
  void move(int64_t from, int64_t to, int64_t bytes) {
    if (from == to || bytes == 0)
      return;
    sent[from] += bytes;
    received[to] += bytes;
    total += bytes;
    int64_t a = from / target.tilesPerIPU, b = to / target.tilesPerIPU;
    if (a != b) {
      ipuOut[a] += bytes;
      ipuIn[b] += bytes;
    }
  }
  /// The slowest tile's traffic at the exchange rate, or the busiest IPU's
  /// links if slower; plus the phase's fixed cost. Nothing moved: free.
  int64_t cycles() const {
    if (total == 0)
      return 0;
    int64_t busiest = 0;
    for (size_t t = 0; t < sent.size(); ++t)
      busiest = std::max({busiest, sent[t], received[t]});
    double c = std::ceil(double(busiest) / target.exchangeBytesPerCycle);
    double linkBytesPerCycle = target.ipuLinkBytesPerSecond / target.clockHz;
    for (size_t i = 0; i < ipuOut.size(); ++i)
      if (linkBytesPerCycle > 0)
        c = std::max(c, std::ceil(std::max(ipuOut[i], ipuIn[i]) / linkBytesPerCycle));
    return static_cast<int64_t>(c) + target.exchangeOverheadCycles;
  }
};

} // namespace

struct IPUModel::Impl {
  const Executable &executable;
  MachineProgram program;
  target::IPUTarget target;
  MemoryPlan plan;
  char *memory = nullptr;
  size_t memoryBytes = 0;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  llvm::StringMap<PackedEntry> entries;
  CostSummary cost;
  std::unique_ptr<llvm::DefaultThreadPool> pool;

  explicit Impl(const Executable &e) : executable(e) {}
  ~Impl() {
    if (memory)
      munmap(memory, memoryBytes);
  }

  char *address(int64_t tile, int64_t offset) {
    return memory + tile * plan.bytesPerTile + offset;
  }
  /// Where element `pieceOffset` of `var`'s piece on `tile` is stored.
  char *element(int64_t var, int64_t tile, int64_t pieceOffset) {
    int64_t s = program.storageIndex(var);
    return address(tile, plan.variableOffset[s]) +
           pieceOffset * program.variables[var].elementBytes();
  }
  /// Host buffer (region row-major) -> tiles.
  void scatter(int64_t var, const Box &region, const char *from) {
    int64_t eb = program.variables[var].elementBytes();
    Box inStorage;
    if (forEachOverlap(program, var, region, inStorage, [&](const Overlap &o) {
          copyBox(from, inStorage, element(var, o.tile, 0), o.piece, o.part, eb);
        }))
      return;
    forEachRun(program, var, region, [&](const Run &r) {
      std::memcpy(element(var, r.tile, r.pieceOffset), from + r.regionOffset * eb,
                  r.count * eb);
    });
  }
  /// Tiles -> a buffer holding the region row-major.
  void gather(int64_t var, const Box &region, char *to) {
    int64_t eb = program.variables[var].elementBytes();
    // Piece by piece where the region is a box of the storage: one strided
    // copy per piece instead of one call per run.
    Box inStorage;
    if (forEachOverlap(program, var, region, inStorage, [&](const Overlap &o) {
          copyBox(element(var, o.tile, 0), o.piece, to, inStorage, o.part, eb);
        }))
      return;
    forEachRun(program, var, region, [&](const Run &r) {
      std::memcpy(to + r.regionOffset * eb, element(var, r.tile, r.pieceOffset),
                  r.count * eb);
    });
  }

  /// Runs fn(i) for i in [0, n) on the pool, in a few chunks per thread,
  /// and waits: the barrier between bulk-synchronous phases.
  void parallelFor(size_t n, llvm::function_ref<void(size_t)> fn) {
    if (n == 0)
      return;
    unsigned threads = pool->getMaxConcurrency();
    if (threads <= 1 || n == 1) {
      for (size_t i = 0; i < n; ++i)
        fn(i);
      return;
    }
    size_t chunks = std::min<size_t>(n, threads * 4);
    size_t each = (n + chunks - 1) / chunks;
    for (size_t lo = 0; lo < n; lo += each)
      pool->async([&fn, lo, hi = std::min(n, lo + each)] {
        for (size_t i = lo; i < hi; ++i)
          fn(i);
      });
    pool->wait();
  }

  struct Vertex {
    int64_t tile;
    Box piece;
  };
  std::vector<Vertex> vertices(const ComputeSet &cs) const {
    std::vector<Vertex> vs;
    program.variables[cs.outputs[0]].mapping.forEachPiece(
        [&](int64_t tile, const Box &piece) {
          if (piece.numElements() > 0)
            vs.push_back({tile, piece});
        });
    return vs;
  }

  Expected<std::vector<Tensor>> runIteration(llvm::ArrayRef<Tensor> inputs);
  void runCompute(int64_t c);
  void runCopy(const Copy &copy);
  void computeCost();
};

void IPUModel::Impl::runCompute(int64_t c) {
  const ComputeSet &cs = program.computeSets[c];
  std::vector<Vertex> vs = vertices(cs);
  // Exchange: gather every region a vertex cannot read in place.
  parallelFor(vs.size(), [&](size_t v) {
    const Vertex &vx = vs[v];
    Box loops = cs.loopBox(vx.piece);
    for (size_t i = 0; i < cs.inputs.size(); ++i) {
      if (plan.exchangeOffset[c][i] < 0)
        continue;
      const auto &in = cs.inputs[i];
      Box region = in.map.region(loops, program.variables[in.var].shape);
      if (!isLocalPiece(program, in.var, region, vx.tile))
        gather(in.var, region, address(vx.tile, plan.exchangeOffset[c][i]));
    }
  });
  // Compute: every vertex's kernel on its tile's buffers.
  parallelFor(vs.size(), [&](size_t v) {
    const Vertex &vx = vs[v];
    Box loops = cs.loopBox(vx.piece);
    const Kernel *kernel = cs.kernelFor(vx.piece.sizes);
    std::vector<int64_t> descriptors;
    std::vector<size_t> starts;
    for (size_t i = 0; i < cs.inputs.size(); ++i) {
      const auto &in = cs.inputs[i];
      Box region = in.map.region(loops, program.variables[in.var].shape);
      const char *data = isLocalPiece(program, in.var, region, vx.tile)
                             ? (region.numElements() ? element(in.var, vx.tile, 0)
                                                     : address(vx.tile, 0))
                             : address(vx.tile, plan.exchangeOffset[c][i]);
      starts.push_back(descriptors.size());
      appendDescriptor(descriptors, data, region.sizes);
    }
    for (int64_t out : cs.outputs) {
      starts.push_back(descriptors.size());
      appendDescriptor(descriptors, element(out, vx.tile, 0), vx.piece.sizes);
    }
    std::vector<void *> args;
    for (int64_t &offset : loops.offsets)
      args.push_back(&offset);
    for (size_t start : starts)
      args.push_back(descriptors.data() + start);
    entries.lookup(kernel->symbol)(args.data());
  });
}

void IPUModel::Impl::runCopy(const Copy &copy) {
  std::vector<Segment> segments = copySegments(program, copy);
  int64_t eb = program.variables[copy.src].elementBytes();
  // Segments write disjoint destination elements: any split is race-free.
  parallelFor(segments.size(), [&](size_t i) {
    const Segment &s = segments[i];
    std::memcpy(element(copy.dst, s.dstTile, s.dstOffset),
                element(copy.src, s.srcTile, s.srcOffset), s.count * eb);
  });
}

void IPUModel::Impl::computeCost() {
  const ExecutableMetadata &meta = executable.metadata();
  int64_t sync = target.numIPUs > 1 ? target.globalSyncCycles : target.syncCycles;
  double hostBytesPerCycle = target.hostLinkBytesPerSecond / target.clockHz;
  auto stream = [&](const char *name, const std::vector<TensorInfo> &tensors) {
    StepCost s;
    s.name = name;
    for (const TensorInfo &t : tensors)
      s.exchangeBytes += t.numElements() * dtypeSize(t.dtype);
    s.exchangeCycles = static_cast<int64_t>(std::ceil(s.exchangeBytes / hostBytesPerCycle));
    s.syncCycles = target.syncCycles;
    return s;
  };
  cost.steps.push_back(stream("stream-in", meta.inputs));
  for (size_t t = 0; t < program.steps.size(); ++t) {
    const Step &step = program.steps[t];
    StepCost s;
    s.name = program.stepName(t);
    s.location = program.stepLocation(t);
    ExchangeCounter exchange(target);
    if (step.kind == Step::Kind::Compute) {
      const ComputeSet &cs = program.computeSets[step.index];
      for (const Vertex &vx : vertices(cs)) {
        Box loops = cs.loopBox(vx.piece);
        for (const auto &in : cs.inputs) {
          Box region = in.map.region(loops, program.variables[in.var].shape);
          if (isLocalPiece(program, in.var, region, vx.tile))
            continue;
          int64_t eb = program.variables[in.var].elementBytes();
          Box inStorage;
          if (!forEachOverlap(program, in.var, region, inStorage, [&](const Overlap &o) {
                exchange.move(o.tile, vx.tile, o.part.numElements() * eb);
              }))
            forEachRun(program, in.var, region, [&](const Run &r) {
              exchange.move(r.tile, vx.tile, r.count * eb);
            });
        }
        if (const Kernel *k = cs.kernelFor(vx.piece.sizes))
          s.computeCycles = std::max(s.computeCycles, k->cycles);
        ++s.tilesUsed;
      }
      s.macs = cs.macs;
    } else {
      const Copy &copy = program.copies[step.index];
      int64_t eb = program.variables[copy.src].elementBytes();
      for (const Segment &seg : copySegments(program, copy))
        exchange.move(seg.srcTile, seg.dstTile, seg.count * eb);
    }
    s.exchangeCycles = exchange.cycles();
    s.exchangeBytes = exchange.total;
    s.syncCycles = sync;
    cost.steps.push_back(std::move(s));
  }
  cost.steps.push_back(stream("stream-out", meta.outputs));
  for (const StepCost &s : cost.steps)
    cost.totalCycles += s.total();
}

IPUModel::IPUModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IPUModel::~IPUModel() = default;

Expected<std::unique_ptr<IPUModel>> IPUModel::create(const Executable &executable,
                                                     unsigned threads) {
  const ExecutableMetadata &meta = executable.metadata();
  if (!meta.program)
    return fail("this executable has no IPU program; run with --reference");
  auto impl = std::make_unique<Impl>(executable);
  impl->program = *meta.program;
  const MachineProgram &p = impl->program;

  auto target = target::makeTarget(
      meta.target, meta.numIPUs,
      meta.tilesPerIPU ? std::optional<int64_t>(meta.tilesPerIPU) : std::nullopt);
  if (!target)
    return fail("the executable's target is not usable: " +
                llvm::toString(target.takeError()));
  impl->target = *target;
  int64_t numTiles = target->totalTiles();
  if (auto err = p.verify(numTiles))
    return fail("the executable's program is invalid for " + target->describe() +
                ": " + llvm::toString(std::move(err)) + " (recompile the model)");

  // The program's inputs, outputs and weights must be the signature's.
  auto agree = [&](const char *what, const std::vector<int64_t> &vars,
                   const std::vector<TensorInfo> &infos) -> llvm::Error {
    if (vars.size() != infos.size())
      return fail(llvm::Twine("the executable's program has ") +
                  llvm::Twine(vars.size()) + " " + what + "s but its signature " +
                  llvm::Twine(infos.size()) + " (recompile the model)");
    for (size_t i = 0; i < vars.size(); ++i) {
      const Variable &v = p.variables[vars[i]];
      if (v.shape != infos[i].shape || !sameStorage(v.dtype, infos[i].dtype))
        return fail(llvm::Twine("the executable's program has ") + what + " '" +
                    infos[i].name + "' as " + typeString(v.shape, v.dtype) +
                    " but its signature says " + infos[i].typeString() +
                    " (recompile the model)");
    }
    return llvm::Error::success();
  };
  if (auto err = agree("input", p.inputs, meta.inputs))
    return std::move(err);
  if (auto err = agree("output", p.outputs, meta.outputs))
    return std::move(err);
  for (const Variable &v : p.variables) {
    if (v.base >= 0 || (v.kind != VarKind::Weight && v.kind != VarKind::Constant))
      continue;
    if (v.weight < 0 || static_cast<size_t>(v.weight) >= meta.weights.size() ||
        static_cast<int64_t>(executable.weight(v.weight).size()) !=
            numElements(v.shape) * v.elementBytes())
      return fail("the executable's program has " + varKindName(v.kind) + " '" + v.name +
                  "' (" + typeString(v.shape, v.dtype) +
                  ") without matching weight data (recompile the model)");
  }

  auto plan = planMemory(p, numTiles, target->bytesPerTile);
  if (!plan)
    return plan.takeError();
  impl->plan = std::move(*plan);

  impl->memoryBytes = static_cast<size_t>(numTiles) * target->bytesPerTile;
  void *memory = mmap(nullptr, impl->memoryBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED)
    return fail("cannot reserve " + llvm::Twine(impl->memoryBytes) +
                " bytes of tile memory for the IPU model: " + llvm::sys::StrError());
  impl->memory = static_cast<char *>(memory);

  bool anyKernel = llvm::any_of(p.computeSets, [](const ComputeSet &cs) {
    return !cs.kernels.empty();
  });
  if (anyKernel) {
    auto jit = createCodeJIT(executable.hostObject());
    if (!jit)
      return fail("cannot load the executable's code: " + llvm::toString(jit.takeError()));
    impl->jit = std::move(*jit);
    for (const ComputeSet &cs : p.computeSets)
      for (const Kernel &k : cs.kernels) {
        if (impl->entries.count(k.symbol))
          continue;
        auto entry = lookupEntry(*impl->jit, k.symbol);
        if (!entry)
          return fail("compute set '" + cs.name + "': " +
                      llvm::toString(entry.takeError()));
        impl->entries[k.symbol] = *entry;
      }
  }

  // Weights and constants live in their pieces for the model's lifetime.
  for (size_t v = 0; v < p.variables.size(); ++v) {
    const Variable &var = p.variables[v];
    if (var.base < 0 && (var.kind == VarKind::Weight || var.kind == VarKind::Constant))
      impl->scatter(v, wholeBox(var.shape), executable.weight(var.weight).data());
  }

  impl->pool = std::make_unique<llvm::DefaultThreadPool>(
      llvm::hardware_concurrency(threads));
  impl->computeCost();
  return std::unique_ptr<IPUModel>(new IPUModel(std::move(impl)));
}

Expected<std::vector<Tensor>> IPUModel::run(llvm::ArrayRef<Tensor> inputs) {
  Impl &m = *impl_;
  const ExecutableMetadata &meta = m.executable.metadata();
  if (auto err = checkInputs(meta, inputs))
    return std::move(err);
  return runDeviceIterations(meta, inputs, [&](llvm::ArrayRef<Tensor> batch) {
    return m.runIteration(batch);
  });
}

Expected<std::vector<Tensor>> IPUModel::Impl::runIteration(llvm::ArrayRef<Tensor> inputs) {
  Impl &m = *this;
  const ExecutableMetadata &meta = m.executable.metadata();
  const MachineProgram &p = m.program;
  for (size_t i = 0; i < inputs.size(); ++i)
    m.scatter(p.inputs[i], wholeBox(p.variables[p.inputs[i]].shape),
              inputs[i].data.data());
  for (const Step &step : p.steps) {
    if (step.kind == Step::Kind::Compute)
      m.runCompute(step.index);
    else
      m.runCopy(p.copies[step.index]);
  }
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < meta.outputs.size(); ++i) {
    Tensor t;
    t.dtype = meta.outputs[i].dtype;
    t.shape = meta.outputs[i].shape;
    t.data.resize(t.numElements() * dtypeSize(t.dtype));
    m.gather(p.outputs[i], wholeBox(t.shape), t.data.data());
    outputs.push_back(std::move(t));
  }
  return outputs;
}

const target::IPUTarget &IPUModel::target() const { return impl_->target; }
const CostSummary &IPUModel::cost() const { return impl_->cost; }
const MemoryPlan &IPUModel::memory() const { return impl_->plan; }

json::Value IPUModel::profileJSON() const {
  const Impl &m = *impl_;
  json::Array steps;
  int64_t exchange = 0, sync = 0, compute = 0;
  for (const StepCost &s : m.cost.steps) {
    steps.push_back(json::Object{{"name", s.name},
                                 {"location", s.location},
                                 {"cycles", s.total()},
                                 {"exchange_cycles", s.exchangeCycles},
                                 {"sync_cycles", s.syncCycles},
                                 {"compute_cycles", s.computeCycles},
                                 {"exchange_bytes", s.exchangeBytes},
                                 {"tiles_used", s.tilesUsed},
                                 {"macs", s.macs}});
    exchange += s.exchangeCycles;
    sync += s.syncCycles;
    compute += s.computeCycles;
  }
  return json::Object{
      {"target", json::Object{{"name", m.target.name},
                              {"description", m.target.describe()},
                              {"num_ipus", m.target.numIPUs},
                              {"tiles_per_ipu", m.target.tilesPerIPU},
                              {"bytes_per_tile", m.target.bytesPerTile},
                              {"clock_hz", m.target.clockHz},
                              {"peak_flops_fp32", m.target.peakFlops(false)},
                              {"peak_flops_fp16", m.target.peakFlops(true)}}},
      {"cycles", m.cost.totalCycles},
      {"seconds", m.cost.seconds(m.target.clockHz)},
      {"exchange_cycles", exchange},
      {"sync_cycles", sync},
      {"compute_cycles", compute},
      {"steps", std::move(steps)},
      {"memory", memoryReportJSON(m.program, m.plan)}};
}

json::Value IPUModel::traceJSON() const {
  const Impl &m = *impl_;
  // One track (thread) per phase kind; times in microseconds at the
  // target's clock.
  enum Track { Host = 1, Exchange, Sync, Compute };
  json::Array events;
  auto name = [&](int tid, const char *label) {
    events.push_back(json::Object{{"name", "thread_name"},
                                  {"ph", "M"},
                                  {"pid", 1},
                                  {"tid", tid},
                                  {"args", json::Object{{"name", label}}}});
  };
  events.push_back(json::Object{
      {"name", "process_name"},
      {"ph", "M"},
      {"pid", 1},
      {"args", json::Object{{"name", "IPU model: " + m.target.describe()}}}});
  name(Host, "host streams");
  name(Exchange, "exchange");
  name(Sync, "sync");
  name(Compute, "compute");
  double usPerCycle = 1e6 / m.target.clockHz;
  int64_t now = 0;
  auto event = [&](const StepCost &s, int tid, const char *phase, int64_t cycles) {
    if (cycles <= 0)
      return;
    json::Object args{{"cycles", cycles}, {"phase", phase}};
    if (!s.location.empty())
      args["location"] = s.location;
    if (tid == Exchange || tid == Host)
      args["bytes"] = s.exchangeBytes;
    if (tid == Compute) {
      args["tiles"] = s.tilesUsed;
      if (s.macs)
        args["macs"] = s.macs;
    }
    events.push_back(json::Object{{"name", s.name},
                                  {"cat", phase},
                                  {"ph", "X"},
                                  {"pid", 1},
                                  {"tid", tid},
                                  {"ts", now * usPerCycle},
                                  {"dur", cycles * usPerCycle},
                                  {"args", std::move(args)}});
    now += cycles;
  };
  for (const StepCost &s : m.cost.steps) {
    bool stream = s.name == "stream-in" || s.name == "stream-out";
    event(s, stream ? Host : Exchange, stream ? "stream" : "exchange", s.exchangeCycles);
    event(s, Sync, "sync", s.syncCycles);
    event(s, Compute, "compute", s.computeCycles);
  }
  return json::Object{{"traceEvents", std::move(events)},
                      {"displayTimeUnit", "ns"},
                      {"otherData", json::Object{{"cycles", m.cost.totalCycles},
                                                 {"target", m.target.name}}}};
}

} // namespace tessera::runtime
