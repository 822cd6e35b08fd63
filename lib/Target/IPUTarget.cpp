//===- IPUTarget.cpp - the IPU machine descriptions ----------------------===//

#include "tessera/Target/IPUTarget.h"
#include "tessera/Support/Error.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace tessera::target {

namespace {

/// Mk1 GC2, Mk2 GC200 and Bow, from shared/IPU_MODEL.md. [D] figures are
/// derived from published peaks; [?] from weak sources.
std::vector<IPUTarget> knownTargets() {
  IPUTarget ipu1;
  ipu1.name = "ipu1";
  ipu1.tilesPerIPU = 1216;
  ipu1.bytesPerTile = 256 * 1024;
  ipu1.clockHz = 1.6e9;
  ipu1.f16MacsPerCycle = 32; // [D]
  ipu1.f32MacsPerCycle = 8;  // [D]
  ipu1.syncCycles = 120;     // [?] 90-150
  ipu1.globalSyncCycles = 600; // [?]
  ipu1.ipuLinkBytesPerSecond = 3 * 64e9;
  ipu1.hostLinkBytesPerSecond = 16e9; // [?] PCIe Gen3 x16
  // [?] An IPU-Server's 8 C2 cards (16 IPUs) joined by IPU-Links; beyond,
  // the servers' 100 Gb/s RoCE network shared by their 16 IPUs.
  ipu1.ipuLinkDomainIPUs = 16;
  ipu1.gwLinkBytesPerSecond = 12.5e9 / 16;

  IPUTarget ipu2 = ipu1;
  ipu2.name = "ipu2";
  ipu2.tilesPerIPU = 1472;
  ipu2.bytesPerTile = 624 * 1024;
  ipu2.clockHz = 1.33e9;     // [D] from 250 TFLOPS fp16
  ipu2.f16MacsPerCycle = 64; // [D]
  ipu2.f32MacsPerCycle = 16; // [D]
  ipu2.ipuLinkBytesPerSecond = 320e9;
  ipu2.hostLinkBytesPerSecond = 64e9; // PCIe Gen4
  // IPU-Links join a Pod64 rack (16 IPU-Machines of 4 IPUs); racks reach
  // each other over the IPU-Machines' two 100 Gb/s GW-Links (Graphcore's
  // Switched GW-Links guide), shared by each machine's 4 IPUs.
  ipu2.ipuLinkDomainIPUs = 64;
  ipu2.gwLinkBytesPerSecond = 2 * 12.5e9 / 4;

  IPUTarget bow = ipu2;
  bow.name = "bow";
  bow.clockHz = 1.85e9;
  return {ipu1, ipu2, bow};
}

} // namespace

std::string IPUTarget::describe() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << name << ": " << numIPUs << " IPU" << (numIPUs > 1 ? "s" : "") << " x "
     << tilesPerIPU << " tiles x " << bytesPerTile / 1024 << " KiB, "
     << llvm::format("%.2f", clockHz / 1e9) << " GHz, "
     << llvm::format("%.1f", peakFlops(false) / 1e12) << " TFLOPS fp32, "
     << llvm::format("%.1f", peakFlops(true) / 1e12) << " TFLOPS fp16";
  return s;
}

std::vector<std::string> targetNames() {
  std::vector<std::string> names;
  for (const IPUTarget &t : knownTargets())
    names.push_back(t.name);
  return names;
}

llvm::Expected<IPUTarget> makeTarget(llvm::StringRef name, int64_t numIPUs,
                                     std::optional<int64_t> tilesPerIPU) {
  for (IPUTarget t : knownTargets()) {
    if (t.name != name)
      continue;
    // Pipelines and replicas of real systems stop at 64 IPUs (an IPU-POD64).
    if (numIPUs < 1 || numIPUs > 64)
      return fail("--num-ipus must be between 1 and 64, got " + llvm::Twine(numIPUs));
    t.numIPUs = numIPUs;
    if (tilesPerIPU) {
      if (*tilesPerIPU < 1 || *tilesPerIPU > t.tilesPerIPU)
        return fail("--tiles-per-ipu must be between 1 and " +
                    llvm::Twine(t.tilesPerIPU) + " for " + name + ", got " +
                    llvm::Twine(*tilesPerIPU));
      t.tilesPerIPU = *tilesPerIPU;
    }
    return t;
  }
  std::string known;
  for (const std::string &n : targetNames())
    known += (known.empty() ? "" : ", ") + n;
  return fail("unknown target '" + name + "'; targets are " + known);
}

} // namespace tessera::target
