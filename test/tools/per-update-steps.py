# Gradient accumulation: the optimizer's update runs once per weight update.
# Its steps (marked per_update in the program) and the copy-back of what a
# committed update stores are skipped on the other micro-batches, which
# keep the old state anyway: the IPU model's weights equal the host
# reference's, which runs every step every micro-batch, and the estimate
# counts the update once per G micro-batches.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer adam:lr=0.01 --micro-batch-size 16 --gradient-accumulation 4 --summary -o %t/g4.tess > %t/summary.txt
# RUN: FileCheck %s < %t/summary.txt
# RUN: tessera-run %t/g4.tess --train-data %t/train.npz --steps 6 --save-weights %t/ipu.npz
# RUN: tessera-run %t/g4.tess --reference --train-data %t/train.npz --steps 6 --save-weights %t/ref.npz
# RUN: %python %s %t check summary.txt ipu.npz ref.npz
# Resumed mid-update (the counter at 2 of 4): the IPU model commits when the
# program's counter does, on the second micro-batch of the first run.
# RUN: %python %s %t midway ipu.npz mid.npz
# RUN: tessera-run %t/g4.tess --load-weights %t/mid.npz --train-data %t/train.npz --steps 3 --save-weights %t/ipu-mid.npz
# RUN: tessera-run %t/g4.tess --reference --load-weights %t/mid.npz --train-data %t/train.npz --steps 3 --save-weights %t/ref-mid.npz
# RUN: %python %s %t same ipu-mid.npz ref-mid.npz
# Without accumulation nothing is skipped: no update line.
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer adam:lr=0.01 --micro-batch-size 16 --summary -o %t/g1.tess | FileCheck %s --check-prefix=ONE
# Automatic loss scaling commits (or skips) every micro-batch: the update
# is computed every micro-batch.
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer sgd:lr=0.01 --micro-batch-size 16 --precision fp16.16 --loss-scaling auto --summary -o %t/scaled.tess | FileCheck %s --check-prefix=ONE

# Replicas sum their accumulated gradients once per update: the
# all-reduce is one of the update's steps.
# RUN: tessera-compile %t/mlp.onnx --train --loss mse --optimizer adam:lr=0.01 --micro-batch-size 16 --gradient-accumulation 4 --replicas 2 --summary --summary-steps 0 -o %t/r2.tess | FileCheck %s --check-prefix=REPL

# REPL: one weight update (4 micro-batches)
# REPL: all-reduce 0 (0.0%)
# REPL: allreduce0 {{.*}}cross_replica_sum (once per update)
# CHECK: one weight update (4 micro-batches): {{[0-9,]+}} cycles, {{[0-9,]+}} samples/s; the optimizer's update {{[0-9,]+}} cycles once per update
# CHECK: (once per update)
# ONE-NOT: once per update

import os
import re
import sys

import numpy as np
from onnx_gen import assert_same_arrays, tanh_mlp, tanh_regression

out = sys.argv[1]
path = lambda name: os.path.join(out, name)  # noqa: E731
if sys.argv[2:3] == ["check"]:
    text = open(path(sys.argv[3])).read()
    number = lambda pattern: int(re.search(pattern, text).group(1).replace(",", ""))  # noqa: E731
    iteration = number(r"one iteration \(batch 16\): ([0-9,]+) cycles")
    update = number(r"one weight update \(4 micro-batches\): ([0-9,]+) cycles")
    optimizer = number(r"the optimizer's update ([0-9,]+) cycles")
    # Four micro-batches, then the update once.
    assert optimizer > 0 and update == 4 * iteration + optimizer, (iteration, update, optimizer)
    ipu = np.load(path(sys.argv[4]))
    assert float(ipu["optimizer.step"]) == 6 and float(ipu["optimizer.micro_step"]) == 0
    assert_same_arrays(path(sys.argv[5]), path(sys.argv[4]), rtol=1e-5)
    sys.exit(0)
if sys.argv[2:3] == ["midway"]:
    state = dict(np.load(path(sys.argv[3])))
    state["optimizer.micro_step"] = np.float32(2)
    np.savez(path(sys.argv[4]), **state)
    sys.exit(0)
if sys.argv[2:3] == ["same"]:
    ipu = np.load(path(sys.argv[3]))
    assert float(ipu["optimizer.step"]) == 9, float(ipu["optimizer.step"])
    assert_same_arrays(path(sys.argv[4]), path(sys.argv[3]), rtol=1e-5)
    sys.exit(0)

rng = np.random.RandomState(0)
tanh_mlp("mlp", rng)
x, labels = tanh_regression(rng, 640)
np.savez(path("train.npz"), x=x, labels=labels)
