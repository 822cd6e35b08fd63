# Recomputation trades compute for memory and never changes results: a
# residual MLP trained with every layer's activations recomputed from the
# layer's input reaches bit-identical weights with a lower peak of tile
# memory; auto finds that choice itself; errors name what to change.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/res.onnx --train --loss mse --optimizer sgd:lr=0.01 --micro-batch-size 128 --tiles-per-ipu 16 --summary -o %t/none.tess > %t/none.txt
# RUN: tessera-compile %t/res.onnx --train --loss mse --optimizer sgd:lr=0.01 --micro-batch-size 128 --tiles-per-ipu 16 --recompute checkpoint-every-layer --summary -o %t/layer.tess > %t/layer.txt
# RUN: tessera-compile %t/res.onnx --train --loss mse --optimizer sgd:lr=0.01 --micro-batch-size 128 --tiles-per-ipu 16 --recompute auto --summary -o %t/auto.tess > %t/auto.txt
# RUN: %python %s %t peak none.txt layer.txt auto.txt
# RUN: tessera-run %t/none.tess --train-data %t/train.npz --epochs 1 --save-weights %t/none.npz
# RUN: tessera-run %t/layer.tess --train-data %t/train.npz --epochs 1 --save-weights %t/layer.npz
# RUN: tessera-run %t/auto.tess --train-data %t/train.npz --epochs 1 --save-weights %t/auto.npz
# RUN: %python %s %t same none.npz layer.npz auto.npz
#
# The clones are marked, placed after the forward pass, and lowering keeps
# the mark.
# RUN: tessera-compile %t/res.onnx --train --loss mse --micro-batch-size 128 --recompute checkpoint-every-layer --compile-to=linalg -o - | FileCheck %s
# CHECK: linalg.generic {{.*}}graph.recomputed
#
# RUN: not tessera-compile %t/res.onnx --train --loss mse --micro-batch-size 128 --recompute sometimes -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=MODE
# RUN: not tessera-compile %t/res.onnx --recompute auto -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=INFERENCE
# RUN: not tessera-compile %t/flat.onnx --train --loss mse --micro-batch-size 128 --recompute checkpoint-every-layer -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=LAYERS
# MODE: error: --recompute sometimes: use none, checkpoint-every-layer, stage-inputs or auto
# INFERENCE: error: --recompute applies to a training step: add --train
# LAYERS: error: --recompute checkpoint-every-layer: found no repeated layers in the model's op names

import os
import re
import sys

import numpy as np

out = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "peak":
    def peak(name):
        text = open(os.path.join(out, name)).read()
        return int(re.search(r"tile memory: peak ([0-9,]+) B", text).group(1).replace(",", ""))
    none, layer, auto = (peak(n) for n in sys.argv[3:6])
    assert layer < none * 0.9, (none, layer)
    assert auto <= layer, (layer, auto)
    sys.exit(0)
if len(sys.argv) > 2 and sys.argv[2] == "same":
    ref = np.load(os.path.join(out, sys.argv[3]))
    for name in sys.argv[4:]:
        other = np.load(os.path.join(out, name))
        for k in ref.files:
            np.testing.assert_array_equal(other[k], ref[k], err_msg=name + ": " + k)
    sys.exit(0)

from onnx_gen import T, init, node, save, vi

rng = np.random.RandomState(0)
d, b, layers = 64, 128, 4
nodes, inits, x = [], [], "x"
for k in range(layers):
    inits += [init(f"w{k}_{j}", (rng.randn(d, d) * 0.1).astype(np.float32)) for j in (1, 2)]
    p, y = f"/layers.{k}/", "y" if k == layers - 1 else f"r{k}"
    nodes += [node("MatMul", [x, f"w{k}_1"], [f"m{k}a"], name=p + "MatMul"),
              node("Tanh", [f"m{k}a"], [f"t{k}a"], name=p + "Tanh"),
              node("MatMul", [f"t{k}a", f"w{k}_2"], [f"m{k}b"], name=p + "MatMul_1"),
              node("Tanh", [f"m{k}b"], [f"t{k}b"], name=p + "Tanh_1"),
              node("Add", [f"t{k}b", x], [y], name=p + "Add")]
    x = y
save("res", nodes, [vi("x", T.FLOAT, [b, d])], [vi("y", T.FLOAT, [b, d])], inits)
save("flat", [node("MatMul", ["x", "w0_1"], ["y"], name="MatMul")], [vi("x", T.FLOAT, [b, d])],
     [vi("y", T.FLOAT, [b, d])], inits[:1])
np.savez(os.path.join(out, "train.npz"), x=rng.randn(b * 10, d).astype(np.float32),
         labels=rng.randn(b * 10, d).astype(np.float32))
