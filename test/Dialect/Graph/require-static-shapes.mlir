// RUN: tessera-opt %s --split-input-file --graph-require-static-shapes --verify-diagnostics

// expected-error @+1 {{input x has type 'tensor<?x3xf32>' with unknown dims; give its shape with --input-shape x=DxDx...}}
func.func @dynamic_input(%x: tensor<?x3xf32> {graph.name = "x"}) -> tensor<?x3xf32> {
  // expected-error @+1 {{result type 'tensor<?x3xf32>' is not static}}
  %0 = graph.relu %x : tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// Static functions pass untouched.
func.func @static(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.relu %x : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
