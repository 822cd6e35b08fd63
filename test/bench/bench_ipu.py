#!/usr/bin/python3
"""IPU-model figures for a torchvision model (default ResNet-50, batch 1, fp32).

Prints: tessera-compile wall time and peak memory; the IPU model's wall time
per inference (and how much of it the exchange copies and the vertex calls
take) next to the host reference path's, PyTorch's and ONNX Runtime's
on the same cores; and the estimated ipu2 cycles of every convolution and
matmul next to its roofline bound (FLOPs / the chip's peak fp32 FLOPs per
cycle), with the ratio per layer and in total. Not part of the tests (shared,
noisy machines).

The IPU model and ONNX Runtime run in alternating rounds (--rounds) and each
reports its fastest round: on a shared machine whose speed drifts by up to 2x
over minutes, measuring one after the other would compare the drift.

ONNX Runtime is onnxruntime-node from npm, installed on first use under
build/bench/ (`npm install onnxruntime-node --ignore-scripts`); without npm
its column says so.

    test/bench/bench_ipu.py [--model resnet50] [--runs 3] [--rounds 3] [--layers]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from benchutil import ROOT, export, pytorch_ms, timed


def onnxruntime_ms(onnx_path, image, runs, threads):
    node_dir = os.path.join(ROOT, "build", "bench")
    module = os.path.join(node_dir, "node_modules", "onnxruntime-node")
    if not shutil.which("node"):
        return None, "node not installed"
    if not os.path.isdir(module):
        os.makedirs(node_dir, exist_ok=True)
        r = subprocess.run(["npm", "install", "--prefix", node_dir, "onnxruntime-node",
                            "--ignore-scripts", "--no-audit", "--no-fund"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None, "npm install onnxruntime-node failed"
    r = subprocess.run(["node", os.path.join(ROOT, "test", "bench", "ort_bench.js"),
                        onnx_path, image, str(runs), str(threads)],
                       capture_output=True, text=True,
                       env={**os.environ, "NODE_PATH": os.path.join(node_dir, "node_modules")})
    if r.returncode != 0:
        return None, r.stderr.strip()[:200]
    result = json.loads(r.stdout)
    return result["median_ms"], f"onnxruntime-node {result['version']}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating IPU model / ONNX Runtime rounds")
    parser.add_argument("--layers", action="store_true", help="print every conv/matmul")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    threads = os.cpu_count()
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "model.onnx")
        export(args.model, onnx_path)
        tess = os.path.join(tmp, "model.tess")
        wall, peak, _, _ = timed([os.path.join(bin_dir, "tessera-compile"), onnx_path,
                                  "-o", tess])

        image = os.path.join(tmp, "x.npy")
        subprocess.run([sys.executable, "-c",
                        "import numpy as np; x = np.random.default_rng(0).standard_normal("
                        f"(1,3,224,224), dtype=np.float32); np.save('{image}', x); "
                        f"x.tofile('{image}.f32')"], check=True)
        run = [os.path.join(bin_dir, "tessera-run"), tess, "--input", image,
               "--iterations", str(args.runs), "--warmup", "1"]
        ipu_rounds, ort_rounds = [], []
        ort_what = ""
        for r in range(max(args.rounds, 1)):
            profile_dir = os.path.join(tmp, f"profile{r}")
            _, _, ipu_out, _ = timed(run + ["--profile", profile_dir])
            ipu_ms = float(re.search(r"IPU model on the host: ([\d.]+) ms", ipu_out)[1])
            ipu_rounds.append((ipu_ms, profile_dir))
            ort_ms, ort_what = onnxruntime_ms(onnx_path, image + ".f32",
                                              max(args.runs, 5), threads)
            if ort_ms is not None:
                ort_rounds.append(ort_ms)
        ipu_ms, profile_dir = min(ipu_rounds)
        ort_ms = min(ort_rounds) if ort_rounds else None
        _, _, ref_out, _ = timed(run + ["--reference"])
        ref_ms = float(re.search(r"host reference: ([\d.]+) ms", ref_out)[1])
        torch_ms = pytorch_ms(args.model, args.runs, threads)
        with open(os.path.join(profile_dir, "profile.json")) as f:
            profile = json.load(f)

    target = profile["target"]
    flops_per_cycle = target["peak_flops_fp32"] / target["clock_hz"]
    # A layer is every step of one source op that does multiply-accumulates:
    # a split reduction is its partial-results step and its combining step.
    by_location = {}
    for s in profile["steps"]:
        by_location.setdefault(s["location"], []).append(s)
    layers = []
    for location, steps in by_location.items():
        macs = sum(s["macs"] for s in steps)
        if macs > 0:
            layers.append({"location": location, "macs": macs,
                           "steps": len(steps),
                           **{k: sum(s[k] for s in steps)
                              for k in ("cycles", "exchange_cycles", "compute_cycles")}})
    print(f"model:                {args.model}, batch 1, fp32, on {threads} cores")
    print(f"compile to .tess:     {wall:.2f} s, peak {peak:.0f} MiB")
    print(f"IPU model run:        {ipu_ms:.1f} ms per inference, fastest of "
          f"{len(ipu_rounds)} rounds ({', '.join(f'{m:.0f}' for m, _ in ipu_rounds)}); "
          f"host time in exchange phases {profile['host_exchange_ms']:.1f} ms, in "
          f"vertices with their own copies {profile['host_compute_ms']:.1f} ms")
    print(f"host reference run:   {ref_ms:.1f} ms per inference")
    print(f"PyTorch:              {torch_ms:.1f} ms per inference")
    if ort_ms is not None:
        print(f"ONNX Runtime:         {ort_ms:.1f} ms per inference ({ort_what}), "
              f"fastest of {len(ort_rounds)} rounds "
              f"({', '.join(f'{m:.0f}' for m in ort_rounds)}); "
              f"IPU model / ONNX Runtime = {ipu_ms / ort_ms:.1f}x")
    else:
        print(f"ONNX Runtime:         not measured ({ort_what})")
    print(f"estimated on {target['name']}:     {profile['cycles']:,} cycles "
          f"({profile['seconds'] * 1e3:.3f} ms): compute {profile['compute_cycles']:,}, "
          f"exchange {profile['exchange_cycles']:,}, sync {profile['sync_cycles']:,}")
    total_roof = sum(2 * s["macs"] / flops_per_cycle for s in profile["steps"])
    layer_cycles = sum(s["cycles"] for s in layers)
    print(f"roofline (FLOPs / peak {flops_per_cycle:,.0f} FLOP/cycle): "
          f"{total_roof:,.0f} cycles for {len(layers)} conv/matmul layers; "
          f"their estimate {layer_cycles:,} = {layer_cycles / total_roof:.1f}x, "
          f"whole program {profile['cycles'] / total_roof:.1f}x")
    ratios = sorted(((s["cycles"] / (2 * s["macs"] / flops_per_cycle), s) for s in layers),
                    key=lambda r: r[0])
    if ratios:
        mid = ratios[len(ratios) // 2][0]
        print(f"per layer ratio:      best {ratios[0][0]:.1f}x, median {mid:.1f}x, "
              f"worst {ratios[-1][0]:.1f}x ({ratios[-1][1]['location']})")
    if args.layers:
        print(f"{'layer':50s} {'MACs':>12s} {'steps':>5s} {'cycles':>9s} "
              f"{'exchange':>9s} {'compute':>9s} {'roofline':>9s} {'ratio':>6s}")
        for s in layers:
            roof = 2 * s["macs"] / flops_per_cycle
            print(f"{s['location'][-50:]:50s} {s['macs']:12,} {s['steps']:5d} "
                  f"{s['cycles']:9,} {s['exchange_cycles']:9,} {s['compute_cycles']:9,} "
                  f"{roof:9,.0f} {s['cycles'] / roof:6.1f}")


if __name__ == "__main__":
    main()
