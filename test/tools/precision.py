# --precision fp16.16 (PopTorch's model.half()): weights and arithmetic in
# fp16, inputs and outputs f32; inference within fp16's precision of fp32,
# and an fp16 training run (stochastic rounding) learns as fp32 does.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/mlp.onnx -o %t/fp32.tess
# RUN: tessera-compile %t/mlp.onnx --precision fp16.16 --summary -o %t/fp16.tess | FileCheck %s
# RUN: tessera-run %t/fp32.tess --input=x=%t/x.npy --output=%t/fp32.npz
# RUN: tessera-run %t/fp16.tess --input=x=%t/x.npy --output=%t/fp16.npz
# RUN: %python %s %t compare
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05 --micro-batch-size 16 -o %t/t32.tess
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05 --micro-batch-size 16 --precision fp16.16 --stochastic-rounding -o %t/t16.tess
# RUN: tessera-run %t/t32.tess --train-data %t/train.npz --epochs 4 > %t/t32.txt
# RUN: tessera-run %t/t16.tess --train-data %t/train.npz --epochs 4 --save-weights %t/w16.npz > %t/t16.txt
# RUN: %python %s %t learning
# RUN: not tessera-compile %t/mlp.onnx --precision fp8 -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=BAD
# RUN: not tessera-compile %t/mlp.onnx --precision fp16.32 -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=PARTIALS
# RUN: not tessera-compile %t/mlp.onnx --partials-type half -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=HALF-PARTIALS

# CHECK: inputs:  x: 16x32xf32
# CHECK: outputs: y: 16x8xf32
# BAD: error: --precision fp8: use fp32 or fp16.16
# PARTIALS: error: --precision fp16.32: fp16 with fp32 partials is not built yet
# HALF-PARTIALS: error: --partials-type half: fp16 partial sums are not built yet; use float

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
    sys.exit(0)

from onnx_gen import tanh_mlp, tanh_regression

rng = np.random.RandomState(0)
tanh_mlp("mlp", rng)
np.save(path("x.npy"), rng.randn(16, 32).astype(np.float32))
x, labels = tanh_regression(rng, 1600)
np.savez(path("train.npz"), x=x, labels=labels)
