// RUN: tessera-opt %s --split-input-file --graph-recompute="mode=checkpoint-every-layer" | FileCheck %s --check-prefix=LAYER
// RUN: tessera-opt %s --split-input-file --graph-recompute="mode=auto" | FileCheck %s --check-prefix=AUTO
// RUN: tessera-opt %s --split-input-file --graph-recompute | FileCheck %s --check-prefix=NONE
//
// graph-recompute keeps the checkpoints and computes every other forward
// value a backward op reads again, before its first backward reader.

// Two layers: each layer's result is kept, the tanh inside each is
// recomputed from the layer's input; the backward reads the clones.
// LAYER-LABEL: func.func @main
// LAYER: %[[M0:.*]] = graph.matmul %arg0, %arg1
// LAYER: %[[T0:.*]] = graph.tanh %[[M0]]
// LAYER: %[[M1:.*]] = graph.matmul %[[T0]], %arg1
// LAYER: %[[T1:.*]] = graph.tanh %[[M1]]
// LAYER: graph.mul %arg2, %[[T0]] {graph.backward}
// LAYER: %[[RM:.*]] = graph.matmul %[[T0]], %arg1 {graph.recomputed}
// LAYER: %[[R1:.*]] = graph.tanh %[[RM]] {graph.recomputed}
// LAYER: graph.mul %[[R1]], %[[R1]] {graph.backward}
//
// Without layers or checkpoints, none changes nothing.
// NONE-NOT: graph.recomputed
//
// auto measures each candidate's peak of live bytes: here recomputing t1
// (and m1 for it) would not lower the peak, so it keeps everything.
// AUTO-NOT: graph.recomputed
module {
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %g: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/layers.0/MatMul")
  %t0 = graph.tanh %m0 : tensor<4x8xf32> loc("/layers.0/Tanh")
  %m1 = graph.matmul %t0, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/layers.1/MatMul")
  %t1 = graph.tanh %m1 : tensor<4x8xf32> loc("/layers.1/Tanh")
  %b0 = graph.mul %g, %t0 {graph.backward} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b1 = graph.mul %t1, %t1 {graph.backward} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %b0, %b1 : tensor<4x8xf32>, tensor<4x8xf32>
}
}
