#!/usr/bin/python3
"""How near the tile planner gets to the chip's limit, one matmul at a time.

For each case it builds a one-node ONNX model (fp32, random weights with a
fixed seed), compiles it with `tessera-compile --summary` for one ipu2, and
prints from the summary:

- the estimated cycles on the device (without the host streams, which the
  host link sets whatever the plan) and the roofline (multiply-accumulates
  at the fp32 rate of every tile: 16 per tile per cycle on an ipu2);
- the share of the fp32 peak (roofline / estimate);
- the fullest tile's peak memory and the mean over all tiles, and their
  ratio (how evenly the plan spreads its operands and temporaries);
- the compile's wall time, or the first line of its error.

Cases: square matmuls N x N by N x N (N = 256 ... 4096) and the matmuls of
a BERT-base layer (d 768, 12 heads, FFN 3072) at batch x sequence 128 and
2048 tokens: the Q/K/V projection, attention scores and context (batched
over heads), the output projection and the two FFN matmuls.

    benchmarks/planner.py [--cases square,bert] [--sizes 256,1024]
                          [--tokens 128,2048] [--option=--available-memory-proportion=0.4]

Run it on an idle machine: compile times are wall-clock figures.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("TESSERA_TOOLS_DIR", os.path.join(ROOT, "build", "bin"))


def matmul_model(a_shape, b_shape, weight):
    """y = x @ W, with W an initializer when `weight` (a layer's weights),
    else a second input (attention's activations)."""
    rng = np.random.RandomState(0)
    out = list(a_shape[:-1]) + [b_shape[-1]]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(a_shape))]
    inits = []
    if weight:
        inits.append(numpy_helper.from_array(
            (rng.randn(*b_shape) * 0.02).astype(np.float32), name="W"))
    else:
        inputs.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, list(b_shape)))
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="matmul")],
                              "matmul", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def cases(args):
    if "square" in args.cases:
        for n in args.sizes:
            yield f"square {n}", (n, n), (n, n), True
    if "bert" in args.cases:
        d, heads, ffn = 768, 12, 3072
        for t in args.tokens:
            yield f"bert {t} qkv", (t, d), (d, 3 * d), True
            # Scores and context over 128-token sequences: t/128 of them.
            b = heads * max(1, t // 128)
            s = min(t, 128)
            yield f"bert {t} scores", (b, s, d // heads), (b, d // heads, s), False
            yield f"bert {t} context", (b, s, s), (b, s, d // heads), False
            yield f"bert {t} out-proj", (t, d), (d, d), True
            yield f"bert {t} ffn1", (t, d), (d, ffn), True
            yield f"bert {t} ffn2", (t, ffn), (ffn, d), True


def number(text):
    return int(text.replace(",", ""))


def run_case(name, a_shape, b_shape, weight, options, tmp):
    path = os.path.join(tmp, "m.onnx")
    onnx.save(matmul_model(a_shape, b_shape, weight), path)
    macs = int(np.prod(a_shape)) * b_shape[-1]
    start = time.perf_counter()
    proc = subprocess.run([os.path.join(BIN, "tessera-compile"), path, "-o",
                           os.path.join(tmp, "m.tess"), "--summary", *options],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        error = next((l for l in proc.stderr.splitlines() if "error" in l), proc.stderr.strip())
        return {"name": name, "error": error[:160], "seconds": seconds}
    out = proc.stdout
    device = re.search(r"on the device \(without host streams\): ([\d,]+) cycles", out)
    total = re.search(r"one iteration \(batch \d+\): ([\d,]+) cycles", out)
    memory = re.search(r"tile memory: peak ([\d,]+) B on tile \d+ .*mean ([\d,]+) B", out)
    cycles = number((device or total).group(1))
    tiles = 1472
    roofline = -(-macs // (16 * tiles))
    return {"name": name, "cycles": cycles, "roofline": roofline,
            "share": 100.0 * roofline / cycles, "peak": number(memory.group(1)),
            "mean": number(memory.group(2)), "seconds": seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="square,bert")
    parser.add_argument("--sizes", default="256,512,1024,2048,4096")
    parser.add_argument("--tokens", default="128,2048")
    parser.add_argument("--option", action="append", default=[],
                        help="an option passed to tessera-compile (repeatable)")
    args = parser.parse_args()
    args.cases = args.cases.split(",")
    args.sizes = [int(n) for n in args.sizes.split(",")]
    args.tokens = [int(n) for n in args.tokens.split(",")]
    print(f"{'case':<22} {'cycles':>11} {'roofline':>10} {'peak':>6} "
          f"{'tile peak B':>12} {'mean B':>9} {'ratio':>5} {'compile':>8}")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name, a, b, weight in cases(args):
            r = run_case(name, a, b, weight, args.option, tmp)
            if "error" in r:
                failed = True
                print(f"{name:<22} {r['error']}")
                continue
            print(f"{name:<22} {r['cycles']:>11,} {r['roofline']:>10,} {r['share']:>5.1f}% "
                  f"{r['peak']:>12,} {r['mean']:>9,} {r['peak'] / max(r['mean'], 1):>5.2f} "
                  f"{r['seconds']:>7.1f}s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
