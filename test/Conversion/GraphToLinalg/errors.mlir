// RUN: tessera-opt %s --split-input-file --convert-graph-to-linalg --verify-diagnostics

func.func @cubic(%x: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error @+1 {{failed to legalize operation 'graph.resize'}}
  %0 = graph.resize %x {scales = array<f64: 1.0, 1.0, 2.0, 2.0>, mode = #graph<resize_mode cubic>, coordinate_transform = #graph<coordinate_transform half_pixel>, nearest_mode = #graph<nearest_mode floor>, cubic_coeff_a = -0.75 : f64, exclude_outside = false} : tensor<1x1x2x2xf32> -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}
