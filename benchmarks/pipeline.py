#!/usr/bin/python3
"""Models over several IPUs: the automatic stage cut against hand-written
layers-per-IPU lists, and one IPU, under the same cost model.

For BERT-base (vocab 30,522, seq 128, 12 distinct layers, random weights,
fixed seed; nothing downloaded) exported to ONNX, it compiles:

- inference on 1 IPU, and on 4 IPUs pipelined (device iterations 4) with
  `--pipeline auto` and with optimum-graphcore's `--layers-per-ipu 0,4,4,4`;
- with `--train`, a training step (mse on the encoder's output, SGD,
  micro-batch 1, gradient accumulation 8) on 4 IPUs with each placement;

and prints, per configuration, the compile's wall time and peak memory, the
estimated cycles per iteration (per weight update when training) and
sequences/s, each IPU's cycles, and the tile memory's peak and mean (or the
compile's first error line). The estimates are the executables' own (the
numbers tessera-run reports); compile times are wall-clock, so run it on an
idle machine.

    benchmarks/pipeline.py [--layers 12] [--train] [--out DIR]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("TESSERA_TOOLS_DIR", os.path.join(ROOT, "build", "bin"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from transformer_models import Bert  # noqa: E402


def compile_summary(onnx_path, tess, flags):
    cmd = ["/usr/bin/time", "-f", "PEAK %M", os.path.join(BIN, "tessera-compile"), onnx_path,
           "--summary", "-o", tess, *flags]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - start
    peak = re.search(r"PEAK (\d+)", proc.stderr)
    return proc, wall, int(peak.group(1)) / 1024 if peak else float("nan")


def figures(text, training):
    """The --summary lines this benchmark reports, as a short string."""
    def find(pattern):
        m = re.search(pattern, text)
        return m.group(1) if m else "?"
    if training:
        # A weight update: its micro-batches, the pipeline's fill and
        # drain, and the optimizer's update once.
        cycles, per_second = find(r"one weight update \(\d+ micro-batches\): ([\d,]+) cycles"), \
            find(r"one weight update \(\d+ micro-batches\): [\d,]+ cycles, ([\d,]+) samples/s")
        rate = "seq/s (fill, drain and update included)"
    else:
        cycles = find(r"one iteration \(batch \d+\): ([\d,]+) cycles")
        per_second = find(r"one iteration \(batch \d+\): [\d,]+ cycles, [\d.e+-]+ ms, ([\d,]+) samples/s")
        rate = "seq/s (steady state)"
    ipus = find(r"per IPU \(its steps, one iteration\): (.*)")
    memory = find(r"tile memory: (peak [\d,]+ B on tile \d+ \([\d.]+% of [\d,]+\), mean [\d,]+ B)")
    unit = "cycles per weight update" if training else "cycles per iteration"
    return (f"{cycles} {unit}, {per_second} {rate}\n"
            f"      per IPU: {ipus}\n      tile memory: {memory}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--train", action="store_true", help="also compile training steps")
    parser.add_argument("--out", help="keep the model and executables here")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="tessera-pipeline-")
    os.makedirs(out, exist_ok=True)

    torch.manual_seed(0)
    model = Bert(layers=args.layers).eval()
    ids = torch.randint(0, 30522, (1, 128))
    onnx_path = os.path.join(out, "bert.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids, torch.zeros_like(ids)), onnx_path,
                          input_names=["ids", "segments"], opset_version=17)
    # optimum-graphcore's BERT placement: the embeddings alone on IPU 0, the
    # layers in thirds over the others ([0,4,4,4] for 12).
    third = args.layers // 3
    manual = f"0,{third},{third},{args.layers - 2 * third}"
    configs = [
        ("inference, 1 IPU", [], False),
        ("inference, 4 IPUs, --pipeline auto",
         ["--num-ipus", "4", "--pipeline", "auto", "--device-iterations", "4"], False),
        (f"inference, 4 IPUs, --layers-per-ipu {manual}",
         ["--num-ipus", "4", "--layers-per-ipu", manual, "--device-iterations", "4"], False),
    ]
    if args.train:
        train = ["--train", "--loss", "mse", "--optimizer", "sgd:lr=1e-4",
                 "--micro-batch-size", "1", "--gradient-accumulation", "8", "--num-ipus", "4"]
        configs += [
            ("training, 4 IPUs, --pipeline auto", train + ["--pipeline", "auto"], True),
            (f"training, 4 IPUs, --layers-per-ipu {manual}",
             train + ["--layers-per-ipu", manual], True),
        ]
    print(f"BERT-base shape, {args.layers} layers, seq 128, batch 1, ipu2; files in {out}")
    for i, (name, flags, training) in enumerate(configs):
        proc, wall, peak = compile_summary(onnx_path, os.path.join(out, f"{i}.tess"), flags)
        print(f"  {name}: compiled in {wall:.1f} s, peak {peak:.0f} MiB", flush=True)
        if proc.returncode != 0:
            errors = [l for l in proc.stderr.splitlines() if "error" in l]
            print(f"      {(errors or proc.stderr.splitlines() or ['?'])[0][:300]}")
            continue
        print("      " + figures(proc.stdout, training), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
