#!/usr/bin/python3
"""Seed corpora for the fuzzers, made at test time (nothing checked in):
.npy files of every element type and a few shapes, .npz archives (stored
and compressed), the metadata JSON of executables compiled here, ONNX
models (ONNX's own node tests, which Debian's libonnx-testdata ships, and
a few of the tests' models) and TensorProtos (those tests' inputs).

    make_corpus.py OUT_DIR --tools build/bin
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np


def npy_seeds(out):
    os.makedirs(out, exist_ok=True)
    arrays = [np.arange(6, dtype=t).reshape(2, 3) for t in
              (np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8)]
    arrays += [np.zeros((0, 4), np.float32), np.array(3.5, np.float32),
               np.array([True, False]), np.ones((2, 1, 3), np.float32)]
    for i, a in enumerate(arrays):
        np.save(os.path.join(out, f"seed{i}.npy"), a)


def npz_seeds(out):
    os.makedirs(out, exist_ok=True)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.savez(os.path.join(out, "stored.npz"), x=x, labels=np.arange(3))
    np.savez_compressed(os.path.join(out, "deflated.npz"), x=x, y=x.T.copy())


def metadata_of(tess):
    data = open(tess, "rb").read()
    offset, size = struct.unpack_from("<QQ", data, 32)
    return data[offset:offset + size]


def executable_seeds(out, tools):
    os.makedirs(out, exist_ok=True)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Importers", "ONNX",
                                    "Inputs"))
    from onnx_gen import T, init, node, save, vi
    with tempfile.TemporaryDirectory() as tmp:
        w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
        save("conv", [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                      node("Relu", ["c"], ["y"])],
             [vi("x", T.FLOAT, [1, 3, 8, 8])], [vi("y", T.FLOAT, [1, 4, 8, 8])],
             [init("w", w)], outdir=tmp)
        save("gather", [node("Gather", ["t", "i"], ["y"])],
             [vi("i", T.INT64, [5])], [vi("y", T.FLOAT, [5, 8])],
             [init("t", np.ones((50, 8), np.float32))], outdir=tmp)
        for name, extra in [("conv", []), ("gather", []), ("conv_iter", ["--device-iterations", "2"])]:
            model = os.path.join(tmp, name.split("_")[0] + ".onnx")
            tess = os.path.join(tmp, name + ".tess")
            subprocess.run([os.path.join(tools, "tessera-compile"), model, "--tiles-per-ipu",
                            "16", "-o", tess, *extra], check=True)
            open(os.path.join(out, name + ".json"), "wb").write(metadata_of(tess))


ONNX_NODE_TESTS = "/usr/share/libonnx-testdata/data/node"
MAX_SEED_BYTES = 65536  # run_fuzzer.sh's -max_len


def onnx_seeds(out, pb_out):
    os.makedirs(out, exist_ok=True)
    os.makedirs(pb_out, exist_ok=True)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Importers", "ONNX",
                                    "Inputs"))
    from onnx_gen import T, init, node, save, vi
    rng = np.random.RandomState(0)
    save("conv", [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                  node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
                  node("Relu", ["n"], ["r"]), node("GlobalAveragePool", ["r"], ["y"])],
         [vi("x", T.FLOAT, ["batch", 3, 8, 8])], [vi("y", T.FLOAT, ["batch", 4, 1, 1])],
         [init("w", rng.randn(4, 3, 3, 3).astype(np.float32))] +
         [init(n, np.ones(4, np.float32)) for n in "sbmv"], outdir=out)
    save("embedding", [node("Gather", ["t", "ids"], ["e"]),
                       node("ReduceMean", ["e"], ["y"], axes=[1])],
         [vi("ids", T.INT64, ["batch", 5])], [vi("y", T.FLOAT, ["batch", 8])],
         [init("t", rng.randn(50, 8).astype(np.float32))], outdir=out)
    # MaxPool's indices over the most window positions the importer takes
    # (2 x 2 offsets of a 2047 x 2047 output): filled element by element,
    # they took the fuzzer past its 10 s per input.
    save("maxpool-indices", [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])],
         [vi("x", T.FLOAT, [1, 1, 2048, 2048])],
         [vi("y", T.FLOAT, [1, 1, 2047, 2047]), vi("i", T.INT64, [1, 1, 2047, 2047])],
         outdir=out)
    if not os.path.isdir(ONNX_NODE_TESTS):
        return
    for test in sorted(os.listdir(ONNX_NODE_TESTS)):
        folder = os.path.join(ONNX_NODE_TESTS, test)
        model = os.path.join(folder, "model.onnx")
        if os.path.isfile(model) and os.path.getsize(model) <= MAX_SEED_BYTES:
            shutil.copy(model, os.path.join(out, test + ".onnx"))
        data = os.path.join(folder, "test_data_set_0")
        if os.path.isdir(data):
            for name in sorted(os.listdir(data))[:2]:
                pb = os.path.join(data, name)
                if os.path.getsize(pb) <= MAX_SEED_BYTES:
                    shutil.copy(pb, os.path.join(pb_out, f"{test}_{name}"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--tools", required=True)
    args = parser.parse_args()
    npy_seeds(os.path.join(args.out, "npy"))
    npz_seeds(os.path.join(args.out, "npz"))
    executable_seeds(os.path.join(args.out, "executable"), args.tools)
    onnx_seeds(os.path.join(args.out, "onnx"), os.path.join(args.out, "pb"))


if __name__ == "__main__":
    main()
