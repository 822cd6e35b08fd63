# Stochastic rounding (graph.stochastic_round, tessera-compile
# --stochastic-rounding): unbiased, exact values kept, NaN and overflow as
# round-to-nearest, deterministic for a seed and step, different across
# seeds and steps, the same on the IPU model and the host reference; and
# what it is for: fp16 weight updates below half an fp16 step add up.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/round.mlir -o %t/round.tess
# RUN: tessera-run %t/round.tess --input=%t/in7.npz --output=%t/out7.npz
# RUN: tessera-run %t/round.tess --input=%t/in7.npz --output=%t/out7b.npz
# RUN: tessera-run %t/round.tess --reference --input=%t/in7.npz --output=%t/ref7.npz
# RUN: tessera-run %t/round.tess --input=%t/in8.npz --output=%t/out8.npz
# RUN: tessera-run %t/round.tess --input=%t/in7next.npz --output=%t/out7next.npz
# RUN: %python %s %t check-rounding
#
# Adding 1e-4 to an fp16 1.0 ten thousand times: 1.0 to nearest, about 2.0
# stochastically.
# RUN: tessera-compile %t/stall.onnx --train --loss output:y --optimizer sgd:lr=1e-4 --micro-batch-size 1 --device-iterations 1000 -o %t/stall-rn.tess
# RUN: tessera-compile %t/stall.onnx --train --loss output:y --optimizer sgd:lr=1e-4 --micro-batch-size 1 --device-iterations 1000 --stochastic-rounding -o %t/stall-sr.tess
# RUN: tessera-run %t/stall-rn.tess --train-data %t/stall.npz --epochs 1 --save-weights %t/stall-rn.npz
# RUN: tessera-run %t/stall-sr.tess --train-data %t/stall.npz --epochs 1 --save-weights %t/stall-sr.npz
# RUN: %python %s %t check-stall
#
# An fp16 regression whose updates are below half an fp16 step: it stalls
# to nearest and learns stochastically.
# RUN: tessera-compile %t/linear.onnx --train --loss mse --optimizer sgd:lr=2e-4 --micro-batch-size 4 --device-iterations 10 -o %t/linear-rn.tess
# RUN: tessera-compile %t/linear.onnx --train --loss mse --optimizer sgd:lr=2e-4 --micro-batch-size 4 --device-iterations 10 --stochastic-rounding -o %t/linear-sr.tess
# RUN: tessera-run %t/linear-rn.tess --train-data %t/linear.npz --epochs 3 > %t/linear-rn.txt
# RUN: tessera-run %t/linear-sr.tess --train-data %t/linear.npz --epochs 3 > %t/linear-sr.txt
# RUN: %python %s %t check-learning

import os
import re
import sys

import numpy as np

out = sys.argv[1]
path = lambda name: os.path.join(out, name)  # noqa: E731
N = 65536
# Values and what rounding must give: a fraction 0.3 of a step above 1.0
# (fp16's step there is 2^-10) in the first half; below, fixed cases.
STEP = 2.0**-10
SPECIAL = np.array([1.0, 0.5, -2.0, 65504.0, 2.0**-24, 3 * 2.0**-24, 0.0,  # exact
                    65510.0, 70000.0, -70000.0,  # beyond fp16: to nearest
                    np.inf, -np.inf, np.nan], np.float32)


def inputs(seed, counter, name):
    x = np.empty(N, np.float32)
    x[: N // 4] = 1 + 0.3 * STEP
    x[N // 4: N // 2] = -(1 + 0.7 * STEP)
    x[N // 2: 3 * N // 4] = 0.25 * 2.0**-24  # a quarter of fp16's smallest subnormal
    x[3 * N // 4:] = 0
    x[-len(SPECIAL):] = SPECIAL
    np.savez(path(name), x=x, seed=np.array(seed, np.int64), counter=np.array(counter, np.int64))


if sys.argv[2:] == ["check-rounding"]:
    load = lambda name: np.load(path(name))["y"].astype(np.float64)  # noqa: E731
    y = load("out7.npz")
    # Unbiased: each block's mean within 5 standard errors of the input.
    for lo, hi, x, step in [(0, N // 4, 1 + 0.3 * STEP, STEP),
                            (N // 4, N // 2, -(1 + 0.7 * STEP), STEP),
                            (N // 2, 3 * N // 4, 0.25 * 2.0**-24, 2.0**-24)]:
        block = y[lo:hi]
        p = (x - np.floor(x / step) * step) / step
        bound = 5 * step * np.sqrt(p * (1 - p) / len(block))
        assert abs(block.mean() - x) < bound, (lo, block.mean(), x, bound)
        assert len(np.unique(block)) == 2, np.unique(block)
    special = y[-len(SPECIAL):]
    expected = SPECIAL.astype(np.float16).astype(np.float64)  # exact or to nearest
    np.testing.assert_array_equal(special, expected)
    # Deterministic; the host reference draws the same bits (the generator
    # is keyed by element, not by tile); another seed or step differs.
    np.testing.assert_array_equal(load("out7b.npz"), y)
    np.testing.assert_array_equal(load("ref7.npz"), y)
    for other in ("out8.npz", "out7next.npz"):
        differ = np.mean(load(other)[: N // 2] != y[: N // 2])
        assert 0.3 < differ < 0.6, (other, differ)
    sys.exit(0)

if sys.argv[2:] == ["check-stall"]:
    rn = np.load(path("stall-rn.npz"))["w"].astype(np.float64)
    sr = np.load(path("stall-sr.npz"))["w"].astype(np.float64)
    assert np.all(rn == 1.0), rn
    assert abs(sr.mean() - 2.0) < 0.05, sr
    sys.exit(0)

if sys.argv[2:] == ["check-learning"]:
    def final_loss(name):
        return float(re.findall(r"epoch 3: mean loss ([0-9.]+)", open(path(name)).read())[0])
    rn, sr = final_loss("linear-rn.txt"), final_loss("linear-sr.txt")
    assert sr < 0.3 * rn, (rn, sr)
    sys.exit(0)

import onnx  # noqa: E402
from onnx_gen import T, init, node, save, vi  # noqa: E402

os.makedirs(out, exist_ok=True)
with open(path("round.mlir"), "w") as f:
    f.write(f"""func.func @main(%x: tensor<{N}xf32> {{graph.name = "x"}}, %seed: tensor<i64> {{graph.name = "seed"}},
                %counter: tensor<i64> {{graph.name = "counter"}}) -> (tensor<{N}xf16> {{graph.name = "y"}}) {{
  %0 = graph.stochastic_round %x, %seed, %counter {{stream = 0 : i64}} : (tensor<{N}xf32>, tensor<i64>, tensor<i64>) -> tensor<{N}xf16>
  return %0 : tensor<{N}xf16>
}}
""")
inputs(7, 0, "in7.npz")
inputs(8, 0, "in8.npz")
inputs(7, 1, "in7next.npz")

# y = sum(x * w) with x = -1: each SGD step adds lr = 1e-4 to every weight.
save("stall", [node("Mul", ["x", "w"], ["p"]), node("ReduceSum", ["p"], ["y"], keepdims=0)],
     [vi("x", T.FLOAT16, [1, 16])], [vi("y", T.FLOAT16, [])],
     [init("w", np.ones([16], np.float16))], opset=13)
np.savez(path("stall.npz"), x=-np.ones([10000, 16], np.float16))

rng = np.random.RandomState(0)
save("linear", [node("MatMul", ["x", "w"], ["y"])], [vi("x", T.FLOAT16, [4, 8])],
     [vi("y", T.FLOAT16, [4, 1])], [init("w", np.ones([8, 1], np.float16))], opset=13)
x = rng.randn(4000, 8).astype(np.float16)
target = (1 + 0.05 * rng.randn(8, 1)).astype(np.float32)
np.savez(path("linear.npz"), x=x, labels=(x.astype(np.float32) @ target).astype(np.float16))
