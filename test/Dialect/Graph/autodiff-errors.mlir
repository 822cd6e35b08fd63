// RUN: tessera-opt %s --split-input-file --graph-autodiff --verify-diagnostics
//
// What graph-autodiff refuses: no loss, a loss that is not a scalar, an op
// without a gradient rule between a weight and the loss.

// expected-error @+1 {{@main has no result marked graph.loss}}
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{the loss must be a float scalar}}
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {graph.loss}) {
  return %x : tensor<2xf32>
}

// -----

ml_program.global private @t(dense<1.0> : tensor<4x2xf32>) : tensor<4x2xf32>
func.func @main(%x: tensor<4x2xf32>) -> (tensor<f32> {graph.loss}) {
  %t = ml_program.global_load_const @t : tensor<4x2xf32>
  // expected-error @+1 {{no gradient rule for 'graph.rem'}}
  %0 = graph.rem %t, %x : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %1 = graph.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x2xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

ml_program.global private @t(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
// expected-error @+1 {{the loss does not depend on any trainable weight}}
func.func @main(%x: tensor<2xf32>) -> (tensor<f32> {graph.loss}) {
  %0 = graph.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
