# --precision fp16.16 and fp16.32 (PopTorch's model.half(), with half or
# float partials): weights and arithmetic in fp16, inputs and outputs f32;
# inference within fp16's precision of fp32, and an fp16 training run
# (stochastic rounding) learns as fp32 does. The partials type decides how
# long sums round: fp16.32 rounds each matmul and convolution result once,
# fp16.16 every partial sum.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/mlp.onnx -o %t/fp32.tess
# RUN: tessera-compile %t/mlp.onnx --precision fp16.16 --summary -o %t/fp16.tess | FileCheck %s
# RUN: tessera-run %t/fp32.tess --input=x=%t/x.npy --output=%t/fp32.npz
# RUN: tessera-run %t/fp16.tess --input=x=%t/x.npy --output=%t/fp16.npz
# RUN: %python %s %t compare
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05 --micro-batch-size 16 -o %t/t32.tess
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05 --micro-batch-size 16 --precision fp16.16 --stochastic-rounding -o %t/t16.tess
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05 --micro-batch-size 16 --precision fp16.32 --stochastic-rounding -o %t/t1632.tess
# RUN: tessera-run %t/t32.tess --train-data %t/train.npz --epochs 4 > %t/t32.txt
# RUN: tessera-run %t/t16.tess --train-data %t/train.npz --epochs 4 --save-weights %t/w16.npz > %t/t16.txt
# RUN: tessera-run %t/t1632.tess --train-data %t/train.npz --epochs 4 --save-weights %t/w1632.npz > %t/t1632.txt
# RUN: %python %s %t learning
#
# Long sums (a 4096-long matmul, a 2304-long convolution) of positive values:
# RUN: tessera-compile %t/sums.onnx --precision fp16.32 -o %t/s1632.tess
# RUN: tessera-compile %t/sums.onnx --precision fp16.16 -o %t/s1616.tess
# RUN: tessera-run %t/s1632.tess --input=a=%t/a.npy --input=b=%t/b.npy --output=%t/s1632.npz
# RUN: tessera-run %t/s1616.tess --input=a=%t/a.npy --input=b=%t/b.npy --output=%t/s1616.npz
# A model already in fp16 takes float partials unless told otherwise:
# RUN: tessera-compile %t/sums16.onnx -o %t/h32.tess
# RUN: tessera-compile %t/sums16.onnx --partials-type half -o %t/h16.tess
# RUN: tessera-run %t/h32.tess --input=a=%t/a16.npy --input=b=%t/b16.npy --output=%t/h32.npz
# RUN: tessera-run %t/h16.tess --input=a=%t/a16.npy --input=b=%t/b16.npy --output=%t/h16.npz
# RUN: %python %s %t sums
#
# RUN: not tessera-compile %t/mlp.onnx --precision fp8 -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=BAD
# RUN: not tessera-compile %t/mlp.onnx --precision fp16.16 --partials-type float -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=CONTRADICTS
# RUN: not tessera-compile %t/mlp.onnx --partials-type quarter -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=BAD-PARTIALS
# RUN: not ls %t/e.tess

# CHECK: inputs:  x: 16x32xf32
# CHECK: outputs: y: 16x8xf32
# BAD: error: --precision must be fp32, fp16.32 (fp16 storage, float partials) or fp16.16 (fp16 storage and partials), got 'fp8'
# CONTRADICTS: error: --precision fp16.16 has half partials, not float: use --precision fp16.32 for fp16 storage with float partials
# BAD-PARTIALS: error: --partials-type must be float or half, got 'quarter'

import os
import re
import sys

import numpy as np

out = sys.argv[1]
path = lambda name: os.path.join(out, name)  # noqa: E731
if sys.argv[2:] == ["compare"]:
    a, b = np.load(path("fp32.npz"))["y"], np.load(path("fp16.npz"))["y"]
    assert b.dtype == np.float32
    np.testing.assert_allclose(b, a, rtol=0, atol=2e-2 * np.abs(a).max())
    assert not np.array_equal(a, b)  # it did compute in fp16
    sys.exit(0)
if sys.argv[2:] == ["learning"]:
    def losses(name):
        return [float(v) for v in re.findall(r"mean loss ([0-9.]+)", open(path(name)).read())]
    fp32, fp16 = losses("t32.txt"), losses("t16.txt")
    assert fp16[-1] < 0.7 * fp16[0], fp16
    assert abs(fp16[-1] - fp32[-1]) < 0.05 * fp32[-1], (fp32, fp16)
    assert np.load(path("w16.npz"))["w1"].dtype == np.float16
    fp1632 = losses("t1632.txt")
    assert fp1632[-1] < 0.7 * fp1632[0], fp1632
    assert abs(fp1632[-1] - fp32[-1]) < 0.05 * fp32[-1], (fp32, fp1632)
    assert np.load(path("w1632.npz"))["w1"].dtype == np.float16
    sys.exit(0)
if sys.argv[2:] == ["sums"]:
    a = np.load(path("a.npy")).astype(np.float16).astype(np.float64)
    b = np.load(path("b.npy")).astype(np.float16).astype(np.float64)
    w = np.load(path("w.npy")).astype(np.float16).astype(np.float64)
    k = np.load(path("k.npy")).astype(np.float16).astype(np.float64)
    # The exact sums of the fp16 operands; the convolution window by window.
    n, c, h, wd = b.shape
    z = np.zeros((n, k.shape[0], h - 2, wd - 2))
    for i in range(h - 2):
        for j in range(wd - 2):
            z[:, :, i, j] = np.einsum("ncrs,fcrs->nf", b[:, :, i:i + 3, j:j + 3], k)
    exact = {"y": a @ w, "z": z}

    def error(name, output):
        """The largest error relative to each exact value."""
        got = np.load(path(name))[output].astype(np.float64)
        return (np.abs(got - exact[output]) / np.abs(exact[output])).max()

    # Rounded once, each value is within half an fp16 step (2^-11) of the
    # exact sum (f32's own rounding adds at most 2^-24 per term); rounded at
    # every partial sum, several times that (measured: 4.2x to 5.8x).
    once = 2.0 ** -11 + 4096 * 2.0 ** -24
    for output in ("y", "z"):
        for float_partials, half_partials in (("s1632.npz", "s1616.npz"),
                                              ("h32.npz", "h16.npz")):
            e32, e16 = error(float_partials, output), error(half_partials, output)
            assert e32 <= once, (output, float_partials, e32)
            assert e16 > 2.5 * e32, (output, half_partials, e32, e16)
        assert np.load(path("h32.npz"))[output].dtype == np.float16
    sys.exit(0)

from onnx_gen import tanh_mlp, tanh_regression

rng = np.random.RandomState(0)
tanh_mlp("mlp", rng)
np.save(path("x.npy"), rng.randn(16, 32).astype(np.float32))
x, labels = tanh_regression(rng, 1600)
np.savez(path("train.npz"), x=x, labels=labels)

# Long sums of positive values, where rounding every partial sum to fp16
# loses digits: y = a @ w (4096 long), z = conv(b, k) (256 x 3 x 3 long).
from onnx_gen import T, init, node, save, vi  # noqa: E402

w = rng.uniform(0, 1, (4096, 8)).astype(np.float32)
k = rng.uniform(0, 1, (8, 256, 3, 3)).astype(np.float32)
np.save(path("w.npy"), w)
np.save(path("k.npy"), k)
np.save(path("a.npy"), rng.uniform(0, 1, (4, 4096)).astype(np.float32))
np.save(path("b.npy"), rng.uniform(0, 1, (1, 256, 6, 6)).astype(np.float32))
for name, elem, dtype in (("sums", T.FLOAT, np.float32), ("sums16", T.FLOAT16, np.float16)):
    save(name, [node("MatMul", ["a", "w"], ["y"]), node("Conv", ["b", "k"], ["z"])],
         [vi("a", elem, [4, 4096]), vi("b", elem, [1, 256, 6, 6])],
         [vi("y", elem, [4, 8]), vi("z", elem, [1, 8, 4, 4])],
         [init("w", w.astype(dtype)), init("k", k.astype(dtype))])
np.save(path("a16.npy"), np.load(path("a.npy")).astype(np.float16))
np.save(path("b16.npy"), np.load(path("b.npy")).astype(np.float16))
