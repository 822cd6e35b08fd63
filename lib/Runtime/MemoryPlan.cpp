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
// Each tile's memory is laid out on its own (as Poplar does): a piece takes
// the lowest offset free on its tile among what is live there (first fit),
// so a buffer over many tiles never has to start above the highest of their
// data, and a tile's bytes fill up to its ceiling. Items are placed in
// program order, which keeps the plan deterministic: the compiler and the
// runtime compute the same one.
//
//===----------------------------------------------------------------------===//

#include "tessera/Runtime/MemoryPlan.h"
#include "tessera/Runtime/PhasePool.h"

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
  std::vector<std::pair<int64_t, int64_t>> perTile; ///< (tile, bytes)
  std::vector<int64_t> offsets;                     ///< per perTile entry
  int64_t minTile = 0, maxTile = -1;
  bool placed = false;

  void add(int64_t tile, int64_t bytes) {
    perTile.emplace_back(tile, bytes);
    minTile = perTile.size() == 1 ? tile : std::min(minTile, tile);
    maxTile = std::max(maxTile, tile);
  }
  int64_t bytesOn(int64_t tile) const {
    if (tile < minTile || tile > maxTile)
      return 0;
    for (auto [t, bytes] : perTile)
      if (t == tile)
        return bytes;
    return 0;
  }
  TileOffsets tileOffsets() const {
    TileOffsets to;
    to.firstTile = minTile;
    if (llvm::all_equal(offsets)) {
      to.offsets.push_back(offsets.front());
      return to;
    }
    to.offsets.assign(maxTile - minTile + 1, -1);
    for (size_t k = 0; k < perTile.size(); ++k)
      to.offsets[perTile[k].first - minTile] = offsets[k];
    return to;
  }
};

/// Free bytes [begin, end) on a tile.
struct FreeRun {
  int64_t begin, end;
};

/// Returns [begin, end) to `runs` (by offset, none touching another).
void release(std::vector<FreeRun> &runs, int64_t begin, int64_t end) {
  auto next = llvm::lower_bound(runs, begin,
                                [](const FreeRun &r, int64_t at) { return r.begin < at; });
  bool joinsPrevious = next != runs.begin() && std::prev(next)->end == begin;
  bool joinsNext = next != runs.end() && next->begin == end;
  if (joinsPrevious && joinsNext) {
    std::prev(next)->end = next->end;
    runs.erase(next);
  } else if (joinsPrevious) {
    std::prev(next)->end = end;
  } else if (joinsNext) {
    next->begin = begin;
  } else {
    runs.insert(next, FreeRun{begin, end});
  }
}

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
  // What the tile holds may fit while no free run is long enough: the free
  // bytes below the weights and code are in pieces between live data.
  if (int64_t holds = byCategory.total(); holds <= available && !placing.empty())
    s += "; those " + withCommas(holds) + " B would fit, but the free bytes are in pieces, "
         "the largest " + withCommas(largestFree) + " B, and '" + placing + "' needs " +
         withCommas(placingBytes) + " B in one";
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
                                int64_t bytesPerTile, OutOfMemory *report, PhasePool *pool,
                                MemoryLayout *layout) {
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
  // read in place, as large as the largest such region. Sized per compute
  // set on the pool's threads (each walks its vertices' regions: most of
  // the plan's time on a training step), then numbered in order.
  std::vector<std::vector<Allocation>> receiving(program.computeSets.size());
  auto sizeReceiveBuffers = [&](size_t c) {
    const ComputeSet &cs = program.computeSets[c];
    receiving[c].resize(cs.inputs.size());
    if (firstRun[c] < 0)
      return;
    const TileMapping &outMap = program.variables[cs.outputs[0]].mapping;
    for (size_t i = 0; i < cs.inputs.size(); ++i) {
      const auto &in = cs.inputs[i];
      const Variable &var = program.variables[in.var];
      Allocation &a = receiving[c][i];
      a.name = (cs.name.empty() ? "cs" + std::to_string(c) : cs.name) + " input " +
               std::to_string(i);
      a.category = Temporaries;
      a.order = 1;
      a.birth = firstRun[c];
      a.death = lastRun[c];
      outMap.forEachPiece([&](int64_t tile, const Box &piece) {
        if (piece.numElements() == 0)
          return;
        Box region = in.map.region(cs.loopBox(piece), var.shape);
        if (!isLocalPiece(program, in.var, region, tile))
          a.add(tile, region.numElements() * var.elementBytes());
      });
    }
  };
  if (pool)
    pool->run(receiving.size(), sizeReceiveBuffers);
  else
    for (size_t c = 0; c < receiving.size(); ++c)
      sizeReceiveBuffers(c);
  std::vector<std::vector<int64_t>> recvAlloc(program.computeSets.size());
  for (size_t c = 0; c < receiving.size(); ++c) {
    recvAlloc[c].assign(receiving[c].size(), -1);
    for (size_t i = 0; i < receiving[c].size(); ++i) {
      if (receiving[c][i].perTile.empty())
        continue;
      recvAlloc[c][i] = allocs.size();
      allocs.push_back(std::move(receiving[c][i]));
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

  if (layout) {
    // Before placing, so that a program that does not fit still tells
    // what it would need.
    std::vector<int64_t> variableOf(allocs.size(), -1);
    for (size_t v = 0; v < numVars; ++v)
      if (varAlloc[v] >= 0)
        variableOf[varAlloc[v]] = v;
    std::vector<std::pair<int64_t, int64_t>> bufferOf(allocs.size(), {-1, -1});
    for (size_t c = 0; c < recvAlloc.size(); ++c)
      for (size_t i = 0; i < recvAlloc[c].size(); ++i)
        if (recvAlloc[c][i] >= 0)
          bufferOf[recvAlloc[c][i]] = {int64_t(c), int64_t(i)};
    layout->items.clear();
    layout->items.reserve(allocs.size());
    for (size_t i = 0; i < allocs.size(); ++i) {
      const Allocation &a = allocs[i];
      layout->items.push_back({a.name, categoryName(a.category), variableOf[i], bufferOf[i].first,
                               bufferOf[i].second, a.birth, a.death, a.perTile});
    }
    layout->code = code;
    layout->steps = numSteps;
  }

  // Everything live at step `t` on `tile`, largest first, for reports.
  auto liveOn = [&](int64_t tile, int64_t t, const Allocation *extra,
                    OutOfMemory &oom) {
    for (const Allocation &a : allocs)
      if (&a != extra && a.placed && a.birth <= t && t <= a.death)
        if (int64_t b = a.bytesOn(tile))
          oom.live.push_back({a.name, categoryName(a.category), b}),
              addTo(oom.byCategory, a.category, b);
    if (extra)
      if (int64_t b = extra->bytesOn(tile))
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
  // between the short-lived allocations below them. What they leave is each
  // tile's ceiling, which the other allocations stay under.
  std::vector<int64_t> ceiling(numTiles);
  for (int64_t tile = 0; tile < numTiles; ++tile)
    ceiling[tile] = alignDown(bytesPerTile - code[tile]);
  for (Allocation &a : allocs) {
    if (a.category != Weights)
      continue;
    for (auto [tile, bytes] : a.perTile) {
      int64_t offset = ceiling[tile] - alignUp(bytes);
      if (offset < 0) {
        OutOfMemory oom;
        oom.tile = tile;
        oom.needed = bytesPerTile - offset;
        oom.available = bytesPerTile;
        oom.step = stepDescription(program, -1);
        liveOn(tile, 0, &a, oom);
        return overflow(std::move(oom));
      }
      a.offsets.push_back(offset);
      ceiling[tile] = offset;
    }
    a.placed = true;
  }

  // The rest in program order: by birth step; at a step, what comes from
  // the host first, then receive buffers, then the step's results. Each
  // piece takes the lowest offset on its tile where it fits between the
  // pieces still live there.
  std::vector<size_t> order(allocs.size());
  std::iota(order.begin(), order.end(), 0);
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return std::make_pair(allocs[a].birth, allocs[a].order) <
           std::make_pair(allocs[b].birth, allocs[b].order);
  });
  // Per tile, its free runs below the ceiling, by offset. What dies before
  // an allocation's birth is freed first (allocations come by birth, so
  // what died is gone for good), each run merged with its neighbours.
  std::vector<std::vector<FreeRun>> freeRuns(numTiles);
  for (int64_t tile = 0; tile < numTiles; ++tile)
    if (ceiling[tile] > 0)
      freeRuns[tile].push_back({0, ceiling[tile]});
  std::vector<std::vector<size_t>> dying(numSteps + 1);
  int64_t freedBefore = 0; // steps whose deaths are freed
  for (size_t index : order) {
    Allocation &a = allocs[index];
    if (a.category == Weights)
      continue; // placed above
    for (; freedBefore < a.birth; ++freedBefore)
      for (size_t d : dying[freedBefore]) {
        const Allocation &dead = allocs[d];
        for (size_t k = 0; k < dead.perTile.size(); ++k)
          release(freeRuns[dead.perTile[k].first], dead.offsets[k],
                  dead.offsets[k] + alignUp(dead.perTile[k].second));
      }
    for (auto [tile, bytes] : a.perTile) {
      std::vector<FreeRun> &runs = freeRuns[tile];
      int64_t size = alignUp(bytes);
      auto run = llvm::find_if(runs, [&](const FreeRun &r) { return r.end - r.begin >= size; });
      if (run == runs.end()) {
        // It would go at the bottom of the free run under the ceiling, if
        // any: its top there, plus the weights and code above, is more
        // than the tile has, however its free bytes are in pieces.
        int64_t top = !runs.empty() && runs.back().end == ceiling[tile] ? runs.back().begin
                                                                        : ceiling[tile];
        OutOfMemory oom;
        oom.tile = tile;
        oom.needed = top + size + bytesPerTile - ceiling[tile];
        oom.available = bytesPerTile;
        oom.placing = a.name;
        oom.placingBytes = bytes;
        for (const FreeRun &r : runs)
          oom.largestFree = std::max(oom.largestFree, r.end - r.begin);
        oom.step = stepDescription(program, a.order == 0 ? -1 : a.birth);
        liveOn(tile, a.birth, &a, oom);
        return overflow(std::move(oom));
      }
      a.offsets.push_back(run->begin);
      run->begin += size;
      if (run->begin == run->end)
        runs.erase(run);
    }
    a.placed = true;
    dying[a.death].push_back(index);
  }

  MemoryPlan plan;
  plan.bytesPerTile = bytesPerTile;
  plan.variables.resize(numVars);
  for (size_t v = 0; v < numVars; ++v)
    if (varAlloc[v] >= 0)
      plan.variables[v] = allocs[varAlloc[v]].tileOffsets();
  plan.receiveBuffers.resize(program.computeSets.size());
  for (size_t c = 0; c < recvAlloc.size(); ++c)
    for (int64_t a : recvAlloc[c])
      plan.receiveBuffers[c].push_back(a >= 0 ? allocs[a].tileOffsets() : TileOffsets());

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
