# Loss scaling: a static scale changes nothing but the gradients' range
# (fp32 weights equal to unscaled training's); automatic scaling doubles
# the scale while gradients allow, halves it and skips the update when they
# overflow, and reports both every run.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05 --micro-batch-size 16 -o %t/plain.tess
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05 --micro-batch-size 16 --loss-scaling 1024 -o %t/static.tess
# RUN: tessera-run %t/plain.tess --train-data %t/train.npz --epochs 2 --save-weights %t/plain.npz
# RUN: tessera-run %t/static.tess --train-data %t/train.npz --epochs 2 --save-weights %t/static.npz | FileCheck %s --check-prefix=STATIC
# RUN: %python %s %t same plain.npz static.npz
#
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.05 --micro-batch-size 16 --precision fp16.16 --loss-scaling auto -o %t/auto.tess
# RUN: tessera-run %t/auto.tess --train-data %t/train.npz --epochs 4 --save-weights %t/auto.npz > %t/auto.txt
# RUN: FileCheck %s --check-prefix=AUTO < %t/auto.txt
# RUN: %python %s %t auto auto.txt auto.npz 0
# Targets 20 times larger: the scale halves near overflow, and nothing
# overflows.
# RUN: tessera-run %t/auto.tess --train-data %t/train-big.npz --epochs 4 --save-weights %t/auto-big.npz > %t/auto-big.txt
# RUN: %python %s %t auto auto-big.txt auto-big.npz lower
# One micro-batch per epoch with targets 1000 times larger: its loss and
# gradients overflow fp16; the update is skipped and reported, and
# training goes on.
# RUN: tessera-run %t/auto.tess --train-data %t/train-spike.npz --epochs 4 --save-weights %t/auto-spike.npz > %t/auto-spike.txt
# RUN: FileCheck %s --check-prefix=SPIKE < %t/auto-spike.txt
# RUN: %python %s %t auto auto-spike.txt auto-spike.npz 4
#
# RUN: not tessera-compile %t/mlp.onnx --train --loss mse --micro-batch-size 16 --loss-scaling -2 -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=BAD
# RUN: not tessera-compile %t/mlp.onnx --loss-scaling 128 -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=INFERENCE
# RUN: not tessera-compile %t/mlp.onnx --train --loss mse --micro-batch-size 16 --precision fp16.16 --loss-scaling 100000 -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=HALF

# STATIC: run 1/200  loss {{[0-9.]+}}  loss scale 1024.00
# AUTO: run 1/400  loss {{[0-9.]+}}  loss scale 2.00
# AUTO: run 2/400  loss {{[0-9.]+}}  loss scale 4.00
# AUTO: loss scale 32768.00
# AUTO-NOT: skipped
# SPIKE: run 51/400  loss INF  loss scale {{[0-9.]+}}  (1 update skipped so far: inf or NaN gradients)
# SPIKE: epoch 1: mean loss {{[0-9.]+}} (over 99 runs; 1 with a skipped update and a non-finite loss left out)
# BAD: error: --loss-scaling -2: give a positive number or auto
# INFERENCE: error: --loss-scaling applies to a training step: add --train
# HALF: error: --loss-scaling 100000: an fp16 loss holds at most 65504

import os
import re
import sys

import numpy as np

out = sys.argv[1]
path = lambda name: os.path.join(out, name)  # noqa: E731
if sys.argv[2:3] == ["same"]:
    a, b = np.load(path(sys.argv[3])), np.load(path(sys.argv[4]))
    for k in ("w1", "w2"):
        np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-7, err_msg=k)
    sys.exit(0)
if sys.argv[2:3] == ["auto"]:
    text = open(path(sys.argv[3])).read()
    scales = [float(s) for s in re.findall(r"loss scale ([0-9.]+)", text)]
    skipped = int(np.load(path(sys.argv[4]))["optimizer.skipped_updates"])
    if sys.argv[5] == "0":
        # Doubled every update up to 2^15, never overflowing.
        assert scales[:15] == [2.0**k for k in range(1, 16)], scales[:16]
        assert skipped == 0 and max(scales) == 32768, (skipped, max(scales))
    elif sys.argv[5] == "lower":
        # Halved whenever gradients came near fp16's largest, so never
        # overflowing.
        assert sum(b == a / 2 for a, b in zip(scales, scales[1:])) > 10, scales
        assert skipped == 0, skipped
    else:
        assert skipped == int(sys.argv[5]), skipped
    losses = [float(v) for v in re.findall(r"epoch [0-9]+: mean loss ([0-9.]+)", text)]
    assert losses[-1] < 0.8 * losses[0], losses
    sys.exit(0)

from onnx_gen import tanh_mlp, tanh_regression

rng = np.random.RandomState(0)
tanh_mlp("mlp", rng)
x, labels = tanh_regression(rng, 1600)
np.savez(path("train.npz"), x=x, labels=labels)
np.savez(path("train-big.npz"), x=x, labels=20 * labels)
spike = labels.copy()
spike[800:816] *= 1000  # run 51 of each epoch's 100
np.savez(path("train-spike.npz"), x=x, labels=spike)
