//===- ProgramBuilder.h - machine programs built by hand, for tests -*- C++ -*-===//

#ifndef TESSERA_TEST_UNIT_PROGRAMBUILDER_H
#define TESSERA_TEST_UNIT_PROGRAMBUILDER_H

#include "tessera/Runtime/MachineProgram.h"

#include <string>
#include <vector>

namespace tessera::runtime::test_programs {

/// Programs built by hand: variables on explicit grids, elementwise compute
/// sets (identity access) with one kernel per piece size.
struct Builder {
  MachineProgram p;

  int64_t var(const char *name, std::vector<int64_t> shape, VarKind kind,
              TileMapping mapping) {
    Variable v;
    v.name = name;
    v.shape = shape;
    v.kind = kind;
    v.mapping = std::move(mapping);
    if (kind == VarKind::Weight)
      v.weight = 0;
    p.variables.push_back(v);
    return p.variables.size() - 1;
  }
  int64_t onTile(const char *name, int64_t elements, VarKind kind, int64_t tile = 0) {
    return var(name, {elements}, kind, TileMapping::singleTile({elements}, tile));
  }
  /// out = f(inputs...), elementwise, each input read like the output, or
  /// whole when `full`.
  void compute(std::vector<int64_t> inputs, int64_t out, bool full = false,
               int64_t codeBytes = 0) {
    ComputeSet cs;
    cs.name = "cs" + std::to_string(p.computeSets.size());
    cs.location = "op \"/n" + std::to_string(p.computeSets.size()) + "\"";
    const Variable &o = p.variables[out];
    cs.loopRanges = o.shape;
    for (size_t d = 0; d < o.shape.size(); ++d)
      cs.outputLoops.push_back(d);
    for (int64_t in : inputs) {
      AccessMap m;
      m.full = full;
      if (!full)
        for (size_t d = 0; d < o.shape.size(); ++d) {
          m.coeffs.push_back(std::vector<int64_t>(o.shape.size(), 0));
          m.coeffs.back()[d] = 1;
          m.consts.push_back(0);
        }
      cs.inputs.push_back({in, m});
    }
    cs.outputs = {out};
    std::vector<std::vector<int64_t>> sizes;
    o.mapping.forEachPiece([&](int64_t, const Box &b) {
      if (!cs.kernelFor(b.sizes))
        cs.kernels.push_back({"k" + std::to_string(p.computeSets.size()) + "_" +
                                  std::to_string(cs.kernels.size()),
                              std::vector<int64_t>(b.sizes.begin(), b.sizes.end()), 10, codeBytes});
    });
    p.steps.push_back({Step::Kind::Compute, static_cast<int64_t>(p.computeSets.size())});
    p.computeSets.push_back(cs);
  }
};

} // namespace tessera::runtime::test_programs

#endif // TESSERA_TEST_UNIT_PROGRAMBUILDER_H
