//===- MemoryPlan.cpp - place a program's data in tile memory ------------===//
//
// Liveness is over step indices: a variable is live from the step that first
// writes it (step 0 for inputs, weights and constants) to the step that last
// reads or writes it (the end for weights, constants and program outputs);
// reads and writes through a view count for its storage variable. A vertex's
// receive buffer for an operand it cannot read in place lives during the
// steps that run its compute set. Vertex code is reserved at the top of each
// tile's memory for the whole program, and weights and constants are stacked
// below it.
//
// Every allocation takes one offset, valid on all tiles of its tile set, so
// the first-fit search (from the bottom, for everything but weights) only
// looks at allocations that are live at the same time on an intersecting set
// of tiles. Items are placed in program order, which keeps the plan
// deterministic: the compiler and the runtime compute the same one.
//
//===----------------------------------------------------------------------===//

#include "tessera/Runtime/MemoryPlan.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <numeric>

using llvm::Expected;
namespace json = llvm::json;

namespace tessera::runtime {

namespace {

constexpr int64_t kAlignment = 8;

int64_t alignUp(int64_t v) { return (v + kAlignment - 1) / kAlignment * kAlignment; }
int64_t alignDown(int64_t v) { return v >= 0 ? v / kAlignment * kAlignment : -alignUp(-v); }

enum Category { Weights, Activations, Temporaries };
const char *categoryName(int c) {
  static const char *names[] = {"weights", "activations", "temporaries", "code"};
  return names[c];
}


/// One thing that needs bytes: a variable's pieces or a compute set input's
/// receive buffers.
struct Allocation {
  std::string name;
  int category = Activations;
  int order = 0; ///< placement order among items born at the same step
  int64_t birth = 0, death = 0; ///< steps, inclusive
  int64_t size = 0;             ///< the largest piece, 8-aligned
  std::vector<std::pair<int64_t, int64_t>> perTile; ///< (tile, bytes)
  llvm::BitVector tiles;
  int64_t minTile = 0, maxTile = -1;
  int64_t offset = -1;
  int64_t var = -1, computeSet = -1, input = -1;

  void add(int64_t tile, int64_t bytes) {
    perTile.emplace_back(tile, bytes);
    tiles.set(tile);
    minTile = perTile.size() == 1 ? tile : std::min(minTile, tile);
    maxTile = std::max(maxTile, tile);
    size = std::max(size, alignUp(bytes));
  }
  bool conflictsWith(const Allocation &o) const {
    return birth <= o.death && o.birth <= death && minTile <= o.maxTile &&
           o.minTile <= maxTile && tiles.anyCommon(o.tiles);
  }
};

MemoryByCategory &addTo(MemoryByCategory &m, int category, int64_t bytes) {
  switch (category) {
  case Weights:
    m.weights += bytes;
    break;
  case Activations:
    m.activations += bytes;
    break;
  case Temporaries:
    m.temporaries += bytes;
    break;
  default:
    m.code += bytes;
  }
  return m;
}

std::string stepDescription(const MachineProgram &p, int64_t step) {
  if (step < 0 || static_cast<size_t>(step) >= p.steps.size())
    return "program start (code, weights and inputs)";
  std::string loc = p.stepLocation(step);
  return p.stepName(step) + (loc.empty() ? "" : " (" + loc + ")");
}

} // namespace

std::string withCommas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string OutOfMemory::message() const {
  std::string s = kOutOfTileMemory.str() + ": tile " + std::to_string(tile) + " needs " +
                  withCommas(needed) + " bytes, has " + withCommas(available) + " (" +
                  std::to_string(available / 1024) + " KiB) at " + step;
  s += "; largest on tile " + std::to_string(tile) + ":";
  for (size_t i = 0; i < live.size() && i < 5; ++i)
    s += std::string(i ? "," : "") + " " + live[i].category + " '" + live[i].name +
         "' " + withCommas(live[i].bytes) + " B";
  if (live.size() > 5)
    s += ", and " + std::to_string(live.size() - 5) + " more";
  // What the tile holds may fit while the allocation's offset does not:
  // one offset on every tile it spans, above what any of them holds there.
  if (int64_t holds = byCategory.total(); holds <= available && !placing.empty())
    s += "; those " + withCommas(holds) + " B would fit, but '" + placing +
         "' takes one offset on all " + withCommas(spanTiles) +
         " of its tiles, and the lowest free on every one is " + withCommas(offset) +
         ", which leaves too little below the weights and code";
  s += "; by category: weights " + withCommas(byCategory.weights) + ", activations " +
       withCommas(byCategory.activations) + ", temporaries " +
       withCommas(byCategory.temporaries) + ", code " + withCommas(byCategory.code) +
       ". Try: more IPUs (--num-ipus), a smaller --available-memory-proportion, or a "
       "smaller batch";
  return s;
}

static json::Object categoryJSON(const MemoryByCategory &m) {
  return json::Object{{"weights", m.weights},
                      {"activations", m.activations},
                      {"temporaries", m.temporaries},
                      {"code", m.code},
                      {"total", m.total()}};
}

json::Value OutOfMemory::toJSON() const {
  json::Array items;
  for (const Item &i : live)
    items.push_back(
        json::Object{{"name", i.name}, {"category", i.category}, {"bytes", i.bytes}});
  return json::Object{{"tile", tile},
                      {"needed", needed},
                      {"available", available},
                      {"step", step},
                      {"live", std::move(items)},
                      {"by_category", categoryJSON(byCategory)},
                      {"message", message()}};
}

Expected<MemoryPlan> planMemory(const MachineProgram &program, int64_t numTiles,
                                int64_t bytesPerTile, OutOfMemory *report) {
  if (auto err = program.verify(numTiles))
    return std::move(err);
  const int64_t numSteps = program.steps.size();
  const int64_t lastStep = std::max<int64_t>(numSteps - 1, 0);
  const size_t numVars = program.variables.size();

  // Liveness of storage variables, from their uses through any view.
  std::vector<VariableUses> uses = variableUses(program);
  std::vector<int64_t> firstRun(program.computeSets.size(), -1),
      lastRun(program.computeSets.size(), -1);
  for (int64_t t = 0; t < numSteps; ++t) {
    const Step &step = program.steps[t];
    if (step.kind != Step::Kind::Compute)
      continue;
    if (firstRun[step.index] < 0)
      firstRun[step.index] = t;
    lastRun[step.index] = t;
  }
  std::vector<bool> isOutput(numVars, false), isInput(numVars, false),
      isResident(numVars, false);
  for (int64_t v : program.outputs)
    isOutput[program.storageIndex(v)] = true;
  for (int64_t v : program.inputs)
    isInput[program.storageIndex(v)] = true;
  for (size_t i = program.inputs.size() - program.residentInputs; i < program.inputs.size(); ++i)
    isResident[program.storageIndex(program.inputs[i])] = true;

  std::vector<Allocation> allocs;
  std::vector<int64_t> varAlloc(numVars, -1);
  for (size_t v = 0; v < numVars; ++v) {
    const Variable &var = program.variables[v];
    if (var.base >= 0)
      continue;
    Allocation a;
    a.name = var.name.empty() ? "variable " + std::to_string(v) : var.name;
    a.var = v;
    a.tiles.resize(numTiles);
    bool constant = var.kind == VarKind::Weight || var.kind == VarKind::Constant;
    a.category = constant ? Weights : Activations;
    bool fromHost = constant || var.kind == VarKind::Input || isInput[v];
    a.order = fromHost ? 0 : 2;
    a.birth = fromHost || uses[v].firstWrite < 0 ? 0 : uses[v].firstWrite;
    a.death = constant || isOutput[v] || isResident[v] ? lastStep
                                                       : std::max(uses[v].lastUse, a.birth);
    // Every stashed copy (Variable::copies) is placed.
    int64_t elementBytes = var.elementBytes() * var.copies;
    var.mapping.forEachPiece([&](int64_t tile, const Box &box) {
      if (int64_t bytes = box.numElements() * elementBytes)
        a.add(tile, bytes);
    });
    if (a.perTile.empty())
      continue; // no elements: nothing to place
    varAlloc[v] = allocs.size();
    allocs.push_back(std::move(a));
  }

  // Receive buffers: one per (compute set, input) that some vertex cannot
  // read in place, as large as the largest such region.
  std::vector<std::vector<int64_t>> recvAlloc(program.computeSets.size());
  for (size_t c = 0; c < program.computeSets.size(); ++c) {
    const ComputeSet &cs = program.computeSets[c];
    recvAlloc[c].assign(cs.inputs.size(), -1);
    if (firstRun[c] < 0)
      continue;
    const TileMapping &outMap = program.variables[cs.outputs[0]].mapping;
    for (size_t i = 0; i < cs.inputs.size(); ++i) {
      const auto &in = cs.inputs[i];
      const Variable &var = program.variables[in.var];
      Allocation a;
      a.name = (cs.name.empty() ? "cs" + std::to_string(c) : cs.name) + " input " +
               std::to_string(i);
      a.category = Temporaries;
      a.order = 1;
      a.birth = firstRun[c];
      a.death = lastRun[c];
      a.computeSet = c;
      a.input = i;
      a.tiles.resize(numTiles);
      outMap.forEachPiece([&](int64_t tile, const Box &piece) {
        if (piece.numElements() == 0)
          return;
        Box region = in.map.region(cs.loopBox(piece), var.shape);
        if (!isLocalPiece(program, in.var, region, tile))
          a.add(tile, region.numElements() * var.elementBytes());
      });
      if (a.perTile.empty())
        continue;
      recvAlloc[c][i] = allocs.size();
      allocs.push_back(std::move(a));
    }
  }

  // Code: each kernel symbol once per tile that runs it.
  std::vector<int64_t> code(numTiles, 0);
  {
    llvm::StringMap<std::pair<int64_t, llvm::BitVector>> symbols;
    for (size_t c = 0; c < program.computeSets.size(); ++c) {
      if (firstRun[c] < 0)
        continue;
      const ComputeSet &cs = program.computeSets[c];
      program.variables[cs.outputs[0]].mapping.forEachPiece(
          [&](int64_t tile, const Box &piece) {
            const Kernel *k = cs.kernelFor(piece.sizes);
            if (!k)
              return;
            auto &entry = symbols[k->symbol];
            entry.first = std::max(entry.first, k->codeBytes);
            entry.second.resize(numTiles);
            entry.second.set(tile);
          });
    }
    for (auto &entry : symbols)
      for (int tile : entry.second.second.set_bits())
        code[tile] += entry.second.first;
  }

  // Everything live at step `t` on `tile`, largest first, for reports.
  auto liveOn = [&](int64_t tile, int64_t t, const Allocation *extra,
                    OutOfMemory &oom) {
    auto bytesOn = [&](const Allocation &a) -> int64_t {
      if (a.tiles.size() <= static_cast<size_t>(tile) || !a.tiles[tile])
        return 0;
      for (auto [tl, b] : a.perTile)
        if (tl == tile)
          return b;
      return 0;
    };
    for (const Allocation &a : allocs)
      if (&a != extra && (a.offset >= 0) && a.birth <= t && t <= a.death)
        if (int64_t b = bytesOn(a))
          oom.live.push_back({a.name, categoryName(a.category), b}),
              addTo(oom.byCategory, a.category, b);
    if (extra)
      if (int64_t b = bytesOn(*extra))
        oom.live.push_back({extra->name, categoryName(extra->category), b}),
            addTo(oom.byCategory, extra->category, b);
    if (code[tile])
      oom.live.push_back({"vertex code", "code", code[tile]}),
          oom.byCategory.code += code[tile];
    llvm::stable_sort(oom.live, [](const OutOfMemory::Item &a, const OutOfMemory::Item &b) {
      return a.bytes > b.bytes;
    });
  };
  auto overflow = [&](OutOfMemory oom) -> llvm::Error {
    std::string message = oom.message();
    if (report)
      *report = std::move(oom);
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };

  for (int64_t tile = 0; tile < numTiles; ++tile)
    if (code[tile] > bytesPerTile) {
      OutOfMemory oom;
      oom.tile = tile;
      oom.needed = code[tile];
      oom.available = bytesPerTile;
      oom.step = stepDescription(program, -1);
      liveOn(tile, 0, nullptr, oom);
      return overflow(std::move(oom));
    }

  // Weights and constants live for the whole program: they are stacked down
  // from the top of each tile (below its code), so that they never sit
  // between the short-lived allocations below them. (Placed among those, a
  // weight on a few tiles raises the offset every later activation
  // spanning those tiles must start above, on all of its tiles.) Each
  // weight takes the highest offset free on all of its tiles (first fit from
  // the top); each tile then has a ceiling the other allocations stay under.
  std::vector<int64_t> ceiling(numTiles);
  for (int64_t tile = 0; tile < numTiles; ++tile)
    ceiling[tile] = bytesPerTile - code[tile];
  std::vector<size_t> weights;
  for (size_t i = 0; i < allocs.size(); ++i) {
    Allocation &a = allocs[i];
    if (a.category != Weights)
      continue;
    int64_t mostCode = a.perTile.front().first;
    for (auto [tile, bytes] : a.perTile)
      if (code[tile] > code[mostCode])
        mostCode = tile;
    std::vector<std::pair<int64_t, int64_t>> busy; // [offset, end)
    for (size_t w : weights)
      if (a.conflictsWith(allocs[w]))
        busy.emplace_back(allocs[w].offset, allocs[w].offset + allocs[w].size);
    // From the top down: below each placed weight the new one overlaps.
    llvm::sort(busy, [](auto x, auto y) { return x.second > y.second; });
    int64_t offset = alignDown(bytesPerTile - code[mostCode] - a.size);
    for (auto [lo, hi] : busy)
      if (lo < offset + a.size && offset < hi)
        offset = alignDown(lo - a.size);
    if (offset < 0) {
      // Report the tile of the set with the most weights and code.
      std::vector<int64_t> inUse(numTiles, 0);
      for (size_t w : weights)
        for (auto [tile, bytes] : allocs[w].perTile)
          inUse[tile] += bytes;
      int64_t tile = mostCode;
      for (auto [t, bytes] : a.perTile)
        if (inUse[t] + code[t] > inUse[tile] + code[tile])
          tile = t;
      OutOfMemory oom;
      oom.tile = tile;
      oom.needed = std::max(inUse[tile] + code[tile] + a.size, bytesPerTile - offset);
      oom.available = bytesPerTile;
      oom.step = stepDescription(program, -1);
      liveOn(tile, 0, &a, oom);
      return overflow(std::move(oom));
    }
    a.offset = offset;
    weights.push_back(i);
    for (auto [tile, bytes] : a.perTile)
      ceiling[tile] = std::min(ceiling[tile], offset);
  }

  // The rest in program order: by birth step; at a step, what comes from
  // the host first, then receive buffers, then the step's results.
  std::vector<size_t> order(allocs.size());
  std::iota(order.begin(), order.end(), 0);
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return std::make_pair(allocs[a].birth, allocs[a].order) <
           std::make_pair(allocs[b].birth, allocs[b].order);
  });
  std::vector<size_t> active; // placed and possibly still live
  for (size_t index : order) {
    Allocation &a = allocs[index];
    if (a.category == Weights)
      continue; // placed above
    llvm::erase_if(active, [&](size_t o) { return allocs[o].death < a.birth; });
    std::vector<std::pair<int64_t, int64_t>> busy; // [offset, end)
    for (size_t o : active)
      if (a.conflictsWith(allocs[o]))
        busy.emplace_back(allocs[o].offset, allocs[o].offset + allocs[o].size);
    llvm::sort(busy);
    int64_t offset = 0;
    for (auto [lo, hi] : busy) {
      if (lo - offset >= a.size)
        break;
      offset = std::max(offset, alignUp(hi));
    }
    // The offset must be below the weights and code on every tile of the set.
    int64_t worst = -1;
    for (auto [tile, bytes] : a.perTile)
      if (offset + a.size > ceiling[tile] && (worst < 0 || ceiling[tile] < ceiling[worst]))
        worst = tile;
    if (worst >= 0) {
      // Report the tile of the set with the most bytes in use.
      std::vector<int64_t> inUse(numTiles, 0);
      for (size_t o : active)
        if (allocs[o].birth <= a.birth && a.birth <= allocs[o].death)
          for (auto [tile, bytes] : allocs[o].perTile)
            inUse[tile] += bytes;
      for (const Allocation &w : allocs)
        if (w.category == Weights)
          for (auto [tile, bytes] : w.perTile)
            inUse[tile] += bytes;
      // A tile needs what it holds, or the top of the new allocation plus
      // the weights and code above it, whichever is more: the allocation
      // takes one offset on all its tiles, so data on some pushes it up on
      // the others. Report the tile that needs most (the one that
      // overflowed, or one fuller); needing more than the tile has is then
      // true of it, whichever term decides.
      int64_t tile = worst, most = -1;
      for (auto [t, bytes] : a.perTile) {
        int64_t needs =
            std::max(inUse[t] + bytes + code[t], offset + a.size + bytesPerTile - ceiling[t]);
        if (needs > most) {
          most = needs;
          tile = t;
        }
      }
      OutOfMemory oom;
      oom.tile = tile;
      oom.needed = most;
      oom.available = bytesPerTile;
      oom.offset = offset;
      oom.spanTiles = static_cast<int64_t>(a.perTile.size());
      oom.placing = a.name;
      oom.step = stepDescription(program, a.order == 0 ? -1 : a.birth);
      liveOn(tile, a.birth, &a, oom);
      return overflow(std::move(oom));
    }
    a.offset = offset;
    active.push_back(index);
  }

  MemoryPlan plan;
  plan.bytesPerTile = bytesPerTile;
  plan.variableOffset.assign(numVars, -1);
  for (size_t v = 0; v < numVars; ++v)
    if (varAlloc[v] >= 0)
      plan.variableOffset[v] = allocs[varAlloc[v]].offset;
    else if (program.variables[v].base < 0)
      plan.variableOffset[v] = 0; // no elements: any offset will do
  plan.exchangeOffset.resize(program.computeSets.size());
  for (size_t c = 0; c < recvAlloc.size(); ++c)
    for (int64_t a : recvAlloc[c])
      plan.exchangeOffset[c].push_back(a >= 0 ? allocs[a].offset : -1);

  // Peaks: sweep the steps, adding what is born and dropping what died; a
  // tile's peak can only rise where something was born.
  std::vector<std::vector<size_t>> bornAt(numSteps + 1), diesAfter(numSteps + 1);
  for (size_t i = 0; i < allocs.size(); ++i) {
    bornAt[allocs[i].birth].push_back(i);
    diesAfter[allocs[i].death].push_back(i);
  }
  std::vector<MemoryByCategory> now(numTiles);
  plan.peakBytes.assign(numTiles, 0);
  plan.peakByCategory.assign(numTiles, MemoryByCategory());
  for (int64_t tile = 0; tile < numTiles; ++tile) {
    now[tile].code = code[tile];
    plan.peakBytes[tile] = code[tile];
    plan.peakByCategory[tile] = now[tile];
  }
  for (int64_t t = 0; t <= lastStep; ++t) {
    if (t > 0)
      for (size_t i : diesAfter[t - 1])
        for (auto [tile, bytes] : allocs[i].perTile)
          addTo(now[tile], allocs[i].category, -bytes);
    for (size_t i : bornAt[t])
      for (auto [tile, bytes] : allocs[i].perTile)
        addTo(now[tile], allocs[i].category, bytes);
    for (size_t i : bornAt[t])
      for (auto [tile, bytes] : allocs[i].perTile)
        if (now[tile].total() > plan.peakBytes[tile]) {
          plan.peakBytes[tile] = now[tile].total();
          plan.peakByCategory[tile] = now[tile];
        }
  }
  return plan;
}

void printTileMemory(const MemoryPlan &plan, llvm::raw_ostream &os) {
  if (plan.peakBytes.empty())
    return;
  auto peak = std::max_element(plan.peakBytes.begin(), plan.peakBytes.end());
  double mean = 0;
  for (int64_t b : plan.peakBytes)
    mean += b;
  mean /= plan.peakBytes.size();
  os << "  tile memory: peak " << withCommas(*peak) << " B on tile "
     << (peak - plan.peakBytes.begin()) << " ("
     << llvm::format("%.1f%%", 100.0 * *peak / plan.bytesPerTile) << " of "
     << withCommas(plan.bytesPerTile) << "), mean " << withCommas(std::llround(mean))
     << " B over " << plan.peakBytes.size() << " tiles: peak/mean "
     << llvm::format("%.2f", mean > 0 ? *peak / mean : 0.0) << "\n";
}

json::Value memoryReportJSON(const MachineProgram &program, const MemoryPlan &plan) {
  json::Array peak, weights, activations, temporaries, code;
  MemoryByCategory total, maxima;
  int64_t maxTile = 0, tilesUsed = 0, totalBytes = 0;
  for (size_t t = 0; t < plan.peakBytes.size(); ++t) {
    const MemoryByCategory &c = plan.peakByCategory[t];
    peak.push_back(plan.peakBytes[t]);
    weights.push_back(c.weights);
    activations.push_back(c.activations);
    temporaries.push_back(c.temporaries);
    code.push_back(c.code);
    total.weights += c.weights;
    total.activations += c.activations;
    total.temporaries += c.temporaries;
    total.code += c.code;
    maxima.weights = std::max(maxima.weights, c.weights);
    maxima.activations = std::max(maxima.activations, c.activations);
    maxima.temporaries = std::max(maxima.temporaries, c.temporaries);
    maxima.code = std::max(maxima.code, c.code);
    totalBytes += plan.peakBytes[t];
    tilesUsed += plan.peakBytes[t] > 0;
    if (plan.peakBytes[t] > plan.peakBytes[maxTile])
      maxTile = t;
  }
  json::Object maxObject = categoryJSON(maxima);
  maxObject["tile"] = maxTile;
  maxObject["bytes"] = plan.peakBytes.empty() ? 0 : plan.peakBytes[maxTile];
  json::Object totalObject = categoryJSON(total);
  totalObject["bytes"] = totalBytes;
  return json::Object{{"bytes_per_tile", plan.bytesPerTile},
                      {"tiles", static_cast<int64_t>(plan.peakBytes.size())},
                      {"tiles_used", tilesUsed},
                      {"variables", static_cast<int64_t>(program.variables.size())},
                      {"peak_bytes", std::move(peak)},
                      {"weights", std::move(weights)},
                      {"activations", std::move(activations)},
                      {"temporaries", std::move(temporaries)},
                      {"code", std::move(code)},
                      {"max", std::move(maxObject)},
                      {"total", std::move(totalObject)}};
}

} // namespace tessera::runtime
