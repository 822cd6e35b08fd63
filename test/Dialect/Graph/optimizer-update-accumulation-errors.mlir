// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd accumulate=0" --verify-diagnostics
// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd accumulate=2 accumulation-reduction=max" --verify-diagnostics
//
// Gradient accumulation needs at least one micro-batch and a mean or sum.

// expected-error @+1 {{gradient accumulation must be at least 1 with reduction mean or sum}}
func.func @main(%x: tensor<2xf32>) -> (tensor<f32> {graph.loss}) {
  %0 = graph.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
