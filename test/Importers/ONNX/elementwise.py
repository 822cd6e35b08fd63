# RUN: %python %s %t
# RUN: tessera-compile %t/binary.onnx --compile-to=input --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s --check-prefix=BIN
# RUN: tessera-compile %t/unary.onnx --compile-to=input | FileCheck %s --check-prefix=UN
# RUN: tessera-compile %t/clip.onnx --compile-to=input | FileCheck %s --check-prefix=CLIP
# RUN: tessera-compile %t/clip6.onnx --compile-to=input | FileCheck %s --check-prefix=CLIP6
# RUN: tessera-compile %t/mod.onnx --compile-to=input | FileCheck %s --check-prefix=MOD
# RUN: tessera-compile %t/where.onnx --compile-to=graph | FileCheck %s --check-prefix=WHERE
# RUN: tessera-compile %t/legacy_broadcast.onnx --compile-to=input | FileCheck %s --check-prefix=LEGACY
from onnx_gen import T, init, node, save, vi
import numpy as np

# BIN: func.func @main(%[[X:arg0]]: tensor<2x3xf32> {graph.name = "x"}{{.*}}, %[[Y:arg1]]: tensor<3xf32> {graph.name = "y"}{{.*}}) -> (tensor<2x3xf32> {graph.name = "out"})
# BIN: %[[A:.*]] = graph.add %[[X]], %[[Y]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("add")
# BIN: %[[S:.*]] = graph.sub %[[A]], %[[X]]
# BIN: %[[M:.*]] = graph.mul %[[S]], %[[Y]]
# BIN: %[[D:.*]] = graph.div %[[M]], %[[Y]]
# BIN: %[[P:.*]] = graph.pow %[[D]], %[[X]]
# BIN: %[[MX:.*]] = graph.max %[[P]], %[[X]]
# BIN: %[[MX2:.*]] = graph.max %[[MX]], %[[Y]]
# BIN: %[[SUM:.*]] = graph.add %[[MX2]], %[[X]]
# BIN: return %[[SUM]]
save("binary", [
    node("Add", ["x", "y"], ["a"], name="add"),
    node("Sub", ["a", "x"], ["s"]),
    node("Mul", ["s", "y"], ["m"]),
    node("Div", ["m", "y"], ["d"]),
    node("Pow", ["d", "x"], ["p"]),
    node("Max", ["p", "x", "y"], ["mx"]),
    node("Sum", ["mx", "x"], ["out"]),
], [vi("x", T.FLOAT, [2, 3]), vi("y", T.FLOAT, [3])], [vi("out", T.FLOAT, [2, 3])])

# UN: graph.relu
# UN: graph.sigmoid
# UN: graph.tanh
# UN: graph.exp
# UN: graph.erf
# UN: graph.hard_swish
# UN: graph.hard_sigmoid %{{.*}} {alpha = 2.000000e-01 : f64, beta = 5.000000e-01 : f64}
# UN: graph.leaky_relu %{{.*}} {alpha = 1.000000e-02 : f64}
# UN: graph.elu %{{.*}} {alpha = 1.000000e+00 : f64}
# UN: graph.sqrt
# UN: graph.abs
# UN: graph.neg
names = ["Relu", "Sigmoid", "Tanh", "Exp", "Erf", "HardSwish", "HardSigmoid",
         "LeakyRelu", "Elu", "Sqrt", "Abs", "Neg"]
nodes, prev = [], "x"
for i, op in enumerate(names):
    nodes.append(node(op, [prev], [f"u{i}"]))
    prev = f"u{i}"
nodes.append(node("Identity", [prev], ["out"]))
save("unary", nodes, [vi("x", T.FLOAT, [4])], [vi("out", T.FLOAT, [4])])

# Clip's bounds became inputs in opset 11; constant bounds become attributes.
# CLIP: graph.clamp %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<4xf32>
save("clip", [node("Clip", ["x", "lo", "hi"], ["out"])],
     [vi("x", T.FLOAT, [4])], [vi("out", T.FLOAT, [4])],
     [init("lo", np.float32(0)), init("hi", np.float32(6))], opset=13)
# CLIP6: graph.clamp %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<4xf32>
save("clip6", [node("Clip", ["x"], ["out"], min=0.0, max=6.0)],
     [vi("x", T.FLOAT, [4])], [vi("out", T.FLOAT, [4])], opset=7)

# Integer Mod with fmod=0 follows the divisor's sign (Python semantics).
# MOD: graph.rem
# MOD: graph.select
save("mod", [node("Mod", ["a", "b"], ["out"])],
     [vi("a", T.INT64, [4]), vi("b", T.INT64, [4])], [vi("out", T.INT64, [4])])

# WHERE: %[[C:.*]] = graph.greater %arg0, %{{.*}} : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xi1>
# WHERE: graph.select %[[C]], %arg0, %{{.*}} : (tensor<2x2xi1>, tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
save("where", [node("Greater", ["x", "zero"], ["c"]),
               node("Where", ["c", "x", "zero"], ["out"])],
     [vi("x", T.FLOAT, [2, 2])], [vi("out", T.FLOAT, [2, 2])],
     [init("zero", np.float32(0))])

# Opset 6 broadcasting: `broadcast=1, axis=1` aligns the 3-vector with dim 1
# of a 2x3x4 tensor, i.e. NumPy broadcasting of a 3x1 operand.
# LEGACY: %[[R:.*]] = graph.reshape %arg1 : tensor<3xf32> -> tensor<3x1xf32>
# LEGACY: graph.add %arg0, %[[R]] : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
save("legacy_broadcast", [node("Add", ["x", "b"], ["out"], broadcast=1, axis=1)],
     [vi("x", T.FLOAT, [2, 3, 4]), vi("b", T.FLOAT, [3])], [vi("out", T.FLOAT, [2, 3, 4])],
     opset=6)
