#!/usr/bin/python3
"""Transformers at real size on one ipu2: compile, fit, accuracy, throughput.

For each model (random weights, fixed seed; nothing downloaded) it exports
ONNX (opset 17), compiles with `tessera-compile` for one ipu2 in fp32 at
batch 1, runs the executable on the IPU model, and prints:

- the compile's wall time and peak memory, or the first line of its error;
- the largest relative difference from PyTorch's output;
- the estimated cycles and sequences/s on the chip;
- the IPU model's host milliseconds per inference next to PyTorch's CPU
  time for the same model, batch and thread count, and ONNX Runtime's
  (CPU provider, all cores) with `--ort-node-modules DIR`, where DIR holds
  npm's onnxruntime-node (`npm install --ignore-scripts --prefix DIR
  onnxruntime-node`; Debian ships no ONNX Runtime).

Models: bert_base (vocab 30,522, seq 128, token, position and segment
embeddings, 12 layers, pooled), gpt2_small (vocab 50,257, seq 128, causal,
output head tied to the token embedding), vit_b_16 (torchvision),
transformer (torch.nn.Transformer, 6 + 6 layers, d 512, seq 128).

    benchmarks/transformers.py [--models bert_base,gpt2_small] [--seq 128]
                               [--layers 12] [--out DIR] [--ort-node-modules DIR]

`--embedding-lookup` instead prints the estimated cycles of a lookup of 128
indices into tables of 1,000 to 250,000 rows of 768 (and whether each fits).

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

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("TESSERA_TOOLS_DIR", os.path.join(ROOT, "build", "bin"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from transformer_models import GPT2, Bert, Transformer  # noqa: E402


def build(name, seq, layers):
    """(model, example inputs, input names)."""
    torch.manual_seed(0)
    if name == "bert_base":
        ids = torch.randint(0, 30522, (1, seq))
        return (Bert(layers=layers), (ids, torch.zeros_like(ids)),
                ["ids", "segments"])
    if name == "gpt2_small":
        return GPT2(layers=layers, seq=seq), (torch.randint(0, 50257, (1, seq)),), ["ids"]
    if name == "vit_b_16":
        import torchvision
        model = torchvision.models.vit_b_16()
        # torchvision zeroes the classifier: random weights make the
        # comparison with PyTorch mean something.
        torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        return model, (torch.randn(1, 3, 224, 224),), ["image"]
    if name == "transformer":
        return (Transformer(layers=min(layers, 6)),
                (torch.randn(1, seq, 512), torch.randn(1, seq, 512)), ["src", "tgt"])
    raise SystemExit(f"unknown model {name}")


def compile_model(onnx_path, tess, extra=()):
    cmd = ["/usr/bin/time", "-f", "PEAK %M", os.path.join(BIN, "tessera-compile"),
           onnx_path, "-o", tess, *extra]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - start
    peak = re.search(r"PEAK (\d+)", proc.stderr)
    peak_mib = int(peak.group(1)) / 1024 if peak else float("nan")
    errors = [l for l in proc.stderr.splitlines() if "error" in l]
    return proc.returncode, wall, peak_mib, errors[0] if errors else proc.stderr.strip()[-300:]


def run_model(tess, inputs, names, out_dir):
    args = []
    for name, value in zip(names, inputs):
        path = os.path.join(out_dir, f"{name}.npy")
        np.save(path, value.numpy())
        args += ["--input", f"{name}={path}"]
    out = os.path.join(out_dir, "out.npz")
    # Warm, as ONNX Runtime and PyTorch are timed: one untimed run first.
    proc = subprocess.run([os.path.join(BIN, "tessera-run"), tess, *args, "--output", out,
                           "--warmup", "1", "--iterations", "5"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip().splitlines()[-1:], None, None
    cycles = re.search(r"estimated on ipu2: ([\d,]+) cycles", proc.stdout)
    host = re.search(r"IPU model on the host: ([\d.]+) ms", proc.stdout)
    outputs = np.load(out)
    return ([outputs[k] for k in outputs.files], None,
            int(cycles.group(1).replace(",", "")) if cycles else None,
            float(host.group(1)) if host else None)


def ort_ms(onnx_path, inputs, names, out_dir, node_modules, runs=5):
    """ONNX Runtime's CPU time per run (ms), through benchmarks/ort_time.js
    and the onnxruntime-node package under `node_modules`; None without it."""
    if not node_modules:
        return None
    import json
    types = {torch.int64: "int64", torch.int32: "int32", torch.float32: "float32",
             torch.float64: "float64", torch.bool: "bool"}
    if any(x.dtype not in types for x in inputs):
        print(f"  ONNX Runtime skipped: input types {[str(x.dtype) for x in inputs]}", flush=True)
        return None
    spec = {n: {"type": types[x.dtype], "dims": list(x.shape),
                "data": x.flatten().int().tolist() if x.dtype == torch.bool
                else x.flatten().tolist()}
            for n, x in zip(names, inputs)}
    path = os.path.join(out_dir, "ort_inputs.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    proc = subprocess.run(["node", os.path.join(ROOT, "benchmarks", "ort_time.js"), onnx_path,
                           path, str(runs)], capture_output=True, text=True,
                          env={**os.environ, "NODE_PATH": node_modules})
    found = re.search(r"ORT ([\d.]+)", proc.stdout)
    if not found:
        print(f"  ONNX Runtime failed: {proc.stderr.strip()[-300:]}", flush=True)
        return None
    return float(found.group(1))


def benchmark(name, seq, layers, out_dir, node_modules=None):
    model, inputs, names = build(name, seq, layers)
    model.eval()
    onnx_path = os.path.join(out_dir, f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, onnx_path, input_names=names, opset_version=17)
    with torch.no_grad():
        ref = model(*inputs)
        start = time.time()
        for _ in range(3):
            model(*inputs)
        torch_ms = (time.time() - start) / 3 * 1000
    ref = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
    tess = os.path.join(out_dir, f"{name}.tess")
    rc, wall, peak, error = compile_model(onnx_path, tess)
    line = f"{name:12s} compile {wall:6.1f} s  peak {peak:6.0f} MiB"
    if rc != 0:
        print(f"{line}  FAILED: {error}", flush=True)
        return
    outputs, error, cycles, host_ms = run_model(tess, inputs, names, out_dir)
    if outputs is None:
        print(f"{line}  run FAILED: {error}", flush=True)
        return
    rel = max(float(np.max(np.abs(o - r)) / max(float(np.max(np.abs(r))), 1e-30))
              for o, r in zip(outputs, ref))
    seqs = 1.33e9 / cycles if cycles else float("nan")
    ort = ort_ms(onnx_path, inputs, names, out_dir, node_modules)
    versus = f"PyTorch {torch_ms:.0f} ms" + (f", ONNX Runtime {ort:.0f} ms ({host_ms / ort:.2f}x)"
                                            if ort else "")
    print(f"{line}  max rel diff {rel:.2e}  {cycles:,} cycles  {seqs:,.0f} seq/s on ipu2  "
          f"host {host_ms:.0f} ms vs {versus}", flush=True)


def embedding_lookup(out_dir, rows_list, d=768, lookups=128):
    class Lookup(torch.nn.Module):
        def __init__(self, rows):
            super().__init__()
            self.table = torch.nn.Embedding(rows, d)

        def forward(self, ids):
            return self.table(ids)

    for rows in rows_list:
        torch.manual_seed(0)
        model = Lookup(rows)
        ids = torch.randint(0, rows, (lookups,))
        path = os.path.join(out_dir, f"lookup_{rows}.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (ids,), path, input_names=["ids"], opset_version=17)
        tess = os.path.join(out_dir, f"lookup_{rows}.tess")
        rc, wall, peak, error = compile_model(path, tess)
        if rc != 0:
            print(f"{rows:8,d} rows ({rows * d * 4 / 1e6:6.1f} MB): FAILED: {error}", flush=True)
            continue
        outputs, error, cycles, _ = run_model(tess, (ids,), ["ids"], out_dir)
        if outputs is None:
            print(f"{rows:8,d} rows: run FAILED: {error}", flush=True)
            continue
        exact = np.array_equal(outputs[0], model(ids).detach().numpy())
        print(f"{rows:8,d} rows ({rows * d * 4 / 1e6:6.1f} MB): {cycles:,} cycles, "
              f"compile {wall:.1f} s, {'exact' if exact else 'WRONG'}", flush=True)
        os.remove(tess)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="bert_base,gpt2_small,vit_b_16,transformer")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--embedding-lookup", action="store_true")
    parser.add_argument("--rows", default="1000,10000,30522,50257,100000,250000")
    parser.add_argument("--out", help="keep the models and executables here")
    parser.add_argument("--ort-node-modules",
                        help="a node_modules folder holding onnxruntime-node (npm install "
                             "--ignore-scripts --prefix DIR onnxruntime-node): adds ONNX "
                             "Runtime's CPU time per inference")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count())
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.out or tmp
        os.makedirs(out_dir, exist_ok=True)
        if args.embedding_lookup:
            embedding_lookup(out_dir, [int(r) for r in args.rows.split(",")])
            return
        for name in args.models.split(","):
            benchmark(name, args.seq, args.layers, out_dir, args.ort_node_modules)


if __name__ == "__main__":
    sys.exit(main())
