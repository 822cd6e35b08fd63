# Ops placed on IPUs: optimum's --layers-per-ipu, PopART's __ipu_number
# annotations or --pipeline auto; sharded and pipelined execution give the
# single-IPU results; the estimate overlaps pipelined stages; misuse is an
# error saying what to change.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/layers.onnx -o %t/one.tess
# RUN: tessera-run %t/one.tess --input=x=%t/x.npy --output=%t/one.npz
#
# Sharded: layers 0-1 on IPU 0, 2-3 on IPU 1, the same outputs.
# RUN: tessera-compile %t/layers.onnx --num-ipus 2 --layers-per-ipu 2,2 --execution sharded --compile-to=partitioned -o - | FileCheck %s --check-prefix=SHARDED
# RUN: tessera-compile %t/layers.onnx --num-ipus 2 --layers-per-ipu 2,2 --execution sharded -o %t/sharded.tess
# RUN: tessera-run %t/sharded.tess --input=x=%t/x.npy --output=%t/sharded.npz
# RUN: %python %s %t compare one.npz sharded.npz
#
# Pipelined needs a micro-batch per stage.
# RUN: not tessera-compile %t/layers.onnx --num-ipus 2 --layers-per-ipu 2,2 -o %t/p.tess 2>&1 | FileCheck %s --check-prefix=FEW
# RUN: test ! -e %t/p.tess
# RUN: tessera-compile %t/layers.onnx --num-ipus 2 --pipeline auto --device-iterations 4 --summary -o %t/p.tess | FileCheck %s --check-prefix=PIPELINED
# RUN: %python %s %t tile x.npy x4.npy 4
# RUN: tessera-run %t/p.tess --input=x=%t/x4.npy --output=%t/p.npz | FileCheck %s --check-prefix=TIMES
# RUN: %python %s %t compare one.npz p.npz
#
# Training pipelined over four IPUs reaches the weights of training on one
# after 10 weight updates of 4 micro-batches.
# RUN: tessera-compile %t/layers.onnx --train --loss mse --optimizer adam:lr=0.01 --micro-batch-size 8 --gradient-accumulation 4 -o %t/t1.tess
# RUN: tessera-compile %t/layers.onnx --train --loss mse --optimizer adam:lr=0.01 --micro-batch-size 8 --gradient-accumulation 4 --num-ipus 4 --pipeline auto --summary -o %t/t4.tess | FileCheck %s --check-prefix=TRAIN4
# RUN: tessera-run %t/t1.tess --train-data %t/train.npz --epochs 1 --save-weights %t/w1.npz
# RUN: tessera-run %t/t4.tess --train-data %t/train.npz --epochs 1 --save-weights %t/w4.npz
# RUN: %python %s %t weights w1.npz w4.npz
# RUN: not tessera-compile %t/layers.onnx --train --loss mse --micro-batch-size 8 --gradient-accumulation 2 --num-ipus 4 --pipeline auto -o %t/t.tess 2>&1 | FileCheck %s --check-prefix=ACCUMULATE
# Stage s holds 2 (4 - s) - 1 micro-batches' activations for the backward
# pass: 7 copies on IPU 0, 5, 3, none on the last; sharded, none.
# RUN: tessera-compile %t/layers.onnx --train --loss mse --micro-batch-size 8 --gradient-accumulation 4 --num-ipus 4 --pipeline auto --compile-to=ipu -o - | FileCheck %s --check-prefix=STASH
# RUN: tessera-compile %t/layers.onnx --train --loss mse --micro-batch-size 8 --gradient-accumulation 4 --num-ipus 4 --pipeline auto --execution sharded --compile-to=ipu -o - | FileCheck %s --check-prefix=SHARDED-STASH
#
# PopTorch's BeginBlock by name: layers.2 and after on IPU 1.
# RUN: tessera-compile %t/layers.onnx --num-ipus 2 --begin-block layers.2=1 --compile-to=partitioned -o - | FileCheck %s --check-prefix=BLOCK
#
# PopART's annotations place the ops without any flag.
# RUN: tessera-compile %t/annotated.onnx --num-ipus 2 --compile-to=partitioned -o - | FileCheck %s --check-prefix=ANNOTATED
# RUN: not tessera-compile %t/annotated.onnx -o %t/a.tess 2>&1 | FileCheck %s --check-prefix=ONE-IPU
#
# RUN: not tessera-compile %t/layers.onnx --num-ipus 2 --layers-per-ipu 1,2 -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=COUNT
# RUN: not tessera-compile %t/layers.onnx --num-ipus 2 --pipeline sideways -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=MODE
# RUN: not tessera-compile %t/layers.onnx --num-ipus 2 --pipeline auto --execution lazy -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=EXECUTION

# SHARDED: graph.stages = [{{{.*}}ipu = 0 : i64, ops = 4 : i64, stage = 0 : i64}, {{{.*}}ipu = 1 : i64, ops = 4 : i64, stage = 1 : i64}]
# SHARDED: graph.matmul {{.*}}graph.ipu = 0
# SHARDED: graph.matmul {{.*}}graph.ipu = 1
# FEW: error: a pipeline of 2 stages needs at least 2 micro-batches at a time, one per stage, but gets 1: use device iterations (--device-iterations, deviceIterations) of 2 or more, or sharded execution (--execution sharded, ShardedExecution)
# PIPELINED: per IPU (its steps, one iteration): IPU 0 {{[0-9,]+}}, IPU 1 {{[0-9,]+}}
# PIPELINED: pipelined over 2 stages: the slowest IPU sets the pace; filling and draining the pipeline adds {{[0-9,]+}} cycles per run
# TIMES: 4 device iterations per run: {{[0-9,]+}} cycles on the device per run
# TRAIN4: pipelined over 4 stages: the slowest IPU sets the pace; filling and draining the pipeline adds {{[0-9,]+}} cycles per weight update
# ACCUMULATE: error: a pipeline of 4 stages needs at least 4 micro-batches at a time, one per stage, but gets 2: use a gradient accumulation (--gradient-accumulation, Training.gradientAccumulation) of 4 or more, or sharded execution (--execution sharded, ShardedExecution)
# STASH-DAG: ipu.stash_copies = array<i64: 7>
# STASH-DAG: ipu.stash_copies = array<i64: 5>
# STASH-DAG: ipu.stash_copies = array<i64: 3>
# STASH-NOT: ipu.stash_copies = array<i64: 1>
# SHARDED-STASH-NOT: ipu.stash_copies
# BLOCK: graph.stages = [{{{.*}}ipu = 0 : i64, ops = 4 : i64, stage = 0 : i64}, {{{.*}}ipu = 1 : i64, ops = 4 : i64, stage = 1 : i64}]
# ANNOTATED: graph.matmul {{.*}}graph.ipu = 0 : i64, graph.stage = 0
# ANNOTATED: graph.matmul {{.*}}graph.ipu = 1 : i64, graph.stage = 1
# ONE-IPU: error: graph-assign-stages: the op is placed on IPU 1 but there is 1 IPU (IPUs count from 0); raise --num-ipus or change the annotation
# COUNT: error: --layers-per-ipu 1,2 places 3 layers but the model has 4 ('layers/0' ... 'layers/3'); use -1 on an IPU to take the rest
# MODE: error: --pipeline sideways: use manual or auto
# EXECUTION: error: --execution lazy: use pipelined or sharded

import os
import sys

import numpy as np

if len(sys.argv) > 2:
    out = sys.argv[1]
    if sys.argv[2] == "weights":
        a, b = (np.load(os.path.join(out, f)) for f in sys.argv[3:5])
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-4, atol=1e-6, err_msg=k)
        sys.exit(0)
    if sys.argv[2] == "compare":
        a, b = (np.load(os.path.join(out, f))["y"] for f in sys.argv[3:5])
        # The device iterations' outputs are the same input's, four times.
        b = b[: a.shape[0]]
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    else:  # tile
        x = np.load(os.path.join(out, sys.argv[3]))
        np.save(os.path.join(out, sys.argv[4]), np.concatenate([x] * int(sys.argv[5])))
    sys.exit(0)

from onnx_gen import T, init, node, save, vi

rng = np.random.RandomState(0)
d = 64
weights = [init(f"w{k}", (rng.randn(d, d) * 0.2).astype(np.float32)) for k in range(4)]


def layers(annotate):
    nodes, x = [], "x"
    for k in range(4):
        attrs = {"__ipu_number": k // 2} if annotate else {}
        nodes.append(node("MatMul", [x, f"w{k}"], [f"m{k}"], name=f"/layers.{k}/MatMul", **attrs))
        y = "y" if k == 3 else f"r{k}"
        nodes.append(node("Tanh", [f"m{k}"], [y], name=f"/layers.{k}/Tanh", **attrs))
        x = y
    return nodes


save("layers", layers(False), [vi("x", T.FLOAT, [8, d])], [vi("y", T.FLOAT, [8, d])], weights)
save("annotated", layers(True), [vi("x", T.FLOAT, [8, d])], [vi("y", T.FLOAT, [8, d])], weights)
np.save(os.path.join(sys.argv[1], "x.npy"), rng.randn(8, d).astype(np.float32))
# 10 weight updates of 4 micro-batches of 8.
np.savez(os.path.join(sys.argv[1], "train.npz"), x=rng.randn(320, d).astype(np.float32),
         labels=np.tanh(rng.randn(320, d)).astype(np.float32))
