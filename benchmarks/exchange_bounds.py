#!/usr/bin/python3
"""What the machine allows a model's convolutions and matmuls, next to the plan.

For each Conv, Gemm and MatMul of an ONNX model (fp32) it prints, on one
ipu2 (the numbers of include/tessera/Target/IPUTarget.h, repeated below):

- the roofline: multiply-accumulates at 16 per tile per cycle on every tile;
- a lower bound on any plan's cycles under the machine's rules: a tile
  computes the outputs it holds from operands it holds or receives at 4
  bytes per cycle, and each step is bulk-synchronous: an exchange phase,
  then a compute phase, then a sync, so a step takes its busiest tile's
  receive plus its slowest tile's compute;
- the planned estimate (`tessera-compile --summary`, every step of the op);
- bound / roofline, the steps bound / roofline, estimate / steps bound
  and estimate / roofline; the ops
  planned over 4x their roofline; and for the whole program, the planned
  cycles on the device against the roofline and the bound.

The bound, per op: outputs O (each a sum of K products), operands I (input)
and W (weights) elements, T tiles. Split the reduction r ways (r partial
sums per output, combined later). Let M be the most outputs-partials any
tile computes (M >= O r / T): that tile's compute phase takes M K / (16 r)
cycles. A tile with m of them, a block of S output positions by C output
channels (S C = m), needs S K_in / r input and C K / r weight elements, at
least 2 sqrt(m K_in K) / r (K_in: the input channels, a window's positions
shared); since m <= M, sqrt(m) >= m / sqrt(M), so the tiles need at least
O r 2 sqrt(K_in K) / (r sqrt(M)) elements in all, of which at most I + W
are held locally (one copy of each element); the exchange phase takes at
least their mean over the tiles. Combining the partials moves at least
(r - 1) O elements more. So the op takes at least

    M K / (16 r) + max(0, 2 O sqrt(K_in K) / sqrt(M) - I - W) / T
      + (r - 1) O / T + one sync,

least over M in [O r / T, O r] (convex in M: its minimum is at an end, at
the stationary point, or where the max(0, .) turns zero) and over every r.
The whole program's bound sums its ops', assuming each op's compute is a
phase of its own, as Tessera plans them (independent branches -- a
ResNet's downsample beside its first convolution, attention's Q, K and V
-- could share one, paying the larger compute, not the sum); exchange may
move between steps (the sum of every step's busiest receive is at least
the total received over T). The combining receive assumes one split r per
op, each output's partials on distinct tiles. Halos, strides, uneven pieces, fills, vertex
overheads and the other ops only add to a real plan; a second copy of an
operand (a weight replicated, an output recomputed) is outside these rules.
Tessera does keep copies of some weights (ipu-plan-tiles mirrors a
constant weight over the blocks of tiles reading it, where memory allows):
an op whose weights are mirrored may be planned below its bound here.

The steps bound adds what a plan pays when each op runs in steps of its
own, as Tessera and Poplar run them (an op's compute set, its exchange and
its sync; a split's partial sums, then a combining step), at the cost
model's rates: the busiest tile's vertex launch and one row's set-up
(60 + 4 cycles) in each step; and for a split (r > 1) the combining step's
sync, exchange phase (30) and vertex, and its r - 1 additions per output
on the vector unit (2 fp32 lanes), (r - 1) O / (2 T). These are charged by
every plan that keeps ops apart; only fusing ops into shared steps (a
pooling computed where the matmul after it reads it, say) goes below it.

    benchmarks/exchange_bounds.py MODEL.onnx [--top 12]
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import shape_inference

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("TESSERA_TOOLS_DIR", os.path.join(ROOT, "build", "bin"))

# ipu2 (include/tessera/Target/IPUTarget.h): tiles, fp32 multiply-accumulates
# per tile per cycle, exchange bytes per tile per cycle, a step's sync.
TILES = 1472
MACS_PER_CYCLE = 16
EXCHANGE_BYTES_PER_CYCLE = 4
SYNC_CYCLES = 120
ELEMENT_BYTES = 4
# The fixed costs of a step that Tessera's cost model charges (IPUTarget's
# exchangeOverheadCycles, vertexOverheadCycles, vertexCyclesPerRow) and the
# vector unit's fp32 lanes (vectorBytesPerCycle / 4).
EXCHANGE_OVERHEAD_CYCLES = 30
VERTEX_OVERHEAD_CYCLES = 60
VERTEX_ROW_CYCLES = 4
VECTOR_LANES = 2


def contractions(model):
    """(name, outputs O, reduction K, input reduction K_in, I, W) per op with
    static shapes; the names of others, skipped."""
    model = shape_inference.infer_shapes(model)
    shapes = {}
    for vi in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        dims = vi.type.tensor_type.shape.dim
        # A symbolic dimension has no size to bound (give the model fixed shapes).
        if all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    for index, node in enumerate(model.graph.node):
        # Unnamed nodes as the importer names them (their op type and index).
        node.name = node.name or f"{node.op_type}_{index}"
        if node.op_type in ("Conv", "Gemm", "MatMul") and not all(
                name in shapes for name in (node.input[0], node.input[1], node.output[0])):
            yield node.name, None, None, None, None, None
            continue
        if node.op_type == "MatMul" and min(len(shapes[node.input[0]]),
                                            len(shapes[node.input[1]])) < 2:
            yield node.name, None, None, None, None, None
            continue
        if node.op_type == "Conv":
            x, w, y = shapes[node.input[0]], shapes[node.input[1]], shapes[node.output[0]]
            window = int(np.prod(w[2:]))
            # Per output: K = (input channels / group) x window products; the
            # input it reads is K_in = those channels (one position of each
            # window, the least a block of outputs shares).
            yield (node.name, int(np.prod(y)), w[1] * window, w[1],
                   int(np.prod(x)), int(np.prod(w)))
        elif node.op_type in ("Gemm", "MatMul"):
            a, b, y = shapes[node.input[0]], shapes[node.input[1]], shapes[node.output[0]]
            trans_b = any(at.name == "transB" and at.i for at in node.attribute)
            k = b[-1] if trans_b else b[-2]
            yield node.name, int(np.prod(y)), k, k, int(np.prod(a)), int(np.prod(b))


def lower_bound(outputs, k, k_in, inputs, weights, steps=False):
    """The least cycles any plan of one contraction takes (see the top);
    with `steps`, any plan that runs it in steps of its own (see the top)."""
    local = inputs + weights
    exchange = ELEMENT_BYTES / EXCHANGE_BYTES_PER_CYCLE  # cycles per element received
    best = math.inf
    for r in range(1, k + 1):
        partials = outputs * r
        compute_per_partial = k / r / MACS_PER_CYCLE
        # The tiles need at least need / sqrt(M) elements, M the busiest
        # tile's outputs-partials.
        need = partials * 2 * math.sqrt(k_in * k) / r

        def cycles(m):
            return m * compute_per_partial + max(0.0, need / math.sqrt(m) - local) * exchange / TILES

        low, high = partials / TILES, partials
        candidates = [low, high]
        # Where the exchange term's derivative cancels the compute's, and
        # where the exchange term reaches zero (then only compute grows).
        stationary = (need * exchange / TILES / (2 * compute_per_partial)) ** (2 / 3)
        zero = (need / local) ** 2 if local > 0 else high
        candidates += [m for m in (stationary, zero) if low < m < high]
        combine = (r - 1) * outputs / TILES * exchange
        total = min(cycles(m) for m in candidates) + combine + SYNC_CYCLES
        if steps:
            # A vertex on every tile with work; a split's combining step:
            # a second sync, exchange phase and vertex, and the r - 1
            # additions per output on the vector unit.
            vertex = VERTEX_OVERHEAD_CYCLES + VERTEX_ROW_CYCLES
            total += vertex
            if r > 1:
                total += (SYNC_CYCLES + EXCHANGE_OVERHEAD_CYCLES + vertex +
                          (r - 1) * outputs / TILES / VECTOR_LANES)
        best = min(best, total)
        # The combining step alone grows past the best: no larger r is better.
        if combine > best:
            break
    return best


def device_cycles(summary):
    """The program's estimated cycles on the device (without host streams)."""
    for line in summary.splitlines():
        if "on the device (without host streams)" in line:
            return int(line.split(":")[1].split("cycles")[0].replace(",", ""))
    return None


def planned_cycles(path):
    """Each op's estimated cycles, summed over its steps (compute sets)."""
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run([os.path.join(BIN, "tessera-compile"), path, "-o",
                                 os.path.join(tmp, "m.tess"), "--summary", "--summary-steps=0"],
                                capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(result.stderr.strip().splitlines()[-1] if result.stderr else "compile failed")
    # None: the whole program's cycles on the device.
    cycles = {None: device_cycles(result.stdout)}
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[6].startswith("cs"):
            op = " ".join(fields[7:])
            cycles[op] = cycles.get(op, 0) + int(fields[0].replace(",", ""))
    return cycles


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--top", type=int, default=12,
                        help="list this many ops, furthest from the bound first")
    args = parser.parse_args()
    planned = planned_cycles(args.model)
    rows, skipped = [], []
    for name, outputs, k, k_in, inputs, weights in contractions(onnx.load(args.model)):
        if outputs is None:
            skipped.append(name)
            continue
        roofline = outputs * k / (TILES * MACS_PER_CYCLE)
        bound = lower_bound(outputs, k, k_in, inputs, weights)
        steps = lower_bound(outputs, k, k_in, inputs, weights, steps=True)
        rows.append((name, roofline, bound, steps, planned.get(name)))
    print(f"{'op':44s} {'roofline':>9s} {'bound':>9s} {'steps':>9s} {'planned':>9s} "
          f"{'bound/roof':>10s} {'steps/roof':>10s} {'plan/steps':>10s} {'plan/roof':>9s}")
    shown = sorted(rows, key=lambda r: -(r[4] or 0) / r[3])[:args.top]
    for name, roofline, bound, steps, plan in shown:
        print(f"{name[-44:]:44s} {roofline:9,.0f} {bound:9,.0f} {steps:9,.0f} {plan or 0:9,d} "
              f"{bound / roofline:10.2f} {steps / roofline:10.2f} {(plan or 0) / steps:10.2f} "
              f"{(plan or 0) / roofline:9.2f}")
    if skipped:
        print(f"skipped (shapes not static, or a 1-D matmul): {', '.join(skipped)}")
    if not rows:
        sys.exit("no convolution or matmul with static shapes")
    roof = sum(r[1] for r in rows)
    bound = sum(r[2] for r in rows)
    steps = sum(r[3] for r in rows)
    plan = sum(r[4] or 0 for r in rows)
    print(f"{'all ' + str(len(rows)) + ' ops':44s} {roof:9,.0f} {bound:9,.0f} {steps:9,.0f} "
          f"{plan:9,d} {bound / roof:10.2f} {steps / roof:10.2f} {plan / steps:10.2f} "
          f"{plan / roof:9.2f}")
    share = f"{roof / plan:.1%}" if plan else "not found in the summary"
    print(f"share of the fp32 peak at best: {roof / bound:.1%}, in steps of their own "
          f"{roof / steps:.1%}; planned: {share}")
    # Issue 30's per-layer target: no op over 4x its roofline; for some, no
    # plan in steps of their own reaches it.
    over = [(r[0], (r[4] or 0) / r[1], r[3] / r[1]) for r in rows if (r[4] or 0) > 4 * r[1]]
    print(f"ops planned over 4x their roofline: {len(over)}"
          + "".join(f"\n  {name} {ratio:.2f}x (in steps of its own at least {least:.2f}x)"
                    for name, ratio, least in sorted(over, key=lambda o: -o[1])))
    # The whole program: its other ops add to the plan, never to the bound.
    device = planned.get(None)
    if device:
        print(f"whole program on the device: planned {device:,d} cycles, "
              f"{device / roof:.2f}x the roofline; no plan under these rules below "
              f"{bound:,.0f} ({bound / roof:.2f}x), none running each op in steps of its "
              f"own below {steps:,.0f} ({steps / roof:.2f}x)")


if __name__ == "__main__":
    main()
