#!/usr/bin/python3
"""Import + graph-pipeline wall time and peak memory of tessera-compile.

Exports the model at bench time (random weights, nothing downloaded), then
runs `tessera-compile --compile-to=graph` several times and prints the best
and median wall time, peak resident memory, and the phase split reported by
--mlir-timing. Not part of the tests: timings on shared machines are noisy.

    test/bench/bench_import.py [--model resnet50] [--runs 5] [--build build]
"""
import argparse
import os
import re
import statistics
import tempfile

from benchutil import ROOT, export, timed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()

    compiler = os.path.join(args.build, "bin", "tessera-compile")
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, f"{args.model}.onnx")
        export(args.model, onnx_path)
        size_mb = os.path.getsize(onnx_path) / 2**20
        base = [compiler, onnx_path, "--compile-to=graph", "--emit-bytecode",
                "-o", os.path.join(tmp, "out.mlirbc")]
        walls, peaks = [], []
        for _ in range(args.runs):
            wall, peak, _, _ = timed(base)
            walls.append(wall)
            peaks.append(peak)
        _, _, _, timing = timed(base + ["--mlir-timing"])

    phases = {}
    for name in ("import", "passes", "output"):
        m = re.search(r"([\d.]+) \([\s\d.]+%\)\s+" + name + r"\s*$", timing, re.M)
        if m:
            phases[name] = float(m.group(1))
    print(f"model:        {args.model} ({size_mb:.1f} MiB ONNX)")
    print(f"runs:         {args.runs}")
    print(f"wall time:    best {min(walls):.3f} s, median {statistics.median(walls):.3f} s"
          f"  (target < 2 s)")
    print(f"peak memory:  {max(peaks):.0f} MiB  (target < 1024 MiB)")
    if phases:
        print("phases:       " + ", ".join(f"{k} {v:.3f} s" for k, v in phases.items()))


if __name__ == "__main__":
    main()
