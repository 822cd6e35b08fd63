// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd:lr=0.1,accum-type=double" --verify-diagnostics
//
// PopTorch's accumulator types are float32 or float16.

// expected-error @+1 {{accum-type=double of sgd: use float32 or float16}}
func.func @main(%x: tensor<2xf32>) -> (tensor<f32> {graph.loss}, tensor<2xf32> {graph.gradient_of = @w}) {
  %0 = graph.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %0, %x : tensor<f32>, tensor<2xf32>
}
