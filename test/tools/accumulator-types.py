# PopTorch's accumulator types as optimizer keys: accum-type (the gradient
# accumulators), first- and second-order-momentum-accum-type (optimizer
# state). One weight update of an fp32 model with fp16 accumulators equals
# a numpy emulation of fp16 accumulation (the gradient rounded into the
# accumulator, the sum and the mean in fp16), and fp32 accumulators equal
# the exact mean; an fp16 model with fp32 accumulators and fp16 momentum
# trains, keeps each slot in its type, and the IPU model agrees with the
# host reference.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05,accum-type=float16 --gradient-accumulation 4 --micro-batch-size 16 -o %t/acc16.tess
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05,accum-type=float32 --gradient-accumulation 4 --micro-batch-size 16 -o %t/acc32.tess
# RUN: tessera-run %t/acc16.tess --train-data %t/train.npz --steps 1 --save-weights %t/acc16.npz
# RUN: tessera-run %t/acc32.tess --train-data %t/train.npz --steps 1 --save-weights %t/acc32.npz
# RUN: %python %s %t emulate
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05,momentum=0.9,accum-type=float,first-order-momentum-accum-type=half --gradient-accumulation 4 --micro-batch-size 16 --precision fp16.16 -o %t/half.tess
# RUN: tessera-run %t/half.tess --train-data %t/train.npz --epochs 3 --save-weights %t/half.npz > %t/half.txt
# RUN: tessera-run %t/half.tess --reference --train-data %t/train.npz --epochs 3 --save-weights %t/half-ref.npz
# RUN: %python %s %t half
# RUN: not tessera-compile %t/mlp.onnx --train --loss mse --optimizer adam:second-order-momentum-accum-type=bf16 -o %t/bad.tess 2>&1 | FileCheck %s --check-prefix=BAD
# BAD: error: second-order-momentum-accum-type=bf16 of adam: use float32 or float16

import os
import re
import sys

import numpy as np
from onnx_gen import assert_same_arrays, tanh_mlp, tanh_regression

out = sys.argv[1]
path = lambda name: os.path.join(out, name)  # noqa: E731

if sys.argv[2:] == ["emulate"]:
    import onnx
    from onnx import numpy_helper
    w0 = {i.name: numpy_helper.to_array(i).astype(np.float64)
          for i in onnx.load(path("mlp.onnx")).graph.initializer}
    data = np.load(path("train.npz"))
    x, labels = data["x"].astype(np.float64), data["labels"].astype(np.float64)

    def gradients(xb, lb):
        t = np.tanh(xb @ w0["w1"])
        dy = 2 * (t @ w0["w2"] - lb) / lb.size
        return {"w1": xb.T @ ((dy @ w0["w2"].T) * (1 - t * t)), "w2": t.T @ dy}
    micro = [gradients(x[16 * i:16 * i + 16], labels[16 * i:16 * i + 16]) for i in range(4)]
    acc16, acc32 = np.load(path("acc16.npz")), np.load(path("acc32.npz"))
    for k in ("w1", "w2"):
        total = np.zeros_like(w0[k], dtype=np.float16)
        for g in micro:
            total = (total + g[k].astype(np.float16)).astype(np.float16)
        half_mean = (total * np.float16(0.25)).astype(np.float64)
        exact_mean = sum(g[k] for g in micro) / 4
        assert acc16[k + "/grad_accum"].dtype == np.float16
        assert acc32[k + "/grad_accum"].dtype == np.float32
        np.testing.assert_allclose(acc16[k], w0[k] - 0.05 * half_mean, rtol=0, atol=2e-7, err_msg=k)
        np.testing.assert_allclose(acc32[k], w0[k] - 0.05 * exact_mean, rtol=0, atol=2e-7, err_msg=k)
        # fp16 accumulation did round: the two updates differ well beyond that.
        assert np.abs(acc16[k] - acc32[k]).max() > 1e-6, k
    sys.exit(0)
if sys.argv[2:] == ["half"]:
    state = np.load(path("half.npz"))
    types = {k: state[k].dtype for k in state.files}
    assert types["w1"] == np.float16 and types["w1/grad_accum"] == np.float32, types
    assert types["w1/momentum_buffer"] == np.float16, types
    losses = [float(v) for v in re.findall(r"mean loss ([0-9.]+)", open(path("half.txt")).read())]
    assert losses[-1] < 0.7 * losses[0], losses
    assert_same_arrays(path("half-ref.npz"), path("half.npz"), rtol=2e-3, atol=2e-3)
    sys.exit(0)

rng = np.random.RandomState(0)
tanh_mlp("mlp", rng)
x, labels = tanh_regression(rng, 640)
np.savez(path("train.npz"), x=x, labels=labels)
