// RUN: tessera-opt %s --graph-externalize-state | FileCheck %s --enable-var-scope
//
// Mutable globals become arguments (graph.state) and their stored values
// results (graph.state_update) after the model's own; immutable ones stay.

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<2xf32>, %[[W:.*]]: tensor<2xf32> {graph.name = "w", graph.state = @w})
// CHECK-SAME: -> (tensor<2xf32>, tensor<2xf32> {graph.name = "w.update", graph.state_update = @w})
// CHECK: %[[C:.*]] = ml_program.global_load_const @c
// CHECK: %[[Y:.*]] = graph.mul %[[X]], %[[W]]
// CHECK: %[[N:.*]] = graph.add %[[W]], %[[C]]
// CHECK-NOT: global_store
// CHECK: return %[[Y]], %[[N]]
ml_program.global private mutable @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
ml_program.global private @c(dense<2.0> : tensor<2xf32>) : tensor<2xf32>
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %w = ml_program.global_load @w : tensor<2xf32>
  %c = ml_program.global_load_const @c : tensor<2xf32>
  %y = graph.mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %n = graph.add %w, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  ml_program.global_store @w = %n : tensor<2xf32>
  return %y : tensor<2xf32>
}
