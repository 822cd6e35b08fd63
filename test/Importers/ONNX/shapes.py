# RUN: %python %s %t
# RUN: tessera-compile %t/shape_fold.onnx --compile-to=graph | FileCheck %s --check-prefix=FOLD
# RUN: tessera-compile %t/squeeze11.onnx --compile-to=input | FileCheck %s --check-prefix=SQ
# RUN: tessera-compile %t/squeeze13.onnx --compile-to=input | FileCheck %s --check-prefix=SQ
# RUN: tessera-compile %t/split.onnx --compile-to=input | FileCheck %s --check-prefix=SPLIT
# RUN: tessera-compile %t/slice.onnx --compile-to=input | FileCheck %s --check-prefix=SLICE
# RUN: tessera-compile %t/expand_tile.onnx --compile-to=input | FileCheck %s --check-prefix=EXP
# RUN: tessera-compile %t/pad.onnx --compile-to=input | FileCheck %s --check-prefix=PAD
# RUN: tessera-compile %t/generators.onnx --compile-to=graph | FileCheck %s --check-prefix=GEN
# RUN: tessera-compile %t/einsum.onnx --compile-to=graph | FileCheck %s --check-prefix=EIN
# RUN: tessera-compile %t/resize.onnx --compile-to=input | FileCheck %s --check-prefix=RES
# RUN: tessera-compile %t/gather.onnx --compile-to=input | FileCheck %s --check-prefix=GATHER
# RUN: tessera-compile %t/trilu.onnx --compile-to=input | FileCheck %s --check-prefix=TRILU
# RUN: tessera-compile %t/gather_elements.onnx --compile-to=input | FileCheck %s --check-prefix=GATHERELEM
# RUN: tessera-compile %t/cumsum.onnx --compile-to=graph | FileCheck %s --check-prefix=CUMSUM
import numpy as np
from onnx_gen import T, init, node, save, vi, helper

i64 = lambda *v: np.array(v, dtype=np.int64)

# What torch.onnx.export emits for x.view(x.size(0), -1): all shape
# arithmetic folds away and the reshape is static.
# FOLD: func.func @main(%arg0: tensor<3x4x5xf32> {graph.name = "x"}) -> (tensor<3x20xf32> {graph.name = "out"})
# FOLD-NEXT: %[[R:.*]] = graph.reshape %arg0 : tensor<3x4x5xf32> -> tensor<3x20xf32>
# FOLD-NEXT: return %[[R]]
save("shape_fold", [
    node("Shape", ["x"], ["s"]),
    node("Gather", ["s", "zero"], ["d0"], axis=0),
    node("Unsqueeze", ["d0", "axes0"], ["d0u"]),
    node("Concat", ["d0u", "minus1"], ["shape"], axis=0),
    node("Reshape", ["x", "shape"], ["out"]),
], [vi("x", T.FLOAT, [3, 4, 5])], [vi("out", T.FLOAT, [3, 20])],
    [init("zero", np.int64(0)), init("axes0", i64(0)), init("minus1", i64(-1))])

# Squeeze's axes moved from an attribute to an input in opset 13. The two
# reshapes fold into one as they are imported.
# SQ: %[[R:.*]] = graph.reshape %arg0 : tensor<1x3x1x2xf32> -> tensor<3x1x2xf32>
# SQ-NEXT: return %[[R]]
save("squeeze11", [node("Squeeze", ["x"], ["s"], axes=[0, -2]),
                   node("Unsqueeze", ["s"], ["out"], axes=[1])],
     [vi("x", T.FLOAT, [1, 3, 1, 2])], [vi("out", T.FLOAT, [3, 1, 2])], opset=11)
save("squeeze13", [node("Squeeze", ["x", "a"], ["s"]),
                   node("Unsqueeze", ["s", "b"], ["out"])],
     [vi("x", T.FLOAT, [1, 3, 1, 2])], [vi("out", T.FLOAT, [3, 1, 2])],
     [init("a", i64(0, -2)), init("b", i64(1))], opset=13)

# SPLIT: graph.slice %arg0 {limits = array<i64: 2, 2>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<2x6xf32> -> tensor<2x2xf32>
# SPLIT: graph.slice %arg0 {limits = array<i64: 2, 6>, starts = array<i64: 0, 2>, strides = array<i64: 1, 1>} : tensor<2x6xf32> -> tensor<2x4xf32>
save("split", [node("Split", ["x", "sizes"], ["a", "b"], axis=1)],
     [vi("x", T.FLOAT, [2, 6])], [vi("a", T.FLOAT, [2, 2]), vi("b", T.FLOAT, [2, 4])],
     [init("sizes", i64(2, 4))])

# Negative steps reverse; out-of-range ends clamp (INT64_MAX is "to the end").
# SLICE: graph.slice %arg0 {limits = array<i64: -1, 5>, starts = array<i64: 3, 1>, strides = array<i64: -1, 2>} : tensor<4x5xf32> -> tensor<4x2xf32>
save("slice", [node("Slice", ["x", "st", "en", "ax", "sp"], ["out"])],
     [vi("x", T.FLOAT, [4, 5])], [vi("out", T.FLOAT, [4, 2])],
     [init("st", i64(-1, 1)), init("en", i64(-100, 2**63 - 1)), init("ax", i64(0, 1)),
      init("sp", i64(-1, 2))])

# Expand broadcasts both ways; Tile is reshape + expand + reshape.
# EXP: graph.expand %arg0 : tensor<3x1xf32> -> tensor<2x3x4xf32>
# EXP: graph.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<1x2x1x3x1x4xf32>
# EXP: graph.expand %{{.*}} : tensor<1x2x1x3x1x4xf32> -> tensor<1x2x2x3x1x4xf32>
# EXP: graph.reshape %{{.*}} : tensor<1x2x2x3x1x4xf32> -> tensor<2x6x4xf32>
save("expand_tile", [node("Expand", ["x", "shape"], ["e"]),
                     node("Tile", ["e", "reps"], ["out"])],
     [vi("x", T.FLOAT, [3, 1])], [vi("out", T.FLOAT, [2, 6, 4])],
     [init("shape", i64(2, 1, 4)), init("reps", i64(1, 2, 1))])

# Negative pads crop after padding.
# PAD: %[[P:.*]] = graph.pad %arg0 {mode = #graph<pad_mode reflect>, pads_high = array<i64: 0, 0>, pads_low = array<i64: 0, 2>, value = 0.000000e+00 : f64} : tensor<3x4xf32> -> tensor<3x6xf32>
# PAD: graph.slice %[[P]] {limits = array<i64: 2, 6>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<3x6xf32> -> tensor<2x6xf32>
save("pad", [node("Pad", ["x", "pads"], ["out"], mode="reflect")],
     [vi("x", T.FLOAT, [3, 4])], [vi("out", T.FLOAT, [2, 6])],
     [init("pads", i64(0, 2, -1, 0))])

# ConstantOfShape, Range, Constant and ScatterND on constants evaluate at
# import time.
# GEN-DAG: graph.constant dense<[0, 2, 4]> : tensor<3xi64>
# GEN-DAG: graph.constant dense<{{\[}}[1.000000e+00, 1.000000e+00], [7.000000e+00, 7.000000e+00]]> : tensor<2x2xf32>
save("generators", [
    node("Range", ["r0", "r1", "r2"], ["range"]),
    node("Constant", [], ["shape"], value=helper.make_tensor("s", T.INT64, [2], [2, 2])),
    node("ConstantOfShape", ["shape"], ["ones"],
         value=helper.make_tensor("v", T.FLOAT, [1], [1.0])),
    node("ScatterND", ["ones", "idx", "upd"], ["mask"]),
], [], [vi("range", T.INT64, [3]), vi("mask", T.FLOAT, [2, 2])],
    [init("r0", np.int64(0)), init("r1", np.int64(5)), init("r2", np.int64(2)),
     init("idx", i64(1).reshape(1, 1)), init("upd", np.full((1, 2), 7, np.float32))])

# Einsum becomes transposes, reshapes and one batched matmul (MaxViT's form).
# EIN: %[[T:.*]] = graph.transpose %arg1 {perm = array<i64: 0, 1, 2, 4, 3>}
# EIN: graph.matmul %arg0, %[[T]] : (tensor<2x3x1x4x5xf32>, tensor<2x3x1x5x4xf32>) -> tensor<2x3x1x4x4xf32>
save("einsum", [node("Einsum", ["q", "k"], ["out"],
                     equation="B G H I D, B G H J D -> B G H I J")],
     [vi("q", T.FLOAT, [2, 3, 1, 4, 5]), vi("k", T.FLOAT, [2, 3, 1, 4, 5])],
     [vi("out", T.FLOAT, [2, 3, 1, 4, 4])])

# RES: graph.resize %arg0 {coordinate_transform = #graph<coordinate_transform asymmetric>, cubic_coeff_a = -7.500000e-01 : f64, exclude_outside = false, mode = #graph<resize_mode nearest>, nearest_mode = #graph<nearest_mode floor>, scales = array<f64: 1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00>} : tensor<1x1x2x3xf32> -> tensor<1x1x4x6xf32>
save("resize", [node("Resize", ["x", "", "scales"], ["out"], mode="nearest",
                     coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
     [vi("x", T.FLOAT, [1, 1, 2, 3])], [vi("out", T.FLOAT, [1, 1, 4, 6])],
     [init("scales", np.array([1, 1, 2, 2], np.float32))])

# Constant indices are range-checked and made non-negative at import.
# GATHER: %[[I:.*]] = graph.constant dense<[3, 0]> : tensor<2xi64>
# GATHER: graph.gather %{{.*}}, %[[I]] {axis = 0 : i64} : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
# GATHER: graph.gather %{{.*}}, %arg0 {axis = 0 : i64} : (tensor<4x8xf32>, tensor<5xi64>) -> tensor<5x8xf32>
save("gather", [node("Gather", ["table", "ci"], ["a"]),
                node("Gather", ["table", "ids"], ["b"])],
     [vi("ids", T.INT64, [5])], [vi("a", T.FLOAT, [2, 8]), vi("b", T.FLOAT, [5, 8])],
     [init("table", np.ones((4, 8), np.float32)), init("ci", i64(-1, 0))])

# Trilu keeps a triangle through a compile-time mask (upper, k = 1).
# TRILU: %[[M:.*]] = graph.constant dense<{{\[}}[false, true, true], [false, false, true]]> : tensor<2x3xi1>
# TRILU: graph.select %[[M]], %arg0, %{{.*}} : (tensor<2x3xi1>, tensor<2x2x3xf32>, tensor<f32>) -> tensor<2x2x3xf32>
save("trilu", [node("Trilu", ["x", "k"], ["out"], upper=1)],
     [vi("x", T.FLOAT, [2, 2, 3])], [vi("out", T.FLOAT, [2, 2, 3])],
     [init("k", np.int64(1))])

# GATHERELEM: graph.gather_elements %arg0, %arg1 {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
save("gather_elements", [node("GatherElements", ["x", "i"], ["out"], axis=-1)],
     [vi("x", T.FLOAT, [3, 4]), vi("i", T.INT64, [3, 2])], [vi("out", T.FLOAT, [3, 2])])

# An exclusive, reverse running sum: element j sums the elements after it.
# CUMSUM: %[[M:.*]] = graph.constant dense<{{\[}}[0.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 0.000000e+00]]> : tensor<3x3xf32>
# CUMSUM: graph.matmul %arg0, %[[M]] : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
save("cumsum", [node("CumSum", ["x", "axis"], ["out"], exclusive=1, reverse=1)],
     [vi("x", T.FLOAT, [2, 3])], [vi("out", T.FLOAT, [2, 3])], [init("axis", np.int64(1))])
