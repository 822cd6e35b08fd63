// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd:lr=0.5,momentum=0.9" | FileCheck %s --enable-var-scope
//
// graph-optimizer-update turns the weight into a mutable global stored after
// its update, adds the momentum buffer and hyperparameters as globals (the
// learning rate a global the runtime may change), and drops the gradient.

// CHECK-DAG: ml_program.global private mutable @w(
// CHECK-DAG: ml_program.global private mutable @optimizer.lr(dense<5.000000e-01> : tensor<f32>) : tensor<f32> {graph.hyperparameter}
// CHECK-DAG: ml_program.global private mutable @"w/momentum_buffer"(dense<0.000000e+00> : tensor<2xf32>) : tensor<2xf32> {graph.optimizer_state}
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {graph.loss})
// CHECK-SAME: attributes {graph.optimizer = "sgd"}
// CHECK: ml_program.global_store @"w/momentum_buffer"
// CHECK: ml_program.global_store @w
// CHECK: return %{{.*}} : tensor<f32>
ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
func.func @main(%x: tensor<2xf32>) -> (tensor<f32> {graph.loss}, tensor<2xf32> {graph.gradient_of = @w}) {
  %w = ml_program.global_load_const @w : tensor<2xf32>
  %0 = graph.mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = graph.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %1, %x : tensor<f32>, tensor<2xf32>
}
