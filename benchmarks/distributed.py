#!/usr/bin/python3
"""tessera-launch: host time per weight update with 1, 2 and 4 instances, and
the estimated all-reduce at 16, 64 and 256 replicas next to the compute.

Host time: the digits CNN and a transformer encoder layer compiled for 4
replicas, trained by tessera-run in one process and as 2 and 4 instances of
tessera-launch on this machine's cores, alternating, `--rounds` times (the
fastest of each). The weights are compared with one process's: identical.

Estimate: each model (and ResNet-50's training step at micro-batch 1, unless
--no-resnet) compiled for R replicas; the summary's compute, exchange and
all-reduce cycles per iteration, and the all-reduce's GW-Link part past one
IPU-Link domain (a Pod64). Not a test: compare figures of one sitting.

    benchmarks/distributed.py [--rounds 3] [--no-resnet]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "bench"))
from benchutil import ROOT, export  # noqa: E402

BIN = os.path.join(ROOT, "build", "bin")
TRAINING = {
    "cnn": ["--loss", "cross-entropy", "--optimizer", "adam:lr=0.001", "--micro-batch-size", "8"],
    "encoder": ["--loss", "mse", "--optimizer", "sgd:lr=0.01,momentum=0.9",
                "--micro-batch-size", "4"],
    "resnet50": ["--loss", "cross-entropy", "--optimizer", "sgd:lr=0.01",
                 "--micro-batch-size", "1"],
}


def models(tmp):
    """The digits CNN and an encoder layer as ONNX training graphs, with data."""
    torch.manual_seed(0)
    mode = torch.onnx.TrainingMode.TRAINING
    cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 32, 3, padding=1),
                              torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(32 * 16, 10))
    torch.onnx.export(cnn, torch.randn(8, 1, 8, 8), os.path.join(tmp, "cnn.onnx"),
                      input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "n"}}, training=mode, do_constant_folding=False)
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
    torch.onnx.export(layer.train(), torch.randn(4, 32, 128), os.path.join(tmp, "encoder.onnx"),
                      input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "n"}}, training=mode, do_constant_folding=False)
    rng = np.random.default_rng(0)
    np.savez(os.path.join(tmp, "cnn.npz"),
             x=rng.standard_normal((1024, 1, 8, 8)).astype(np.float32),
             labels=rng.integers(0, 10, 1024).astype(np.int64))
    np.savez(os.path.join(tmp, "encoder.npz"),
             x=rng.standard_normal((256, 32, 128)).astype(np.float32),
             labels=rng.standard_normal((256, 32, 128)).astype(np.float32))


def compile_model(tmp, name, replicas, summary=False):
    out = os.path.join(tmp, f"{name}{replicas}.tess")
    result = subprocess.run([os.path.join(BIN, "tessera-compile"), os.path.join(tmp, name + ".onnx"),
                             "--train", *TRAINING[name], "--replicas", str(replicas), "-o", out]
                            + (["--summary"] if summary else []),
                            capture_output=True, text=True, check=True)
    return out, result.stdout


def per_update_ms(tmp, name, instances, weights):
    cmd = [os.path.join(BIN, "tessera-run"), f"{name}4.tess", "--train-data", f"{name}.npz",
           "--epochs", "1", "--save-weights", weights]
    if instances > 1:
        cmd = [os.path.join(BIN, "tessera-launch"), "--num-instances", str(instances),
               "--num-replicas", "4", "--only-output-from-instance", "0", *cmd]
    result = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=True)
    return float(re.search(r"IPU model on the host: ([0-9.]+) ms per weight update",
                           result.stdout).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-resnet", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models(tmp)
        print(f"host time per weight update (4 replicas in all, {os.cpu_count()} cores; "
              f"fastest of {args.rounds} alternating rounds):")
        for name in ("cnn", "encoder"):
            compile_model(tmp, name, 4)
            times = {1: [], 2: [], 4: []}
            for _ in range(args.rounds):
                for instances in times:
                    times[instances].append(
                        per_update_ms(tmp, name, instances, f"w{instances}.npz"))
            same = all(open(os.path.join(tmp, f"w{i}.npz"), "rb").read() ==
                       open(os.path.join(tmp, "w1.npz"), "rb").read() for i in (2, 4))
            print(f"  {name:8s} " + "  ".join(
                f"{i} instance{'s' if i > 1 else ' '}: {min(t):7.2f} ms" for i, t in times.items())
                + f"  (weights {'identical' if same else 'DIFFER'})")
        names = ["cnn", "encoder"]
        if not args.no_resnet:
            export("resnet50", os.path.join(tmp, "resnet50.onnx"))
            names.append("resnet50")
        print("estimated cycles per iteration (ipu2), by replicas:")
        for name in names:
            for replicas in (1, 16, 64, 256):
                _, summary = compile_model(tmp, name, replicas, summary=True)
                line = re.search(r"compute ([0-9,]+) .*exchange ([0-9,]+) .*sync ([0-9,]+)"
                                 r"(?: \(.*?\), all-reduce ([0-9,]+) \(([0-9.]+%)\))?"
                                 r"(?: of which GW-Links ([0-9,]+))?", summary)
                compute, exchange, sync, reduce, share, gw = line.groups()
                print(f"  {name:8s} {replicas:4d} replicas: compute {compute:>10s}  "
                      f"exchange {exchange:>10s}  sync {sync:>8s}  all-reduce "
                      f"{reduce or '0':>10s} ({share or '0%'})"
                      + (f", GW-Links {gw}" if gw else ""))


if __name__ == "__main__":
    main()
