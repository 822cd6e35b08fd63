#!/usr/bin/python3
"""Executable-cache hits against the compiles they save, CLI and Python.

For each model (default ResNet-50 and MNASNet 0.5, random weights, batch 1):
the compile with no cache; the compiler's own cache hit (the first hit of a
command line, which runs the compiler: its process start, the key and the
copy); and the front end's hits (a command line seen before: bin/
tessera-compile copies the recorded entry without loading MLIR or LLVM's
shared libraries), first by the model's contents, then by its stamps, which
reads no model, each over the previous output, then by stamps into a new
file (replacing a file on disk frees its blocks, which costs the file
system as much as the copy: 0.09 s for ResNet-50's here); in turns, `--rounds` times each. Then the same model through
the Python API (`tessera.inferenceModel(...).compileAndExport` with
`enableExecutableCaching`) in a fresh process: one that compiles and one
that hits (both trace the module first, as PopTorch does). Prints each
figure's minimum and median and the ratio of the compile's minimum to the
hit's. Not a test: these machines are shared and noisy, so compare figures
of one sitting.

    benchmarks/cache_hit.py [--models resnet50,mnasnet0_5] [--rounds 5]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "bench"))
from benchutil import ROOT, export  # noqa: E402


def wall(cmd, env=None):
    # The previous step's writes (a compile writes the executable twice)
    # on disk first: a file replaced while its pages are still being
    # written back waits for them, which is that step's cost, not this one's.
    os.sync()
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stderr}")
    return time.perf_counter() - start, result.stderr


PYTHON_CALL = """
import os, sys, time, torch, torchvision
sys.path[:0] = [{python!r}, {extension!r}]
import tessera
torch.manual_seed(0)
net = getattr(torchvision.models, {model!r})().eval()
x = torch.randn(1, 3, 224, 224)
opts = tessera.Options()
if {cache!r}:
    opts.enableExecutableCaching({cache!r})
model = tessera.inferenceModel(net, opts)
start = time.perf_counter()
model.compileAndExport({out!r}, x)
print(time.perf_counter() - start)
"""


def python_seconds(model, cache, build, out):
    code = PYTHON_CALL.format(python=os.path.join(ROOT, "python"),
                              extension=os.path.join(build, "python"), model=model,
                              cache=cache, out=out)
    os.sync()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"the Python API failed:\n{result.stderr}")
    return float(result.stdout.split()[-1])


def summary(name, seconds):
    return f"{name} min {min(seconds):.3f} s, median {statistics.median(seconds):.3f} s"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,mnasnet0_5")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--skip-python", action="store_true")
    args = parser.parse_args()
    compiler = os.path.join(args.build, "bin", "tessera-compile")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model = os.path.join(tmp, name + ".onnx")
            export(name, model)
            out = os.path.join(tmp, name + ".tess")
            compiles, compiler_hits, front_end_hits, stamped_hits, new_file_hits = \
                [], [], [], [], []
            for round_ in range(args.rounds):
                cache = os.path.join(tmp, f"cache-{name}-{round_}")
                seconds, _ = wall([compiler, model, "-o", out])
                compiles.append(seconds)
                # Fill the cache, then hit it with another command line (a
                # new record: the compiler's hit), then with the same one
                # (the front end's).
                wall([compiler, model, "--cache-dir", cache, "-o", out])
                seconds, err = wall([compiler, model, "--cache-dir", cache, "-o", out,
                                     "--available-memory-proportion", "0.6"])
                assert "cache hit" in err, err
                compiler_hits.append(seconds)
                seconds, err = wall([compiler, model, "--cache-dir", cache, "-o", out,
                                     "--available-memory-proportion", "0.6"])
                assert err.startswith("tessera-compile: cache hit"), err
                front_end_hits.append(seconds)
                seconds, err = wall([compiler, model, "--cache-dir", cache, "-o", out,
                                     "--available-memory-proportion", "0.6"])
                assert err.startswith("tessera-compile: cache hit"), err
                stamped_hits.append(seconds)
                os.remove(out)
                seconds, err = wall([compiler, model, "--cache-dir", cache, "-o", out,
                                     "--available-memory-proportion", "0.6"])
                assert err.startswith("tessera-compile: cache hit"), err
                new_file_hits.append(seconds)
                shutil.rmtree(cache)
            size = os.path.getsize(out) / 2**20
            print(f"{name} ({size:.1f} MiB executable), CLI, {args.rounds} rounds in turn:")
            print("  " + summary("compile", compiles))
            print("  " + summary("compiler's hit", compiler_hits) +
                  f" ({min(compiles) / min(compiler_hits):.0f}x faster)")
            print("  " + summary("front end's hit by contents", front_end_hits) +
                  f" ({min(compiles) / min(front_end_hits):.0f}x faster)")
            print("  " + summary("front end's hit by stamps", stamped_hits) +
                  f" ({min(compiles) / min(stamped_hits):.0f}x faster)")
            print("  " + summary("the same into a new file", new_file_hits) +
                  f" ({min(compiles) / min(new_file_hits):.0f}x faster)")
            if args.skip_python:
                continue
            python_compiles, python_hits = [], []
            for round_ in range(max(2, args.rounds // 2)):
                cache = os.path.join(tmp, f"pycache-{name}-{round_}")
                python_compiles.append(python_seconds(name, cache, args.build, out))
                python_hits.append(python_seconds(name, cache, args.build, out))
                shutil.rmtree(cache)
            print(f"  Python, compileAndExport in a fresh process (trace, key, compile or "
                  f"copy), {len(python_hits)} rounds:")
            print("    " + summary("compile", python_compiles))
            print("    " + summary("hit", python_hits) +
                  f" ({min(python_compiles) / min(python_hits):.1f}x faster)")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
