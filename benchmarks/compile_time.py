#!/usr/bin/python3
"""Compile time and peak memory per model, with each phase's share.

For every torchvision classification family's smallest member, ResNet-50,
a BERT-base encoder and the ResNet-50 training step: exports the model
(random weights, batch 1), compiles it to a .tess with --mlir-timing, and
prints the wall time, the compiler's peak RSS and the shares of import, each
pass pipeline, the slowest passes and codegen. Then the executable cache:
ResNet-50 compiled again at batch 2 after batch 1 with the same --cache-dir,
and at batch 1 under another output mode (every kernel from the kernel
cache).
The host reference code is not lowered by a compile to .tess (a
--reference run lowers it), and the tile planner costs candidate plans on
every core: pass times are wall times, and the user times add up to more.
Not part of the tests (shared, noisy machines): run it, compare runs made
in one sitting.

    benchmarks/compile_time.py [--models resnet18,maxvit_t] [--skip-slow]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "bench"))
from benchutil import ROOT, export, timed  # noqa: E402

# The smallest member of each torchvision classification family.
FAMILIES = ["alexnet", "convnext_tiny", "densenet121", "efficientnet_b0",
            "efficientnet_v2_s", "googlenet", "inception_v3", "maxvit_t",
            "mnasnet0_5", "mobilenet_v2", "mobilenet_v3_small", "regnet_x_400mf",
            "regnet_y_400mf", "resnet18", "resnext50_32x4d", "shufflenet_v2_x0_5",
            "squeezenet1_0", "swin_t", "swin_v2_t", "vgg11", "vit_b_16",
            "wide_resnet50_2"]
# The slowest (20 s): left out by --skip-slow.
SLOW = {"maxvit_t"}


def phases(timing):
    """{name: seconds} of the --mlir-timing report's top two levels, and the
    five slowest passes."""
    # One column (wall) or two (user, then wall) when phases ran on several
    # threads; the wall time counts.
    rows = []
    entry = r"(\d+\.\d+) \(\s*[\d.]+%\)"
    for line in timing.splitlines():
        m = re.match(rf"\s+{entry}(?:\s+{entry})?( +)(.+)$", line)
        if m:
            wall = float(m.group(2) or m.group(1))
            rows.append((wall, len(m.group(3)), m.group(4).strip()))
    top = {name: s for s, depth, name in rows if depth == 2 and name != "Total"}
    pipelines = {name: s for s, depth, name in rows if depth == 4}
    passes = sorted(((s, name) for s, depth, name in rows if depth >= 6), reverse=True)[:5]
    return top, pipelines, passes


def compile_one(bin_dir, model_path, out, extra=()):
    cmd = [os.path.join(bin_dir, "tessera-compile"), model_path, "-o", out,
           "--mlir-timing", *extra]
    wall, peak, _, err = timed(cmd)
    return wall, peak, phases(err)


def report(name, wall, peak, parts):
    top, pipelines, passes = parts
    share = lambda s: f"{100 * s / wall:.0f}%"
    print(f"{name:20s} {wall:7.1f} s {peak:7.0f} MiB  " +
          ", ".join(f"{k} {share(v)}" for k, v in top.items()))
    print(" " * 22 + "pipelines: " +
          ", ".join(f"{k.replace('pipeline from ', '')} {v:.2f} s" for k, v in pipelines.items()))
    print(" " * 22 + "slowest passes: " + ", ".join(f"{n} {s:.2f} s" for s, n in passes))
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated torchvision names "
                        "(default: every family's smallest, resnet50, bert_base, "
                        "resnet50_train)")
    parser.add_argument("--skip-slow", action="store_true",
                        help="leave out " + ", ".join(sorted(SLOW)))
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    models = (args.models.split(",") if args.models
              else FAMILIES + ["resnet50", "bert_base", "resnet50_train"])
    if args.skip_slow:
        models = [m for m in models if m not in SLOW]
    print(f"{'model':20s} {'compile':>9s} {'peak':>11s}  shares of the wall time")
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            onnx_path = os.path.join(tmp, name + ".onnx")
            extra = []
            if name == "bert_base":
                # In a child: torch stays out of this process (peak RSS).
                subprocess.run([sys.executable, "-c", f"""
import sys, warnings, torch
sys.path.insert(0, {os.path.join(ROOT, 'scripts')!r})
from transformer_models import Bert
torch.manual_seed(0)
ids = torch.randint(0, 30522, (1, 128))
with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    torch.onnx.export(Bert().eval(), (ids, torch.zeros_like(ids)), {onnx_path!r},
                      input_names=['ids', 'segments'], opset_version=17)"""],
                               check=True, capture_output=True)
            elif name == "resnet50_train":
                export("resnet50", onnx_path)
                extra = ["--train", "--loss", "cross-entropy", "--optimizer",
                         "sgd:lr=0.01,momentum=0.9"]
            else:
                try:
                    export(name, onnx_path)
                except subprocess.CalledProcessError:
                    print(f"{name:20s} not exported (not in this torchvision?)")
                    continue
            wall, peak, parts = compile_one(bin_dir, onnx_path,
                                            os.path.join(tmp, name + ".tess"), extra)
            report(name, wall, peak, parts)
            os.remove(onnx_path)
        # The executable cache across batch sizes: ResNet-50 exported with a
        # symbolic batch, fixed by --input-shape.
        onnx_path = os.path.join(tmp, "resnet50.onnx")
        subprocess.run([sys.executable, "-c", f"""
import warnings, torch, torchvision
torch.manual_seed(0)
with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    torch.onnx.export(torchvision.models.resnet50().eval(), torch.randn(1, 3, 224, 224),
                      {onnx_path!r}, input_names=['input'], opset_version=17,
                      dynamic_axes={{'input': {{0: 'batch'}}}})"""],
                       check=True, capture_output=True)
        cache = os.path.join(tmp, "cache")
        out = os.path.join(tmp, "r50.tess")
        cold, _, _ = compile_one(bin_dir, onnx_path, out,
                                 ["--cache-dir", cache, "--input-shape", "input=1x3x224x224"])
        warm, peak, parts = compile_one(bin_dir, onnx_path, out,
                                        ["--cache-dir", cache, "--input-shape",
                                         "input=2x3x224x224"])
        print(f"resnet50 batch 1 into an empty --cache-dir: {cold:.1f} s; "
              f"then batch 2 with it: {warm:.1f} s")
        report("resnet50 batch 2", warm, peak, parts)
        # The kernel cache alone: batch 1 again under another output mode
        # (another executable, the same kernels).
        again, peak, parts = compile_one(bin_dir, onnx_path, out,
                                         ["--cache-dir", cache, "--input-shape",
                                          "input=1x3x224x224", "--output-mode", "sum"])
        print(f"resnet50 batch 1 again, another --output-mode (every kernel from the "
              f"kernel cache): {again:.1f} s")
        report("resnet50 kernels warm", again, peak, parts)


if __name__ == "__main__":
    main()
