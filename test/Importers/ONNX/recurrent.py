# RNN, GRU and LSTM unroll over the (static) sequence into graph ops.
# RUN: %python %s %t
# RUN: tessera-compile %t/lstm.onnx --compile-to=input | FileCheck %s --check-prefix=LSTM
# RUN: tessera-compile %t/gru_lens.onnx --compile-to=input | FileCheck %s --check-prefix=LENS
# RUN: tessera-compile %t/rnn_batch_first.onnx --compile-to=input | FileCheck %s --check-prefix=LAYOUT
# RUN: not tessera-compile %t/bad_activation.onnx 2>&1 | FileCheck %s --check-prefix=ACT
# RUN: not tessera-compile %t/bad_weights.onnx 2>&1 | FileCheck %s --check-prefix=SHAPE
import numpy as np
from onnx_gen import T, init, node, save, vi

rng = np.random.default_rng(0)
f32 = lambda *s: rng.standard_normal(s).astype(np.float32)

# The input projection of every step is one matmul; the first step has no
# recurrent term (the initial state is zeros), the second multiplies H by R^T.
# LSTM: %[[WT:.*]] = graph.transpose %{{.*}} {perm = array<i64: 1, 0>} : tensor<12x2xf32> -> tensor<2x12xf32>
# LSTM: %[[XW:.*]] = graph.matmul %arg0, %[[WT]] : (tensor<2x1x2xf32>, tensor<2x12xf32>) -> tensor<2x1x12xf32>
# LSTM: %[[RT:.*]] = graph.transpose %{{.*}} {perm = array<i64: 1, 0>} : tensor<12x3xf32> -> tensor<3x12xf32>
# LSTM-NOT: graph.matmul
# LSTM: graph.slice %[[XW]] {{.*}} : tensor<2x1x12xf32> -> tensor<1x1x12xf32>
# LSTM-NOT: graph.matmul
# LSTM: graph.matmul %{{.*}}, %[[RT]] : (tensor<1x3xf32>, tensor<3x12xf32>) -> tensor<1x12xf32>
# LSTM-NOT: graph.matmul
# LSTM: graph.concat {{.*}} {axis = 0 : i64} : (tensor<1x1x1x3xf32>, tensor<1x1x1x3xf32>) -> tensor<2x1x1x3xf32>
save("lstm", [node("LSTM", ["x", "w", "r"], ["y", "y_h", "y_c"], hidden_size=3)],
     [vi("x", T.FLOAT, [2, 1, 2])],
     [vi("y", T.FLOAT, [2, 1, 1, 3]), vi("y_h", T.FLOAT, [1, 1, 3]),
      vi("y_c", T.FLOAT, [1, 1, 3])],
     [init("w", f32(1, 12, 2)), init("r", f32(1, 12, 3))])

# With sequence_lens, rows whose sequence ended keep their state and output
# zeros: a select on `t < sequence_lens` per step.
# LENS: %[[LENS:.*]] = graph.reshape %arg1 : tensor<2xi32> -> tensor<2x1xi32>
# LENS: %[[T:.*]] = graph.constant dense<1> : tensor<i32>
# LENS: %[[LIVE:.*]] = graph.less %[[T]], %[[LENS]] : (tensor<i32>, tensor<2x1xi32>) -> tensor<2x1xi1>
# LENS: graph.select %[[LIVE]], %{{.*}}, %{{.*}} : (tensor<2x1xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
save("gru_lens", [node("GRU", ["x", "w", "r", "", "lens"], ["", "y_h"], hidden_size=4,
                       direction="reverse", linear_before_reset=1)],
     [vi("x", T.FLOAT, [2, 2, 3]), vi("lens", T.INT32, [2])],
     [vi("y_h", T.FLOAT, [1, 2, 4])],
     [init("w", f32(1, 12, 3)), init("r", f32(1, 12, 4))])

# layout=1: X and the outputs are batch-first, transposed around the
# sequence-first computation; both directions' states are stacked.
# LAYOUT: graph.transpose %arg0 {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
# LAYOUT: graph.leaky_relu {{.*}} {alpha = 0.2{{[0-9]*}} : f64}
# LAYOUT: graph.concat {{.*}} {axis = 1 : i64} : (tensor<3x1x2x5xf32>, tensor<3x1x2x5xf32>) -> tensor<3x2x2x5xf32>
# LAYOUT: graph.transpose %{{.*}} {perm = array<i64: 2, 0, 1, 3>} : tensor<3x2x2x5xf32> -> tensor<2x3x2x5xf32>
# LAYOUT: graph.transpose %{{.*}} {perm = array<i64: 1, 0, 2>} : tensor<2x2x5xf32> -> tensor<2x2x5xf32>
save("rnn_batch_first", [node("RNN", ["x", "w", "r"], ["y", "y_h"], hidden_size=5,
                              direction="bidirectional", layout=1,
                              activations=["LeakyRelu", "Tanh"], activation_alpha=[0.2])],
     [vi("x", T.FLOAT, [2, 3, 4])],
     [vi("y", T.FLOAT, [2, 3, 2, 5]), vi("y_h", T.FLOAT, [2, 2, 5])],
     [init("w", f32(2, 5, 4)), init("r", f32(2, 5, 5))])

# ACT: error: RNN: activation function 'Swish' is not supported yet
save("bad_activation", [node("RNN", ["x", "w", "r"], ["y"], hidden_size=5,
                             activations=["Swish"])],
     [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 1, 3, 5])],
     [init("w", f32(1, 5, 4)), init("r", f32(1, 5, 5))], check=False)

# SHAPE: error: GRU: R has shape 1x12x4; expected 1x15x5 (X 2x3x4, 1 direction(s), hidden_size 5)
save("bad_weights", [node("GRU", ["x", "w", "r"], ["y"], hidden_size=5)],
     [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 1, 3, 5])],
     [init("w", f32(1, 15, 4)), init("r", f32(1, 12, 4))], check=False)
