//===- CostModel.cpp - the cycle formulas of an IPU target ---------------===//

#include "tessera/Target/CostModel.h"

#include <algorithm>
#include <cmath>

namespace tessera::target {

int64_t CostModel::vertexCycles(const VertexWork &work) const {
  int64_t fixed = target_.vertexOverheadCycles + work.rows * target_.vertexCyclesPerRow;
  // A non-contraction body runs on the vector unit, as many lanes as the
  // result's elements fit in a vector.
  int64_t lanes = std::max<int64_t>(1, target_.vectorBytesPerCycle / work.elementBytes);
  int64_t epilogue = ceilDiv(work.epilogueElements * work.epilogueInstructions, lanes);
  int64_t body;
  if (work.contraction) {
    int64_t rate = work.halfPrecision ? target_.f16MacsPerCycle : target_.f32MacsPerCycle;
    body = ceilDiv(work.iterations, rate);
  } else {
    body = ceilDiv(work.iterations * work.instructions, lanes) +
           std::min(work.rows * work.rowInstructions,
                    ceilDiv(work.iterations * work.rowInstructions, lanes));
  }
  return fixed + body + epilogue + fillCycles(work.fillBytes);
}

int64_t CostModel::exchangePhaseCycles(int64_t busiestTileCycles,
                                       int64_t busiestLinkBytes) const {
  if (busiestTileCycles == 0 && busiestLinkBytes == 0)
    return 0;
  double cycles = busiestTileCycles;
  double linkBytesPerCycle = target_.ipuLinkBytesPerSecond / target_.clockHz;
  if (linkBytesPerCycle > 0)
    cycles = std::max(cycles, std::ceil(busiestLinkBytes / linkBytesPerCycle));
  return static_cast<int64_t>(cycles) + target_.exchangeOverheadCycles;
}

namespace {
/// Replicas within one IPU-Link domain, and domains.
std::pair<int64_t, int64_t> linkDomains(const IPUTarget &t, int64_t replicas) {
  int64_t perDomain = std::max<int64_t>(1, t.ipuLinkDomainIPUs / std::max<int64_t>(1, t.numIPUs));
  int64_t inDomain = std::min(replicas, perDomain);
  return {inDomain, (replicas + inDomain - 1) / inDomain};
}
} // namespace

/// One ring step: `bytes` over links sending `linkBytesPerSecond` / 2 (half
/// of a chip's links face each way), then the exchange's overhead and a
/// sync across IPUs.
static int64_t ringStepCycles(const IPUTarget &t, double bytes, double linkBytesPerSecond) {
  double sendBytesPerCycle = linkBytesPerSecond / 2 / t.clockHz;
  int64_t transfer = sendBytesPerCycle > 0
                         ? static_cast<int64_t>(std::ceil(std::ceil(bytes) / sendBytesPerCycle))
                         : 0;
  return transfer + t.exchangeOverheadCycles + t.globalSyncCycles;
}

int64_t CostModel::allReduceGWLinkCycles(int64_t bytes, int64_t replicas) const {
  if (replicas <= 1 || bytes <= 0)
    return 0;
  auto [inDomain, domains] = linkDomains(target_, replicas);
  if (domains <= 1)
    return 0;
  double shard = std::ceil(static_cast<double>(bytes) / inDomain);
  return 2 * (domains - 1) *
         ringStepCycles(target_, shard / domains, target_.gwLinkBytesPerSecond);
}

int64_t CostModel::allReduceCycles(int64_t bytes, int64_t replicas) const {
  if (replicas <= 1 || bytes <= 0)
    return 0;
  auto [inDomain, domains] = linkDomains(target_, replicas);
  int64_t within = inDomain > 1 ? 2 * (inDomain - 1) *
                                      ringStepCycles(target_, static_cast<double>(bytes) / inDomain,
                                                     target_.ipuLinkBytesPerSecond)
                                : 0;
  return within + allReduceGWLinkCycles(bytes, replicas);
}

int64_t CostModel::hostTransferCycles(int64_t bytes) const {
  double bytesPerCycle = target_.hostLinkBytesPerSecond / target_.clockHz;
  return static_cast<int64_t>(std::ceil(bytes / bytesPerCycle));
}

int64_t CostModel::opRooflineCycles(double macs, double vectorOps, int64_t bytes,
                                    bool halfPrecision) const {
  double tiles = static_cast<double>(target_.tilesPerIPU);
  double macRate = halfPrecision ? target_.f16MacsPerCycle : target_.f32MacsPerCycle;
  double lanes = static_cast<double>(target_.vectorBytesPerCycle) / (halfPrecision ? 2 : 4);
  double compute = macs / (tiles * macRate) + vectorOps / (tiles * lanes);
  double exchange = bytes / (tiles * target_.exchangeBytesPerCycle);
  return static_cast<int64_t>(std::ceil(std::max(compute, exchange))) + target_.syncCycles +
         target_.exchangeOverheadCycles;
}

} // namespace tessera::target
