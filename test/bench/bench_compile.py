#!/usr/bin/python3
"""Whole-compile and executable-cache figures, and the host reference run.

Exports the model (random weights), then prints: tessera-compile wall time and
peak memory to a .tess (cold, no cache), the cache-miss and cache-hit wall
times and their ratio, and the host reference time per inference next to
PyTorch's on the same cores. Not part of the tests (shared, noisy machines).

    test/bench/bench_compile.py [--model resnet50] [--runs 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from benchutil import ROOT, export, pytorch_ms, timed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "model.onnx")
        export(args.model, onnx_path)
        tess = os.path.join(tmp, "model.tess")
        compile_cmd = [os.path.join(bin_dir, "tessera-compile"), onnx_path, "-o", tess]
        walls, peaks = [], []
        for _ in range(args.runs):
            w, p, _, _ = timed(compile_cmd)
            walls.append(w)
            peaks.append(p)
        cache = os.path.join(tmp, "cache")
        miss, _, _, _ = timed(compile_cmd + ["--cache-dir", cache])
        hits = [timed(compile_cmd + ["--cache-dir", cache])[0] for _ in range(args.runs)]

        subprocess.run([sys.executable, "-c",
                        "import numpy as np; np.save('%s', np.random.default_rng(0)"
                        ".standard_normal((1,3,224,224), dtype=np.float32))" %
                        os.path.join(tmp, "x.npy")], check=True)
        _, _, out, _ = timed([os.path.join(bin_dir, "tessera-run"), tess, "--reference",
                              "--input", os.path.join(tmp, "x.npy"),
                              "--iterations", str(args.runs)])
        ref_ms = float(out.split("host reference:")[1].split("ms")[0])
        torch_ms = pytorch_ms(args.model, args.runs)

    print(f"model:               {args.model}, batch 1, fp32 ({os.cpu_count()} cores)")
    print(f"compile to .tess:    best {min(walls):.2f} s, median {statistics.median(walls):.2f} s, "
          f"peak {max(peaks):.0f} MiB")
    print(f"cache miss / hit:    {miss:.2f} s / {min(hits):.3f} s  "
          f"({miss / min(hits):.0f}x faster on a hit)")
    print(f"host reference run:  {ref_ms:.1f} ms per inference "
          f"(PyTorch on the same cores: {float(torch_ms):.1f} ms)")


if __name__ == "__main__":
    main()
