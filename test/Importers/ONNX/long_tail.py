# The long tail of ONNX decomposed into graph ops (ExtraOps.cpp).
# RUN: %python %s %t
# RUN: tessera-compile %t/topk.onnx --compile-to=input | FileCheck %s --check-prefix=TOPK
# RUN: tessera-compile %t/scatter.onnx --compile-to=input | FileCheck %s --check-prefix=SCATTER
# RUN: tessera-compile %t/scatter_max.onnx --compile-to=input | FileCheck %s --check-prefix=SCATTERMAX
# RUN: tessera-compile %t/quantize.onnx --compile-to=input | FileCheck %s --check-prefix=QUANT
# RUN: tessera-compile %t/cubic.onnx --compile-to=input | FileCheck %s --check-prefix=CUBIC
# RUN: tessera-compile %t/shift.onnx --compile-to=input | FileCheck %s --check-prefix=SHIFT
# RUN: tessera-compile %t/acos.onnx --compile-to=input | FileCheck %s --check-prefix=ACOS
# RUN: tessera-compile %t/dft.onnx --compile-to=input | FileCheck %s --check-prefix=DFT
# RUN: tessera-compile %t/adam.onnx --compile-to=input | FileCheck %s --check-prefix=ADAM
# RUN: not tessera-compile %t/topk_big.onnx 2>&1 | FileCheck %s --check-prefix=TOPKBIG
# RUN: not tessera-compile %t/det5.onnx 2>&1 | FileCheck %s --check-prefix=DET5
# RUN: not tessera-compile %t/window_input.onnx 2>&1 | FileCheck %s --check-prefix=WIN
# RUN: tessera-compile %t/sequence.onnx --compile-to=input | FileCheck %s --check-prefix=SEQ
# RUN: not tessera-compile %t/sequence_out.onnx 2>&1 | FileCheck %s --check-prefix=SEQOUT
import os
import sys

import numpy as np
import onnx
from onnx import helper
from onnx_gen import T, init, node, save, vi

# K rounds of arg-max, each masking the winner out; values gathered.
# TOPK-COUNT-2: graph.argmax
# TOPK: graph.gather_elements
# TOPK: graph.concat {{.*}} {axis = 1 : i64} : (tensor<3x1xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
save("topk", [node("TopK", ["x", "k"], ["v", "i"], axis=1)],
     [vi("x", T.FLOAT, [3, 4])], [vi("v", T.FLOAT, [3, 2]), vi("i", T.INT64, [3, 2])],
     [init("k", np.array([2], dtype=np.int64))])

# An accumulating scatter: the updates added into zeros at their flat
# targets (graph.scatter_add, no one-hot mask), then to the data.
# SCATTER-NOT: graph.equal
# SCATTER: graph.scatter_add {{.*}} : (tensor<2x1xf32>, tensor<2xi64>) -> tensor<5x1xf32>
# SCATTER: graph.add {{.*}} : (tensor<5x1xf32>, tensor<5x1xf32>) -> tensor<5x1xf32>
save("scatter", [node("ScatterElements", ["d", "i", "u"], ["y"], axis=1, reduction="add")],
     [vi("d", T.FLOAT, [1, 5]), vi("i", T.INT64, [1, 2]), vi("u", T.FLOAT, [1, 2])],
     [vi("y", T.FLOAT, [1, 5])])

# Other reductions: each update's flat target compared with every position
# (one-hot), the selected updates reduced over updates and merged where
# some update hit.
# SCATTERMAX: graph.equal {{.*}} -> tensor<2x5x1xi1>
# SCATTERMAX: graph.reduce_max {{.*}} {axes = array<i64: 0>, keepdims = false} : (tensor<2x5x1xf32>) -> tensor<5x1xf32>
# SCATTERMAX: graph.max
save("scatter_max", [node("ScatterElements", ["d", "i", "u"], ["y"], axis=1, reduction="max")],
     [vi("d", T.FLOAT, [1, 5]), vi("i", T.INT64, [1, 2]), vi("u", T.FLOAT, [1, 2])],
     [vi("y", T.FLOAT, [1, 5])])

# Round half to even, offset, saturate to the zero point's type.
# QUANT: graph.round
# QUANT: graph.max {{.*}} -> tensor<4xf32>
# QUANT: graph.min {{.*}} -> tensor<4xf32>
# QUANT: graph.cast {{.*}} : tensor<4xf32> to tensor<4xui8>
save("quantize", [node("QuantizeLinear", ["x", "s", "z"], ["y"])],
     [vi("x", T.FLOAT, [4])], [vi("y", T.UINT8, [4])],
     [init("s", np.array(0.5, dtype=np.float32)), init("z", np.array(10, dtype=np.uint8))])

# Cubic resize: one matmul per resized axis by a constant weight matrix.
# CUBIC: graph.matmul {{.*}} : (tensor<1x1x4x2xf32>, tensor<2x3xf32>) -> tensor<1x1x4x3xf32>
# CUBIC: graph.matmul {{.*}} : (tensor<1x1x3x4xf32>, tensor<4x8xf32>) -> tensor<1x1x3x8xf32>
save("cubic", [node("Resize", ["x", "", "", "sizes"], ["y"], mode="cubic")],
     [vi("x", T.FLOAT, [1, 1, 2, 4])], [vi("y", T.FLOAT, [1, 1, 3, 8])],
     [init("sizes", np.array([1, 1, 3, 8], dtype=np.int64))])

# SHIFT: graph.shift_right {{.*}} : (tensor<3xui16>, tensor<3xui16>) -> tensor<3xui16>
save("shift", [node("BitShift", ["x", "y"], ["z"], direction="RIGHT")],
     [vi("x", T.UINT16, [3]), vi("y", T.UINT16, [3])], [vi("z", T.UINT16, [3])])

# acos x = pi/2 - atan(x / sqrt(1 - x^2))
# ACOS: graph.sqrt
# ACOS: graph.atan
# ACOS: graph.sub
save("acos", [node("Acos", ["x"], ["y"])], [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])])

# A real signal times constant cosine and sine matrices.
# DFT: graph.matmul {{.*}} : (tensor<1x8xf32>, tensor<8x5xf32>) -> tensor<1x5xf32>
# DFT: graph.matmul {{.*}} : (tensor<1x8xf32>, tensor<8x5xf32>) -> tensor<1x5xf32>
# DFT: graph.concat {{.*}} -> tensor<1x5x2xf32>
save("dft", [node("DFT", ["x"], ["y"], axis=1, onesided=1)],
     [vi("x", T.FLOAT, [1, 8, 1])], [vi("y", T.FLOAT, [1, 5, 2])], opset=17)

# ai.onnx.preview.training's Adam without a default-domain opset.
# ADAM: graph.pow
# ADAM: graph.sqrt
m = helper.make_model(helper.make_graph(
    [helper.make_node("Adam", ["r", "t", "x", "g", "v", "h"], ["x2", "v2", "h2"],
                      domain="ai.onnx.preview.training")],
    "g", [vi("r", T.FLOAT, []), vi("t", T.INT64, []), vi("x", T.FLOAT, [2]),
          vi("g", T.FLOAT, [2]), vi("v", T.FLOAT, [2]), vi("h", T.FLOAT, [2])],
    [vi("x2", T.FLOAT, [2]), vi("v2", T.FLOAT, [2]), vi("h2", T.FLOAT, [2])]),
    opset_imports=[helper.make_opsetid("ai.onnx.preview.training", 1)])
m.ir_version = 8
onnx.save(m, os.path.join(sys.argv[1], "adam.onnx"))

# TOPKBIG: error: TopK: TopK with K > 256 (K = 300; each of the K picks is a pass over the axis) is not supported yet
save("topk_big", [node("TopK", ["x", "k"], ["v", "i"])],
     [vi("x", T.FLOAT, [400])], [vi("v", T.FLOAT, [300]), vi("i", T.INT64, [300])],
     [init("k", np.array([300], dtype=np.int64))])

# DET5: error: Det: Det of matrices larger than 4x4 (5x5) is not supported yet
save("det5", [node("Det", ["x"], ["y"])], [vi("x", T.FLOAT, [5, 5])], [vi("y", T.FLOAT, [])])

# A window's size computed from a graph input names that input.
# WIN: error: HannWindow: input 'size' must be a constant scalar {{.*}}; it is computed from the model's input 'n': specialize the model for one value with --constant-input n=FILE
save("window_input", [node("Add", ["n", "one"], ["m"]), node("HannWindow", ["m"], ["y"])],
     [vi("n", T.INT64, [])], [vi("y", T.FLOAT, [9])],
     [init("one", np.array(1, dtype=np.int64))], opset=17)

# Sequences are lists of tensors at import time; a sequence output is an error.
# SEQ: %[[A:.*]] = graph.reshape %arg0 : tensor<2x3xf32> -> tensor<2x1x3xf32>
# SEQ: %[[B:.*]] = graph.reshape %arg1 : tensor<2x3xf32> -> tensor<2x1x3xf32>
# SEQ: %[[C:.*]] = graph.reshape %arg0 : tensor<2x3xf32> -> tensor<2x1x3xf32>
# SEQ: graph.concat %[[A]], %[[B]], %[[C]] {axis = 1 : i64}
save("sequence", [node("SequenceConstruct", ["x", "y"], ["s"]),
                  node("SequenceInsert", ["s", "x"], ["s2"]),
                  node("ConcatFromSequence", ["s2"], ["z"], axis=1, new_axis=1)],
     [vi("x", T.FLOAT, [2, 3]), vi("y", T.FLOAT, [2, 3])], [vi("z", T.FLOAT, [2, 3, 3])])
# SEQOUT: error: graph output 's' is a sequence; Tessera's executables return tensors
save("sequence_out", [node("SequenceConstruct", ["x"], ["s"])], [vi("x", T.FLOAT, [2])],
     [helper.make_tensor_sequence_value_info("s", T.FLOAT, [2])])
