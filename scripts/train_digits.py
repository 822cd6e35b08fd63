#!/usr/bin/python3
"""Trains a small CNN on scikit-learn's 8x8 digits with the Tessera CLI.

The data set ships with Debian's python3-sklearn (nothing is downloaded).
The model is exported to ONNX with random weights (fixed seed), compiled
as a training step (tessera-compile --train), trained on the IPU model
(tessera-run --train-data), and the trained weights it saves are loaded into
the same PyTorch model to measure accuracy on the held-out test digits.

Usage: scripts/train_digits.py OUT_DIR [--epochs E] [--tools build/bin]
           [--micro-batch B] [--compile-args "--num-ipus 4 --pipeline auto ..."]

With --compile-args "--num-ipus 4 --pipeline auto --gradient-accumulation 4"
and --micro-batch 8, the same updates (32 samples each) train pipelined
over four IPUs.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch
from sklearn.datasets import load_digits


class DigitsCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


def command(args):
    print("$ " + " ".join(os.path.relpath(a) if os.path.exists(a) else a for a in args),
          flush=True)
    subprocess.run(args, check=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--micro-batch", type=int, default=32)
    parser.add_argument("--compile-args", default="",
                        help="more tessera-compile flags (stages, precision, ...)")
    parser.add_argument("--tools", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.time()

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    train, test = slice(0, 1440), slice(1440, None)  # 1440 = 45 runs of 32
    np.savez(f"{args.out}/digits_train.npz", x=x[train], labels=y[train])

    torch.manual_seed(0)
    model = DigitsCNN()
    onnx_path = f"{args.out}/digits_cnn.onnx"
    torch.onnx.export(model, torch.zeros(32, 1, 8, 8), onnx_path, input_names=["x"],
                      output_names=["logits"], opset_version=17,
                      dynamic_axes={"x": {0: "batch"}})
    tess = f"{args.out}/digits_train.tess"
    weights = f"{args.out}/digits_weights.npz"
    tools = os.path.abspath(args.tools)
    compile_start = time.time()
    command([f"{tools}/tessera-compile", onnx_path, "--train", "--loss", "cross-entropy",
             "--optimizer", "adam:lr=0.005", "--micro-batch-size", str(args.micro_batch),
             *args.compile_args.split(), "-o", tess])
    print(f"compiled in {time.time() - compile_start:.1f} s", flush=True)
    command([f"{tools}/tessera-run", tess, "--train-data",
             f"{args.out}/digits_train.npz", "--epochs", str(args.epochs),
             "--save-weights", weights])

    trained = np.load(weights)
    model.load_state_dict({k: torch.from_numpy(trained[k]) for k in model.state_dict()})
    with torch.no_grad():
        predicted = model(torch.from_numpy(x[test])).argmax(1).numpy()
    accuracy = (predicted == y[test]).mean()
    print(f"test accuracy on {len(predicted)} held-out digits: {accuracy:.3f} "
          f"(trained on the IPU model, whole run {time.time() - start:.1f} s)")
    return 0 if accuracy >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
