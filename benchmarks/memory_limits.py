#!/usr/bin/python3
"""Compiling under an address-space limit (`ulimit -v`): every limit must
give either an executable or a clear out-of-memory error (status 1, a
message, nothing written), never a signal.

For each limit it runs `tessera-compile MODEL -o OUT` with RLIMIT_AS set
and prints the outcome: `compiled`, `out of memory` (the message's first
line), `error` (reading the model failed with the OS's ENOMEM), `cannot start` (the loader's own message, status 127: too little
room to map the libraries) or, a failure, the signal or stray status. It
exits non-zero if any limit ended otherwise.

    benchmarks/memory_limits.py [--model resnet50.onnx]
                                [--limits 256,384,512,768,1024,1536,2048,3072]

Without --model it exports torchvision's ResNet-50 (random weights, batch 1).
"""
import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("TESSERA_TOOLS_DIR", os.path.join(ROOT, "build", "bin"))


def export_resnet50(path):
    import torch
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval()
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), path, opset_version=17,
                      input_names=["x"], output_names=["y"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model")
    parser.add_argument("--limits", default="256,384,512,768,1024,1536,2048,3072",
                        help="address-space limits in MiB")
    args = parser.parse_args()
    limits = [int(x) for x in args.limits.split(",")]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or os.path.join(tmp, "resnet50.onnx")
        if not args.model:
            export_resnet50(model)
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        print(f"{'limit MiB':>9}  {'seconds':>7}  outcome")
        for megabytes in limits:
            for f in os.listdir(out):
                os.remove(os.path.join(out, f))

            def limit(megabytes=megabytes):
                resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))
            start = time.time()
            result = subprocess.run([os.path.join(BIN, "tessera-compile"), model, "-o",
                                     os.path.join(out, "model.tess")],
                                    capture_output=True, text=True, preexec_fn=limit)
            seconds = time.time() - start
            left = os.listdir(out)
            first = (result.stderr.strip().splitlines() or [""])[0][:110]
            if result.returncode == 0 and left == ["model.tess"]:
                outcome = "compiled"
            elif (result.returncode == 1 and "out of memory" in result.stderr and
                  "nothing was written" in result.stderr and not left):
                outcome = "out of memory: " + first
            elif (result.returncode == 1 and "Cannot allocate memory" in result.stderr and
                  not left):
                outcome = "error: " + first  # the OS's ENOMEM, reading the model
            elif result.returncode == 127:
                outcome = "cannot start: " + first
            else:
                bad += 1
                how = (f"signal {signal.Signals(-result.returncode).name}"
                       if result.returncode < 0 else f"status {result.returncode}")
                outcome = f"FAILED ({how}, left {left}): {first}"
            print(f"{megabytes:>9}  {seconds:>7.1f}  {outcome}", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
