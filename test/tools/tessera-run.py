# tessera-compile -> .tess -> tessera-run --reference, and bad input to
# tessera-run: each a clear error and a non-zero exit.
# RUN: %python %s gen %t
# RUN: tessera-compile %t/model.onnx -o %t/model.tess
# RUN: tessera-run %t/model.tess --reference --input x=%t/x.npy --output %t/out.npz | FileCheck %s --check-prefix=OUT
# RUN: %python %s check %t
# A single-input model takes an unnamed input; .npz inputs go by name.
# RUN: tessera-run %t/model.tess --reference --input %t/x.npy --iterations 3 | FileCheck %s --check-prefix=ITER
# Warm-up runs are not timed (nor counted in the runs).
# RUN: tessera-run %t/model.tess --input %t/x.npy --iterations 2 --warmup 1 | FileCheck %s --check-prefix=WARM
# RUN: tessera-run %t/model.tess --reference --input %t/inputs.npz | FileCheck %s --check-prefix=OUT
# The same executable on the IPU model: same numbers, cycles, a profile.
# RUN: tessera-run %t/model.tess --input x=%t/x.npy --output %t/out.npz --profile %t/prof | FileCheck %s --check-prefix=IPU
# RUN: %python %s check %t
# RUN: %python %s profile %t
# RUN: not tessera-run %t/model.tess --input x=%t/bad_shape.npy 2>&1 | FileCheck %s --check-prefix=SHAPE
# RUN: not tessera-run %t/model.tess --reference 2>&1 | FileCheck %s --check-prefix=MISSING
# RUN: not tessera-run %t/model.tess --reference --profile %t/prof --input %t/x.npy 2>&1 | FileCheck %s --check-prefix=PROFREF
# RUN: not tessera-run %t/model.tess --reference --input x=%t/bad_shape.npy 2>&1 | FileCheck %s --check-prefix=SHAPE
# RUN: not tessera-run %t/model.tess --reference --input x=%t/bad_dtype.npy 2>&1 | FileCheck %s --check-prefix=DTYPE
# RUN: not tessera-run %t/model.tess --reference --input y=%t/x.npy 2>&1 | FileCheck %s --check-prefix=NAME
# RUN: not tessera-run %t/model.tess --reference --input x=%t/compressed.npz 2>&1 | FileCheck %s --check-prefix=NOTNPY
# numpy.savez_compressed archives are read; a member whose CRC does not
# match its data is refused.
# RUN: tessera-run %t/model.tess --reference --input %t/compressed.npz | FileCheck %s --check-prefix=COMPRESSED
# RUN: not tessera-run %t/model.tess --reference --input %t/damaged.npz 2>&1 | FileCheck %s --check-prefix=CRC
# A .pb whose values sit in int32_data (not raw_data) is read too.
# RUN: tessera-compile %t/cast.onnx -o %t/cast.tess
# RUN: tessera-run %t/cast.tess --reference --input k=%t/k.pb | FileCheck %s --check-prefix=PB
# Device iterations: 3 batches of 2 per run, looped on the device; the
# outputs are the 3 batches' outputs concatenated (checked against PyTorch).
# RUN: tessera-compile %t/model.onnx --device-iterations 3 -o %t/iter.tess
# RUN: tessera-run %t/iter.tess --input x=%t/x3.npy --output %t/out3.npz | FileCheck %s --check-prefix=DEVITER
# RUN: tessera-run %t/iter.tess --reference --input x=%t/x3.npy --output %t/ref3.npz
# RUN: %python %s check3 %t
# RUN: not tessera-run %t/iter.tess --input x=%t/x.npy 2>&1 | FileCheck %s --check-prefix=DEVITERSHAPE
# RUN: not tessera-compile %t/model.onnx --device-iterations 0 -o %t/bad.tess 2>&1 | FileCheck %s --check-prefix=DEVITERZERO
# RUN: not tessera-compile %t/model.onnx --device-iterations 4611686018427387904 -o %t/bad.tess 2>&1 | FileCheck %s --check-prefix=DEVITERHUGE
# RUN: not tessera-compile %t/scalar.onnx --device-iterations 2 -o %t/bad.tess 2>&1 | FileCheck %s --check-prefix=DEVITERSCALAR
# A shape input bound at compile time (--constant-input): the model is
# specialized for it and the executable takes only `data`.
# RUN: not tessera-compile %t/reshape.onnx -o %t/reshape.tess 2>&1 | FileCheck %s --check-prefix=NEEDCONST
# RUN: tessera-compile %t/reshape.onnx --constant-input shape=%t/shape.npy -o %t/reshape.tess
# RUN: tessera-run %t/reshape.tess --input data=%t/data.npy | FileCheck %s --check-prefix=RESHAPED
# RUN: not tessera-compile %t/reshape.onnx --constant-input nope=%t/shape.npy 2>&1 | FileCheck %s --check-prefix=CONSTNAME
# RUN: not tessera-compile %t/reshape.onnx --constant-input shape=%t/x.npy 2>&1 | FileCheck %s --check-prefix=CONSTTYPE
# RUN: %python %s damage %t
# RUN: not tessera-run %t/flipped.tess --reference --input %t/x.npy 2>&1 | FileCheck %s --check-prefix=FLIPPED
# RUN: not tessera-run %t/truncated.tess --reference --input %t/x.npy 2>&1 | FileCheck %s --check-prefix=TRUNCATED
# RUN: not tessera-run %t/version.tess --reference --input %t/x.npy 2>&1 | FileCheck %s --check-prefix=VERSION
# RUN: not tessera-run %t/x.npy --reference --input %t/x.npy 2>&1 | FileCheck %s --check-prefix=NOTTESS
# RUN: not tessera-run %t/model.tess --reference --input x=%t/x.npy --input x=%t/x.npy 2>&1 | FileCheck %s --check-prefix=TWICE
# RUN: not tessera-run %t/model.tess --reference --input %t/inputs.npz --input x=%t/x.npy 2>&1 | FileCheck %s --check-prefix=TWICE
# RUN: not tessera-run %t/model.tess --reference --input x=%t/open_header.npy 2>&1 | FileCheck %s --check-prefix=OPENHEADER
# RUN: not tessera-run %t/model.tess --reference --input x=/dev/zero 2>&1 | FileCheck %s --check-prefix=DEVZERO
# RUN: not tessera-run %t/model.tess --input x=%t/x.npy --host-threads 100000 2>&1 | FileCheck %s --check-prefix=THREADS


# OUT: outputs (host reference):
# OUT-NEXT: y: 2x4xf32  min
# OUT: host reference: {{.*}} ms per run (1 run)
# ITER: (3 runs)
# WARM: IPU model on the host: {{[0-9.]+}} ms per run (2 runs)
# DEVITER: outputs (IPU model):
# DEVITER-NEXT: y: 6x4xf32  min
# DEVITER: estimated on ipu2: {{[0-9,]+}} cycles, {{.*}} ms per iteration, {{.*}} iterations/s, {{.*}} samples/s
# DEVITER-NEXT: 3 device iterations per run: {{[0-9,]+}} cycles on the device per run
# DEVITERSHAPE: error: input 'x' must be 6x3x6x6xf32, got 2x3x6x6xf32 (3 device iterations of batch 2)
# NEEDCONST: error: Reshape: input 'shape' must be a constant {{.*}}; it is the model's input 'shape': specialize the model for one value with --constant-input shape=FILE
# RESHAPED: reshaped: 6x4xf32
# CONSTNAME: error: --constant-input names 'nope', which is not a graph input
# CONSTTYPE: error: --constant-input shape is f32 but the model declares the input as INT64
# DEVITERZERO: error: --device-iterations must be at least 1, got 0
# DEVITERHUGE: error: --device-iterations 4611686018427387904 is more than 16777216 iterations per run
# DEVITERSCALAR: error: --device-iterations 2 needs a batch dimension (dimension 0) on every input; input 's' is a scalar
# PB: out: 4xf32  min -2  max 7  mean 2.25  [-2, 0, 4, 7]
# IPU: outputs (IPU model):
# IPU-NEXT: y: 2x4xf32  min
# IPU: estimated on ipu2: {{[0-9,]+}} cycles, {{.*}} ms per iteration
# IPU: profile written to
# PROFREF: error: --profile needs the IPU model; drop --reference
# MISSING: error: missing input 'x' (2x3x6x6xf32); give it with --input x=file.npy
# SHAPE: error: input 'x' must be 2x3x6x6xf32, got 2x3x5x6xf32
# DTYPE: error: input 'x' must be 2x3x6x6xf32, got 2x3x6x6xf64
# NAME: error: 'y' is not an input of the model
# NOTNPY: is not a .npy file
# COMPRESSED: y: 2x4xf32  min
# CRC: error: {{.*}}damaged.npz: entry 'x.npy' is damaged (CRC error)
# FLIPPED: error: '{{.*}}flipped.tess' is damaged (checksum mismatch); recompile the model
# TRUNCATED: error: '{{.*}}truncated.tess' is truncated or padded
# VERSION: error: '{{.*}}version.tess' has executable format version 99; this runtime reads version 11 (recompile the model)
# NOTTESS: error: '{{.*}}x.npy' is not a Tessera executable (bad magic)
# TWICE: error: input 'x' is given twice
# DEVZERO: error: cannot read '/dev/zero': not a regular file (devices, pipes and directories are not read)
# THREADS: error: --host-threads must be at most 1024, got 100000
# OPENHEADER: error: {{.*}}open_header.npy{{.*}} has a malformed header (not a {...} dictionary)
import os
import struct
import sys

import numpy as np

mode, out = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)

if mode == "gen":
    from onnx_gen import T, init, node, save, vi
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = rng.standard_normal((4, 4)).astype(np.float32)
    save("model", [
        node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Relu", ["c"], ["r"]),
        node("GlobalAveragePool", ["r"], ["p"]),
        node("Flatten", ["p"], ["f"]),
        node("Gemm", ["f", "g"], ["y"], transB=1),
    ], [vi("x", T.FLOAT, [2, 3, 6, 6])], [vi("y", T.FLOAT, [2, 4])],
        [init("w", w), init("b", b), init("g", g)], outdir=out)
    np.save(os.path.join(out, "x.npy"), x)
    from onnx import helper
    save("cast", [node("Cast", ["k"], ["out"], to=T.FLOAT)],
         [vi("k", T.INT32, [4])], [vi("out", T.FLOAT, [4])], outdir=out)
    with open(os.path.join(out, "k.pb"), "wb") as f:
        f.write(helper.make_tensor("k", T.INT32, [4], [-2, 0, 4, 7]).SerializeToString())
    np.savez(os.path.join(out, "inputs.npz"), x=x)
    np.savez_compressed(os.path.join(out, "compressed.npz"), x=x)
    damaged = bytearray(open(os.path.join(out, "inputs.npz"), "rb").read())
    damaged[damaged.index(b"NUMPY") + 200] ^= 0xFF  # a byte of x's data
    open(os.path.join(out, "damaged.npz"), "wb").write(bytes(damaged))
    np.save(os.path.join(out, "bad_shape.npy"), x[:, :, :5])
    np.save(os.path.join(out, "bad_dtype.npy"), x.astype(np.float64))
    # A header whose dictionary lost its closing brace (accepted once).
    data = bytearray(open(os.path.join(out, "x.npy"), "rb").read())
    end = data.index(b"}")
    data[end] = ord(" ")
    open(os.path.join(out, "open_header.npy"), "wb").write(bytes(data))
    x3 = rng.standard_normal((6, 3, 6, 6)).astype(np.float32)
    np.save(os.path.join(out, "x3.npy"), x3)
    save("reshape", [node("Reshape", ["data", "shape"], ["reshaped"])],
         [vi("data", T.FLOAT, [2, 3, 4]), vi("shape", T.INT64, [2])],
         [vi("reshaped", T.FLOAT, [6, 4])], outdir=out)
    np.save(os.path.join(out, "data.npy"), rng.standard_normal((2, 3, 4)).astype(np.float32))
    np.save(os.path.join(out, "shape.npy"), np.array([6, 4], dtype=np.int64))
    save("scalar", [node("Neg", ["s"], ["out"])],
         [vi("s", T.FLOAT, [])], [vi("out", T.FLOAT, [])], outdir=out)
elif mode in ("check", "check3"):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(os.path.join(out, "model.onnx"))
    p = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    import torch

    def expected(inp):
        c = torch.nn.functional.conv2d(torch.from_numpy(inp), torch.from_numpy(p["w"]),
                                       torch.from_numpy(p["b"]), stride=2, padding=1)
        return c.relu().mean((2, 3)).numpy() @ p["g"].T
    if mode == "check":
        got = np.load(os.path.join(out, "out.npz"))["y"]
        np.testing.assert_allclose(got, expected(x), rtol=1e-5, atol=1e-6)
    else:
        x3 = np.load(os.path.join(out, "x3.npy"))
        for name in ("out3.npz", "ref3.npz"):
            got = np.load(os.path.join(out, name))["y"]
            assert got.shape == (6, 4), got.shape
            np.testing.assert_allclose(got, expected(x3), rtol=1e-5, atol=1e-6)
elif mode == "profile":
    import json
    prof = json.load(open(os.path.join(out, "prof", "profile.json")))
    trace = json.load(open(os.path.join(out, "prof", "trace.json")))
    assert prof["cycles"] > 0 and prof["steps"], prof.keys()
    assert any(s.get("compute_cycles", 0) > 0 for s in prof["steps"]), prof["steps"][:2]
    assert trace["traceEvents"], "empty trace"
elif mode == "damage":
    data = bytearray(open(os.path.join(out, "model.tess"), "rb").read())
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x40
    open(os.path.join(out, "flipped.tess"), "wb").write(flipped)
    open(os.path.join(out, "truncated.tess"), "wb").write(data[: len(data) - 100])
    version = bytearray(data)
    version[8:12] = struct.pack("<I", 99)
    open(os.path.join(out, "version.tess"), "wb").write(version)
