# An out-of-memory error says which change makes the model fit, having
# tried it, and following that advice compiles.
# RUN: rm -rf %t && %python %s %t
# On 12 tiles the operands leave too little room for the temporaries of a
# one-step plan; the planner sees what the tiles hold and takes serial steps.
# RUN: tessera-compile %t/matmul.onnx --tiles-per-ipu=12 --explain-plans -o %t/a.tess 2>&1 | FileCheck %s --check-prefix=SERIAL
# RUN: test -s %t/a.tess
# Its operands alone overflow 7 tiles: no proportion helps, two IPUs do.
# RUN: not tessera-compile %t/matmul.onnx --tiles-per-ipu=7 -o %t/b.tess 2>&1 | FileCheck %s --check-prefix=IPUS
# RUN: test ! -e %t/b.tess
# RUN: tessera-compile %t/matmul.onnx --tiles-per-ipu=7 --num-ipus=2 -o %t/b.tess
# RUN: test -s %t/b.tess
# A proportion already at its smallest tried is not advised again.
# RUN: not tessera-compile %t/matmul.onnx --tiles-per-ipu=7 --available-memory-proportion=0.1 -o %t/c.tess 2>&1 | FileCheck %s --check-prefix=SMALL
# A training step keeping every activation overflows one tile: no
# proportion helps, recomputing the activations does (tried before more
# IPUs), and following that advice compiles.
# RUN: %python %S/recompute.py %t
# RUN: not tessera-compile %t/res.onnx --train --loss mse --micro-batch-size 128 --tiles-per-ipu=1 -o %t/d.tess 2>&1 | FileCheck %s --check-prefix=RECOMPUTE
# RUN: test ! -e %t/d.tess
# RUN: tessera-compile %t/res.onnx --train --loss mse --micro-batch-size 128 --tiles-per-ipu=1 --recompute auto -o %t/d.tess
# RUN: test -s %t/d.tess

# SERIAL: remark: y: split into {{[0-9]+}} serial steps along reduction loop 2 (640 iterations): {{[0-9]+}} estimated cycles; no parallel split fits the memory budget; weighed: unsplit {{[0-9]+}}; 2 partial results: {{[0-9]+}} ({{[0-9]+}} partial sums + {{[0-9]+}} combining + sync; over the memory budget)
# IPUS: error: out of tile memory: tile {{[0-9]+}} needs
# IPUS: remark: the model fits with --num-ipus 2 (tried first, does not fit: --available-memory-proportion 0.3, --available-memory-proportion 0.15)
# SMALL: remark: the model fits with --num-ipus 2{{$}}
# RECOMPUTE: error: out of tile memory: tile 0 needs
# RECOMPUTE: remark: the model fits with --recompute auto (tried first, does not fit: --available-memory-proportion 0.3, --available-memory-proportion 0.15)

import numpy as np
from onnx_gen import T, init, node, save, vi

n = 640
weight = (np.random.RandomState(0).randn(n, n) * 0.01).astype(np.float32)
save("matmul", [node("MatMul", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [n, n])],
     [vi("y", T.FLOAT, [n, n])], [init("w", weight)])
