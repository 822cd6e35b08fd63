// RUN: tessera-opt %s --graph-externalize-state | FileCheck %s
//
// A store that only a committed weight update makes (graph.per_update, from
// graph-optimizer-update) marks its result so; the counter's does not.

// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {graph.name = "micro.update", graph.state_update = @micro},
// CHECK-SAME: tensor<2xf32> {graph.name = "w.update", graph.per_update, graph.state_update = @w})
ml_program.global private mutable @micro(dense<0.0> : tensor<f32>) : tensor<f32>
ml_program.global private mutable @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
func.func @main(%x: tensor<2xf32>) {
  %m = ml_program.global_load @micro : tensor<f32>
  %w = ml_program.global_load @w : tensor<2xf32>
  %n = graph.add %w, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  ml_program.global_store @micro = %m : tensor<f32>
  ml_program.global_store @w = %n : tensor<2xf32> {graph.per_update}
  return
}
