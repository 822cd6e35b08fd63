// RUN: tessera-opt %s --split-input-file --graph-build-loss | FileCheck %s --enable-var-scope
// RUN: tessera-opt %s --split-input-file --graph-build-loss="loss=mse" | FileCheck %s --check-prefix=MSE --enable-var-scope
//
// graph-build-loss adds a `labels` argument and returns the loss first,
// marked graph.loss; cross-entropy compares labels with a class-index
// constant (no gather), mse reads targets shaped like the prediction.

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:.*]]: tensor<4x3xf32> {graph.name = "x"}, %[[L:.*]]: tensor<4xi64> {graph.name = "labels"}
// CHECK-SAME: -> (tensor<f32> {graph.loss, graph.name = "loss"}, tensor<4x3xf32> {graph.name = "logits"})
// CHECK: %[[LOGP:.*]] = graph.log_softmax %[[X]] {axis = 1 : i64}
// CHECK: graph.constant dense<{{\[\[}}0, 1, 2]]> : tensor<1x3xi64>
// CHECK: %[[LOSS:.*]] = graph.div
// CHECK: return %[[LOSS]], %[[X]]
// MSE-LABEL: func.func @main
// MSE-SAME: %{{.*}}: tensor<4x3xf32> {graph.name = "labels"}
// MSE: graph.sub
// MSE: graph.reduce_sum
func.func @main(%x: tensor<4x3xf32> {graph.name = "x"}) -> (tensor<4x3xf32> {graph.name = "logits"}) {
  return %x : tensor<4x3xf32>
}
