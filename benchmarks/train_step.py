#!/usr/bin/python3
"""Training-step benchmark: compile time, fit, estimated throughput, host time.

For each model (random weights, fixed seed; nothing downloaded) it exports
an ONNX training graph (TrainingMode.TRAINING), compiles a training step
with `tessera-compile --train` at each micro-batch size asked for, and
prints per size:

- the compile's wall time and peak memory, or the first line of its error
  (a step that does not fit one ipu2 names the tile and the bytes);
- when it compiled: `tessera-run --train-data` over --steps weight updates,
  the IPU model's estimated cycles per update and samples/s on the chip,
  and the host's milliseconds per update, next to PyTorch's CPU training
  step (same model, batch and thread count);
- the compiler's estimate split into compute, exchange, sync and the
  cross-replica all-reduce, for each replica count asked for (replicated
  steps are estimated, not run: the IPU model would hold every replica's
  tile memory).

Models: any torchvision classification model by name; bert_base_encoder
(BERT-base's 12 encoder layers from hidden states); tiny_bert (token,
position and segment embeddings of BERT's 30,522-token vocabulary, d 128,
2 layers, 2 heads, a 2-class head on the pooler) and bert_base_layer (one
layer of BERT-base's width, d 768, with the same embeddings), whose inputs
are token and segment ids of sequence 128.

    benchmarks/train_step.py [--models resnet50,bert_base_encoder]
                             [--micro-batch 1,2,4] [--replicas 1,16]
                             [--optimizer sgd:lr=0.01]
                             [--compile-args '--precision fp16.32']
                             [--steps 2] [--out DIR]

Run it on an idle machine: compile and host times are wall-clock figures.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torchvision

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("TESSERA_TOOLS_DIR", os.path.join(ROOT, "build", "bin"))


class BertBaseEncoder(torch.nn.Module):
    """BERT-base's encoder (12 layers, d 768, 12 heads, ff 3072, GELU),
    from hidden states (the embedding's gather gradient is the transformers
    issue's scatter-add) to a pooled 2-class head."""

    def __init__(self, seq=128):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.1,
                                                 activation="gelu", batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
        self.head = torch.nn.Linear(768, 2)
        self.seq = seq

    def forward(self, x):
        return self.head(self.encoder(x)[:, 0])


class BertClassifier(torch.nn.Module):
    """scripts/transformer_models.py's BERT (embeddings, encoder, pooler)
    with a 2-class head on the pooled output."""

    def __init__(self, **sizes):
        super().__init__()
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        from transformer_models import Bert
        self.bert = Bert(**sizes)
        self.head = torch.nn.Linear(sizes["d"], 2)

    def forward(self, ids, segments):
        return self.head(self.bert(ids, segments)[1])


# One sample's inputs: (name, shape, integer ids below this, or None for
# normal floats).
IMAGE = [("x", (3, 224, 224), None)]
BERT_IDS = [("ids", (128,), 30522), ("segments", (128,), 2)]


def build(name):
    """(model, one sample's inputs, classes)."""
    torch.manual_seed(0)
    if name == "bert_base_encoder":
        return BertBaseEncoder(), [("x", (128, 768), None)], 2
    if name == "tiny_bert":
        return BertClassifier(d=128, heads=2, ff=512, layers=2), BERT_IDS, 2
    if name == "bert_base_layer":
        return BertClassifier(d=768, heads=12, ff=3072, layers=1), BERT_IDS, 2
    model = getattr(torchvision.models, name)(num_classes=1000)
    return model, IMAGE, 1000


def sample_inputs(inputs, batch, seed=0):
    """Random inputs of `batch` samples, as numpy arrays by name."""
    rng = np.random.default_rng(seed)
    return {name: rng.integers(0, high, (batch, *shape)) if high else
            rng.standard_normal((batch, *shape), dtype=np.float32)
            for name, shape, high in inputs}


def export(model, inputs, path):
    example = tuple(torch.from_numpy(v) for v in sample_inputs(inputs, 2).values())
    names = [name for name, _, _ in inputs]
    torch.onnx.export(model.train(), example, path, input_names=names,
                      output_names=["logits"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      dynamic_axes={name: {0: "batch"} for name in names})


def timed(cmd):
    """(seconds, peak RSS MiB of the command, completed process), the peak
    from GNU time's report on the last line of stderr."""
    gnu_time = os.path.exists("/usr/bin/time")  # Debian's `time` package
    start = time.perf_counter()
    result = subprocess.run((["/usr/bin/time", "-f", "%M"] if gnu_time else []) + cmd,
                            capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if not gnu_time:
        return seconds, float("nan"), result
    lines = result.stderr.rstrip().splitlines()
    peak = int(lines[-1]) / 1024 if lines and lines[-1].isdigit() else float("nan")
    result.stderr = "\n".join(lines[:-1])
    return seconds, peak, result


def torch_step_ms(model, inputs, classes, batch, steps):
    torch.set_num_threads(os.cpu_count() or 1)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = [torch.from_numpy(v) for v in sample_inputs(inputs, batch).values()]
    y = torch.randint(0, classes, (batch,))
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(*x), y).backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times[1:])  # the first step allocates


def main():
    warnings.filterwarnings("ignore")  # torch.onnx's notes on every BatchNorm
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,bert_base_encoder")
    parser.add_argument("--micro-batch", default="1")
    parser.add_argument("--replicas", default="1")
    parser.add_argument("--optimizer", default="sgd:lr=0.01,momentum=0.9",
                        help="tessera-compile's --optimizer (PyTorch's step uses SGD with "
                             "momentum either way)")
    parser.add_argument("--compile-args", default="",
                        help="more tessera-compile flags, e.g. '--precision fp16.32 "
                             "--recompute checkpoint-every-layer'")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out", default=None, help="keep the files here")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="tessera-train-bench-")
    os.makedirs(out, exist_ok=True)
    print(f"{'model':<20} {'batch':>5} {'compile s':>9} {'peak MiB':>8}  result")
    for name in args.models.split(","):
        model, inputs, classes = build(name)
        onnx_path = os.path.join(out, f"{name}_train.onnx")
        export(model, inputs, onnx_path)
        for batch, replicas in [(b, r) for b in map(int, args.micro_batch.split(","))
                                for r in map(int, args.replicas.split(","))]:
            tess = os.path.join(out, f"{name}_b{batch}_r{replicas}.tess")
            seconds, peak, result = timed(
                [os.path.join(BIN, "tessera-compile"), onnx_path, "--train",
                 "--optimizer", args.optimizer, "--micro-batch-size",
                 str(batch), "--replicas", str(replicas), *args.compile_args.split(),
                 "--summary", "-o", tess])
            label = f"{batch}" if replicas == 1 else f"{batch}x{replicas}"
            if result.returncode != 0:
                first = result.stderr.strip().splitlines()[0] if result.stderr else "?"
                first = re.sub(r"^\S+: error: ", "", first)
                print(f"{name:<20} {label:>5} {seconds:>9.1f} {peak:>8.0f}  "
                      f"does not compile: {first[:300]}")
                continue
            split = re.search(r"^  (compute .*)$", result.stdout, re.M)
            estimate = re.search(r"one iteration \(batch (\d+)\): ([\d,]+) cycles.*?([\d,]+) "
                                 r"samples/s", result.stdout)
            if replicas > 1:
                print(f"{name:<20} {label:>5} {seconds:>9.1f} {peak:>8.0f}  "
                      f"{estimate.group(2)} cycles/update, {estimate.group(3)} samples/s "
                      f"over {replicas} replicas (estimate); {split.group(1)}")
                continue
            data = os.path.join(out, f"{name}_b{batch}_r{replicas}.npz")
            n = batch * args.steps
            np.savez(data, **sample_inputs(inputs, n),
                     labels=np.random.default_rng(1).integers(0, classes, n))
            run = subprocess.run([os.path.join(BIN, "tessera-run"), tess, "--train-data",
                                  data, "--steps", str(args.steps)],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{name:<20} {label:>5} {seconds:>9.1f} {peak:>8.0f}  "
                      f"compiled; run failed: {run.stderr.strip()[:300]}")
                continue
            host = re.search(r"IPU model on the host: ([\d.]+) ms", run.stdout)
            est = re.search(r"estimated on (\S+): ([\d,]+) cycles per weight update, "
                            r"([\d,]+) samples/s", run.stdout)
            ref_ms = torch_step_ms(model, inputs, classes, batch, args.steps)
            print(f"{name:<20} {label:>5} {seconds:>9.1f} {peak:>8.0f}  "
                  f"{est.group(2)} cycles/update on {est.group(1)} "
                  f"({est.group(3)} samples/s); IPU model on the host "
                  f"{float(host.group(1)):.0f} ms/update, PyTorch CPU {ref_ms:.0f} ms/step; "
                  f"{split.group(1)}")
    print(f"files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
