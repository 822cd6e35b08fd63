// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd:lr=0.5,max-grad-norm=1" | FileCheck %s
//
// An fp16 weight with clipping by the global norm: the norm is summed in
// fp32 (an fp16 sum of squares overflows past 256), the update computed in
// fp32 and rounded to fp16 once. (This used to crash: the fp16 norm met the
// fp32 max-grad-norm hyperparameter.)

// CHECK-LABEL: func.func @main
// CHECK: %[[G32:.*]] = graph.cast %arg0 : tensor<2xf16> to tensor<2xf32>
// CHECK: %[[SQ:.*]] = graph.mul %[[G32]], %[[G32]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK: graph.reduce_sum %[[SQ]]
// CHECK: %[[CLIPPED:.*]] = graph.mul %[[G32]], %{{.*}} : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
// CHECK: %[[NEW:.*]] = graph.sub %{{.*}}, %{{.*}} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK: %[[ROUNDED:.*]] = graph.cast %[[NEW]] : tensor<2xf32> to tensor<2xf16>
// CHECK: ml_program.global_store @w = %[[ROUNDED]] : tensor<2xf16>
ml_program.global private @w(dense<1.0> : tensor<2xf16>) : tensor<2xf16>
func.func @main(%x: tensor<2xf16>) -> (tensor<f16> {graph.loss}, tensor<2xf16> {graph.gradient_of = @w}) {
  %w = ml_program.global_load_const @w : tensor<2xf16>
  %0 = graph.mul %x, %w : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
  %1 = graph.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<2xf16>) -> tensor<f16>
  return %1, %x : tensor<f16>, tensor<2xf16>
}
