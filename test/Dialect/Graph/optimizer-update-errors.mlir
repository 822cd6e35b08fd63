// RUN: tessera-opt %s --split-input-file --graph-optimizer-update="optimizer=adam:lr=0.1,rho=2" --verify-diagnostics
//
// An unknown hyperparameter names the ones the optimizer has.

// expected-error @+1 {{optimizer adam has no hyperparameter 'rho'}}
func.func @main(%x: tensor<2xf32>) -> (tensor<f32> {graph.loss}) {
  %0 = graph.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
