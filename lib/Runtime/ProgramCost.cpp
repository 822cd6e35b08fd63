//===- ProgramCost.cpp - the estimated cycles of a compiled program ------===//

#include "tessera/Runtime/ProgramCost.h"

#include "tessera/Runtime/Executable.h"
#include "tessera/Runtime/MachineProgram.h"
#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Runtime/PhasePool.h"
#include "tessera/Target/CostModel.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <numeric>

namespace tessera::runtime {

namespace {

/// Bytes and contiguous regions each tile, and bytes each IPU, sends and
/// receives in one exchange phase.
struct ExchangeCounter {
  const target::CostModel &cost;
  int64_t tilesPerIPU;
  std::vector<int64_t> sent, received, sentRegions, receivedRegions, ipuOut, ipuIn;
  int64_t total = 0;
  /// The IPUs whose tiles the step uses (its vertices' and the exchange's).
  std::vector<bool> touched;

  explicit ExchangeCounter(const target::CostModel &c)
      : cost(c), tilesPerIPU(c.target().tilesPerIPU), sent(c.target().totalTiles()),
        received(c.target().totalTiles()), sentRegions(c.target().totalTiles()),
        receivedRegions(c.target().totalTiles()), ipuOut(c.target().numIPUs),
        ipuIn(c.target().numIPUs), touched(c.target().numIPUs, false) {}
  /// `bytes` in `regions` contiguous regions move from tile `from` to tile
  /// `to`. The exchange is a broadcast fabric (a receiving tile picks the
  /// sender it listens to), so a tile sends data several tiles receive
  /// once: `send` is false when `from` already sends these bytes to another
  /// tile, and `link` when they already cross to `to`'s IPU.
  void move(int64_t from, int64_t to, int64_t bytes, int64_t regions, bool send = true,
            bool link = true) {
    if (from == to || bytes == 0)
      return;
    if (send) {
      sent[from] += bytes;
      sentRegions[from] += regions;
    }
    received[to] += bytes;
    receivedRegions[to] += regions;
    total += bytes;
    int64_t a = from / tilesPerIPU, b = to / tilesPerIPU;
    touched[a] = touched[b] = true;
    if (a != b && link) {
      ipuOut[a] += bytes;
      ipuIn[b] += bytes;
    }
  }
  /// The phase's cycles: its busiest tile, or its busiest IPU's links.
  int64_t cycles() const {
    if (total == 0)
      return 0;
    int64_t busiestTile = 0, busiestLink = 0;
    for (size_t t = 0; t < sent.size(); ++t)
      busiestTile = std::max({busiestTile, cost.tileExchangeCycles(sent[t], sentRegions[t]),
                              cost.tileExchangeCycles(received[t], receivedRegions[t])});
    for (size_t i = 0; i < ipuOut.size(); ++i)
      busiestLink = std::max({busiestLink, ipuOut[i], ipuIn[i]});
    return cost.exchangePhaseCycles(busiestTile, busiestLink);
  }
};

/// `region` of `var` moves to tile `to` from the tiles holding it, each
/// storage piece it overlaps in its rows (a padded view: one run per row
/// of each piece's part; another view: in its runs).
void moveRegion(ExchangeCounter &exchange, const MachineProgram &program, int64_t var,
                const Box &region, int64_t to, bool send = true, bool link = true) {
  int64_t eb = program.variables[var].elementBytes();
  Box inStorage;
  if (!forEachOverlap(program, var, region, inStorage, [&](const Overlap &o) {
        exchange.move(o.tile, to, o.part.numElements() * eb,
                      rowCount(o.piece, inStorage, o.part), send, link);
      }) &&
      !forEachPaddedOverlap(program, var, region, [&](const Overlap &o, int64_t runs) {
        exchange.move(o.tile, to, o.part.numElements() * eb, runs, send, link);
      }))
    forEachRun(program, var, region, [&](const Run &r) {
      if (r.tile != kPaddingTile) // padding is the vertex's, not sent
        exchange.move(r.tile, to, r.count * eb, 1, send, link);
    });
}

/// An all-reduce over `replicas` replicas: each IPU reduces the bytes it
/// holds over its own IPU-Links, all at once; the busiest IPU sets the time.
StepCost allReduceCost(const MachineProgram &program, const target::CostModel &cost,
                       const AllReduce &reduce, int64_t replicas) {
  StepCost s;
  int64_t tilesPerIPU = cost.target().tilesPerIPU;
  std::vector<int64_t> bytesOnIPU(cost.target().numIPUs, 0);
  for (int64_t src : reduce.srcs) {
    const Variable &storage = program.storage(src);
    int64_t eb = storage.elementBytes();
    storage.mapping.forEachPiece([&](int64_t tile, const Box &piece) {
      bytesOnIPU[tile / tilesPerIPU] += piece.numElements() * eb;
    });
  }
  int64_t busiest = 0;
  for (size_t i = 0; i < bytesOnIPU.size(); ++i) {
    busiest = std::max(busiest, bytesOnIPU[i]);
    s.exchangeBytes += bytesOnIPU[i];
    if (bytesOnIPU[i])
      s.ipus |= uint64_t(1) << i;
  }
  s.allReduceCycles = cost.allReduceCycles(busiest, replicas);
  s.gwLinkCycles = cost.allReduceGWLinkCycles(busiest, replicas);
  return s;
}

/// Step t of `program`: its exchange, sync and slowest vertex.
StepCost stepCost(const MachineProgram &program, const target::CostModel &cost, size_t t,
                  int64_t replicas) {
  const Step &step = program.steps[t];
  if (step.kind == Step::Kind::AllReduce) {
    StepCost s = allReduceCost(program, cost, program.allReduces[step.index], replicas);
    s.name = program.stepName(t);
    s.location = program.stepLocation(t);
    return s;
  }
  StepCost s;
  s.name = program.stepName(t);
  s.location = program.stepLocation(t);
  ExchangeCounter exchange(cost);
  int64_t tilesPerIPU = cost.target().tilesPerIPU;
  if (step.kind == Step::Kind::Compute) {
    const ComputeSet &cs = program.computeSets[step.index];
    // Per input, the regions already sent (to any tile, and to each IPU):
    // vertices reading the same region (a weight block several tiles
    // share) receive one broadcast of it. Keyed by the region's offsets and
    // sizes (then the IPU) as bytes: a hash set, exact, that allocates only
    // for a region it has not seen (this runs per vertex and operand).
    std::vector<llvm::StringSet<>> sentRegions(cs.inputs.size());
    std::vector<llvm::StringSet<>> linkedRegions(cs.inputs.size());
    llvm::SmallVector<int64_t, 16> key;
    auto bytesOf = [](llvm::ArrayRef<int64_t> words) {
      return llvm::StringRef(reinterpret_cast<const char *>(words.data()),
                             words.size() * sizeof(int64_t));
    };
    program.variables[cs.outputs[0]].mapping.forEachPiece([&](int64_t tile,
                                                              const Box &piece) {
      if (piece.numElements() == 0)
        return;
      exchange.touched[tile / tilesPerIPU] = true;
      Box loops = cs.loopBox(piece);
      int64_t padding = 0; // bytes the vertex writes into its receive buffers
      for (size_t i = 0; i < cs.inputs.size(); ++i) {
        const auto &in = cs.inputs[i];
        Box region = in.map.region(loops, program.variables[in.var].shape);
        if (isLocalPiece(program, in.var, region, tile))
          continue;
        padding += paddingBytes(program, in.var, region);
        key.assign(region.offsets.begin(), region.offsets.end());
        key.append(region.sizes.begin(), region.sizes.end());
        bool send = sentRegions[i].insert(bytesOf(key)).second;
        key.push_back(tile / tilesPerIPU);
        bool link = linkedRegions[i].insert(bytesOf(key)).second;
        moveRegion(exchange, program, in.var, region, tile, send, link);
      }
      // The kernel's cycles are the planner's (from the same cost model);
      // the padding it writes depends on where the vertex sits.
      if (const Kernel *k = cs.kernelFor(piece.sizes))
        s.computeCycles = std::max(s.computeCycles, k->cycles + cost.fillCycles(padding));
      ++s.tilesUsed;
    });
    s.macs = cs.macs;
  } else {
    const Copy &copy = program.copies[step.index];
    int64_t eb = program.variables[copy.src].elementBytes();
    for (const Segment &seg : copySegments(program, copy))
      exchange.move(seg.srcTile, seg.dstTile, seg.count * eb, 1);
  }
  s.exchangeCycles = exchange.cycles();
  s.exchangeBytes = exchange.total;
  s.syncCycles = cost.stepSyncCycles(llvm::count(exchange.touched, true));
  for (size_t i = 0; i < exchange.touched.size(); ++i)
    if (exchange.touched[i])
      s.ipus |= uint64_t(1) << i;
  return s;
}

} // namespace

int64_t CostSummary::deviceCycles() const {
  int64_t n = 0;
  for (const StepCost &s : steps)
    if (s.name != "stream-in" && s.name != "stream-out" && !s.perUpdate)
      n += s.total();
  return n;
}

namespace {
/// `part` summed over the steps of every iteration (not the per-update ones).
int64_t sumPerIteration(const std::vector<StepCost> &steps, int64_t StepCost::*part) {
  int64_t n = 0;
  for (const StepCost &s : steps)
    n += s.perUpdate ? 0 : s.*part;
  return n;
}
} // namespace

int64_t CostSummary::computeCycles() const {
  return sumPerIteration(steps, &StepCost::computeCycles);
}
int64_t CostSummary::exchangeCycles() const {
  return sumPerIteration(steps, &StepCost::exchangeCycles);
}
int64_t CostSummary::syncCycles() const { return sumPerIteration(steps, &StepCost::syncCycles); }
int64_t CostSummary::allReduceCycles() const {
  return sumPerIteration(steps, &StepCost::allReduceCycles);
}
int64_t CostSummary::gwLinkCycles() const {
  return sumPerIteration(steps, &StepCost::gwLinkCycles);
}

CostSummary estimateProgramCost(const ExecutableMetadata &meta, const MachineProgram &program,
                                const target::IPUTarget &target, PhasePool *pool) {
  target::CostModel cost(target);
  CostSummary summary;
  auto stream = [&](const char *name, const std::vector<TensorInfo> &tensors) {
    StepCost s;
    s.name = name;
    for (const TensorInfo &t : tensors)
      s.exchangeBytes += t.numElements() * dtypeSize(t.dtype);
    s.exchangeCycles = cost.hostTransferCycles(s.exchangeBytes);
    s.syncCycles = cost.chipSyncCycles();
    return s;
  };
  summary.steps.push_back(stream("stream-in", meta.inputs));
  // Steps are costed independently: on the pool's threads.
  std::vector<StepCost> steps(program.steps.size());
  auto costStep = [&](size_t t) {
    steps[t] = stepCost(program, cost, t, meta.replicas);
    steps[t].perUpdate = program.steps[t].perUpdate;
  };
  if (pool)
    pool->run(steps.size(), costStep);
  else
    for (size_t t = 0; t < steps.size(); ++t)
      costStep(t);
  for (StepCost &s : steps)
    summary.steps.push_back(std::move(s));
  summary.steps.push_back(stream("stream-out", meta.outputs));
  // State stays on the device: its updates are copied into place, one
  // exchange of every state's: each tile receives the parts of its state
  // pieces that the update's result holds on other tiles (the IPU model's
  // gather and scatter of each state, tile to tile). An update computed in
  // place, or where its state lives, moves nothing. What a committed
  // weight update stores is copied once per update.
  for (bool perUpdate : {false, true}) {
    StepCost update;
    update.name = perUpdate ? "state-update-committed" : "state-update";
    update.perUpdate = perUpdate;
    ExchangeCounter exchange(cost);
    for (size_t i = 0; i < meta.state.size(); ++i) {
      const StateInfo &s = meta.state[i];
      if (s.update < 0 || s.perUpdate != perUpdate)
        continue;
      int64_t state = program.inputs[meta.inputs.size() + i];
      int64_t result = program.outputs[s.update];
      if (program.storageIndex(state) == program.storageIndex(result))
        continue;
      const Variable &home = program.variables[state];
      if (home.base >= 0) {
        int64_t eb = program.storage(result).elementBytes();
        // A view (no program makes one of an input): its largest piece,
        // all of it received by one tile, as an upper bound.
        const Variable &storage = program.storage(state);
        int64_t tile = storage.mapping.firstTile, bytes = storage.mapping.maxPieceElements() * eb;
        exchange.received[tile] += bytes;
        exchange.receivedRegions[tile] += 1;
        exchange.total += bytes;
        exchange.touched[tile / cost.target().tilesPerIPU] = true;
        continue;
      }
      home.mapping.forEachPiece([&](int64_t tile, const Box &piece) {
        moveRegion(exchange, program, result, piece, tile);
      });
    }
    if (exchange.total > 0) {
      update.exchangeBytes = exchange.total;
      update.exchangeCycles = exchange.cycles();
      update.syncCycles = cost.chipSyncCycles();
      update.ipus = target.numIPUs >= 64 ? ~uint64_t(0) : (uint64_t(1) << target.numIPUs) - 1;
      summary.steps.push_back(std::move(update));
    }
  }
  summary.ipuCycles.assign(target.numIPUs, 0);
  int64_t hostCycles = 0;
  for (const StepCost &s : summary.steps) {
    if (s.perUpdate) {
      summary.updateCycles += s.total();
      continue;
    }
    summary.totalCycles += s.total();
    if (!s.ipus)
      hostCycles += s.total();
    for (int64_t i = 0; i < target.numIPUs; ++i)
      if (s.ipus >> i & 1)
        summary.ipuCycles[i] += s.total();
  }
  if (meta.pipelineStages > 1) {
    int64_t slowest = *llvm::max_element(summary.ipuCycles);
    summary.totalCycles = hostCycles + slowest;
    summary.fillCycles = (meta.pipelineStages - 1) * slowest;
  }
  return summary;
}

void printCostSummary(const CostSummary &cost, const ExecutableMetadata &meta,
                      const target::IPUTarget &target, llvm::raw_ostream &os,
                      size_t topSteps) {
  // Every replica runs an iteration's batch at once.
  int64_t batch = (!meta.inputs.empty() && !meta.inputs[0].shape.empty()
                       ? meta.inputs[0].shape[0]
                       : 1) *
                  meta.replicas;
  double seconds = cost.seconds(target.clockHz);
  os << "estimated on " << target.describe();
  if (meta.replicas > 1)
    os << " x " << meta.replicas << " replicas";
  os << "\n";
  os << "  one iteration (batch " << batch << "): " << withCommas(cost.totalCycles)
     << " cycles, " << llvm::format("%.4g", seconds * 1e3) << " ms";
  if (seconds > 0)
    os << ", " << withCommas(std::llround(batch / seconds)) << " samples/s";
  os << "\n";
  if (meta.gradientAccumulation > 1) {
    int64_t perUpdate = cost.cyclesPerUpdate(meta.gradientAccumulation);
    double updateSeconds = perUpdate / target.clockHz;
    os << "  one weight update (" << meta.gradientAccumulation
       << " micro-batches): " << withCommas(perUpdate) << " cycles";
    if (updateSeconds > 0)
      os << ", " << withCommas(std::llround(batch * meta.gradientAccumulation / updateSeconds))
         << " samples/s";
    if (cost.updateCycles > 0)
      os << "; the optimizer's update " << withCommas(cost.updateCycles)
         << " cycles once per update";
    os << "\n";
  }
  // Each IPU's share: with stages, how balanced they are.
  if (target.numIPUs > 1) {
    os << "  per IPU (its steps, one iteration):";
    for (auto [i, c] : llvm::enumerate(cost.ipuCycles))
      os << (i ? "," : "") << " IPU " << i << " " << withCommas(c);
    os << "\n";
  }
  if (meta.pipelineStages > 1)
    os << "  pipelined over " << meta.pipelineStages
       << " stages: the slowest IPU sets the pace; filling and draining the pipeline adds "
       << withCommas(cost.fillCycles) << " cycles per "
       << (meta.state.empty() ? "run" : "weight update") << "\n";
  // Shares of the steps' cycles (more than an iteration's when a pipeline
  // overlaps them).
  int64_t stepCycles = 0;
  for (const StepCost &s : cost.steps)
    stepCycles += s.perUpdate ? 0 : s.total();
  auto share = [&](int64_t part) {
    return llvm::format("%.1f%%", stepCycles ? 100.0 * part / stepCycles : 0.0);
  };
  os << "  compute " << withCommas(cost.computeCycles()) << " (" << share(cost.computeCycles())
     << "), exchange " << withCommas(cost.exchangeCycles()) << " ("
     << share(cost.exchangeCycles()) << "), sync " << withCommas(cost.syncCycles()) << " ("
     << share(cost.syncCycles()) << ")";
  if (meta.replicas > 1) {
    os << ", all-reduce " << withCommas(cost.allReduceCycles()) << " ("
       << share(cost.allReduceCycles()) << ")";
    if (int64_t gw = cost.gwLinkCycles()) {
      int64_t domainReplicas =
          std::max<int64_t>(1, target.ipuLinkDomainIPUs / std::max<int64_t>(1, target.numIPUs));
      os << " of which GW-Links " << withCommas(gw) << " ("
         << (meta.replicas + domainReplicas - 1) / domainReplicas << " IPU-Link domains of "
         << target.ipuLinkDomainIPUs << " IPUs)";
    }
  }
  os << "\n";
  // The share of the fp32 peak `macs` multiply-accumulates in `cycles`
  // reach: the time they would take on every tile at the MAC rate, over
  // `cycles`.
  auto peakShare = [&](int64_t macs, int64_t cycles) {
    return 100.0 * macs / (target.f32MacsPerCycle * target.totalTiles()) / cycles;
  };
  int64_t macs = 0;
  for (const StepCost &s : cost.steps)
    macs += s.perUpdate ? 0 : s.macs;
  if (macs > 0 && cost.totalCycles > 0)
    os << "  " << withCommas(macs) << " multiply-accumulates: "
       << llvm::format("%.1f%%", peakShare(macs, cost.totalCycles)) << " of the fp32 peak\n";
  // Without the host streams: what the tile mapping decides (the streams
  // are the host link's, whatever the plan).
  int64_t deviceCycles = cost.deviceCycles();
  if (macs > 0 && deviceCycles > 0 && deviceCycles != cost.totalCycles &&
      meta.pipelineStages == 1)
    os << "  on the device (without host streams): " << withCommas(deviceCycles)
       << " cycles, " << llvm::format("%.1f%%", peakShare(macs, deviceCycles))
       << " of the fp32 peak\n";
  std::vector<size_t> order(cost.steps.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return cost.steps[a].total() > cost.steps[b].total();
  });
  order.resize(std::min(order.size(), topSteps));
  if (order.empty())
    return;
  os << "  costliest steps (" << order.size() << " of " << cost.steps.size() << "):\n";
  os << llvm::format("  %12s %12s %12s %8s %6s %6s  %-14s %s\n", "cycles", "compute",
                     "exchange", "sync", "tiles", "peak", "step", "op");
  for (size_t i : order) {
    const StepCost &s = cost.steps[i];
    std::string peak = "-";
    if (s.macs > 0 && s.total() > 0)
      peak = llvm::formatv("{0:F1}%", peakShare(s.macs, s.total())).str();
    os << llvm::format("  %12s %12s %12s %8s %6lld %6s  %-14s %s\n",
                       withCommas(s.total()).c_str(), withCommas(s.computeCycles).c_str(),
                       withCommas(s.exchangeCycles).c_str(), withCommas(s.syncCycles).c_str(),
                       static_cast<long long>(s.tilesUsed), peak.c_str(), s.name.c_str(),
                       (s.location + (s.perUpdate ? " (once per update)" : "")).c_str());
  }
}

} // namespace tessera::runtime
